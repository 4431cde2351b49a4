//! `loom scrub`: verify every block of every object and every metadata
//! record against its checksum, in the servers, and report what failed.
//!
//! The pass runs inside each target (so it survives the tool and resumes
//! after a server restart); this tool starts or stops it, shows its
//! progress and prints the summary. It exits non-zero when a target
//! knows a bad block or record, or did not answer.

use crate::registry;
use crate::tools::{connect, Session};
use anyhow::bail;
use clap::Args;
use loom_proto::msg::{Role, ScrubCmd, ScrubStatus, TargetId};
use loom_proto::Errno;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

/// Options of `loom scrub`.
#[derive(Args)]
#[command(
    after_help = "Each OST reads every object and checks each 4 KiB block against the \
checksum stored beside it when it was written; each MDT reads every metadata record and checks \
its checksum. A bad block or record is never returned to applications (they get EIO); scrub \
finds those that nobody has read yet. The pass runs in the servers: \
interrupting this tool leaves it running (see --status, --stop), and a server restarted mid-pass \
resumes it where it was. Exit status: 0 when no target knows a bad block, 1 otherwise (or when a \
target did not answer). Output: one line per target, then one line per bad block or record."
)]
pub struct ScrubArgs {
    /// A path on the loomfs mount (its mount point or anything under it).
    pub path: PathBuf,
    /// Only this target: MDT0000, OST0001, mdt0, ost1 (or 1 for OST1).
    #[arg(long, short = 't')]
    pub target: Option<String>,
    /// Read at most this many MiB/s on each target (0: no limit), so that
    /// a scrub does not slow applications down.
    #[arg(long, short = 'r', value_name = "MB/s", default_value_t = 0)]
    pub rate: u32,
    /// Only show each target's scrub state and known bad blocks.
    #[arg(long, conflicts_with_all = ["stop", "no_wait"])]
    pub status: bool,
    /// Stop the pass under way; a later `loom scrub` resumes it.
    #[arg(long, conflicts_with = "no_wait")]
    pub stop: bool,
    /// Start (or resume) the pass and return at once.
    #[arg(long)]
    pub no_wait: bool,
}

/// A target from `MDT0000`, `OST0001`, `mdt0`, `ost1` or `1` (an OST).
pub(crate) fn parse_target(s: &str) -> anyhow::Result<TargetId> {
    let lower = s.to_ascii_lowercase();
    let (role, digits) = if let Some(d) = lower.strip_prefix("mdt") {
        (Role::Mdt, d)
    } else {
        (Role::Ost, lower.strip_prefix("ost").unwrap_or(&lower))
    };
    let named = lower.len() != digits.len();
    let parsed = if named && digits.len() == 4 {
        u32::from_str_radix(digits, 16).ok()
    } else {
        digits.parse().ok()
    };
    let index = parsed.ok_or_else(|| {
        anyhow::anyhow!("--target {s}: expected a target such as MDT0000, OST0001, mdt0, ost1 or 1")
    })?;
    Ok(TargetId { role, index })
}

fn name_of(fs: &str, id: TargetId) -> String {
    let role = if id.role == Role::Mdt { "MDT" } else { "OST" };
    format!("{fs}-{role}{:04x}", id.index)
}

pub fn scrub(a: ScrubArgs) -> anyhow::Result<()> {
    let only = a.target.as_deref().map(parse_target).transpose()?;
    let (entry, _) = registry::find(&a.path)?;
    let s = connect(entry)?;
    let first = if a.status {
        ScrubCmd::Status
    } else if a.stop {
        ScrubCmd::Stop
    } else {
        ScrubCmd::Start { rate_mib: a.rate }
    };
    let mut states = ask(&s, first, only)?;
    if matches!(first, ScrubCmd::Start { .. }) && !a.no_wait {
        states = wait(&s, only, states)?;
    }
    report(&s, &states)
}

