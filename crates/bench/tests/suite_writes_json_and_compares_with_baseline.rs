//! `suite` runs its fixed patterns with repetitions, writes every metric with
//! its per-repetition values as JSON, and a second run compared with the
//! first as baseline finds every metric; a doctored baseline that claims
//! ten times the speed makes `--fail-on-regression` fail.

use clap::Parser;
use loom_bench::suite::SuiteReport;
use loom_bench::{run, BenchArgs};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: BenchArgs,
}

fn suite(target: &std::path::Path, out: &std::path::Path, extra: &[&str]) -> anyhow::Result<()> {
    let mut argv: Vec<String> = [
        "loom-bench",
        "suite",
        "--reps",
        "2",
        "--scale",
        "0.05",
        "--only",
        "single-proc",
        "--no-progress",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    argv.push("--out".into());
    argv.push(out.display().to_string());
    argv.extend(extra.iter().map(|s| s.to_string()));
    argv.push(target.display().to_string());
    run(Cli::try_parse_from(argv).expect("parses").args)
}

#[test]
fn suite_json_round_trips_and_a_doctored_baseline_is_flagged() {
    let target = tempfile::tempdir().expect("tempdir");
    let out = tempfile::tempdir().expect("tempdir");
    let first = out.path().join("first.json");
    suite(target.path(), &first, &[]).expect("first run");
    let report: SuiteReport =
        serde_json::from_str(&std::fs::read_to_string(&first).expect("json")).expect("suite JSON");
    let keys: Vec<&str> = report.metrics.iter().map(|m| m.key.as_str()).collect();
    assert!(keys.contains(&"md-single-proc/File creation"), "{keys:?}");
    assert!(
        keys.contains(&"io-single-proc/write") && keys.contains(&"io-single-proc/read"),
        "{keys:?}"
    );
    assert!(report
        .metrics
        .iter()
        .all(|m| m.values.len() == 2 && m.mean > 0.0));
    assert_eq!(
        std::fs::read_dir(target.path()).expect("dir").count(),
        0,
        "suite left files"
    );

    // The same build against itself: runs and compares.
    let second = out.path().join("second.json");
    suite(
        target.path(),
        &second,
        &["--baseline", first.to_str().expect("utf8")],
    )
    .expect("baseline run");

    // A baseline ten times faster with no noise: this run regressed.
    let mut fast = report.clone();
    for m in &mut fast.metrics {
        m.mean *= 10.0;
        m.stddev = 0.0;
    }
    let doctored = out.path().join("fast.json");
    std::fs::write(&doctored, serde_json::to_string(&fast).expect("encode")).expect("write");
    let e = suite(
        target.path(),
        &out.path().join("third.json"),
        &[
            "--baseline",
            doctored.to_str().expect("utf8"),
            "--fail-on-regression",
        ],
    )
    .expect_err("regression must fail");
    assert!(e.to_string().contains("regressed"), "{e}");
}
