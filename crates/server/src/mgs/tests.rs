use super::*;
use loom_proto::msg::ReplyResult;

fn mgs(dir: &Path) -> Arc<MgsService> {
    MgsService::open(dir, "lfs1").expect("open MGS")
}

/// The answer as a client gets it.
async fn call(s: &Arc<MgsService>, req: MgsRequest) -> ReplyResult {
    let r = s.handle(&ReqCtx::default(), req, Vec::new()).await;
    crate::error::answer(TargetId::MGS, r).0
}

fn target(id: TargetId, uuid: &str, addr: &str) -> TargetInfo {
    TargetInfo::single(id, uuid, addr)
}

async fn register(s: &Arc<MgsService>, fsname: &str, t: TargetInfo) -> ReplyResult {
    call(
        s,
        MgsRequest::Register {
            fsname: fsname.into(),
            target: t,
            replica: None,
        },
    )
    .await
}

async fn config(s: &Arc<MgsService>) -> ClusterConfig {
    match call(s, MgsRequest::GetConfig).await {
        Ok(Reply::Config(c)) => c,
        other => panic!("get_config: {other:?}"),
    }
}

#[tokio::test]
async fn reregistering_with_the_same_uuid_updates_the_address() {
    let d = tempfile::tempdir().expect("tempdir");
    let s = mgs(d.path());
    let g0 = config(&s).await.generation;
    let r = register(&s, "lfs1", target(TargetId::ost(0), "u1", "10.0.0.1:1")).await;
    assert_eq!(r, Ok(Reply::Ok));
    let r = register(&s, "lfs1", target(TargetId::ost(0), "u1", "10.0.0.2:1")).await;
    assert_eq!(r, Ok(Reply::Ok));
    let c = config(&s).await;
    assert_eq!(c.targets.len(), 1);
    assert_eq!(c.targets[0].addr, "10.0.0.2:1");
    assert_eq!(c.generation, g0 + 2);
    // Registering again with nothing new changes nothing.
    let r = register(&s, "lfs1", target(TargetId::ost(0), "u1", "10.0.0.2:1")).await;
    assert_eq!(r, Ok(Reply::Ok));
    assert_eq!(config(&s).await.generation, g0 + 2);
}

#[tokio::test]
async fn a_different_uuid_for_a_registered_index_is_refused() {
    let d = tempfile::tempdir().expect("tempdir");
    let s = mgs(d.path());
    register(&s, "lfs1", target(TargetId::mdt(2), "uuid-a", "h:1"))
        .await
        .expect("first");
    let e = register(&s, "lfs1", target(TargetId::mdt(2), "uuid-b", "h:2"))
        .await
        .expect_err("duplicate index");
    assert_eq!(e.errno, Errno::EEXIST);
    assert!(
        e.msg.contains("uuid-a") && e.msg.contains("uuid-b") && e.msg.contains('2'),
        "{}",
        e.msg
    );
    assert_eq!(config(&s).await.targets[0].addr, "h:1");
}

#[tokio::test]
async fn a_target_of_another_file_system_is_refused() {
    let d = tempfile::tempdir().expect("tempdir");
    let s = mgs(d.path());
    let e = register(&s, "other", target(TargetId::ost(1), "u", "h:1"))
        .await
        .expect_err("wrong fsname");
    assert_eq!(e.errno, Errno::EINVAL);
    assert!(
        e.msg.contains("other") && e.msg.contains("lfs1"),
        "{}",
        e.msg
    );
    assert!(config(&s).await.targets.is_empty());
}

