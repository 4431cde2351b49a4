//! `loom replicate`: a tree of one loomfs kept on another by periodic
//! snapshots and incremental sends (the "slightly stale replica" of
//! disaster recovery). Each round:
//!
//! 1. takes a snapshot `repl-TIME` of the source when the last is
//!    `--every` old;
//! 2. sends the newest such snapshot at least `--min-age` old (changes
//!    younger than that wait for a later round), incrementally from the
//!    one the replica received last, straight into `loom receive`'s
//!    code on the destination (which snapshots it there);
//! 3. with `--verify`, compares every file's checksum in the sent
//!    snapshot and in the replica's tree;
//! 4. destroys source snapshots older than the one sent, and keeps the
//!    replica's last `--keep`;
//! 5. records what it did beside the replica, for `loom replicate
//!    status`.
//!
//! A round cut short (a server, the network or this process gone) is
//! resumed by the next: the receive resumes where it stopped.

use crate::registry;
use crate::tools::{caller, connect, human, Session};
use anyhow::{anyhow, bail, Context};
use clap::{Args, Subcommand};
use loom_client::send::format::SnapRef;
use loom_client::send::receiver::{read_note, receive, receive_state, write_note, ReceiveOptions};
use loom_client::send::verify::{checksums, Sums};
use loom_client::{Caller, Client};
use loom_proto::snapshot::{SnapState, SnapshotInfo};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Prefix of the snapshots a replication takes.
const PREFIX: &str = "repl-";

/// `loom replicate ...`.
#[derive(Subcommand, Debug)]
pub enum ReplicateCmd {
    /// Keep the tree at SOURCE replicated in DEST (another loomfs, or
    /// another tree of the same): rounds of snapshot, incremental send
    /// and receive, on a schedule, until stopped (root).
    Run(RunArgs),
    /// How far the replica in DEST is behind: the snapshot it holds and
    /// its age, the bytes of the last round, the last verified point.
    Status(StatusArgs),
}

/// `loom replicate run SOURCE DEST`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// The tree to replicate: a directory on a loomfs mount.
    pub source: PathBuf,
    /// The replica: a directory on a loomfs mount, empty at the first
    /// round.
    pub dest: PathBuf,
    /// Time between snapshots of the source (and rounds): 30s, 15m, 1h, 1d.
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    pub every: Duration,
    /// Changes younger than this wait: only snapshots at least this old
    /// are sent (0 sends the newest).
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    pub min_age: Duration,
    /// Snapshots the replica keeps.
    #[arg(long, default_value_t = 3)]
    pub keep: usize,
    /// After each round, compare every file's checksum in the sent
    /// snapshot and in the replica (a change made to the replica shows).
    #[arg(long)]
    pub verify: bool,
    /// One round, then exit (as from cron).
    #[arg(long)]
    pub once: bool,
}

/// `loom replicate status DEST`.
#[derive(Args, Debug)]
pub struct StatusArgs {
    /// The replica's directory.
    pub dest: PathBuf,
}

/// `30s`, `15m`, `2h`, `1d` (or plain seconds).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?}: a number and a unit, as 30s, 15m, 2h or 1d"))?;
    let mult = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("{s:?}: the unit is s, m, h or d")),
    };
    n.checked_mul(mult)
        .map(Duration::from_secs)
        .ok_or_else(|| format!("{s:?} is too long"))
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn snap_ref(s: &Session, x: &SnapshotInfo) -> SnapRef {
    SnapRef {
        fsname: s.entry.fsname.clone(),
        name: x.name.clone(),
        id: x.id,
        created: x.created,
    }
}

/// The status note, one `key value` per line.
fn note(fields: &[(&str, String)]) -> String {
    fields.iter().map(|(k, v)| format!("{k} {v}\n")).collect()
}

fn field<'a>(note: &'a str, key: &str) -> Option<&'a str> {
    note.lines()
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(' ')))
}

