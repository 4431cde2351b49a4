//! The object storage target: file data objects on a local directory.
//!
//! [`OstService::handle`] decodes nothing itself (the RPC layer has done
//! that and checked the bulk's crc); it checks that every object named
//! belongs to this OST, runs the file I/O on tokio's blocking pool through
//! [`ObjectStore`], and counts every operation and its bytes for metrics.
//!
//! Objects are created logically by `Precreate` (a watermark move) and
//! appear on disk at their first write or truncate; see
//! `loom_store::object` for the on-disk layout. Every block carries a
//! checksum: a request that meets a block failing it is answered EIO,
//! and the block is logged, counted and reported to its scrub
//! ([`crate::scrub`], walking the objects as [`walk`] says).
//!
//! Writes spend and earn the clients' space grants ([`grants`]): a write
//! covered by its client's grant always finds room; one that is not must
//! fit beside every grant, or it is refused with ENOSPC. They are also
//! admitted against their owner's block quotas ([`quota`]).

mod copy;
mod grants;
pub mod quota;
mod snapshots;
mod stats;
mod walk;

use crate::error::{Handled, ServerError};
use crate::scrub::Scrub;
use grants::{Disk, Grants};
use loom_proto::frame::MAX_BULK;
use loom_proto::grant;
use loom_proto::msg::Finding;
use loom_proto::msg::{OstRequest, Reply, ReqCtx, ScrubCmd, StatFs, TargetId};
use loom_proto::quota::Owner;
use loom_proto::{Compress, Errno, ObjRef};
use loom_rpc::Bulk;
use loom_store::object::{ObjectError, ObjectStore};
use quota::OstQuota;
use stats::OpStats;
use std::path::Path;
use std::sync::Arc;

/// Largest read one request may ask for: what fits in one frame's bulk.
pub const MAX_READ: u32 = MAX_BULK;
/// Most object ids one precreate request may reserve.
pub const MAX_PRECREATE: u32 = 100_000;

/// An `ObjWrite`'s fields but its data.
struct Write {
    obj: ObjRef,
    offset: u64,
    pack: Option<Compress>,
    grant_used: u64,
    owner: Option<Owner>,
}

/// One OST.
#[derive(Debug)]
pub struct OstService {
    index: u32,
    store: Arc<ObjectStore>,
    stats: OpStats,
    scrub: Arc<Scrub>,
    grants: Grants,
    quota: OstQuota,
    /// Every change holds it shared; a snapshot's barrier exclusively.
    gate: Arc<tokio::sync::RwLock<()>>,
    barriers: crate::barrier::Barriers,
}

impl OstService {
    /// Open OST `index` whose target directory is `dir`.
    pub fn open(index: u32, dir: &Path) -> anyhow::Result<Arc<OstService>> {
        let store = ObjectStore::open(dir)
            .map_err(|e| anyhow::anyhow!("opening OST{index:04x} object store: {e}"))?;
        tracing::info!(index, dir = %dir.display(), "OST opened");
        let store = Arc::new(store);
        // Count the compressed objects' usage in the background: `loom
        // df` shows it as partial until this is done.
        let counting = store.clone();
        std::thread::Builder::new()
            .name(format!("ost{index:04x}-count"))
            .spawn(move || counting.count_packed())
            .map_err(|e| anyhow::anyhow!("OST{index:04x}: starting the usage count: {e}"))?;
        Ok(Arc::new(OstService {
            index,
            scrub: Scrub::open(
                format!("OST{index:04x}"),
                dir,
                Arc::new(walk::OstWalk::new(store.clone())),
            ),
            store,
            stats: OpStats::default(),
            grants: Grants::default(),
            quota: OstQuota::open(index, dir)?,
            gate: Arc::default(),
            barriers: Default::default(),
        }))
    }

    /// Reach the quota master through `peers` from now on (without, no
    /// id is limited here).
    pub fn use_peers(&self, peers: Arc<crate::peers::Peers>) {
        self.quota.use_peers(peers);
    }

    /// This OST's index.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The object store underneath (for tools and tests).
    pub fn store(&self) -> &Arc<ObjectStore> {
        &self.store
    }

