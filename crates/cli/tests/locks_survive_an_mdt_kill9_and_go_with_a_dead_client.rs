//! Issue #29, point 1: locks outlive their MDT and not their client.
//!
//! - An MDT killed with SIGKILL and started again keeps nothing of its
//!   locks; the clients hold them again (`ReclaimLocks`) as they find
//!   their connection lost. Until every client that locked there has
//!   (or the grace period ended), the MDT grants no lock and answers no
//!   F_GETLK: the lock held before the crash is seen through the other
//!   mount, with its holder, and refused to it.
//! - A client killed with SIGKILL (its mount's daemon) loses its locks
//!   once its connection has stayed dead a few seconds: a process waiting
//!   in F_SETLKW through the other mount is granted the lock.
//! - The client library takes the same locks as the mounts: a lock taken
//!   by a library client is refused to a mount, F_GETLK names it, and a
//!   library wait is woken by a mount's release.
mod common;
use common::library_client;
use common::locker::*;
use loom_client::{Caller, ClientOptions};
use loom_proto::lock::LockKind;
use loom_proto::Errno;

#[test]
fn a_lock_held_before_an_mdt_kill9_is_held_after_it() {
    let (c, d1, d2) = two_mounts(1, 0);
    let ev = Events::new(&c);
    let mut holder = Locker::start(&ev, "holder on mount 1");
    let mut other = Locker::start(&ev, "other on mount 2");
    holder.open(&d1, "f");
    holder.ok("lock wr 0 100", "a write lock on bytes 0-99");
    other.open(&d2, "f");
    other.refused("lock wr 10 10", "held through mount 1 before the crash");

    c.kill9("mdt0");
    let mdt0 = c.start_armed("mdt0", "", 1);

    // Answered once mount 1's client held its lock again.
    let got = other.ask("getlk wr 0 10");
    assert_eq!(
        got,
        format!("lk wr 0 100 {}", holder.pid),
        "after the restart, F_GETLK through mount 2 sees the lock held through mount 1"
    );
    other.refused("lock wr 50 1", "the reclaimed lock keeps mount 2 out");
    other.ok("lock wr 100 10", "the bytes beside it are free");
    holder.ok("unlock 0 100", "mount 1 lets go");
    other.ok("lock wr 0 10", "then mount 2 takes it");
    holder.refused("lock rd 5 1", "and mount 1 is refused it");
    ev.quiet("every answer was read");
    // The mounts unmount while the MDT still serves them.
    drop((holder, other));
    drop(c);
    drop(mdt0);
}

#[test]
fn a_killed_client_loses_its_locks_and_a_waiter_is_granted() {
    let (c, d1, d2) = two_mounts(1, 0);
    let ev = Events::new(&c);
    let mut holder = Locker::start(&ev, "holder on mount 2");
    let mut waiter = Locker::start(&ev, "waiter on mount 1");
    holder.open(&d2, "f");
    holder.ok("lock wr 0 100", "a write lock through mount 2");
    waiter.open(&d1, "f");
    waiter.start_waiting("lock wr 0 100 wait");
    let m2 = d2.parent().expect("mount 2").to_path_buf();
    let daemon = nix::unistd::Pid::from_raw(c.mount_pid(&m2));
    nix::sys::signal::kill(daemon, nix::sys::signal::Signal::SIGKILL)
        .expect("SIGKILL mount 2's daemon");
    waiter.granted("mount 2's client died: its lock went");
    // Mount 2 is gone; its process's file is on a dead connection.
    holder.kill();
    ev.quiet("every answer was read");
}

#[test]
fn a_library_client_locks_as_the_mounts_do() {
    let (c, d1, _d2) = two_mounts(1, 0);
    let ev = Events::new(&c);
    let mut mount = Locker::start(&ev, "a process on mount 1");
    mount.open(&d1, "f");

    let (rt, client) = library_client(&c, ClientOptions::default());
    let me = Caller {
        uid: 65534,
        gid: 65534,
        groups: Vec::new(),
        pid: std::process::id(),
        umask: None,
    };
    let dir = rt
        .block_on(client.lookup(&me, loom_proto::Fid::ROOT, "locks"))
        .expect("lookup locks")
        .0;
    let file = rt
        .block_on(client.lookup(&me, dir.fid, "f"))
        .expect("lookup f")
        .0
        .fid;
    let owner = 7;
    rt.block_on(client.lock(&me, file, owner, LockKind::Write, 0, 99, false))
        .expect("the library takes a write lock");
    mount.refused("lock wr 50 1", "held by the library client");
    let got = mount.ask("getlk wr 0 1");
    assert_eq!(
        got,
        format!("lk wr 0 100 {}", std::process::id()),
        "F_GETLK through the mount names the library's lock"
    );
    rt.block_on(client.unlock(&me, file, owner, 0, 99))
        .expect("the library lets go");
    mount.ok("lock wr 0 10", "the mount takes it");
    let r = rt.block_on(client.lock(&me, file, owner, LockKind::Read, 5, 5, false));
    assert_eq!(
        r,
        Err(Errno::EAGAIN),
        "the library is refused the mount's lock"
    );
    // A library wait, woken by the mount's release.
    let waiting = {
        let client = client.clone();
        let me = me.clone();
        rt.spawn(async move {
            client
                .lock(&me, file, owner, LockKind::Read, 0, 9, true)
                .await
        })
    };
    mount.ok("unlock 0 10", "the mount lets go");
    let got = rt.block_on(async {
        tokio::time::timeout(std::time::Duration::from_secs(20), waiting).await
    });
    assert!(
        matches!(got, Ok(Ok(Ok(())))),
        "the library's wait is granted after the mount's release: {got:?}"
    );
    rt.block_on(client.unlock_owner(&me, file, owner))
        .expect("all of the owner's locks go");
    mount.ok("lock wr 0 100", "nothing of the library is left");
    rt.block_on(client.close());
    ev.quiet("every answer was read");
}
