//! [`Client`]: one mounted (or tool-connected) loomfs file system.

use crate::ctx::{Caller, CtxFactory};
use crate::error::ClientError;
use crate::inode::Inode;
use crate::io::file::OpenFile;
use crate::routing::Router;
use bytes::Bytes;
use loom_proto::msg::ORPHAN_RENEW;
use loom_proto::msg::{Attr, FileKind, MdtRequest, OstRequest, Reply, ReqCtx, TargetId};
use loom_proto::{Errno, Fid, Layout};
use loom_rpc::{ClusterKey, RpcError};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Bytes of writes one client may have in flight, over all its files.
pub const WRITE_BUDGET: usize = 256 << 20;

/// Tunables of a client.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// How long an operation may wait for a server in all, across
    /// reconnects and resends: an operation issued during an outage
    /// completes once the server is back, or fails with EIO after this.
    pub call_timeout: Duration,
    /// Environment variable that names a caller's job (per-job statistics).
    /// Empty: no job ids.
    pub jobid_var: String,
    /// How long [`Client::connect`] waits for the MGS before giving up.
    pub connect_timeout: Duration,
    /// How long answers are trusted, and whether the client takes leases.
    pub caching: crate::routing::Caching,
    /// Whether a handle read in order reads whole stripe widths ahead
    /// (`io::readahead`). A FUSE mount has the kernel's readahead instead.
    pub readahead: bool,
    /// The local address connections leave from (a client node on
    /// several networks picks the one its servers know it by, and so its
    /// nodemap); `None`: the system's choice.
    pub source: Option<std::net::IpAddr>,
    /// Read this snapshot of the file system (its number, see
    /// [`Client::snapshots`]) instead of the file system itself: read-only.
    pub snapshot: Option<u32>,
    /// Write back directories this client makes (`crate::writeback`):
    /// changes in them are answered here and sent in batches. Needs
    /// leases (`caching.lease_time`).
    pub write_back: bool,
    /// How long the write-back layer trusts an MDT's answer on how many
    /// more inodes a user, group or project may own there before asking
    /// again (`crate::writeback`'s quota check).
    pub wb_quota_trust: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            call_timeout: Duration::from_secs(300),
            jobid_var: "SLURM_JOB_ID".to_string(),
            connect_timeout: Duration::from_secs(15),
            caching: Default::default(),
            readahead: true,
            source: None,
            snapshot: None,
            write_back: false,
            wb_quota_trust: DEFAULT_QUOTA_TRUST,
        }
    }
}

/// How long an MDT's answer on quota room is trusted, by default: short
/// beside a run of creates, long beside a round trip.
pub const DEFAULT_QUOTA_TRUST: Duration = Duration::from_secs(2);

/// Most files whose failures after close a client keeps for their next
/// fsync.
pub const UNSEEN_MAX: usize = 65_536;

/// A client of one loomfs file system. Cheap to share (`Arc`); every method
/// may be called from many tasks at once.
#[derive(Debug)]
pub struct Client {
    pub(crate) router: Arc<Router>,
    /// Directories written back (see [`crate::writeback`]).
    pub(crate) wb: crate::writeback::WriteBack,
    pub(crate) ctxs: CtxFactory,
    fsname: String,
    opts: ClientOptions,
    /// Handles open on this client (each also counted in its inode's
    /// object, see [`crate::inode`]: a truncate must shrink what they
    /// believe the size is, and a stat must see their unflushed writes).
    handles_open: AtomicUsize,
    /// Bytes this client may have in flight in all (each file has its own
    /// window too): many files written at once must not hold more memory.
    pub(crate) write_budget: Arc<tokio::sync::Semaphore>,
    /// Space the OSTs keep for this client's writes sent behind.
    pub(crate) grants: crate::io::grant::Grants,
    /// Files closed here whose failure no close could report (writes or
    /// sizes sent at a release; each kept in its inode's object): the
    /// file's next fsync here reports it, as a local file system's fsync
    /// reports a failed write-back.
    unseen: AtomicUsize,
    /// Where background work (orphan releases from `Drop`) runs.
    pub(crate) rt: tokio::runtime::Handle,
    /// File locks this client's owners hold (see `locks`).
    pub(crate) locks: crate::locks::HeldLocks,
    /// Itself, for background tasks that must not keep it alive.
    pub(crate) me: std::sync::OnceLock<std::sync::Weak<Client>>,
    /// Holds and releases of open files to tell the MDTs, sent in the
    /// order they were made (a release must not overtake its hold).
    tells: tokio::sync::mpsc::UnboundedSender<Tell>,
    /// Tells queued so far, and sent so far ([`Client::tells_sent`]).
    told: (AtomicU64, Arc<tokio::sync::watch::Sender<u64>>),
    /// The directory this client sees as its root, once asked
    /// ([`Client::root`]).
    root: std::sync::OnceLock<Fid>,
}

