//! `loom changelog`: read each MDT's record of namespace changes, and
//! register, advance and remove its consumers, as Lustre's `lfs
//! changelog`, `lctl changelog_register` and `lfs changelog_clear`.

use crate::registry;
use crate::tools::{connect, errno, Session};
use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use loom_proto::changelog::{ChangeKind, ChangeRec};
use loom_proto::Errno;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// Options of `loom changelog`.
#[derive(Args)]
#[command(
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    after_help = "Each MDT records the namespace changes it commits (creates, mkdirs, links, \
unlinks, renames, attribute and xattr changes, layout changes, migrations, closes after writes), \
numbered from 1 in commit order, while at least one consumer is registered: register one first \
(`loom changelog register MOUNT`, root only). A record is written in the same commit as its \
change: a change that was acknowledged is in the log, one lost in a crash is not. A consumer \
reads, handles what it read, then acknowledges it with `loom changelog clear`; records every \
consumer acknowledged are purged. Record numbers are per MDT.\n\n\
Output, one line per record: MDT, record number, type, time (seconds.nanoseconds since 1970), \
flags, t=FID changed, p=directory of the name, u=uid:gid, j=job, c=client, the name; a rename \
adds s=old directory and old name, and r=FID it replaced. With --json, one JSON object per line \
with the same fields. Reading needs root."
)]
pub struct ChangelogArgs {
    #[command(subcommand)]
    pub cmd: Option<ChangelogCmd>,
    /// A path on the loomfs mount (its mount point or anything under it).
    #[arg(required = true)]
    pub path: Option<PathBuf>,
    /// Only this MDT's records (its index: 0, 1, ...).
    #[arg(long)]
    pub mdt: Option<u32>,
    /// Start at this record number (per MDT; the oldest kept when it was
    /// purged).
    #[arg(long, value_name = "REC", default_value_t = 1)]
    pub since: u64,
    /// Keep reading new records as they are committed, until interrupted.
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// Only these types, comma separated: CREAT,MKDIR,HLINK,SLINK,MKNOD,
    /// UNLNK,RMDIR,RENME,SATTR,TRUNC,XATTR,LYOUT,MIGRT,CLOSE,MTIME.
    #[arg(long, value_name = "TYPES", value_parser = parse_mask)]
    pub mask: Option<Mask>,
    /// One JSON object per record.
    #[arg(long)]
    pub json: bool,
}

/// What `loom changelog` manages besides reading.
#[derive(Subcommand)]
pub enum ChangelogCmd {
    /// Register a consumer on every MDT (root only); prints its id on
    /// each. The MDTs record changes from then on.
    Register {
        /// A path on the loomfs mount.
        path: PathBuf,
        /// Only on this MDT.
        #[arg(long)]
        mdt: Option<u32>,
    },
    /// Acknowledge the records of consumer ID up to record REC (0: every
    /// record so far) on every MDT, or one with --mdt; records every
    /// consumer acknowledged are purged.
    Clear {
        /// A path on the loomfs mount.
        path: PathBuf,
        /// The consumer: its id as `register` printed it (cl1 or 1).
        #[arg(value_parser = parse_user)]
        id: u32,
        /// The last record read.
        rec: u64,
        /// Only on this MDT.
        #[arg(long)]
        mdt: Option<u32>,
    },
    /// Remove consumer ID from every MDT (or one with --mdt); records
    /// only it kept are purged.
    Deregister {
        /// A path on the loomfs mount.
        path: PathBuf,
        /// The consumer (cl1 or 1).
        #[arg(value_parser = parse_user)]
        id: u32,
        /// Only on this MDT.
        #[arg(long)]
        mdt: Option<u32>,
    },
    /// Each MDT's oldest and next record, and each consumer's lag.
    Users {
        /// A path on the loomfs mount.
        path: PathBuf,
    },
}

/// A set of record types.
#[derive(Clone, Debug)]
pub struct Mask(Vec<ChangeKind>);

fn parse_mask(s: &str) -> Result<Mask, String> {
    let mut v = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let k = ChangeKind::parse(part).ok_or_else(|| {
            let all: Vec<_> = ChangeKind::ALL.iter().map(|k| k.name()).collect();
            format!("{part:?} is not a record type (types: {})", all.join(","))
        })?;
        v.push(k);
    }
    if v.is_empty() {
        return Err("no record type given".into());
    }
    Ok(Mask(v))
}

fn parse_user(s: &str) -> Result<u32, String> {
    let digits = s.strip_prefix("cl").unwrap_or(s);
    match digits.parse::<u32>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{s:?} is not a consumer id (e.g. cl1 or 1)")),
    }
}

