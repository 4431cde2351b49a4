//! The server's metrics over HTTP, in the Prometheus text format (version
//! 0.0.4), at `GET /metrics` on the address `metrics_listen` names.
//!
//! A minimal HTTP/1.1 server (one request per connection, then close) is
//! enough for a scraper and keeps a web framework out of the servers.
//! Names follow Prometheus' conventions: a `loom_` prefix, units in the
//! name, `_total` on counters, labels `target`, `op`, `jobid`, `client`
//! (`jobid`, as Lustre's exporters have it: Prometheus gives `job` to the
//! scrape job, and would rename ours).

use crate::node::Node;
use crate::stats::BUCKETS;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Longest request head read.
const MAX_HEAD: usize = 8192;
/// How long a scraper may take to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Serve `node`'s metrics on `l` until the process ends.
pub async fn serve(l: TcpListener, node: Arc<Node>) {
    serve_text(l, Arc::new(move || render(&node))).await
}

/// What an endpoint serves: the metrics text, made at each scrape.
pub type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// A page of an HTTP endpoint: its content type and body.
pub type Page = (&'static str, String);

/// The pages of an HTTP endpoint, by path: `None` is a 404.
pub type Routes = Arc<
    dyn Fn(&str) -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<Page>> + Send>>
        + Send
        + Sync,
>;

/// Serve what `render` makes at `/metrics` on `l` until the process ends
/// (a server's metrics, or a client mount's).
pub async fn serve_text(l: TcpListener, render: Render) {
    serve_routes(
        l,
        Arc::new(move |path: &str| {
            let page = (path == "/metrics")
                .then(|| ("text/plain; version=0.0.4; charset=utf-8", render()));
            Box::pin(async move { page })
        }),
    )
    .await
}

/// Serve `routes` on `l` until the process ends: GET only, one request
/// per connection.
pub async fn serve_routes(l: TcpListener, routes: Routes) {
    loop {
        let (s, peer) = match l.accept().await {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!("metrics endpoint: accept: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let routes = routes.clone();
        tokio::spawn(async move {
            if let Err(e) = answer(s, &routes).await {
                tracing::debug!(%peer, "metrics endpoint: {e}");
            }
        });
    }
}

async fn answer(mut s: TcpStream, routes: &Routes) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    let read = async {
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_HEAD {
            let n = s.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            head.extend_from_slice(&buf[..n]);
        }
        Ok::<_, std::io::Error>(())
    };
    tokio::time::timeout(READ_TIMEOUT, read)
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
    let line = head.split(|b| *b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    let (status, kind, body) = match method {
        "GET" => match routes(path).await {
            Some((kind, body)) => ("200 OK", kind, body),
            None => (
                "404 Not Found",
                "text/plain",
                format!("{path}: no such page\n"),
            ),
        },
        _ => (
            "405 Method Not Allowed",
            "text/plain",
            "GET only\n".to_string(),
        ),
    };
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(reply.as_bytes()).await?;
    s.shutdown().await
}

/// The samples of one histogram series: cumulative `_bucket`s over
/// [`BUCKETS`] (`counts` has one more, above them all), `_sum`, `_count`.
fn histogram(out: &mut String, name: &str, labels: &str, counts: &[u64], sum: f64) {
    let mut cum = 0;
    for (b, n) in BUCKETS.iter().zip(counts) {
        cum += n;
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{b}\"}} {cum}");
    }
    let total: u64 = counts.iter().sum();
    let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {total}");
    let _ = writeln!(out, "{name}_sum{{{labels}}} {sum}");
    let _ = writeln!(out, "{name}_count{{{labels}}} {total}");
}

/// A label value as the text format wants it.
fn esc(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// `# HELP` and `# TYPE` lines of metric `name`.
pub fn help(out: &mut String, name: &str, kind: &str, text: &str) {
    let _ = writeln!(out, "# HELP {name} {text}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Every metric of `node`, as text.
pub fn render(node: &Node) -> String {
    let mut out = String::new();
    let stats: Vec<_> = node
        .stats()
        .iter()
        .map(|s| (s.target, s.snapshot()))
        .collect();
    help(
        &mut out,
        "loom_requests_total",
        "counter",
        "Requests served, by target and operation.",
    );
    for (t, s) in &stats {
        for (op, f) in &s.ops {
            let _ = writeln!(
                out,
                "loom_requests_total{{target=\"{t}\",op=\"{op}\"}} {}",
                f.count
            );
        }
    }
    help(
        &mut out,
        "loom_request_errors_total",
        "counter",
        "Requests answered with an error.",
    );
    for (t, s) in &stats {
        for (op, f) in &s.ops {
            let _ = writeln!(
                out,
                "loom_request_errors_total{{target=\"{t}\",op=\"{op}\"}} {}",
                f.errors
            );
        }
    }
    help(
        &mut out,
        "loom_written_bytes_total",
        "counter",
        "Bulk bytes received (file data written), by target and operation.",
    );
    for (t, s) in &stats {
        for (op, f) in s.ops.iter().filter(|(_, f)| f.bytes_in > 0) {
            let _ = writeln!(
                out,
                "loom_written_bytes_total{{target=\"{t}\",op=\"{op}\"}} {}",
                f.bytes_in
            );
        }
    }
    help(
        &mut out,
        "loom_read_bytes_total",
        "counter",
        "Bulk bytes sent (file data read), by target and operation.",
    );
    for (t, s) in &stats {
        for (op, f) in s.ops.iter().filter(|(_, f)| f.bytes_out > 0) {
            let _ = writeln!(
                out,
                "loom_read_bytes_total{{target=\"{t}\",op=\"{op}\"}} {}",
                f.bytes_out
            );
        }
    }
    help(
        &mut out,
        "loom_request_duration_seconds",
        "histogram",
        "Time from a request's arrival to its answer, by target and operation.",
    );
    for (t, s) in &stats {
        for (op, f) in &s.ops {
            histogram(
                &mut out,
                "loom_request_duration_seconds",
                &format!("target=\"{t}\",op=\"{op}\""),
                &f.buckets,
                f.seconds,
            );
        }
    }
    for (kind, label, what) in [("job", "jobid", "job"), ("client", "client", "client")] {
        let name = format!("loom_{kind}_requests_total");
        help(
            &mut out,
            &name,
            "counter",
            &format!("Requests by {what}, target and operation (idle {what}s expire)."),
        );
        for (t, s) in &stats {
            let users = if kind == "job" { &s.jobs } else { &s.clients };
            for u in users {
                for (op, n) in &u.ops {
                    let _ = writeln!(
                        out,
                        "{name}{{target=\"{t}\",{label}=\"{}\",op=\"{op}\"}} {n}",
                        esc(&u.job)
                    );
                }
            }
        }
        let name = format!("loom_{kind}_request_seconds_total");
        help(
            &mut out,
            &name,
            "counter",
            &format!("Time the requests of each {what} took, by target and operation."),
        );
        for (t, s) in &stats {
            let users = if kind == "job" { &s.jobs } else { &s.clients };
            for u in users {
                for (op, us) in &u.usecs {
                    let _ = writeln!(
                        out,
                        "{name}{{target=\"{t}\",{label}=\"{}\",op=\"{op}\"}} {}",
                        esc(&u.job),
                        *us as f64 / 1e6
                    );
                }
            }
        }
        for (dir, field) in [("read", 0), ("written", 1)] {
            let name = format!("loom_{kind}_{dir}_bytes_total");
            help(
                &mut out,
                &name,
                "counter",
                &format!("Bytes {dir} by {what} and target."),
            );
            for (t, s) in &stats {
                let users = if kind == "job" { &s.jobs } else { &s.clients };
                for u in users {
                    let v = if field == 0 {
                        u.read_bytes
                    } else {
                        u.write_bytes
                    };
                    let _ = writeln!(
                        out,
                        "{name}{{target=\"{t}\",{label}=\"{}\"}} {v}",
                        esc(&u.job)
                    );
                }
            }
        }
    }
    let logs = node.changelog_states();
    help(
        &mut out,
        "loom_changelog_next_record",
        "gauge",
        "The number an MDT's next changelog record gets.",
    );
    for (t, st) in &logs {
        let _ = writeln!(
            out,
            "loom_changelog_next_record{{target=\"{t}\"}} {}",
            st.next
        );
    }
    help(
        &mut out,
        "loom_changelog_consumer_lag_records",
        "gauge",
        "Changelog records a registered consumer has not acknowledged: one that stops advancing grows, and keeps every record from being purged.",
    );
    for (t, st) in &logs {
        for u in &st.users {
            let _ = writeln!(
                out,
                "loom_changelog_consumer_lag_records{{target=\"{t}\",consumer=\"cl{}\"}} {}",
                u.id,
                st.lag(u)
            );
        }
    }
    let mdts = node.mdts();
    let commits: Vec<_> = mdts
        .iter()
        .map(|(i, m)| (loom_proto::msg::TargetId::mdt(*i), m.commit_figures()))
        .collect();
    let get = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    help(
        &mut out,
        "loom_commits_total",
        "counter",
        "Commits (fsyncs) of an MDT that made changes durable.",
    );
    for (t, f) in &commits {
        let _ = writeln!(
            out,
            "loom_commits_total{{target=\"{t}\"}} {}",
            get(&f.commits)
        );
    }
    help(
        &mut out,
        "loom_committed_changes_total",
        "counter",
        "Changes made durable by commits: divided by loom_commits_total, the batch size.",
    );
    for (t, f) in &commits {
        let _ = writeln!(
            out,
            "loom_committed_changes_total{{target=\"{t}\"}} {}",
            get(&f.changes)
        );
    }
    help(
        &mut out,
        "loom_commit_duration_seconds",
        "histogram",
        "Time a commit's fsync took.",
    );
    for (t, f) in &commits {
        let counts: Vec<u64> = f.buckets.iter().map(get).collect();
        histogram(
            &mut out,
            "loom_commit_duration_seconds",
            &format!("target=\"{t}\""),
            &counts,
            get(&f.micros) as f64 / 1e6,
        );
    }
    help(
        &mut out,
        "loom_requests_in_flight",
        "gauge",
        "Requests being served now (the target's queue).",
    );
    for s in node.stats() {
        let _ = writeln!(
            out,
            "loom_requests_in_flight{{target=\"{}\"}} {}",
            s.target,
            s.in_flight()
        );
    }
    let counters = node.service_counters();
    for (key, name, kind, text) in [
        (
            "checksum_errors.count",
            "loom_checksum_errors_total",
            "counter",
            "Reads answered EIO for a block or record that failed its checksum.",
        ),
        (
            "scrub.checked_bytes",
            "loom_scrub_checked_bytes",
            "gauge",
            "Bytes checked by the current or last scrub pass.",
        ),
        (
            "scrub.bad",
            "loom_scrub_bad",
            "gauge",
            "Blocks or records known to fail their checksum.",
        ),
        (
            "scrub.passes",
            "loom_scrub_passes_total",
            "counter",
            "Scrub passes finished.",
        ),
        (
            "granted.bytes",
            "loom_granted_bytes",
            "gauge",
            "Space an OST keeps for its clients' writes sent behind (grants).",
        ),
    ] {
        help(&mut out, name, kind, text);
        for (t, c) in &counters {
            if let Some((_, v)) = c.iter().find(|(k, _)| k == key) {
                let _ = writeln!(out, "{name}{{target=\"{t}\"}} {v}");
            }
        }
    }
    help(
        &mut out,
        "loom_nodemap_requests_total",
        "counter",
        "Client requests this server process took under a nodemap: mapped, refused as read-only (EROFS), or leases refused.",
    );
    for ((nodemap, verdict), n) in node.clients.counts() {
        let _ = writeln!(
            out,
            "loom_nodemap_requests_total{{nodemap=\"{}\",verdict=\"{}\"}} {n}",
            esc(&nodemap),
            verdict.name()
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::esc;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(esc("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
