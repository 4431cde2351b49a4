//! Send and receive under crashes (issue #30, point 6): `loom receive`
//! killed -9, an MDT of the receiving cluster killed -9, an OST of the
//! sending cluster killed -9, each in the middle of a transfer. Sending
//! the same stream again (after restarting the server) finishes it: the
//! replica is the sent tree exactly, its file system's fsck is clean,
//! and the replica's snapshot is there whole.
mod common;
use common::*;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8")
}

/// A tree of `dirs` directories of `files` files each, and a large file.
fn populate(root: &Path, dirs: usize, files: usize) {
    for d in 0..dirs {
        let dir = root.join(format!("d{d}"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        for f in 0..files {
            std::fs::write(
                dir.join(format!("f{f}")),
                format!("{d}/{f}\n").repeat(f % 7 + 1),
            )
            .expect("write");
        }
    }
    std::fs::write(
        root.join("large"),
        (0..(6u32 << 20))
            .map(|i| (i >> 9) as u8)
            .collect::<Vec<u8>>(),
    )
    .expect("write large");
}

/// Start `sh -c CMD` (a send, a receive, or both piped) with standard
/// error read line by line.
fn start(cmd: &str) -> (Child, impl Iterator<Item = String>) {
    let mut child = Command::new("bash")
        .arg("-c")
        .arg(cmd)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let err = child.stderr.take().expect("stderr");
    let lines = BufReader::new(err).lines().map_while(Result::ok);
    (child, lines)
}

/// Wait for a progress line of `who` ("send" or "receive") counting at
/// least `n` (records received, or inodes sent): well into the transfer.
fn wait_for_progress(lines: &mut impl Iterator<Item = String>, who: &str, n: u64) {
    let mut seen = Vec::new();
    for l in lines.by_ref() {
        let count = l
            .strip_prefix(&format!("{who}: "))
            .and_then(|r| r.split_whitespace().next())
            .and_then(|w| w.parse::<u64>().ok());
        if count.is_some_and(|c| c >= n) {
            return;
        }
        seen.push(l);
    }
    panic!("{who} ended before {n}: {seen:?}");
}

fn receive_all(dir: &Path, stream: &Path) -> String {
    let o = Command::new(loom_bin())
        .args(["receive", s(dir)])
        .stdin(std::fs::File::open(stream).expect("stream"))
        .output()
        .expect("loom receive");
    let said = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "loom receive: {said}");
    said
}

fn same(a: &Path, b: &Path) {
    assert_eq!(
        sh(&format!("diff -r {} {} && echo same", s(a), s(b))),
        "same\n",
        "the replica is the sent tree"
    );
}

#[test]
fn transfers_cut_by_kill9_finish_when_sent_again() {
    let mut a = Cluster::up(1, 2, &[]);
    let mut b = Cluster::up(2, 2, &[]);
    let src = a.mnt.join("src");
    populate(&src, 8, 120);
    loom_ok(&["snapshot", "create", s(&a.mnt), "s1"]);
    let stream = a.tmp.path().join("s1.stream");
    sh(&format!(
        "{} send {} s1 > {} 2>/dev/null",
        s(&loom_bin()),
        s(&src),
        s(&stream)
    ));

    // 1. The receiving process killed -9. It is given all of the stream
    // but its last 2 MiB (more than its 1 MiB read buffer and the pipe's),
    // so it cannot have finished when the kill reaches it, however fast
    // it runs; the kill comes once it has taken in all it was given.
    let one = b.mnt.join("one");
    std::fs::create_dir(&one).expect("mkdir one");
    let whole = std::fs::read(&stream).expect("read the stream");
    assert!(whole.len() > 4 << 20, "stream of {} bytes", whole.len());
    let mut child = Command::new(loom_bin())
        .args(["receive", s(&one)])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn loom receive");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr"))
        .lines()
        .map_while(Result::ok);
    let mut input = child.stdin.take().expect("stdin");
    let prefix = whole[..whole.len() - (2 << 20)].to_vec();
    let feeder = std::thread::spawn(move || {
        use std::io::Write;
        input.write_all(&prefix).expect("feed the receive");
        input // kept open: the receive waits for the rest
    });
    // Its first progress line comes after its first checkpoint.
    wait_for_progress(&mut lines, "receive", 1);
    let input = feeder.join().expect("feeder");
    child.kill().expect("kill -9 the receive");
    drop(input);
    let _ = child.wait();
    let said = receive_all(&one, &stream);
    assert!(said.contains("resumed at record"), "{said}");
    same(&src, &one);

    // 2. An MDT of the receiving cluster killed -9 mid-way, then back.
    let two = b.mnt.join("two");
    loom_ok(&["mkdir", "-i", "1", s(&two)]);
    let (mut child, mut lines) = start(&format!(
        "exec {} receive {} < {}",
        s(&loom_bin()),
        s(&two),
        s(&stream)
    ));
    wait_for_progress(&mut lines, "receive", 1500);
    b.kill9("mdt1");
    b.restart("mdt1");
    // It finishes by itself (its changes replayed), or stops and is
    // finished by sending the stream again.
    let finished = child.wait().expect("wait").success();
    let said = receive_all(&two, &stream);
    assert!(finished || said.contains("resumed at record"), "{said}");
    same(&src, &two);

    // 3. An OST of the sending cluster killed -9 during a piped transfer.
    let three = b.mnt.join("three");
    std::fs::create_dir(&three).expect("mkdir three");
    let cmd = format!(
        "set -o pipefail; {0} send {1} s1 | {0} receive {2}",
        s(&loom_bin()),
        s(&src),
        s(&three)
    );
    let (mut child, mut lines) = start(&cmd);
    wait_for_progress(&mut lines, "send", 200);
    a.kill9("ost0");
    a.restart("ost0");
    let _ = child.wait();
    let o = Command::new("bash")
        .arg("-c")
        .arg(&cmd)
        .output()
        .expect("pipe again");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    same(&src, &three);

    // Nothing half made anywhere, and the replica's snapshot is whole.
    let (code, out) = fsck(&b, &[]);
    assert_eq!(code, 0, "fsck of the receiving file system: {out}");
    let (code, out) = fsck(&a, &[]);
    assert_eq!(code, 0, "fsck of the sending file system: {out}");
    let snap = b.mnt.join(".snapshots/s1");
    same(&src, &snap.join("one"));
}
