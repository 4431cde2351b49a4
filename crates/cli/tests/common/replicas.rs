//! What tests of replicated targets share: the roles `loom target
//! status` shows, waited for, and requests sent straight to one replica's
//! server.

use super::{ask_raw, loom_ok};
use std::path::Path;
use std::time::{Duration, Instant};

/// `loom target status`'s rows of `target` (`MDT0000`, `OST0001`) on
/// `mnt`: (replica, role, state).
pub fn roles(mnt: &Path, target: &str) -> Vec<(u32, String, String)> {
    let out = loom_ok(&["target", "status", mnt.to_str().expect("utf8")]);
    out.lines()
        .filter(|l| l.starts_with(target))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w[1].parse().expect("replica"), w[3].into(), w[4].into())
        })
        .collect()
}

/// Wait until `loom target status` shows OST `ost` as `want`, or fail
/// after `secs` showing what it is.
pub fn wait_for_roles(mnt: &Path, ost: u32, want: &[(u32, &str, &str)], secs: u64) {
    wait_for_target(mnt, &format!("OST{ost:04x}"), want, secs)
}

/// As [`wait_for_roles`], for any target (`MDT0000`).
pub fn wait_for_target(mnt: &Path, target: &str, want: &[(u32, &str, &str)], secs: u64) {
    let want: Vec<(u32, String, String)> = want
        .iter()
        .map(|(r, a, b)| (*r, a.to_string(), b.to_string()))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let now = roles(mnt, target);
        if now == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{target} is {now:?} after {secs} s, not {want:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// What the server at `addr` answers a read and a write of OST0's
/// object 1, sent straight to it with the cluster `key`.
pub fn ask_replica(
    addr: &str,
    key: loom_rpc::ClusterKey,
) -> Vec<Result<loom_proto::msg::Reply, loom_proto::Errno>> {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let rpc = loom_rpc::RpcClient::new(addr, key, loom_rpc::ClientOptions::default());
    let obj = loom_proto::ObjRef { ost: 0, oid: 1 };
    let read = loom_proto::msg::OstRequest::ObjRead {
        obj,
        offset: 0,
        len: 4096,
    };
    let write = loom_proto::msg::OstRequest::ObjWrite {
        obj,
        offset: 0,
        pack: None,
        grant_used: 0,
        owner: None,
    };
    [read, write]
        .into_iter()
        .map(|req| {
            rt.block_on(ask_raw(
                &rpc,
                loom_proto::msg::TargetId::ost(0),
                loom_proto::msg::ReqCtx::default(),
                req.into(),
            ))
        })
        .collect()
}

/// What the server at `addr` answers a read (getattr of the root) and a
/// change (a create in the root) of MDT0, sent straight to it with the
/// cluster `key`.
pub fn ask_mdt_replica(
    addr: &str,
    key: loom_rpc::ClusterKey,
) -> Vec<Result<loom_proto::msg::Reply, loom_proto::Errno>> {
    use loom_proto::msg::MdtRequest;
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let rpc = loom_rpc::RpcClient::new(addr, key, loom_rpc::ClientOptions::default());
    let read = MdtRequest::GetAttr {
        fid: loom_proto::Fid::ROOT,
    };
    let change = MdtRequest::Create {
        parent: loom_proto::Fid::ROOT,
        name: "made-by-a-fenced-primary".into(),
        kind: loom_proto::msg::FileKind::File,
        perm: 0o644,
        rdev: 0,
        stripe: None,
    };
    [read, change]
        .into_iter()
        .map(|req| {
            rt.block_on(ask_raw(
                &rpc,
                loom_proto::msg::TargetId::mdt(0),
                loom_proto::msg::ReqCtx::default(),
                req.into(),
            ))
        })
        .collect()
}
