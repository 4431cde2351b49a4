//! [`OpenFile`]: striped reads and writes of one open file.
//!
//! Data goes straight to the OSTs: a read or write is planned with
//! [`plan`](super::plan::plan) into one request per object per
//! [`MAX_RPC`] bytes, and the requests are sent in parallel. Writes return
//! once sent and are collected in the background ([`super::writeback`]). The MDT holds
//! the size and mtime, so a writer reports what it wrote: [`OpenFile::flush`]
//! (at every close) sends `UpdateSize` with the end of the data written.
//! That is what gives close-to-open consistency: the size another client
//! sees after our close includes our writes.
//!
//! Size as this handle knows it: the size at open, grown by its own writes
//! and set by truncates made through this client. Reads are clamped to it;
//! holes and objects shorter than the file read as zeros.

use super::grant::Taken;
use super::plan::{clamp_read, gather_bulk, plan, scatter, ObjExtent, MAX_RPC};
use super::readahead::{window_of, Fetch, ReadAhead, Stamp};
use super::writeback::FileWrites;
use crate::ctx::Caller;
use crate::writeback::Absorbed;
use crate::Client;
use bytes::Bytes;
use loom_proto::grant;
use loom_proto::layout::object_range_for;
use loom_proto::layout::Pattern;
use loom_proto::msg::{MdtRequest, OstRequest, Reply, Time};
use loom_proto::quota::Owner;
use loom_proto::{Errno, Fid, Layout, ObjRef};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::task::{JoinHandle, JoinSet};

/// One open regular file. Cheap to share; reads and writes may run
/// concurrently from many tasks.
#[derive(Debug)]
pub struct OpenFile {
    client: Arc<Client>,
    caller: Caller,
    fid: Fid,
    layout: Layout,
    /// Size when opened, or as set by a truncate through this client.
    known_size: AtomicU64,
    /// Largest end of data written through this handle and acknowledged.
    written_end: AtomicU64,
    /// Written since the last successful report to the MDT.
    dirty: AtomicBool,
    /// When the last write through this handle completed: the mtime the
    /// MDT gets at flush (not the flush's own time, which may follow an
    /// explicit utimens).
    last_write: Mutex<Time>,
    /// This file's writes in flight on this client (shared by its handles).
    writes: Arc<FileWrites>,
    /// Failed writes of the file when this handle opened: later ones are
    /// this handle's to report.
    failures_at_open: u64,
    /// Failed writes already reported by a write through this handle.
    failures_told_by_write: AtomicU64,
    /// The file is set-user-ID (or executable set-group-ID) as far as this
    /// handle knows: the first write by a caller other than root asks the
    /// MDT to clear the bits before any data goes out (POSIX: a write by
    /// an unprivileged user clears them).
    privileged: AtomicBool,
    /// Reports wait under the file's size lease (see
    /// [`OpenFile::defer_reports`]).
    defers: AtomicBool,
    /// Held while a report is on its way: a recall's report, or a setattr
    /// that carries one, waits for one in flight (which could otherwise
    /// land after it, or after the recall was answered).
    reporting: Arc<tokio::sync::Mutex<()>>,
    /// Small sequential writes gathered under the size lease and not sent
    /// yet (see [`OpenFile::write`]).
    gathered: Mutex<Option<Gathered>>,
    /// What was read ahead for a sequential reader (see
    /// [`super::readahead`]); `None` on a mount (the kernel reads ahead)
    /// or for a file with nothing on OSTs.
    readahead: Option<(u64, tokio::sync::Mutex<ReadAhead>)>,
    /// Whom the file's bytes count against (its owner, group and project
    /// as last known here), sent with writes for the OSTs' quotas; `None`
    /// until known (the OST then keeps the object's own).
    owner: Mutex<Option<Owner>>,
    /// A file the write-back layer made and had not sent when this handle
    /// opened it (its layout is still to come): the bytes go to the layer
    /// while it holds the file, then through `sent`.
    made_here: bool,
    /// Once such a file is sent, the handle on its layout that this one's
    /// I/O goes through.
    sent: tokio::sync::OnceCell<Arc<OpenFile>>,
}

/// What a read needs, owned, so that reading ahead can run it as a task.
#[derive(Clone)]
struct Source {
    client: Arc<Client>,
    caller: Caller,
    fid: Fid,
    layout: Layout,
}

impl Fetch for Source {
    fn spawn(&self, start: u64, len: usize) -> JoinHandle<Result<Vec<u8>, Errno>> {
        let src = self.clone();
        tokio::spawn(async move { src.fetch(start, len).await })
    }
}

/// Most bytes a handle gathers before sending them as one write.
pub const GATHER_MAX: usize = 1 << 20;

/// Bytes written at `offset` and held by the handle, with the space
/// grant taken for them when each write was gathered (the whole never
/// costs more than its parts), so that sending them cannot fail for lack
/// of space.
#[derive(Debug)]
struct Gathered {
    offset: u64,
    data: GatheredBytes,
    taken: Taken,
}

/// The bytes of [`Gathered`]: the first write's, shared with the caller
/// (nothing copied while nothing follows it), then one buffer.
#[derive(Debug)]
enum GatheredBytes {
    One(Bytes),
    Many(Vec<u8>),
}

impl GatheredBytes {
    fn len(&self) -> usize {
        match self {
            GatheredBytes::One(b) => b.len(),
            GatheredBytes::Many(v) => v.len(),
        }
    }

    fn extend(&mut self, more: &[u8]) {
        match self {
            GatheredBytes::One(b) => {
                let mut v = Vec::with_capacity(b.len() + more.len());
                v.extend_from_slice(b);
                v.extend_from_slice(more);
                *self = GatheredBytes::Many(v);
            }
            GatheredBytes::Many(v) => v.extend_from_slice(more),
        }
    }

