//! `sweep` checks what it can before it starts any cluster: a missing
//! `loom` binary, a directory-striping sweep of an io workload (it places
//! directories, so it takes an md workload) and values of 0 are clear
//! errors, and nothing is left in the work directory. (Sweeps over real `loom up` clusters are
//! tested in crates/cli/tests, where the loom binary is at hand.)

use clap::Parser;
use loom_bench::{run, BenchArgs};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: BenchArgs,
}

fn sweep_err(args: &[&str], work: &std::path::Path) -> String {
    let mut argv: Vec<String> = vec!["loom-bench".into(), "sweep".into()];
    argv.push("--work-dir".into());
    argv.push(work.display().to_string());
    argv.extend(args.iter().map(|s| s.to_string()));
    let a = Cli::try_parse_from(argv).expect("parses").args;
    format!("{:#}", run(a).expect_err("must fail"))
}

#[test]
fn a_missing_loom_binary_is_a_clear_error() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let e = sweep_err(
        &[
            "--param",
            "procs",
            "--values",
            "1,2",
            "--loom",
            "/nonexistent/loom",
            "md",
            "-n",
            "4",
        ],
        &tmp.path().join("w"),
    );
    assert!(e.contains("cannot run /nonexistent/loom"), "{e}");
}

#[test]
fn a_directory_striping_sweep_of_an_io_workload_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let work = tmp.path().join("w");
    let e = sweep_err(
        &[
            "--param",
            "dir-stripe",
            "--values",
            "1,2",
            "--loom",
            "/nonexistent/loom",
            "io",
            "-b",
            "1m",
        ],
        &work,
    );
    assert!(e.contains("md workload"), "{e}");
    assert!(
        !e.contains("/nonexistent/loom"),
        "tried to start a cluster: {e}"
    );
    assert!(!work.exists(), "made a work directory");
}

#[test]
fn zero_values_are_refused_before_any_cluster() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let work = tmp.path().join("w");
    let e = sweep_err(
        &[
            "--param",
            "servers",
            "--values",
            "2,0",
            "--loom",
            "/nonexistent/loom",
            "io",
        ],
        &work,
    );
    assert!(e.contains("--values must be positive"), "{e}");
    assert!(!work.exists(), "made a work directory");
}
