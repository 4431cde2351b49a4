//! Filling the catalog from nothing: every MDT scans its own directory
//! entries at once (`MdtRequest::CatalogScan`), each entry with the inode
//! it names where that MDT keeps it; the few inodes kept elsewhere are
//! asked of their MDT. Each page is one transaction.
//!
//! Before it scans, the catalog registers (or keeps) a changelog consumer
//! on every MDT and notes the last record: following the changelog from
//! there afterwards applies again whatever changed during the scan, so
//! the catalog misses nothing.

use crate::catalog::{put_inode, put_name, put_shards, shards_of, Catalog, InodeRow};
use crate::db::Stmt;
use crate::follow;
use loom_client::ctx::Caller;
use loom_client::Client;
use loom_proto::{Errno, Fid};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Entries per page of a scan.
const PAGE: u32 = 4096;
/// Inodes kept elsewhere asked for at once.
const AT_ONCE: usize = 32;

/// What a scan did.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Scanned {
    /// Names recorded.
    pub names: u64,
    /// Inodes recorded.
    pub inodes: u64,
    /// Seconds it took.
    pub seconds: f64,
}

/// Empty the catalog and fill it from every MDT; `progress` hears the
/// names recorded so far now and then.
pub async fn scan(
    client: &Arc<Client>,
    cat: &Catalog,
    progress: &(dyn Fn(u64) + Sync),
) -> anyhow::Result<Scanned> {
    let t0 = Instant::now();
    // Consumers first, and their starting records, then the rows: what
    // changes from here on is followed.
    follow::attach(client, cat, true).await?;
    cat.clear_rows().await?;
    let c = root_caller();
    let root = client.root().await.map_err(|e| errno(e, "the root"))?;
    let attr = client
        .getattr(&c, root)
        .await
        .map_err(|e| errno(e, "the root"))?;
    let layout = client.get_layout_as(&c, root).await.ok();
    let mut first = vec![put_inode(&InodeRow::of(&attr, layout.as_ref(), 0))];
    first.extend(put_shards(root.ino() as i64, &shards_of(layout.as_ref())));
    cat.db.batch(&first).await?;
    let names = AtomicU64::new(0);
    let inodes = AtomicU64::new(1);
    let scans = client
        .mdts()
        .into_iter()
        .map(|m| scan_mdt(client, cat, m, &names, &inodes, progress));
    for r in join_all(scans).await {
        r?;
    }
    Ok(Scanned {
        names: names.load(Ordering::Relaxed),
        inodes: inodes.load(Ordering::Relaxed),
        seconds: t0.elapsed().as_secs_f64(),
    })
}