    fn into_bytes(self) -> Bytes {
        match self {
            GatheredBytes::One(b) => b,
            GatheredBytes::Many(v) => v.into(),
        }
    }
}

/// A report taken with [`OpenFile::take_unreported`]: no other report of
/// the handle goes out while it is held.
pub(crate) type ReportGuard = tokio::sync::OwnedMutexGuard<()>;

/// Where the bytes [offset, offset + len) of file `fid` with `layout` go,
/// component by component, in file order; EIO if the layout holds none.
fn spans_checked(
    layout: &Layout,
    fid: Fid,
    offset: u64,
    len: usize,
) -> Result<Vec<Span<'_>>, Errno> {
    let spans = spans_of(layout, offset, len);
    if spans.is_none() {
        tracing::warn!(%fid, "layout holds no file data: {layout:?}");
    }
    spans.ok_or(Errno::EIO)
}

/// Read `[offset, offset + n)` of file `fid` from where `layout` puts it
/// (within the file's size), waiting for no write of this client: a
/// migration's copy reads the old layout while it writes the new.
pub(crate) async fn read_layout(
    client: Arc<Client>,
    caller: Caller,
    fid: Fid,
    layout: Layout,
    offset: u64,
    n: usize,
) -> Result<Vec<u8>, Errno> {
    Source {
        client,
        caller,
        fid,
        layout,
    }
    .fetch(offset, n)
    .await
}

impl Source {
    /// Read `[offset, offset + n)` (within the file's size) from where the
    /// layout puts it, every object at once.
    async fn fetch(&self, offset: u64, n: usize) -> Result<Vec<u8>, Errno> {
        let mut exts = Vec::new();
        let mut set = JoinSet::new();
        for span in spans_checked(&self.layout, self.fid, offset, n)? {
            match span.on {
                On::Mdt => {
                    let req = MdtRequest::DomRead {
                        fid: self.fid,
                        offset: span.offset,
                        len: span.len as u32,
                    };
                    let (client, caller, fid) =
                        (self.client.clone(), self.caller.clone(), self.fid);
                    let i = exts.len();
                    exts.push(ObjExtent {
                        stripe: 0,
                        obj_offset: span.offset,
                        len: span.len,
                        pieces: vec![super::plan::Piece {
                            buf_offset: span.buf,
                            len: span.len,
                        }],
                    });
                    set.spawn(async move {
                        let r = match client.mdt_call(&caller, fid, req).await {
                            Ok(Reply::Bytes(b)) => Ok((Reply::Data, b)),
                            Ok(other) => Err(unexpected("DomRead", &other)),
                            Err(e) => Err(e),
                        };
                        (i, r)
                    });
                }
                On::Raid0 { ss, objs } => {
                    for ext in span.plan(ss, objs.len()) {
                        let obj = objs[ext.stripe];
                        let req = OstRequest::ObjRead {
                            obj,
                            offset: ext.obj_offset,
                            len: ext.len as u32,
                        };
                        let (client, caller) = (self.client.clone(), self.caller.clone());
                        let i = exts.len();
                        exts.push(ext);
                        let fid = self.fid;
                        set.spawn(async move {
                            let r = client
                                .ost_call(&caller, fid, obj.ost, req, Bytes::new())
                                .await;
                            (i, r)
                        });
                    }
                }
            }
        }
        // Zero-filled: holes and short objects stay zeros.
        let mut out = vec![0u8; n];
        while let Some(res) = set.join_next().await {
            let (i, r) = res.map_err(join_error)?;
            match r? {
                (Reply::Data, bulk) => scatter(&mut out, &exts[i], &bulk),
                (other, _) => return Err(unexpected("ObjRead", &other)),
            }
        }
        Ok(out)
    }
}

impl OpenFile {
    pub(crate) fn new(
        client: Arc<Client>,
        caller: Caller,
        fid: Fid,
        layout: Layout,
        size: u64,
        writes: Arc<FileWrites>,
    ) -> OpenFile {
        let failures = writes.failures().0;
        OpenFile {
            caller,
            fid,
            known_size: AtomicU64::new(size),
            written_end: AtomicU64::new(0),
            dirty: AtomicBool::new(false),
            last_write: Mutex::new(Time::default()),
            failures_at_open: failures,
            failures_told_by_write: AtomicU64::new(failures),
            writes,
            privileged: AtomicBool::new(false),
            defers: AtomicBool::new(false),
            reporting: Arc::new(tokio::sync::Mutex::new(())),
            gathered: Mutex::new(None),
            readahead: client
                .options()
                .readahead
                .then(|| window_of(&layout))
                .flatten()
                .map(|w| {
                    let ttl = client.options().caching.attr_timeout;
                    (w, tokio::sync::Mutex::new(ReadAhead::new(w, ttl)))
                }),
            client,
            made_here: layout.components.is_empty(),
            sent: tokio::sync::OnceCell::new(),
            layout,
            owner: Mutex::new(None),
        }
    }

    /// For a handle of a file made here by the write-back layer: `None`
    /// while the layer holds the file, else the handle on its layout
    /// (opened at the first need, after it was sent). `None` for other
    /// handles.
    async fn sent_handle(&self) -> Result<Option<&Arc<OpenFile>>, Errno> {
        if !self.made_here || self.client.wb.is_pending(self.fid) {
            return Ok(None);
        }
        let f = self
            .sent
            .get_or_try_init(|| async {
                let attr = self.client.getattr(&self.caller, self.fid).await?;
                let layout = self.client.get_layout_as(&self.caller, self.fid).await?;
                let f = self
                    .client
                    .open_untold(&self.caller, self.fid, layout, attr.size);
                f.note_attr(&attr);
                Ok::<_, Errno>(f)
            })
            .await?;
        Ok(Some(f))
    }

