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
use common::*;
use std::cell::RefCell;
use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Stdio};
use std::rc::Rc;
use std::sync::mpsc;
use std::time::Duration;

/// A lock taker, run as uid 65534: it prints "pid N", then reads one
/// command a line and answers each with one line ("ok", "err ERRNO", or
/// for a get "lk TYPE START LEN PID"), after "waiting" for a command that
/// may block:
///
/// - `open PATH`: open PATH read-write (made if missing, mode 0666),
///   closing the file open before;
/// - `close`;
/// - `lock rd|wr START LEN [wait]`: F_SETLK (F_SETLKW with `wait`);
/// - `unlock START LEN`: F_SETLK of F_UNLCK;
/// - `getlk rd|wr START LEN`: F_GETLK;
/// - `ofd rd|wr START LEN [wait]`, `ofdgetlk rd|wr START LEN`: the same
///   as open file description locks (F_OFD_SETLK 37, F_OFD_SETLKW 38,
///   F_OFD_GETLK 36);
/// - `flock ex|sh|un [nb]`: flock(2), with LOCK_NB given `nb`.
const HELPER: &str = r#"
import fcntl, os, struct, sys

# struct flock on x86_64 Linux: short l_type, short l_whence, (4 bytes
# padding) off_t l_start, off_t l_len, pid_t l_pid, (4 bytes padding).
FLOCK = "hhqqi4x"
assert struct.calcsize(FLOCK) == 32
TYPES = {"rd": fcntl.F_RDLCK, "wr": fcntl.F_WRLCK, "un": fcntl.F_UNLCK}
NAMES = {t: n for n, t in TYPES.items()}
# (without waiting, waiting) and the get, for process-owned and OFD locks.
SET = {"lock": (fcntl.F_SETLK, fcntl.F_SETLKW), "ofd": (37, 38)}
GET = {"getlk": fcntl.F_GETLK, "ofdgetlk": 36}
FLOCKS = {"ex": fcntl.LOCK_EX, "sh": fcntl.LOCK_SH, "un": fcntl.LOCK_UN}
fd = -1

def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()

def flock(kind, start, length):
    return struct.pack(FLOCK, TYPES[kind], os.SEEK_SET, int(start), int(length), 0)

say("pid %d" % os.getpid())
for line in sys.stdin:
    op, _, rest = line.strip().partition(" ")
    w = rest.split()
    try:
        if op == "open":
            if fd >= 0:
                os.close(fd)
            fd = os.open(rest, os.O_RDWR | os.O_CREAT, 0o666)
        elif op == "close":
            os.close(fd)
            fd = -1
        elif op in SET:
            wait = w[3:] == ["wait"]
            if wait:
                say("waiting")
            fcntl.fcntl(fd, SET[op][wait], flock(*w[:3]))
        elif op == "unlock":
            fcntl.fcntl(fd, fcntl.F_SETLK, flock("un", *w[:2]))
        elif op in GET:
            got = fcntl.fcntl(fd, GET[op], flock(*w[:3]))
            t, _, start, length, pid = struct.unpack(FLOCK, got)
            say("lk %s %d %d %d" % (NAMES.get(t, t), start, length, pid))
            continue
        elif op == "flock":
            how = FLOCKS[w[0]]
            if w[1:] == ["nb"]:
                how |= fcntl.LOCK_NB
            elif w[0] != "un":
                say("waiting")
            fcntl.flock(fd, how)
        else:
            say("unknown command: " + line.strip())
            continue
        say("ok")
    except OSError as e:
        say("err %d" % e.errno)
"#;

/// What a helper printed: a line, or None once its output ended.
type Event = (String, Option<String>);

/// Every line the test's helpers print, in the order they arrive. Each
/// step is a request and its answer, so a line from any other helper (a
/// waiter granted too early) shows up out of turn.
struct Events {
    tx: mpsc::Sender<Event>,
    rx: mpsc::Receiver<Event>,
    /// Helpers the test killed or let exit: the end of their output is
    /// no news.
    gone: RefCell<HashSet<String>>,
    /// Where each helper's standard error is kept.
    logs: PathBuf,
}

impl Events {
    fn new(c: &Cluster) -> Rc<Events> {
        let (tx, rx) = mpsc::channel();
        Rc::new(Events {
            tx,
            rx,
            gone: RefCell::default(),
            logs: c.tmp.path().to_path_buf(),
        })
    }

