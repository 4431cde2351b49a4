//! `suite` runs its fixed patterns with repetitions, writes every metric with
//! its per-repetition values as JSON, and a second run compared with the
//! first as baseline finds every metric in both (nothing New or Missing)
//! and gives each the verdict its figures call for; a doctored baseline
//! that claims ten times the speed makes `--fail-on-regression` fail.

use clap::Parser;
use loom_bench::suite::{SuiteReport, Verdict};
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
    let again: SuiteReport =
        serde_json::from_str(&std::fs::read_to_string(&second).expect("json")).expect("suite JSON");
    assert!(report.baseline.is_none(), "the first run had no baseline");
    let cmp = again.baseline.as_ref().expect("comparison in the JSON");
    assert_eq!((cmp.sigma, cmp.min_change), (3.0, 0.05), "the defaults");
    assert_eq!(cmp.changes.len(), report.metrics.len());
    for c in &cmp.changes {
        assert!(
            !matches!(c.verdict, Verdict::New | Verdict::Missing),
            "{}: {:?} against a run of the same patterns",
            c.key,
            c.verdict
        );
        let base = report
            .metrics
            .iter()
            .find(|m| m.key == c.key)
            .expect("in base");
        let now = again
            .metrics
            .iter()
            .find(|m| m.key == c.key)
            .expect("in run");
        assert_eq!(
            (c.base, c.now),
            (Some(base.mean), Some(now.mean)),
            "{}",
            c.key
        );
        let delta = now.mean - base.mean;
        let noise = (base.stddev.powi(2) + now.stddev.powi(2)).sqrt();
        assert!((c.change - delta / base.mean).abs() < 1e-9, "{}", c.key);
        let beyond = delta.abs() > 3.0 * noise && (delta / base.mean).abs() > 0.05;
        let expect = match (beyond, delta > 0.0) {
            (false, _) => Verdict::Same,
            (true, true) => Verdict::Improved,
            (true, false) => Verdict::Regressed,
        };
        assert_eq!(
            c.verdict, expect,
            "{}: {} -> {} (noise {noise})",
            c.key, base.mean, now.mean
        );
    }

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