    /// The handle a file made here goes through once sent: sends it now
    /// if the write-back layer still holds it (a change it does not keep
    /// needs its layout). EIO if it could not be sent (the failure is
    /// also kept for the file's fsync).
    async fn through_sent(&self) -> Result<&Arc<OpenFile>, Errno> {
        if self.client.wb.is_pending(self.fid) {
            self.client.wb_settle(&[self.fid]).await;
        }
        match self.sent_handle().await? {
            Some(f) => Ok(f),
            None => Err(self.client.take_unseen(self.fid).unwrap_or(Errno::EIO)),
        }
    }

    /// If this client holds the file's size lease (it made the file), let
    /// the size wait: close(2) then only waits for the data to land (its
    /// errors are close's), and the size reaches the MDT at the release
    /// ([`OpenFile::report_now`]), at fsync, or when another client's read
    /// or change recalls the lease. A write after the lease went reports
    /// itself. True when the lease is held.
    pub fn defer_reports(&self) -> bool {
        let held = self.client.router.fresh.size_leased(self.fid);
        self.defers.store(held, Ordering::Release);
        held
    }

    /// What this handle learned of the file's attributes: its mode (see
    /// [`OpenFile::note_mode`]) and whom its bytes count against.
    pub fn note_attr(&self, attr: &loom_proto::msg::Attr) {
        self.note_mode(attr.perm);
        *self.owner.lock().unwrap_or_else(|p| p.into_inner()) = Some(Owner {
            uid: attr.uid,
            gid: attr.gid,
            projid: attr.projid,
        });
    }

    /// Whom the file's bytes count against, if known.
    fn owner(&self) -> Option<Owner> {
        *self.owner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether an OST this write goes to said the file's owner is near a
    /// block limit there: the write is then waited for.
    fn quota_near(&self, costs: &[(u32, u64)]) -> bool {
        self.owner().is_some_and(|o| {
            costs
                .iter()
                .any(|&(ost, _)| self.client.grants.quota_near(ost, o))
        })
    }

    /// Tell the handle the file's permission bits as last seen, so that a
    /// write by a caller other than root clears set-user-ID and executable
    /// set-group-ID first.
    pub fn note_mode(&self, perm: u32) {
        let sgid_exec = perm & 0o2010 == 0o2010;
        self.privileged
            .store(perm & 0o4000 != 0 || sgid_exec, Ordering::Release);
    }

    /// Clear set-user-ID and executable set-group-ID on the MDT if this
    /// handle's caller is not root and the file has them (once).
    async fn drop_privileges(&self) -> Result<(), Errno> {
        if self.caller.uid == 0 || !self.privileged.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        let set = loom_proto::msg::SetAttr {
            kill_suid: true,
            by_write_handle: true,
            ..Default::default()
        };
        self.client.setattr(&self.caller, self.fid, set).await?;
        Ok(())
    }

    /// The file's FID.
    pub fn fid(&self) -> Fid {
        self.fid
    }

    /// The file's layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The size this handle knows: the larger of the size at open (or last
    /// truncate) and the end of its own writes.
    pub fn size(&self) -> u64 {
        self.known_size
            .load(Ordering::Acquire)
            .max(self.written_end.load(Ordering::Acquire))
    }

    /// End of the data written through this handle.
    pub fn written_end(&self) -> u64 {
        self.written_end.load(Ordering::Acquire)
    }

    /// Whether writes have not been reported to the MDT yet.
    pub fn is_dirty(&self) -> bool {
        self.dirty.load(Ordering::Acquire)
    }

    /// Another handle of this client wrote up to `size` and closed.
    pub(crate) fn note_size_at_least(&self, size: u64) {
        self.known_size.fetch_max(size, Ordering::AcqRel);
    }

    /// The file was truncated to `size` through this client.
    pub(crate) fn note_truncate(&self, size: u64) {
        self.writes.note_change();
        self.known_size.store(size, Ordering::Release);
        self.written_end.fetch_min(size, Ordering::AcqRel);
    }

    /// Where the bytes [offset, offset + len) of the file go, component by
    /// component, in file order.
    fn spans(&self, offset: u64, len: usize) -> Result<Vec<Span<'_>>, Errno> {
        spans_checked(&self.layout, self.fid, offset, len)
    }

    /// Read up to `len` bytes at `offset`: fewer at the end of the file,
    /// none past it. A reader going on where it stopped is served from
    /// whole stripe widths read ahead (library clients; see
    /// [`super::readahead`]).
    pub async fn read(&self, offset: u64, len: usize) -> Result<Vec<u8>, Errno> {
        if self.made_here {
            if let Some(b) = self.client.wb_read(self.fid, offset, len) {
                return Ok(b);
            }
            return self.through_sent().await?.read_direct(offset, len).await;
        }
        self.read_direct(offset, len).await
    }

    async fn read_direct(&self, offset: u64, len: usize) -> Result<Vec<u8>, Errno> {
        // What this client wrote must be read back: wait for writes in
        // flight.
        self.client.wait_writes(self.fid).await;
        // Writes through other handles of this client count too: a reader
        // opened before them must not stop short (and make the kernel
        // believe the file shrank, which would misplace O_APPEND writes).
        let size = self
            .size()
            .max(self.client.local_size(self.fid).unwrap_or(0));
        let n = clamp_read(offset, len, size);
        if n == 0 {
            return Ok(Vec::new());
        }
        if let Some((_, ra)) = self.readahead.as_ref().filter(|(w, _)| *w > n as u64) {
            let now = Stamp {
                changes: self.writes.changes(),
                recalls: self.client.router.fresh.recalls(),
                at: Instant::now(),
            };
            let mut ra = ra.lock().await;
            if let Some(data) = ra.serve(offset, n, size, now, &self.source()).await? {
                return Ok(data);
            }
        }
        self.source().fetch(offset, n).await
    }