pub fn run(c: ReplicateCmd) -> anyhow::Result<()> {
    match c {
        ReplicateCmd::Run(a) => {
            if a.keep == 0 {
                bail!("--keep: at least 1 (the base of the next increment)");
            }
            if a.every.is_zero() {
                bail!("--every: more than 0");
            }
            loop {
                let started = std::time::Instant::now();
                if let Err(e) = round(&a) {
                    if a.once {
                        return Err(e);
                    }
                    eprintln!("replicate: round failed, the next resumes it: {e:#}");
                }
                if a.once {
                    return Ok(());
                }
                std::thread::sleep(a.every.saturating_sub(started.elapsed()));
            }
        }
        ReplicateCmd::Status(a) => status(a),
    }
}

/// One round (see the module's comment).
fn round(a: &RunArgs) -> anyhow::Result<()> {
    let (src_entry, src_rel) = registry::find(&a.source)?;
    let (dst_entry, dst_rel) = registry::find(&a.dest)?;
    let tree = src_rel.as_os_str().as_bytes().to_vec();
    let into = dst_rel.as_os_str().as_bytes().to_vec();
    let src = connect(src_entry)?;
    let dst = connect(dst_entry)?;
    let c = caller();
    let list = |s: &Session| -> anyhow::Result<Vec<SnapshotInfo>> {
        let mut v: Vec<SnapshotInfo> =
            s.rt.block_on(s.client.snapshots(&c))
                .map_err(|e| crate::tools::errno(e, "listing the snapshots"))?
                .into_iter()
                .filter(|x| x.state == SnapState::Ready && x.name.starts_with(PREFIX))
                .collect();
        v.sort_by_key(|x| x.id);
        Ok(v)
    };

    // 1. A snapshot of the source when one is due.
    let mut have = list(&src)?;
    let due = have
        .last()
        .is_none_or(|x| now().saturating_sub(x.created) >= a.every.as_secs());
    if due {
        let name = format!("{PREFIX}{}", crate::snapshot::stamp(now()));
        if !have.iter().any(|x| x.name == name) {
            src.rt
                .block_on(s_create(&src.client, &c, &name))
                .map_err(|e| crate::tools::errno(e, &format!("taking snapshot {name}")))?;
            eprintln!("replicate: took snapshot {name}");
            have = list(&src)?;
        }
    }

    // 2. What to send: the newest snapshot old enough.
    let Some(pick) = have
        .iter()
        .rev()
        .find(|x| now().saturating_sub(x.created) >= a.min_age.as_secs())
        .cloned()
    else {
        eprintln!(
            "replicate: waiting, no snapshot of the source is {} s old yet",
            a.min_age.as_secs()
        );
        return Ok(());
    };
    let state = dst
        .rt
        .block_on(receive_state(&dst.client, &c, &into))
        .context("reading the replica's state")?;
    let pick_ref = snap_ref(&src, &pick);
    let last = state.last.as_ref().map(|(g, _)| g.clone());
    let base = match &last {
        None => None,
        Some(g) if *g == pick_ref.guid() => {
            eprintln!("replicate: the replica holds {} already", pick.name);
            prune(a, &src, &dst, &c, &have, &pick, list(&dst)?)?;
            return Ok(());
        }
        Some(g) => Some(
            have.iter()
                .find(|x| snap_ref(&src, x).guid() == *g)
                .cloned()
                .ok_or_else(|| {
                    anyhow!(
                        "the replica's last snapshot ({g}) is gone from the source: start again into an empty directory"
                    )
                })?,
        ),
    };
    if base.as_ref().is_some_and(|b| b.id > pick.id) {
        bail!(
            "the replica is ahead of the snapshot to send ({})",
            pick.name
        );
    }

    // The send runs in a thread of its own, with its own clients, into a
    // socket the receive reads.
    let (rx, tx) = std::os::unix::net::UnixStream::pair()?;
    let entry = src.entry.clone();
    let base_ref = base.as_ref().map(|b| snap_ref(&src, b));
    let pick_ref2 = pick_ref.clone();
    let t0 = std::time::Instant::now();
    let sender = std::thread::spawn(move || -> anyhow::Result<loom_client::send::sender::Sent> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let out = std::io::BufWriter::with_capacity(1 << 20, tx);
        crate::sendrecv::send_snapshot(&rt, &entry, &tree, pick_ref2, base_ref, out, |_, _| {})
    });
    let opts = ReceiveOptions {
        into: into.clone(),
        snapshot: true,
        barrier: Duration::from_secs(30),
    };
    let input = std::io::BufReader::with_capacity(1 << 20, rx);
    let got = dst
        .rt
        .block_on(receive(&dst.client, &c, input, &opts, |_, _| {}));
    let sent = sender
        .join()
        .map_err(|_| anyhow!("the sending thread panicked"))?;
    let got = got.context("receiving")?;
    let sent = sent.context("sending")?;
    let took = t0.elapsed().as_secs_f64();
    eprintln!(
        "replicate: sent {} ({}) in {took:.1} s: {} of data, {} of stream{}",
        pick.name,
        match &base {
            Some(b) => format!("since {}", b.name),
            None => "whole".into(),
        },
        human(sent.data / 1024),
        human(sent.stream / 1024),
        if got.resumed_at > 0 {
            format!(", resumed at record {}", got.resumed_at)
        } else {
            String::new()
        }
    );
    let mut fields = vec![
        (
            "source",
            format!(
                "{}:/{}/{}",
                src.entry.mgs,
                src.entry.fsname,
                String::from_utf8_lossy(src_rel.as_os_str().as_bytes())
            ),
        ),
        ("snapshot", pick.name.clone()),
        ("snapshot_created", pick.created.to_string()),
        ("round_at", now().to_string()),
        ("round_seconds", format!("{took:.1}")),
        ("data_bytes", sent.data.to_string()),
        ("stream_bytes", sent.stream.to_string()),
        ("base", base.as_ref().map_or("-".into(), |b| b.name.clone())),
    ];
    let prior = dst
        .rt
        .block_on(read_note(&dst.client, &c, &into, "replicate"))?
        .unwrap_or_default();
    for k in ["verified", "verified_at", "verified_files"] {
        if let Some(v) = field(&prior, k) {
            fields.push((k, v.to_string()));
        }
    }

    // 3. Verify.
    let mut failed = None;
    if a.verify {
        // The replica's tree as it is: a change made there since a round
        // (which the next increment would build on unknowingly) shows.
        let theirs = dst
            .rt
            .block_on(checksums(&dst.client, &c, &into))
            .map_err(|e| crate::tools::errno(e, "checksumming the replica"))?;
        let ours = sums(&src, pick.id, src_rel.as_os_str().as_bytes())?;
        let bad: Vec<&Vec<u8>> = ours
            .iter()
            .filter(|(p, s)| theirs.get(*p) != Some(s))
            .map(|(p, _)| p)
            .chain(theirs.keys().filter(|p| !ours.contains_key(*p)))
            .collect();
        fields.retain(|(k, _)| !k.starts_with("verif"));
        if bad.is_empty() {
            fields.push(("verified", pick.name.clone()));
            fields.push(("verified_at", now().to_string()));
            fields.push(("verified_files", ours.len().to_string()));
            eprintln!(
                "replicate: verified {}: {} files match",
                pick.name,
                ours.len()
            );
        } else {
            fields.push((
                "verify_failed",
                format!("{} {} differ", pick.name, bad.len()),
            ));
            let some: Vec<String> = bad
                .iter()
                .take(5)
                .map(|p| format!("/{}", String::from_utf8_lossy(p)))
                .collect();
            failed = Some(format!(
                "verify: {} paths differ between {} and its replica: {}",
                bad.len(),
                pick.name,
                some.join(", ")
            ));
        }
    }
    dst.rt.block_on(write_note(
        &dst.client,
        &c,
        &into,
        "replicate",
        &note(&fields),
    ))?;
    if let Some(why) = failed {
        bail!(why);
    }

    // 4. Prune.
    prune(a, &src, &dst, &c, &have, &pick, list(&dst)?)
}

