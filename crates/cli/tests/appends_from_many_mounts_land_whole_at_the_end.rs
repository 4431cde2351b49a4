//! Issue #29, point 2: O_APPEND is atomic across clients. Four writers,
//! two through each of two mounts of one file system, append numbered
//! records to one file at the same time, as uid 65534: two shell loops
//! that open the file with `>>` for every line (as the report
//! did, which lost about half the lines), and two processes that keep one
//! O_APPEND descriptor and write a record at a time. Every record is
//! there exactly once, whole, and the file's size is the sum of them, as
//! seen through both mounts. A second file is appended to through a
//! striped layout (records across stripe boundaries) the same way.
mod common;
use common::*;
use std::collections::HashMap;
use std::path::Path;

const LINES: usize = 300;

/// Start the four writers on `file` as seen through `m1` and `m2`; wait
/// for them all; return what each wrote (its tag and record length).
fn four_writers(m1: &Path, m2: &Path, file: &str, pad: usize) -> Vec<(String, usize)> {
    let mut children = Vec::new();
    let mut tags = Vec::new();
    for (k, m) in [m1, m2].into_iter().enumerate() {
        let path = m.join(file);
        let tag = format!("sh{k}");
        let filler = "x".repeat(pad);
        let script = format!(
            "for i in $(seq 1 {LINES}); do echo \"{tag} $i {filler}\" >> '{}'; done",
            path.display()
        );
        children.push(
            sh_as_nobody(&script)
                .spawn()
                .expect("a shell loop as uid 65534"),
        );
        tags.push((tag, pad));
        let tag = format!("py{k}");
        let code = format!(
            "import os\nfd = os.open({:?}, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)\n\
             for i in range(1, {LINES} + 1):\n    \
             line = ('{tag} %d ' % i + 'y' * {pad} + '\\n').encode()\n    \
             assert os.write(fd, line) == len(line)\nos.close(fd)\n",
            path.display().to_string()
        );
        children.push(
            python3(true)
                .arg("-c")
                .arg(code)
                .spawn()
                .expect("a python appender as uid 65534"),
        );
        tags.push((tag, pad));
    }
    for mut c in children {
        let ok = within(move || c.wait().map(|s| s.success()).unwrap_or(false));
        assert_eq!(ok, Some(true), "a writer failed or hung");
    }
    tags
}

/// Every writer's records are in `text` once each, whole.
fn check(text: &str, writers: &[(String, usize)], seen_through: &str) {
    let mut count: HashMap<(String, usize), usize> = HashMap::new();
    for line in text.lines() {
        let mut w = line.splitn(3, ' ');
        let (Some(tag), Some(i), Some(fill)) = (w.next(), w.next(), w.next()) else {
            panic!("a torn record {line:?} through {seen_through}");
        };
        let i: usize = i
            .parse()
            .unwrap_or_else(|_| panic!("a torn record {line:?} through {seen_through}"));
        let (_, pad) = writers
            .iter()
            .find(|(t, _)| t == tag)
            .unwrap_or_else(|| panic!("a record of no writer {line:?} through {seen_through}"));
        assert!(
            fill.len() == *pad && fill.bytes().all(|b| b == b'x' || b == b'y'),
            "record {line:?} is not whole through {seen_through}"
        );
        *count.entry((tag.to_string(), i)).or_default() += 1;
    }
    for (tag, _) in writers {
        for i in 1..=LINES {
            let n = count.get(&(tag.clone(), i)).copied().unwrap_or(0);
            assert_eq!(
                n, 1,
                "record {tag} {i} is there {n} times through {seen_through}"
            );
        }
    }
    assert_eq!(count.len(), writers.len() * LINES, "through {seen_through}");
}

