//! `loom quota`: what the file system counts per user, group and project,
//! in `lfs quota`'s layout, and `--check`, a recount of every MDT.

use crate::registry;
use crate::tools::{connect, errno, Session};
use anyhow::bail;
use clap::Args;
use loom_proto::quota::{QuotaId, QuotaKind, QuotaUsage};
use loom_proto::Errno;
use std::path::{Path, PathBuf};

/// Options of `loom quota`.
#[derive(Args)]
#[command(
    after_help = "Each MDT counts the inodes it holds per owner, group and project id, \
in the same commit as the change that makes, removes or moves them: the counts are exact after \
a crash of any server, a replay, `loom migrate` and a restripe. `files` is the sum over the MDTs; \
-v adds a line per MDT. Block usage is the OSTs' to count and is not counted yet (shown as -); \
limits are not enforced yet.\n\n\
Without -u, -g or -p: the caller's user and group. Root sees anyone's usage; a user sees their \
own, their groups' and any project's.\n\n\
--check (root only) recounts every MDT from a scan of its inodes and reports where the counts \
differ (exit status 1 when they do). Changes on an MDT wait for its scan."
)]
pub struct QuotaArgs {
    /// A user: name or uid.
    #[arg(short = 'u', value_name = "USER", conflicts_with_all = ["group", "project"])]
    pub user: Option<String>,
    /// A group: name or gid.
    #[arg(short = 'g', value_name = "GROUP", conflicts_with = "project")]
    pub group: Option<String>,
    /// A project id.
    #[arg(short = 'p', value_name = "PROJID")]
    pub project: Option<u32>,
    /// One line per target besides the total.
    #[arg(short = 'v')]
    pub verbose: bool,
    /// Recount every MDT and report drift (root only).
    #[arg(long, conflicts_with_all = ["user", "group", "project", "verbose"])]
    pub check: bool,
    /// A path on the loomfs mount (its mount point or anything under it).
    pub path: PathBuf,
}

/// A user by name or number.
fn user_id(s: &str) -> anyhow::Result<u32> {
    if let Ok(n) = s.parse::<u32>() {
        return Ok(n);
    }
    match nix::unistd::User::from_name(s) {
        Ok(Some(u)) => Ok(u.uid.as_raw()),
        Ok(None) => bail!("no user {s:?} (give a name this machine knows, or a uid)"),
        Err(e) => bail!("looking up user {s:?}: {e}"),
    }
}

/// A group by name or number.
fn group_id(s: &str) -> anyhow::Result<u32> {
    if let Ok(n) = s.parse::<u32>() {
        return Ok(n);
    }
    match nix::unistd::Group::from_name(s) {
        Ok(Some(g)) => Ok(g.gid.as_raw()),
        Ok(None) => bail!("no group {s:?} (give a name this machine knows, or a gid)"),
        Err(e) => bail!("looking up group {s:?}: {e}"),
    }
}

/// How `lfs quota` names an id: "usr 1000 (uid 1000)" with the name when
/// the machine knows it.
fn heading(who: QuotaId) -> String {
    let name = match who.kind {
        QuotaKind::User => nix::unistd::User::from_uid(who.id.into())
            .ok()
            .flatten()
            .map(|u| u.name),
        QuotaKind::Group => nix::unistd::Group::from_gid(who.id.into())
            .ok()
            .flatten()
            .map(|g| g.name),
        QuotaKind::Project => None,
    };
    let (short, idname) = match who.kind {
        QuotaKind::User => ("usr", "uid"),
        QuotaKind::Group => ("grp", "gid"),
        QuotaKind::Project => ("prj", "projid"),
    };
    format!(
        "Disk quotas for {short} {} ({idname} {}):",
        name.unwrap_or_else(|| who.id.to_string()),
        who.id
    )
}

pub fn quota(a: QuotaArgs) -> anyhow::Result<()> {
    let (entry, _) = registry::find(&a.path)?;
    let mount = entry.mountpoint.clone();
    let s = connect(entry)?;
    if a.check {
        return check(&s);
    }
    let whos = match (&a.user, &a.group, a.project) {
        (Some(u), _, _) => vec![QuotaId::user(user_id(u)?)],
        (_, Some(g), _) => vec![QuotaId::group(group_id(g)?)],
        (_, _, Some(p)) => vec![QuotaId::project(p)],
        (None, None, None) => vec![
            QuotaId::user(nix::unistd::geteuid().as_raw()),
            QuotaId::group(nix::unistd::getegid().as_raw()),
        ],
    };
    for who in whos {
        show(&s, &mount, who, a.verbose)?;
    }
    Ok(())
}

fn show(s: &Session, mount: &Path, who: QuotaId, verbose: bool) -> anyhow::Result<()> {
    let per_mdt = s.rt.block_on(s.client.quota_usage(who)).map_err(|e| {
        if e == Errno::EPERM {
            anyhow::anyhow!("{who}: only root may see the usage of another user or group")
        } else {
            errno(e, &format!("the usage of {who}"))
        }
    })?;
    let files: u64 = per_mdt.iter().map(|(_, u)| u.inodes).sum();
    println!("{}", heading(who));
    println!(
        "{:>15} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7}",
        "Filesystem", "kbytes", "quota", "limit", "grace", "files", "quota", "limit", "grace"
    );
    println!("{}", mount.display());
    println!("{}", row(None, files));
    if verbose {
        for (mdt, u) in &per_mdt {
            println!("{}-MDT{mdt:04x}_UUID", s.entry.fsname);
            println!("{}", row(None, per_target(u)));
        }
    }
    Ok(())
}

fn per_target(u: &QuotaUsage) -> u64 {
    u.inodes
}

/// One line of figures: kbytes (not counted yet), no limits.
fn row(kbytes: Option<u64>, files: u64) -> String {
    let kb = kbytes.map_or("-".to_string(), |k| k.to_string());
    format!(
        "{:>15} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7}",
        "", kb, "0", "0", "-", files, "0", "0", "-"
    )
}

fn check(s: &Session) -> anyhow::Result<()> {
    let checks = s.rt.block_on(s.client.quota_check()).map_err(|e| {
        if e == Errno::EPERM {
            anyhow::anyhow!("only root may check the quota counts")
        } else {
            errno(e, "checking the quota counts")
        }
    })?;
    let mut drifted = 0;
    for c in &checks {
        if c.drift.is_empty() {
            println!(
                "{}-MDT{:04x}: {} ids, counts match the inodes held",
                s.entry.fsname, c.mdt, c.ids
            );
        }
        for d in &c.drift {
            drifted += 1;
            println!(
                "{}-MDT{:04x}: {}: counted {} inodes, holds {}",
                s.entry.fsname, c.mdt, d.who, d.counted.inodes, d.scanned.inodes
            );
        }
    }
    if drifted > 0 {
        bail!("{drifted} counts differ from what the MDTs hold");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_names_or_numbers_and_unknown_names_are_refused() {
        assert_eq!(user_id("0").expect("uid"), 0);
        assert_eq!(user_id("root").expect("root"), 0);
        assert_eq!(group_id("65534").expect("gid"), 65534);
        let e = user_id("no-such-user-here").expect_err("unknown");
        assert!(e.to_string().contains("no user"), "{e}");
    }
}