    /// Per-operation counters: `("<op>.count", n)` and `("<op>.bytes", n)`
    /// for every operation, plus `("<op>.errors", n)`; then the integrity
    /// counters (`checksum_errors.count`, `scrub.*`), and the space granted
    /// to clients now (`granted.bytes`).
    pub fn stats(&self) -> Vec<(String, u64)> {
        let mut v = self.stats.snapshot();
        v.extend(self.scrub.counters());
        v.push(("granted.bytes".into(), self.grants.granted()));
        v
    }

    /// Handle one request; the returned bulk is the data of a read.
    pub async fn handle(
        self: &Arc<Self>,
        ctx: &ReqCtx,
        req: OstRequest,
        bulk: Bulk,
    ) -> (Handled, Vec<u8>) {
        let op = req.op();
        // Changes wait while a snapshot's barrier holds.
        let _gate = match (&req, op.effect) {
            (OstRequest::Snapshot { .. }, _) | (_, loom_proto::requests::Effect::Reads) => None,
            _ => Some(self.gate.read().await),
        };
        let (res, out, bytes) = match req {
            OstRequest::Snapshot { id, step } => {
                (self.snapshot(ctx, id, step).await, Vec::new(), 0)
            }
            OstRequest::ObjWrite {
                obj,
                offset,
                pack,
                grant_used,
                owner,
            } => {
                let n = bulk.len() as u64;
                let w = Write {
                    obj,
                    offset,
                    pack,
                    grant_used,
                    owner,
                };
                (self.write(ctx, w, bulk).await, Vec::new(), n)
            }
            OstRequest::ObjRead { obj, offset, len } => match self.read(obj, offset, len).await {
                Ok(data) => {
                    let n = data.len() as u64;
                    (Ok(Reply::Data), data, n)
                }
                Err(e) => (Err(e), Vec::new(), 0),
            },
            OstRequest::ObjTruncate {
                obj,
                size,
                pack,
                owner,
            } => (self.truncate(obj, size, pack, owner).await, Vec::new(), 0),
            OstRequest::ObjPunch { obj, offset, len } => {
                (self.punch(obj, offset, len).await, Vec::new(), len)
            }
            OstRequest::ObjAllocate {
                obj,
                offset,
                len,
                owner,
            } => (
                self.allocate(ctx, obj, offset, len, owner).await,
                Vec::new(),
                len,
            ),
            OstRequest::ObjSync { obj } => (self.sync(obj).await, Vec::new(), 0),
            OstRequest::Precreate { count } => (self.precreate(count).await, Vec::new(), 0),
            OstRequest::Destroy { objs } => (self.destroy(objs).await, Vec::new(), 0),
            OstRequest::ObjGetSize { obj } => (self.get_size(obj).await, Vec::new(), 0),
            OstRequest::StatFs => (self.statfs().await, Vec::new(), 0),
            OstRequest::Scrub { cmd } => (Ok(self.scrub(cmd)), Vec::new(), 0),
            OstRequest::ListObjects { bucket } => (self.list(bucket).await, Vec::new(), 0),
            OstRequest::QuotaUsage { who } => {
                (self.quota.usage(ctx, &self.store, who), Vec::new(), 0)
            }
            OstRequest::QuotaCheck => (self.quota_check(ctx).await, Vec::new(), 0),
            OstRequest::QuotaRelease { who, forget } => (
                self.quota.release(&self.store, who, forget).await,
                Vec::new(),
                0,
            ),
            OstRequest::ObjDigest {
                obj,
                offset,
                len,
                chunk,
            } => (self.digest(obj, offset, len, chunk).await, Vec::new(), 0),
            OstRequest::RaiseWatermark { to } => (self.raise_watermark(to).await, Vec::new(), 0),
            OstRequest::ObjSetOwner { objs, owner } => {
                (self.set_owner(objs, owner).await, Vec::new(), 0)
            }
            // The server process answers it before it reaches the OST.
            OstRequest::JobStats => (
                Err(ServerError::refused(
                    Errno::EOPNOTSUPP,
                    "job statistics are the server process's",
                )),
                Vec::new(),
                0,
            ),
        };
        self.stats.record(op, bytes, res.is_ok());
        (res, out)
    }

