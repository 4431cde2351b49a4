//! Issue #12: Debian's `prometheus` scrapes a `loom up` cluster's metrics
//! endpoints (the addresses `loom up` chose and printed) and answers, with
//! its query API, the per-job series of a workload run under
//! SLURM_JOB_ID=4242: its creates on the MDT and its bytes on the OSTs.
//! Every query of the Grafana dashboard in contrib/ runs on it.
mod common;
use common::*;
use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Prometheus, stopped when dropped (also when the test fails).
struct Prometheus(Child);

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// GET `path` from 127.0.0.1:`port`; the body, if the answer is 200.
fn get(port: u16, path: &str) -> Option<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let (head, body) = out.split_once("\r\n\r\n")?;
    // An HTTP/1.0 request: the answer is not chunked, and says 1.0 or 1.1.
    (head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200")).then(|| body.to_string())
}

/// `q` as a URL query value.
fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The value Prometheus gives `query` (summed), once it has one.
fn query(port: u16, query: &str) -> Option<f64> {
    let body = get(port, &format!("/api/v1/query?query={}", encode(query)))?;
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    let r = v["data"]["result"].as_array()?;
    let first = r.first()?;
    first["value"][1].as_str()?.parse().ok()
}

#[test]
fn prometheus_scrapes_per_job_series() {
    let c = Cluster::up(1, 2, &[]);
    let ports = c.ports();
    let targets: Vec<String> = ports
        .iter()
        .filter(|(k, _)| k.starts_with("metrics-"))
        .map(|(_, p)| format!("'127.0.0.1:{p}'"))
        .collect();
    assert_eq!(
        targets.len(),
        4,
        "MGS, MDT and 2 OSTs each serve metrics: {ports:?}"
    );
    let cfg = c.tmp.path().join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: loom\n    static_configs:\n      - targets: [{}]\n",
            targets.join(", ")
        ),
    )
    .expect("prometheus.yml");
    let web = server_port();
    let _prom = Prometheus(
        Command::new("prometheus")
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                c.tmp.path().join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{web}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(c.tmp.path().join("prometheus.log")).expect("log"))
            .spawn()
            .expect("prometheus (Debian package prometheus)"),
    );

    let dir = c.path("work");
    std::fs::create_dir(&dir).expect("mkdir");
    let o = Command::new("env")
        .args(["SLURM_JOB_ID=4242", "sh", "-c", "cd \"$1\" && for i in $(seq 1 15); do : > f$i; done && dd if=/dev/zero of=big bs=1M count=2 status=none", "sh"])
        .arg(&dir)
        .output()
        .expect("the job");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    // Prometheus scrapes every second; wait for the series to show the
    // whole workload (16 creates, 2 MiB) and every endpoint scraped.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut creates, mut written, mut up) = (None, None, None);
    while Instant::now() < deadline {
        creates = query(
            web,
            "sum(loom_job_requests_total{jobid=\"4242\",op=\"create\"})",
        );
        written = query(web, "sum(loom_job_written_bytes_total{jobid=\"4242\"})");
        up = query(web, "sum(up{job=\"loom\"})");
        if creates == Some(16.0) && written == Some(f64::from(2u32 << 20)) && up == Some(4.0) {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        creates,
        Some(16.0),
        "creates of job 4242 as Prometheus has them"
    );
    assert_eq!(written, Some(f64::from(2u32 << 20)), "bytes job 4242 wrote");
    // Every endpoint was scraped, and up.
    assert_eq!(up, Some(4.0), "endpoints up as Prometheus has them");
    // The dashboard's queries are valid PromQL over these series.
    let dash: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../contrib/grafana-dashboard.json"
        ))
        .expect("contrib/grafana-dashboard.json"),
    )
    .expect("dashboard JSON");
    let exprs: Vec<&str> = dash["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .flat_map(|p| p["targets"].as_array().into_iter().flatten())
        .filter_map(|t| t["expr"].as_str())
        .collect();
    assert!(exprs.len() >= 8, "{exprs:?}");
    for e in exprs {
        let body = get(web, &format!("/api/v1/query?query={}", encode(e))).unwrap_or_default();
        assert!(
            body.contains("\"status\":\"success\""),
            "dashboard query {e}: {body}"
        );
    }
}
