//! `loom mount-noop`: mounts the no-op FUSE reference file system
//! ([`loom_fuse::noop`]) by hand, so that real tools (tar, mdtest, fio)
//! can be timed on it beside a loomfs mount. It serves in the foreground
//! until SIGINT, SIGTERM or an unmount (`umount DIR`, `loom umount DIR`).

use anyhow::Context;
use clap::Args;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{SigSet, Signal};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

/// The long help of `loom mount-noop`.
pub const LONG_ABOUT: &str = "\
Mount the no-op FUSE reference file system on DIR: a benchmark reference, \"the FUSE ceiling\".

It holds everything in this process's memory (names, attributes and file data, so what is written
reads back) and does the least work a correct file system can, with the same FUSE settings as a
loomfs mount (worker threads, cloned fds, mount options, kernel permission checks, limits
negotiated at init, readahead, attribute and entry timeouts). A tool timed on it shows what the
kernel and FUSE allow on this machine; the same tool on a loomfs mount shows how close loomfs comes.
Everything is lost at unmount, and large writes need as much memory. Not for data you want to keep.

Runs in the foreground until SIGINT or SIGTERM (then unmounts) or until DIR is unmounted
(`umount DIR` or `loom umount DIR`). `loom bench` mounts one by itself for the target `noop:`.";

/// Options of `loom mount-noop`.
#[derive(Args)]
pub struct MountNoopArgs {
    /// Where to mount it (created if missing).
    pub dir: PathBuf,
    /// FUSE worker threads, each with its own /dev/fuse fd (as a loomfs mount).
    #[arg(long, default_value_t = loom_fuse::MountOptions::default().threads)]
    pub threads: usize,
    /// Seconds the kernel may cache attributes and names (fractions allowed),
    /// as `loom mount --attr-timeout`: give both mounts the same.
    #[arg(long, default_value_t = 1.0, value_parser = crate::mount::parse_seconds)]
    pub attr_timeout: f64,
    /// Only the mounting user may use the mount. By default, when run as
    /// root, every user may (allow_other).
    #[arg(long)]
    pub private: bool,
}

/// Why serving stops.
enum Event {
    Signal,
    Unmounted,
}

/// Mounts, prints `mounted at DIR`, and serves until a signal or an
/// unmount; then unmounts and returns.
pub fn mount_noop(a: MountNoopArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&a.dir)
        .with_context(|| format!("creating mount point {}", a.dir.display()))?;
    let dir = a
        .dir
        .canonicalize()
        .with_context(|| format!("mount point {}", a.dir.display()))?;
    let opts = loom_fuse::MountOptions {
        threads: a.threads,
        attr_timeout: Duration::from_secs_f64(a.attr_timeout),
        allow_other: nix::unistd::geteuid().is_root() && !a.private,
        fsname: loom_fuse::noop::NOOP_SUBTYPE.to_string(),
        ..loom_fuse::MountOptions::default()
    };
    // SIGINT and SIGTERM are blocked before any thread exists, so every
    // thread (fuser's workers too) inherits the mask and only the waiter
    // below takes them.
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGINT);
    signals.add(Signal::SIGTERM);
    signals
        .thread_block()
        .context("blocking SIGINT and SIGTERM")?;
    // Watch the mount table from before the mount: an unmount by anyone
    // after it is seen.
    let mounts = File::open(MOUNTINFO).with_context(|| format!("opening {MOUNTINFO}"))?;
    let session = loom_fuse::noop::mount_noop(&dir, opts)
        .with_context(|| format!("mounting the no-op reference on {}", dir.display()))?;
    let (tx, rx) = mpsc::channel();
    let unmounted = tx.clone();
    std::thread::spawn(move || {
        if signals.wait().is_ok() {
            let _ = tx.send(Event::Signal);
        }
    });
    let watched = dir.clone();
    std::thread::spawn(move || match wait_until_unmounted(&mounts, &watched) {
        Ok(()) => {
            let _ = unmounted.send(Event::Unmounted);
        }
        // Then only a signal stops the mount.
        Err(e) => tracing::warn!("watching {MOUNTINFO}: {e}"),
    });
    println!(
        "mounted at {} (no-op FUSE reference, in memory: lost at unmount)",
        dir.display()
    );
    let _ = std::io::stdout().flush();
    let event = rx.recv();
    // Unmount (unless already done) and wait for fuser's threads.
    match session.umount_and_join() {
        Ok(()) => Ok(()),
        // Unmounted by someone else: fuser's second unmount is refused.
        Err(_) if matches!(event, Ok(Event::Unmounted)) => Ok(()),
        // Busy (a shell sits in it): detach now, the kernel finishes when
        // the last user leaves.
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
            nix::mount::umount2(&dir, nix::mount::MntFlags::MNT_DETACH)
                .with_context(|| format!("detaching {}", dir.display()))
        }
        Err(e) => Err(e).with_context(|| format!("unmounting {}", dir.display())),
    }
}

/// The mount table of this process's mount namespace, pollable for changes.
const MOUNTINFO: &str = "/proc/self/mountinfo";

/// Returns once nothing is mounted on `dir`: reads the mount table `mounts`
/// (an open `/proc/self/mountinfo`) and waits for the kernel to flag a
/// change (POLLPRI) before reading it again.
fn wait_until_unmounted(mounts: &File, dir: &Path) -> std::io::Result<()> {
    let needle = mountinfo_escape(dir);
    loop {
        let mut text = String::new();
        let mut f = mounts;
        f.seek(SeekFrom::Start(0))?;
        f.read_to_string(&mut text)?;
        if !text
            .lines()
            .any(|l| l.split(' ').nth(4) == Some(needle.as_str()))
        {
            return Ok(());
        }
        let mut fds = [PollFd::new(mounts.as_fd(), PollFlags::POLLPRI)];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// `dir` as /proc/self/mountinfo writes it (space, tab, newline and
/// backslash in octal).
fn mountinfo_escape(dir: &Path) -> String {
    let mut out = String::new();
    for c in dir.to_string_lossy().chars() {
        match c {
            ' ' => out.push_str("\\040"),
            '\t' => out.push_str("\\011"),
            '\n' => out.push_str("\\012"),
            '\\' => out.push_str("\\134"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_are_escaped_as_the_mount_table_writes_them() {
        assert_eq!(mountinfo_escape(Path::new("/tmp/a b")), "/tmp/a\\040b");
        assert_eq!(mountinfo_escape(Path::new("/x\\y")), "/x\\134y");
        assert_eq!(mountinfo_escape(Path::new("/plain")), "/plain");
    }
}
