//! An in-process loomfs cluster for integration tests: one MGS, one MDT and
//! a few OSTs behind a single RPC listener on 127.0.0.1:0, driven through a
//! real [`RpcClient`] so every request takes the wire path.
//!
//! The listener serves a [`Node`], the server process's own table of
//! targets: a test closes any target and reopens it on the same directory
//! (a clean restart) as a running server does, while the listener, its
//! address and the MGS registrations stay put.

#![allow(dead_code)]

use loom_proto::msg::{
    Attr, DirEntry, Envelope, FileKind, MdtRequest, MgsRequest, OstRequest, Reply, ReqCtx, Request,
    Role, TargetId, TargetInfo,
};
use loom_proto::{Errno, Fid, Layout, ObjRef, StripeSpec, WireError};
use loom_rpc::{ClientOptions, ClusterKey, RpcClient};
use loom_server::mdt::{MdtOptions, MdtService};
use loom_server::mgs::MgsService;
use loom_server::node::Node;
use loom_server::ost::OstService;
use loom_server::peers::Peers;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// File system name every target is registered for.
pub const FSNAME: &str = "t";

/// The uid and gid requests are sent with.
pub const UID: u32 = 1000;
/// See [`UID`].
pub const GID: u32 = 100;

/// A running in-process cluster.
pub struct Cluster {
    /// Directory holding every target directory.
    pub root: PathBuf,
    /// Removes `root` when the cluster is dropped, if the cluster made it.
    _tmp: Option<tempfile::TempDir>,
    /// Where the listener is.
    pub addr: String,
    /// The cluster key.
    pub key: ClusterKey,
    /// The targets, as a server process holds them.
    pub node: Arc<Node>,
    /// Indices of the OSTs.
    pub ost_indices: Vec<u32>,
    /// Settings MDT0 is opened with.
    mdt_opts: MdtOptions,
    client: Arc<RpcClient>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.server.abort();
    }
}

fn opts() -> ClientOptions {
    ClientOptions {
        call_timeout: Duration::from_secs(5),
        ..ClientOptions::default()
    }
}

