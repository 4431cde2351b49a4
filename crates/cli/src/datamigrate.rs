//! `loom migrate [-c N] [-S SIZE] [-i OST] [-p POOL] [-E ...] FILE|DIR...`:
//! move files' data onto new objects of another layout, their FIDs kept
//! (Lustre's `lfs migrate` without `-m`). Each file is copied by this
//! client while its MDT keeps it still (`loom_client::datamig`); a file
//! open elsewhere is tried again later, with a growing wait. A user
//! without the cluster key migrates the files they may write through
//! the mount (`setxattr(FILE, "loom.migrate", LAYOUT)`, see
//! `loom_fuse::tools`), which copies them as that user.

use crate::migrate::MigrateArgs;
use crate::registry;
use crate::tools::{caller, connect, errno, Session};
use anyhow::{bail, Context};
use loom_proto::layout::{ComponentSpec, LayoutSpec};
use loom_proto::msg::FileKind;
use loom_proto::{Errno, Fid, StripeSpec};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Longest wait between two tries of the files in use.
const MAX_WAIT: Duration = Duration::from_secs(30);

/// One file to move.
struct Todo {
    fid: Fid,
    path: String,
    size: u64,
}

pub fn run(a: &MigrateArgs) -> anyhow::Result<()> {
    let spec = spec_of(a)?;
    if spec.components.iter().any(|c| c.on_mdt) {
        bail!("-L mdt: file data migrates onto OSTs only, not into a Data-on-MDT component");
    }
    let pools: Vec<String> = spec
        .components
        .iter()
        .filter_map(|c| c.stripe.pool.clone())
        .collect();
    let first = a
        .dirs
        .first()
        .map(|p| p.as_path())
        .unwrap_or(Path::new("."));
    if !pools.is_empty() {
        let have = crate::pool::list(first)?;
        if let Some(p) = pools
            .iter()
            .find(|p| loom_proto::pool::find(&have, p).is_none())
        {
            bail!("no OST pool {p}; see loom pool list");
        }
    }
    let (entry, _) = registry::find(first)?;
    // Root with the key copies here; anyone else through the mount.
    let s = match nix::unistd::getuid().is_root() && crate::via_mount::key_readable(&entry) {
        true => Some(connect(entry)?),
        false => None,
    };
    let mut todo = Vec::new();
    let mut failed = 0u64;
    for p in &a.dirs {
        let r = match &s {
            Some(s) => collect(s, p, &mut todo),
            None => collect_mounted(p, &mut todo),
        };
        if let Err(e) = r {
            eprintln!("loom migrate: {e:#}");
            failed += 1;
        }
    }
    let total: u64 = todo.iter().map(|t| t.size).sum();
    let started = Instant::now();
    let done_bytes = AtomicU64::new(0);
    let shown_at = std::sync::Mutex::new(Instant::now());
    let (files, n) = (todo.len(), AtomicU64::new(0));
    let progress = |bytes: u64| {
        let d = done_bytes.fetch_add(bytes, Ordering::Relaxed) + bytes;
        let mut at = shown_at.lock().unwrap_or_else(|p| p.into_inner());
        if !a.quiet && at.elapsed() >= Duration::from_secs_f64(a.progress.max(0.2)) {
            *at = Instant::now();
            eprintln!(
                "loom migrate: {}/{files} files, {} of {} MiB, {:.0} MiB/s",
                n.load(Ordering::Relaxed),
                d >> 20,
                total >> 20,
                d as f64 / (1 << 20) as f64 / started.elapsed().as_secs_f64().max(1e-3)
            );
        }
    };
    let c = caller();
    let mut moved = 0u64;
    let mut wait = Duration::from_secs(1);
    let mut why = std::collections::HashMap::new();
    for round in 0..=a.retries {
        let mut busy = Vec::new();
        for t in todo {
            let r = match &s {
                Some(s) => {
                    s.rt.block_on(s.client.migrate_data(&c, t.fid, spec.clone(), &progress))
                }
                None => migrate_mounted(&t.path, &spec).inspect(|_| progress(t.size)),
            };
            match r {
                Ok(_) => {
                    moved += 1;
                    n.fetch_add(1, Ordering::Relaxed);
                }
                // In use elsewhere, or reached meanwhile: later.
                Err(e @ (Errno::EBUSY | Errno::EAGAIN | Errno::ESTALE)) => {
                    why.insert(t.fid, e);
                    busy.push(t)
                }
                Err(Errno::ENOENT) => {
                    // Removed since the walk: nothing to move.
                    n.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => {
                    eprintln!("loom migrate: {}", errno(e, &t.path));
                    failed += 1;
                }
            }
        }
        todo = busy;
        if todo.is_empty() || round == a.retries {
            break;
        }
        if !a.quiet {
            eprintln!(
                "loom migrate: {} files in use elsewhere; trying again in {} s",
                todo.len(),
                wait.as_secs()
            );
        }
        std::thread::sleep(wait);
        wait = (wait * 2).min(MAX_WAIT);
    }
    let secs = started.elapsed().as_secs_f64();
    let bytes = done_bytes.load(Ordering::Relaxed);
    if !a.quiet {
        println!(
            "{moved} files migrated ({} MiB in {secs:.1} s, {:.0} MiB/s), {} still in use, {failed} failed",
            bytes >> 20,
            bytes as f64 / (1 << 20) as f64 / secs.max(1e-3),
            todo.len()
        );
    }
    for t in &todo {
        let reason = match why.get(&t.fid).copied() {
            Some(Errno::ESTALE) => "its layout changed while it was copied",
            Some(Errno::EAGAIN) => "its MDT undid the migration (a restart)",
            _ => "in use on another client",
        };
        eprintln!("loom migrate: {}: {reason}; left as it was", t.path);
    }
    if !todo.is_empty() || failed > 0 {
        bail!("some files were not migrated (see above); run again to go on");
    }
    Ok(())
}

/// The new layout the options name: components with -E, else one.
fn spec_of(a: &MigrateArgs) -> anyhow::Result<LayoutSpec> {
    if !a.ends.is_empty() {
        let words: Vec<String> = std::env::args().collect();
        let from = words
            .iter()
            .position(|w| w == "migrate")
            .map_or(0, |i| i + 1);
        return crate::tools::components_from_args(&words[from..]).map_err(anyhow::Error::msg);
    }
    let one = |v: &[i32], f: &str| -> anyhow::Result<Option<i32>> {
        match v {
            [] => Ok(None),
            [x] => Ok(Some(*x)),
            _ => bail!("{f} given twice (components take -E)"),
        }
    };
    let size = match a.size.as_slice() {
        [] => 0,
        [s] if *s <= u64::from(u32::MAX) => *s as u32,
        [s] => bail!("stripe size {s} is too large"),
        _ => bail!("-S given twice (components take -E)"),
    };
    let stripe = StripeSpec {
        count: one(&a.count, "-c")?.unwrap_or(0),
        size,
        start_ost: one(&a.index, "-i")?.unwrap_or(-1),
        pool: match a.pool.as_slice() {
            [] => None,
            [p] => Some(p.clone()),
            _ => bail!("-p given twice (components take -E)"),
        },
    };
    stripe.validate().map_err(anyhow::Error::msg)?;
    Ok(LayoutSpec {
        components: vec![ComponentSpec {
            end: u64::MAX,
            on_mdt: false,
            stripe,
        }],
    })
}

/// Migrate the file at `path` through the mount, as this user.
fn migrate_mounted(path: &str, spec: &LayoutSpec) -> Result<u64, Errno> {
    let value = serde_json::to_vec(spec).map_err(|_| Errno::EINVAL)?;
    rustix::fs::setxattr(
        path,
        "loom.migrate",
        &value,
        rustix::fs::XattrFlags::empty(),
    )
    .map(|_| 0)
    .map_err(|e| Errno(e.raw_os_error()))
}

/// The regular files at `path`, walked through the mount: it, or those
/// of its tree.
fn collect_mounted(path: &Path, out: &mut Vec<Todo>) -> anyhow::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let shown = path.display().to_string();
    let m = std::fs::symlink_metadata(path).with_context(|| shown.clone())?;
    if m.is_file() {
        out.push(Todo {
            fid: Fid::from_ino(m.ino()),
            path: shown,
            size: m.size(),
        });
        return Ok(());
    }
    if !m.is_dir() {
        bail!("{shown}: neither a regular file nor a directory");
    }
    let mut stack = vec![path.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).with_context(|| d.display().to_string())? {
            let e = e.with_context(|| d.display().to_string())?;
            let m = e
                .metadata()
                .with_context(|| e.path().display().to_string())?;
            if m.is_dir() {
                stack.push(e.path());
            } else if m.is_file() {
                out.push(Todo {
                    fid: Fid::from_ino(m.ino()),
                    path: e.path().display().to_string(),
                    size: m.size(),
                });
            }
        }
    }
    Ok(())
}