    /// Refuse an object that lives on another OST.
    fn check(&self, obj: ObjRef) -> Result<u64, ServerError> {
        if obj.ost != self.index {
            return Err(ServerError::refused(
                Errno::EINVAL,
                format!(
                    "object {} belongs to OST{:04x} but was sent to OST{:04x}",
                    obj.oid, obj.ost, self.index
                ),
            ));
        }
        Ok(obj.oid)
    }

    /// Run `f` on the object store in tokio's blocking pool.
    async fn blocking<T, F>(&self, f: F) -> Result<T, ServerError>
    where
        T: Send + 'static,
        F: FnOnce(&ObjectStore) -> Result<T, ObjectError> + Send + 'static,
    {
        let store = self.store.clone();
        match tokio::task::spawn_blocking(move || f(&store)).await {
            Ok(r) => r.map_err(|e| {
                self.noticed(&e);
                ServerError::from(e)
            }),
            Err(e) => Err(ServerError::internal(format!(
                "OST{:04x} I/O task failed: {e}",
                self.index
            ))),
        }
    }

    /// Store a write of `ctx`'s client that spends `w.grant_used` bytes of
    /// its grant, and top the grant up.
    async fn write(&self, ctx: &ReqCtx, w: Write, bulk: Bulk) -> Handled {
        let Bulk { data, sums } = bulk;
        let client = ctx.client_id;
        let oid = self.check(w.obj)?;
        let pack = checked_pack(w.pack)?;
        let packed = pack.is_some_and(|c| c.is_on());
        let cost = grant::cost(w.offset, data.len() as u64, packed);
        let _change = self.quota.changes.read().await;
        let owner = self.owner_for(oid, w.owner).await?;
        let behind = w.grant_used > 0;
        let charge = grant::data_cost(w.offset, data.len() as u64, packed);
        let admitted = self
            .quota
            .admit(&self.store, owner, charge, behind, ctx.uid == 0)
            .await?;
        let Some(spent) = self
            .grants
            .spend(client, w.grant_used, cost, || self.disk())
        else {
            return Err(ServerError::refused(
                Errno::ENOSPC,
                format!(
                    "OST{:04x} has no room for {cost} bytes beside the space granted to clients",
                    self.index
                ),
            ));
        };
        let (offset, sent) = (w.offset, w.owner);
        self.blocking(move |s| s.write_summed(oid, offset, &data, &sums, pack, sent))
            .await?;
        drop(spent);
        let quota_near = admitted.near;
        drop(admitted);
        if ctx.uid == 0 {
            // Root may have taken an id past this OST's share.
            self.quota.after_exempt(&self.store, owner).await;
        }
        Ok(Reply::Written {
            boot: self.grants.boot(),
            grant: self.grants.top_up(client, || self.disk()),
            quota_near,
        })
    }

    /// Whom a change of object `oid` counts against: the owner the client
    /// sent, else the object's own.
    async fn owner_for(&self, oid: u64, sent: Option<Owner>) -> Result<Owner, ServerError> {
        match sent {
            Some(o) => Ok(o),
            None => self.blocking(move |s| s.owner(oid)).await,
        }
    }

    /// The disk's space now, for the grants (`None`, and so no room, if
    /// it cannot be read; logged).
    fn disk(&self) -> Option<Disk> {
        match self.store.statfs() {
            Ok(st) => Some(Disk {
                avail: st.bytes_avail,
                total: st.bytes_total,
            }),
            Err(e) => {
                tracing::error!(ost = self.index, "reading free space for grants: {e}");
                None
            }
        }
    }

    async fn read(&self, obj: ObjRef, offset: u64, len: u32) -> Result<Vec<u8>, ServerError> {
        let oid = self.check(obj)?;
        if len > MAX_READ {
            return Err(ServerError::refused(
                Errno::EINVAL,
                format!("read of {len} bytes exceeds the limit of {MAX_READ} per request"),
            ));
        }
        self.blocking(move |s| s.read(oid, offset, len)).await
    }

