//! `loom snapshot`: point-in-time images of the whole file system, taken
//! by the MGS on every MDT and OST at once under a write barrier (as
//! Lustre's `lctl snapshot_create`), copy-on-write: taking one costs no
//! copy, and it holds only what changed since.

use crate::registry;
use crate::tools::{caller, connect, errno, human};
use anyhow::bail;
use clap::{Args, Subcommand};
use loom_proto::snapshot::{check_name, SnapState};
use std::path::PathBuf;
use std::time::Duration;

/// `loom snapshot ...`.
#[derive(Subcommand, Debug)]
pub enum SnapshotCmd {
    /// Take snapshot NAME of the whole file system (root). Every MDT and
    /// OST stops its changes for the moment it takes (at most
    /// --barrier-timeout), so no operation is torn across the image.
    Create(CreateArgs),
    /// Show the snapshots, oldest first, with the space each alone holds.
    List(ListArgs),
    /// Destroy snapshot NAME (root), freeing what only it holds.
    Destroy(DestroyArgs),
    /// What changed from snapshot A to snapshot B (or to the file system
    /// now), as `zfs diff` prints it: `+` added, `-` removed, `M`
    /// modified, `R OLD -> NEW` renamed (root).
    Diff(DiffArgs),
    /// Mount snapshot NAME read-only at DIR: `loom snapshot mount
    /// MGS:/FSNAME NAME DIR` (as `loom mount --snapshot NAME`, whose
    /// options it takes after DIR).
    Mount(MountArgs),
}

/// `loom snapshot diff MOUNT A [B]`.
#[derive(Args, Debug)]
pub struct DiffArgs {
    /// A path on the file system's mount.
    pub path: PathBuf,
    /// The older snapshot.
    pub from: String,
    /// The newer snapshot; the file system now if not given.
    pub to: Option<String>,
}

/// `loom snapshot mount SOURCE NAME DIR [loom mount's options]`.
#[derive(Args, Debug)]
pub struct MountArgs {
    /// The file system, MGS_ADDR:/FSNAME.
    pub source: String,
    /// The snapshot's name.
    pub name: String,
    /// Where to mount it.
    pub dir: PathBuf,
    /// Options of `loom mount` (--key-file, --foreground, ...).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub rest: Vec<String>,
}

/// `loom snapshot create MOUNT NAME`.
#[derive(Args, Debug)]
pub struct CreateArgs {
    /// A path on the file system's mount.
    pub path: PathBuf,
    /// The snapshot's name: letters, digits, '-', '_', '.', '@'.
    pub name: String,
    /// Longest the write barrier may hold, in seconds: past it the
    /// snapshot is not taken, and nothing is kept.
    #[arg(long, default_value_t = 30)]
    pub barrier_timeout: u64,
}

/// `loom snapshot list MOUNT`.
#[derive(Args, Debug)]
pub struct ListArgs {
    /// A path on the file system's mount.
    pub path: PathBuf,
}

/// `loom snapshot destroy MOUNT NAME`.
#[derive(Args, Debug)]
pub struct DestroyArgs {
    /// A path on the file system's mount.
    pub path: PathBuf,
    /// The snapshot's name.
    pub name: String,
}

/// `secs` as a compact UTC stamp for a snapshot's name: 20261128T101500Z.
pub(crate) fn stamp(secs: u64) -> String {
    when(secs).replace(['-', ':'], "")
}

pub(crate) fn when(secs: u64) -> String {
    // UTC, as `date -u -d @SECS +%FT%TZ` shows it.
    let days = secs / 86_400;
    let (h, m, s) = (secs % 86_400 / 3600, secs % 3600 / 60, secs % 60);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(mo <= 2);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{m:02}:{s:02}Z")
}