#[test]
fn appends_from_four_writers_on_two_mounts_are_all_there_once() {
    let mut c = Cluster::up(1, 2, &[]);
    let d1 = c.open_dir("logs");
    let m2 = c.second_mount("m2");
    let d2 = m2.join("logs");
    // A plain file, and one striped over both OSTs with 64 KiB stripes,
    // whose records of 200 bytes cross stripe boundaries.
    loom_ok(&[
        "setstripe",
        "-c",
        "2",
        "-S",
        "64k",
        d1.join("striped").to_str().expect("utf-8"),
    ]);
    sh(&format!("chmod 666 {}", d1.join("striped").display()));
    for (file, pad) in [("plain", 8), ("striped", 200)] {
        let writers = four_writers(&d1, &d2, file, pad);
        let want: u64 = writers
            .iter()
            .map(|(tag, pad)| {
                (1..=LINES)
                    .map(|i| format!("{tag} {i} {}\n", "x".repeat(*pad)).len() as u64)
                    .sum::<u64>()
            })
            .sum();
        for (d, through) in [(&d1, "mount 1"), (&d2, "mount 2")] {
            let text = std::fs::read_to_string(d.join(file)).expect("read the log");
            check(&text, &writers, &format!("{through} ({file})"));
            let size = std::fs::metadata(d.join(file)).expect("stat").len();
            assert_eq!(size, want, "the size of {file} through {through}");
        }
    }
}

/// open(2) with O_CREAT and without O_EXCL never fails with EEXIST: two
/// processes, one on each mount, open the same 40 new names at once
/// (each waits for the other before the next name), as uid 65534. The
/// mount whose CREATE finds the name made meanwhile by the other opens
/// it (two nodes' first `>>` to one new log used to fail so: "cannot
/// create ...: File exists").
#[test]
fn creates_of_one_new_name_from_two_mounts_both_open_it() {
    let mut c = Cluster::up(1, 1, &[]);
    let d1 = c.open_dir("race");
    let m2 = c.second_mount("m2");
    let d2 = m2.join("race");
    // Both start each name when the test says so: one line per name.
    let code = "import os, sys\n\
        d = sys.argv[1]\n\
        bad = 0\n\
        for i in range(40):\n    \
            sys.stdin.readline()\n    \
            try:\n        \
                os.close(os.open(os.path.join(d, 'n%d' % i), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644))\n    \
            except OSError as e:\n        \
                bad += 1\n        \
                print('n%d: %s' % (i, e), file=sys.stderr)\n    \
            print('done', flush=True)\n\
        sys.exit(1 if bad else 0)\n";
    let mut kids: Vec<std::process::Child> = [&d1, &d2]
        .iter()
        .map(|d| {
            python3(true)
                .arg("-c")
                .arg(code)
                .arg(d)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .expect("an opener as uid 65534")
        })
        .collect();
    let mut ins: Vec<_> = kids
        .iter_mut()
        .map(|k| k.stdin.take().expect("stdin"))
        .collect();
    // Each opener's lines, read aside: a hung open fails the test in 20 s.
    use std::io::{BufRead, Write};
    let outs: Vec<std::sync::mpsc::Receiver<String>> = kids
        .iter_mut()
        .map(|k| {
            let out = std::io::BufReader::new(k.stdout.take().expect("stdout"));
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                for line in out.lines().map_while(Result::ok) {
                    if tx.send(line).is_err() {
                        return;
                    }
                }
            });
            rx
        })
        .collect();
    for i in 0..40 {
        for to in ins.iter_mut() {
            writeln!(to, "go")
                .and_then(|_| to.flush())
                .expect("tell an opener");
        }
        for o in &outs {
            let line = o
                .recv_timeout(std::time::Duration::from_secs(20))
                .unwrap_or_else(|_| panic!("an opener did not answer name {i} within 20 s"));
            assert_eq!(line.trim(), "done", "an opener ended early");
        }
    }
    drop(ins);
    for mut k in kids {
        let ok = within(move || k.wait().map(|s| s.success()).unwrap_or(false));
        assert_eq!(
            ok,
            Some(true),
            "an open(O_CREAT) failed (see its stderr above)"
        );
    }
}
