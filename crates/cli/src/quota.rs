//! `loom quota`: what the file system counts per user, group and project,
//! in `lfs quota`'s layout, and `--check`, a recount of every target;
//! `loom setquota`.

use crate::registry;
use crate::tools::{connect, errno, Session};
use anyhow::bail;
use clap::Args;
use loom_proto::msg::{Role, TargetId, Time};
use loom_proto::quota::{QuotaId, QuotaKind, QuotaLimits};
use loom_proto::Errno;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// Options of `loom quota`.
#[derive(Args)]
#[command(
    after_help = "Each MDT counts the inodes it holds per owner, group and project id, \
in the same commit as the change that makes, removes or moves them: the counts are exact after \
a crash of any server, a replay, `loom migrate` and a restripe. Each OST counts the bytes its \
objects take on its disk (as du, in KiB here) per owner, group and project of their files, from \
the disk itself: exact after a crash too. `files` is the sum over the MDTs, `kbytes` over the \
OSTs; -v adds a line per target. `quota` and `limit` are the soft and hard limits (0: none, see \
`loom setquota`); `*` marks usage at or over one; `grace` is what is left of the soft limit's \
grace (none: spent, creates or writes answer EDQUOT). An MDT also counts the bytes of \
Data-on-MDT components (a file's size up to the component's end), in `kbytes` too.\n\n\
Without -u, -g or -p: the caller's user and group. Root sees anyone's usage; a user sees their \
own, their groups' and any project's.\n\n\
--check (root only) recounts every MDT from a scan of its inodes and every OST from a scan of \
its objects, and reports where the counts differ (exit status 1 when they do). Changes on a \
target wait for its scan."
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
    /// Recount every MDT and OST and report drift (root only).
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
    let whos = whos(&a)?;
    if !crate::via_mount::key_readable(&entry) && !a.check {
        // A user: the mount asks, as them.
        for who in whos {
            let (usage, st) = crate::via_mount::quota(&mount, who)?;
            print_quota(&entry.fsname, &mount, who, &usage, &st, a.verbose);
        }
        return Ok(());
    }
    let s = connect(entry)?;
    if a.check {
        return check(&s);
    }
    for who in whos {
        show(&s, &mount, who, a.verbose)?;
    }
    Ok(())
}

/// The ids `loom quota` shows: the one named, or the caller's uid and gid.
fn whos(a: &QuotaArgs) -> anyhow::Result<Vec<QuotaId>> {
    Ok(match (&a.user, &a.group, a.project) {
        (Some(u), _, _) => vec![QuotaId::user(user_id(u)?)],
        (_, Some(g), _) => vec![QuotaId::group(group_id(g)?)],
        (_, _, Some(p)) => vec![QuotaId::project(p)],
        (None, None, None) => vec![
            QuotaId::user(nix::unistd::geteuid().as_raw()),
            QuotaId::group(nix::unistd::getegid().as_raw()),
        ],
    })
}

/// What is left of a soft limit's grace: "-" when not over it, "none"
/// when spent (the limit then holds as a hard one).
fn grace_left(limits: &QuotaLimits, soft: u64, used: u64, since: Option<Time>) -> String {
    match since {
        Some(since) if soft != 0 && used > soft => {
            let spent = Time::now().sec.saturating_sub(since.sec).max(0) as u64;
            match limits.grace().checked_sub(spent) {
                Some(left) if left > 0 => format!("{left}s"),
                _ => "none".to_string(),
            }
        }
        _ => "-".to_string(),
    }
}

/// A usage with `*` when at or over a limit.
fn marked(used: u64, shown: u64, soft: u64, hard: u64) -> String {
    let over = (hard != 0 && used >= hard) || (soft != 0 && used > soft);
    format!("{shown}{}", if over { "*" } else { "" })
}

fn row(cells: [&dyn std::fmt::Display; 9]) {
    let [a, b, c, d, e, f, g, h, i] = cells;
    println!("{a:>15} {b:>10} {c:>10} {d:>10} {e:>7} {f:>8} {g:>7} {h:>7} {i:>7}");
}

fn show(s: &Session, mount: &Path, who: QuotaId, verbose: bool) -> anyhow::Result<()> {
    let per_target = s.rt.block_on(s.client.quota_usage(who)).map_err(|e| {
        if e == Errno::EPERM {
            anyhow::anyhow!("{who}: only root may see the usage of another user or group")
        } else {
            errno(e, &format!("the usage of {who}"))
        }
    })?;
    let st =
        s.rt.block_on(s.client.get_quota(who))
            .map_err(|e| errno(e, &format!("the limits of {who}")))?;
    print_quota(&s.entry.fsname, mount, who, &per_target, &st, verbose);
    Ok(())
}

/// `who`'s usage per target and limits, in `lfs quota`'s layout.
pub(crate) fn print_quota(
    fsname: &str,
    mount: &Path,
    who: QuotaId,
    per_target: &[(TargetId, loom_proto::quota::QuotaUsage)],
    st: &loom_client::quota::QuotaState,
    verbose: bool,
) {
    let l = st.limits;
    let files: u64 = per_target.iter().map(|(_, u)| u.inodes).sum();
    let bytes: u64 = per_target.iter().map(|(_, u)| u.bytes).sum();
    println!("{}", heading(who));
    row([
        &"Filesystem",
        &"kbytes",
        &"quota",
        &"limit",
        &"grace",
        &"files",
        &"quota",
        &"limit",
        &"grace",
    ]);
    println!("{}", mount.display());
    row([
        &"",
        &marked(bytes, bytes / 1024, l.block_soft, l.block_hard),
        &(l.block_soft / 1024),
        &(l.block_hard / 1024),
        &grace_left(&l, l.block_soft, bytes, st.block_soft_since),
        &marked(files, files, l.inode_soft, l.inode_hard),
        &l.inode_soft,
        &l.inode_hard,
        &grace_left(&l, l.inode_soft, files, st.inode_soft_since),
    ]);
    if verbose {
        for (t, u) in per_target {
            println!("{fsname}-{t}_UUID");
            // An MDT holds inodes and Data-on-MDT bytes, an OST bytes.
            let kb = (u.bytes / 1024).to_string();
            let files = match t.role {
                Role::Mdt => u.inodes.to_string(),
                _ => "-".into(),
            };
            row([&"", &kb, &"-", &"-", &"-", &files, &"-", &"-", &"-"]);
        }
    }
}

