//! The live web dashboard, served by the server that hosts the MGS on
//! `dashboard_listen`: `/` is one self-contained page (no external
//! scripts, styles or fonts: it works on a cluster with no internet), and
//! `/api/cluster` the JSON it polls every two seconds: every registered
//! target with its state, space and inodes and what it served (from its
//! server's statistics), the jobs and clients summed over targets, and
//! the policy engine's latest report (`loom policy`), if published.
//! The page keeps the last minutes of those totals and draws the rates.

use crate::peers::Peers;
use bytes::Bytes;
use loom_proto::msg::{MdtRequest, OstRequest, Reply, Request, Role};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// The page.
const PAGE: &str = include_str!("dashboard.html");
/// How long one target may take to answer the dashboard.
const ASK_TIMEOUT: Duration = Duration::from_secs(2);

/// Serve the dashboard on `l` until the process ends.
pub async fn serve(l: TcpListener, peers: Arc<Peers>) {
    crate::metrics::serve_routes(
        l,
        Arc::new(move |path: &str| {
            let peers = peers.clone();
            let path = path.to_string();
            Box::pin(async move {
                match path.as_str() {
                    "/" | "/index.html" => Some(("text/html; charset=utf-8", PAGE.to_string())),
                    "/api/cluster" => Some(("application/json", cluster(&peers).await.to_string())),
                    _ => None,
                }
            })
        }),
    )
    .await
}

/// Everything the page shows, now.
async fn cluster(peers: &Arc<Peers>) -> serde_json::Value {
    let cfg = match peers.config().await {
        Ok(c) => c,
        Err(e) => return serde_json::json!({ "error": e.to_string() }),
    };
    let mut ids: Vec<_> = cfg
        .targets
        .iter()
        .map(|t| t.id)
        .filter(|id| matches!(id.role, Role::Mdt | Role::Ost))
        .collect();
    ids.sort();
    let mut set = tokio::task::JoinSet::new();
    for (i, id) in ids.iter().copied().enumerate() {
        let peers = peers.clone();
        set.spawn(async move {
            let (statfs, served) = match id.role {
                Role::Mdt => (
                    Request::Mdt(MdtRequest::StatFs),
                    Request::Mdt(MdtRequest::JobStats),
                ),
                _ => (
                    Request::Ost(OstRequest::StatFs),
                    Request::Ost(OstRequest::JobStats),
                ),
            };
            let s = peers.call(id, statfs, Bytes::new(), ASK_TIMEOUT).await;
            let j = peers.call(id, served, Bytes::new(), ASK_TIMEOUT).await;
            let log = match id.role {
                Role::Mdt => {
                    let req = Request::Mdt(MdtRequest::ChangelogState);
                    match peers.call(id, req, Bytes::new(), ASK_TIMEOUT).await {
                        Ok((Reply::ChangelogState(st), _)) => Some(st),
                        _ => None,
                    }
                }
                _ => None,
            };
            (i, s.map(|r| r.0), j.map(|r| r.0), log)
        });
    }
    let mut targets = vec![serde_json::Value::Null; ids.len()];
    let mut jobs: HashMap<String, (u64, u64, u64)> = HashMap::new();
    let mut clients: HashMap<String, (u64, u64, u64)> = HashMap::new();
    while let Some(Ok((i, statfs, served, log))) = set.join_next().await {
        let id = ids[i];
        let mut t = serde_json::json!({
            "name": format!("{}-{id}", cfg.fsname),
            "role": if id.role == Role::Mdt { "mdt" } else { "ost" },
            "state": if statfs.is_ok() { "up" } else { "down" },
        });
        if let Ok(Reply::StatFs(s)) = statfs {
            t["bytes_total"] = s.bytes_total.into();
            t["bytes_avail"] = s.bytes_avail.into();
            t["files_total"] = s.files_total.into();
            t["files_free"] = s.files_free.into();
        }
        if let Ok(Reply::JobStats {
            ops,
            jobs: j,
            clients: c,
        }) = served
        {
            t["ops"] = ops.iter().map(|o| o.count).sum::<u64>().into();
            t["read_bytes"] = ops.iter().map(|o| o.bytes_out).sum::<u64>().into();
            t["write_bytes"] = ops.iter().map(|o| o.bytes_in).sum::<u64>().into();
            for (into, list) in [(&mut jobs, j), (&mut clients, c)] {
                for u in list {
                    let e = into.entry(u.job.clone()).or_default();
                    e.0 += u.ops.iter().map(|(_, n)| n).sum::<u64>();
                    e.1 += u.read_bytes;
                    e.2 += u.write_bytes;
                }
            }
        }
        if let Some(st) = log {
            // The slowest consumer's lag: what keeps records from purging.
            t["changelog_lag"] = st.users.iter().map(|u| st.lag(u)).max().into();
            t["changelog_consumers"] = st.users.len().into();
        }
        targets[i] = t;
    }
    let list = |m: HashMap<String, (u64, u64, u64)>| -> Vec<serde_json::Value> {
        m.into_iter()
            .map(|(k, (ops, r, w))| {
                serde_json::json!({ "id": k, "ops": ops, "read_bytes": r, "write_bytes": w })
            })
            .collect()
    };
    // The policy engine's latest report, if one was published.
    let policy = match peers
        .call_mgs(loom_proto::msg::MgsRequest::PolicyReport)
        .await
    {
        Ok(Reply::PolicyReport(r)) if !r.is_empty() => {
            serde_json::from_str(&r).unwrap_or(serde_json::Value::Null)
        }
        _ => serde_json::Value::Null,
    };
    serde_json::json!({
        "fsname": cfg.fsname,
        "targets": targets,
        "jobs": list(jobs),
        "clients": list(clients),
        "policy": policy,
    })
}