    fn source(&self) -> Source {
        Source {
            client: self.client.clone(),
            caller: self.caller.clone(),
            fid: self.fid,
            layout: self.layout.clone(),
        }
    }

    /// Write `data` at `offset`. Returns once the requests are on their
    /// way (see [`super::writeback`]): an OST's failure is reported by the
    /// next write, flush or fsync of the file. The size reaches the MDT at
    /// the next [`OpenFile::flush`].
    ///
    /// Under the file's size lease (a file this client made, see
    /// [`OpenFile::defer_reports`]), small writes that follow each other
    /// on OST components are gathered in the handle, up to [`GATHER_MAX`]
    /// bytes, and sent as one: the next write elsewhere, a read, a
    /// truncate, a flush, an fsync or a recall of the lease sends them
    /// first. Their failures are reported as a sent write's are.
    pub async fn write(&self, offset: u64, data: &[u8]) -> Result<(), Errno> {
        self.write_maybe_shared(offset, data, None).await
    }

    /// [`OpenFile::write`] of bytes the caller holds as [`Bytes`] (the
    /// FUSE mount keeps them too): sent without a copy of its own.
    pub async fn write_shared(&self, offset: u64, data: Bytes) -> Result<(), Errno> {
        let bytes = data.clone();
        self.write_maybe_shared(offset, &data, Some(bytes)).await
    }

    /// `shared`, when given, holds the same bytes as `data`.
    async fn write_maybe_shared(
        &self,
        offset: u64,
        data: &[u8],
        shared: Option<Bytes>,
    ) -> Result<(), Errno> {
        if data.is_empty() {
            return Ok(());
        }
        if self.made_here {
            self.drop_privileges().await?;
            let mut asked = false;
            loop {
                match self.client.wb_write(self.fid, offset, data) {
                    Absorbed::Kept => return Ok(()),
                    Absorbed::Busy => self.client.wb_wait_flush().await,
                    Absorbed::Ask if !asked => {
                        asked = true;
                        self.client.wb_ask_write_room(self.fid).await?;
                    }
                    Absorbed::Ask | Absorbed::No => break,
                }
            }
            return self
                .through_sent()
                .await?
                .write_direct(offset, data, shared)
                .await;
        }
        self.write_direct(offset, data, shared).await
    }

    async fn write_direct(
        &self,
        offset: u64,
        data: &[u8],
        shared: Option<Bytes>,
    ) -> Result<(), Errno> {
        let end = offset.checked_add(data.len() as u64).ok_or(Errno::EFBIG)?;
        self.writes.note_change();
        self.drop_privileges().await?;
        // A failure since the last write through this handle: say so now
        // (once; flush and fsync keep saying it).
        let (failures, last) = self.writes.failures();
        if failures > self.failures_told_by_write.swap(failures, Ordering::AcqRel) {
            return Err(last.unwrap_or(Errno::EIO));
        }
        // What gathering this write needs: grant for it, taken now.
        let taken = if self.may_gather(offset, data.len()) {
            let costs = self.costs(offset, data.len())?;
            (!self.quota_near(&costs))
                .then(|| self.client.grants.take(&costs))
                .flatten()
        } else {
            None
        };
        let Some(taken) = taken else {
            self.drain().await?;
            let bytes = shared.unwrap_or_else(|| Bytes::copy_from_slice(data));
            self.send(offset, bytes, None, false).await?;
            if spans_of(&self.layout, offset, data.len())
                .is_some_and(|v| v.iter().any(|s| matches!(s.on, On::Raid0 { .. })))
            {
                self.note_written(end);
            }
            return self.after_write().await;
        };
        let full = {
            let mut g = self.lock_gathered();
            match g.as_mut() {
                Some(x)
                    if x.offset + x.data.len() as u64 == offset
                        && x.data.len() + data.len() <= GATHER_MAX =>
                {
                    x.data.extend(data);
                    x.taken.absorb(taken);
                    None
                }
                _ => g.replace(Gathered {
                    offset,
                    data: GatheredBytes::One(
                        shared.unwrap_or_else(|| Bytes::copy_from_slice(data)),
                    ),
                    taken,
                }),
            }
        };
        self.note_written(end);
        if let Some(prev) = full {
            self.send(prev.offset, prev.data.into_bytes(), Some(prev.taken), true)
                .await?;
        }
        self.after_write().await
    }

    /// Append `data` at the end of the file as every client sees it
    /// (O_APPEND): the MDT gives this append its range (`AppendReserve`),
    /// which no other append on any client shares, and the bytes are
    /// written there. Returns where they went. What this handle wrote
    /// beyond the end the MDT knows is reported first, so the range starts
    /// after it. A crash between the range and its write leaves the range
    /// zeros.
    pub async fn append(&self, data: &[u8]) -> Result<u64, Errno> {
        if self.made_here {
            return self.through_sent().await?.append_direct(data).await;
        }
        self.append_direct(data).await
    }

    async fn append_direct(&self, data: &[u8]) -> Result<u64, Errno> {
        if self.dirty.load(Ordering::Acquire) {
            self.report(false).await?;
        }
        let len = data.len() as u64;
        let req = MdtRequest::AppendReserve { fid: self.fid, len };
        let offset = match self.client.mdt_call(&self.caller, self.fid, req).await? {
            Reply::Reserved { offset } => offset,
            other => return Err(unexpected("AppendReserve", &other)),
        };
        self.write(offset, data).await?;
        // The MDT's size covers it already (with the time of the append).
        if self.written_end.load(Ordering::Acquire) <= offset + len {
            self.dirty.store(false, Ordering::Release);
        }
        Ok(offset)
    }

