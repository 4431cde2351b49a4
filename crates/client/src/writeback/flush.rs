//! Sending what the write-back layer holds: batches of `MakeAt`, `Unlink`
//! and `Rmdir` per MDT, in the order they were made; the first bytes of
//! new files that have no Data-on-MDT component, written to their objects
//! once their layouts are known; the leases taken and given back; the
//! FID grants.

use super::{Held, Op};
use crate::ctx::Caller;
use crate::Client;
use loom_proto::msg::{Attr, FileKind, MdtRequest, Reply, ReqCtx, SetAttr, SetTime, TargetId};
use loom_proto::{Errno, Fid, Layout};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Changes waiting for one MDT that start a flush.
pub const FLUSH_AT: usize = 256;
/// Longest a change waits before it is sent (the window a crash of the
/// client may lose, as a local file system's write-back delay).
pub const DELAY: Duration = Duration::from_secs(1);
/// FIDs asked for at a time.
pub const GRANT_RUN: u32 = 4096;
/// Most queues one flush takes (each all one MDT's changes at the time).
const ROUNDS_MAX: usize = 64;
/// Most changes in one batch (the MDT's limit).
const BATCH_MAX: usize = 1024;
/// Most bytes of new files in one batch (a frame is at most 1 MiB).
const BATCH_BYTES: usize = 640 << 10;

/// A flush under way ([`Client::wb_flush`]).
pub type Flushing<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), Errno>> + Send + 'a>>;

/// One change on its way, with what its answer needs.
struct Sending {
    op: Op,
    caller: Caller,
    /// What the MDT is told of the caller (its job, not its process):
    /// changes with the same go in one batch.
    ctx: ReqCtx,
    req: MdtRequest,
    /// A new file's bytes to write on its objects once it is made.
    after: Option<Vec<u8>>,
}

/// A new file whose first bytes go to its objects once it is made.
struct Written {
    fid: Fid,
    layout: Layout,
    data: Vec<u8>,
    attr: Attr,
    caller: Caller,
    ctx: ReqCtx,
}

impl Client {
    /// After `c` made directory `attr` through its MDT: take its
    /// write-back lease, if this client writes back. Best effort: without
    /// it, changes in it go one by one.
    pub(crate) async fn wb_take(&self, c: &Caller, attr: &Attr) {
        if !self.wb.on || !self.router.takes_leases() {
            return;
        }
        let mdt = match self.router.mdt_of(attr.fid).await {
            Ok(t) => t.index,
            Err(_) => return,
        };
        match self.take_write_back(c, attr.fid).await {
            Ok(spec) => {
                let held = Held {
                    mdt,
                    attr: attr.clone(),
                    names: Default::default(),
                    spec,
                    answering: true,
                    granted: true,
                };
                self.wb.lock().dirs.insert(attr.fid, held);
            }
            Err(e) => tracing::debug!(dir = %attr.fid, "not written back: {e:?}"),
        }
    }

    /// Ask MDT `mdt` (through directory `via`, one of its own) for more
    /// FIDs. What waits is sent first: the MDT keeps only a client's last
    /// two runs, and a change naming an older one would be refused.
    pub(crate) async fn wb_refill(&self, mdt: u32, via: Fid) -> Result<(), Errno> {
        let _one = self.wb.refilling.lock().await;
        if self.wb.lock().fids.get(&mdt).is_some_and(|r| !r.is_empty()) {
            return Ok(());
        }
        // A refusal is the change's, reported at its fsync; none of
        // the older run waits any more.
        let _ = self.wb_flush().await;
        let (first, count) = self.grant_fids(via, GRANT_RUN).await?;
        self.wb
            .lock()
            .fids
            .entry(mdt)
            .or_default()
            .push_back((first, count));
        Ok(())
    }

