//! `loom bench sweep --param dir-stripe --values 1,2` runs the md workload
//! on one real cluster with 2 MDTs, for each value once with remote tree
//! roots and once with striped ones, and draws a line per placement. The
//! run keeps its files (`--keep`), so the cluster is brought up again
//! afterwards to check where the tree roots really are: each process's
//! root on MDT rank mod N when remote, striped over N MDTs when striped.

mod bench_support;

use std::process::{Command, Stdio};
use std::time::Duration;

use bench_support::{args, loom_bin, loom_bounded, mounts_below, StopClustersBelow};

#[test]
fn sweep_over_dir_stripe_places_tree_roots_remote_and_striped() {
    let tmp = tempfile::Builder::new()
        .prefix("loombench")
        .tempdir_in("/var/tmp")
        .expect("tempdir");
    let work = tmp.path().join("work");
    let _guard = StopClustersBelow(work.clone());
    let chart = tmp.path().join("ds");
    let json = tmp.path().join("ds.json");
    let argv = args(&[
        "bench",
        "sweep",
        "--param",
        "dir-stripe",
        "--values",
        "1,2",
        "--osts",
        "1",
        "--work-dir",
        work.to_str().expect("utf8"),
        "--chart",
        chart.to_str().expect("utf8"),
        "--json",
        json.to_str().expect("utf8"),
        "--no-progress",
        "md",
        "-n",
        "20",
        "-p",
        "2",
        "-u",
        "-F",
        "--keep",
    ]);
    let out = loom_bounded(&argv, &[], Duration::from_secs(300));
    assert!(
        out.status.success(),
        "sweep failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    let state = work.join("dir-stripe/state");
    let shape = std::fs::read_to_string(state.join("cluster.toml")).expect("cluster.toml");
    assert!(
        shape.contains("mdts = 2"),
        "one cluster with MDTs for the widest value: {shape}"
    );
    assert!(mounts_below(&work).is_empty());

    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("json");
    let names: Vec<&str> = report["targets"]
        .as_array()
        .expect("targets")
        .iter()
        .map(|t| t["name"].as_str().expect("name"))
        .collect();
    assert_eq!(
        names,
        [
            "remote dir-stripe=1",
            "striped dir-stripe=1",
            "remote dir-stripe=2",
            "striped dir-stripe=2"
        ]
    );
    let svg = std::fs::read_to_string(tmp.path().join("ds.svg")).expect("svg");
    let texts = bench_support::svg_texts(&svg);
    assert!(texts.iter().any(|t| t == "remote") && texts.iter().any(|t| t == "striped"));
    // Four phases (tree and file creation, stat, read: --keep removes
    // nothing), each with two lines of two points.
    assert_eq!(bench_support::svg_line_points(&svg), vec![2; 8]);

    // Bring the kept file system back and look at the tree roots.
    let mnt = tmp.path().join("again");
    let mut up = Command::new(loom_bin())
        .args(["up", "--dir"])
        .arg(&state)
        .arg("--mount")
        .arg(&mnt)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("loom up");
    // Read `loom up`'s output to the end (it must not write into a closed
    // pipe), reporting the mount.
    let stdout = up.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in std::io::BufRead::lines(std::io::BufReader::new(stdout)).map_while(Result::ok) {
            if l.starts_with("mounted at") {
                let _ = tx.send(());
            }
        }
    });
    assert!(
        rx.recv_timeout(Duration::from_secs(120)).is_ok(),
        "the kept file system did not come back"
    );
    let show = |value: u32, placement: &str, rank: u32, flag: &str| -> String {
        let root = mnt.join(format!(
            "loom-md-{placement} dir-stripe={value}/iter.0/mdtest_tree.{rank}.0"
        ));
        let o = Command::new(loom_bin())
            .args(["getdirstripe", flag])
            .arg(&root)
            .output()
            .expect("getdirstripe");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    let placed = [
        (show(2, "remote", 0, "-i"), show(2, "remote", 0, "-c")),
        (show(2, "remote", 1, "-i"), show(2, "remote", 1, "-c")),
        (show(2, "striped", 0, "-i"), show(2, "striped", 0, "-c")),
        (show(2, "striped", 1, "-i"), show(2, "striped", 1, "-c")),
        (show(1, "remote", 1, "-i"), show(1, "striped", 1, "-c")),
    ];
    let want = |m: &str, c: &str| (m.to_string(), c.to_string());
    assert_eq!(
        placed,
        [
            want("0", "0"),
            want("1", "0"),
            want("0", "2"),
            want("0", "2"),
            want("0", "0")
        ],
        "(MDT, shards) of: remote ranks 0, 1 and striped ranks 0, 1 at 2; remote rank 1 and striped rank 1 at 1"
    );
    let down = Command::new(loom_bin())
        .args(["down", "--dir"])
        .arg(&state)
        .output()
        .expect("loom down");
    assert!(down.status.success());
    let _ = up.wait();
    assert!(mounts_below(tmp.path()).is_empty());
}