pub fn run(c: SnapshotCmd) -> anyhow::Result<()> {
    match c {
        SnapshotCmd::Create(a) => {
            if let Err(e) = check_name(&a.name) {
                bail!(e);
            }
            if a.barrier_timeout == 0 {
                bail!("--barrier-timeout: at least 1 second");
            }
            let (entry, _) = registry::find(&a.path)?;
            let s = connect(entry)?;
            let t0 = std::time::Instant::now();
            let info =
                s.rt.block_on(s.client.snapshot_create(
                    &caller(),
                    &a.name,
                    Duration::from_secs(a.barrier_timeout),
                ))
                .map_err(|e| errno(e, &format!("taking snapshot {} (root only)", a.name)))?;
            println!(
                "snapshot {} (id {}) taken in {:.2} s",
                info.name,
                info.id,
                t0.elapsed().as_secs_f64()
            );
            Ok(())
        }
        SnapshotCmd::List(a) => {
            let (entry, _) = registry::find(&a.path)?;
            let s = connect(entry)?;
            let snaps =
                s.rt.block_on(s.client.snapshots(&caller()))
                    .map_err(|e| errno(e, "listing the snapshots"))?;
            println!(
                "{:<24} {:>6} {:<21} {:>10}  STATE",
                "NAME", "ID", "CREATED", "HOLDS"
            );
            for sn in snaps {
                let state = match sn.state {
                    SnapState::Ready => "ready",
                    SnapState::Creating => "creating",
                    SnapState::Destroying => "destroying",
                };
                println!(
                    "{:<24} {:>6} {:<21} {:>10}  {state}",
                    sn.name,
                    sn.id,
                    when(sn.created),
                    human(sn.bytes / 1024),
                );
            }
            Ok(())
        }
        SnapshotCmd::Mount(a) => {
            use clap::Parser;
            #[derive(Parser)]
            struct Mount {
                #[command(flatten)]
                m: crate::mount::MountArgs,
            }
            let mut argv = vec![
                "loom-snapshot-mount".to_string(),
                a.source,
                a.dir.to_string_lossy().into_owned(),
                format!("--snapshot={}", a.name),
            ];
            argv.extend(a.rest);
            let m = Mount::try_parse_from(argv)?;
            crate::mount::mount(m.m)
        }
        SnapshotCmd::Diff(a) => diff(a),
        SnapshotCmd::Destroy(a) => {
            let (entry, _) = registry::find(&a.path)?;
            let s = connect(entry)?;
            s.rt.block_on(s.client.snapshot_destroy(&caller(), &a.name))
                .map_err(|e| errno(e, &format!("destroying snapshot {} (root only)", a.name)))?;
            println!("snapshot {} destroyed", a.name);
            Ok(())
        }
    }
}

/// `loom snapshot diff`: each image walked through a client reading it.
fn diff(a: DiffArgs) -> anyhow::Result<()> {
    use loom_client::snapdiff;
    let (entry, _) = registry::find(&a.path)?;
    let s = connect(entry)?;
    let snaps =
        s.rt.block_on(s.client.snapshots(&caller()))
            .map_err(|e| errno(e, "listing the snapshots"))?;
    let id_of = |name: &str| {
        snaps
            .iter()
            .find(|x| x.name == name && x.state == SnapState::Ready)
            .map(|x| x.id)
            .ok_or_else(|| anyhow::anyhow!("no snapshot {name:?} (loom snapshot list shows them)"))
    };
    let from = id_of(&a.from)?;
    let to = a.to.as_deref().map(id_of).transpose()?;
    let key = loom_server::node::load_key(&s.entry.key_file)?;
    let reader = |id: Option<u32>| {
        let opts = loom_client::ClientOptions {
            call_timeout: Duration::from_secs(60),
            snapshot: id,
            ..loom_client::ClientOptions::default()
        };
        s.rt.block_on(loom_client::Client::connect(
            &s.entry.mgs,
            &s.entry.fsname,
            key.clone(),
            opts,
        ))
        .map_err(|e| anyhow::anyhow!("connecting to {}:/{}: {e}", s.entry.mgs, s.entry.fsname))
    };
    let (old, new) = (reader(Some(from))?, reader(to)?);
    let c = caller();
    let old =
        s.rt.block_on(snapdiff::walk(&old, &c))
            .map_err(|e| errno(e, &format!("reading snapshot {}", a.from)))?;
    let new =
        s.rt.block_on(snapdiff::walk(&new, &c))
            .map_err(|e| errno(e, "reading the newer image"))?;
    for ch in snapdiff::diff(&old, &new) {
        println!("{}", ch.line());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn times_show_in_utc() {
        assert_eq!(super::when(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::when(1_795_824_000), "2026-11-28T00:00:00Z");
    }
}
