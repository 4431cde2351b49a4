//! `loom fsck`: the object part of Lustre's LFSCK, online. It finds OST
//! objects that no file refers to (left by a crash between a file's
//! create and its commit, or by a destroy that never reached its OST),
//! reports them with their sizes, and with `--repair` reclaims them.
//!
//! Safe against files made meanwhile: the MDTs' references are read
//! before and after the OSTs are listed (an object that appears in
//! either is kept), and an object written in the last `--min-age` seconds
//! is never a candidate (a create whose MDT is still waiting for its
//! client's replay refers to it only once replayed).

use crate::registry;
use crate::tools::{connect, errno, Session};
use clap::Args;
use loom_proto::msg::{ObjInfo, Role};
use loom_proto::ObjRef;
use std::collections::HashSet;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

/// Options of `loom fsck`.
#[derive(Args)]
#[command(
    after_help = "Checks every OST object against the layouts of the files of every MDT \
(the object part of Lustre's LFSCK), online. An object no file refers to is reported with its \
size; --repair destroys it and frees its space. Namespace checks (dangling entries, link counts, \
shards) are not part of this version. Exit status, as e2fsck: 0 nothing found, 1 found and \
repaired, 4 found and left (run again with --repair), 8 the check itself failed."
)]
pub struct FsckArgs {
    /// A path on the loomfs mount (its mount point or anything under it).
    pub path: PathBuf,
    /// Destroy the objects no file refers to (root only).
    #[arg(long)]
    pub repair: bool,
    /// Leave alone objects written in the last SECS seconds: a file being
    /// made, or one whose create an MDT is still replaying after a crash,
    /// may refer to them soon. Longer than the MDTs' recovery window.
    #[arg(long, value_name = "SECS", default_value_t = 600)]
    pub min_age: u64,
}

/// Exit codes, as e2fsck's.
const FOUND_REPAIRED: u8 = 1;
const FOUND_LEFT: u8 = 4;

/// Exit code when the check itself failed.
const CHECK_FAILED: u8 = 8;

pub fn fsck(a: FsckArgs) -> ExitCode {
    check(&a).unwrap_or_else(|e| {
        eprintln!("loom fsck: {e:#}");
        ExitCode::from(CHECK_FAILED)
    })
}

fn check(a: &FsckArgs) -> anyhow::Result<ExitCode> {
    let (entry, _) = registry::find(&a.path)?;
    let s = connect(entry)?;
    let before = referenced(&s)?;
    let osts = ost_indices(&s);
    let tty = std::io::stderr().is_terminal();
    let mut candidates: Vec<(ObjRef, ObjInfo)> = Vec::new();
    let mut listed = 0u64;
    for (k, &ost) in osts.iter().enumerate() {
        for bucket in 0..=255u8 {
            let objs =
                s.rt.block_on(s.client.ost_objects(ost, bucket))
                    .map_err(|e| errno(e, &format!("listing OST{ost:04x}")))?;
            listed += objs.len() as u64;
            for o in objs {
                let r = ObjRef { ost, oid: o.oid };
                if !before.contains(&r) && o.idle_secs >= a.min_age {
                    candidates.push((r, o));
                }
            }
            if tty {
                eprint!(
                    "\rfsck: OST {} of {}, {:.0}%   ",
                    k + 1,
                    osts.len(),
                    100.0 * f64::from(bucket) / 255.0
                );
                let _ = std::io::stderr().flush();
            }
        }
    }
    if tty {
        eprintln!();
    }
    // Files made while the OSTs were listed refer to their objects now.
    let after = referenced(&s)?;
    candidates.retain(|(r, _)| !after.contains(r));
    let fs = &s.entry.fsname;
    println!(
        "fsck: {} MDT references, {listed} objects on {} OSTs checked",
        before.len(),
        osts.len()
    );
    for (r, o) in &candidates {
        println!(
            "orphan object: {fs}-OST{:04x} object {}, {} bytes, last written {} s ago",
            r.ost, r.oid, o.size, o.idle_secs
        );
    }
    let bytes: u64 = candidates.iter().map(|(_, o)| o.size).sum();
    if candidates.is_empty() {
        println!("fsck: no problems found");
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "fsck: {} objects no file refers to, {bytes} bytes",
        candidates.len()
    );
    if !a.repair {
        println!("fsck: run again with --repair to reclaim them");
        return Ok(ExitCode::from(FOUND_LEFT));
    }
    let objs: Vec<ObjRef> = candidates.iter().map(|(r, _)| *r).collect();
    for chunk in objs.chunks(4096) {
        s.rt.block_on(s.client.reclaim_objects(chunk.to_vec()))
            .map_err(|e| errno(e, "reclaiming objects"))?;
    }
    println!(
        "fsck: repaired: reclaimed {} objects, {bytes} bytes",
        objs.len()
    );
    Ok(ExitCode::from(FOUND_REPAIRED))
}

fn referenced(s: &Session) -> anyhow::Result<HashSet<ObjRef>> {
    let v =
        s.rt.block_on(s.client.referenced_objects())
            .map_err(|e| errno(e, "reading the MDTs' layouts"))?;
    Ok(v.into_iter().collect())
}

fn ost_indices(s: &Session) -> Vec<u32> {
    let mut v: Vec<u32> = s
        .client
        .router()
        .config()
        .targets
        .iter()
        .filter(|t| t.id.role == Role::Ost)
        .map(|t| t.id.index)
        .collect();
    v.sort();
    v
}
