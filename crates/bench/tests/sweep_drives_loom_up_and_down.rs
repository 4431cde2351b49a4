//! `sweep` starts one cluster per value with `loom up … --dir STATE --mount
//! DIR`, waits for `mounted at DIR`, runs the workload on the mount and stops
//! the cluster with `loom down --dir STATE`. A stand-in `loom` script plays
//! the cluster (its mount is a plain directory) and records its arguments,
//! so the protocol is checked without a real cluster; a `loom` that exits
//! early gives a clear error with its output.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use clap::Parser;
use loom_bench::{run, BenchArgs};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: BenchArgs,
}

const FAKE_LOOM: &str = r#"#!/bin/sh
# Stand-in for `loom up` / `loom down`: records its arguments.
log="$(dirname "$0")/calls.log"
echo "$@" >> "$log"
cmd="$1"; shift
state=""; mount=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) state="$2"; shift ;;
    --mount) mount="$2"; shift ;;
  esac
  shift
done
case "$cmd" in
  up)
    mkdir -p "$mount"
    echo $$ > "$state/pid"
    echo "starting servers"
    echo "mounted at $mount"
    exec sleep 1000 ;;
  down)
    kill "$(cat "$state/pid")" ;;
esac
"#;

fn write_script(dir: &Path, body: &str) -> std::path::PathBuf {
    let p = dir.join("loom");
    std::fs::write(&p, body).expect("script");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    p
}

#[test]
fn sweep_over_mdts_starts_runs_and_stops_one_cluster_per_value() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let loom = write_script(tmp.path(), FAKE_LOOM);
    let work = tmp.path().join("work");
    let chart = tmp.path().join("sweep");
    let json = tmp.path().join("sweep.json");
    let argv: Vec<String> = [
        "loom-bench",
        "sweep",
        "--param",
        "mdts",
        "--values",
        "1,2",
        "--osts",
        "3",
        "--loom",
        loom.to_str().expect("utf8"),
        "--work-dir",
        work.to_str().expect("utf8"),
        "--chart",
        chart.to_str().expect("utf8"),
        "--json",
        json.to_str().expect("utf8"),
        "--up-timeout",
        "30",
        "md",
        "-n",
        "20",
        "-F",
        "-p",
        "2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    run(Cli::try_parse_from(argv).expect("parses").args).expect("sweep runs");

    let calls = std::fs::read_to_string(tmp.path().join("calls.log")).expect("log");
    let lines: Vec<&str> = calls.lines().collect();
    assert_eq!(lines.len(), 4, "{calls}");
    for (i, mdts) in [(0, 1), (2, 2)] {
        let state = work.join(format!("mdts={mdts}/state"));
        let mnt = work.join(format!("mdts={mdts}/mnt"));
        assert_eq!(
            lines[i],
            format!(
                "up --mdts {mdts} --osts 3 --dir {} --mount {}",
                state.display(),
                mnt.display()
            )
        );
        assert_eq!(lines[i + 1], format!("down --dir {}", state.display()));
        assert_eq!(
            std::fs::read_dir(&mnt).expect("mount").count(),
            0,
            "files left on the mount"
        );
    }
    let svg = std::fs::read_to_string(chart.with_extension("svg")).expect("svg");
    assert!(svg.contains("File creation") && svg.contains("mdts"));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("json");
    let names: Vec<&str> = report["targets"]
        .as_array()
        .expect("targets")
        .iter()
        .map(|t| t["name"].as_str().expect("name"))
        .collect();
    assert_eq!(names, ["mdts=1", "mdts=2"]);
}

#[test]
fn a_loom_that_exits_before_mounting_is_a_clear_error() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let loom = write_script(
        tmp.path(),
        "#!/bin/sh\necho 'error: no such target' >&2\nexit 3\n",
    );
    let argv: Vec<String> = [
        "loom-bench",
        "sweep",
        "--param",
        "osts",
        "--values",
        "1",
        "--loom",
        loom.to_str().expect("utf8"),
        "--work-dir",
        tmp.path().join("w").to_str().expect("utf8"),
        "io",
        "-t",
        "4k",
        "-b",
        "8k",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let e = format!(
        "{:#}",
        run(Cli::try_parse_from(argv).expect("parses").args).expect_err("must fail")
    );
    assert!(e.contains("exited") && e.contains("no such target"), "{e}");
}

#[test]
fn a_missing_loom_binary_is_a_clear_error() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let argv: Vec<String> = [
        "loom-bench",
        "sweep",
        "--param",
        "procs",
        "--values",
        "1,2",
        "--loom",
        "/nonexistent/loom",
        "--work-dir",
        tmp.path().join("w").to_str().expect("utf8"),
        "md",
        "-n",
        "4",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let e = format!(
        "{:#}",
        run(Cli::try_parse_from(argv).expect("parses").args).expect_err("must fail")
    );
    assert!(e.contains("cannot run /nonexistent/loom"), "{e}");
}