async fn s_create(
    client: &Client,
    c: &Caller,
    name: &str,
) -> Result<SnapshotInfo, loom_client::Errno> {
    client
        .snapshot_create(c, name, Duration::from_secs(30))
        .await
}

/// Every file's checksum in snapshot `id` of `s`'s tree at `tree`.
fn sums(s: &Session, id: u32, tree: &[u8]) -> anyhow::Result<Sums> {
    let client = crate::sendrecv::snapshot_client(&s.rt, &s.entry, id)?;
    let r = s.rt.block_on(checksums(&client, &caller(), tree));
    s.rt.block_on(client.close());
    r.map_err(|e| crate::tools::errno(e, "checksumming"))
}

/// Destroy source snapshots older than `sent` (it is the next base) and
/// the replica's beyond the newest `--keep`.
fn prune(
    a: &RunArgs,
    src: &Session,
    dst: &Session,
    c: &Caller,
    have: &[SnapshotInfo],
    sent: &SnapshotInfo,
    dst_have: Vec<SnapshotInfo>,
) -> anyhow::Result<()> {
    for x in have.iter().filter(|x| x.id < sent.id) {
        src.rt
            .block_on(src.client.snapshot_destroy(c, &x.name))
            .map_err(|e| crate::tools::errno(e, &format!("destroying snapshot {}", x.name)))?;
    }
    let extra = dst_have.len().saturating_sub(a.keep);
    for x in dst_have.iter().take(extra) {
        dst.rt
            .block_on(dst.client.snapshot_destroy(c, &x.name))
            .map_err(|e| crate::tools::errno(e, &format!("destroying the replica's {}", x.name)))?;
    }
    Ok(())
}