/// What this client tells an MDT of the files it has open
/// ([`Client::tells`]).
#[derive(Debug)]
pub(crate) enum Tell {
    /// It has the file open (`RenewOrphans`, which holds it).
    Hold(Fid),
    /// Its last handle closed (`ReleaseOrphan`).
    Release(Fid),
    /// Its connection to MDT `mdt` was lost: its locks and open files
    /// there, held again (`ReclaimLocks`; the files are taken when it is
    /// sent, so a close after that releases after it). The outcome goes
    /// to `done`.
    Reclaim {
        mdt: u32,
        done: tokio::sync::oneshot::Sender<Result<(), Errno>>,
    },
}

impl Client {
    /// Connect to file system `fsname` through the MGS at `mgs_addr`:
    /// fetch the cluster configuration and check the name. Data servers are
    /// connected lazily, on first use.
    pub async fn connect(
        mgs_addr: &str,
        fsname: &str,
        key: ClusterKey,
        opts: ClientOptions,
    ) -> Result<Arc<Client>, ClientError> {
        let mut router = Router::new(mgs_addr, key, opts.call_timeout);
        router.set_caching(opts.caching);
        router.set_source(opts.source);
        router.set_snapshot(opts.snapshot);
        let wait = opts.connect_timeout.min(opts.call_timeout);
        let config = router.fetch_config(wait).await.map_err(|e| match e {
            RpcError::Remote(w) => ClientError::BadConfig {
                addr: mgs_addr.to_string(),
                reason: w.to_string(),
            },
            RpcError::Timeout { last, .. } => ClientError::MgsUnreachable {
                addr: mgs_addr.to_string(),
                reason: last,
            },
            other => ClientError::MgsUnreachable {
                addr: mgs_addr.to_string(),
                reason: other.to_string(),
            },
        })?;
        if config.fsname != fsname {
            return Err(ClientError::WrongFsname {
                addr: mgs_addr.to_string(),
                asked: fsname.to_string(),
                serves: config.fsname.clone(),
            });
        }
        let ctxs = CtxFactory::new(&opts.jobid_var);
        tracing::info!(
            mgs = mgs_addr,
            fsname,
            client_id = format_args!("{:#x}", ctxs.client_id()),
            targets = config.targets.len(),
            "connected"
        );
        let (tells, told) = tokio::sync::mpsc::unbounded_channel();
        let write_back = opts.write_back && opts.snapshot.is_none() && router.takes_leases();
        let client = Arc::new(Client {
            wb: crate::writeback::WriteBack::new(write_back, opts.wb_quota_trust),
            router: Arc::new(router),
            ctxs,
            fsname: fsname.to_string(),
            opts,
            handles_open: AtomicUsize::new(0),
            write_budget: Arc::new(tokio::sync::Semaphore::new(WRITE_BUDGET)),
            grants: Default::default(),
            unseen: AtomicUsize::new(0),
            rt: tokio::runtime::Handle::current(),
            locks: Default::default(),
            me: std::sync::OnceLock::new(),
            root: std::sync::OnceLock::new(),
            tells,
            told: (
                AtomicU64::new(0),
                Arc::new(tokio::sync::watch::channel(0).0),
            ),
        });
        client.spawn_teller(told);
        let _ = client.me.set(Arc::downgrade(&client));
        client.spawn_orphan_renewal();
        client.start_reclaimer();
        client.router.set_reporter(client.size_reporter());
        client.router.set_capa_keeper(client.capa_keeper());
        client.router.spawn_recovery(client.ctxs.client_id());
        if client.wb.is_on() {
            client.router.set_flusher(client.wb_flusher());
            client.spawn_wb_timer();
        }
        Ok(client)
    }