    /// Set an object's size. A truncate takes no blocks (a file grown
    /// by it is sparse), so no quota holds it back.
    async fn truncate(
        &self,
        obj: ObjRef,
        size: u64,
        pack: Option<Compress>,
        owner: Option<Owner>,
    ) -> Handled {
        let oid = self.check(obj)?;
        let pack = checked_pack(pack)?;
        let _change = self.quota.changes.read().await;
        self.blocking(move |s| {
            if let Some(o) = owner.filter(|_| size > 0) {
                s.set_owner(oid, o, true)?;
            }
            s.truncate(oid, size, pack)
        })
        .await?;
        Ok(Reply::Ok)
    }

    async fn punch(&self, obj: ObjRef, offset: u64, len: u64) -> Handled {
        let oid = self.check(obj)?;
        let _change = self.quota.changes.read().await;
        self.blocking(move |s| s.punch(oid, offset, len)).await?;
        Ok(Reply::Ok)
    }

    /// Reserve blocks: admitted against the owner's quotas as a write
    /// the client waits for.
    async fn allocate(
        &self,
        ctx: &ReqCtx,
        obj: ObjRef,
        offset: u64,
        len: u64,
        owner: Option<Owner>,
    ) -> Handled {
        let oid = self.check(obj)?;
        let _change = self.quota.changes.read().await;
        let who = self.owner_for(oid, owner).await?;
        let _admitted = self
            .quota
            .admit(&self.store, who, len, false, ctx.uid == 0)
            .await?;
        self.reserve(oid, offset, len, owner).await
    }

    /// Reserve `[offset, offset + len)` of object `oid`, which takes
    /// `owner` first if given (admitted already).
    async fn reserve(&self, oid: u64, offset: u64, len: u64, owner: Option<Owner>) -> Handled {
        self.blocking(move |s| {
            if let Some(o) = owner {
                s.set_owner(oid, o, true)?;
            }
            s.allocate(oid, offset, len)
        })
        .await?;
        Ok(Reply::Ok)
    }

    /// The objects of a file whose owner changed count against `owner`.
    async fn set_owner(&self, objs: Vec<ObjRef>, owner: Owner) -> Handled {
        let oids = objs
            .into_iter()
            .map(|o| self.check(o))
            .collect::<Result<Vec<u64>, ServerError>>()?;
        let _change = self.quota.changes.read().await;
        self.blocking(move |s| {
            oids.iter()
                .try_for_each(|&oid| s.set_owner(oid, owner, false))
        })
        .await?;
        // A chown is root's (or the owner's own): not held back by
        // limits, but the master hears if it took an id past this OST's
        // share, so that other targets are not granted room it lacks.
        self.quota.after_exempt(&self.store, owner).await;
        Ok(Reply::Ok)
    }

    /// Recount the bytes held per id from the objects and compare them
    /// with the counts (root only); changes wait meanwhile.
    async fn quota_check(&self, ctx: &ReqCtx) -> Handled {
        if ctx.uid != 0 {
            return Err(ServerError::refused(
                Errno::EPERM,
                "only root may check the quota counts",
            ));
        }
        let _quiet = self.quota.changes.write().await;
        let scanned = self.blocking(|s| s.count_owners()).await?;
        let counted = self.store.owner_usage();
        Ok(crate::quota::drift(
            &quota::by_id(&counted),
            &quota::by_id(&scanned),
        ))
    }

    async fn sync(&self, obj: ObjRef) -> Handled {
        let oid = self.check(obj)?;
        self.blocking(move |s| s.sync(oid)).await?;
        Ok(Reply::Ok)
    }

    async fn precreate(&self, count: u32) -> Handled {
        if !(1..=MAX_PRECREATE).contains(&count) {
            return Err(ServerError::refused(
                Errno::EINVAL,
                format!("precreate count {count} is outside 1..={MAX_PRECREATE}"),
            ));
        }
        let start = self.blocking(move |s| s.precreate(count)).await?;
        tracing::debug!(ost = self.index, start, count, "precreated objects");
        Ok(Reply::Precreated { start, count })
    }

    async fn destroy(&self, objs: Vec<ObjRef>) -> Handled {
        // Check them all first so a misdirected batch changes nothing.
        let oids = objs
            .into_iter()
            .map(|o| self.check(o))
            .collect::<Result<Vec<u64>, ServerError>>()?;
        let _change = self.quota.changes.read().await;
        self.blocking(move |s| oids.iter().try_for_each(|&oid| s.destroy(oid)))
            .await?;
        Ok(Reply::Ok)
    }

