//! When `loom up` exits before mounting (here: an invalid file system name
//! passed with --up-arg), `loom bench sweep` fails with an error that says
//! so and shows `loom up`'s own last lines, and leaves no cluster behind.

mod bench_support;

use std::time::Duration;

use bench_support::{args, loom_bounded, processes_mentioning, StopClustersBelow};

#[test]
fn sweep_shows_why_loom_up_failed_before_mounting() {
    let tmp = tempfile::Builder::new()
        .prefix("loombench")
        .tempdir_in("/var/tmp")
        .expect("tempdir");
    let work = tmp.path().join("work");
    let _guard = StopClustersBelow(work.clone());
    let argv = args(&[
        "bench",
        "sweep",
        "--param",
        "osts",
        "--values",
        "1",
        "--work-dir",
        work.to_str().expect("utf8"),
        "--up-arg=--fsname",
        "--up-arg=no/such/name",
        "--no-progress",
        "md",
        "-n",
        "4",
    ]);
    let out = loom_bounded(&argv, &[], Duration::from_secs(120));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "sweep succeeded: {err}");
    assert!(
        err.contains("exited") && err.contains("before printing 'mounted at'"),
        "{err}"
    );
    assert!(
        err.contains("file system name \"no/such/name\""),
        "loom up's own message is missing: {err}"
    );
    assert!(processes_mentioning(&work).is_empty());
}