    /// Another client of the same file system, with the same options,
    /// reading snapshot `id` (see [`ClientOptions::snapshot`]).
    pub async fn at_snapshot(&self, id: u32) -> Result<Arc<Client>, ClientError> {
        let opts = ClientOptions {
            snapshot: Some(id),
            ..self.opts.clone()
        };
        let (mgs, key) = self.router.mgs_and_key();
        Client::connect(&mgs, &self.fsname, key, opts).await
    }

    /// A recall hook (see [`crate::routing::Reporter`]) that runs `each`
    /// for every file, on this client while it lives.
    fn per_file_hook<F, Fut>(self: &Arc<Self>, each: F) -> crate::routing::Reporter
    where
        F: Fn(Arc<Client>, Fid) -> Fut + Clone + Send + Sync + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let me = Arc::downgrade(self);
        Arc::new(move |fids: Vec<Fid>| {
            let (me, each) = (me.clone(), each.clone());
            Box::pin(async move {
                let Some(c) = me.upgrade() else { return };
                for fid in fids {
                    each(c.clone(), fid).await;
                }
            })
        })
    }

    /// Asks for the capabilities files opened under a lease still want,
    /// when their leases are recalled ([`crate::capas::Capas::wanted`]).
    fn capa_keeper(self: &Arc<Self>) -> crate::routing::Reporter {
        self.per_file_hook(|c, fid| async move {
            let Some((write, caller)) = c.router.capas.wanted(fid) else {
                return;
            };
            if let Err(e) = c.fetch_capa(&caller, fid, write).await {
                // Its first I/O asks again (and may be refused).
                tracing::debug!(%fid, "capability at a recall: {e:?}");
            }
        })
    }

    /// Reports what this client's open handles of some files wrote, when
    /// their size leases are recalled or lost.
    fn size_reporter(self: &Arc<Self>) -> crate::routing::Reporter {
        self.per_file_hook(|c, fid| async move {
            for h in c.open_handles(fid) {
                if let Err(e) = h.report_now().await {
                    // The handle keeps it to report at its close.
                    tracing::warn!(%fid, "reporting a recalled size: {e}");
                }
            }
        })
    }

    /// Wait until every change this client made is committed on its MDT
    /// (fsync of a directory, syncfs): the changes' replies leave before
    /// their commit (see [`crate::replay`]).
    pub async fn sync_all(&self) -> Result<(), Errno> {
        let flushed = self.wb_flush().await;
        self.router.commit_all().await?;
        // A change refused at a flush since the last report: here (as a
        // directory's fsync), once.
        match self.wb.take_failure() {
            Some(e) => Err(e),
            None => flushed,
        }
    }

    /// The write-back layer (what waits, what is held), for tools and
    /// tests.
    pub fn write_back(&self) -> &crate::writeback::WriteBack {
        &self.wb
    }

    /// Leave the file system (unmount, end of a tool): every MDT this
    /// client changed something on commits and stops waiting for it in
    /// its recovery after a restart. A client that ends without this
    /// (killed) is waited for by a restarted MDT until its recovery window
    /// ends.
    pub async fn close(&self) {
        self.router.disconnect_all().await
    }

    /// Changes acknowledged and not yet committed, on MDT `mdt` (for tests
    /// and statistics).
    pub fn uncommitted(&self, mdt: u32) -> usize {
        self.router.replay.kept(mdt)
    }

    /// Acknowledged changes lost because an MDT evicted this client.
    pub fn lost_changes(&self) -> u64 {
        self.router
            .replay
            .lost
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The file system's name.
    pub fn fsname(&self) -> &str {
        &self.fsname
    }

    /// The options in force.
    pub fn options(&self) -> &ClientOptions {
        &self.opts
    }

    /// The router (cluster configuration and connections), for tools.
    pub fn router(&self) -> &Router {
        &self.router
    }

    /// A shared handle on the router, for tasks spawned per request.
    pub(crate) fn router_handle(&self) -> Arc<Router> {
        self.router.clone()
    }

    /// The request context of one new request by `c`.
    pub(crate) fn ctx(&self, c: &Caller) -> ReqCtx {
        self.ctxs.ctx(c)
    }

    /// Send `req` to the MDT that owns `fid`.
    pub(crate) async fn mdt_call(
        &self,
        c: &Caller,
        fid: Fid,
        req: MdtRequest,
    ) -> Result<Reply, Errno> {
        let target = self.router.mdt_of(fid).await?;
        self.router
            .call(target, self.ctx(c), req, Bytes::new())
            .await
            .map(|(r, _)| r)
    }

    /// Send `changes` to the MDT that owns `fid` in one request, as `c`:
    /// each answered, learned and kept for replay as if sent alone (see
    /// [`Router::call_batch`]). The answers in order, up to the first that
    /// failed; the changes after it were not made.
    pub async fn batch(
        &self,
        c: &Caller,
        fid: Fid,
        changes: Vec<MdtRequest>,
    ) -> Result<Vec<Result<Reply, Errno>>, Errno> {
        let target = self.router.mdt_of(fid).await?;
        self.router.call_batch(target, self.ctx(c), changes).await
    }

    /// Reserve `count` FIDs of the MDT that owns `fid` for this client
    /// (`MdtRequest::GrantFids`), to name inodes it makes ahead of the MDT
    /// (`MdtRequest::MakeAt`): the first and how many.
    pub async fn grant_fids(&self, fid: Fid, count: u32) -> Result<(Fid, u32), Errno> {
        let c = Caller::current();
        match self
            .mdt_call(&c, fid, MdtRequest::GrantFids { count })
            .await?
        {
            Reply::Fids { first, count } => Ok((first, count)),
            other => Err(crate::io::file::unexpected("GrantFids", &other)),
        }
    }

    /// Write back empty directory `dir` (`MdtRequest::TakeWriteBack`):
    /// another client's request on it recalls the lease, and this
    /// client's flusher (`Router::set_flusher`) runs before the recall is
    /// answered. This client must take leases. Answers the layout the
    /// directory's new files get (`None`: plain default striping).
    pub async fn take_write_back(
        &self,
        c: &Caller,
        dir: Fid,
    ) -> Result<Option<loom_proto::layout::LayoutSpec>, Errno> {
        match self
            .mdt_call(c, dir, MdtRequest::TakeWriteBack { dir })
            .await?
        {
            Reply::LayoutSpec(s) => Ok(s),
            other => Err(crate::io::file::unexpected("TakeWriteBack", &other)),
        }
    }

    /// The directory this client sees as the file system's root: the
    /// root, or the fileset its nodemap confines it to (`GetRoot`, asked
    /// once; a mount shows it as its root, and paths start there).
    pub async fn root(&self) -> Result<Fid, Errno> {
        if let Some(r) = self.root.get() {
            return Ok(*r);
        }
        let c = Caller::current();
        match self.mdt_call(&c, Fid::ROOT, MdtRequest::GetRoot).await? {
            Reply::Entry { attr, .. } => Ok(*self.root.get_or_init(|| attr.fid)),
            other => Err(crate::io::file::unexpected("GetRoot", &other)),
        }
    }

    /// Send `req` on an object of file `fid` with `bulk` to OST `ost`,
    /// with the file's capability; the reply and its bulk.
    pub(crate) async fn ost_call(
        &self,
        c: &Caller,
        fid: Fid,
        ost: u32,
        req: OstRequest,
        bulk: Bytes,
    ) -> Result<(Reply, Vec<u8>), Errno> {
        let capa = self.capa_for(c, fid, &req).await?;
        self.router
            .call_capa(TargetId::ost(ost), self.ctx(c), req, bulk, capa)
            .await
    }

    /// The capability `req` on an object of `fid` needs (`None` if it
    /// touches no object): the one held, or a new one from the MDT.
    async fn capa_for(
        &self,
        c: &Caller,
        fid: Fid,
        req: &OstRequest,
    ) -> Result<Option<loom_proto::capa::Capa>, Errno> {
        let Some(obj) = req.object() else {
            return Ok(None);
        };
        let op = req.op();
        let write = op.effect != loom_proto::requests::Effect::Reads && !op.session;
        // One that names the object: a file whose data migrated since
        // has other objects, and asks for a new one.
        if let Some(capa) = self
            .router
            .capas
            .get(fid, write)
            .filter(|c| c.objs.contains(&obj))
        {
            return Ok(Some(capa));
        }
        // Without one the request goes bare: a server's connection (the
        // cluster key) needs none, and an OST refuses it to a client's
        // (EACCES), as the MDT refused the capability.
        match self.fetch_capa(c, fid, write).await {
            Ok(capa) => Ok(Some(capa)),
            Err(e) => {
                tracing::debug!("no capability for {fid}: {e:?}");
                Ok(None)
            }
        }
    }

    /// A capability for `fid` from its MDT (`GetCapa`), kept.
    async fn fetch_capa(
        &self,
        c: &Caller,
        fid: Fid,
        write: bool,
    ) -> Result<loom_proto::capa::Capa, Errno> {
        match self
            .mdt_call(c, fid, MdtRequest::GetCapa { fid, write })
            .await?
        {
            Reply::Capa(capa) => {
                self.router.capas.remember(capa.clone());
                Ok(capa)
            }
            other => Err(crate::io::file::unexpected("GetCapa", &other)),
        }
    }

    /// Send each `(ost, request)` to its OST, all in parallel, and wait for
    /// every `Ok`; the first error wins. For the operations that touch
    /// every object of a layout (sync, truncate, punch, allocate).
    pub(crate) async fn ost_call_each(
        &self,
        c: &Caller,
        fid: Fid,
        reqs: Vec<(u32, OstRequest)>,
        op: &str,
    ) -> Result<(), Errno> {
        let mut set = tokio::task::JoinSet::new();
        for (ost, req) in reqs {
            let capa = self.capa_for(c, fid, &req).await?;
            let (router, ctx) = (self.router_handle(), self.ctx(c));
            set.spawn(async move {
                router
                    .call_capa(TargetId::ost(ost), ctx, req, Bytes::new(), capa)
                    .await
            });
        }
        crate::io::file::join_ok(set, op).await
    }

    /// Open file `fid` with `layout`, whose size the caller last saw as
    /// `size`, for I/O as the current process. See [`OpenFile`].
    pub fn open(self: &Arc<Self>, fid: Fid, layout: Layout, size: u64) -> Arc<OpenFile> {
        self.open_as(&Caller::current(), fid, layout, size)
    }

    /// Open regular file `fid` as `caller` for `access`
    /// (`loom_proto::msg::access::READ | WRITE`): the MDT checks the mode
    /// bits (EACCES) and answers fresh attributes and the layout in one
    /// round trip (close-to-open). EISDIR for a directory, EINVAL for
    /// another kind.
    pub async fn open_checked(
        self: &Arc<Self>,
        caller: &Caller,
        fid: Fid,
        access: u32,
    ) -> Result<(Attr, Arc<OpenFile>), Errno> {
        let (attr, layout) = self.open_entry(caller, fid, access).await?;
        let layout = match (attr.kind, layout) {
            (FileKind::File, Some(l)) => l,
            (FileKind::Dir, _) => return Err(Errno::EISDIR),
            _ => return Err(Errno::EINVAL),
        };
        // Without leases the `Open` made this client a holder of the
        // file at the MDT (see `hold_unleased`): held here too.
        let f = self.open_handle(caller, fid, layout, attr.size, true);
        f.note_attr(&attr);
        Ok((attr, f))
    }

    /// Open regular file `fid` as `caller` without asking the MDT, if
    /// its attributes are leased to this client and its layout known:
    /// another client's change would have recalled the lease, so they are
    /// what the MDT would answer (close-to-open holds). No permission is
    /// checked: for a caller that checked it on those attributes (the
    /// kernel of a mount with `default_permissions`). `None`: ask the MDT
    /// ([`Client::open_checked`]). Also says which lease
    /// ([`Client::lease_gen`]). `write`: opened for writing, whose
    /// capability is asked for at the first write, or before the lease is
    /// given back, whichever comes first.
    pub fn open_leased(
        self: &Arc<Self>,
        caller: &Caller,
        fid: Fid,
        write: bool,
    ) -> Option<(Attr, Arc<OpenFile>, u64)> {
        // Made here and not wholly sent: its MDT's answer (learned, with
        // its layout) lacks the bytes this client still holds.
        if self.wb.is_pending(fid) {
            return None;
        }
        let (attr, layout, gen) = self.router.fresh.leased_file(fid)?;
        if attr.kind != FileKind::File {
            return None;
        }
        self.router.capas.want(fid, write, caller);
        let attr = self.with_local_size(attr);
        let f = self.open_as(caller, fid, layout, attr.size);
        f.note_attr(&attr);
        Some((attr, f, gen))
    }

    /// Which lease this client holds on `fid`'s attributes, if any. The
    /// same number later means the lease was held all along: every other
    /// client's change to the inode was recalled here (and what the
    /// kernel caches of it dropped) in between.
    pub fn lease_gen(&self, fid: Fid) -> Option<u64> {
        self.router.fresh.lease_gen(fid)
    }

    /// As [`Client::open`], with I/O requests carrying `caller`'s
    /// credentials and job id. No permission is checked: the caller has
    /// the layout from a lookup or create it made (see
    /// [`Client::open_checked`]).
    pub fn open_as(
        self: &Arc<Self>,
        caller: &Caller,
        fid: Fid,
        layout: Layout,
        size: u64,
    ) -> Arc<OpenFile> {
        self.open_handle(caller, fid, layout, size, false)
    }

    /// A handle of `fid` on `layout` that the MDT is never told of (no
    /// hold, no release): a data migration's copy onto its new objects,
    /// whose MDT keeps the file still for it, and which must not stay
    /// held if this process ends before a release would reach the MDT.
    pub(crate) fn open_untold(
        self: &Arc<Self>,
        caller: &Caller,
        fid: Fid,
        layout: Layout,
        size: u64,
    ) -> Arc<OpenFile> {
        let inode = self.router.fresh.inode(fid);
        let f = Arc::new(OpenFile::new(
            self.clone(),
            caller.clone(),
            fid,
            layout,
            size,
            inode.writes(),
        ));
        inode.opened(&f);
        self.handles_open.fetch_add(1, Ordering::Relaxed);
        f
    }

    /// [`Client::open_as`]; `told`: the MDT was told of the open (an
    /// `Open` that holds).
    fn open_handle(
        self: &Arc<Self>,
        caller: &Caller,
        fid: Fid,
        layout: Layout,
        size: u64,
        told: bool,
    ) -> Arc<OpenFile> {
        let f = self.open_untold(caller, fid, layout, size);
        let inode = self.router.fresh.inode(fid);
        // An image cannot change: no unlink to hold an open file against.
        if !self.router.takes_leases() && self.opts.snapshot.is_none() {
            match told {
                true => {
                    inode.hold_orphan();
                }
                false => self.hold_unleased(&inode),
            }
        }
        f
    }

    /// A client without leases is never asked what it has open (no
    /// recall reaches it): it tells the MDT itself, with the `Open` it
    /// sends for every open, or for a file it made and opened at once,
    /// in the background (a removal on another client in the moment
    /// before that arrives is not seen as one of an open file). Released
    /// at the last close here.
    fn hold_unleased(&self, inode: &crate::inode::Inode) {
        if inode.is_orphan() || !inode.hold_orphan() {
            return;
        }
        self.tell(Tell::Hold(inode.fid()));
    }

    pub(crate) fn tell(&self, t: Tell) {
        self.told.0.fetch_add(1, Ordering::AcqRel);
        let _ = self.tells.send(t);
    }

    /// Wait until every hold and release of an open file queued so far
    /// reached its MDT (or failed): what this client told in the
    /// background is then in place.
    pub async fn tells_sent(&self) {
        let queued = self.told.0.load(Ordering::Acquire);
        let mut rx = self.told.1.subscribe();
        let _ = rx.wait_for(|n| *n >= queued).await;
    }

    /// Send the holds and releases of open files, one at a time in the
    /// order they were made, until the client is dropped.
    fn spawn_teller(self: &Arc<Self>, mut told: tokio::sync::mpsc::UnboundedReceiver<Tell>) {
        let router = self.router.clone();
        let ctx = self.ctx(&Caller::current());
        let sent = self.told.1.clone();
        let me = Arc::downgrade(self);
        self.rt.spawn(async move {
            while let Some(t) = told.recv().await {
                let (fid, req, what) = match t {
                    Tell::Reclaim { mdt, done } => {
                        let r = match me.upgrade() {
                            Some(c) => c.reclaim(mdt).await,
                            None => Err(Errno::EIO),
                        };
                        let _ = done.send(r);
                        sent.send_modify(|n| *n += 1);
                        continue;
                    }
                    Tell::Hold(fid) => (
                        fid,
                        MdtRequest::RenewOrphans { fids: vec![fid] },
                        "telling the MDT of an open file",
                    ),
                    Tell::Release(fid) => (
                        fid,
                        MdtRequest::ReleaseOrphan { fid },
                        "releasing an unlinked file",
                    ),
                };
                let r = match router.mdt_of(fid).await {
                    Ok(t) => router.call(t, ctx.clone(), req, Bytes::new()).await,
                    Err(e) => Err(e),
                };
                if let Err(e) = r {
                    tracing::warn!(%fid, "{what}: {e}");
                }
                sent.send_modify(|n| *n += 1);
            }
        });
    }

    /// The object of inode `fid`, if this client holds anything of it.
    pub(crate) fn inode(&self, fid: Fid) -> Option<Arc<Inode>> {
        self.router.fresh.get(fid)
    }

    /// A handle of `fid` was dropped (called when an [`OpenFile`] drops,
    /// whose writes reached `written_end`): the handles still open learn
    /// that size, so their reads do not stop short of data written through
    /// the one that closed (the kernel asks for it, by its own file size).
    /// The last handle of an orphan releases it.
    pub(crate) fn forget_closed(&self, fid: Fid, written_end: u64) {
        self.handles_open.fetch_sub(1, Ordering::Relaxed);
        let Some(inode) = self.inode(fid) else {
            return;
        };
        let closed = inode.closed();
        drop(inode);
        if closed.release_orphan {
            self.spawn_release_orphan(fid);
        }
        // Writes still in flight (a handle dropped without a flush) keep
        // the object, so a new open orders after them.
        self.router.fresh.sweep(fid);
        // Outside every lock: a survivor dropped here re-enters forget_closed.
        for f in closed.survivors {
            f.note_size_at_least(written_end);
        }
    }

    /// Wait for this client's writes to `fid` in flight, those its handles
    /// gathered sent first (before a read or a truncate must see them). A
    /// gathered write that fails is reported as any write is (by the next
    /// write, flush or fsync).
    pub(crate) async fn wait_writes(&self, fid: Fid) {
        let Some(inode) = self.inode(fid) else {
            return;
        };
        for h in inode.open_handles() {
            if let Err(e) = h.drain().await {
                tracing::debug!(%fid, "sending gathered writes: {e}");
            }
        }
        inode.writes().wait().await;
    }

    /// A release of `fid` failed with `e` after its close returned: the
    /// next fsync of `fid` on this client reports it (at most
    /// [`UNSEEN_MAX`] files are remembered; past that, the log only).
    pub fn unseen_failure(&self, fid: Fid, e: Errno) {
        let inode = self.router.fresh.inode(fid);
        if self.unseen.load(Ordering::Relaxed) < UNSEEN_MAX && inode.set_unseen(e) {
            self.unseen.fetch_add(1, Ordering::Relaxed);
        }
        drop(inode);
        self.router.fresh.sweep(fid);
    }

    /// The failure [`Client::unseen_failure`] kept for `fid`, now reported.
    pub(crate) fn take_unseen(&self, fid: Fid) -> Option<Errno> {
        let e = self.inode(fid)?.take_unseen();
        if e.is_some() {
            self.unseen.fetch_sub(1, Ordering::Relaxed);
            self.router.fresh.sweep(fid);
        }
        e
    }

    /// Whether any file is open here (an unlink or rename then asks the
    /// MDT to keep a file it removes the last name of, in case it is one
    /// of them).
    pub(crate) fn has_open_files(&self) -> bool {
        self.handles_open.load(Ordering::Relaxed) > 0
    }

    /// The MDT kept `fid` as our orphan: hold it while a handle here has
    /// it open, else release it now.
    pub(crate) async fn adopt_orphan(&self, fid: Fid) {
        let held = self.inode(fid).is_some_and(|i| i.hold_orphan());
        if !held {
            self.release_orphan(fid).await;
        }
    }

    /// Orphans this client holds.
    pub fn orphans(&self) -> Vec<Fid> {
        self.router.fresh.select(|i| i.is_orphan())
    }

    async fn release_orphan(&self, fid: Fid) {
        let r = self
            .mdt_call(&Caller::current(), fid, MdtRequest::ReleaseOrphan { fid })
            .await;
        if let Err(e) = r {
            // The MDT destroys it when its lease runs out.
            tracing::warn!(%fid, "releasing an unlinked file: {e}");
        }
    }

    /// Release `fid` on its MDT in the background, after any hold of it
    /// this client sent before.
    fn spawn_release_orphan(&self, fid: Fid) {
        self.tell(Tell::Release(fid));
    }

    /// Renew the leases of our orphans every `ORPHAN_RENEW`, until the
    /// client is dropped.
    fn spawn_orphan_renewal(self: &Arc<Self>) {
        let me = Arc::downgrade(self);
        self.rt.spawn(async move {
            loop {
                tokio::time::sleep(ORPHAN_RENEW).await;
                let Some(c) = me.upgrade() else { return };
                let mut by_mdt: HashMap<TargetId, Vec<Fid>> = HashMap::new();
                for fid in c.orphans() {
                    if let Ok(t) = c.router.mdt_of(fid).await {
                        by_mdt.entry(t).or_default().push(fid);
                    }
                }
                for (t, fids) in by_mdt {
                    let ctx = c.ctx(&Caller::current());
                    let req = MdtRequest::RenewOrphans { fids };
                    if let Err(e) = c.router.call(t, ctx, req, Bytes::new()).await {
                        tracing::warn!(%t, "renewing orphan leases: {e}");
                    }
                }
            }
        });
    }

    pub(crate) fn open_handles(&self, fid: Fid) -> Vec<Arc<OpenFile>> {
        self.inode(fid)
            .map(|i| i.open_handles())
            .unwrap_or_default()
    }

    /// The end of data written through this client's open handles of `fid`
    /// (acknowledged by the OSTs, maybe not yet reported to the MDT).
    pub(crate) fn local_size(&self, fid: Fid) -> Option<u64> {
        self.open_handles(fid).iter().map(|f| f.written_end()).max()
    }

    /// Tell this client's open handles of `fid` that it was truncated.
    pub(crate) fn note_truncate(&self, fid: Fid, size: u64) {
        for f in self.open_handles(fid) {
            f.note_truncate(size);
        }
    }
}