    /// Ask MDT `mdt` for the next run in the background once the one in
    /// use is half taken (`State::fids_low`), so that creates do not stop
    /// for a grant (the wait behind it is the older run's flush).
    pub(crate) fn wb_prefetch(&self, mdt: u32, via: Fid) {
        let low = move |s: &super::State| s.fids_low(mdt);
        if self.wb.refilling.try_lock().is_err() {
            return;
        }
        let Some(me) = self.me.get().and_then(std::sync::Weak::upgrade) else {
            return;
        };
        self.rt.spawn(async move {
            let _one = me.wb.refilling.lock().await;
            if !low(&me.wb.lock()) {
                return;
            }
            // The run before the one in use is voided by this grant: its
            // changes go first.
            let _ = me.wb_flush().await;
            match me.grant_fids(via, GRANT_RUN).await {
                Ok((first, count)) => me
                    .wb
                    .lock()
                    .fids
                    .entry(mdt)
                    .or_default()
                    .push_back((first, count)),
                Err(e) => tracing::debug!(%via, "write-back: no FIDs ahead: {e:?}"),
            }
        });
    }

    /// Before an operation this layer does not answer, on `fids`: if it
    /// holds any of them, send everything first (the MDT must see the
    /// changes before it in their order).
    pub(crate) async fn wb_settle(&self, fids: &[Fid]) {
        if fids.iter().any(|f| self.wb.knows(*f)) {
            // A failure is the changes', reported at their fsync.
            let _ = self.wb_flush().await;
        }
    }

    /// Before an operation whose effect may depend on any change waiting
    /// (an rmdir of a directory whose names were removed here, a rename,
    /// a link): send everything first.
    pub(crate) async fn wb_settle_all(&self) {
        if self.wb.waiting() > 0 {
            let _ = self.wb_flush().await;
        }
    }

    /// Before an operation that changes `fid` by a path this layer does
    /// not follow (an xattr, a layout, a migration): send what it holds,
    /// and answer nothing more for it if it is a directory.
    pub(crate) async fn wb_leave(&self, fid: Fid) {
        self.wb_settle(&[fid]).await;
        self.wb.forget_dir(fid);
    }

    /// Wait for the flush under way, if any.
    pub(crate) async fn wb_wait_flush(&self) {
        drop(self.wb.flushing.lock().await);
    }

    /// Start a flush in the background, unless one is under way.
    pub(crate) fn wb_kick(&self) {
        let Some(me) = self.me.get().and_then(std::sync::Weak::upgrade) else {
            return;
        };
        if self.wb.flushing.try_lock().is_err() {
            return;
        }
        self.rt.spawn(async move {
            let _ = me.wb_flush().await;
        });
    }

    /// The recall hook: stop answering for `dirs` (all, when empty: a
    /// connection was lost) and send everything. The recall is answered
    /// when this returns.
    pub(crate) fn wb_flusher(self: &Arc<Self>) -> crate::routing::Reporter {
        let me = Arc::downgrade(self);
        Arc::new(move |dirs: Vec<Fid>| {
            let me = me.clone();
            Box::pin(async move {
                let Some(me) = me.upgrade() else {
                    return;
                };
                {
                    let mut s = me.wb.lock();
                    for (fid, h) in s.dirs.iter_mut() {
                        if dirs.is_empty() || dirs.contains(fid) {
                            h.answering = false;
                        }
                    }
                }
                let _ = me.wb_flush().await;
            })
        })
    }

