//! An MDT whose store fails to commit (fsync) stops serving: every
//! request after the failure is refused with EIO and no change is
//! acknowledged as done once its commit may be lost; what was committed
//! before stays, and the MDT serves again once restarted on a sound store.
//! The store is injected (`MdtService::open_on`): a real store wrapped so
//! that its fsync fails on demand.
mod common;
use common::*;
use loom_proto::msg::{FileKind, MdtRequest};
use loom_proto::{Errno, Fid};
use loom_store::kv::{Batch, KvError, KvStore, Pairs, Space, Ticket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A store whose `sync_through` fails while `failing` is set.
struct FailingSync {
    inner: Arc<dyn KvStore>,
    failing: Arc<AtomicBool>,
}

impl KvStore for FailingSync {
    fn get(&self, s: Space, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        self.inner.get(s, key)
    }
    fn scan(
        &self,
        s: Space,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Pairs, KvError> {
        self.inner.scan(s, prefix, after, limit)
    }
    fn apply(&self, b: Batch) -> Result<Ticket, KvError> {
        self.inner.apply(b)
    }
    fn apply_flushed(&self, b: Batch) -> Result<Ticket, KvError> {
        self.inner.apply_flushed(b)
    }
    fn sync_through(&self, t: Ticket) -> Result<(), KvError> {
        if self.failing.load(Ordering::SeqCst) {
            return Err(KvError::Backend {
                path: "injected".into(),
                msg: "fsync failed (EIO)".into(),
            });
        }
        self.inner.sync_through(t)
    }
}

fn create(name: &str) -> MdtRequest {
    MdtRequest::Create {
        parent: Fid::ROOT,
        name: name.into(),
        kind: FileKind::File,
        perm: 0o644,
        rdev: 0,
        stripe: None,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_mdt_whose_fsync_fails_stops_serving_and_loses_nothing_it_committed() {
    let c = Cluster::start().await;
    let failing = Arc::new(AtomicBool::new(false));
    let f = failing.clone();
    c.restart_mdt_on(move |inner| Arc::new(FailingSync { inner, failing: f }))
        .await;
    let kept = c.create(Fid::ROOT, "kept").await;
    c.ok(MdtRequest::Sync).await;

    failing.store(true, Ordering::SeqCst);
    // An fsync asked for is refused, not answered as done.
    assert_eq!(c.errno(MdtRequest::Sync).await, Errno::EIO);
    // From then on the MDT serves nothing: changes and reads alike.
    let r = c.call_as(0x51, 1, 1, create("after")).await;
    assert_eq!(r.expect_err("a change after the failure").errno, Errno::EIO);
    assert_eq!(
        c.errno(MdtRequest::GetAttr { fid: kept.fid }).await,
        Errno::EIO
    );
    assert_eq!(c.errno(create("after2")).await, Errno::EIO);

    // Restarted on a sound store: what was committed is there, what was
    // refused is not, and it serves again.
    failing.store(false, Ordering::SeqCst);
    c.restart_mdt().await;
    assert_eq!(c.lookup(Fid::ROOT, "kept").await.fid, kept.fid);
    for name in ["after", "after2"] {
        assert_eq!(
            c.lookup_errno(Fid::ROOT, name).await,
            Errno::ENOENT,
            "{name}"
        );
    }
    c.create(Fid::ROOT, "again").await;
}