/// Wait (bounded) until `a` is the only reference left, then drop it, so
/// that its store is closed before the directory is opened again.
async fn drop_last<T>(a: Arc<T>, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Arc::strong_count(&a) > 1 {
        assert!(
            Instant::now() < deadline,
            "{what} still has {} references after 10 s",
            Arc::strong_count(&a)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    drop(a);
}

impl Cluster {
    /// A cluster with one MGS, MDT0 and OSTs 0, 1 and 2.
    pub async fn start() -> Cluster {
        Cluster::with_osts(&[0, 1, 2]).await
    }

    /// A cluster with one MGS, MDT0 and the OSTs `osts`.
    pub async fn with_osts(osts: &[u32]) -> Cluster {
        Cluster::with_mdt_options(osts, MdtOptions::default()).await
    }

    /// As [`Cluster::with_osts`], MDT0 opened with `opts`.
    pub async fn with_mdt_options(osts: &[u32], opts: MdtOptions) -> Cluster {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().to_path_buf();
        Cluster::open_at_with(root, Some(tmp), ClusterKey::generate(), osts, opts).await
    }

    /// A cluster on the target directories under `root`, made on first use
    /// and reopened otherwise; every target registers (again) with the MGS
    /// at this cluster's address.
    pub async fn open_at(
        root: PathBuf,
        tmp: Option<tempfile::TempDir>,
        key: ClusterKey,
        osts: &[u32],
    ) -> Cluster {
        Cluster::open_at_with(root, tmp, key, osts, MdtOptions::default()).await
    }

    /// As [`Cluster::open_at`], MDT0 opened with `opts`.
    pub async fn open_at_with(
        root: PathBuf,
        tmp: Option<tempfile::TempDir>,
        key: ClusterKey,
        osts: &[u32],
        mdt_opts: MdtOptions,
    ) -> Cluster {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local_addr").to_string();
        let node = Arc::new(Node::new(Duration::from_secs(60)));
        let server = tokio::spawn(loom_rpc::serve(listener, key.clone(), node.clone()));
        let c = Cluster {
            client: Arc::new(RpcClient::new(addr.clone(), key.clone(), opts())),
            root,
            _tmp: tmp,
            addr,
            key,
            node,
            ost_indices: osts.to_vec(),
            mdt_opts,
            server,
        };
        c.open_mgs();
        c.open_osts();
        // Register every OST before the MDT first asks for the configuration
        // (Peers caches it for two seconds).
        for &i in osts {
            c.register(TargetId::ost(i)).await;
        }
        c.register(TargetId::mdt(0)).await;
        c.open_mdt();
        c.give_root_to_the_test_user().await;
        c
    }

    /// The MDT checks permissions and the tests act as uid [`UID`]: give
    /// it the root directory (as root, uid 0), as an admin gives a user
    /// a directory.
    async fn give_root_to_the_test_user(&self) {
        let env = Envelope {
            target: TargetId::mdt(0),
            ctx: ReqCtx::default(),
            req: MdtRequest::SetAttr {
                fid: loom_proto::Fid::ROOT,
                set: loom_proto::msg::SetAttr {
                    uid: Some(UID),
                    gid: Some(GID),
                    ..Default::default()
                },
            }
            .into(),
            capa: None,
            snapshot: None,
        };
        self.client
            .call(&env, bytes::Bytes::new())
            .await
            .expect("chown of the root directory");
    }

    fn mgs_dir(&self) -> PathBuf {
        self.root.join("mgs")
    }

    /// Target directory of MDT0.
    pub fn mdt_dir(&self) -> PathBuf {
        self.root.join("mdt0")
    }

    /// Target directory of OST `i`.
    pub fn ost_dir(&self, i: u32) -> PathBuf {
        self.root.join(format!("ost{i}"))
    }

    fn open_mgs(&self) {
        let m = MgsService::open(&self.mgs_dir(), FSNAME).expect("open MGS");
        self.node.open_mgs(m);
    }

    fn open_osts(&self) {
        for &i in &self.ost_indices {
            let d = self.ost_dir(i);
            std::fs::create_dir_all(&d).expect("create OST dir");
            let o = OstService::open(i, &d).expect("open OST");
            self.node.open_ost(i, o);
        }
    }

    fn open_mdt(&self) {
        let d = self.mdt_dir();
        std::fs::create_dir_all(&d).expect("create MDT dir");
        let peers = Arc::new(Peers::new(&self.addr, self.key.clone(), opts()));
        let m = MdtService::open_with(0, &d, peers, self.mdt_opts.clone()).expect("open MDT");
        m.start();
        self.node.open_mdt(0, m);
    }

    async fn register(&self, id: TargetId) {
        let req = MgsRequest::Register {
            fsname: FSNAME.into(),
            target: TargetInfo::single(id, &format!("uuid-{id}"), &self.addr),
            replica: None,
        };
        let env = Envelope {
            target: TargetId::MGS,
            ctx: ReqCtx::default(),
            req: req.into(),
            capa: None,
            snapshot: None,
        };
        let r = self
            .client
            .call(&env, bytes::Bytes::new())
            .await
            .expect("register");
        assert_eq!(r.0, Reply::Ok, "registering {id}");
    }

    /// The open MDT service.
    pub fn mdt(&self) -> Arc<MdtService> {
        self.node.mdt(0).expect("MDT is open")
    }

    /// The open OST `i`.
    pub fn ost(&self, i: u32) -> Arc<OstService> {
        self.node.ost(i).expect("OST is open")
    }

    /// Close OST `i` (requests to it are answered EAGAIN).
    pub fn close_ost(&self, i: u32) -> Option<Arc<OstService>> {
        self.node.close_ost(i)
    }

    /// Open OST `i` again.
    pub fn reopen_ost(&self, i: u32, o: Arc<OstService>) {
        self.node.open_ost(i, o);
    }

    /// `Destroy` requests the OSTs served.
    pub fn ost_destroys(&self) -> u64 {
        self.node
            .stats()
            .iter()
            .filter(|s| s.target.role == Role::Ost)
            .flat_map(|s| s.snapshot().ops)
            .filter(|(op, _)| *op == "destroy")
            .map(|(_, f)| f.count)
            .sum()
    }

    async fn close_mdt(&self) {
        if let Some(m) = self.node.close_mdt(0) {
            drop_last(m, "MDT0").await;
        }
    }

    /// Drop the MDT service and open it again on the same directory, on
    /// the store `wrap` makes of its own (a test's store that fails on
    /// demand).
    pub async fn restart_mdt_on(
        &self,
        wrap: impl FnOnce(Arc<dyn loom_store::kv::KvStore>) -> Arc<dyn loom_store::kv::KvStore>,
    ) {
        self.close_mdt().await;
        let d = self.mdt_dir();
        let store = loom_store::kv::FjallStore::open(&d.join("db")).expect("open the MDT's store");
        let peers = Arc::new(Peers::new(&self.addr, self.key.clone(), opts()));
        let m = MdtService::open_on(0, &d, wrap(Arc::new(store)), peers, self.mdt_opts.clone())
            .expect("open MDT");
        m.start();
        self.node.open_mdt(0, m);
    }

    /// Drop the MDT service and open it again on the same directory.
    pub async fn restart_mdt(&self) {
        self.close_mdt().await;
        self.open_mdt();
    }

    /// Drop every service, then open them all again on the same directories.
    pub async fn restart_all(&self) {
        self.close_mdt().await;
        for &i in &self.ost_indices {
            if let Some(o) = self.node.close_ost(i) {
                drop_last(o, &format!("OST{i}")).await;
            }
        }
        if let Some(m) = self.node.close_mgs() {
            drop_last(m, "MGS").await;
        }
        self.open_mgs();
        self.open_osts();
        self.open_mdt();
    }

    /// Send `req` to `target` with bulk `bulk` as uid [`UID`].
    pub async fn call_to(
        &self,
        target: TargetId,
        req: impl Into<Request>,
        bulk: &[u8],
    ) -> Result<(Reply, Vec<u8>), WireError> {
        let env = Envelope {
            target,
            ctx: ReqCtx {
                client_id: 1,
                jobid: "test".into(),
                uid: UID,
                gid: GID,
                ..ReqCtx::default()
            },
            req: req.into(),
            capa: None,
            snapshot: None,
        };
        Ok(self
            .client
            .call(&env, bytes::Bytes::copy_from_slice(bulk))
            .await?)
    }

    /// Send `req` to MDT0 as request `seq` of client `client`, which has
    /// every reply below `acked_below` (the reply cache's key); the answer
    /// without the effects a change's reply carries.
    pub async fn call_as(
        &self,
        client: u64,
        seq: u64,
        acked_below: u64,
        req: impl Into<Request>,
    ) -> Result<Reply, WireError> {
        let r = self.call_as_full(client, seq, acked_below, req).await?;
        Ok(r.split().0)
    }

    /// As [`Cluster::call_as`], the reply as sent.
    pub async fn call_as_full(
        &self,
        client: u64,
        seq: u64,
        acked_below: u64,
        req: impl Into<Request>,
    ) -> Result<Reply, WireError> {
        let env = Envelope {
            target: TargetId::mdt(0),
            ctx: ReqCtx {
                client_id: client,
                seq,
                acked_below,
                uid: UID,
                gid: GID,
                ..ReqCtx::default()
            },
            req: req.into(),
            capa: None,
            snapshot: None,
        };
        Ok(self.client.call(&env, bytes::Bytes::new()).await?.0)
    }

    /// Send `req` to MDT0.
    pub async fn call(&self, req: impl Into<Request>) -> Result<Reply, WireError> {
        Ok(self.call_to(TargetId::mdt(0), req, &[]).await?.0)
    }

    /// Send `req` to MDT0 as root (uid 0), which passes every permission
    /// check: for tests of what an operation does, not who may do it.
    pub async fn call_root(&self, req: impl Into<Request>) -> Result<Reply, WireError> {
        let env = Envelope {
            target: TargetId::mdt(0),
            ctx: ReqCtx::default(),
            req: req.into(),
            capa: None,
            snapshot: None,
        };
        Ok(self.client.call(&env, bytes::Bytes::new()).await?.0)
    }

    /// Send `req` to MDT0 and expect it to fail; its errno.
    pub async fn errno(&self, req: impl Into<Request>) -> Errno {
        let req: Request = req.into();
        let what = format!("{req:?}");
        match self.call(req).await {
            Ok(r) => panic!("{what} succeeded with {r:?}, expected an error"),
            Err(e) => e.errno,
        }
    }

    /// Send `req` to MDT0 and expect `Reply::Ok`.
    pub async fn ok(&self, req: impl Into<Request>) {
        let req: Request = req.into();
        let what = format!("{req:?}");
        match self.call(req).await {
            Ok(Reply::Ok) => {}
            other => panic!("{what}: {other:?}"),
        }
    }

    /// Send a request expected to answer with an entry.
    pub async fn entry(&self, req: impl Into<Request>) -> (Attr, Option<Layout>) {
        let req: Request = req.into();
        let what = format!("{req:?}");
        match self.call(req).await {
            Ok(Reply::Entry { attr, layout }) => (attr, layout),
            other => panic!("{what}: {other:?}"),
        }
    }

    /// Create regular file `name` in `parent` with mode 0644.
    pub async fn create(&self, parent: Fid, name: &str) -> Attr {
        self.create_striped(parent, name, None).await.0
    }

    /// Create regular file `name` with an explicit striping.
    pub async fn create_striped(
        &self,
        parent: Fid,
        name: &str,
        stripe: Option<StripeSpec>,
    ) -> (Attr, Option<Layout>) {
        self.entry(MdtRequest::Create {
            parent,
            name: name.into(),
            kind: FileKind::File,
            perm: 0o644,
            rdev: 0,
            stripe,
        })
        .await
    }

    /// Make directory `name` in `parent` with mode 0755.
    pub async fn mkdir(&self, parent: Fid, name: &str) -> Attr {
        self.entry(MdtRequest::Mkdir {
            parent,
            name: name.into(),
            perm: 0o755,
        })
        .await
        .0
    }

    /// Look `name` up in `parent`.
    pub async fn lookup(&self, parent: Fid, name: &str) -> Attr {
        self.entry(MdtRequest::Lookup {
            parent,
            name: name.into(),
        })
        .await
        .0
    }

    /// The errno of looking `name` up in `parent`.
    pub async fn lookup_errno(&self, parent: Fid, name: &str) -> Errno {
        self.errno(MdtRequest::Lookup {
            parent,
            name: name.into(),
        })
        .await
    }

    /// Attributes of `fid`.
    pub async fn getattr(&self, fid: Fid) -> Attr {
        match self.call(MdtRequest::GetAttr { fid }).await {
            Ok(Reply::Attr(a)) => a,
            other => panic!("getattr {fid}: {other:?}"),
        }
    }

    /// The layout of `fid`.
    pub async fn layout(&self, fid: Fid) -> Layout {
        match self.call(MdtRequest::GetLayout { fid }).await {
            Ok(Reply::Layout(l)) => l,
            other => panic!("getlayout {fid}: {other:?}"),
        }
    }

    /// Rename with `flags`.
    pub async fn rename(
        &self,
        parent: Fid,
        name: &str,
        new_parent: Fid,
        new_name: &str,
        flags: u32,
    ) -> Result<Reply, WireError> {
        self.call(MdtRequest::Rename {
            parent,
            name: name.into(),
            new_parent,
            new_name: new_name.into(),
            flags,
            keep_orphan: false,
        })
        .await
    }

    /// One page of directory `fid` after `cookie`.
    pub async fn readdir_page(&self, fid: Fid, cookie: u64, max: u32) -> (Vec<DirEntry>, bool) {
        match self.call(MdtRequest::Readdir { fid, cookie, max }).await {
            Ok(Reply::Dir { entries, eof }) => (entries, eof),
            other => panic!("readdir {fid}: {other:?}"),
        }
    }

    /// Every entry of directory `fid`, listed in pages of 100.
    pub async fn readdir_all(&self, fid: Fid) -> Vec<DirEntry> {
        let mut out = Vec::new();
        let mut cookie = 0;
        for _ in 0..100_000 {
            let (page, eof) = self.readdir_page(fid, cookie, 100).await;
            if let Some(last) = page.last() {
                cookie = last.cookie;
            }
            let empty = page.is_empty();
            out.extend(page);
            if eof {
                return out;
            }
            assert!(
                !empty,
                "readdir of {fid} returned an empty page without eof"
            );
        }
        panic!("readdir of {fid} never reached eof");
    }

    /// Write `data` at offset 0 of object `obj` on its OST.
    pub async fn write_object(&self, obj: ObjRef, data: &[u8]) {
        let r = self
            .call_to(
                TargetId::ost(obj.ost),
                OstRequest::ObjWrite {
                    obj,
                    offset: 0,
                    pack: None,
                    grant_used: 0,
                    owner: None,
                },
                data,
            )
            .await
            .expect("ObjWrite");
        assert!(matches!(r.0, Reply::Written { .. }), "{:?}", r.0);
    }

    /// Path of object `obj`'s file on its OST.
    pub fn object_path(&self, obj: ObjRef) -> PathBuf {
        self.ost(obj.ost).store().object_path(obj.oid)
    }
}

/// Poll `cond` every 20 ms for up to `secs` seconds; whether it came true.
pub async fn eventually(secs: u64, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether a file exists at `p`.
pub fn exists(p: &Path) -> bool {
    p.exists()
}

/// The OST objects of a layout.
pub fn objects(l: &Option<Layout>) -> Vec<ObjRef> {
    l.as_ref().map(|l| l.objects()).unwrap_or_default()
}