#[tokio::test]
async fn config_lists_targets_sorted_and_survives_reopen() {
    let d = tempfile::tempdir().expect("tempdir");
    let s = mgs(d.path());
    for id in [
        TargetId::ost(1),
        TargetId::mdt(1),
        TargetId::ost(0),
        TargetId::mdt(0),
    ] {
        register(&s, "lfs1", target(id, &format!("u-{id}"), "h:1"))
            .await
            .expect("register");
    }
    let c = config(&s).await;
    assert_eq!(c.fsname, "lfs1");
    let ids: Vec<TargetId> = c.targets.iter().map(|t| t.id).collect();
    assert_eq!(
        ids,
        vec![
            TargetId::mdt(0),
            TargetId::mdt(1),
            TargetId::ost(0),
            TargetId::ost(1)
        ]
    );
    drop(s);
    let s = mgs(d.path());
    assert_eq!(config(&s).await, c);
}

#[tokio::test]
async fn allocated_sequences_persist_across_reopen_and_never_repeat() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut seen = Vec::new();
    for round in 0..3u32 {
        let s = mgs(d.path());
        for i in 0..4u32 {
            let mdt = (round + i) % 2;
            match call(&s, MgsRequest::AllocSeq { mdt }).await {
                Ok(Reply::Seq(r)) => {
                    assert_eq!(r.end, r.start + 1);
                    assert_eq!(r.mdt, mdt);
                    assert!(r.start >= 1);
                    seen.push((r.start, mdt));
                }
                other => panic!("alloc_seq: {other:?}"),
            }
        }
    }
    let mut starts: Vec<u64> = seen.iter().map(|x| x.0).collect();
    starts.sort_unstable();
    starts.dedup();
    assert_eq!(starts.len(), seen.len(), "a sequence was handed out twice");
    let c = config(&mgs(d.path())).await;
    for (seq, mdt) in seen {
        assert_eq!(
            c.mdt_of(loom_proto::Fid::new(seq, 1)),
            Some(mdt),
            "seq {seq}"
        );
    }
    assert_eq!(c.mdt_of(loom_proto::Fid::ROOT), Some(0));
}

#[tokio::test]
async fn sequences_stop_at_the_inode_limit() {
    let d = tempfile::tempdir().expect("tempdir");
    let s = mgs(d.path());
    s.state.lock().await.next_seq = MAX_INO_SEQ;
    let r = call(&s, MgsRequest::AllocSeq { mdt: 0 }).await;
    assert!(matches!(r, Ok(Reply::Seq(SeqRange { start, .. })) if start == MAX_INO_SEQ));
    let e = call(&s, MgsRequest::AllocSeq { mdt: 0 })
        .await
        .expect_err("exhausted");
    assert_eq!(e.errno, Errno::ENOSPC);
}

#[tokio::test]
async fn another_fsname_cannot_open_the_directory() {
    let d = tempfile::tempdir().expect("tempdir");
    drop(mgs(d.path()));
    let e = MgsService::open(d.path(), "nope").expect_err("wrong fsname");
    assert!(e.to_string().contains("lfs1"), "{e}");
}

#[tokio::test]
async fn statfs_names_the_mgs() {
    let d = tempfile::tempdir().expect("tempdir");
    let s = mgs(d.path());
    match call(&s, MgsRequest::StatFs).await {
        Ok(Reply::StatFs(st)) => assert_eq!(st.target, Some(TargetId::MGS)),
        other => panic!("statfs: {other:?}"),
    }
}

#[tokio::test]
async fn state_file_is_readable_toml() {
    let d = tempfile::tempdir().expect("tempdir");
    let s = mgs(d.path());
    register(&s, "lfs1", target(TargetId::ost(3), "u3", "h:9"))
        .await
        .expect("register");
    call(&s, MgsRequest::AllocSeq { mdt: 1 })
        .await
        .expect("seq");
    let text = std::fs::read_to_string(d.path().join(STATE_FILE)).expect("read state");
    println!("{text}");
    assert!(text.contains("fsname = \"lfs1\""), "{text}");
    assert!(text.contains("next_seq = 2"), "{text}");
}

