//! Dropping what the kernel caches, when an MDT recalls a lease or the
//! leases are lost: from a thread of its own, because the kernel may
//! block a notification until a request of this mount in the same
//! directory ends (it takes the directory's lock to drop a name), and
//! that request may be waiting for a server.

use fuser::{INodeNo, Notifier};
use loom_client::routing::Invalidator;
use loom_proto::msg::Lease;
use std::sync::{mpsc, Arc, Mutex};
use tokio::sync::oneshot;

type Job = (Vec<Lease>, oneshot::Sender<()>);

/// Start the thread; the returned invalidator hands it work.
pub fn spawn(n: Notifier) -> std::io::Result<Invalidator> {
    let (tx, rx) = mpsc::channel::<Job>();
    std::thread::Builder::new()
        .name("loom-notify".into())
        .spawn(move || {
            for (leases, done) in rx {
                for l in &leases {
                    drop_cached(&n, l);
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
fn drop_cached(n: &Notifier, l: &Lease) {
    let r = match l {
        // Attributes and cached pages (a recall may be for a write).
        Lease::Attr(fid) => n.inval_inode(INodeNo(fid.ino()), 0, 0),
        Lease::Name(dir, name) => n.inval_entry(INodeNo(dir.ino()), name.as_os_str()),
        // The kernel keeps neither; a recalled size is reported before.
        Lease::List(_) | Lease::Size(_) => Ok(()),
    };
    if let Err(e) = r {
        // ENOENT: the kernel holds no such inode or name; nothing to drop.
        // ENOTCONN: unmounted meanwhile.
        if !matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTCONN)) {
            tracing::warn!("dropping {l:?} from the kernel's cache: {e}");
        }
    }
}
