//! `loom stats` (every target's counters, as `lctl get_param *.*.stats`
//! and `job_stats`, in YAML or JSON) and `loom top` (a live view of the
//! busiest jobs, clients and targets, in the spirit of `iotop`).

use crate::registry;
use crate::tools::{connect, Session};
use anyhow::bail;
use clap::Args;
use loom_client::meta::Served;
use loom_proto::changelog::ChangelogState;
use loom_proto::msg::{JobUsage, Role, TargetId};
use loom_proto::Errno;
use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Options of `loom stats`.
#[derive(Args)]
#[command(
    after_help = "Per target: every operation it served since its server started (samples, \
errors, average latency, bytes), then its jobs and clients of the last stats_expiry_secs. YAML \
by default; --json for programs."
)]
pub struct StatsArgs {
    /// A path on the loomfs mount (its mount point or anything under it).
    pub path: PathBuf,
    /// Only this target: MDT0000, OST0001, mdt0, ost1.
    #[arg(long, short = 't')]
    pub target: Option<String>,
    /// Only this job.
    #[arg(long, short = 'j')]
    pub job: Option<String>,
    /// JSON instead of YAML.
    #[arg(long)]
    pub json: bool,
}

/// Options of `loom top`.
#[derive(Args)]
#[command(
    after_help = "Refreshes every --interval seconds: the targets by operations per second, \
then the busiest jobs and clients (what they did since the last refresh). Rates need two looks: \
the first screen shows totals. Ctrl-C quits."
)]
pub struct TopArgs {
    /// A path on the loomfs mount (its mount point or anything under it).
    pub path: PathBuf,
    /// Seconds between refreshes.
    #[arg(long, short = 'd', default_value_t = 2.0)]
    pub interval: f64,
    /// Refresh this many times, then quit (0: until Ctrl-C).
    #[arg(long, short = 'n', default_value_t = 0)]
    pub iterations: u64,
    /// Jobs and clients shown.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
}

fn fetch(s: &Session) -> Vec<(TargetId, Result<Served, Errno>)> {
    s.rt.block_on(s.client.job_stats())
}

