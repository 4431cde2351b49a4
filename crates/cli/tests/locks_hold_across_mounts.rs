//! Issue #29, point 1: locks are coherent across every mount. The same
//! file is locked through two FUSE mounts of one file system, by an
//! unprivileged user (uid 65534) in a directory open to all, and each
//! mount sees the locks taken through the other:
//!
//! - flock(2): an exclusive flock through one mount refuses LOCK_EX and
//!   LOCK_SH with LOCK_NB through the other (EWOULDBLOCK); shared flocks
//!   from both coexist; an unlock, a close or the holder's exit through
//!   one mount hands the flock to the other.
//! - POSIX record locks (F_SETLK): a byte range held through one mount is
//!   refused through the other (EAGAIN or EACCES), the bytes beside it
//!   are not; read locks share and keep writers out; unlocking the middle
//!   of a range splits it in two. F_GETLK through either mount names the
//!   lock in the way: its type, its range and its holder's pid (both
//!   mounts are on this machine, so the pid is meaningful).
//! - Open file description locks (F_OFD_SETLK) exclude each other and
//!   record locks across mounts, and go with the closing of their file.
//! - F_SETLKW waits for a lock held through the other mount, and is woken
//!   when the holder closes the file there, or is killed (on a file of the
//!   second MDT).
//! - A deadlock between a process on each mount is answered EDEADLK to
//!   one of the two requests; the other is granted once the refused
//!   process lets go.
//!
//! Every step is a request to a helper process and its answer, read from
//! the helper's output: no step waits for time to pass, and a waiter
//! granted too early is caught saying so out of turn. (Library clients
//! are not covered here: only FUSE mounts.)
mod common;
use common::locker::*;

#[test]
fn flocks_exclude_and_share_across_mounts() {
    let (c, d1, d2) = two_mounts(1, 0);
    let ev = Events::new(&c);
    let mut a = Locker::start(&ev, "A on mount 1");
    let mut b = Locker::start(&ev, "B on mount 2");
    a.open(&d1, "flocked");
    b.open(&d2, "flocked");

    a.ok("flock ex nb", "nobody holds a flock on the file");
    b.would_block("flock ex nb", "A holds an exclusive flock through mount 1");
    b.would_block("flock sh nb", "A holds an exclusive flock through mount 1");
    // An unlock is answered once done: free for mount 2 at once, and now
    // mount 1 is the one refused.
    a.ok("flock un", "A lets go of its flock");
    b.ok("flock ex nb", "A let go of its flock through mount 1");
    a.would_block("flock ex nb", "B holds an exclusive flock through mount 2");
    a.would_block("flock sh nb", "B holds an exclusive flock through mount 2");
    b.ok("flock un", "B lets go of its flock");

    // Shared flocks from both mounts coexist, and keep an exclusive one
    // out (no flock is ever converted here: Linux may drop the old one).
    a.ok("flock sh nb", "nobody holds a flock on the file");
    b.ok("flock sh nb", "A's flock through mount 1 is only shared");
    a.ok("flock un", "A lets go of its share");
    a.would_block("flock ex nb", "B still shares the file through mount 2");
    b.ok("flock un", "B lets go of its share");
    a.ok("flock ex nb", "nobody holds a flock on the file any more");

    // A close through mount 1 releases the flock to a waiter on mount 2.
    b.start_waiting("flock ex");
    let mut checker = Locker::start(&ev, "checker on mount 1");
    checker.open(&d1, "flocked");
    checker.would_block("flock sh nb", "A holds an exclusive flock");
    ev.quiet("B's LOCK_EX must wait: A holds the file exclusively through mount 1");
    a.send("close");
    ev.all_of(
        &[(&a, "ok"), (&b, "ok")],
        "A's close through mount 1 must release its flock and grant B's waiting LOCK_EX on mount 2",
    );
    a.open(&d1, "flocked");
    a.would_block(
        "flock sh nb",
        "B was granted the exclusive flock through mount 2",
    );

    // B's exit (its file closed by the exit, never unlocked) hands the
    // flock to A's waiting LOCK_EX.
    a.start_waiting("flock ex");
    checker.would_block("flock sh nb", "B holds an exclusive flock");
    ev.quiet("A's LOCK_EX must wait: B holds the file exclusively through mount 2");
    b.exit();
    a.granted("B exited holding the flock through mount 2");
    checker.would_block("flock sh nb", "A now holds the exclusive flock");
}

