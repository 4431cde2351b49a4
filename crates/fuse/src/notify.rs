//! Dropping what the kernel caches, when an MDT recalls a lease or the
//! leases are lost: from a thread of its own, because the kernel may
//! block a notification until a request of this mount in the same
//! directory ends (it takes the directory's lock to drop a name), and
//! that request may be waiting for a server.
//!
//! A second thread stores the bytes a mount kept of ragged writes into the
//! kernel's cache once a file has no handle open for writing (`kept.rs`):
//! a store waits for folio locks that readers hold until a FUSE worker
//! answers them, so it never runs on a worker.

use crate::fs::Inos;
use crate::kept::KeptPages;
use crate::pagestore::PageStore;
use fuser::Notifier;
use loom_client::routing::Invalidator;
use loom_client::Client;
use loom_proto::msg::Lease;
use loom_proto::Fid;
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use tokio::sync::oneshot;

type Job = (Vec<Lease>, oneshot::Sender<()>);

/// Start the thread; the returned invalidator hands it work.
pub fn spawn(n: Notifier, kept: Arc<KeptPages>, inos: Inos) -> std::io::Result<Invalidator> {
    let (tx, rx) = mpsc::channel::<Job>();
    std::thread::Builder::new()
        .name("loom-notify".into())
        .spawn(move || {
            for (leases, done) in rx {
                for l in &leases {
                    drop_cached(&n, l, &kept, inos);
                }
                let _ = done.send(());
            }
        })?;
    let tx = Mutex::new(tx);
    Ok(Arc::new(move |leases: Vec<Lease>| {
        let (done, rx) = oneshot::channel();
        let sent = tx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send((leases, done));
        if let Err(mpsc::SendError((_, done))) = sent {
            // The thread ended with the session: nothing is cached.
            let _ = done.send(());
        }
        rx
    }))
}

/// Make the kernel drop what `l` covers. A directory's list has nothing
/// of its own in the kernel: absent names are never cached there (the
/// mount answers their lookups, see `fs.rs`).
fn drop_cached(n: &Notifier, l: &Lease, kept: &KeptPages, inos: Inos) {
    let r = match l {
        // Attributes and cached pages (a recall may be for a write), under
        // the file's gate: a store of kept bytes ends first.
        Lease::Attr(fid) => {
            let gate = kept.gate(fid.ino());
            let _held = gate.lock().unwrap_or_else(|p| p.into_inner());
            kept.drop_file(fid.ino());
            n.inval_inode(inos.ino(*fid), 0, 0)
        }
        Lease::Name(dir, name) => n.inval_entry(inos.ino(*dir), name.as_os_str()),
        // The kernel keeps neither; a recalled size is reported before,
        // a written-back directory's changes sent before.
        Lease::List(_) | Lease::Size(_) | Lease::WriteBack(_) => Ok(()),
    };
    if let Err(e) = r {
        // ENOENT: the kernel holds no such inode or name; nothing to drop.
        // ENOTCONN: unmounted meanwhile.
        if !matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTCONN)) {
            tracing::warn!("dropping {l:?} from the kernel's cache: {e}");
        }
    }
}

/// Start the thread that stores kept bytes; send it a file's inode once
/// its last handle that may write is released.
pub fn spawn_storer(
    pages: Arc<OnceLock<PageStore>>,
    kept: Arc<KeptPages>,
    client: Arc<Client>,
) -> std::io::Result<mpsc::Sender<u64>> {
    let (tx, rx) = mpsc::channel::<u64>();
    std::thread::Builder::new()
        .name("loom-store".into())
        .spawn(move || {
            for ino in rx {
                let Some(n) = pages.get() else {
                    kept.drop_file(ino);
                    continue;
                };
                store(n, &kept, &client, ino);
            }
        })?;
    Ok(tx)
}

/// Store what is kept of `ino` in the kernel's cache, under its gate.
fn store(n: &PageStore, kept: &KeptPages, client: &Client, ino: u64) {
    let gate = kept.gate(ino);
    let _held = gate.lock().unwrap_or_else(|p| p.into_inner());
    if !kept.begin_store(ino) {
        return;
    }
    // However the store ends, the opens that came meanwhile are answered.
    struct End<'a>(&'a KeptPages, u64);
    impl Drop for End<'_> {
        fn drop(&mut self) {
            self.0.end_store(self.1);
        }
    }
    let _end = End(kept, ino);
    let mut from = 0;
    // The lease is checked before each run: a recall waits at the gate,
    // but a lease that lapsed has no recall.
    while let Some((offset, pieces)) =
        kept.next_to_store(ino, client.lease_gen(Fid::from_ino(ino)), from)
    {
        let len: u64 = pieces.iter().map(|p| p.len() as u64).sum();
        if let Err(e) = n.store(ino, offset, &pieces) {
            // ENOENT: the kernel forgot the inode; ENOTCONN: unmounted.
            if !matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTCONN)) {
                tracing::warn!(ino, "storing kept bytes in the kernel's cache: {e}");
            }
            kept.drop_file(ino);
            return;
        }
        kept.stored(ino, offset, len);
        from = offset + len;
    }
}