pub fn changelog(a: ChangelogArgs) -> anyhow::Result<()> {
    match a.cmd {
        Some(ChangelogCmd::Register { path, mdt }) => register(&path, mdt),
        Some(ChangelogCmd::Clear { path, id, rec, mdt }) => clear(&path, id, rec, mdt),
        Some(ChangelogCmd::Deregister { path, id, mdt }) => deregister(&path, id, mdt),
        Some(ChangelogCmd::Users { path }) => users(&path),
        None => {
            let path = a
                .path
                .clone()
                .context("a path on the loomfs mount is needed")?;
            read(&path, &a)
        }
    }
}

fn session(path: &std::path::Path) -> anyhow::Result<Session> {
    let (entry, _) = registry::find(path)?;
    connect(entry)
}

/// The MDTs to act on: `only`, checked, or all.
fn mdts(s: &Session, only: Option<u32>) -> anyhow::Result<Vec<u32>> {
    let all = s.client.mdts();
    match only {
        Some(m) if !all.contains(&m) => bail!(
            "{} has no MDT {m} (its MDTs: {})",
            s.entry.fsname,
            all.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Some(m) => Ok(vec![m]),
        None => Ok(all),
    }
}

fn failed(e: Errno, what: String) -> anyhow::Error {
    if e == Errno::EPERM {
        anyhow::anyhow!("{what}: only root may read or manage the changelog")
    } else {
        errno(e, &what)
    }
}

fn register(path: &std::path::Path, only: Option<u32>) -> anyhow::Result<()> {
    let s = session(path)?;
    for m in mdts(&s, only)? {
        let id =
            s.rt.block_on(s.client.changelog_register(m))
                .map_err(|e| failed(e, format!("registering on MDT{m:04x}")))?;
        println!("{}-MDT{m:04x}: registered consumer cl{id}", s.entry.fsname);
    }
    Ok(())
}

fn clear(path: &std::path::Path, id: u32, rec: u64, only: Option<u32>) -> anyhow::Result<()> {
    let s = session(path)?;
    let list = mdts(&s, only)?;
    // Every MDT is checked before any is cleared: a bad consumer or
    // record changes nothing anywhere.
    for m in &list {
        let st =
            s.rt.block_on(s.client.changelog_state(*m))
                .map_err(|e| failed(e, format!("MDT{m:04x}")))?;
        if !st.users.iter().any(|u| u.id == id) {
            bail!("MDT{m:04x} has no consumer cl{id}");
        }
        if rec >= st.next {
            bail!(
                "MDT{m:04x} has not written record {rec} yet (its last is {}; record numbers \
                 are per MDT: --mdt chooses one)",
                st.next.saturating_sub(1)
            );
        }
    }
    for m in list {
        s.rt.block_on(s.client.changelog_clear(m, id, rec))
            .map_err(|e| match e {
                Errno::ENOENT => anyhow::anyhow!("MDT{m:04x} has no consumer cl{id}"),
                Errno::EINVAL => {
                    anyhow::anyhow!("MDT{m:04x} has not written record {rec} yet")
                }
                e => failed(e, format!("clearing cl{id} on MDT{m:04x}")),
            })?;
    }
    Ok(())
}

fn deregister(path: &std::path::Path, id: u32, only: Option<u32>) -> anyhow::Result<()> {
    let s = session(path)?;
    for m in mdts(&s, only)? {
        s.rt.block_on(s.client.changelog_deregister(m, id))
            .map_err(|e| match e {
                Errno::ENOENT => anyhow::anyhow!("MDT{m:04x} has no consumer cl{id}"),
                e => failed(e, format!("deregistering cl{id} on MDT{m:04x}")),
            })?;
        println!(
            "{}-MDT{m:04x}: deregistered consumer cl{id}",
            s.entry.fsname
        );
    }
    Ok(())
}

fn users(path: &std::path::Path) -> anyhow::Result<()> {
    let s = session(path)?;
    for m in mdts(&s, None)? {
        let st =
            s.rt.block_on(s.client.changelog_state(m))
                .map_err(|e| failed(e, format!("MDT{m:04x}")))?;
        println!(
            "{}-MDT{m:04x}: records {}..{} kept, next {}",
            s.entry.fsname,
            st.first,
            st.next.saturating_sub(1),
            st.next
        );
        for u in &st.users {
            println!(
                "  cl{}: acknowledged up to {}, lag {} records",
                u.id,
                u.cleared,
                st.lag(u)
            );
        }
    }
    Ok(())
}

/// Records fetched per request.
const PAGE: u32 = 1024;
/// How long each request of --follow waits for a new record.
const FOLLOW_WAIT: Duration = Duration::from_secs(5);

fn read(path: &std::path::Path, a: &ChangelogArgs) -> anyhow::Result<()> {
    let s = session(path)?;
    let list = mdts(&s, a.mdt)?;
    let since = a.since.max(1);
    if !a.follow {
        for m in list {
            let mut next = since;
            loop {
                let (recs, state) =
                    s.rt.block_on(s.client.changelog_read(m, next, PAGE, Duration::ZERO))
                        .map_err(|e| failed(e, format!("reading MDT{m:04x}'s changelog")))?;
                if !state.recording() {
                    eprintln!(
                        "loom: MDT{m:04x} records no changes: no consumer is registered \
                         (loom changelog register MOUNT)"
                    );
                }
                let n = recs.len();
                next = recs.last().map_or(next, |r| r.index + 1);
                if !emit(a, m, recs) {
                    return Ok(());
                }
                if n < PAGE as usize {
                    break;
                }
            }
        }
        return Ok(());
    }
    // Following: one reader per MDT, each waiting on its MDT for the
    // next records; they are printed as they come, whichever MDT.
    let (tx, mut rx) = tokio::sync::mpsc::channel(16);
    for m in list {
        let (client, tx) = (s.client.clone(), tx.clone());
        s.rt.spawn(async move {
            let mut next = since;
            loop {
                match client.changelog_read(m, next, PAGE, FOLLOW_WAIT).await {
                    Ok((recs, _)) if recs.is_empty() => {}
                    Ok((recs, _)) => {
                        next = recs.last().map_or(next, |r| r.index + 1);
                        if tx.send(Ok((m, recs))).await.is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        let _ = tx.send(Err((m, e))).await;
                        return;
                    }
                }
            }
        });
    }
    drop(tx);
    while let Some(r) = s.rt.block_on(rx.recv()) {
        let (m, recs) = r.map_err(|(m, e)| failed(e, format!("reading MDT{m:04x}'s changelog")))?;
        if !emit(a, m, recs) {
            return Ok(());
        }
    }
    Ok(())
}

/// Print MDT `m`'s records `recs` that `a.mask` lets through; false once
/// the reader went away (a pipe to `head`).
fn emit(a: &ChangelogArgs, m: u32, recs: Vec<ChangeRec>) -> bool {
    let out = std::io::stdout();
    let mut lock = out.lock();
    for r in recs {
        if a.mask.as_ref().is_some_and(|mk| !mk.0.contains(&r.kind)) {
            continue;
        }
        let line = if a.json { json(m, &r) } else { text(m, &r) };
        if writeln!(lock, "{line}").is_err() {
            return false;
        }
    }
    lock.flush().is_ok()
}

fn name_str(n: &loom_proto::Name) -> String {
    String::from_utf8_lossy(n.as_bytes()).into_owned()
}

fn text(mdt: u32, r: &ChangeRec) -> String {
    let mut s = format!(
        "MDT{mdt:04x} {} {} {}.{:09} {:#x} t={} p={} u={}:{} j={} c={:#x}",
        r.index,
        r.kind,
        r.time.sec,
        r.time.nsec,
        r.flags,
        r.fid,
        r.parent,
        r.uid,
        r.gid,
        if r.jobid.is_empty() { "-" } else { &r.jobid },
        r.client
    );
    if let Some(n) = &r.name {
        s.push(' ');
        s.push_str(&name_str(n));
    }
    if let Some((sp, sn)) = &r.source {
        s.push_str(&format!(" s={sp} {}", name_str(sn)));
    }
    if let Some(f) = r.replaced {
        s.push_str(&format!(" r={f}"));
    }
    s
}

fn json(mdt: u32, r: &ChangeRec) -> String {
    let v = serde_json::json!({
        "mdt": mdt,
        "index": r.index,
        "type": r.kind.name(),
        "time": format!("{}.{:09}", r.time.sec, r.time.nsec),
        "flags": r.flags,
        "fid": r.fid.to_string(),
        "parent": r.parent.to_string(),
        "name": r.name.as_ref().map(name_str),
        "source_parent": r.source.as_ref().map(|(p, _)| p.to_string()),
        "source_name": r.source.as_ref().map(|(_, n)| name_str(n)),
        "replaced": r.replaced.map(|f| f.to_string()),
        "uid": r.uid,
        "gid": r.gid,
        "jobid": r.jobid,
        "client": format!("{:#x}", r.client),
    });
    v.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_and_consumer_ids_parse_or_say_why_not() {
        let m = parse_mask("creat, UNLNK").expect("mask");
        assert_eq!(m.0, vec![ChangeKind::Create, ChangeKind::Unlink]);
        let e = parse_mask("CREATE").expect_err("not a type");
        assert!(e.contains("CREAT,MKDIR"), "{e}");
        assert!(parse_mask(",").is_err());
        assert_eq!(parse_user("cl3"), Ok(3));
        assert_eq!(parse_user("7"), Ok(7));
        assert!(parse_user("cl0").is_err());
        assert!(parse_user("x1").is_err());
    }
}
