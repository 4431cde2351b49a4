//! Issue #12, tools: while a job (SLURM_JOB_ID=busy-42) makes files
//! through the mount, `loom top`, run in a pseudo-terminal (`script`),
//! shows it among the busiest jobs with a rate, and the targets it loads;
//! `loom stats` shows every operation of the MDT with its samples and
//! latency, in YAML and in JSON, and filters by job and by target.
mod common;
use common::*;
use std::process::{Command, Stdio};

#[test]
fn loom_top_and_stats_show_the_running_job() {
    let c = Cluster::up(1, 1, &[]);
    let dir = c.path("busy");
    std::fs::create_dir(&dir).expect("mkdir");
    // Runs until killed: creates and removes files.
    let mut job = Command::new("env")
        .args([
            "SLURM_JOB_ID=busy-42",
            "sh",
            "-c",
            "cd \"$1\" && i=0; while :; do i=$((i+1)); : > f$i; rm f$i; done",
            "sh",
        ])
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the busy job");
    struct Kill<'a>(&'a mut std::process::Child);
    impl Drop for Kill<'_> {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _job = Kill(&mut job);
    let top = Command::new("script")
        .args(["-q", "-e", "-c"])
        .arg(format!(
            "{} top --interval 0.5 --iterations 3 {}",
            loom_bin().display(),
            c.mnt.display()
        ))
        .arg("/dev/null")
        .output()
        .expect("script (util-linux)");
    let screen = String::from_utf8_lossy(&top.stdout).into_owned();
    assert!(top.status.success(), "loom top failed:\n{screen}");
    assert!(
        screen.contains("\x1b[2J"),
        "no screen refresh in a terminal:\n{screen}"
    );
    // The last screen: rates since the one before.
    let last = screen.rsplit("loom top:").next().expect("a screen");
    assert!(last.contains("OPS/s"), "{last}");
    let line = last
        .lines()
        .find(|l| l.starts_with("busy-42"))
        .unwrap_or_else(|| panic!("the running job is not on the last screen:\n{last}"));
    let rate: f64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|r| r.parse().ok())
        .expect("a rate");
    assert!(rate > 0.0, "{line}");
    assert!(last.contains("loom-MDT0000"), "{last}");

    let yaml = loom_ok(&[
        "stats",
        "--target",
        "MDT0000",
        c.mnt.to_str().expect("utf8"),
    ]);
    assert!(yaml.starts_with("loom-MDT0000:\n  ops:\n"), "{yaml}");
    let create = yaml
        .lines()
        .find(|l| l.trim_start().starts_with("create: {"))
        .unwrap_or_else(|| panic!("no create line:\n{yaml}"));
    assert!(
        create.contains("samples: ") && create.contains("usec_avg: "),
        "{create}"
    );
    assert!(
        !yaml.contains("loom-OST0000"),
        "--target keeps one target:\n{yaml}"
    );
    let by_job = loom_ok(&[
        "stats",
        "--job",
        "busy-42",
        "--json",
        c.mnt.to_str().expect("utf8"),
    ]);
    let v: serde_json::Value = serde_json::from_str(&by_job).expect("json");
    let mdt = v
        .as_array()
        .and_then(|a| a.iter().find(|t| t["target"] == "loom-MDT0000"))
        .expect("the MDT");
    let jobs = mdt["jobs"].as_array().expect("jobs");
    assert_eq!(jobs.len(), 1, "--job keeps one job: {by_job}");
    assert!(
        jobs[0]["ops"]["create"].as_u64().unwrap_or(0) > 0,
        "{by_job}"
    );
    let o = loom(&[
        "stats",
        "--target",
        "OST0009",
        c.mnt.to_str().expect("utf8"),
    ]);
    assert!(!o.status.success(), "a target the file system lacks");
}