async fn scan_mdt(
    client: &Arc<Client>,
    cat: &Catalog,
    mdt: u32,
    names: &AtomicU64,
    inodes: &AtomicU64,
    progress: &(dyn Fn(u64) + Sync),
) -> anyhow::Result<()> {
    let c = root_caller();
    let mut after = Vec::new();
    loop {
        let (items, next) = client
            .catalog_scan_page(mdt, std::mem::take(&mut after), PAGE)
            .await
            .map_err(|e| errno(e, &format!("scanning MDT{mdt}")))?;
        let mut stmts: Vec<Stmt> = Vec::with_capacity(items.len() * 2);
        let mut elsewhere = Vec::new();
        for it in &items {
            stmts.push(put_name(
                it.dir.ino() as i64,
                it.name.as_bytes(),
                it.fid.ino() as i64,
            ));
            match &it.inode {
                Some((attr, layout)) => {
                    stmts.push(put_inode(&InodeRow::of(attr, layout.as_ref(), mdt)));
                    if it.kind == loom_proto::msg::FileKind::Dir {
                        stmts.extend(put_shards(it.fid.ino() as i64, &shards_of(layout.as_ref())));
                    }
                    inodes.fetch_add(1, Ordering::Relaxed);
                }
                None => elsewhere.push(it.fid),
            }
        }
        for chunk in elsewhere.chunks(AT_ONCE) {
            let got = join_all(chunk.iter().map(|f| stat(client, &c, *f))).await;
            for r in got {
                match r {
                    Ok(Some((_, rows))) => {
                        stmts.extend(rows);
                        inodes.fetch_add(1, Ordering::Relaxed);
                    }
                    // Removed since the entry was read: its record will say.
                    Ok(None) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        cat.db.batch(&stmts).await?;
        progress(names.fetch_add(items.len() as u64, Ordering::Relaxed) + items.len() as u64);
        match next {
            Some(n) => after = n,
            None => return Ok(()),
        }
    }
}

/// Inode `fid`'s kind and the rows it has now (its own, and a
/// directory's shards), or `None` if it is gone or an orphan.
pub async fn stat(
    client: &Arc<Client>,
    c: &Caller,
    fid: Fid,
) -> anyhow::Result<Option<(loom_proto::msg::FileKind, Vec<Stmt>)>> {
    let attr = match client.getattr(c, fid).await {
        Ok(a) => a,
        Err(Errno::ENOENT | Errno::ESTALE) => return Ok(None),
        Err(e) => return Err(errno(e, &format!("inode {fid}"))),
    };
    if attr.nlink == 0 {
        return Ok(None);
    }
    use loom_proto::msg::FileKind;
    let layout = match attr.kind {
        FileKind::File | FileKind::Dir => match client.get_layout_as(c, fid).await {
            Ok(l) => Some(l),
            Err(Errno::ENOENT | Errno::ESTALE) => return Ok(None),
            Err(Errno::ENODATA) => None,
            Err(e) => return Err(errno(e, &format!("the layout of {fid}"))),
        },
        _ => None,
    };
    let mdt = client.mdt_index_of(fid).unwrap_or(0);
    let mut v = vec![put_inode(&InodeRow::of(&attr, layout.as_ref(), mdt))];
    if attr.kind == FileKind::Dir {
        v.push(crate::catalog::unless_shard(fid.ino() as i64));
        v.extend(put_shards(fid.ino() as i64, &shards_of(layout.as_ref())));
    }
    Ok(Some((attr.kind, v)))
}

/// The caller the engine acts as: root, as the tool runs.
pub fn root_caller() -> Caller {
    Caller {
        uid: 0,
        gid: 0,
        groups: Vec::new(),
        pid: std::process::id(),
        umask: None,
    }
}

/// An errno as an error saying what failed.
pub fn errno(e: Errno, what: &str) -> anyhow::Error {
    anyhow::anyhow!("{what}: {}", std::io::Error::from_raw_os_error(e.raw()))
}

/// Run fallible futures at once (on this task): their outputs in order,
/// or the first error as soon as one fails (the others are dropped).
pub async fn try_join_all<T, F: std::future::Future<Output = anyhow::Result<T>>>(
    fs: impl IntoIterator<Item = F>,
) -> anyhow::Result<Vec<T>> {
    let mut fs: Vec<Option<std::pin::Pin<Box<F>>>> =
        fs.into_iter().map(|f| Some(Box::pin(f))).collect();
    let mut out: Vec<Option<T>> = fs.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (i, slot) in fs.iter_mut().enumerate() {
            if let Some(f) = slot {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(Ok(v)) => {
                        out[i] = Some(v);
                        *slot = None;
                    }
                    std::task::Poll::Ready(Err(e)) => return std::task::Poll::Ready(Err(e)),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(Ok(()))
        }
    })
    .await?;
    Ok(out.into_iter().flatten().collect())
}

/// Run futures at once (on this task), their outputs in order.
pub async fn join_all<F: std::future::Future>(fs: impl IntoIterator<Item = F>) -> Vec<F::Output> {
    let fs: Vec<std::pin::Pin<Box<F>>> = fs.into_iter().map(Box::pin).collect();
    let mut out: Vec<Option<F::Output>> = fs.iter().map(|_| None).collect();
    let mut fs: Vec<Option<std::pin::Pin<Box<F>>>> = fs.into_iter().map(Some).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (i, slot) in fs.iter_mut().enumerate() {
            if let Some(f) = slot {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => {
                        out[i] = Some(v);
                        *slot = None;
                    }
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    out.into_iter().flatten().collect()
}
