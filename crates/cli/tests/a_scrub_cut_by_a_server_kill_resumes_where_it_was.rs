//! Issue #11: a scrub pass runs in the servers, throttled to its rate, and
//! resumes after a restart. Started slow and left running (`--no-wait`),
//! cut by kill -9 of its OST part way, it goes on by itself when the OST
//! restarts, from its saved cursor, and finishes as one pass that checked
//! every object.
mod common;
use common::*;

fn status(c: &Cluster) -> String {
    let o = loom(&[
        "scrub",
        "--status",
        "--target",
        "OST0000",
        c.mnt.to_str().expect("utf8"),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The number after `what` in `line`.
fn number(line: &str, what: &str) -> u64 {
    line.split(what)
        .nth(1)
        .and_then(|r| {
            r.split(|ch: char| !ch.is_ascii_digit())
                .find(|w| !w.is_empty())
        })
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {what:?} in {line}"))
}

#[test]
fn a_scrub_cut_by_a_server_kill_resumes_where_it_was() {
    let mut c = Cluster::up(1, 1, &[]);
    // 40 objects of 256 KiB: 10 MiB, 10 s at 1 MiB/s.
    for i in 0..40 {
        std::fs::write(c.path(&format!("f{i}")), vec![i as u8; 256 * 1024]).expect("write");
    }
    let o = loom(&[
        "scrub",
        "--rate",
        "1",
        "--no-wait",
        "--target",
        "ost0",
        c.mnt.to_str().expect("utf8"),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Wait until the pass has checked a few objects, not all.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let checked = loop {
        let s = status(&c);
        let n = number(&s, "pass checked ");
        assert!(s.contains(": running,"), "the pass ended early:\n{s}");
        if n >= 3 {
            break n;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the pass does not move:\n{s}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(
        checked < 40,
        "the rate limit did not hold the pass back: {checked} objects"
    );
    c.kill9("ost0");
    c.restart("ost0");
    // Nobody asked it to start again: the restarted server resumed it.
    assert!(status(&c).contains(": running,"), "the pass did not resume");

    // Lift the rate and wait for the end of this same pass.
    let o = loom(&[
        "scrub",
        "--target",
        "OST0000",
        c.mnt.to_str().expect("utf8"),
    ]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let line = out
        .lines()
        .find(|l| l.contains("-OST0000:"))
        .expect("OST line");
    assert_eq!(number(line, "passes finished: "), 1, "{line}");
    let objects = number(line, "pass checked ");
    // The cursor and the counts are saved together: what the killed
    // server checked after its last save is checked again, and counted
    // once.
    assert_eq!(objects, 40, "one pass over 40 objects: {line}");
}
