//! Ctrl-C at the terminal during `loom bench sweep` (a SIGINT to the
//! foreground process group, which the sweep's `loom up` is not in): the
//! workload stops, its files go, the cluster is stopped with `loom down`,
//! no later value of the sweep starts, and no mount, process or state
//! directory is left; the exit status says it was interrupted.

mod bench_support;

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bench_support::{assert_nothing_left_in, loom_bin, mounts_below, StopClustersBelow};

/// Regular files below `dir` (the workload's items), stopping at `enough`.
fn files_below(dir: &Path, enough: usize) -> usize {
    let mut n = 0;
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => todo.push(e.path()),
                Ok(t) if t.is_file() => n += 1,
                _ => {}
            }
            if n >= enough {
                return n;
            }
        }
    }
    n
}

#[test]
fn sweep_ctrl_c_stops_the_cluster_and_leaves_nothing() {
    let tmp = tempfile::Builder::new()
        .prefix("loombench")
        .tempdir_in("/var/tmp")
        .expect("tempdir");
    let scratch = tmp.path().join("scratch");
    std::fs::create_dir(&scratch).expect("mkdir");
    let _guard = StopClustersBelow(scratch.clone());
    let out_log = tmp.path().join("out.log");
    let err_log = tmp.path().join("err.log");
    // Far more items than can be made before the signal: the run is cut.
    let mut cmd = Command::new(loom_bin());
    cmd.args([
        "bench",
        "sweep",
        "--param",
        "mdts",
        "--values",
        "1,2",
        "--osts",
        "1",
        "--no-progress",
        "md",
        "-F",
        "-n",
        "1000000",
        "-p",
        "1",
    ])
    .env("TMPDIR", &scratch)
    .stdin(Stdio::null())
    .stdout(std::fs::File::create(&out_log).expect("log"))
    .stderr(std::fs::File::create(&err_log).expect("log"))
    // Its own group, as a shell gives a foreground job.
    .process_group(0);
    let mut child = cmd.spawn().expect("spawn loom bench sweep");
    let pgid = nix::unistd::Pid::from_raw(child.id() as i32);
    let logs = || {
        format!(
            "stdout:\n{}\nstderr:\n{}",
            std::fs::read_to_string(&out_log).unwrap_or_default(),
            std::fs::read_to_string(&err_log).unwrap_or_default()
        )
    };

    // Wait for the first cluster's mount and the workload's first files.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let mounts = mounts_below(&scratch);
        if mounts.iter().any(|m| files_below(m, 20) >= 20) {
            break;
        }
        if let Ok(Some(st)) = child.try_wait() {
            panic!("sweep ended before the workload started: {st}\n{}", logs());
        }
        assert!(
            Instant::now() < deadline,
            "workload never started\n{}",
            logs()
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGINT).expect("SIGINT");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let status = match rx.recv_timeout(Duration::from_secs(120)) {
        Ok(s) => s.expect("wait"),
        Err(_) => {
            let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
            panic!("sweep did not stop within 2 min of SIGINT\n{}", logs());
        }
    };
    // 128 + SIGINT, as a shell reports a job stopped by Ctrl-C.
    assert_eq!(status.code(), Some(130), "{status}\n{}", logs());
    let err = std::fs::read_to_string(&err_log).unwrap_or_default();
    assert!(err.contains("interrupted"), "{}", logs());

    let out = std::fs::read_to_string(&out_log).unwrap_or_default();
    assert!(
        !out.contains("mdts=2") && !err.contains("--mdts 2"),
        "the sweep went on to the next cluster\n{}",
        logs()
    );
    assert_nothing_left_in(&scratch, &logs());
}