#[test]
fn record_and_ofd_locks_exclude_across_mounts() {
    let (c, d1, d2) = two_mounts(1, 0);
    let ev = Events::new(&c);
    let mut a = Locker::start(&ev, "A on mount 1");
    let mut b = Locker::start(&ev, "B on mount 2");
    let (pa, pb) = (a.pid, b.pid);

    // Byte ranges exclude across mounts; the bytes beside them are free.
    a.open(&d1, "records");
    b.open(&d2, "records");
    a.ok("lock wr 0 100", "nobody holds a lock on the file");
    b.refused(
        "lock wr 50 10",
        "A holds [0,100) for writing through mount 1",
    );
    b.refused(
        "lock rd 50 10",
        "A holds [0,100) for writing through mount 1",
    );
    b.refused("lock wr 99 2", "byte 99 is A's");
    b.ok(
        "lock wr 100 100",
        "[100,200) is beside A's [0,100), not in it",
    );
    // F_GETLK through either mount names the lock in the way.
    let a_writes = format!("lk wr 0 100 {pa}");
    b.expect(
        "getlk wr 50 10",
        &a_writes,
        "F_GETLK through mount 2 must report A's write lock: its type, range and A's pid",
    );
    b.expect(
        "getlk rd 99 1",
        &a_writes,
        "a read of byte 99 conflicts with A's write lock",
    );
    a.expect(
        "getlk wr 150 10",
        &format!("lk wr 100 100 {pb}"),
        "F_GETLK through mount 1 must report B's write lock: its type, range and B's pid",
    );
    b.free("getlk wr 200 100", "nobody holds [200,300)");

    // Read locks share across mounts, and each keeps the other's writes out.
    a.ok("lock rd 200 100", "nobody holds [200,300)");
    b.ok("lock rd 200 100", "read locks from both mounts coexist");
    a.refused(
        "lock wr 200 100",
        "B holds a read lock on [200,300) through mount 2",
    );
    b.refused(
        "lock wr 250 10",
        "A holds a read lock on [200,300) through mount 1",
    );
    b.expect(
        "getlk wr 200 100",
        &format!("lk rd 200 100 {pa}"),
        "A's read lock (kept through its refused upgrade) is in the way of B's write",
    );
    b.free("getlk rd 200 100", "a read conflicts with no read lock");
    b.ok("unlock 200 100", "B lets go of its read lock");
    a.ok(
        "lock wr 200 100",
        "B let go: A's read lock may become a write lock",
    );
    b.refused("lock rd 250 10", "A now holds [200,300) for writing");

    // Unlocking the middle of a range splits it in two.
    a.open(&d1, "split");
    b.open(&d2, "split");
    a.ok("lock wr 0 100", "nobody holds a lock on the file");
    a.ok("unlock 40 20", "A unlocks the middle of its range");
    b.ok("lock wr 40 20", "A unlocked [40,60) out of its [0,100)");
    b.refused("lock wr 0 10", "A keeps [0,40)");
    b.refused("lock wr 90 10", "A keeps [60,100)");
    b.refused("lock wr 39 2", "byte 39 is still A's");
    b.expect(
        "getlk wr 0 40",
        &format!("lk wr 0 40 {pa}"),
        "the first piece of A's split lock",
    );
    b.expect(
        "getlk wr 60 40",
        &format!("lk wr 60 40 {pa}"),
        "the second piece of A's split lock",
    );
    a.refused("lock wr 45 5", "B holds [40,60) through mount 2");

    // Open file description locks.
    a.open(&d1, "ofd");
    b.open(&d2, "ofd");
    a.ok("ofd wr 0 100", "nobody holds a lock on the file");
    b.would_block(
        "ofd wr 50 10",
        "A holds an OFD write lock on [0,100) through mount 1",
    );
    b.ok("ofd wr 100 100", "[100,200) is beside A's OFD lock");
    // (An OFD lock's pid is -1 to F_GETLK: not compared.)
    let got = b.ask("ofdgetlk wr 0 10");
    assert!(
        got.starts_with("lk wr 0 100 "),
        "F_OFD_GETLK through mount 2 answered {got:?}, not A's OFD write lock on [0,100)"
    );
    b.refused(
        "lock wr 0 10",
        "a process's record lock conflicts with A's OFD lock through mount 1",
    );
    // An OFD lock goes when its open file is closed.
    b.start_waiting("ofd wr 0 10 wait");
    a.free(
        "ofdgetlk wr 0 10",
        "B's F_OFD_SETLKW must wait (A's own lock is no conflict to A)",
    );
    ev.quiet("B's F_OFD_SETLKW must wait: A holds [0,100) through mount 1");
    a.send("close");
    ev.all_of(
        &[(&a, "ok"), (&b, "ok")],
        "A's close through mount 1 must drop its OFD lock and grant B's waiting F_OFD_SETLKW",
    );
}