/// The regular files at `path`: it, or those of its tree.
fn collect(s: &Session, path: &Path, out: &mut Vec<Todo>) -> anyhow::Result<()> {
    let (_, rel) = registry::find(path)?;
    let shown = path.display().to_string();
    let c = caller();
    s.rt.block_on(async {
        let attr = s
            .client
            .resolve_path_as(&c, rel.as_os_str().as_bytes())
            .await
            .map_err(|e| errno(e, &shown))?;
        match attr.kind {
            FileKind::File => {
                out.push(Todo {
                    fid: attr.fid,
                    path: shown.clone(),
                    size: attr.size,
                });
                return Ok(());
            }
            FileKind::Dir => {}
            _ => bail!("{shown}: neither a regular file nor a directory"),
        }
        let mut stack = vec![(attr.fid, shown.clone())];
        while let Some((dir, at)) = stack.pop() {
            let mut cookie = 0;
            loop {
                let (entries, eof) = match s.client.readdir(&c, dir, cookie, 1024).await {
                    Ok(r) => r,
                    Err(Errno::ENOENT) => break,
                    Err(e) => return Err(errno(e, &at)),
                };
                for e in &entries {
                    cookie = e.cookie;
                    let name = format!("{at}/{}", String::from_utf8_lossy(e.name.as_bytes()));
                    match e.attr.kind {
                        FileKind::Dir => stack.push((e.attr.fid, name)),
                        FileKind::File => out.push(Todo {
                            fid: e.attr.fid,
                            path: name,
                            size: e.attr.size,
                        }),
                        _ => {}
                    }
                }
                if eof || entries.is_empty() {
                    break;
                }
            }
        }
        Ok(())
    })
}
