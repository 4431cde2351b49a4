//! The FUSE settings every mount of this crate shares: the loomfs mount
//! ([`crate::mount`]) and the no-op reference ([`crate::noop::mount_noop`]).
//!
//! Keeping them in one place is what makes the reference a fair ceiling:
//! both mounts get the same worker threads and cloned fds, the same mount
//! options (kernel permission checks, `allow_other`), the same limits and
//! capabilities negotiated with the kernel at `init`, and the same
//! readahead. What differs between them is only what happens behind each
//! request. A setting added here applies to both; a setting added to one
//! mount alone makes the comparison unfair and must say so.

use crate::MountOptions;
use fuser::{FopenFlags, InitFlags, KernelConfig, OpenFlags};
use std::path::Path;

/// Concurrent background requests (readahead, async reads) the kernel may
/// have in flight to the file system.
pub const MAX_BACKGROUND: u16 = 64;

/// The `fuser::Config` of a mount with `opts`: worker threads, each with its
/// own cloned `/dev/fuse` fd, the source name (`opts.fsname`) and
/// `fuse.<subtype>` shown in /proc/mounts, kernel permission checks, and
/// who may use the mount.
pub fn fuser_config(opts: &MountOptions, subtype: &str) -> fuser::Config {
    let mut cfg = fuser::Config::default();
    cfg.n_threads = Some(opts.threads.max(1));
    // One fd per worker: the kernel hands each request to a thread reading
    // its own fd, rather than waking every worker on one.
    cfg.clone_fd = true;
    cfg.mount_options = vec![
        fuser::MountOption::FSName(opts.fsname.clone()),
        fuser::MountOption::Subtype(subtype.to_string()),
        // The kernel checks mode bits and ownership itself, from the
        // attributes we return: the file system need not be asked per access.
        fuser::MountOption::DefaultPermissions,
    ];
    if opts.allow_other {
        cfg.acl = fuser::SessionACL::All;
    }
    if opts.read_only {
        cfg.mount_options.push(fuser::MountOption::RO);
    }
    cfg
}

/// What every mount asks of the kernel at `init`: 1 MiB writes, 4 MiB
/// readahead, [`MAX_BACKGROUND`] background requests, readdirplus when the
/// kernel thinks it pays (`ls -l`), lookups and creates in one directory
/// in parallel, set-ID bits cleared by the file system
/// (`HANDLE_KILLPRIV_V2`) and O_TRUNC done by the open
/// (`ATOMIC_O_TRUNC`). Limits the kernel refuses are lowered to what it
/// allows; missing capabilities are logged at debug level.
///
/// The capabilities oblige the file system: with `HANDLE_KILLPRIV_V2` it
/// must clear set-user-ID and executable set-group-ID on a write (when the
/// write flags say `FUSE_WRITE_KILL_SUIDGID`), a truncate and a chown; with
/// `ATOMIC_O_TRUNC` an open with `O_TRUNC` must truncate.
///
/// Every `Filesystem::init` of this crate must call it — the no-op
/// reference's ([`crate::noop::NoopFs`]) does, and loomfs's
/// ([`crate::fs::LoomFs`]) must too, instead of setting these itself — so
/// that both mounts negotiate the same limits.
pub fn negotiate(config: &mut KernelConfig) {
    // 1 MiB writes: one kernel request per default stripe unit.
    if let Err(max) = config.set_max_write(crate::fs::MAX_WRITE) {
        let _ = config.set_max_write(max);
    }
    if let Err(max) = config.set_max_readahead(crate::fs::MAX_READAHEAD) {
        let _ = config.set_max_readahead(max);
    }
    // More readahead and async reads in flight at once.
    let _ = config.set_max_background(MAX_BACKGROUND);
    // readdirplus when the kernel thinks it pays (ls -l); lookups and
    // creates in one directory may run in parallel. HANDLE_KILLPRIV_V2:
    // without it the kernel sends a chmod of its own before a write to a
    // set-ID file (which a writer who is not the owner may not make).
    // ATOMIC_O_TRUNC: open(O_TRUNC) is one request, not a setattr and an
    // open.
    for cap in [
        InitFlags::FUSE_DO_READDIRPLUS | InitFlags::FUSE_READDIRPLUS_AUTO,
        InitFlags::FUSE_PARALLEL_DIROPS,
        InitFlags::FUSE_HANDLE_KILLPRIV_V2,
        InitFlags::FUSE_ATOMIC_O_TRUNC,
    ] {
        if let Err(missing) = config.add_capabilities(cap) {
            tracing::debug!("kernel lacks FUSE capabilities {missing:?}");
        }
    }
}

