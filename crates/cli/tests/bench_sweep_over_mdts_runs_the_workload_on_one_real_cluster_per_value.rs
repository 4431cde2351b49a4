//! `loom bench sweep --param mdts --values 1,2` starts a real `loom up`
//! cluster per value (1 and 2 MDTs), runs the mdtest workload on its FUSE
//! mount, stops it, and writes the JSON and a line chart with one point per
//! value in every phase; no server, mount or benchmark file is left.

mod bench_support;

use std::time::Duration;

use bench_support::{args, loom_bounded, mounts_below, processes_mentioning, StopClustersBelow};

const ITEMS: u64 = 50;
const PROCS: u64 = 2;

#[test]
fn sweep_over_mdts_runs_the_workload_on_one_real_cluster_per_value() {
    let tmp = tempfile::Builder::new()
        .prefix("loombench")
        .tempdir_in("/var/tmp")
        .expect("tempdir");
    let work = tmp.path().join("work");
    let _guard = StopClustersBelow(work.clone());
    let chart = tmp.path().join("sweep.mdts");
    let json = tmp.path().join("sweep.json");
    let argv = args(&[
        "bench",
        "sweep",
        "--param",
        "mdts",
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
        "50",
        "-p",
        "2",
        "-F",
        "-w",
        "100",
        "-e",
        "100",
    ]);
    let out = loom_bounded(&argv, &[], Duration::from_secs(300));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "sweep failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );

    // One cluster per value, of the shape asked for.
    for mdts in [1u32, 2] {
        let state = work.join(format!("mdts={mdts}/state"));
        let shape = std::fs::read_to_string(state.join("cluster.toml")).expect("cluster.toml");
        assert!(shape.contains(&format!("mdts = {mdts}")), "{shape}");
        for i in 0..mdts {
            assert!(state.join(format!("targets/mdt{i}")).is_dir());
        }
        assert!(!state.join(format!("targets/mdt{mdts}")).exists());
        let mnt = work.join(format!("mdts={mdts}/mnt"));
        assert_eq!(
            std::fs::read_dir(&mnt).expect("mount point").count(),
            0,
            "unmounted and empty"
        );
    }
    assert!(mounts_below(&work).is_empty(), "{:?}", mounts_below(&work));
    assert!(
        processes_mentioning(&work).is_empty(),
        "servers left running: {:?}",
        processes_mentioning(&work)
    );

    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("json");
    assert_eq!(report["command"], "sweep");
    assert_eq!(report["options"]["param"], "mdts");
    let targets = report["targets"].as_array().expect("targets");
    let names: Vec<&str> = targets
        .iter()
        .map(|t| t["name"].as_str().expect("name"))
        .collect();
    assert_eq!(names, ["mdts=1", "mdts=2"]);
    let phases = [
        "Tree creation",
        "File creation",
        "File stat",
        "File read",
        "File removal",
        "Tree removal",
    ];
    for t in targets {
        let got: Vec<&str> = t["phases"]
            .as_array()
            .expect("phases")
            .iter()
            .map(|p| p["phase"].as_str().expect("phase"))
            .collect();
        assert_eq!(got, phases, "{}", t["name"]);
        let sample = |phase: &str| {
            t["phases"]
                .as_array()
                .expect("phases")
                .iter()
                .find(|p| p["phase"] == phase)
                .expect("phase")["samples"][0]
                .clone()
        };
        for phase in ["File creation", "File stat", "File read", "File removal"] {
            assert_eq!(sample(phase)["ops"], ITEMS * PROCS, "{phase}");
        }
        assert_eq!(sample("File read")["bytes"], ITEMS * PROCS * 100);
    }

    let svg = std::fs::read_to_string(tmp.path().join("sweep.mdts.svg")).expect("svg");
    let texts = bench_support::svg_texts(&svg);
    for p in phases {
        assert!(texts.iter().any(|t| t == p), "chart lacks {p}: {texts:?}");
    }
    assert!(texts.iter().any(|t| t == "mdts"), "x axis not labelled");
    assert_eq!(
        bench_support::svg_line_points(&svg),
        vec![2; phases.len()],
        "one line of two points (mdts 1 and 2) per phase"
    );
    assert!(tmp.path().join("sweep.mdts.png").is_file());
}
