//! `loom bench sweep --param servers` packs the cluster's targets into that
//! many server processes (`loom up --servers N`), here running the workload
//! through the client library on each mount (`--library`); without
//! `--work-dir` the
//! state and mount directories live in a temporary directory that is
//! removed at the end, and no server process or mount is left.

mod bench_support;

use std::time::Duration;

use bench_support::{args, assert_nothing_left_in, loom_bounded, StopClustersBelow};

#[test]
fn sweep_over_servers_leaves_no_state_processes_or_mounts() {
    let tmp = tempfile::Builder::new()
        .prefix("loombench")
        .tempdir_in("/var/tmp")
        .expect("tempdir");
    // The sweep's temporary directory is made in $TMPDIR.
    let scratch = tmp.path().join("scratch");
    std::fs::create_dir(&scratch).expect("mkdir");
    let _guard = StopClustersBelow(scratch.clone());
    let json = tmp.path().join("s.json");
    let chart = tmp.path().join("s");
    let argv = args(&[
        "bench",
        "sweep",
        "--param",
        "servers",
        "--values",
        "1,3",
        "--mdts",
        "1",
        "--osts",
        "2",
        "--json",
        json.to_str().expect("utf8"),
        "--chart",
        chart.to_str().expect("utf8"),
        "--library",
        "--no-progress",
        "io",
        "-t",
        "64k",
        "-b",
        "256k",
        "-p",
        "2",
        "-v",
    ]);
    let out = loom_bounded(&argv, &[("TMPDIR", &scratch)], Duration::from_secs(300));
    assert!(
        out.status.success(),
        "sweep failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    assert_nothing_left_in(
        &scratch,
        &format!(
            "{}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        ),
    );

    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("json");
    let targets = report["targets"].as_array().expect("targets");
    let names: Vec<&str> = targets
        .iter()
        .map(|t| t["name"].as_str().expect("name"))
        .collect();
    assert_eq!(names, ["servers=1", "servers=3"]);
    for t in targets {
        assert_eq!(t["fs_type"], "loomfs-lib", "--library");
        for phase in t["phases"].as_array().expect("phases") {
            assert_eq!(phase["samples"][0]["bytes"], 2 * 256 * 1024, "{phase}");
        }
    }
}