#[test]
fn a_blocked_lock_is_woken_by_a_release_through_the_other_mount() {
    // The file is on the second MDT: its locks are kept there.
    let (c, d1, d2) = two_mounts(2, 1);
    let ev = Events::new(&c);
    let mut a = Locker::start(&ev, "holder A on mount 1");
    let mut b = Locker::start(&ev, "waiter B on mount 2");
    let mut checker = Locker::start(&ev, "checker on mount 1");

    // Woken by a close through the other mount.
    a.open(&d1, "closed");
    b.open(&d2, "closed");
    checker.open(&d1, "closed");
    a.ok("lock wr 0 100", "nobody holds a lock on the file");
    b.start_waiting("lock wr 10 10 wait");
    checker.expect(
        "getlk wr 10 10",
        &format!("lk wr 0 100 {}", a.pid),
        "A's lock must still be in the way: B's F_SETLKW cannot have been granted",
    );
    ev.quiet("B's F_SETLKW must wait: A has not let go");
    a.send("close");
    ev.all_of(
        &[(&a, "ok"), (&b, "ok")],
        "A's close through mount 1 must release its lock and grant B's waiting F_SETLKW on mount 2",
    );
    checker.expect(
        "getlk wr 0 100",
        &format!("lk wr 10 10 {}", b.pid),
        "B holds the range it waited for, and A's lock is gone",
    );

    // Woken by the holder's death: SIGKILL, no unlock or close of its own.
    let mut k = Locker::start(&ev, "holder K on mount 1, to be killed");
    k.open(&d1, "killed");
    k.ok("lock wr 0 100", "nobody holds a lock on the file");
    b.open(&d2, "killed");
    checker.open(&d1, "killed");
    b.start_waiting("lock rd 50 100 wait");
    checker.expect(
        "getlk wr 50 100",
        &format!("lk wr 0 100 {}", k.pid),
        "K's lock must still be in the way: B's F_SETLKW cannot have been granted",
    );
    ev.quiet("B's F_SETLKW must wait while K lives");
    k.kill();
    b.granted("K was killed holding the lock through mount 1");
    checker.expect(
        "getlk wr 0 200",
        &format!("lk rd 50 100 {}", b.pid),
        "B holds the read lock it waited for, and the dead K's lock is gone",
    );
}

#[test]
fn a_deadlock_between_mounts_answers_edeadlk() {
    let (c, d1, d2) = two_mounts(1, 0);
    let ev = Events::new(&c);
    let mut a = Locker::start(&ev, "A on mount 1");
    let mut b = Locker::start(&ev, "B on mount 2");
    let mut checker = Locker::start(&ev, "checker on mount 1");
    a.open(&d1, "deadlock");
    b.open(&d2, "deadlock");
    checker.open(&d1, "deadlock");

    a.ok("lock wr 0 1", "nobody holds a lock on the file");
    b.ok("lock wr 1 1", "byte 1 is beside A's byte 0");
    a.start_waiting("lock wr 1 1 wait");
    checker.expect(
        "getlk wr 1 1",
        &format!("lk wr 1 1 {}", b.pid),
        "B must still hold byte 1: A waits for it",
    );
    ev.quiet("A's F_SETLKW must wait for B; waiting for B closes no cycle");
    b.start_waiting("lock wr 0 1 wait");

    // Each now waits for the other. The request that closes the cycle is
    // refused: B's, unless A's (sent first) reached the MDT after it.
    let (who, line) = ev.next("EDEADLK for B's F_SETLKW (or A's)");
    assert!(
        line == format!("err {}", libc::EDEADLK) && (who == a.name || who == b.name),
        "{who} said {line:?}; A on mount 1 and B on mount 2 each waited for a byte \
         the other holds, and one of them must have been answered EDEADLK"
    );
    let (refused, waiter) = if who == b.name {
        (&mut b, &a)
    } else {
        (&mut a, &b)
    };
    ev.quiet("the other F_SETLKW must go on waiting: the refused process keeps its byte");
    refused.send("close");
    ev.all_of(
        &[(&*refused, "ok"), (waiter, "ok")],
        "the refused process's close must release its byte to the other's waiting F_SETLKW",
    );
    let winner = (String::from("wr"), waiter.pid.to_string());
    for range in ["0 1", "1 1"] {
        let got = checker.ask(&format!("getlk wr {range}"));
        assert_eq!(
            type_and_pid(&got),
            winner,
            "F_GETLK of [{range}] answered {got:?}: {} must hold both bytes",
            waiter.name
        );
    }
}