fn status(a: StatusArgs) -> anyhow::Result<()> {
    let (entry, rel) = registry::find(&a.dest)?;
    let into = rel.as_os_str().as_bytes().to_vec();
    let s = connect(entry)?;
    let c = caller();
    let state =
        s.rt.block_on(receive_state(&s.client, &c, &into))
            .context("reading the replica's state")?;
    let n =
        s.rt.block_on(read_note(&s.client, &c, &into, "replicate"))?
            .unwrap_or_default();
    let Some((_, name)) = state.last else {
        println!("replica {}: nothing received yet", a.dest.display());
        return Ok(());
    };
    let at = |k: &str| field(&n, k).and_then(|v| v.parse::<u64>().ok());
    println!("replica:        {}", a.dest.display());
    if let Some(src) = field(&n, "source") {
        println!("source:         {src}");
    }
    println!("holds:          {name}");
    if let Some(created) = at("snapshot_created") {
        println!(
            "lag:            {} s (the source as of {})",
            now().saturating_sub(created),
            crate::snapshot::when(created)
        );
    }
    if let Some(t) = at("round_at") {
        println!(
            "last round:     {} ({} s, base {}), {} of data, {} of stream",
            crate::snapshot::when(t),
            field(&n, "round_seconds").unwrap_or("?"),
            field(&n, "base").unwrap_or("-"),
            human(at("data_bytes").unwrap_or(0) / 1024),
            human(at("stream_bytes").unwrap_or(0) / 1024)
        );
    }
    match (field(&n, "verified"), at("verified_at")) {
        (Some(v), Some(t)) => println!(
            "last verified:  {v} at {} ({} files)",
            crate::snapshot::when(t),
            field(&n, "verified_files").unwrap_or("?")
        ),
        _ => println!("last verified:  never"),
    }
    if let Some(f) = field(&n, "verify_failed") {
        println!("VERIFY FAILED:  {f}");
    }
    if let Some((stream, records)) = state.unfinished {
        println!("unfinished:     a receive of {stream} stopped at record {records}; the next round resumes it");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_admins_write_them() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
        assert!(parse_duration("h").is_err());
        assert!(parse_duration("3w").is_err());
    }

    #[test]
    fn the_note_reads_back_by_key() {
        let n = note(&[("snapshot", "repl-1".into()), ("data_bytes", "42".into())]);
        assert_eq!(field(&n, "snapshot"), Some("repl-1"));
        assert_eq!(field(&n, "data_bytes"), Some("42"));
        assert_eq!(field(&n, "data"), None);
    }
}
