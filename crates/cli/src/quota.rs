//! `loom quota`: what the file system counts per user, group and project,
//! in `lfs quota`'s layout, and `--check`, a recount of every MDT.

use crate::registry;
use crate::tools::{connect, errno, Session};
use anyhow::bail;
use clap::Args;
use loom_proto::msg::Time;
use loom_proto::quota::{QuotaId, QuotaKind, QuotaLimits};
use loom_proto::Errno;
use std::path::{Path, PathBuf};

/// Options of `loom quota`.
#[derive(Args)]
#[command(
    after_help = "Each MDT counts the inodes it holds per owner, group and project id, \
in the same commit as the change that makes, removes or moves them: the counts are exact after \
a crash of any server, a replay, `loom migrate` and a restripe. `files` is the sum over the MDTs; \
-v adds a line per MDT. `quota` and `limit` are the soft and hard limits (0: none, see `loom \
setquota`); `*` marks usage at or over one; `grace` is what is left of the soft limit's grace \
(none: spent, creates answer EDQUOT). Block usage is the OSTs' to count and is not counted yet \
(shown as -).\n\n\
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
    let (limits, soft_since) =
        s.rt.block_on(s.client.get_quota(who))
            .map_err(|e| errno(e, &format!("the limits of {who}")))?;
    let files: u64 = per_mdt.iter().map(|(_, u)| u.inodes).sum();
    println!("{}", heading(who));
    println!(
        "{:>15} {:>7} {:>7} {:>7} {:>7} {:>8} {:>7} {:>7} {:>7}",
        "Filesystem", "kbytes", "quota", "limit", "grace", "files", "quota", "limit", "grace"
    );
    println!("{}", mount.display());
    let over = (limits.inode_hard != 0 && files >= limits.inode_hard)
        || (limits.inode_soft != 0 && files > limits.inode_soft);
    let files_shown = format!("{files}{}", if over { "*" } else { "" });
    let grace = match soft_since {
        Some(since) if limits.inode_soft != 0 && files > limits.inode_soft => {
            let spent = Time::now().sec.saturating_sub(since.sec).max(0) as u64;
            match limits.grace().checked_sub(spent) {
                Some(left) if left > 0 => format!("{left}s"),
                _ => "none".to_string(),
            }
        }
        _ => "-".to_string(),
    };
    println!(
        "{:>15} {:>7} {:>7} {:>7} {:>7} {:>8} {:>7} {:>7} {:>7}",
        "",
        "-",
        limits.block_soft / 1024,
        limits.block_hard / 1024,
        "-",
        files_shown,
        limits.inode_soft,
        limits.inode_hard,
        grace
    );
    if verbose {
        for (mdt, u) in &per_mdt {
            println!("{}-MDT{mdt:04x}_UUID", s.entry.fsname);
            println!(
                "{:>15} {:>7} {:>7} {:>7} {:>7} {:>8} {:>7} {:>7} {:>7}",
                "", "-", "-", "-", "-", u.inodes, "-", "-", "-"
            );
        }
    }
    Ok(())
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

/// Options of `loom setquota`.
#[derive(Args)]
#[command(
    after_help = "Limits are kept by MDT0 (the quota master) and enforced by every MDT \
from the next change of the id: past a hard limit, or past a soft one once its grace is spent, a \
create, mkdir, symlink, mknod or chown into the id answers EDQUOT, through the mount and the \
library alike. The MDTs hold shares of each limit granted by the master and give them back when \
another MDT needs them, so the usage over all MDTs never passes a hard limit. Root's own changes \
are not limited, as on Linux. Limits not given keep their value; 0 removes one.\n\n\
Block limits (-b, -B) need block usage, which the OSTs do not count yet: they are refused.\n\n\
Example, a home directory capped at 100,000 inodes: `loom project -p 1001 -s -r \
/mnt/loom/home/alice && loom setquota -p 1001 -I 100000 /mnt/loom`."
)]
pub struct SetquotaArgs {
    /// A user: name or uid.
    #[arg(short = 'u', value_name = "USER", conflicts_with_all = ["group", "project"], required_unless_present_any = ["group", "project"])]
    pub user: Option<String>,
    /// A group: name or gid.
    #[arg(short = 'g', value_name = "GROUP", conflicts_with = "project")]
    pub group: Option<String>,
    /// A project id.
    #[arg(short = 'p', value_name = "PROJID")]
    pub project: Option<u32>,
    /// Soft block limit, in KiB (refused: blocks are not counted yet).
    #[arg(short = 'b', value_name = "KIB")]
    pub block_soft: Option<u64>,
    /// Hard block limit, in KiB (refused: blocks are not counted yet).
    #[arg(short = 'B', value_name = "KIB")]
    pub block_hard: Option<u64>,
    /// Soft inode limit (0: none).
    #[arg(short = 'i', value_name = "INODES")]
    pub inode_soft: Option<u64>,
    /// Hard inode limit (0: none).
    #[arg(short = 'I', value_name = "INODES")]
    pub inode_hard: Option<u64>,
    /// How long the soft limits may be passed, in seconds (default: a
    /// week).
    #[arg(long, value_name = "SECS")]
    pub grace: Option<u64>,
    /// A path on the loomfs mount.
    pub path: PathBuf,
}

pub fn setquota(a: SetquotaArgs) -> anyhow::Result<()> {
    if a.block_soft.is_some() || a.block_hard.is_some() {
        bail!(
            "block limits need block usage, which the OSTs do not count yet (inode limits: -i, -I)"
        );
    }
    if a.inode_soft.is_none() && a.inode_hard.is_none() && a.grace.is_none() {
        bail!("no limit given (-i SOFT, -I HARD, --grace SECS)");
    }
    let who = match (&a.user, &a.group, a.project) {
        (Some(u), _, _) => QuotaId::user(user_id(u)?),
        (_, Some(g), _) => QuotaId::group(group_id(g)?),
        (_, _, Some(p)) => QuotaId::project(p),
        (None, None, None) => bail!("whose limits: -u USER, -g GROUP or -p PROJID"),
    };
    let (entry, _) = registry::find(&a.path)?;
    let s = connect(entry)?;
    let refused = |e: Errno, what: &str| {
        if e == Errno::EPERM {
            anyhow::anyhow!("only root may set quota limits")
        } else if e == Errno::EINVAL {
            anyhow::anyhow!("{what}: a soft limit above its hard limit")
        } else {
            errno(e, what)
        }
    };
    let (mut limits, _) =
        s.rt.block_on(s.client.get_quota(who))
            .map_err(|e| refused(e, &format!("the limits of {who}")))?;
    let before: QuotaLimits = limits;
    if let Some(v) = a.inode_soft {
        limits.inode_soft = v;
    }
    if let Some(v) = a.inode_hard {
        limits.inode_hard = v;
    }
    if let Some(v) = a.grace {
        limits.grace_secs = v;
    }
    if limits.inode_hard != 0 && limits.inode_soft > limits.inode_hard {
        bail!(
            "the soft inode limit {} is above the hard one {}: nothing changed",
            limits.inode_soft,
            limits.inode_hard
        );
    }
    if limits != before {
        s.rt.block_on(s.client.set_quota(who, limits))
            .map_err(|e| refused(e, &format!("setting the limits of {who}")))?;
    }
    Ok(())
}
