//! `loom target status`: each target, and of a replicated one each
//! replica's role, state and lag, as the MGS has them.

use crate::registry;
use anyhow::bail;
use clap::{Args, Subcommand};
use loom_proto::msg::{Role, TargetInfo};
use loom_proto::replica::ReplicaState;
use std::path::PathBuf;

/// `loom target ...`.
#[derive(Subcommand, Debug)]
pub enum TargetCmd {
    /// Show every target: where it is served, and of a replicated MDT or
    /// OST each replica's role (primary or secondary), state (in-sync,
    /// syncing, stale), lag (what its primary has still to compare while
    /// syncing: an OST's bytes, an MDT's records) and when the MGS last
    /// heard from its server. Anyone may ask: `loom target status MOUNT`.
    Status(StatusArgs),
}

/// Options of `loom target status`.
#[derive(Args, Debug)]
pub struct StatusArgs {
    /// Print the MGS's record of every target as JSON instead.
    #[arg(long)]
    pub json: bool,
    /// A path on a loomfs mount.
    pub path: PathBuf,
}

/// Run `loom target ...`.
pub fn run(c: TargetCmd) -> anyhow::Result<()> {
    match c {
        TargetCmd::Status(a) => status(a),
    }
}

fn status(a: StatusArgs) -> anyhow::Result<()> {
    let (e, _) = registry::find(&a.path)?;
    // Asked through the mount, which answers anyone.
    let targets: Vec<TargetInfo> = crate::via_mount::get_as(&e.mountpoint, "loom.targets")?;
    if targets.is_empty() {
        bail!("{}: the MGS lists no targets", e.mountpoint.display());
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&targets)?);
        return Ok(());
    }
    print!("{}", table(&targets));
    Ok(())
}

/// The table `loom target status` prints.
fn table(targets: &[TargetInfo]) -> String {
    let mut rows = vec![[
        "TARGET", "REPLICA", "ADDRESS", "ROLE", "STATE", "LAG", "HEARD", "TERM",
    ]
    .map(String::from)];
    for t in targets {
        let name = format!("{}", t.id);
        if t.replicas.is_empty() {
            rows.push([
                name,
                "-".into(),
                t.addr.clone(),
                "single".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
            ]);
            continue;
        }
        for r in &t.replicas {
            let role = if r.replica == t.primary {
                "primary"
            } else {
                "secondary"
            };
            let lag = match r.state {
                ReplicaState::Syncing if t.id.role == Role::Mdt => format!("{} rec", r.lag),
                ReplicaState::Syncing => human(r.lag),
                ReplicaState::InSync => "0".into(),
                ReplicaState::Stale => "?".into(),
            };
            let heard = r
                .heard_ms
                .map_or("-".into(), |ms| format!("{:.1} s ago", ms as f64 / 1000.0));
            rows.push([
                name.clone(),
                r.replica.to_string(),
                r.addr.clone(),
                role.into(),
                r.state.name().into(),
                lag,
                heard,
                t.term.to_string(),
            ]);
        }
    }
    let widths: Vec<usize> = (0..8)
        .map(|i| rows.iter().map(|r| r[i].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loom_proto::msg::TargetId;
    use loom_proto::replica::Replica;

    #[test]
    fn the_table_shows_each_replica_with_its_role_and_lag() {
        let mut t = TargetInfo::single(TargetId::ost(0), "u", "10.0.0.2:7001");
        t.term = 3;
        t.primary = 1;
        t.replicas = vec![
            Replica {
                replica: 0,
                uuid: "a".into(),
                addr: "10.0.0.1:7001".into(),
                state: ReplicaState::Syncing,
                lag: 3 << 20,
                heard_ms: Some(200),
            },
            Replica {
                replica: 1,
                uuid: "b".into(),
                addr: "10.0.0.2:7001".into(),
                state: ReplicaState::InSync,
                lag: 0,
                heard_ms: Some(100),
            },
        ];
        let m = TargetInfo::single(TargetId::mdt(0), "m", "10.0.0.3:7001");
        let s = table(&[m, t]);
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines.len(), 4, "{s}");
        assert!(lines[1].contains("single"), "{s}");
        assert!(
            lines[2].contains("secondary")
                && lines[2].contains("syncing")
                && lines[2].contains("3.0 MiB"),
            "{s}"
        );
        assert!(
            lines[3].contains("primary") && lines[3].contains("in-sync") && lines[3].ends_with('3'),
            "{s}"
        );
    }
}