#[tokio::test]
async fn site_parameters_are_roots_and_survive_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = mgs(dir.path());
    register(&s, "lfs1", target(TargetId::mdt(0), "u0", "a:1"))
        .await
        .expect("register");
    let set = |value: &str| MgsRequest::SetParam {
        name: "remote_dir_gid".into(),
        value: value.into(),
    };
    // ReqCtx::default() is uid 0; a user is refused.
    let user = ReqCtx {
        uid: 65534,
        ..ReqCtx::default()
    };
    let r = s.handle(&user, set("0"), Vec::new()).await;
    let r = crate::error::answer(TargetId::MGS, r).0;
    assert_eq!(r.map_err(|e| e.errno), Err(Errno::EPERM));
    let before = config(&s).await.generation;
    call(&s, set("2000")).await.expect("set");
    let c = config(&s).await;
    assert_eq!(c.params.remote_dir_gid, Some(2000));
    assert_eq!(c.generation, before + 1, "targets see a new configuration");
    let bad = call(&s, set("staff")).await.map_err(|e| e.errno);
    assert_eq!(bad, Err(Errno::EINVAL));
    drop(s);
    let again = mgs(dir.path());
    let c = config(&again).await;
    assert_eq!(
        c.params.remote_dir_gid,
        Some(2000),
        "kept in the state file"
    );
    assert_eq!(c.targets.len(), 1);
}

#[tokio::test]
async fn nodemaps_are_roots_and_survive_a_restart_beside_the_site_parameters() {
    use loom_proto::nodemap::{Net, Nodemap};
    let dir = tempfile::tempdir().expect("tempdir");
    let s = mgs(dir.path());
    register(&s, "lfs1", target(TargetId::mdt(0), "u0", "a:1"))
        .await
        .expect("register");
    call(
        &s,
        MgsRequest::SetParam {
            name: "remote_dir_gid".into(),
            value: "0".into(),
        },
    )
    .await
    .expect("a site parameter first: a table before the nodemaps");
    let mut lab = Nodemap::new(
        "lab",
        vec![
            Net::parse("10.1.0.0/16").expect("net"),
            Net::parse("fd00::/8").expect("net"),
        ],
    );
    lab.uids = vec![(1000, 2000), (1001, 2001)];
    lab.gids = vec![(100, 200)];
    lab.readonly = true;
    let set = |m: Option<Nodemap>| MgsRequest::SetNodemap {
        name: "lab".into(),
        nodemap: m,
    };
    let user = ReqCtx {
        uid: 65534,
        ..ReqCtx::default()
    };
    let r = s.handle(&user, set(Some(lab.clone())), Vec::new()).await;
    let r = crate::error::answer(TargetId::MGS, r).0;
    assert_eq!(r.map_err(|e| e.errno), Err(Errno::EPERM));
    let none = Nodemap::new("lab", vec![]);
    assert_eq!(
        call(&s, set(Some(none))).await.map_err(|e| e.errno),
        Err(Errno::EINVAL)
    );
    let misnamed = Nodemap::new("other", lab.nets.clone());
    assert_eq!(
        call(&s, set(Some(misnamed))).await.map_err(|e| e.errno),
        Err(Errno::EINVAL)
    );
    let before = config(&s).await.generation;
    call(&s, set(Some(lab.clone()))).await.expect("set");
    assert_eq!(config(&s).await.generation, before + 1);
    let admins = Nodemap {
        admin: true,
        ..Nodemap::new("admins", vec![Net::parse("10.1.0.5").expect("host")])
    };
    call(
        &s,
        MgsRequest::SetNodemap {
            name: "admins".into(),
            nodemap: Some(admins.clone()),
        },
    )
    .await
    .expect("a second");
    drop(s);
    let again = mgs(dir.path());
    let c = config(&again).await;
    assert_eq!(c.nodemaps, vec![lab, admins], "kept in the state file");
    assert_eq!(c.params.remote_dir_gid, Some(0));
    call(&again, set(None)).await.expect("remove");
    assert_eq!(
        call(&again, set(None)).await.map_err(|e| e.errno),
        Err(Errno::ENOENT),
        "removing one that is gone"
    );
    assert_eq!(config(&again).await.nodemaps.len(), 1);
}