    fn log(&self, who: &str) -> PathBuf {
        let slug: String = who
            .chars()
            .map(|ch| if ch.is_ascii_alphanumeric() { ch } else { '_' })
            .collect();
        self.logs.join(format!("locker-{slug}.stderr"))
    }

    /// The next line any helper prints, waited for at most 20 s.
    fn next(&self, awaited: &str) -> (String, String) {
        loop {
            match self.rx.recv_timeout(Duration::from_secs(20)) {
                Ok((who, Some(line))) => return (who, line),
                Ok((who, None)) if self.gone.borrow().contains(&who) => continue,
                Ok((who, None)) => panic!(
                    "{who} ended while the test waited for {awaited}; its stderr:\n{}",
                    std::fs::read_to_string(self.log(&who)).unwrap_or_default()
                ),
                Err(_) => {
                    panic!("no helper said anything within 20 s; the test waited for {awaited}")
                }
            }
        }
    }

    /// No helper said anything since the answers the test read.
    fn quiet(&self, why: &str) {
        loop {
            match self.rx.try_recv() {
                Ok((who, None)) if self.gone.borrow().contains(&who) => continue,
                Ok((who, line)) => panic!("{who} said {line:?} out of turn: {why}"),
                Err(_) => return,
            }
        }
    }

    /// Each (helper, line) of `want` arrives, in any order, and nothing
    /// else does.
    fn all_of(&self, want: &[(&Locker, &str)], why: &str) {
        let mut left: Vec<(String, String)> = want
            .iter()
            .map(|(l, line)| (l.name.clone(), line.to_string()))
            .collect();
        while !left.is_empty() {
            let got = self.next(&format!("{left:?} ({why})"));
            let Some(i) = left.iter().position(|w| *w == got) else {
                panic!(
                    "{} said {:?} while the test waited for {left:?}: {why}",
                    got.0, got.1
                );
            };
            left.remove(i);
        }
    }
}

/// One helper process of uid 65534 (see [`HELPER`]), killed when dropped.
struct Locker {
    name: String,
    /// The helper's own pid (setpriv executes python in its place).
    pid: u32,
    child: Option<Child>,
    to: Option<ChildStdin>,
    ev: Rc<Events>,
}