/// A string as YAML (and JSON) quote it.
fn q(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

pub fn stats(a: StatsArgs) -> anyhow::Result<()> {
    let only = a
        .target
        .as_deref()
        .map(crate::scrub::parse_target)
        .transpose()?;
    let (entry, _) = registry::find(&a.path)?;
    let s = connect(entry)?;
    let fs = s.entry.fsname.clone();
    let mut all = fetch(&s);
    all.retain(|(t, _)| only.is_none_or(|o| o == *t));
    if all.is_empty() {
        bail!("{fs} has no such target");
    }
    let keep = |u: &&JobUsage| a.job.as_deref().is_none_or(|j| u.job == j);
    // Each MDT's changelog consumers and how far behind they are.
    let changelogs: HashMap<TargetId, ChangelogState> = all
        .iter()
        .filter(|(t, _)| t.role == Role::Mdt)
        .filter_map(|(t, _)| {
            let st = s.rt.block_on(s.client.changelog_state(t.index)).ok()?;
            Some((*t, st))
        })
        .collect();
    let lag_json = |t: &TargetId| -> serde_json::Value {
        match changelogs.get(t) {
            Some(st) => serde_json::json!({
                "next": st.next,
                "first": st.first,
                "consumers": st.users.iter().map(|u| serde_json::json!({
                    "id": format!("cl{}", u.id), "cleared": u.cleared, "lag": st.lag(u),
                })).collect::<Vec<_>>(),
            }),
            None => serde_json::Value::Null,
        }
    };
    if a.json {
        let v: Vec<serde_json::Value> = all
            .iter()
            .map(|(t, r)| match r {
                Ok(u) => serde_json::json!({
                    "target": format!("{fs}-{t}"),
                    "ops": u.ops.iter().map(|o| serde_json::json!({
                        "op": o.op, "samples": o.count, "errors": o.errors,
                        "usec_total": o.micros, "bytes_in": o.bytes_in, "bytes_out": o.bytes_out,
                    })).collect::<Vec<_>>(),
                    "jobs": u.jobs.iter().filter(keep).map(usage_json).collect::<Vec<_>>(),
                    "clients": if a.job.is_some() { Vec::new() } else { u.clients.iter().map(usage_json).collect() },
                    "changelog": lag_json(t),
                }),
                Err(e) => serde_json::json!({ "target": format!("{fs}-{t}"), "error": e.to_string() }),
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    for (t, r) in &all {
        println!("{fs}-{t}:");
        let u = match r {
            Ok(u) => u,
            Err(e) => {
                println!("  error: {}", q(&e.to_string()));
                continue;
            }
        };
        if a.job.is_none() {
            println!("  ops:");
            for o in &u.ops {
                let avg = o.micros.checked_div(o.count).unwrap_or(0);
                println!(
                    "    {}: {{ samples: {}, errors: {}, usec_avg: {avg}, bytes_in: {}, bytes_out: {} }}",
                    o.op, o.count, o.errors, o.bytes_in, o.bytes_out
                );
            }
        }
        println!("  job_stats:");
        for j in u.jobs.iter().filter(keep) {
            print_usage(j);
        }
        if a.job.is_none() {
            println!("  client_stats:");
            for c in &u.clients {
                print_usage(c);
            }
            if let Some(st) = changelogs.get(t) {
                println!("  changelog:");
                println!(
                    "    first: {}\n    next: {}\n    consumers:",
                    st.first, st.next
                );
                for u in &st.users {
                    println!(
                        "    - {{ id: cl{}, cleared: {}, lag: {} }}",
                        u.id,
                        u.cleared,
                        st.lag(u)
                    );
                }
            }
        }
    }
    Ok(())
}

fn print_usage(u: &JobUsage) {
    let ops: Vec<String> = u
        .ops
        .iter()
        .zip(&u.usecs)
        .map(|((o, n), (_, us))| format!("{o}: {{ samples: {n}, usec_sum: {us} }}"))
        .collect();
    println!(
        "  - {{ id: {}, {}{}read_bytes: {}, write_bytes: {} }}",
        q(&u.job),
        ops.join(", "),
        if ops.is_empty() { "" } else { ", " },
        u.read_bytes,
        u.write_bytes
    );
}

/// A job's or client's figures as JSON (`loom stats`, `loom jobstats`).
pub(crate) fn usage_json(u: &JobUsage) -> serde_json::Value {
    let map = |v: &[(String, u64)]| -> serde_json::Map<String, serde_json::Value> {
        v.iter().map(|(o, n)| (o.clone(), (*n).into())).collect()
    };
    serde_json::json!({
        "id": u.job,
        "ops": map(&u.ops),
        "usecs": map(&u.usecs),
        "read_bytes": u.read_bytes,
        "write_bytes": u.write_bytes,
    })
}

/// Operations and bytes, summed over targets, per job or client id.
type Totals = HashMap<String, (u64, u64, u64)>;

fn totals<'a>(list: impl Iterator<Item = &'a JobUsage>) -> Totals {
    let mut m = Totals::new();
    for u in list {
        let e = m.entry(u.job.clone()).or_default();
        e.0 += u.ops.iter().map(|(_, n)| n).sum::<u64>();
        e.1 += u.read_bytes;
        e.2 += u.write_bytes;
    }
    m
}

/// One look at the cluster.
struct Look {
    at: Instant,
    targets: Vec<(TargetId, (u64, u64, u64))>,
    jobs: Totals,
    clients: Totals,
}

fn look(s: &Session) -> Look {
    let all = fetch(s);
    let ok: Vec<(TargetId, &Served)> = all
        .iter()
        .filter_map(|(t, r)| r.as_ref().ok().map(|u| (*t, u)))
        .collect();
    Look {
        at: Instant::now(),
        targets: ok
            .iter()
            .map(|(t, u)| {
                let n = u.ops.iter().map(|o| o.count).sum();
                let r = u.ops.iter().map(|o| o.bytes_out).sum();
                let w = u.ops.iter().map(|o| o.bytes_in).sum();
                (*t, (n, r, w))
            })
            .collect(),
        jobs: totals(ok.iter().flat_map(|(_, u)| u.jobs.iter())),
        clients: totals(ok.iter().flat_map(|(_, u)| u.clients.iter())),
    }
}

/// Per id, what it did since `before` (everything when there is none).
fn rates(now: &Totals, before: Option<&Totals>) -> Vec<(String, (u64, u64, u64))> {
    let mut v: Vec<(String, (u64, u64, u64))> = now
        .iter()
        .map(|(k, n)| {
            let b = before.and_then(|b| b.get(k)).copied().unwrap_or_default();
            (
                k.clone(),
                (
                    n.0.saturating_sub(b.0),
                    n.1.saturating_sub(b.1),
                    n.2.saturating_sub(b.2),
                ),
            )
        })
        .filter(|(_, d)| d.0 > 0)
        .collect();
    v.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then_with(|| a.0.cmp(&b.0)));
    v
}

pub fn top(a: TopArgs) -> anyhow::Result<()> {
    if !(a.interval > 0.0 && a.interval.is_finite()) {
        bail!("--interval must be a positive number of seconds");
    }
    let (entry, _) = registry::find(&a.path)?;
    let s = connect(entry)?;
    let tty = std::io::stdout().is_terminal();
    let mut before: Option<Look> = None;
    let mut n = 0u64;
    loop {
        let now = look(&s);
        let secs = before
            .as_ref()
            .map_or(0.0, |b| now.at.duration_since(b.at).as_secs_f64());
        let per = |x: u64| {
            if secs > 0.0 {
                x as f64 / secs
            } else {
                x as f64
            }
        };
        let unit = if before.is_some() { "/s" } else { " (total)" };
        let mut out = String::new();
        if tty {
            out.push_str("\x1b[H\x1b[2J");
        }
        out.push_str(&format!(
            "loom top: {} at {}, every {}s{}\n\n",
            s.entry.fsname,
            s.entry.mountpoint.display(),
            a.interval,
            if before.is_none() {
                " (first look: totals)"
            } else {
                ""
            }
        ));
        out.push_str(&format!(
            "{:<16}{:>14}{:>14}{:>14}\n",
            "TARGET",
            format!("OPS{unit}"),
            "READ MB",
            "WRITE MB"
        ));
        for (t, c) in &now.targets {
            let b = before
                .as_ref()
                .and_then(|b| b.targets.iter().find(|(x, _)| x == t))
                .map(|(_, c)| *c)
                .unwrap_or_default();
            out.push_str(&format!(
                "{:<16}{:>14.0}{:>14.1}{:>14.1}\n",
                format!("{}-{t}", s.entry.fsname),
                per(c.0.saturating_sub(b.0)),
                per(c.1.saturating_sub(b.1)) / 1048576.0,
                per(c.2.saturating_sub(b.2)) / 1048576.0
            ));
        }
        for (title, now_t, before_t) in [
            ("JOB", &now.jobs, before.as_ref().map(|b| &b.jobs)),
            ("CLIENT", &now.clients, before.as_ref().map(|b| &b.clients)),
        ] {
            out.push_str(&format!(
                "\n{:<28}{:>12}{:>14}{:>14}\n",
                title,
                format!("OPS{unit}"),
                "READ MB",
                "WRITE MB"
            ));
            for (id, d) in rates(now_t, before_t).into_iter().take(a.top) {
                out.push_str(&format!(
                    "{:<28}{:>12.0}{:>14.1}{:>14.1}\n",
                    id,
                    per(d.0),
                    per(d.1) / 1048576.0,
                    per(d.2) / 1048576.0
                ));
            }
        }
        print!("{out}");
        std::io::stdout().flush()?;
        n += 1;
        if a.iterations > 0 && n >= a.iterations {
            return Ok(());
        }
        before = Some(now);
        std::thread::sleep(Duration::from_secs_f64(a.interval));
    }
}
