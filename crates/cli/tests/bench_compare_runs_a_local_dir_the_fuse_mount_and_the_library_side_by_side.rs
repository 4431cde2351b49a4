//! `loom bench compare` runs one workload on a local directory, a loomfs
//! FUSE mount and the same loomfs directory through the client library,
//! interleaved: every target does the same operations, the table has a
//! ratio per target, the chart a bar per target in every panel, and no
//! target keeps a file.

mod bench_support;
mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use bench_support::{args, loom_bounded};

#[test]
fn compare_runs_a_local_dir_the_fuse_mount_and_the_library_side_by_side() {
    let cluster = common::Cluster::up(1, 2, &[]);
    let local = tempfile::tempdir_in("/var/tmp").expect("tempdir");
    let out = tempfile::tempdir().expect("tempdir");
    let dir = cluster.path("cmp");
    std::fs::create_dir(&dir).expect("mkdir on the mount");
    let json = out.path().join("cmp.json");
    let chart = out.path().join("cmp");
    let argv = args(&[
        "bench",
        "compare",
        "md",
        "-n",
        "30",
        "-p",
        "2",
        "-i",
        "2",
        "-F",
        "-w",
        "4k",
        "-e",
        "4k",
        "--no-progress",
        "--json",
        json.to_str().expect("utf8"),
        "--chart",
        chart.to_str().expect("utf8"),
        &format!("local={}", local.path().display()),
        &format!("fuse={}", dir.display()),
        &format!("lib=loom:{}", dir.display()),
    ]);
    let o = loom_bounded(&argv, &[], Duration::from_secs(300));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "compare failed: {}\n{stdout}",
        String::from_utf8_lossy(&o.stderr)
    );
    for ratio in ["fuse/local", "lib/local"] {
        assert!(stdout.contains(ratio), "no {ratio} column:\n{stdout}");
    }

    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("json");
    let targets = report["targets"].as_array().expect("targets");
    let names: Vec<&str> = targets
        .iter()
        .map(|t| t["name"].as_str().expect("name"))
        .collect();
    assert_eq!(names, ["local", "fuse", "lib"]);
    assert_eq!(targets[2]["fs_type"], "loomfs-lib");
    assert_eq!(
        targets[2]["location"],
        format!("loom:{}", dir.display()).as_str()
    );
    // Every target did the same work in every iteration.
    let work = |t: &serde_json::Value| -> BTreeMap<String, Vec<(u64, u64)>> {
        t["phases"]
            .as_array()
            .expect("phases")
            .iter()
            .map(|p| {
                (
                    p["phase"].as_str().expect("phase").to_string(),
                    p["samples"]
                        .as_array()
                        .expect("samples")
                        .iter()
                        .map(|s| {
                            (
                                s["ops"].as_u64().expect("ops"),
                                s["bytes"].as_u64().expect("bytes"),
                            )
                        })
                        .collect(),
                )
            })
            .collect()
    };
    let local_work = work(&targets[0]);
    assert_eq!(local_work["File creation"], [(60, 60 * 4096); 2]);
    assert_eq!(local_work["File read"], [(60, 60 * 4096); 2]);
    for t in &targets[1..] {
        assert_eq!(work(t), local_work, "{}", t["name"]);
    }

    // A bar per target in each of the 6 panels.
    let svg = std::fs::read_to_string(out.path().join("cmp.svg")).expect("svg");
    let bars: Vec<&str> = svg
        .split("<rect ")
        .skip(1)
        .filter(|r| r.contains("opacity=\"0.8\""))
        .collect();
    assert_eq!(bars.len(), 3 * 6, "one bar per target and phase");
    let colours: BTreeSet<&str> = bars
        .iter()
        .filter_map(|r| r.split("fill=\"").nth(1)?.split('"').next())
        .collect();
    assert_eq!(colours.len(), 3);

    assert_eq!(std::fs::read_dir(local.path()).expect("local").count(), 0);
    assert_eq!(std::fs::read_dir(&dir).expect("mount").count(), 0);
}