    /// The grant costs of a write of `len` bytes at `offset`: one per OST
    /// request it makes.
    fn costs(&self, offset: u64, len: usize) -> Result<Vec<(u32, u64)>, Errno> {
        Ok(self.costs_of(&ost_extents(&self.spans(offset, len)?)))
    }

    /// The grant cost of each of a write's OST requests.
    fn costs_of(&self, exts: &[(ObjRef, ObjExtent)]) -> Vec<(u32, u64)> {
        let packed = self.layout.compress.is_some_and(|c| c.is_on());
        exts.iter()
            .map(|(obj, ext)| (obj.ost, grant::cost(ext.obj_offset, ext.len as u64, packed)))
            .collect()
    }

    /// Checked after a write was noted as dirty: if the size lease went (a
    /// recall that took it before this check reported the write, or this
    /// does), another client is looking at the file and sees each write.
    async fn after_write(&self) -> Result<(), Errno> {
        if self.defers.load(Ordering::Acquire) && !self.client.router.fresh.size_leased(self.fid) {
            self.report(false).await?;
        }
        Ok(())
    }

    /// Whether a write of `len` bytes at `offset` may wait in the handle:
    /// small, under the size lease, on OST components only.
    fn may_gather(&self, offset: u64, len: usize) -> bool {
        len < GATHER_MAX
            && self.defers.load(Ordering::Acquire)
            && self.layout.dom_end() <= offset
            && self.client.router.fresh.size_leased(self.fid)
    }

    fn lock_gathered(&self) -> std::sync::MutexGuard<'_, Option<Gathered>> {
        self.gathered.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Send the writes gathered in this handle, if any.
    pub(crate) async fn drain(&self) -> Result<(), Errno> {
        let g = self.lock_gathered().take();
        match g {
            Some(g) => {
                self.send(g.offset, g.data.into_bytes(), Some(g.taken), true)
                    .await
            }
            None => Ok(()),
        }
    }

    /// Send a write: its bytes on the MDT at once, those on OSTs on their
    /// way (collected in the background) if the space grants cover them
    /// (`taken` for them, or taken now), else waited for.
    ///
    /// `acknowledged`: the caller's write(2) has already returned (the
    /// bytes were gathered), so a failure is the file's to report at its
    /// next write, flush or fsync; otherwise a waited write's failure is
    /// this call's only.
    async fn send(
        &self,
        offset: u64,
        data: Bytes,
        taken: Option<Taken>,
        acknowledged: bool,
    ) -> Result<(), Errno> {
        let end = offset.checked_add(data.len() as u64).ok_or(Errno::EFBIG)?;
        let spans = self.spans(offset, data.len())?;
        // Bytes on the MDT first, in one change each: the MDT grows the
        // size with them (nothing to report for those).
        for span in spans.iter().filter(|s| matches!(s.on, On::Mdt)) {
            let req = MdtRequest::DomWrite {
                fid: self.fid,
                offset: span.offset,
                data: data[span.buf..span.buf + span.len].to_vec(),
            };
            match self.client.mdt_call(&self.caller, self.fid, req).await? {
                Reply::Ok => {}
                other => return Err(unexpected("DomWrite", &other)),
            }
            self.written_end
                .fetch_max(span.offset + span.len as u64, Ordering::AcqRel);
        }
        let exts = ost_extents(&spans);
        if exts.is_empty() {
            return Ok(());
        }
        let writes = self.writes.clone();
        let ticket = writes.admit(offset, end).await;
        // The client-wide budget, after the file's own admission (which
        // orders overlapping writes); a write larger than the budget takes
        // all of it.
        let want = (data.len().min(crate::client::WRITE_BUDGET)) as u32;
        let budget = match self
            .client
            .write_budget
            .clone()
            .acquire_many_owned(want)
            .await
        {
            Ok(p) => p,
            Err(_) => {
                writes.finish(ticket, Err(Errno::EIO));
                return Err(Errno::EIO);
            }
        };
        // Each request spends its cost of the grant, all or none of the
        // write's (a write partly covered is waited for all the same).
        let costs = self.costs_of(&exts);
        let grants = &self.client.grants;
        let mut taken = match taken {
            Some(t) => t,
            // Near a block limit: waited for, so EDQUOT is the write's.
            None if self.quota_near(&costs) => Taken::default(),
            None => grants.take(&costs).unwrap_or_default(),
        };
        let used: Vec<u64> = costs
            .iter()
            .map(|&(ost, c)| if taken.spend(ost, c) { c } else { 0 })
            .collect();
        grants.give_back(taken);
        let behind = used.iter().all(|&u| u > 0);
        let owner = self.owner();
        let mut set = JoinSet::new();
        for ((obj, ext), grant_used) in exts.iter().zip(used) {
            let obj = *obj;
            let bulk = gather_bulk(&data, ext);
            let req = OstRequest::ObjWrite {
                obj,
                offset: ext.obj_offset,
                pack: self.layout.compress,
                grant_used,
                owner,
            };
            let (client, caller, fid) = (self.client.clone(), self.caller.clone(), self.fid);
            set.spawn(async move {
                (
                    obj.ost,
                    client.ost_call(&caller, fid, obj.ost, req, bulk).await,
                )
            });
        }
        let client = self.client.clone();
        let done = async move {
            let r = join_written(set, &client, owner).await;
            drop(budget);
            r
        };
        if behind {
            tokio::spawn(async move {
                let r = done.await;
                writes.finish(ticket, r);
            });
            return Ok(());
        }
        let r = done.await;
        writes.finish(ticket, if acknowledged { r } else { Ok(()) });
        r
    }

    /// A write up to `end` was made through this handle: the size and
    /// mtime count from now, as the kernel's do (a stat must not shrink
    /// the file under a write it already returned). Order matters for
    /// flush: the end and time first, then the flag.
    fn note_written(&self, end: u64) {
        self.written_end.fetch_max(end, Ordering::AcqRel);
        *self.lock_last_write() = Time::now();
        self.dirty.store(true, Ordering::Release);
    }

