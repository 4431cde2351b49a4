//! Issue #29, point 6 (capabilities): a client holding only the client key
//! reads and writes an OST object only with a capability its MDT signed
//! for that object's file, for reading or writing, unexpired; the MDT
//! gives one only to a caller who may open the file so. A server's
//! connection (the cluster key) needs none.

mod common;
use bytes::Bytes;
use common::*;
use loom_client::ClientOptions;
use loom_proto::capa::Capa;
use loom_proto::msg::{FileKind, MdtRequest, OstRequest, Reply, ReqCtx, TargetId};
use loom_proto::{Errno, Fid};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ost_io_without_a_valid_capability_is_refused() {
    let cluster = start_cluster("capa").await;
    let opts = ClientOptions {
        call_timeout: Duration::from_secs(20),
        ..ClientOptions::default()
    };
    let node = connect_with(&cluster.with_key(cluster.key.client_key()), "capa", opts).await;
    let root = user_in(0, 0, &[]);
    let alice = user_in(1000, 1000, &[]);
    let (secret, layout) = node
        .create(&root, Fid::ROOT, "secret", FileKind::File, 0o600, 0, None)
        .await
        .expect("create");
    let f = node.open_as(&root, secret.fid, layout.clone().expect("a layout"), 0);
    f.write(0, b"root's data")
        .await
        .expect("write through the library");
    f.flush().await.expect("flush");
    let (public, public_layout) = node
        .create(&root, Fid::ROOT, "public", FileKind::File, 0o644, 0, None)
        .await
        .expect("create");
    let obj = layout.expect("a layout").objects()[0];
    let read = OstRequest::ObjRead {
        obj,
        offset: 0,
        len: 64,
    };
    let ost = TargetId::ost(obj.ost);
    let send = |req: OstRequest, capa: Option<Capa>| {
        let router = node.router();
        async move {
            router
                .call_capa(ost, ReqCtx::default(), req, Bytes::new(), capa)
                .await
                .map(|(_, bulk)| bulk)
        }
    };
    let get = |c: &loom_client::Caller, fid: Fid, write: bool| {
        let node = node.clone();
        let c = c.clone();
        async move {
            match node
                .router()
                .call(
                    TargetId::mdt(0),
                    node_ctx(&c),
                    MdtRequest::GetCapa { fid, write },
                    Bytes::new(),
                )
                .await
            {
                Ok((Reply::Capa(capa), _)) => Ok(capa),
                Ok((other, _)) => panic!("GetCapa answered {other:?}"),
                Err(e) => Err(e),
            }
        }
    };

    // No capability, another file's, a forged one: refused.
    assert_eq!(send(read.clone(), None).await.err(), Some(Errno::EACCES));
    let others = get(&alice, public.fid, false)
        .await
        .expect("alice may read public");
    assert_eq!(
        send(read.clone(), Some(others.clone())).await.err(),
        Some(Errno::EACCES),
        "a capability of another file"
    );
    let forged = Capa {
        fid: secret.fid,
        objs: vec![obj],
        ..others
    };
    assert_eq!(
        send(read.clone(), Some(forged)).await.err(),
        Some(Errno::EACCES),
        "a capability rewritten by the client"
    );
    // The MDT signs one only for who may open the file so.
    assert_eq!(
        get(&alice, secret.fid, false).await.err(),
        Some(Errno::EACCES)
    );
    let reading = get(&root, secret.fid, false).await.expect("root may read");
    let bytes = send(read.clone(), Some(reading.clone()))
        .await
        .expect("read with it");
    assert_eq!(&bytes[..11], b"root's data");
    let write = OstRequest::ObjWrite {
        obj,
        offset: 0,
        pack: None,
        grant_used: 0,
        owner: None,
    };
    assert_eq!(
        node.router()
            .call_capa(
                ost,
                ReqCtx::default(),
                write.clone(),
                Bytes::from_static(b"x"),
                Some(reading)
            )
            .await
            .err(),
        Some(Errno::EACCES),
        "a reading capability writing"
    );
    let writing = get(&root, secret.fid, true).await.expect("root may write");
    node.router()
        .call_capa(
            ost,
            ReqCtx::default(),
            write,
            Bytes::from_static(b"R"),
            Some(writing),
        )
        .await
        .expect("a writing capability writes");
    // What users do goes on with the capabilities the library holds.
    let (_, h) = node
        .open_checked(&alice, public.fid, loom_proto::msg::access::READ)
        .await
        .expect("alice opens public");
    assert_eq!(h.read(0, 8).await.expect("read"), Vec::<u8>::new());
    drop(public_layout);

    // A server's connection needs no capability.
    let server = connect(&cluster, "capa").await;
    let (_, bulk) = server
        .router()
        .call(ost, ReqCtx::default(), read, Bytes::new())
        .await
        .expect("the cluster key reads without one");
    assert_eq!(&bulk[..11], b"Root's data");
}

fn node_ctx(c: &loom_client::Caller) -> ReqCtx {
    ReqCtx {
        uid: c.uid,
        gid: c.gid,
        groups: c.groups.clone(),
        ..ReqCtx::default()
    }
}

/// POSIX checks permissions at open only: a file opened for writing under
/// a lease (no round trip, so no capability yet) stays writable through
/// that handle after another client's chmod takes the permission away.
/// The chmod recalls the lease, and the client asks for the capability
/// before it answers, while the MDT still grants what the open was
/// allowed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leased_open_keeps_its_permission_across_a_chmod_elsewhere() {
    let cluster = start_cluster("capa2").await;
    let admin = connect(&cluster, "capa2").await;
    let node = connect_leasing(&cluster.with_key(cluster.key.client_key()), "capa2").await;
    let root = user_in(0, 0, &[]);
    let alice = user_in(1000, 1000, &[]);
    let (a, _) = admin
        .create(&root, Fid::ROOT, "hers", FileKind::File, 0o644, 0, None)
        .await
        .expect("create");
    admin
        .setattr(
            &root,
            a.fid,
            loom_proto::msg::SetAttr {
                uid: Some(1000),
                gid: Some(1000),
                ..Default::default()
            },
        )
        .await
        .expect("chown to alice");
    // Looked up by the leasing client: attributes and layout leased.
    node.lookup(&alice, Fid::ROOT, "hers")
        .await
        .expect("lookup");
    let (_, h, _) = node
        .open_leased(&alice, a.fid, true)
        .expect("opened under the lease, no MDT asked");
    admin
        .setattr(
            &root,
            a.fid,
            loom_proto::msg::SetAttr {
                perm: Some(0o000),
                ..Default::default()
            },
        )
        .await
        .expect("chmod 000 elsewhere");
    h.write(0, b"written after the chmod")
        .await
        .expect("the open's permission holds");
    h.flush().await.expect("flush");
    let (_, r) = admin
        .open_checked(&root, a.fid, loom_proto::msg::access::READ)
        .await
        .expect("root opens");
    assert_eq!(
        r.read(0, 64).await.expect("read"),
        b"written after the chmod".to_vec()
    );
    // A new open as alice is refused now, by the MDT.
    assert_eq!(
        node.open_checked(&alice, a.fid, loom_proto::msg::access::WRITE)
            .await
            .map(|_| ()),
        Err(Errno::EACCES)
    );
}