    /// Send what waits after [`super::DELAY`] or [`super::FLUSH_AT`], for
    /// as long as the client lives.
    pub(crate) fn spawn_wb_timer(self: &Arc<Self>) {
        if !self.wb.on {
            return;
        }
        let me = Arc::downgrade(self);
        self.rt.spawn(async move {
            let mut tick = tokio::time::interval(DELAY / 4);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(me) = me.upgrade() else {
                    return;
                };
                if me.wb.lock().due(Instant::now()) {
                    let _ = me.wb_flush().await;
                }
            }
        });
    }

    /// Send everything this layer holds, MDT by MDT, in order. Fails with
    /// the first change refused (each is also kept for the fsync of its
    /// file, and of any directory).
    pub fn wb_flush(&self) -> Flushing<'_> {
        // Boxed: a flush writes new files' bytes through handles whose
        // writes may flush (the cycle needs a named future type).
        Box::pin(self.flush_all())
    }

    async fn flush_all(&self) -> Result<(), Errno> {
        let _one = self.wb.flushing.lock().await;
        // Grants of first bytes no longer kept (files removed or sent
        // since the last flush).
        self.wb_give_back();
        let mut first_failure = None;
        // Bounded: changes made while it runs are sent too, but a writer
        // that never stops must not hold a recall's answer for ever.
        for _ in 0..ROUNDS_MAX {
            let Some((mdt, mut todo)) = self.wb_take_queue() else {
                break;
            };
            for item in todo.iter_mut() {
                item.ctx = self.ctx(&item.caller);
            }
            let mut written = Vec::new();
            while !todo.is_empty() {
                let run = cut_run(&mut todo);
                let ctx = run[0].ctx.clone();
                let reqs: Vec<MdtRequest> = run.iter().map(|s| s.req.clone()).collect();
                let answers = self.router.call_batch(TargetId::mdt(mdt), ctx, reqs).await;
                let answers = match answers {
                    Ok(a) => a,
                    // Not sent (or not answered in all the call's time):
                    // each of these fails.
                    Err(e) => run.iter().map(|_| Err(e)).collect(),
                };
                let mut run = VecDeque::from(run);
                for answer in answers {
                    let Some(item) = run.pop_front() else { break };
                    match answer {
                        Ok(reply) => {
                            if let Some(w) = self.wb_done(item, reply).await {
                                written.push(w);
                            }
                        }
                        Err(e) => {
                            first_failure.get_or_insert(e);
                            self.wb_failed(item, e);
                        }
                    }
                }
                // After a refused change, the batch's rest was not made:
                // sent again (each stands or fails on its own).
                while let Some(item) = run.pop_back() {
                    todo.push_front(item);
                }
            }
            if let Err(e) = self.wb_write_firsts(mdt, written).await {
                first_failure.get_or_insert(e);
            }
        }
        self.wb.lock().forget_quiet();
        match first_failure {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Take the first MDT's queue that has changes, marking the inodes it
    /// makes as being sent; with each change's request.
    fn wb_take_queue(&self) -> Option<(u32, VecDeque<Sending>)> {
        let mut s = self.wb.lock();
        let mdt = *s.queues.iter().find(|(_, q)| !q.is_empty())?.0;
        let ops = s.queues.remove(&mdt).unwrap_or_default();
        if s.queues.values().all(Vec::is_empty) {
            s.oldest = None;
        }
        s.kept_bytes = 0;
        let mut out = VecDeque::with_capacity(ops.len());
        for op in ops {
            let sending = match &op {
                Op::Make(fid) => {
                    let dir_attr = s.dirs.get(fid).map(|h| h.attr.clone());
                    let Some(m) = s.made.get(fid) else { continue };
                    let dom = s.dirs.get(&m.parent).map_or(0, Held::dom_end);
                    let attr = dir_attr.unwrap_or_else(|| m.attr.clone());
                    let (data, after) = match (attr.kind, dom) {
                        (FileKind::File, 0) if !m.data.is_empty() => {
                            (Vec::new(), Some(m.data.clone()))
                        }
                        (FileKind::File, _) => (m.data.clone(), None),
                        _ => (Vec::new(), None),
                    };
                    let req = MdtRequest::MakeAt {
                        parent: m.parent,
                        name: m.name.clone(),
                        fid: *fid,
                        kind: attr.kind,
                        perm: attr.perm,
                        rdev: attr.rdev,
                        uid: attr.uid,
                        gid: attr.gid,
                        atime: attr.atime,
                        mtime: attr.mtime,
                        ctime: attr.ctime,
                        made: m.made,
                        target: m.target.clone(),
                        data,
                    };
                    let caller = m.caller.clone();
                    // Its first bytes' grant goes back for their write to
                    // spend (see `room`).
                    let taken = s.made.get_mut(fid).map(|m| {
                        m.sending = true;
                        std::mem::take(&mut m.taken)
                    });
                    s.unspent.absorb(taken.unwrap_or_default());
                    Sending {
                        op: op.clone(),
                        caller,
                        req,
                        after,
                        ctx: ReqCtx::default(),
                    }
                }
                Op::Unlink {
                    parent,
                    name,
                    caller,
                    keep_orphan,
                } => Sending {
                    caller: caller.clone(),
                    req: MdtRequest::Unlink {
                        parent: *parent,
                        name: name.clone(),
                        keep_orphan: *keep_orphan,
                    },
                    op: op.clone(),
                    after: None,
                    ctx: ReqCtx::default(),
                },
                Op::SetAttr { fid, set, caller } => Sending {
                    caller: caller.clone(),
                    req: MdtRequest::SetAttr {
                        fid: *fid,
                        set: set.clone(),
                    },
                    op: op.clone(),
                    after: None,
                    ctx: ReqCtx::default(),
                },
                Op::Rmdir {
                    parent,
                    name,
                    caller,
                } => Sending {
                    caller: caller.clone(),
                    req: MdtRequest::Rmdir {
                        parent: *parent,
                        name: name.clone(),
                    },
                    op: op.clone(),
                    after: None,
                    ctx: ReqCtx::default(),
                },
            };
            out.push_back(sending);
        }
        Some((mdt, out))
    }

    /// A change was made: what it made is no longer held here (a
    /// directory stays written back if its MDT gave it the lease too). A
    /// new file whose bytes go to its objects is answered with them.
    async fn wb_done(&self, item: Sending, reply: Reply) -> Option<Written> {
        match (item.op, reply) {
            (Op::Make(fid), Reply::Entry { layout, .. }) => {
                let mut s = self.wb.lock();
                if let (Some(data), Some(layout)) = (&item.after, &layout) {
                    // Its bytes are only here until they are on its
                    // objects and its size is at its MDT: it is still
                    // answered here (as being sent) until then.
                    let m = s.made.get(&fid)?;
                    return Some(Written {
                        fid,
                        layout: layout.clone(),
                        data: data.clone(),
                        attr: m.attr.clone(),
                        caller: item.caller,
                        ctx: item.ctx,
                    });
                }
                let m = s.drop_made(fid)?;
                let parent_held = s.dirs.get(&m.parent).is_some_and(|h| h.answering);
                if let Some(h) = s.dirs.get_mut(&fid) {
                    // The MDT passes the parent's lease on only while it
                    // is held (not under this recall).
                    h.granted = parent_held;
                    h.answering &= parent_held;
                }
                None
            }
            (Op::Unlink { .. }, Reply::Orphaned { fid }) => {
                self.adopt_orphan(fid).await;
                None
            }
            (op, reply) => {
                if !matches!(reply, Reply::Ok) {
                    tracing::warn!(?op, "write-back: unexpected answer {reply:?}");
                }
                None
            }
        }
    }

    /// A change was refused at its MDT: kept for the next fsync of its
    /// file and of any directory. What it made exists only here: forgotten,
    /// with the directory it was in (which now differs from its MDT).
    fn wb_failed(&self, item: Sending, e: Errno) {
        tracing::warn!(op = ?item.op, "write-back: refused at flush: {e:?}");
        let mut s = self.wb.lock();
        s.failed.get_or_insert(e);
        let fid = match item.op {
            Op::Make(fid) => {
                if let Some(m) = s.drop_made(fid) {
                    if let Some(h) = s.dirs.get_mut(&m.parent) {
                        h.names.remove(&m.name);
                        h.answering = false;
                    }
                }
                if let Some(h) = s.dirs.get_mut(&fid) {
                    h.answering = false;
                }
                Some(fid)
            }
            Op::Unlink { parent, .. }
            | Op::Rmdir { parent, .. }
            | Op::SetAttr { fid: parent, .. } => {
                if let Some(h) = s.dirs.get_mut(&parent) {
                    h.answering = false;
                }
                None
            }
        };
        drop(s);
        if let Some(fid) = fid {
            self.unseen_failure(fid, e);
        }
    }

    /// Write new files' first bytes on their objects, then give each its
    /// size with its times and mode as they were made (one batch per
    /// caller): a write would have moved the times.
    async fn wb_write_firsts(&self, mdt: u32, written: Vec<Written>) -> Result<(), Errno> {
        if written.is_empty() {
            return Ok(());
        }
        let fids: Vec<Fid> = written.iter().map(|w| w.fid).collect();
        self.wb_give_back();
        let r = self.wb_write_firsts_of(mdt, written).await;
        // Sent, or failed and reported: answered by their MDT from now on.
        let mut s = self.wb.lock();
        for fid in fids {
            s.drop_made(fid);
        }
        r
    }

    async fn wb_write_firsts_of(&self, mdt: u32, written: Vec<Written>) -> Result<(), Errno> {
        let me = self
            .me
            .get()
            .and_then(std::sync::Weak::upgrade)
            .ok_or(Errno::EIO)?;
        let mut set = tokio::task::JoinSet::new();
        for w in written {
            let me = me.clone();
            set.spawn(async move {
                let f = me.open_untold(&w.caller, w.fid, w.layout.clone(), 0);
                let r = async {
                    f.write(0, &w.data).await?;
                    f.take_unreported().await.map(|_| ())
                }
                .await;
                (w, r)
            });
        }
        let mut sized: Vec<(ReqCtx, Fid, MdtRequest)> = Vec::new();
        let mut failure = None;
        while let Some(j) = set.join_next().await {
            let Ok((w, r)) = j else { continue };
            match r {
                Ok(()) => {
                    let a = &w.attr;
                    let req = MdtRequest::SetAttr {
                        fid: w.fid,
                        set: SetAttr {
                            size: Some(a.size),
                            atime: Some(SetTime::At(a.atime)),
                            mtime: Some(SetTime::At(a.mtime)),
                            perm: Some(a.perm),
                            by_write_handle: true,
                            ..SetAttr::default()
                        },
                    };
                    sized.push((w.ctx, w.fid, req));
                }
                Err(e) => {
                    failure.get_or_insert(e);
                    self.wb.lock().failed.get_or_insert(e);
                    self.unseen_failure(w.fid, e);
                }
            }
        }
        // Stable: each caller's in the order they were made.
        sized.sort_by(|(a, _, _), (b, _, _)| {
            (a.uid, a.gid, &a.groups, a.umask, &a.jobid)
                .cmp(&(b.uid, b.gid, &b.groups, b.umask, &b.jobid))
        });
        let mut rest = &sized[..];
        while let Some((c, _, _)) = rest.first() {
            let n = rest
                .iter()
                .take_while(|(o, _, _)| o == c)
                .count()
                .min(BATCH_MAX);
            let (run, tail) = rest.split_at(n);
            rest = tail;
            let reqs = run.iter().map(|(_, _, r)| r.clone()).collect();
            let answers = self
                .router
                .call_batch(TargetId::mdt(mdt), c.clone(), reqs)
                .await
                .unwrap_or_else(|e| run.iter().map(|_| Err(e)).collect());
            for ((_, fid, _), a) in run.iter().zip(answers) {
                if let Err(e) = a {
                    failure.get_or_insert(e);
                    self.wb.lock().failed.get_or_insert(e);
                    self.unseen_failure(*fid, e);
                }
            }
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// The next batch: changes by callers the MDT cannot tell apart (one
/// user and job, whatever the process), in order, within the batch
/// limits.
fn cut_run(todo: &mut VecDeque<Sending>) -> Vec<Sending> {
    let mut run = Vec::new();
    let mut bytes = 0;
    while let Some(next) = todo.front() {
        let size = match &next.req {
            MdtRequest::MakeAt { data, .. } => data.len() + 256,
            _ => 256,
        };
        let same = run.first().is_none_or(|f: &Sending| f.ctx == next.ctx);
        if !run.is_empty() && (!same || run.len() >= BATCH_MAX || bytes + size > BATCH_BYTES) {
            break;
        }
        bytes += size;
        if let Some(item) = todo.pop_front() {
            run.push(item);
        }
    }
    run
}