    /// Wait for the file's writes in flight; fail if any write of the file
    /// failed since this handle was opened.
    async fn landed(&self) -> Result<(), Errno> {
        self.writes.wait().await;
        match self.writes.failures() {
            (n, last) if n > self.failures_at_open => Err(last.unwrap_or(Errno::EIO)),
            _ => Ok(()),
        }
    }

    fn lock_last_write(&self) -> std::sync::MutexGuard<'_, Time> {
        self.last_write.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Report written data to the MDT (size = at least the end written,
    /// mtime = when the last write completed) if there is any not reported
    /// yet. Called at close, and before an explicit mtime is set. Like
    /// the data, the report is made durable by [`OpenFile::fsync`].
    pub async fn flush(&self) -> Result<(), Errno> {
        if self.made_here {
            // Refused by its MDT when the layer sent it: close reports it,
            // as Linux reports a write-back error.
            if self.sent.get().is_none() && !self.client.wb.is_pending(self.fid) {
                if let Some(e) = self.client.take_unseen(self.fid) {
                    return Err(e);
                }
            }
            // Held by the write-back layer: nothing to report yet.
            return match self.sent_handle().await? {
                Some(f) => f.flush_direct().await,
                None => Ok(()),
            };
        }
        self.flush_direct().await
    }

    async fn flush_direct(&self) -> Result<(), Errno> {
        if self.defers.load(Ordering::Acquire) && self.client.router.fresh.size_leased(self.fid) {
            // Under the size lease: the data is on the OSTs, the size
            // waits for the release or a recall.
            self.drain().await?;
            return self.landed().await;
        }
        self.report(false).await
    }

    /// Report written data to the MDT now, also under a size lease (at
    /// the release of the handle, or when the lease is recalled).
    pub async fn report_now(&self) -> Result<(), Errno> {
        if self.made_here {
            return match self.sent.get() {
                Some(f) => f.report_now_direct().await,
                None => Ok(()),
            };
        }
        self.report_now_direct().await
    }

    async fn report_now_direct(&self) -> Result<(), Errno> {
        self.report(false).await
    }

    /// For a setattr that carries the report ([`SetAttr::written`]): once
    /// this handle's writes landed, the end of its data not reported yet,
    /// taken as reported (`None`: nothing to report). Give it back with
    /// [`OpenFile::unreported`] if the setattr fails.
    ///
    /// [`SetAttr::written`]: loom_proto::msg::SetAttr::written
    pub(crate) async fn take_unreported(&self) -> Result<Option<(u64, ReportGuard)>, Errno> {
        let g = self.reporting.clone().lock_owned().await;
        self.drain().await?;
        self.landed().await?;
        Ok(self
            .dirty
            .swap(false, Ordering::AcqRel)
            .then(|| (self.written_end.load(Ordering::Acquire), g)))
    }

    /// When the last unreported write completed (for a stat of this
    /// client's: what the MDT will be told).
    pub(crate) fn unreported_mtime(&self) -> Option<Time> {
        self.is_dirty().then(|| *self.lock_last_write())
    }

    /// Wait for a report of this handle on its way (a release's, which
    /// the kernel does not order with later operations), so that a change
    /// made after it is answered after it too: answers handled out of
    /// order would leave the older attributes known here.
    pub(crate) async fn report_landed(&self) {
        drop(self.reporting.lock().await);
    }

    /// A report taken with [`OpenFile::take_unreported`] did not reach the
    /// MDT: the next flush sends it.
    pub(crate) fn unreported(&self) {
        self.dirty.store(true, Ordering::Release);
    }

    /// Send UpdateSize if there are writes to report, or if `durable`
    /// (then always: the MDT syncs everything it applied before it,
    /// earlier reports at close included).
    async fn report(&self, durable: bool) -> Result<(), Errno> {
        let _one = self.reporting.lock().await;
        // The end to report, taken before the writes it covers are sent
        // and waited for: a write noted before it was admitted before the
        // bound below. Writes after it may go on meanwhile (a busy
        // writer would otherwise hold a recalled report for ever); the
        // handle stays dirty for them.
        let dirty = self.dirty.swap(false, Ordering::AcqRel);
        let end = self.written_end.load(Ordering::Acquire);
        let mtime = *self.lock_last_write();
        if let Err(e) = self.drain().await {
            if dirty {
                self.dirty.store(true, Ordering::Release);
            }
            return Err(e);
        }
        // The writes must have landed before the size that covers them is
        // reported; a failed one fails this call.
        self.writes.wait_before(self.writes.admitted()).await;
        let (failed, last) = self.writes.failures();
        if failed > self.failures_at_open {
            if dirty {
                self.dirty.store(true, Ordering::Release);
            }
            return Err(last.unwrap_or(Errno::EIO));
        }
        if !dirty && !durable {
            return Ok(());
        }
        let req = MdtRequest::UpdateSize {
            fid: self.fid,
            size: end,
            mtime,
            durable,
        };
        match self.client.mdt_call(&self.caller, self.fid, req).await {
            Ok(_) => Ok(()),
            Err(e) => {
                // Still to report: the next flush tries again.
                if dirty {
                    self.dirty.store(true, Ordering::Release);
                }
                Err(e)
            }
        }
    }

    /// Make the data durable on every object of the layout, then the size
    /// and mtime on the MDT (what every handle of this client wrote).
    pub async fn fsync(&self) -> Result<(), Errno> {
        if self.made_here {
            return self.through_sent().await?.fsync_direct().await;
        }
        self.fsync_direct().await
    }

    async fn fsync_direct(&self) -> Result<(), Errno> {
        self.drain().await?;
        self.landed().await?;
        let syncs = self.layout.objects().into_iter();
        let syncs = syncs
            .map(|obj| (obj.ost, OstRequest::ObjSync { obj }))
            .collect();
        self.client
            .ost_call_each(&self.caller, self.fid, syncs, "ObjSync")
            .await?;
        // Other handles' writes (POSIX fsync covers the whole file): their
        // reports reach the MDT before the durable one below.
        for h in self.client.open_handles(self.fid) {
            if !std::ptr::eq(Arc::as_ptr(&h), self) {
                h.report_now().await?;
            }
        }
        self.report(true).await?;
        // The durable report committed the file's MDT; what this client
        // changed on others (the names leading here) commits too.
        self.client.sync_all().await?;
        // A failure after an earlier close of the file, which nothing
        // reported yet.
        match self.client.take_unseen(self.fid) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Make what this handle wrote durable on its layout's objects, and
    /// tell the MDT nothing: a migration's copy, whose bytes are the
    /// file's already (its size and times stay).
    pub(crate) async fn sync_objects_only(&self) -> Result<(), Errno> {
        self.drain().await?;
        self.landed().await?;
        let syncs = self
            .layout
            .objects()
            .into_iter()
            .map(|obj| (obj.ost, OstRequest::ObjSync { obj }))
            .collect();
        self.client
            .ost_call_each(&self.caller, self.fid, syncs, "ObjSync")
            .await?;
        self.dirty.store(false, Ordering::Release);
        Ok(())
    }

    /// fallocate(2) on the file's objects: reserve, punch or zero
    /// [offset, offset + len), each object's share in one request, all in
    /// parallel. Writes in flight land first, so a punch cannot be undone
    /// by an earlier write arriving late. Unless `keep_size`, a range past
    /// the end grows the file, reported to the MDT as a write's end is (at
    /// the next flush or fsync).
    pub async fn fallocate(
        &self,
        what: Allocation,
        offset: u64,
        len: u64,
        keep_size: bool,
    ) -> Result<(), Errno> {
        if len == 0 {
            return Err(Errno::EINVAL);
        }
        if self.made_here {
            let f = self.through_sent().await?;
            return f.fallocate_direct(what, offset, len, keep_size).await;
        }
        self.fallocate_direct(what, offset, len, keep_size).await
    }

    async fn fallocate_direct(
        &self,
        what: Allocation,
        offset: u64,
        len: u64,
        keep_size: bool,
    ) -> Result<(), Errno> {
        let end = offset
            .checked_add(len)
            .filter(|&e| e <= i64::MAX as u64)
            .ok_or(Errno::EFBIG)?;
        if what == Allocation::Punch && !keep_size {
            // As Linux: a hole never changes the size.
            return Err(Errno::EOPNOTSUPP);
        }
        let compressed = self.layout.compress.is_some();
        if what == Allocation::Reserve && compressed {
            // What compressed data will take is not known before it is
            // written: no space can be promised (glibc's posix_fallocate
            // then writes zeros, which compress to nothing).
            return Err(Errno::EOPNOTSUPP);
        }
        self.writes.note_change();
        self.client.wait_writes(self.fid).await;
        // Each object's share of the range, as one request per object, and
        // the share on the MDT as one change.
        let parts = components_in(&self.layout, offset, end);
        let each = |make: &dyn Fn(ObjRef, u64, u64) -> OstRequest| -> Vec<(u32, OstRequest)> {
            let mut v = Vec::new();
            for &(from, to, pattern) in &parts {
                if let Pattern::Raid0 {
                    stripe_size,
                    objects,
                } = pattern
                {
                    for (stripe, &obj) in objects.iter().enumerate() {
                        let (start, stop) =
                            object_range_for(*stripe_size, objects.len(), stripe, from, to - from);
                        if start < stop {
                            v.push((obj.ost, make(obj, start, stop - start)));
                        }
                    }
                }
            }
            v
        };
        let punch = |obj, offset, len| OstRequest::ObjPunch { obj, offset, len };
        let owner = self.owner();
        let allocate = |obj, offset, len| OstRequest::ObjAllocate {
            obj,
            offset,
            len,
            owner,
        };
        let (client, c) = (&self.client, &self.caller);
        if what != Allocation::Reserve {
            // The MDT keeps no space to reserve; its bytes are zeroed.
            for &(from, to, _) in parts.iter().filter(|p| matches!(p.2, Pattern::Mdt)) {
                let req = MdtRequest::DomPunch {
                    fid: self.fid,
                    offset: from,
                    len: to - from,
                };
                match client.mdt_call(c, self.fid, req).await? {
                    Reply::Ok => {}
                    other => return Err(unexpected("DomPunch", &other)),
                }
            }
        }
        match what {
            Allocation::Reserve => {
                client
                    .ost_call_each(c, self.fid, each(&allocate), "ObjAllocate")
                    .await?
            }
            Allocation::Punch => {
                client
                    .ost_call_each(c, self.fid, each(&punch), "ObjPunch")
                    .await?
            }
            // Zeroed chunks of a compressed object take no space: there
            // is nothing to reserve after the punch.
            Allocation::Zero if compressed => {
                client
                    .ost_call_each(c, self.fid, each(&punch), "ObjPunch")
                    .await?
            }
            // Zeroing = deallocate, then reserve the range again.
            Allocation::Zero => {
                client
                    .ost_call_each(c, self.fid, each(&punch), "ObjPunch")
                    .await?;
                client
                    .ost_call_each(c, self.fid, each(&allocate), "ObjAllocate")
                    .await?;
            }
        }
        if !keep_size && end > self.size() {
            self.written_end.fetch_max(end, Ordering::AcqRel);
            *self.lock_last_write() = Time::now();
            self.dirty.store(true, Ordering::Release);
        }
        Ok(())
    }
}

/// What [`OpenFile::fallocate`] does to its range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allocation {
    /// Reserve space (fallocate mode 0): existing data stays.
    Reserve,
    /// Deallocate (FALLOC_FL_PUNCH_HOLE): the range reads as zeros.
    Punch,
    /// Zeros with space reserved (FALLOC_FL_ZERO_RANGE).
    Zero,
}

impl Drop for OpenFile {
    fn drop(&mut self) {
        if self.is_dirty() {
            tracing::warn!(fid = %self.fid, "open file dropped with unreported writes: size not updated on the MDT");
        }
        if let Some(g) = self.lock_gathered().take() {
            tracing::error!(fid = %self.fid, offset = g.offset, len = g.data.len(), "open file dropped with writes never sent (no flush): lost");
        }
        self.client.forget_closed(self.fid, self.written_end());
    }
}

/// Wait for every request of `set`; the first error wins (the others are
/// aborted when the set drops).
pub(crate) async fn join_ok(
    mut set: JoinSet<Result<(Reply, Vec<u8>), Errno>>,
    op: &str,
) -> Result<(), Errno> {
    while let Some(res) = set.join_next().await {
        match res.map_err(join_error)?? {
            (Reply::Ok, _) => {}
            (other, _) => return Err(unexpected(op, &other)),
        }
    }
    Ok(())
}

/// An OST's answer to one request, with the OST.
type Answered = (u32, Result<(Reply, Vec<u8>), Errno>);

/// Wait for every write of `set`, credit the space each OST granted in
/// its answer; the first error wins.
async fn join_written(
    mut set: JoinSet<Answered>,
    client: &Client,
    owner: Option<Owner>,
) -> Result<(), Errno> {
    while let Some(res) = set.join_next().await {
        let (ost, r) = res.map_err(join_error)?;
        match r? {
            (
                Reply::Written {
                    boot,
                    grant,
                    quota_near,
                },
                _,
            ) => {
                client.grants.credit(ost, boot, grant);
                if let Some(o) = owner {
                    client.grants.quota_answer(ost, o, quota_near);
                }
            }
            (other, _) => return Err(unexpected("ObjWrite", &other)),
        }
    }
    Ok(())
}

fn join_error(e: tokio::task::JoinError) -> Errno {
    tracing::error!("I/O task failed: {e}");
    Errno::EIO
}

pub(crate) fn unexpected(op: &str, r: &Reply) -> Errno {
    tracing::warn!("unexpected reply to {op}: {r:?}");
    Errno::EIO
}

/// What [`ObjExtent`]s a read or write of this file would send to OSTs:
/// for tools and tests that show how I/O is split.
pub fn extents_of(layout: &Layout, offset: u64, len: usize) -> Vec<(ObjRef, ObjExtent)> {
    ost_extents(&spans_of(layout, offset, len).unwrap_or_default())
}

/// The object requests of the spans on OSTs, each with its object.
fn ost_extents(spans: &[Span<'_>]) -> Vec<(ObjRef, ObjExtent)> {
    spans
        .iter()
        .flat_map(|span| match span.on {
            On::Raid0 { ss, objs } => span
                .plan(ss, objs.len())
                .into_iter()
                .map(|e| (objs[e.stripe], e))
                .collect(),
            On::Mdt => Vec::new(),
        })
        .collect()
}

/// The parts of [offset, end) each file-data component of `layout` covers,
/// in file order: (from, to, how stored).
pub(crate) fn components_in(layout: &Layout, offset: u64, end: u64) -> Vec<(u64, u64, &Pattern)> {
    layout
        .components
        .iter()
        .filter_map(|c| {
            let (from, to) = (offset.max(c.start), end.min(c.end));
            (from < to).then_some((from, to, &c.pattern))
        })
        .collect()
}

/// Where a span of an I/O goes.
#[derive(Clone, Copy, Debug)]
pub(crate) enum On<'a> {
    /// The file's MDT (Data-on-MDT).
    Mdt,
    /// A RAID-0 component's objects.
    Raid0 {
        /// Stripe size.
        ss: u32,
        /// Its objects.
        objs: &'a [ObjRef],
    },
}

/// The part of an I/O that falls in one component.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Span<'a> {
    /// File offset.
    pub offset: u64,
    /// Bytes.
    pub len: usize,
    /// Where they are in the caller's buffer.
    pub buf: usize,
    /// Where they are stored.
    pub on: On<'a>,
}

