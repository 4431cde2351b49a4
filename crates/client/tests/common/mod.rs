//! Test harness of the client library's tests: real MGS, MDT and OST
//! services hosted by one in-process server node on loopback (no FUSE, no
//! mocks), and a client connected once every target has registered.
#![allow(dead_code)]

use loom_client::{Caller, Client, ClientOptions, ClusterKey};
use loom_server::node;
use loom_server::target;
use std::sync::Arc;
use std::time::Duration;

pub const OSTS: u32 = 4;

pub struct Cluster {
    _dir: Option<tempfile::TempDir>,
    pub mgs: String,
    pub key: ClusterKey,
    /// Targets that must register before the cluster is usable.
    pub targets: usize,
}

impl Cluster {
    /// The same cluster, reached with `key` (a client node's, say); the
    /// first handle keeps the servers' directory.
    pub fn with_key(&self, key: ClusterKey) -> Cluster {
        Cluster {
            _dir: None,
            mgs: self.mgs.clone(),
            key,
            targets: self.targets,
        }
    }
}

pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// Format an MGS, MDT0 and four OSTs and serve them from one node.
pub async fn start_cluster(fsname: &str) -> Cluster {
    start_cluster_with_mdts(fsname, 1).await
}

/// As [`start_cluster`], with `mdts` MDTs.
pub async fn start_cluster_with_mdts(fsname: &str, mdts: u32) -> Cluster {
    use loom_proto::msg::Role;
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let mut targets = vec![("mgs".to_string(), Role::Mgs, 0)];
    for i in 0..mdts {
        targets.push((format!("mdt{i}"), Role::Mdt, i));
    }
    for i in 0..OSTS {
        targets.push((format!("ost{i}"), Role::Ost, i));
    }
    for (name, role, index) in &targets {
        target::format(&root.join(name), fsname, *role, *index, None, false).expect("format");
    }
    let key = ClusterKey::generate();
    std::fs::write(root.join("key"), key.to_hex()).expect("key");
    let addr = format!("127.0.0.1:{}", free_port());
    let list: Vec<String> = targets.iter().map(|t| format!("\"{}\"", t.0)).collect();
    let toml = format!(
        "fsname = \"{fsname}\"\nlisten = \"{addr}\"\nmgs = \"{addr}\"\nkey_file = \"key\"\ntargets = [{}]\n",
        list.join(", ")
    );
    let cfg = root.join("node.toml");
    std::fs::write(&cfg, toml).expect("node.toml");
    let cfg2 = cfg.clone();
    tokio::spawn(async move {
        if let Err(e) = node::run(&cfg2).await {
            panic!("server node failed: {e:#}");
        }
    });
    Cluster {
        _dir: Some(dir),
        mgs: addr,
        key,
        targets: targets.len(),
    }
}

pub async fn connect(c: &Cluster, fsname: &str) -> Arc<Client> {
    connect_with_timeout(c, fsname, Duration::from_secs(20)).await
}

pub async fn connect_with_timeout(
    c: &Cluster,
    fsname: &str,
    call_timeout: Duration,
) -> Arc<Client> {
    let opts = ClientOptions {
        call_timeout,
        ..ClientOptions::default()
    };
    connect_with(c, fsname, opts).await
}

/// A client that takes leases, as a mount does.
pub async fn connect_leasing(c: &Cluster, fsname: &str) -> Arc<Client> {
    let opts = ClientOptions {
        call_timeout: Duration::from_secs(20),
        caching: loom_client::routing::Caching {
            attr_timeout: Duration::from_secs(1),
            lease_time: Some(Duration::from_secs(300)),
        },
        ..ClientOptions::default()
    };
    connect_with(c, fsname, opts).await
}

pub async fn connect_with(c: &Cluster, fsname: &str, opts: ClientOptions) -> Arc<Client> {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(client) = Client::connect(&c.mgs, fsname, c.key.clone(), opts.clone()).await {
            // Wait until every target has registered.
            loop {
                let cfg = client.router().config();
                if cfg.targets.len() == c.targets {
                    return client;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "targets never registered: {cfg:?}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
                client.router().refresh().await;
            }
        }
        assert!(std::time::Instant::now() < deadline, "MGS never answered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub fn me() -> Caller {
    Caller::current()
}

/// A caller with uid and gid `uid`, no supplementary groups.
pub fn user(uid: u32) -> Caller {
    user_in(uid, uid, &[])
}

/// A caller with uid `uid`, primary group `gid` and `groups`.
pub fn user_in(uid: u32, gid: u32, groups: &[u32]) -> Caller {
    Caller {
        uid,
        gid,
        groups: groups.to_vec(),
        pid: 0,
        umask: None,
    }
}