impl Locker {
    fn start(ev: &Rc<Events>, name: &str) -> Locker {
        let log = std::fs::File::create(ev.log(name)).expect("a file for the helper's stderr");
        let mut child = python3(true)
            .arg("-c")
            .arg(HELPER)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("python3 as uid 65534");
        let out = child.stdout.take().expect("the helper's stdout");
        let tx = ev.tx.clone();
        let who = name.to_string();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send((who.clone(), Some(line))).is_err() {
                    return;
                }
            }
            let _ = tx.send((who, None));
        });
        let to = child.stdin.take();
        let mut l = Locker {
            name: name.to_string(),
            pid: 0,
            child: Some(child),
            to,
            ev: Rc::clone(ev),
        };
        let hello = l.answer("pid");
        l.pid = hello
            .strip_prefix("pid ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("{name} started with {hello:?}, not its pid"));
        l
    }

    fn send(&mut self, cmd: &str) {
        let name = self.name.clone();
        let to = self.to.as_mut().expect("the helper's stdin");
        writeln!(to, "{cmd}")
            .and_then(|_| to.flush())
            .unwrap_or_else(|e| panic!("sending `{cmd}` to {name}: {e}"));
    }

    /// The next line any helper prints, which must be this one's.
    fn answer(&self, awaited: &str) -> String {
        let (who, line) = self.ev.next(&format!("{}'s {awaited}", self.name));
        assert!(
            who == self.name,
            "the test waited for {}'s {awaited}, but {who} said {line:?} first",
            self.name
        );
        line
    }

    /// Send `cmd` and read its answer.
    fn ask(&mut self, cmd: &str) -> String {
        self.send(cmd);
        self.answer(&format!("answer to `{cmd}`"))
    }

    fn expect(&mut self, cmd: &str, want: &str, why: &str) {
        let got = self.ask(cmd);
        assert!(
            got == want,
            "{}: `{cmd}` answered {got:?}, not {want:?}: {why}",
            self.name
        );
    }

    fn ok(&mut self, cmd: &str, why: &str) {
        self.expect(cmd, "ok", why);
    }

    /// `cmd` is refused for a conflict with EAGAIN (EWOULDBLOCK), as
    /// flock(2) with LOCK_NB and F_OFD_SETLK must be.
    fn would_block(&mut self, cmd: &str, why: &str) {
        self.expect(cmd, &format!("err {}", libc::EAGAIN), why);
    }

    /// A record lock refused for a conflict: F_SETLK may say EAGAIN or
    /// EACCES.
    fn refused(&mut self, cmd: &str, why: &str) {
        let got = self.ask(cmd);
        let conflict = [libc::EAGAIN, libc::EACCES].map(|e| format!("err {e}"));
        assert!(
            conflict.contains(&got),
            "{}: `{cmd}` answered {got:?}, not EAGAIN or EACCES: {why}",
            self.name
        );
    }

    /// A `getlk`/`ofdgetlk` that must find no lock in the way.
    fn free(&mut self, cmd: &str, why: &str) {
        let got = self.ask(cmd);
        assert!(
            got.starts_with("lk un "),
            "{}: `{cmd}` answered {got:?}, not F_UNLCK: {why}",
            self.name
        );
    }

    /// Open `dir/file` (made if missing).
    fn open(&mut self, dir: &Path, file: &str) {
        let path = dir.join(file);
        self.ok(
            &format!("open {}", path.display()),
            "opening the file read-write as uid 65534",
        );
    }

    /// Send a blocking `cmd`; the helper said "waiting" (it is about to
    /// make the call, or in it).
    fn start_waiting(&mut self, cmd: &str) {
        self.send(cmd);
        let got = self.answer(&format!("\"waiting\" before `{cmd}`"));
        assert!(
            got == "waiting",
            "{}: `{cmd}` answered {got:?} instead of starting to wait",
            self.name
        );
    }

    /// The blocking request started last is granted (within 20 s).
    fn granted(&self, why: &str) {
        let got = self.answer("answer to the request it waits in");
        assert!(
            got == "ok",
            "{}: its waiting request answered {got:?}, not ok: {why}",
            self.name
        );
    }

    /// SIGKILL, and wait (at most 20 s) until it is gone.
    fn kill(&mut self) {
        self.ev.gone.borrow_mut().insert(self.name.clone());
        let mut child = self.child.take().expect("a running helper");
        child.kill().expect("SIGKILL the helper");
        let reaped = within(move || child.wait().is_ok());
        assert_eq!(
            reaped,
            Some(true),
            "{} was not gone within 20 s of SIGKILL",
            self.name
        );
    }

    /// End its input: it exits (at most 20 s), its file closed by the
    /// exit, not by the helper.
    fn exit(&mut self) {
        self.ev.gone.borrow_mut().insert(self.name.clone());
        drop(self.to.take());
        let mut child = self.child.take().expect("a running helper");
        let exited = within(move || child.wait().map(|s| s.success()).unwrap_or(false));
        assert_eq!(
            exited,
            Some(true),
            "{} did not exit cleanly within 20 s of the end of its input",
            self.name
        );
    }
}

impl Drop for Locker {
    fn drop(&mut self) {
        drop(self.to.take());
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            // A helper in a lock request its mount has sent on stays until
            // the mount answers, which the cluster's teardown (after this)
            // makes it do: reaped aside, not waited for here.
            std::thread::spawn(move || {
                let _ = child.wait();
            });
        }
    }
}

/// A cluster of `mdts` MDTs mounted a second time, and a directory on MDT
/// `mdt` open to every user: that directory as mount 1 (`c.mnt`) and as
/// mount 2 see it.
fn two_mounts(mdts: u32, mdt: u32) -> (Cluster, PathBuf, PathBuf) {
    let mut c = Cluster::up(mdts, 1, &[]);
    let m2 = c.second_mount("m2");
    let d1 = if mdt == 0 {
        c.open_dir("locks")
    } else {
        use std::os::unix::fs::PermissionsExt;
        let d = c.path("locks");
        let index = mdt.to_string();
        loom_ok(&["mkdir", "-i", index.as_str(), d.to_str().expect("utf-8")]);
        for (p, mode) in [(d.as_path(), 0o777), (c.tmp.path(), 0o755)] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
        }
        d
    };
    assert_eq!(mdt_of(&d1), mdt, "the MDT of {}", d1.display());
    let d2 = m2.join("locks");
    assert!(d2.is_dir(), "mount 2 does not see {}", d1.display());
    (c, d1, d2)
}

/// A `getlk` answer "lk TYPE START LEN PID": its type and pid.
fn type_and_pid(answer: &str) -> (String, String) {
    let w: Vec<&str> = answer.split(' ').collect();
    assert!(
        w.len() == 5 && w[0] == "lk",
        "{answer:?} is no F_GETLK answer"
    );
    (w[1].to_string(), w[4].to_string())
}

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
