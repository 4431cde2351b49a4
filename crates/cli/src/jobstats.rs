//! `loom jobstats`: the jobs (and clients) each MDT and OST served
//! recently, busiest first, as Lustre's `lctl get_param *.*.job_stats`
//! and the top of `jobstats` exporters show them.

use crate::registry;
use crate::tools::connect;
use clap::{Args, ValueEnum};
use loom_proto::msg::{JobUsage, Role};
use std::path::PathBuf;

/// What ranks the jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Rank {
    /// Requests of every kind.
    Ops,
    /// Bytes read and written.
    Bytes,
}

/// Options of `loom jobstats`.
#[derive(Args)]
#[command(
    after_help = "A job is what the SLURM_JOB_ID (then PBS_JOBID, LSB_JOBID, JOB_ID) \
variable of the calling process says, or PROCNAME.UID when none is set (e.g. dd.1000), as Lustre's \
jobid_var and jobid_name. Servers forget a job idle for stats_expiry_secs (600 s by default)."
)]
pub struct JobstatsArgs {
    /// A path on the loomfs mount (its mount point or anything under it).
    pub path: PathBuf,
    /// Rank jobs by requests or by bytes.
    #[arg(long, value_enum, default_value = "ops")]
    pub by: Rank,
    /// Show at most this many jobs per target (0: all).
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Show clients instead of jobs.
    #[arg(long)]
    pub clients: bool,
    /// Everything, as JSON: per target, its jobs and clients with every
    /// operation's count.
    #[arg(long)]
    pub json: bool,
}

fn total(u: &JobUsage) -> u64 {
    u.ops.iter().map(|(_, n)| n).sum()
}

pub fn jobstats(a: JobstatsArgs) -> anyhow::Result<()> {
    let (entry, _) = registry::find(&a.path)?;
    let s = connect(entry)?;
    let all = s.rt.block_on(s.client.job_stats());
    let fs = &s.entry.fsname;
    if a.json {
        let v: Vec<serde_json::Value> = all
            .iter()
            .map(|(t, r)| match r {
                Ok(u) => serde_json::json!({
                    "target": format!("{fs}-{t}"),
                    "jobs": u.jobs.iter().map(crate::stats::usage_json).collect::<Vec<_>>(),
                    "clients": u.clients.iter().map(crate::stats::usage_json).collect::<Vec<_>>(),
                }),
                Err(e) => {
                    serde_json::json!({ "target": format!("{fs}-{t}"), "error": e.to_string() })
                }
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    let who = if a.clients { "client" } else { "job" };
    for (t, r) in &all {
        let name = format!("{fs}-{t}");
        let (jobs, clients) = match r {
            Ok(u) => (&u.jobs, &u.clients),
            Err(e) => {
                println!("{name}: did not answer ({e})");
                continue;
            }
        };
        let mut list: Vec<&JobUsage> = if a.clients { clients } else { jobs }.iter().collect();
        list.sort_by_key(|u| {
            std::cmp::Reverse(match a.by {
                Rank::Ops => total(u),
                Rank::Bytes => u.read_bytes + u.write_bytes,
            })
        });
        if a.top > 0 {
            list.truncate(a.top);
        }
        println!("{name}:");
        if list.is_empty() {
            println!("  (no {who}s)");
        }
        for u in list {
            let ops: Vec<String> = u.ops.iter().map(|(o, n)| format!("{o}={n}")).collect();
            let bytes = if t.role == Role::Ost {
                format!(" read_bytes={} write_bytes={}", u.read_bytes, u.write_bytes)
            } else {
                String::new()
            };
            println!(
                "  {who} {:<24} ops={}{bytes} {}",
                u.job,
                total(u),
                ops.join(" ")
            );
        }
    }
    Ok(())
}