/// Ask every chosen OST; an error if none is there to ask.
fn ask(
    s: &Session,
    cmd: ScrubCmd,
    only: Option<TargetId>,
) -> anyhow::Result<Vec<(TargetId, Result<ScrubStatus, Errno>)>> {
    let states = s.rt.block_on(s.client.scrub(cmd, only));
    if states.is_empty() {
        match only {
            Some(o) => bail!(
                "{} has no target {}",
                s.entry.fsname,
                name_of(&s.entry.fsname, o)
            ),
            None => bail!("{} has no MDTs or OSTs", s.entry.fsname),
        }
    }
    Ok(states)
}

/// Poll until no pass runs, showing progress.
fn wait(
    s: &Session,
    only: Option<TargetId>,
    mut states: Vec<(TargetId, Result<ScrubStatus, Errno>)>,
) -> anyhow::Result<Vec<(TargetId, Result<ScrubStatus, Errno>)>> {
    let tty = std::io::stderr().is_terminal();
    let t0 = Instant::now();
    let mut shown = Instant::now();
    // Polling a remote state: soon at first (a small scrub ends at once),
    // then four times a second for the progress line.
    let mut pause = Duration::from_millis(5);
    while states
        .iter()
        .any(|(_, r)| matches!(r, Ok(st) if st.running))
    {
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(250));
        states = ask(s, ScrubCmd::Status, only)?;
        let (done, total) = states.iter().fold((0u64, 0u64), |(d, t), (_, r)| match r {
            Ok(st) => (
                d + st.checked_bytes,
                t + st.total_bytes.max(st.checked_bytes),
            ),
            Err(_) => (d, t),
        });
        let pct = if total == 0 {
            100.0
        } else {
            100.0 * done as f64 / total as f64
        };
        let line = format!(
            "scrub: {:.1}% ({} of {} MiB, {:.0} MiB/s)",
            pct,
            done >> 20,
            total >> 20,
            (done as f64 / 1048576.0) / t0.elapsed().as_secs_f64().max(0.001)
        );
        if tty {
            eprint!("\r{line}   ");
            let _ = std::io::stderr().flush();
        } else if shown.elapsed() >= Duration::from_secs(5) {
            eprintln!("{line}");
            shown = Instant::now();
        }
    }
    if tty {
        eprintln!();
    }
    Ok(states)
}

fn ago(t: u64) -> String {
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    match t {
        0 => "never".into(),
        t => format!("{}s ago", now.saturating_sub(t)),
    }
}

/// Print each target's state and its bad blocks; an error (exit 1) when
/// any target knows one, or did not answer.
fn report(s: &Session, states: &[(TargetId, Result<ScrubStatus, Errno>)]) -> anyhow::Result<()> {
    let fs = &s.entry.fsname;
    let (mut bad, mut silent) = (0usize, 0usize);
    for (id, r) in states {
        let name = name_of(fs, *id);
        let units = if id.role == Role::Mdt {
            "records"
        } else {
            "objects"
        };
        match r {
            Ok(st) => {
                let what = if st.running { "running" } else { "idle" };
                println!(
                    "{name}: {what}, pass checked {} {units}, {} bytes; passes finished: {}, last {}; \
                     bad: {}; reads refused for damage since start: {}",
                    st.checked_objects,
                    st.checked_bytes,
                    st.passes,
                    ago(st.finished),
                    st.findings.len(),
                    st.read_errors
                );
                for f in &st.findings {
                    let by = if f.by_scrub { "scrub" } else { "a read" };
                    let what = if f.record.is_empty() {
                        "block"
                    } else {
                        "record"
                    };
                    println!(
                        "  bad {what}: {name} {} (found by {by}, {})",
                        loom_server::scrub::describe(f),
                        ago(f.when)
                    );
                }
                bad += st.findings.len();
            }
            Err(e) => {
                println!("{name}: did not answer ({e})");
                silent += 1;
            }
        }
    }
    if bad > 0 || silent > 0 {
        bail!("scrub: {bad} bad block(s) or record(s) known, {silent} target(s) did not answer");
    }
    Ok(())
}