    async fn get_size(&self, obj: ObjRef) -> Handled {
        let oid = self.check(obj)?;
        let size = self.blocking(move |s| s.size(oid)).await?;
        Ok(Reply::Size(size))
    }

    async fn list(&self, bucket: u8) -> Handled {
        let objs = self.blocking(move |s| s.list(bucket)).await?;
        Ok(Reply::Objects(objs))
    }

    /// A request met a bad block: logged, counted, reported to scrub.
    fn noticed(&self, e: &ObjectError) {
        let (oid, offset) = match e {
            ObjectError::Corrupt { oid, offset, .. } => (*oid, *offset),
            ObjectError::BadSums { oid, .. } => (*oid, 0),
            _ => return,
        };
        tracing::error!(ost = %format!("OST{:04x}", self.index), oid, offset, "{e}; answered EIO and reported to scrub");
        self.scrub.noticed(Finding {
            oid,
            offset,
            record: String::new(),
            by_scrub: false,
            when: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        });
    }

    fn scrub(self: &Arc<Self>, cmd: ScrubCmd) -> Reply {
        Reply::Scrub(self.scrub.command(cmd))
    }

    async fn statfs(&self) -> Handled {
        let st: StatFs = self.blocking(|s| s.statfs()).await?;
        let packed = self.store.packed_usage();
        Ok(Reply::StatFs(StatFs {
            target: Some(TargetId::ost(self.index)),
            packed_logical: packed.logical,
            packed_stored: packed.stored,
            packed_counted: packed.counted,
            ..st
        }))
    }
}

/// A compression setting from a request, checked: a bad one is refused
/// before any byte is stored.
fn checked_pack(pack: Option<Compress>) -> Result<Option<Compress>, ServerError> {
    if let Some(c) = &pack {
        c.validate()
            .map_err(|m| ServerError::refused(Errno::EINVAL, m))?;
    }
    Ok(pack)
}

#[cfg(test)]
mod tests {
    use super::*;
    use loom_proto::msg::ReplyResult;

    fn ost(index: u32) -> (tempfile::TempDir, Arc<OstService>) {
        let d = tempfile::tempdir().expect("tempdir");
        let s = OstService::open(index, d.path()).expect("open");
        (d, s)
    }

    /// The answer as a client gets it.
    async fn call(s: &Arc<OstService>, req: OstRequest, bulk: Vec<u8>) -> (ReplyResult, Vec<u8>) {
        // With the sums of its pieces, as a bulk off the wire has them.
        let bulk = Bulk {
            sums: loom_proto::chunk_sums::ChunkSums::of(&bulk).0,
            data: bulk,
        };
        let r = s.handle(&ReqCtx::default(), req, bulk).await;
        crate::error::answer(TargetId::ost(s.index), r)
    }

    fn obj(ost: u32, oid: u64) -> ObjRef {
        ObjRef { ost, oid }
    }

    #[tokio::test]
    async fn write_then_read_returns_the_data_in_the_bulk() {
        let (_d, s) = ost(2);
        let start = match call(&s, OstRequest::Precreate { count: 4 }, vec![]).await.0 {
            Ok(Reply::Precreated { start, count: 4 }) => start,
            other => panic!("precreate: {other:?}"),
        };
        let o = obj(2, start);
        let w = call(
            &s,
            OstRequest::ObjWrite {
                obj: o,
                offset: 5,
                pack: None,
                grant_used: 0,
                owner: None,
            },
            b"hello".to_vec(),
        )
        .await;
        assert!(matches!(w.0, Ok(Reply::Written { .. })), "{:?}", w.0);
        let (r, data) = call(
            &s,
            OstRequest::ObjRead {
                obj: o,
                offset: 0,
                len: 100,
            },
            vec![],
        )
        .await;
        assert_eq!(r, Ok(Reply::Data));
        assert_eq!(data, b"\0\0\0\0\0hello".to_vec());
        let sz = call(&s, OstRequest::ObjGetSize { obj: o }, vec![]).await.0;
        assert_eq!(sz, Ok(Reply::Size(10)));
        assert_eq!(
            call(&s, OstRequest::ObjSync { obj: o }, vec![]).await.0,
            Ok(Reply::Ok)
        );
        let stats = s.stats();
        assert!(stats.contains(&("obj_write.count".to_string(), 1)));
        assert!(stats.contains(&("obj_write.bytes".to_string(), 5)));
        assert!(stats.contains(&("obj_read.bytes".to_string(), 10)));
    }

