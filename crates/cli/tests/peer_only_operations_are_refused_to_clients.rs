//! Operations meant only for servers (cross-MDT steps, object precreation
//! and destruction, target registration, sequence allocation) are refused
//! on a connection that proved only the client key, and served on one that
//! proved the cluster key. A request for one service sent to a target of
//! another is refused too. Real servers from `loom up`; the requests go
//! over the wire as a client's and as a peer's would.
mod common;
use common::*;
use loom_proto::msg::{
    MdtRequest, MgsRequest, OstRequest, PeerRequest, Reply, ReqCtx, Request, TargetId,
};
use loom_proto::{Errno, Fid, ObjRef};
use loom_rpc::{ClientOptions, ClusterKey, RpcClient};

/// Send `req` to `target` at `addr` holding `key`; the reply or the errno.
async fn ask(addr: &str, key: &ClusterKey, target: TargetId, req: Request) -> Result<Reply, Errno> {
    let rpc = RpcClient::new(addr.to_string(), key.clone(), ClientOptions::default());
    ask_raw(&rpc, target, ReqCtx::default(), req).await
}

#[test]
fn peer_only_operations_are_refused_to_clients() {
    let c = Cluster::up(2, 1, &[]);
    // An empty directory on MDT0, made through the mount (which holds the
    // client key, as `loom up` mounts).
    let dir = c.path("victim");
    std::fs::create_dir(&dir).expect("mkdir");
    let (client, server) = (key(&c, "client.key"), key(&c, "cluster.key"));
    let mgs = c.mgs();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    rt.block_on(async {
        // Anyone may read the configuration.
        let cfg = match ask(&mgs, &client, TargetId::MGS, MgsRequest::GetConfig.into()).await {
            Ok(Reply::Config(cfg)) => cfg,
            other => panic!("GetConfig with the client key: {other:?}"),
        };
        let addr = |t: TargetId| cfg.target(t).expect("registered").addr.clone();
        let (mdt0, ost0) = (TargetId::mdt(0), TargetId::ost(0));

        // The directory's FID, as the MDT knows it.
        let vfid = match ask(
            &addr(mdt0),
            &client,
            mdt0,
            MdtRequest::Lookup {
                parent: Fid::ROOT,
                name: "victim".into(),
            }
            .into(),
        )
        .await
        {
            Ok(Reply::Entry { attr, .. }) => attr.fid,
            other => panic!("lookup: {other:?}"),
        };

        // Refused with the client key, whatever the service.
        let refused: Vec<(TargetId, Request)> = vec![
            (mdt0, PeerRequest::SealDir { fid: vfid }.into()),
            (
                mdt0,
                PeerRequest::DestroyDir {
                    fid: Fid::new(vfid.seq, 999_999),
                }
                .into(),
            ),
            (ost0, OstRequest::Precreate { count: 8 }.into()),
            (
                ost0,
                OstRequest::Destroy {
                    objs: vec![ObjRef { ost: 0, oid: 1 }],
                }
                .into(),
            ),
            (TargetId::MGS, MgsRequest::AllocSeq { mdt: 0 }.into()),
        ];
        for (t, req) in refused {
            let name = req.name();
            let r = ask(&addr(t), &client, t, req).await;
            assert_eq!(r, Err(Errno::EPERM), "{name} to {t} with the client key");
        }
        // The seal was refused, not done: the directory still takes entries.
        std::fs::write(dir.join("still-open"), b"x").expect("create in the directory");

        // The same kind of step with the cluster key is served (sealing a
        // directory that is no longer empty answers ENOTEMPTY: it was looked
        // at, not refused).
        let r = ask(
            &addr(mdt0),
            &server,
            mdt0,
            PeerRequest::SealDir { fid: vfid }.into(),
        )
        .await;
        assert_eq!(r, Err(Errno::ENOTEMPTY), "SealDir with the cluster key");
        match ask(
            &addr(ost0),
            &server,
            ost0,
            OstRequest::Precreate { count: 1 }.into(),
        )
        .await
        {
            Ok(Reply::Precreated { count: 1, .. }) => {}
            other => panic!("Precreate with the cluster key: {other:?}"),
        }

        // A request for one service sent to a target of another.
        let r = ask(&addr(mdt0), &client, mdt0, OstRequest::StatFs.into()).await;
        assert_eq!(r, Err(Errno::EPROTO), "an OST request to an MDT");
        let r = ask(&addr(ost0), &server, ost0, MdtRequest::StatFs.into()).await;
        assert_eq!(r, Err(Errno::EPROTO), "an MDT request to an OST");
    });
    // Clients still do everything through the mount, remote directories
    // included (their cross-MDT steps go between the MDTs, with the
    // cluster key).
    loom_ok(&["mkdir", "-i", "1", c.path("remote").to_str().expect("utf8")]);
    std::fs::write(c.path("remote/f"), b"data").expect("write in a remote dir");
    assert_eq!(std::fs::read(c.path("remote/f")).expect("read"), b"data");
    std::fs::remove_dir_all(c.path("remote")).expect("rm -r a remote dir");
}
