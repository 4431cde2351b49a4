//! Issue #12: every request carries the job id of the process behind it,
//! and every target counts per job. A user's shell under
//! SLURM_JOB_ID=4242 makes 20 empty files and one of 4 MiB through the
//! mount;
//! `loom setstripe` under SLURM_JOB_ID=777 makes 3 files through the
//! client library; a process with no job variable is counted as
//! PROCNAME.UID; a mount told `--jobid-var MYJOB` reads that variable
//! first. `loom jobstats` and each server's metrics endpoint show
//! exactly those creates and bytes for each job; the MDT's endpoint also
//! its commits (count, changes made durable, latency) and its queue; a
//! mount's own endpoint (`--metrics-listen`) what that mount sent.
mod common;
use common::*;
use std::process::Command;

/// The value of the sample whose line starts with `series` in `text`.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[test]
fn jobstats_count_what_each_job_did() {
    let mut c = Cluster::up(1, 2, &[]);
    let dir = c.open_dir("work");
    loom_ok(&["setstripe", "-c", "2", dir.to_str().expect("utf8")]);

    let o = Command::new("env")
        .args(["SLURM_JOB_ID=4242", "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"])
        .args(["sh", "-c", "cd \"$1\" && for i in $(seq 1 20); do : > f$i; done && dd if=/dev/zero of=big bs=1M count=4 status=none", "sh"])
        .arg(&dir)
        .output()
        .expect("the job's shell");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lib = c.path("lib");
    std::fs::create_dir(&lib).expect("mkdir");
    // `loom setstripe FILE` makes a new file through the client library.
    for i in 0..3 {
        let o = Command::new(loom_bin())
            .env("SLURM_JOB_ID", "777")
            .args(["setstripe", "-c", "1"])
            .arg(lib.join(format!("g{i}")))
            .output()
            .expect("loom setstripe through the library");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    // No job variable: PROCNAME.UID.
    let o = Command::new("env")
        .args([
            "-u",
            "SLURM_JOB_ID",
            "-u",
            "PBS_JOBID",
            "-u",
            "LSB_JOBID",
            "-u",
            "JOB_ID",
            "mkdir",
        ])
        .arg(dir.join("by-mkdir"))
        .output()
        .expect("mkdir");
    assert!(o.status.success());

    // A mount told to read another variable.
    let m2_metrics = server_port();
    let m2 = c.second_mount_with(
        "m2",
        &[
            "--jobid-var",
            "MYJOB",
            "--metrics-listen",
            &format!("127.0.0.1:{m2_metrics}"),
        ],
    );
    let o = Command::new("env")
        .args(["MYJOB=site-7", "SLURM_JOB_ID=not-this", "touch"])
        .arg(m2.join("work/by-myjob"))
        .output()
        .expect("touch");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let out = loom_ok(&["jobstats", "--json", c.mnt.to_str().expect("utf8")]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    let targets = v.as_array().expect("array");
    let job = |t: &serde_json::Value, id: &str| -> Option<serde_json::Value> {
        t["jobs"]
            .as_array()?
            .iter()
            .find(|j| j["id"] == id)
            .cloned()
    };
    let mdt = targets
        .iter()
        .find(|t| t["target"] == "loom-MDT0000")
        .expect("MDT0000");
    let j4242 = job(mdt, "4242").unwrap_or_else(|| panic!("no job 4242 on the MDT: {out}"));
    // 20 empty files and "big".
    assert_eq!(j4242["ops"]["create"], 21, "{j4242}");
    assert!(
        j4242["usecs"]["create"].as_u64().unwrap_or(0) > 0,
        "{j4242}"
    );
    let j777 = job(mdt, "777").unwrap_or_else(|| panic!("no job 777 on the MDT: {out}"));
    assert_eq!(j777["ops"]["create"], 3, "{j777}");
    let jsite = job(mdt, "site-7").unwrap_or_else(|| panic!("no job site-7: {out}"));
    assert_eq!(jsite["ops"]["create"], 1, "{jsite}");
    assert!(job(mdt, "not-this").is_none(), "{out}");
    let jmkdir = job(mdt, "mkdir.0").unwrap_or_else(|| panic!("no job mkdir.0: {out}"));
    assert_eq!(jmkdir["ops"]["mkdir"], 1, "{jmkdir}");
    let written: u64 = targets
        .iter()
        .filter(|t| t["target"].as_str().is_some_and(|n| n.contains("-OST")))
        .filter_map(|t| job(t, "4242"))
        .map(|j| j["write_bytes"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(
        written,
        4 << 20,
        "bytes job 4242 wrote, over the OSTs:\n{out}"
    );

    // The same from the servers' metrics endpoints.
    let ports = c.ports();
    let port = |key: &str| ports.iter().find(|(k, _)| k == key).map(|(_, p)| *p);
    let mdt_metrics = scrape_metrics(port("metrics-mdt0").expect("the MDT's metrics port"));
    assert_eq!(
        sample(
            &mdt_metrics,
            "loom_job_requests_total{target=\"MDT0000\",jobid=\"4242\",op=\"create\"}"
        ),
        Some(21.0),
        "{mdt_metrics}"
    );
    assert_eq!(
        sample(
            &mdt_metrics,
            "loom_job_requests_total{target=\"MDT0000\",jobid=\"777\",op=\"create\"}"
        ),
        Some(3.0),
        "the library's job: {mdt_metrics}"
    );
    assert!(mdt_metrics.contains("# TYPE loom_request_duration_seconds histogram"));
    // Commits, their batch sizes and latency; the queue.
    let commits = sample(&mdt_metrics, "loom_commits_total{target=\"MDT0000\"}").unwrap_or(0.0);
    let changes = sample(
        &mdt_metrics,
        "loom_committed_changes_total{target=\"MDT0000\"}",
    )
    .unwrap_or(0.0);
    assert!(
        commits >= 1.0 && changes >= commits,
        "commits {commits}, changes {changes}"
    );
    assert_eq!(
        sample(
            &mdt_metrics,
            "loom_commit_duration_seconds_count{target=\"MDT0000\"}"
        ),
        Some(commits)
    );
    assert!(
        sample(&mdt_metrics, "loom_requests_in_flight{target=\"MDT0000\"}").is_some(),
        "{mdt_metrics}"
    );
    let mut written = 0.0;
    for ost in ["ost0", "ost1"] {
        let m = scrape_metrics(port(&format!("metrics-{ost}")).expect("an OST's metrics port"));
        let t = ost.replace("ost", "OST000");
        written += sample(
            &m,
            &format!("loom_job_written_bytes_total{{target=\"{t}\",jobid=\"4242\"}}"),
        )
        .unwrap_or(0.0);
    }
    assert_eq!(written, f64::from(4u32 << 20));
    assert!(
        sample(
            &mdt_metrics,
            "loom_job_request_seconds_total{target=\"MDT0000\",jobid=\"4242\",op=\"create\"}"
        )
        .is_some_and(|s| s > 0.0),
        "{mdt_metrics}"
    );
    // The second mount's own metrics: what it sent.
    let mine = scrape_metrics(m2_metrics);
    let sent = sample(&mine, "loom_client_requests_total{role=\"mdt\"}").unwrap_or(0.0);
    assert!(sent >= 1.0, "{mine}");
    assert!(
        sample(&mine, "loom_client_requests_in_flight").is_some(),
        "{mine}"
    );
    assert_eq!(
        sample(&mine, "loom_client_operations_total{op=\"create\"}"),
        Some(1.0),
        "{mine}"
    );
    // The stat after touch's create is answered from what the mount knows.
    std::fs::metadata(m2.join("work/by-myjob")).expect("stat");
    let mine = scrape_metrics(m2_metrics);
    assert!(
        sample(&mine, "loom_client_lease_hits_total").is_some_and(|n| n >= 1.0),
        "{mine}"
    );
    let text = loom_ok(&["jobstats", "--by", "ops", c.mnt.to_str().expect("utf8")]);
    assert!(
        text.contains("loom-MDT0000:") && text.contains("job 4242"),
        "{text}"
    );
}