impl Span<'_> {
    /// The object requests of this span of a RAID-0 component, with
    /// buffer offsets in the whole I/O's buffer. (Stripe maths runs on file
    /// offsets: a later component's objects hold nothing below its start.)
    pub fn plan(&self, ss: u32, count: usize) -> Vec<ObjExtent> {
        let mut exts = plan(ss, count, self.offset, self.len, MAX_RPC);
        for e in &mut exts {
            for p in &mut e.pieces {
                p.buf_offset += self.buf;
            }
        }
        exts
    }
}

/// The spans of an I/O of `len` bytes at `offset` on `layout`; None if
/// the layout holds no file data (a directory's, or an empty RAID-0).
pub(crate) fn spans_of(layout: &Layout, offset: u64, len: usize) -> Option<Vec<Span<'_>>> {
    if !layout.is_file() {
        return None;
    }
    let end = offset.saturating_add(len as u64);
    let mut out = Vec::new();
    for (from, to, pattern) in components_in(layout, offset, end) {
        let on = match pattern {
            Pattern::Mdt => On::Mdt,
            Pattern::Raid0 {
                stripe_size,
                objects,
            } if !objects.is_empty() => On::Raid0 {
                ss: *stripe_size,
                objs: objects,
            },
            _ => return None,
        };
        out.push(Span {
            offset: from,
            len: (to - from) as usize,
            buf: (from - offset) as usize,
            on,
        });
    }
    Some(out)
}
