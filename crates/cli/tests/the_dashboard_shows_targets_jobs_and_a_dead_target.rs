//! Issue #12, the live web dashboard served by the MGS's server (at the
//! address `loom up` chose and printed): one self-contained page (no
//! script, style or font from elsewhere, so it works with no internet),
//! and the JSON it polls: every target with its state, space and inodes
//! and what it served, and the jobs. A job run under SLURM_JOB_ID=dash-1
//! appears; an OST killed with -9 shows as down while the others stay up.
mod common;
use common::*;
use std::io::{Read, Write};
use std::process::Command;

/// GET `path` from 127.0.0.1:`port`: (status line, body).
fn get(port: u16, path: &str) -> (String, String) {
    let mut s =
        std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect to the dashboard");
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").expect("send");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    let (head, body) = out.split_once("\r\n\r\n").expect("an HTTP answer");
    (
        head.lines().next().unwrap_or_default().to_string(),
        body.to_string(),
    )
}

fn cluster(port: u16) -> serde_json::Value {
    let (status, body) = get(port, "/api/cluster");
    assert!(status.contains("200"), "{status}");
    serde_json::from_str(&body).expect("JSON")
}

fn state(c: &serde_json::Value, name: &str) -> String {
    c["targets"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == name))
        .and_then(|t| t["state"].as_str())
        .unwrap_or("missing")
        .to_string()
}

#[test]
fn the_dashboard_shows_targets_jobs_and_a_dead_target() {
    let c = Cluster::up(1, 2, &[]);
    let port = c
        .port("dashboard")
        .expect("loom up gives the MGS's server a dashboard port");
    let (status, page) = get(port, "/");
    assert!(status.contains("200"), "{status}");
    assert!(page.contains("<title>loomfs dashboard</title>"));
    assert!(
        !page.contains("http:") && !page.contains("https:") && !page.contains("//cdn"),
        "the page loads something from elsewhere"
    );
    assert!(
        page.contains("api/cluster"),
        "the page polls the cluster's JSON"
    );
    assert!(get(port, "/nothing").0.contains("404"));

    let dir = c.path("d");
    std::fs::create_dir(&dir).expect("mkdir");
    let o = Command::new("env")
        .args([
            "SLURM_JOB_ID=dash-1",
            "sh",
            "-c",
            "for i in 1 2 3 4 5; do : > \"$1\"/f$i; done",
            "sh",
        ])
        .arg(&dir)
        .output()
        .expect("the job");
    assert!(o.status.success());
    let now = cluster(port);
    assert_eq!(now["fsname"], "loom");
    for t in ["loom-MDT0000", "loom-OST0000", "loom-OST0001"] {
        assert_eq!(state(&now, t), "up", "{now}");
    }
    let mdt = now["targets"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == "loom-MDT0000"))
        .expect("the MDT");
    assert!(
        mdt["bytes_total"].as_u64().unwrap_or(0) > 0
            && mdt["files_total"].as_u64().unwrap_or(0) > 0,
        "{mdt}"
    );
    assert!(mdt["ops"].as_u64().unwrap_or(0) >= 5, "{mdt}");
    let job = now["jobs"]
        .as_array()
        .and_then(|j| j.iter().find(|j| j["id"] == "dash-1"))
        .unwrap_or_else(|| panic!("the job is not on the dashboard: {now}"));
    assert!(job["ops"].as_u64().unwrap_or(0) >= 5, "{job}");

    c.kill9("ost1");
    let later = cluster(port);
    assert_eq!(state(&later, "loom-OST0001"), "down", "{later}");
    assert_eq!(state(&later, "loom-OST0000"), "up", "{later}");
    assert_eq!(state(&later, "loom-MDT0000"), "up", "{later}");
}