fn check(s: &Session) -> anyhow::Result<()> {
    if std::io::stderr().is_terminal() {
        eprintln!(
            "loom quota: recounting every MDT and OST at once (changes on each wait for its scan)..."
        );
    }
    let checks = s.rt.block_on(s.client.quota_check()).map_err(|e| {
        if e == Errno::EPERM {
            anyhow::anyhow!("only root may check the quota counts")
        } else {
            errno(e, "checking the quota counts")
        }
    })?;
    let mut drifted = 0;
    for c in &checks {
        let mdt = c.target.role == Role::Mdt;
        let what = if mdt { "inodes" } else { "bytes" };
        let shown = |u: &loom_proto::quota::QuotaUsage| {
            if mdt {
                format!("{} inodes and {} bytes", u.inodes, u.bytes)
            } else {
                format!("{} bytes", u.bytes)
            }
        };
        if c.drift.is_empty() {
            println!(
                "{}-{}: {} ids, counts match the {what} held",
                s.entry.fsname, c.target, c.ids
            );
        }
        for d in &c.drift {
            drifted += 1;
            println!(
                "{}-{}: {}: counted {}, holds {}",
                s.entry.fsname,
                c.target,
                d.who,
                shown(&d.counted),
                shown(&d.scanned)
            );
        }
    }
    if drifted > 0 {
        bail!("{drifted} counts differ from what the targets hold");
    }
    Ok(())
}

/// A block limit as `lfs setquota` takes it: KiB, or a number with a
/// suffix k, M, G, T or P (powers of 1024). In bytes.
fn block_limit(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() && t[..i].parse::<u64>().is_ok() => {
            let m: u64 = match c.to_ascii_lowercase() {
                'k' => 1 << 10,
                'm' => 1 << 20,
                'g' => 1 << 30,
                't' => 1 << 40,
                'p' => 1 << 50,
                _ => return Err(format!("{s:?}: unknown unit {c:?} (k, M, G, T or P)")),
            };
            (&t[..i], m)
        }
        _ => (t, 1 << 10),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size (KiB, or a number with k, M, G, T or P)"))?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("{s:?} is too large"))
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

    #[test]
    fn block_limits_are_kib_or_sized_and_bad_ones_are_refused() {
        assert_eq!(block_limit("100"), Ok(100 << 10));
        assert_eq!(block_limit("8M"), Ok(8 << 20));
        assert_eq!(block_limit("2g"), Ok(2 << 30));
        assert!(block_limit("8X").is_err());
        assert!(block_limit("-1").is_err());
        assert!(block_limit("").is_err());
        assert!(block_limit("99999999999P").is_err());
    }
}

/// Options of `loom setquota`.
#[derive(Args)]
#[command(
    after_help = "Limits are kept by MDT0 (the quota master) and enforced by every MDT \
(inodes, and the bytes of Data-on-MDT components) and OST (blocks) from the next change of \
the id: past a hard limit, or past a soft one \
once its grace is spent, a create, mkdir, symlink, mknod or chown into the id answers EDQUOT, \
and so does a write that would take more blocks, through the mount and the library alike. The \
targets hold shares of each limit granted by the master and give them back when another needs \
them, so the usage over all MDTs (all OSTs) never passes a hard limit by more than what clients \
had already acknowledged to their programs: near a block limit an OST tells each client to \
stop writing behind for that owner, so a client overshoots by at most its space grant (64 MiB \
per OST). Root's own changes are not limited, as on Linux. Limits not given keep their value; 0 \
removes one.\n\n\
Block limits are in KiB, as lfs's, or with a unit: -B 10G.\n\n\
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
    /// Soft block limit: KiB, or with a unit k, M, G, T, P (0: none).
    #[arg(short = 'b', value_name = "KIB", value_parser = block_limit)]
    pub block_soft: Option<u64>,
    /// Hard block limit: KiB, or with a unit k, M, G, T, P (0: none).
    #[arg(short = 'B', value_name = "KIB", value_parser = block_limit)]
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
    let none = [
        a.block_soft,
        a.block_hard,
        a.inode_soft,
        a.inode_hard,
        a.grace,
    ];
    if none.iter().all(Option::is_none) {
        bail!("no limit given (-b SOFT, -B HARD, -i SOFT, -I HARD, --grace SECS)");
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
    let mut limits =
        s.rt.block_on(s.client.get_quota(who))
            .map_err(|e| refused(e, &format!("the limits of {who}")))?
            .limits;
    let before: QuotaLimits = limits;
    if let Some(v) = a.block_soft {
        limits.block_soft = v;
    }
    if let Some(v) = a.block_hard {
        limits.block_hard = v;
    }
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
    if limits.block_hard != 0 && limits.block_soft > limits.block_hard {
        bail!(
            "the soft block limit {} KiB is above the hard one {} KiB: nothing changed",
            limits.block_soft / 1024,
            limits.block_hard / 1024
        );
    }
    if limits != before {
        s.rt.block_on(s.client.set_quota(who, limits))
            .map_err(|e| refused(e, &format!("setting the limits of {who}")))?;
    }
    Ok(())
}
