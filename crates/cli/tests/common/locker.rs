//! Lock takers for the lock tests: helper processes of uid 65534 that
//! take flock, POSIX and OFD locks on command, one answer per command,
//! and the cluster of two mounts they use.

use super::*;
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
/// - `flock ex|sh|un [nb]`: flock(2), with LOCK_NB given `nb`;
/// - `pread OFFSET LEN`: answers "data N SHA256" of the bytes read;
/// - `pwrite OFFSET TEXT`: writes TEXT there (answers "ok").
pub const HELPER: &str = r#"
import fcntl, hashlib, os, struct, sys

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
        elif op == "pread":
            b = os.pread(fd, int(w[1]), int(w[0]))
            say("data %d %s" % (len(b), hashlib.sha256(b).hexdigest()))
            continue
        elif op == "pwrite":
            off, _, text = rest.partition(" ")
            os.pwrite(fd, text.encode(), int(off))
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
pub type Event = (String, Option<String>);

/// Every line the test's helpers print, in the order they arrive. Each
/// step is a request and its answer, so a line from any other helper (a
/// waiter granted too early) shows up out of turn.
pub struct Events {
    pub tx: mpsc::Sender<Event>,
    pub rx: mpsc::Receiver<Event>,
    /// Helpers the test killed or let exit: the end of their output is
    /// no news.
    pub gone: RefCell<HashSet<String>>,
    /// Where each helper's standard error is kept.
    pub logs: PathBuf,
}

impl Events {
    pub fn new(c: &Cluster) -> Rc<Events> {
        let (tx, rx) = mpsc::channel();
        Rc::new(Events {
            tx,
            rx,
            gone: RefCell::default(),
            logs: c.tmp.path().to_path_buf(),
        })
    }

    pub fn log(&self, who: &str) -> PathBuf {
        let slug: String = who
            .chars()
            .map(|ch| if ch.is_ascii_alphanumeric() { ch } else { '_' })
            .collect();
        self.logs.join(format!("locker-{slug}.stderr"))
    }

    /// The next line any helper prints, waited for at most 20 s.
    pub fn next(&self, awaited: &str) -> (String, String) {
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
    pub fn quiet(&self, why: &str) {
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
    pub fn all_of(&self, want: &[(&Locker, &str)], why: &str) {
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
pub struct Locker {
    pub name: String,
    /// The helper's own pid (setpriv executes python in its place).
    pub pid: u32,
    child: Option<Child>,
    to: Option<ChildStdin>,
    pub ev: Rc<Events>,
}

impl Locker {
    pub fn start(ev: &Rc<Events>, name: &str) -> Locker {
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

    pub fn send(&mut self, cmd: &str) {
        let name = self.name.clone();
        let to = self.to.as_mut().expect("the helper's stdin");
        writeln!(to, "{cmd}")
            .and_then(|_| to.flush())
            .unwrap_or_else(|e| panic!("sending `{cmd}` to {name}: {e}"));
    }

    /// The next line any helper prints, which must be this one's.
    pub fn answer(&self, awaited: &str) -> String {
        let (who, line) = self.ev.next(&format!("{}'s {awaited}", self.name));
        assert!(
            who == self.name,
            "the test waited for {}'s {awaited}, but {who} said {line:?} first",
            self.name
        );
        line
    }

    /// Send `cmd` and read its answer.
    pub fn ask(&mut self, cmd: &str) -> String {
        self.send(cmd);
        self.answer(&format!("answer to `{cmd}`"))
    }

    pub fn expect(&mut self, cmd: &str, want: &str, why: &str) {
        let got = self.ask(cmd);
        assert!(
            got == want,
            "{}: `{cmd}` answered {got:?}, not {want:?}: {why}",
            self.name
        );
    }

    pub fn ok(&mut self, cmd: &str, why: &str) {
        self.expect(cmd, "ok", why);
    }

    /// `cmd` is refused for a conflict with EAGAIN (EWOULDBLOCK), as
    /// flock(2) with LOCK_NB and F_OFD_SETLK must be.
    pub fn would_block(&mut self, cmd: &str, why: &str) {
        self.expect(cmd, &format!("err {}", libc::EAGAIN), why);
    }

    /// A record lock refused for a conflict: F_SETLK may say EAGAIN or
    /// EACCES.
    pub fn refused(&mut self, cmd: &str, why: &str) {
        let got = self.ask(cmd);
        let conflict = [libc::EAGAIN, libc::EACCES].map(|e| format!("err {e}"));
        assert!(
            conflict.contains(&got),
            "{}: `{cmd}` answered {got:?}, not EAGAIN or EACCES: {why}",
            self.name
        );
    }

    /// A `getlk`/`ofdgetlk` that must find no lock in the way.
    pub fn free(&mut self, cmd: &str, why: &str) {
        let got = self.ask(cmd);
        assert!(
            got.starts_with("lk un "),
            "{}: `{cmd}` answered {got:?}, not F_UNLCK: {why}",
            self.name
        );
    }

    /// Open `dir/file` (made if missing).
    pub fn open(&mut self, dir: &Path, file: &str) {
        let path = dir.join(file);
        self.ok(
            &format!("open {}", path.display()),
            "opening the file read-write as uid 65534",
        );
    }

    /// Send a blocking `cmd`; the helper said "waiting" (it is about to
    /// make the call, or in it).
    pub fn start_waiting(&mut self, cmd: &str) {
        self.send(cmd);
        let got = self.answer(&format!("\"waiting\" before `{cmd}`"));
        assert!(
            got == "waiting",
            "{}: `{cmd}` answered {got:?} instead of starting to wait",
            self.name
        );
    }

    /// The blocking request started last is granted (within 20 s).
    pub fn granted(&self, why: &str) {
        let got = self.answer("answer to the request it waits in");
        assert!(
            got == "ok",
            "{}: its waiting request answered {got:?}, not ok: {why}",
            self.name
        );
    }

    /// SIGKILL, and wait (at most 20 s) until it is gone.
    pub fn kill(&mut self) {
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
    pub fn exit(&mut self) {
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
pub fn two_mounts(mdts: u32, mdt: u32) -> (Cluster, PathBuf, PathBuf) {
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
pub fn type_and_pid(answer: &str) -> (String, String) {
    let w: Vec<&str> = answer.split(' ').collect();
    assert!(
        w.len() == 5 && w[0] == "lk",
        "{answer:?} is no F_GETLK answer"
    );
    (w[1].to_string(), w[4].to_string())
}
