//! The questions a write-back mount asks before it keeps new files
//! (`QuotaRoom` for inodes, `DomRoom` for Data-on-MDT bytes) answer a
//! user about their own ids only: another user's or group's is EPERM,
//! as `loom quota` is, more than a new inode's three ids is EINVAL, and
//! root may ask about anyone. Real servers from `loom up`; the requests
//! go over the wire as a mount's would, with the client key.
mod common;
use common::*;
use loom_proto::msg::{MdtRequest, MgsRequest, Reply, ReqCtx, Request, TargetId};
use loom_proto::quota::QuotaId;
use loom_proto::Errno;
use loom_rpc::{ClientOptions, RpcClient};

/// Send `req` to `target` through `rpc` as `uid` (in group `uid`); the
/// reply or the errno.
async fn ask(rpc: &RpcClient, target: TargetId, uid: u32, req: Request) -> Result<Reply, Errno> {
    let ctx = ReqCtx {
        uid,
        gid: uid,
        ..ReqCtx::default()
    };
    ask_raw(rpc, target, ctx, req).await
}

#[test]
fn room_questions_show_only_the_callers_own_ids() {
    let c = Cluster::up(1, 1, &[]);
    let key = key(&c, "client.key");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    rt.block_on(async {
        let mgs = RpcClient::new(c.mgs(), key.clone(), ClientOptions::default());
        let cfg = match ask(&mgs, TargetId::MGS, 0, MgsRequest::GetConfig.into()).await {
            Ok(Reply::Config(cfg)) => cfg,
            other => panic!("GetConfig: {other:?}"),
        };
        let mdt0 = TargetId::mdt(0);
        let addr = cfg.target(mdt0).expect("registered").addr.clone();
        let rpc = RpcClient::new(addr, key.clone(), ClientOptions::default());
        let nobody = 65534;
        let own = vec![
            QuotaId::user(nobody),
            QuotaId::group(nobody),
            QuotaId::project(0),
        ];
        let quota_room = |ids: Vec<QuotaId>| Request::from(MdtRequest::QuotaRoom { ids, want: 4 });
        let dom_room = |ids: Vec<QuotaId>| Request::from(MdtRequest::DomRoom { ids, want: 4096 });

        // Its own ids: answered, each with no limit set.
        match ask(&rpc, mdt0, nobody, quota_room(own.clone())).await {
            Ok(Reply::QuotaRoom { rooms }) => {
                assert_eq!(rooms, own.iter().map(|&i| (i, None)).collect::<Vec<_>>());
            }
            other => panic!("QuotaRoom of its own ids: {other:?}"),
        }
        match ask(&rpc, mdt0, nobody, dom_room(own.clone())).await {
            Ok(Reply::DomRoom { space, rooms }) => {
                assert!(space > 0, "an empty MDT has room");
                assert_eq!(rooms, own.iter().map(|&i| (i, None)).collect::<Vec<_>>());
            }
            other => panic!("DomRoom of its own ids: {other:?}"),
        }

        // Another user's or group's: refused, whichever question.
        for other in [QuotaId::user(1000), QuotaId::group(1000)] {
            for req in [quota_room(vec![other]), dom_room(vec![other])] {
                let name = req.name();
                assert_eq!(
                    ask(&rpc, mdt0, nobody, req).await.err(),
                    Some(Errno::EPERM),
                    "{name} of {other:?} as uid {nobody}"
                );
            }
        }

        // More ids than a new inode counts against.
        let four = vec![QuotaId::user(nobody); 4];
        for req in [quota_room(four.clone()), dom_room(four)] {
            let name = req.name();
            assert_eq!(
                ask(&rpc, mdt0, nobody, req).await.err(),
                Some(Errno::EINVAL),
                "{name} of 4 ids"
            );
        }

        // Root may ask about anyone.
        for req in [
            quota_room(vec![QuotaId::user(1000)]),
            dom_room(vec![QuotaId::group(1000)]),
        ] {
            let name = req.name();
            assert!(ask(&rpc, mdt0, 0, req).await.is_ok(), "{name} as root");
        }
    });
}
