//! Issue #8 (a create is one round trip, with no server round trip
//! waited for after it) and #9 (a writer's lease): a file this mount made
//! is written under its size lease, so close(2) has no size to report and
//! waits only for the data to land on the OSTs; the size reaches the MDT
//! at the release, unwaited, or when another mount's stat recalls the
//! lease. Run by an unprivileged user: close returns with the MDT
//! stopped; the other mount sees every byte written, also while the file
//! is still open there, and its own change (an explicit mtime) is not
//! undone by the writer's report. And with every OST stopped, a create,
//! its writes and its close all return (the writes go behind under the
//! mount's space grants, the close is not a FUSE round trip at all:
//! FOPEN_NOFLUSH); another mount then reads every byte.
mod common;
use common::*;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// A writer run as uid and gid 65534 (perl: essential on Debian): each
/// line it is sent names a step; it answers each with a line once done.
const WRITER: &str = r#"
use Fcntl;
$| = 1;
my ($d, $fh) = ($ARGV[0]);
while (my $line = <STDIN>) {
    my @step = split ' ', $line;
    if ($step[0] eq "create") {
        sysopen($fh, "$d/$step[1]", O_CREAT | O_WRONLY, 0644) or die "create: $!";
        syswrite($fh, "a" x $step[2]) == $step[2] or die "write: $!";
    } elsif ($step[0] eq "append") {
        syswrite($fh, "b" x $step[1]) == $step[1] or die "append: $!";
    } elsif ($step[0] eq "close") {
        close($fh) or die "close: $!";
    }
    print "done $step[0]\n";
}
"#;

struct Writer {
    child: Child,
    to: ChildStdin,
    from: BufReader<ChildStdout>,
}

impl Writer {
    fn start(dir: &Path) -> Writer {
        let mut child = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .args(["perl", "-e", WRITER])
            .arg(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("perl as nobody");
        let to = child.stdin.take().expect("stdin");
        let from = BufReader::new(child.stdout.take().expect("stdout"));
        Writer { child, to, from }
    }

    fn send(&mut self, step: &str) {
        writeln!(self.to, "{step}").expect("send a step");
        self.to.flush().expect("flush the step");
    }

    /// The writer's answer to the last step ("" if it ended).
    fn answer(&mut self) -> String {
        let mut line = String::new();
        self.from.read_line(&mut line).expect("read an answer");
        line.trim().to_string()
    }

    fn step(&mut self, step: &str) {
        self.send(step);
        let want = format!("done {}", step.split(' ').next().unwrap_or(step));
        assert_eq!(self.answer(), want, "step {step}");
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn size(p: &Path) -> u64 {
    std::fs::metadata(p).expect("stat").len()
}

#[test]
fn a_close_after_a_create_needs_no_mdt_and_other_mounts_see_its_size() {
    let mut c = Cluster::up(1, 2, &[]);
    let shared = c.path("shared");
    std::fs::create_dir(&shared).expect("mkdir");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
    let m1 = c.second_mount("mnt1");
    let mut w = Writer::start(&m1.join("shared"));

    // Written, still open on mount 1: the main mount's stat recalls the
    // size lease, and mount 1 reports what it wrote before answering.
    w.step("create open 5000");
    assert_eq!(size(&shared.join("open")), 5000, "the open file's size");
    // The lease went: each write now reports its size itself.
    w.step("append 3000");
    assert_eq!(size(&shared.join("open")), 8000, "after a write past it");
    let data = std::fs::read(shared.join("open")).expect("read");
    assert!(data[..5000].iter().all(|&b| b == b'a') && data[5000..].iter().all(|&b| b == b'b'));
    w.step("close");

    // Another mount's change recalls the size first: an explicit mtime
    // set here is not undone by mount 1's report (of its write's time) at
    // its close.
    w.step("create touched 5000");
    let old = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
    std::fs::File::options()
        .write(true)
        .open(shared.join("touched"))
        .and_then(|f| f.set_modified(old))
        .expect("set the mtime");
    w.step("close");
    for m in [&shared, &m1.join("shared")] {
        let st = std::fs::metadata(m.join("touched")).expect("stat");
        assert_eq!(st.modified().expect("mtime"), old, "{}", m.display());
        assert_eq!(st.len(), 5000);
    }

    // A new file's close needs no MDT: it waits for the data to land on
    // the OSTs only (it would wait for the stopped MDT to learn the size).
    w.step("create closed 100");
    let frozen = Stopped::new(c.pid("mdt0"));
    w.send("close");
    let answer = within(move || (w.answer(), w)).map(|(a, w)| {
        drop(w);
        a
    });
    assert_eq!(
        answer.as_deref(),
        Some("done close"),
        "close waited for the MDT"
    );
    drop(frozen);
    // Reported at the release, or recalled by this stat: all there.
    assert_eq!(
        std::fs::read(shared.join("closed")).expect("read"),
        vec![b'a'; 100]
    );
    let m1_size = size(&m1.join("shared/closed"));
    assert_eq!(m1_size, 100, "mount 1 sees its own size");
}

#[test]
fn a_create_its_writes_and_its_close_wait_for_no_ost() {
    let mut c = Cluster::up(1, 2, &[]);
    let shared = c.path("shared");
    std::fs::create_dir(&shared).expect("mkdir");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
    // Stripes over both OSTs, so that every write below needs both.
    loom_ok(&[
        "setstripe",
        "-c",
        "-1",
        "-S",
        "64K",
        shared.to_str().expect("utf8"),
    ]);
    let m1 = c.second_mount("mnt1");
    let mut w = Writer::start(&m1.join("shared"));
    // A first file earns the mount its grants on both OSTs (a write
    // without one is waited for).
    w.step("create first 300000");
    w.step("close");
    let frozen: Vec<Stopped> = ["ost0", "ost1"]
        .iter()
        .map(|o| Stopped::new(c.pid(o)))
        .collect();
    let mut answers = Vec::new();
    for step in ["create behind 200000", "append 50000", "close"] {
        w.send(step);
        let (answer, back) = within(move || (w.answer(), w)).unwrap_or_else(|| {
            panic!("{step} waited for the stopped OSTs");
        });
        w = back;
        answers.push(answer);
    }
    assert_eq!(answers, ["done create", "done append", "done close"]);
    drop(frozen);
    // The main mount's read recalls the size; the data is all there.
    let mut want = vec![b'a'; 200000];
    want.extend(vec![b'b'; 50000]);
    assert!(std::fs::read(shared.join("behind")).expect("read") == want);
    assert_eq!(
        c.stripes(shared.join("behind").to_str().expect("utf8"))
            .len(),
        2,
        "the file must span both OSTs"
    );
}