    #[tokio::test]
    async fn truncate_punch_and_destroy_change_the_object() {
        let (_d, s) = ost(0);
        let o = obj(0, 9);
        let w = call(
            &s,
            OstRequest::ObjWrite {
                obj: o,
                offset: 0,
                pack: None,
                grant_used: 0,
                owner: None,
            },
            vec![7u8; 100],
        )
        .await;
        assert!(matches!(w.0, Ok(Reply::Written { .. })), "{:?}", w.0);
        let r = call(
            &s,
            OstRequest::ObjTruncate {
                obj: o,
                size: 50,
                pack: None,
                owner: None,
            },
            vec![],
        )
        .await;
        assert_eq!(r.0, Ok(Reply::Ok));
        let r = call(
            &s,
            OstRequest::ObjPunch {
                obj: o,
                offset: 10,
                len: 10,
            },
            vec![],
        )
        .await;
        assert_eq!(r.0, Ok(Reply::Ok));
        let (_, data) = call(
            &s,
            OstRequest::ObjRead {
                obj: o,
                offset: 0,
                len: 100,
            },
            vec![],
        )
        .await;
        let mut want = vec![7u8; 50];
        want[10..20].fill(0);
        assert_eq!(data, want);
        let r = call(&s, OstRequest::Destroy { objs: vec![o] }, vec![]).await;
        assert_eq!(r.0, Ok(Reply::Ok));
        let sz = call(&s, OstRequest::ObjGetSize { obj: o }, vec![]).await.0;
        assert_eq!(sz, Ok(Reply::Size(0)));
    }

    #[tokio::test]
    async fn objects_of_another_ost_are_refused_naming_both() {
        let (_d, s) = ost(1);
        let (r, _) = call(
            &s,
            OstRequest::ObjWrite {
                obj: obj(3, 1),
                offset: 0,
                pack: None,
                grant_used: 0,
                owner: None,
            },
            b"x".to_vec(),
        )
        .await;
        let e = r.expect_err("wrong OST");
        assert_eq!(e.errno, Errno::EINVAL);
        assert!(
            e.msg.contains("OST0003") && e.msg.contains("OST0001"),
            "{}",
            e.msg
        );
        let (r, _) = call(
            &s,
            OstRequest::Destroy {
                objs: vec![obj(1, 1), obj(2, 2)],
            },
            vec![],
        )
        .await;
        assert_eq!(r.expect_err("wrong OST in batch").errno, Errno::EINVAL);
    }

    #[tokio::test]
    async fn oversized_reads_and_precreates_are_invalid() {
        let (_d, s) = ost(0);
        let (r, _) = call(
            &s,
            OstRequest::ObjRead {
                obj: obj(0, 1),
                offset: 0,
                len: MAX_READ + 1,
            },
            vec![],
        )
        .await;
        assert_eq!(r.expect_err("too long").errno, Errno::EINVAL);
        for count in [0, MAX_PRECREATE + 1] {
            let (r, _) = call(&s, OstRequest::Precreate { count }, vec![]).await;
            assert_eq!(r.expect_err("bad count").errno, Errno::EINVAL);
        }
        let (r, _) = call(
            &s,
            OstRequest::Precreate {
                count: MAX_PRECREATE,
            },
            vec![],
        )
        .await;
        assert!(matches!(
            r,
            Ok(Reply::Precreated {
                start: 1,
                count: MAX_PRECREATE
            })
        ));
    }

    #[tokio::test]
    async fn statfs_names_this_ost() {
        let (_d, s) = ost(4);
        match call(&s, OstRequest::StatFs, vec![]).await.0 {
            Ok(Reply::StatFs(st)) => {
                assert_eq!(st.target, Some(TargetId::ost(4)));
                assert!(st.bytes_total > 0);
            }
            other => panic!("statfs: {other:?}"),
        }
    }
}