/// The flags every mount of this crate answers an open with: none for an
/// open that may write (its close flushes what was written, and reports
/// a failed write), `FOPEN_NOFLUSH` for a read-only one (nothing to
/// flush, so `close` does not wait for a round trip to the file system).
/// Neither keeps cached pages (no `FOPEN_KEEP_CACHE`): the kernel drops
/// them at open, for close-to-open. (The kernel leaves the release of a
/// process's POSIX locks at close(2) to the FLUSH: loomfs answers without
/// `FOPEN_NOFLUSH` an open of a file this mount locked, and drops the
/// locks taken through a handle without a flush at its release.)
pub fn open_reply_flags(flags: OpenFlags) -> FopenFlags {
    if flags.0 & libc::O_ACCMODE == libc::O_RDONLY {
        FopenFlags::FOPEN_NOFLUSH
    } else {
        FopenFlags::empty()
    }
}

/// The flags every mount of this crate answers a create with:
/// `FOPEN_NOFLUSH`, so that `close` of a file just made costs no FUSE round
/// trip. Nothing needs the flush: loomfs sends a write behind only under a
/// space grant that keeps it from failing for lack of space, waits for the
/// rest in `write(2)`, and sends what it gathered and the size at the
/// release, or when another client's look at the file recalls them.
pub fn create_reply_flags() -> FopenFlags {
    FopenFlags::FOPEN_NOFLUSH
}

/// Raises the readahead of the mount at `mountpoint` to
/// `opts.readahead_kb` (see [`crate::set_readahead`]), once the mount is
/// up. A failure is logged, not returned: the mount works, only streaming
/// reads are slower.
pub fn apply_readahead(mountpoint: &Path, opts: &MountOptions) {
    if let Some(kb) = opts.readahead_kb {
        if let Err(e) = crate::set_readahead(mountpoint, kb) {
            tracing::warn!(
                "setting readahead of {} to {kb} KiB: {e}",
                mountpoint.display()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_read_only_opens_skip_the_flush_at_close() {
        let of = |f| open_reply_flags(OpenFlags(f));
        assert_eq!(of(libc::O_RDONLY), FopenFlags::FOPEN_NOFLUSH);
        assert_eq!(
            of(libc::O_RDONLY | libc::O_NOATIME),
            FopenFlags::FOPEN_NOFLUSH
        );
        for f in [
            libc::O_WRONLY,
            libc::O_RDWR,
            libc::O_WRONLY | libc::O_APPEND,
        ] {
            assert_eq!(of(f), FopenFlags::empty(), "{f:#o}");
        }
    }

    #[test]
    fn the_config_carries_threads_names_permissions_and_acl() {
        let opts = MountOptions {
            threads: 0,
            fsname: "src".into(),
            ..MountOptions::default()
        };
        let cfg = fuser_config(&opts, "loom-noop");
        assert_eq!(cfg.n_threads, Some(1), "at least one worker");
        assert!(cfg.clone_fd);
        assert_eq!(
            cfg.mount_options,
            vec![
                fuser::MountOption::FSName("src".into()),
                fuser::MountOption::Subtype("loom-noop".into()),
                fuser::MountOption::DefaultPermissions,
            ]
        );
        assert_eq!(cfg.acl, fuser::SessionACL::Owner);
        let shared = fuser_config(
            &MountOptions {
                allow_other: true,
                ..MountOptions::default()
            },
            "loom",
        );
        assert_eq!(shared.acl, fuser::SessionACL::All);
    }
}
