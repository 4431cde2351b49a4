//! The MDT's namespace semantics and crash safety, checked through the real
//! wire path: an in-process MGS, MDT0 and OSTs behind one RPC listener, and
//! an [`RpcClient`](loom_rpc::RpcClient) sending every request.
//!
//! Each test states one rule as its name. Errors are compared by errno, the
//! value the kernel would see.

mod common;

use common::{eventually, objects, Cluster, GID, UID};
use loom_proto::layout::DEFAULT_STRIPE_SIZE;
use loom_proto::msg::{
    rename_flags, xattr_flags, FileKind, MdtRequest, Reply, SetAttr, SetTime, Time,
};
use loom_proto::Name;
use loom_proto::{Errno, Fid, ObjRef, StripeSpec};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

const ROOT: Fid = Fid::ROOT;

fn spec(count: i32, size: u32, start_ost: i32) -> StripeSpec {
    StripeSpec {
        count,
        size,
        start_ost,
        pool: None,
    }
}

fn stripe_params(l: &loom_proto::Layout) -> (u32, Vec<ObjRef>) {
    let (size, objs) = l.raid0_params().expect("a RAID-0 layout");
    (size, objs.to_vec())
}

fn create_req(parent: Fid, name: &str, stripe: Option<StripeSpec>) -> MdtRequest {
    MdtRequest::Create {
        parent,
        name: name.into(),
        kind: FileKind::File,
        perm: 0o644,
        rdev: 0,
        stripe,
    }
}

fn mkdir_req(parent: Fid, name: &str) -> MdtRequest {
    MdtRequest::Mkdir {
        parent,
        name: name.into(),
        perm: 0o755,
    }
}

// ---------------------------------------------------------------------------
// Create, lookup, getattr
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn create_then_lookup_and_getattr_return_the_same_inode() {
    let c = Cluster::start().await;
    let root0 = c.getattr(ROOT).await;
    assert_eq!(root0.kind, FileKind::Dir);
    assert_eq!(root0.nlink, 2);

    let (a, layout) = c
        .entry(MdtRequest::Create {
            parent: ROOT,
            name: "f".into(),
            kind: FileKind::File,
            perm: 0o640,
            rdev: 0,
            stripe: None,
        })
        .await;
    assert_eq!(a.kind, FileKind::File);
    assert_eq!(a.perm, 0o640);
    assert_eq!(a.nlink, 1);
    assert_eq!(a.size, 0);
    assert_eq!((a.uid, a.gid), (UID, GID));
    assert_ne!(a.fid, ROOT);
    let layout = layout.expect("a regular file has a layout");
    assert_eq!(layout.objects().len(), 1, "default stripe count is 1");

    let l = c.lookup(ROOT, "f").await;
    assert_eq!(l, a);
    assert_eq!(c.getattr(a.fid).await, a);
    assert_eq!(c.layout(a.fid).await, layout);
    match c
        .call(MdtRequest::Lookup {
            parent: ROOT,
            name: "f".into(),
        })
        .await
    {
        Ok(Reply::Entry { layout: l, .. }) => assert_eq!(l, Some(layout)),
        other => panic!("lookup: {other:?}"),
    }

    // The parent's times moved; its link count did not (a file is no subdir).
    let root1 = c.getattr(ROOT).await;
    assert_eq!(root1.nlink, 2);
    assert!(root1.mtime >= root0.mtime);

    // A FIFO gets no layout and keeps its kind.
    let (fifo, fl) = c
        .entry(MdtRequest::Create {
            parent: ROOT,
            name: "p".into(),
            kind: FileKind::Fifo,
            perm: 0o600,
            rdev: 0,
            stripe: None,
        })
        .await;
    assert_eq!(fifo.kind, FileKind::Fifo);
    assert!(fl.is_none());
    assert_eq!(c.lookup(ROOT, "p").await.kind, FileKind::Fifo);
    assert_ne!(fifo.fid, a.fid);
}

#[tokio::test(flavor = "multi_thread")]
async fn create_refuses_directories_and_symlinks() {
    let c = Cluster::start().await;
    for kind in [FileKind::Dir, FileKind::Symlink] {
        let e = c
            .errno(MdtRequest::Create {
                parent: ROOT,
                name: "x".into(),
                kind,
                perm: 0o755,
                rdev: 0,
                stripe: None,
            })
            .await;
        assert_eq!(e, Errno::EINVAL, "create of a {kind:?}");
    }
    assert_eq!(c.lookup_errno(ROOT, "x").await, Errno::ENOENT);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_duplicate_name_is_eexist_for_every_kind_of_new_name() {
    let c = Cluster::start().await;
    let f = c.create(ROOT, "f").await;
    c.mkdir(ROOT, "d").await;
    for name in ["f", "d"] {
        assert_eq!(
            c.errno(create_req(ROOT, name, None)).await,
            Errno::EEXIST,
            "create {name}"
        );
        assert_eq!(
            c.errno(mkdir_req(ROOT, name)).await,
            Errno::EEXIST,
            "mkdir {name}"
        );
        assert_eq!(
            c.errno(MdtRequest::Symlink {
                parent: ROOT,
                name: name.into(),
                target: "t".into()
            })
            .await,
            Errno::EEXIST,
            "symlink {name}"
        );
        assert_eq!(
            c.errno(MdtRequest::Link {
                fid: f.fid,
                parent: ROOT,
                name: name.into()
            })
            .await,
            Errno::EEXIST,
            "link {name}"
        );
    }
    // The failed attempts changed nothing.
    assert_eq!(c.lookup(ROOT, "f").await, c.getattr(f.fid).await);
    assert_eq!(c.getattr(f.fid).await.nlink, 1);
    assert_eq!(c.getattr(ROOT).await.nlink, 3);
    assert_eq!(c.readdir_all(ROOT).await.len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_names_and_inodes_are_enoent() {
    let c = Cluster::start().await;
    assert_eq!(c.lookup_errno(ROOT, "nope").await, Errno::ENOENT);
    let ghost = Fid::new(0, 999_999);
    assert_eq!(
        c.errno(MdtRequest::GetAttr { fid: ghost }).await,
        Errno::ENOENT
    );
    assert_eq!(
        c.errno(create_req(ghost, "x", None)).await,
        Errno::ENOENT,
        "create in a missing directory"
    );
    assert_eq!(c.errno(mkdir_req(ghost, "x")).await, Errno::ENOENT);
    for req in [
        MdtRequest::Unlink {
            parent: ROOT,
            name: "nope".into(),
            keep_orphan: false,
        },
        MdtRequest::Rmdir {
            parent: ROOT,
            name: "nope".into(),
        },
        MdtRequest::Rename {
            parent: ROOT,
            name: "nope".into(),
            new_parent: ROOT,
            new_name: "other".into(),
            flags: 0,
            keep_orphan: false,
        },
        MdtRequest::Link {
            fid: ghost,
            parent: ROOT,
            name: "l".into(),
        },
        MdtRequest::Readdir {
            fid: ghost,
            cookie: 0,
            max: 10,
        },
        MdtRequest::SetAttr {
            fid: ghost,
            set: SetAttr {
                perm: Some(0o600),
                ..SetAttr::default()
            },
        },
    ] {
        let what = format!("{req:?}");
        assert_eq!(c.errno(req).await, Errno::ENOENT, "{what}");
    }
    // A removed file is gone by name and by FID.
    let f = c.create(ROOT, "f").await;
    c.ok(MdtRequest::Unlink {
        parent: ROOT,
        name: "f".into(),
        keep_orphan: false,
    })
    .await;
    assert_eq!(c.lookup_errno(ROOT, "f").await, Errno::ENOENT);
    assert_eq!(
        c.errno(MdtRequest::GetAttr { fid: f.fid }).await,
        Errno::ENOENT
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_regular_file_as_parent_is_enotdir_for_changes_and_readdir() {
    let c = Cluster::start().await;
    let f = c.create(ROOT, "f").await.fid;
    let reqs = vec![
        create_req(f, "x", None),
        mkdir_req(f, "x"),
        MdtRequest::Symlink {
            parent: f,
            name: "x".into(),
            target: "t".into(),
        },
        MdtRequest::Link {
            fid: f,
            parent: f,
            name: "x".into(),
        },
        MdtRequest::Unlink {
            parent: f,
            name: "x".into(),
            keep_orphan: false,
        },
        MdtRequest::Rmdir {
            parent: f,
            name: "x".into(),
        },
        MdtRequest::Rename {
            parent: ROOT,
            name: "f".into(),
            new_parent: f,
            new_name: "x".into(),
            flags: 0,
            keep_orphan: false,
        },
        MdtRequest::Readdir {
            fid: f,
            cookie: 0,
            max: 10,
        },
    ];
    for req in reqs {
        let what = format!("{req:?}");
        assert_eq!(c.errno(req).await, Errno::ENOTDIR, "{what}");
    }
    assert_eq!(c.getattr(f).await.nlink, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn lookup_below_a_regular_file_is_enotdir() {
    // lookup("file/x") is ENOTDIR in POSIX, not ENOENT: the path walk must
    // tell "not a directory" from "no such entry".
    let c = Cluster::start().await;
    let f = c.create(ROOT, "f").await.fid;
    assert_eq!(c.lookup_errno(f, "x").await, Errno::ENOTDIR);
}

#[tokio::test(flavor = "multi_thread")]
async fn invalid_names_are_refused_by_every_operation_that_makes_a_name() {
    let c = Cluster::start().await;
    let f = c.create(ROOT, "f").await.fid;
    let long = "n".repeat(256);
    let max = "m".repeat(255);
    let cases: [(&str, Errno); 6] = [
        ("", Errno::EINVAL),
        (".", Errno::EINVAL),
        ("..", Errno::EINVAL),
        ("a/b", Errno::EINVAL),
        ("nul\0byte", Errno::EINVAL),
        (&long, Errno::ENAMETOOLONG),
    ];
    for (name, want) in cases {
        let reqs = vec![
            create_req(ROOT, name, None),
            mkdir_req(ROOT, name),
            MdtRequest::Symlink {
                parent: ROOT,
                name: name.into(),
                target: "t".into(),
            },
            MdtRequest::Link {
                fid: f,
                parent: ROOT,
                name: name.into(),
            },
            MdtRequest::Rename {
                parent: ROOT,
                name: "f".into(),
                new_parent: ROOT,
                new_name: name.into(),
                flags: 0,
                keep_orphan: false,
            },
        ];
        for req in reqs {
            let what = format!("{req:?}");
            assert_eq!(c.errno(req).await, want, "{what}");
        }
    }
    // Exactly NAME_MAX bytes is fine.
    let a = c.create(ROOT, &max).await;
    assert_eq!(c.lookup(ROOT, &max).await.fid, a.fid);
    // Nothing but "f" and the 255-byte name came into being.
    let names: BTreeSet<String> = c
        .readdir_all(ROOT)
        .await
        .into_iter()
        .map(|e| e.name.to_string())
        .collect();
    assert_eq!(names, BTreeSet::from(["f".to_string(), max.clone()]));
    assert_eq!(c.getattr(f).await.nlink, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn lookup_of_an_overlong_name_is_enametoolong() {
    let c = Cluster::start().await;
    assert_eq!(
        c.lookup_errno(ROOT, &"n".repeat(256)).await,
        Errno::ENAMETOOLONG
    );
}

// ---------------------------------------------------------------------------
// Directories and link counts
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn a_directory_has_two_links_plus_one_per_subdirectory() {
    let c = Cluster::start().await;
    let d = c.mkdir(ROOT, "d").await;
    assert_eq!(d.kind, FileKind::Dir);
    assert_eq!(d.nlink, 2);
    assert_eq!(d.perm, 0o755);
    assert_eq!(c.getattr(ROOT).await.nlink, 3);

    for i in 0..3 {
        let s = c.mkdir(d.fid, &format!("s{i}")).await;
        assert_eq!(s.nlink, 2);
    }
    // Files and symlinks add no links to their directory.
    c.create(d.fid, "file").await;
    c.ok(MdtRequest::Rmdir {
        parent: d.fid,
        name: "s0".into(),
    })
    .await;
    assert_eq!(c.getattr(d.fid).await.nlink, 2 + 2);
    assert_eq!(c.getattr(ROOT).await.nlink, 3);

    c.ok(MdtRequest::Unlink {
        parent: d.fid,
        name: "file".into(),
        keep_orphan: false,
    })
    .await;
    for s in ["s1", "s2"] {
        c.ok(MdtRequest::Rmdir {
            parent: d.fid,
            name: s.into(),
        })
        .await;
    }
    assert_eq!(c.getattr(d.fid).await.nlink, 2);
    c.ok(MdtRequest::Rmdir {
        parent: ROOT,
        name: "d".into(),
    })
    .await;
    assert_eq!(c.getattr(ROOT).await.nlink, 2);
    assert_eq!(
        c.errno(MdtRequest::GetAttr { fid: d.fid }).await,
        Errno::ENOENT
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn rmdir_of_a_non_empty_directory_is_enotempty_and_keeps_it() {
    let c = Cluster::start().await;
    let d = c.mkdir(ROOT, "d").await.fid;
    c.create(d, "f").await;
    let rm = || MdtRequest::Rmdir {
        parent: ROOT,
        name: "d".into(),
    };
    assert_eq!(c.errno(rm()).await, Errno::ENOTEMPTY);
    assert_eq!(c.lookup(ROOT, "d").await.fid, d);
    assert_eq!(c.getattr(ROOT).await.nlink, 3);

    // A subdirectory alone also makes it non-empty.
    c.ok(MdtRequest::Unlink {
        parent: d,
        name: "f".into(),
        keep_orphan: false,
    })
    .await;
    c.mkdir(d, "s").await;
    assert_eq!(c.errno(rm()).await, Errno::ENOTEMPTY);
    c.ok(MdtRequest::Rmdir {
        parent: d,
        name: "s".into(),
    })
    .await;
    c.ok(rm()).await;
    assert_eq!(c.lookup_errno(ROOT, "d").await, Errno::ENOENT);
}

#[tokio::test(flavor = "multi_thread")]
async fn unlink_of_a_directory_is_eisdir_and_rmdir_of_a_file_is_enotdir() {
    let c = Cluster::start().await;
    let d = c.mkdir(ROOT, "d").await.fid;
    let f = c.create(ROOT, "f").await.fid;
    assert_eq!(
        c.errno(MdtRequest::Unlink {
            parent: ROOT,
            name: "d".into(),
            keep_orphan: false,
        })
        .await,
        Errno::EISDIR
    );
    assert_eq!(
        c.errno(MdtRequest::Rmdir {
            parent: ROOT,
            name: "f".into()
        })
        .await,
        Errno::ENOTDIR
    );
    assert_eq!(c.lookup(ROOT, "d").await.fid, d);
    assert_eq!(c.lookup(ROOT, "f").await.fid, f);
    assert_eq!(c.getattr(ROOT).await.nlink, 3);
    // rmdir of "." and ".." are refused.
    assert_eq!(
        c.errno(MdtRequest::Rmdir {
            parent: d,
            name: ".".into()
        })
        .await,
        Errno::EINVAL
    );
    assert_eq!(
        c.errno(MdtRequest::Rmdir {
            parent: d,
            name: "..".into()
        })
        .await,
        Errno::ENOTEMPTY
    );
}

// ---------------------------------------------------------------------------
// Hard links
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn hard_links_count_names_and_the_inode_lives_until_the_last_goes() {
    let c = Cluster::start().await;
    let d = c.mkdir(ROOT, "d").await.fid;
    let (f, layout) = c.create_striped(ROOT, "a", None).await;
    let (l, ll) = c
        .entry(MdtRequest::Link {
            fid: f.fid,
            parent: d,
            name: "b".into(),
        })
        .await;
    assert_eq!(l.fid, f.fid);
    assert_eq!(l.nlink, 2);
    assert_eq!(ll, layout, "a link reports the file's layout");
    c.entry(MdtRequest::Link {
        fid: f.fid,
        parent: ROOT,
        name: "c".into(),
    })
    .await;
    assert_eq!(c.getattr(f.fid).await.nlink, 3);
    // Links to files add no directory links.
    assert_eq!(c.getattr(d).await.nlink, 2);
    for (p, n) in [(ROOT, "a"), (d, "b"), (ROOT, "c")] {
        assert_eq!(c.lookup(p, n).await.fid, f.fid);
    }

    c.ok(MdtRequest::Unlink {
        parent: ROOT,
        name: "a".into(),
        keep_orphan: false,
    })
    .await;
    let a = c.getattr(f.fid).await;
    assert_eq!(a.nlink, 2);
    assert_eq!(c.lookup_errno(ROOT, "a").await, Errno::ENOENT);
    assert_eq!(c.lookup(d, "b").await.nlink, 2);
    assert_eq!(c.layout(f.fid).await, layout.clone().expect("layout"));

    c.ok(MdtRequest::Unlink {
        parent: d,
        name: "b".into(),
        keep_orphan: false,
    })
    .await;
    assert_eq!(c.getattr(f.fid).await.nlink, 1);
    c.ok(MdtRequest::Unlink {
        parent: ROOT,
        name: "c".into(),
        keep_orphan: false,
    })
    .await;
    assert_eq!(
        c.errno(MdtRequest::GetAttr { fid: f.fid }).await,
        Errno::ENOENT
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hard_link_to_a_directory_is_eperm() {
    let c = Cluster::start().await;
    let d = c.mkdir(ROOT, "d").await.fid;
    assert_eq!(
        c.errno(MdtRequest::Link {
            fid: d,
            parent: ROOT,
            name: "d2".into()
        })
        .await,
        Errno::EPERM
    );
    assert_eq!(c.getattr(d).await.nlink, 2);
    assert_eq!(c.getattr(ROOT).await.nlink, 3);
    assert_eq!(c.lookup_errno(ROOT, "d2").await, Errno::ENOENT);
}

#[tokio::test(flavor = "multi_thread")]
async fn unlinking_one_of_two_hard_links_keeps_the_objects() {
    let c = Cluster::start().await;
    let (f, layout) = c.create_striped(ROOT, "a", None).await;
    let objs = objects(&layout);
    for o in &objs {
        c.write_object(*o, b"data").await;
    }
    c.entry(MdtRequest::Link {
        fid: f.fid,
        parent: ROOT,
        name: "b".into(),
    })
    .await;
    c.ok(MdtRequest::Unlink {
        parent: ROOT,
        name: "a".into(),
        keep_orphan: false,
    })
    .await;
    // A destroy is recorded in the unlink's own commit and its record
    // removed only once the objects are gone: no record now and the
    // objects still there means none was ever started.
    assert_eq!(c.mdt().pending_destroys().expect("destroy records"), vec![]);
    for o in &objs {
        assert!(c.object_path(*o).exists(), "object {o:?} was destroyed");
    }
}

// ---------------------------------------------------------------------------
// Rename
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn rename_moves_a_name_within_and_across_directories() {
    let c = Cluster::start().await;
    let d = c.mkdir(ROOT, "d").await.fid;
    let f = c.create(ROOT, "a").await.fid;
    c.rename(ROOT, "a", ROOT, "b", 0).await.expect("rename a b");
    assert_eq!(c.lookup_errno(ROOT, "a").await, Errno::ENOENT);
    assert_eq!(c.lookup(ROOT, "b").await.fid, f);

    c.rename(ROOT, "b", d, "c", 0).await.expect("rename b d/c");
    assert_eq!(c.lookup_errno(ROOT, "b").await, Errno::ENOENT);
    let a = c.lookup(d, "c").await;
    assert_eq!(a.fid, f);
    assert_eq!(a.nlink, 1);
    assert_eq!(c.getattr(ROOT).await.nlink, 3);
    assert_eq!(c.getattr(d).await.nlink, 2);

    // A directory moved across parents moves its ".." link.
    let s = c.mkdir(ROOT, "s").await.fid;
    c.create(s, "inside").await;
    assert_eq!(c.getattr(ROOT).await.nlink, 4);
    c.rename(ROOT, "s", d, "s2", 0)
        .await
        .expect("rename s d/s2");
    assert_eq!(c.getattr(ROOT).await.nlink, 3);
    assert_eq!(c.getattr(d).await.nlink, 3);
    assert_eq!(c.lookup(d, "s2").await.fid, s);
    assert_eq!(c.lookup(s, "inside").await.kind, FileKind::File);
    // The moved directory's parent pointer followed: moving d below s2
    // (its own child) is now refused.
    assert_eq!(
        c.rename(ROOT, "d", s, "loop", 0).await.map_err(|e| e.errno),
        Err(Errno::EINVAL)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn rename_over_an_existing_file_removes_the_old_target() {
    let c = Cluster::start().await;
    let a = c.create(ROOT, "a").await.fid;
    let b = c.create(ROOT, "b").await.fid;
    c.rename(ROOT, "a", ROOT, "b", 0).await.expect("rename");
    assert_eq!(c.lookup(ROOT, "b").await.fid, a);
    assert_eq!(c.lookup_errno(ROOT, "a").await, Errno::ENOENT);
    assert_eq!(
        c.errno(MdtRequest::GetAttr { fid: b }).await,
        Errno::ENOENT,
        "the replaced inode had nlink 1 and must be gone"
    );
    assert_eq!(c.readdir_all(ROOT).await.len(), 1);

    // A replaced target with another hard link loses one link only.
    let x = c.create(ROOT, "x").await.fid;
    c.entry(MdtRequest::Link {
        fid: x,
        parent: ROOT,
        name: "x2".into(),
    })
    .await;
    c.rename(ROOT, "b", ROOT, "x", 0).await.expect("rename");
    assert_eq!(c.lookup(ROOT, "x").await.fid, a);
    let x2 = c.lookup(ROOT, "x2").await;
    assert_eq!(x2.fid, x);
    assert_eq!(x2.nlink, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn rename_over_a_file_destroys_the_replaced_files_objects() {
    let c = Cluster::start().await;
    c.create(ROOT, "a").await;
    let (_, layout) = c.create_striped(ROOT, "b", Some(spec(2, 0, -1))).await;
    let objs = objects(&layout);
    assert_eq!(objs.len(), 2);
    for o in &objs {
        c.write_object(*o, b"old data").await;
        assert!(c.object_path(*o).exists());
    }
    c.rename(ROOT, "a", ROOT, "b", 0).await.expect("rename");
    let paths: Vec<_> = objs.iter().map(|o| c.object_path(*o)).collect();
    assert!(
        eventually(10, || paths.iter().all(|p| !p.exists())).await,
        "objects of the replaced file still exist after 10 s: {paths:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn rename_noreplace_onto_an_existing_name_is_eexist() {
    let c = Cluster::start().await;
    let a = c.create(ROOT, "a").await.fid;
    let b = c.create(ROOT, "b").await.fid;
    let r = c
        .rename(ROOT, "a", ROOT, "b", rename_flags::NOREPLACE)
        .await;
    assert_eq!(r.map_err(|e| e.errno), Err(Errno::EEXIST));
    assert_eq!(c.lookup(ROOT, "a").await.fid, a);
    assert_eq!(c.lookup(ROOT, "b").await.fid, b);
    // Onto a free name NOREPLACE is a plain rename.
    c.rename(ROOT, "a", ROOT, "c", rename_flags::NOREPLACE)
        .await
        .expect("rename noreplace to a free name");
    assert_eq!(c.lookup(ROOT, "c").await.fid, a);
}

#[tokio::test(flavor = "multi_thread")]
async fn rename_exchange_swaps_two_names() {
    let c = Cluster::start().await;
    let a = c.create(ROOT, "a").await.fid;
    let b = c.mkdir(ROOT, "b").await.fid;
    c.rename(ROOT, "a", ROOT, "b", rename_flags::EXCHANGE)
        .await
        .expect("exchange");
    let la = c.lookup(ROOT, "a").await;
    let lb = c.lookup(ROOT, "b").await;
    assert_eq!((la.fid, la.kind), (b, FileKind::Dir));
    assert_eq!((lb.fid, lb.kind), (a, FileKind::File));
    assert_eq!(c.getattr(ROOT).await.nlink, 3);
    // readdir reports the swapped kinds too.
    let kinds: BTreeMap<String, FileKind> = c
        .readdir_all(ROOT)
        .await
        .into_iter()
        .map(|e| (e.name.to_string(), e.attr.kind))
        .collect();
    assert_eq!(kinds["a"], FileKind::Dir);
    assert_eq!(kinds["b"], FileKind::File);
}

#[tokio::test(flavor = "multi_thread")]
async fn rename_exchange_of_directories_across_parents_keeps_link_counts() {
    let c = Cluster::start().await;
    let p1 = c.mkdir(ROOT, "p1").await.fid;
    let p2 = c.mkdir(ROOT, "p2").await.fid;
    let x = c.mkdir(p1, "x").await.fid;
    let y = c.create(p2, "y").await.fid;
    c.mkdir(x, "deep").await;
    assert_eq!(c.getattr(p1).await.nlink, 3);
    assert_eq!(c.getattr(p2).await.nlink, 2);

    // Directory x goes to p2, file y to p1.
    c.rename(p1, "x", p2, "y", rename_flags::EXCHANGE)
        .await
        .expect("exchange dir with file");
    assert_eq!(c.lookup(p1, "x").await.fid, y);
    assert_eq!(c.lookup(p2, "y").await.fid, x);
    assert_eq!(c.getattr(p1).await.nlink, 2);
    assert_eq!(c.getattr(p2).await.nlink, 3);
    assert_eq!(c.getattr(x).await.nlink, 3);

    // Two directories swapped across parents: counts stay as they are.
    let z = c.mkdir(p1, "z").await.fid;
    assert_eq!(c.getattr(p1).await.nlink, 3);
    c.rename(p1, "z", p2, "y", rename_flags::EXCHANGE)
        .await
        .expect("exchange two dirs");
    assert_eq!(c.lookup(p1, "z").await.fid, x);
    assert_eq!(c.lookup(p2, "y").await.fid, z);
    assert_eq!(c.getattr(p1).await.nlink, 3);
    assert_eq!(c.getattr(p2).await.nlink, 3);
    assert_eq!(c.getattr(ROOT).await.nlink, 4);
    // The parent pointers followed: p1 can now not move into x (now in p1)
    // but can move into z's old place... check via the loop rule.
    assert_eq!(
        c.rename(ROOT, "p1", x, "loop", 0)
            .await
            .map_err(|e| e.errno),
        Err(Errno::EINVAL),
        "x now lives in p1"
    );
    assert_eq!(
        c.rename(ROOT, "p2", z, "loop", 0)
            .await
            .map_err(|e| e.errno),
        Err(Errno::EINVAL),
        "z now lives in p2"
    );
    // Both can be removed once emptied, leaving consistent counts.
    c.ok(MdtRequest::Rmdir {
        parent: x,
        name: "deep".into(),
    })
    .await;
    c.ok(MdtRequest::Rmdir {
        parent: p1,
        name: "z".into(),
    })
    .await;
    c.ok(MdtRequest::Rmdir {
        parent: p2,
        name: "y".into(),
    })
    .await;
    assert_eq!(c.getattr(p1).await.nlink, 2);
    assert_eq!(c.getattr(p2).await.nlink, 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn rename_exchange_with_a_missing_target_is_enoent() {
    let c = Cluster::start().await;
    let a = c.create(ROOT, "a").await.fid;
    let r = c.rename(ROOT, "a", ROOT, "b", rename_flags::EXCHANGE).await;
    assert_eq!(r.map_err(|e| e.errno), Err(Errno::ENOENT));
    assert_eq!(c.lookup(ROOT, "a").await.fid, a);
    assert_eq!(c.lookup_errno(ROOT, "b").await, Errno::ENOENT);
}

#[tokio::test(flavor = "multi_thread")]
async fn rename_with_both_noreplace_and_exchange_is_einval() {
    let c = Cluster::start().await;
    c.create(ROOT, "a").await;
    c.create(ROOT, "b").await;
    let both = rename_flags::NOREPLACE | rename_flags::EXCHANGE;
    let r = c.rename(ROOT, "a", ROOT, "b", both).await;
    assert_eq!(r.map_err(|e| e.errno), Err(Errno::EINVAL));
    // Unknown flag bits too.
    let r = c.rename(ROOT, "a", ROOT, "c", 0x100).await;
    assert_eq!(r.map_err(|e| e.errno), Err(Errno::EINVAL));
    assert_eq!(c.readdir_all(ROOT).await.len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn renaming_a_directory_into_its_own_subtree_is_einval() {
    let c = Cluster::start().await;
    let a = c.mkdir(ROOT, "a").await.fid;
    let b = c.mkdir(a, "b").await.fid;
    let cc = c.mkdir(b, "c").await.fid;
    for (np, what) in [(a, "itself"), (b, "child"), (cc, "grandchild")] {
        let r = c.rename(ROOT, "a", np, "moved", 0).await;
        assert_eq!(r.map_err(|e| e.errno), Err(Errno::EINVAL), "into {what}");
    }
    // Exchanging a with its own descendant is refused both ways round.
    let r = c
        .rename(ROOT, "a", b, "c", rename_flags::EXCHANGE)
        .await
        .map_err(|e| e.errno);
    assert_eq!(r, Err(Errno::EINVAL), "exchange a with a/b/c");
    let r = c
        .rename(b, "c", ROOT, "a", rename_flags::EXCHANGE)
        .await
        .map_err(|e| e.errno);
    assert_eq!(r, Err(Errno::EINVAL), "exchange a/b/c with a");
    assert_eq!(c.lookup(ROOT, "a").await.fid, a);
    assert_eq!(c.lookup(a, "b").await.fid, b);
    assert_eq!(c.lookup(b, "c").await.fid, cc);
    assert_eq!(c.getattr(ROOT).await.nlink, 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn renaming_a_directory_over_a_non_empty_directory_is_enotempty() {
    let c = Cluster::start().await;
    let a = c.mkdir(ROOT, "a").await.fid;
    let b = c.mkdir(ROOT, "b").await.fid;
    c.create(b, "f").await;
    let r = c.rename(ROOT, "a", ROOT, "b", 0).await;
    assert_eq!(r.map_err(|e| e.errno), Err(Errno::ENOTEMPTY));
    assert_eq!(c.lookup(ROOT, "a").await.fid, a);
    assert_eq!(c.lookup(ROOT, "b").await.fid, b);

    // Over an empty directory it replaces it, and the parent loses a link.
    let e = c.mkdir(ROOT, "e").await.fid;
    assert_eq!(c.getattr(ROOT).await.nlink, 5);
    c.rename(ROOT, "a", ROOT, "e", 0)
        .await
        .expect("over empty dir");
    assert_eq!(c.lookup(ROOT, "e").await.fid, a);
    assert_eq!(c.errno(MdtRequest::GetAttr { fid: e }).await, Errno::ENOENT);
    assert_eq!(c.getattr(ROOT).await.nlink, 4);

    // Across parents over an empty directory: source parent loses one.
    let d = c.mkdir(b, "sub").await.fid;
    assert_eq!(c.getattr(b).await.nlink, 3);
    c.rename(ROOT, "e", b, "sub", 0).await.expect("across");
    assert_eq!(c.errno(MdtRequest::GetAttr { fid: d }).await, Errno::ENOENT);
    assert_eq!(c.getattr(b).await.nlink, 3);
    assert_eq!(c.getattr(ROOT).await.nlink, 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn renaming_a_directory_over_a_file_is_enotdir_and_a_file_over_a_directory_is_eisdir() {
    let c = Cluster::start().await;
    let d = c.mkdir(ROOT, "d").await.fid;
    let f = c.create(ROOT, "f").await.fid;
    let r = c.rename(ROOT, "d", ROOT, "f", 0).await;
    assert_eq!(r.map_err(|e| e.errno), Err(Errno::ENOTDIR));
    let r = c.rename(ROOT, "f", ROOT, "d", 0).await;
    assert_eq!(r.map_err(|e| e.errno), Err(Errno::EISDIR));
    assert_eq!(c.lookup(ROOT, "d").await.fid, d);
    assert_eq!(c.lookup(ROOT, "f").await.fid, f);
    assert_eq!(c.getattr(ROOT).await.nlink, 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn renaming_a_name_onto_itself_changes_nothing() {
    let c = Cluster::start().await;
    let f = c.create(ROOT, "f").await;
    let d = c.mkdir(ROOT, "d").await;
    for n in ["f", "d"] {
        for flags in [0, rename_flags::NOREPLACE, rename_flags::EXCHANGE] {
            c.rename(ROOT, n, ROOT, n, flags)
                .await
                .unwrap_or_else(|e| panic!("rename {n} onto itself, flags {flags}: {e}"));
        }
    }
    assert_eq!(c.getattr(f.fid).await.nlink, 1);
    assert_eq!(c.getattr(d.fid).await.nlink, 2);
    assert_eq!(c.getattr(ROOT).await.nlink, 3);
    assert_eq!(c.lookup(ROOT, "f").await.fid, f.fid);
    assert_eq!(c.lookup(ROOT, "d").await.fid, d.fid);
}

#[tokio::test(flavor = "multi_thread")]
async fn renaming_between_two_hard_links_of_one_inode_keeps_both_names() {
    let c = Cluster::start().await;
    let d = c.mkdir(ROOT, "d").await.fid;
    let f = c.create(ROOT, "a").await.fid;
    c.entry(MdtRequest::Link {
        fid: f,
        parent: ROOT,
        name: "b".into(),
    })
    .await;
    c.entry(MdtRequest::Link {
        fid: f,
        parent: d,
        name: "c".into(),
    })
    .await;
    c.rename(ROOT, "a", ROOT, "b", 0).await.expect("same dir");
    c.rename(ROOT, "a", d, "c", 0).await.expect("across dirs");
    for (p, n) in [(ROOT, "a"), (ROOT, "b"), (d, "c")] {
        assert_eq!(c.lookup(p, n).await.fid, f, "{n} still names the inode");
    }
    assert_eq!(c.getattr(f).await.nlink, 3);
}

// ---------------------------------------------------------------------------
// Readdir
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn readdir_pages_list_every_one_of_2500_names_exactly_once() {
    let c = Arc::new(Cluster::start().await);
    let d = c.mkdir(ROOT, "big").await.fid;
    const N: usize = 2500;
    let mut tasks = Vec::new();
    for w in 0..16 {
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            for i in (w..N).step_by(16) {
                let kind = if i % 10 == 0 {
                    FileKind::Fifo
                } else {
                    FileKind::File
                };
                c.entry(MdtRequest::Create {
                    parent: d,
                    name: format!("entry-{i:05}").into(),
                    kind,
                    perm: 0o644,
                    rdev: 0,
                    stripe: None,
                })
                .await;
            }
        }));
    }
    for t in tasks {
        t.await.expect("create task");
    }

    let mut seen = BTreeMap::new();
    let mut cookie = 0;
    let mut pages = 0;
    loop {
        let (page, eof) = c.readdir_page(d, cookie, 100).await;
        pages += 1;
        assert!(page.len() <= 100, "page of {} entries", page.len());
        for e in &page {
            assert!(
                seen.insert(e.name.clone(), e.attr.fid).is_none(),
                "{} listed twice",
                e.name
            );
            // readdirplus: the attributes are the inode's.
            assert_eq!(e.attr, c.getattr(e.attr.fid).await);
            assert!(e.cookie > 2, "cookies 0..=2 are reserved");
        }
        if eof {
            break;
        }
        assert_eq!(page.len(), 100, "a page before eof is full");
        cookie = page.last().expect("non-empty page").cookie;
        assert!(pages <= N / 100 + 2, "readdir does not reach eof");
    }
    assert_eq!(seen.len(), N);
    for i in 0..N {
        assert!(
            seen.contains_key(&Name::from(format!("entry-{i:05}"))),
            "entry-{i:05}"
        );
    }
    // A cookie at the end lists nothing more.
    let (rest, eof) = c.readdir_page(d, cookie, 100).await;
    assert!(eof);
    let _ = rest;
    // A request for more than the cap is served in capped pages.
    let (big, _) = c.readdir_page(d, 0, 1_000_000).await;
    assert!(!big.is_empty() && big.len() <= 1024);
}

#[tokio::test(flavor = "multi_thread")]
async fn readdir_of_an_empty_directory_is_empty_and_eof() {
    let c = Cluster::start().await;
    let d = c.mkdir(ROOT, "d").await.fid;
    let (e, eof) = c.readdir_page(d, 0, 100).await;
    assert!(e.is_empty());
    assert!(eof);
    // Entries of one directory never leak into a sibling's listing.
    c.create(ROOT, "f").await;
    let (e, eof) = c.readdir_page(d, 0, 100).await;
    assert!(e.is_empty() && eof);
}

// ---------------------------------------------------------------------------
// Symlinks
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn a_symlink_reads_back_its_target() {
    let c = Cluster::start().await;
    let target = "../some/where/else";
    let (s, layout) = c
        .entry(MdtRequest::Symlink {
            parent: ROOT,
            name: "ln".into(),
            target: target.into(),
        })
        .await;
    assert_eq!(s.kind, FileKind::Symlink);
    assert_eq!(s.size, target.len() as u64);
    assert_eq!(s.perm, 0o777);
    assert!(layout.is_none());
    assert_eq!(
        c.call(MdtRequest::Readlink { fid: s.fid }).await,
        Ok(Reply::Link(target.into()))
    );
    assert_eq!(c.lookup(ROOT, "ln").await, s);
    // readlink of something else is EINVAL.
    let f = c.create(ROOT, "f").await.fid;
    assert_eq!(
        c.errno(MdtRequest::Readlink { fid: f }).await,
        Errno::EINVAL
    );
    // An empty or over-long target is refused.
    for t in [String::new(), "x".repeat(4096)] {
        assert_eq!(
            c.errno(MdtRequest::Symlink {
                parent: ROOT,
                name: "bad".into(),
                target: t.into()
            })
            .await,
            Errno::ENAMETOOLONG
        );
    }
    // A symlink is unlinked like a file.
    c.ok(MdtRequest::Unlink {
        parent: ROOT,
        name: "ln".into(),
        keep_orphan: false,
    })
    .await;
    assert_eq!(
        c.errno(MdtRequest::Readlink { fid: s.fid }).await,
        Errno::ENOENT
    );
}

// ---------------------------------------------------------------------------
// Extended attributes
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn xattrs_follow_create_and_replace_flags() {
    let c = Cluster::start().await;
    let f = c.create(ROOT, "f").await.fid;
    let set = |name: &str, value: &[u8], flags: u32| MdtRequest::SetXattr {
        fid: f,
        name: name.into(),
        value: value.to_vec(),
        flags,
    };
    let get = |name: &str| MdtRequest::GetXattr {
        fid: f,
        name: name.into(),
    };
    assert_eq!(c.errno(get("user.a")).await, Errno::ENODATA);
    assert_eq!(
        c.call(MdtRequest::ListXattr { fid: f }).await,
        Ok(Reply::XattrNames(vec![]))
    );

    c.ok(set("user.a", b"one", 0)).await;
    assert_eq!(
        c.call(get("user.a")).await,
        Ok(Reply::Xattr(b"one".to_vec()))
    );
    assert_eq!(
        c.errno(set("user.a", b"two", xattr_flags::CREATE)).await,
        Errno::EEXIST
    );
    assert_eq!(
        c.call(get("user.a")).await,
        Ok(Reply::Xattr(b"one".to_vec()))
    );
    assert_eq!(
        c.errno(set("user.b", b"x", xattr_flags::REPLACE)).await,
        Errno::ENODATA
    );
    assert_eq!(c.errno(get("user.b")).await, Errno::ENODATA);
    c.ok(set("user.a", b"two", xattr_flags::REPLACE)).await;
    assert_eq!(
        c.call(get("user.a")).await,
        Ok(Reply::Xattr(b"two".to_vec()))
    );
    c.ok(set("user.b", b"", xattr_flags::CREATE)).await;
    assert_eq!(c.call(get("user.b")).await, Ok(Reply::Xattr(vec![])));
    c.ok(set("user.c", &[0u8, 255, 7], 0)).await;

    let names = match c.call(MdtRequest::ListXattr { fid: f }).await {
        Ok(Reply::XattrNames(n)) => n.into_iter().collect::<BTreeSet<_>>(),
        other => panic!("listxattr: {other:?}"),
    };
    let want: BTreeSet<Name> = ["user.a", "user.b", "user.c"]
        .iter()
        .map(|s| Name::from(*s))
        .collect();
    assert_eq!(names, want);

    c.ok(MdtRequest::RemoveXattr {
        fid: f,
        name: "user.a".into(),
    })
    .await;
    assert_eq!(c.errno(get("user.a")).await, Errno::ENODATA);
    assert_eq!(
        c.errno(MdtRequest::RemoveXattr {
            fid: f,
            name: "user.a".into()
        })
        .await,
        Errno::ENODATA
    );
    match c.call(MdtRequest::ListXattr { fid: f }).await {
        Ok(Reply::XattrNames(n)) => assert_eq!(n.len(), 2, "{n:?}"),
        other => panic!("listxattr: {other:?}"),
    }
    // Xattrs of one inode are not another's.
    let g = c.create(ROOT, "g").await.fid;
    assert_eq!(
        c.call(MdtRequest::ListXattr { fid: g }).await,
        Ok(Reply::XattrNames(vec![]))
    );
    // Directories carry xattrs too.
    c.ok(MdtRequest::SetXattr {
        fid: ROOT,
        name: "user.dir".into(),
        value: b"v".to_vec(),
        flags: 0,
    })
    .await;
    assert_eq!(
        c.call(MdtRequest::GetXattr {
            fid: ROOT,
            name: "user.dir".into()
        })
        .await,
        Ok(Reply::Xattr(b"v".to_vec()))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn xattrs_of_a_missing_inode_are_enoent() {
    let c = Cluster::start().await;
    let ghost = Fid::new(0, 777_777);
    assert_eq!(
        c.errno(MdtRequest::SetXattr {
            fid: ghost,
            name: "user.a".into(),
            value: vec![1],
            flags: 0
        })
        .await,
        Errno::ENOENT
    );
    assert_eq!(
        c.errno(MdtRequest::GetXattr {
            fid: ghost,
            name: "user.a".into()
        })
        .await,
        Errno::ENOENT
    );
    assert_eq!(
        c.errno(MdtRequest::ListXattr { fid: ghost }).await,
        Errno::ENOENT
    );
}

// ---------------------------------------------------------------------------
// Attributes and sizes
// ---------------------------------------------------------------------------

/// A setattr as root: these tests are about what it changes (who may is
/// in `mdt/perm.rs` and the permission tests).
async fn setattr(c: &Cluster, fid: Fid, set: SetAttr) -> loom_proto::msg::Attr {
    match c.call_root(MdtRequest::SetAttr { fid, set }).await {
        Ok(Reply::Attr(a)) => a,
        other => panic!("setattr {fid}: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn setattr_changes_mode_owner_size_and_times() {
    let c = Cluster::start().await;
    let f = c.create(ROOT, "f").await;

    let a = setattr(
        &c,
        f.fid,
        SetAttr {
            perm: Some(0o104_751),
            ..SetAttr::default()
        },
    )
    .await;
    assert_eq!(a.perm, 0o4751, "only the permission bits are kept");
    assert_eq!(a.kind, FileKind::File);
    assert!(a.ctime >= f.ctime);

    let a = setattr(
        &c,
        f.fid,
        SetAttr {
            uid: Some(42),
            gid: Some(43),
            ..SetAttr::default()
        },
    )
    .await;
    assert_eq!((a.uid, a.gid), (42, 43));
    assert_eq!(
        a.perm, 0o751,
        "a chown clears set-user-ID, even by root, as Linux does"
    );

    let a = setattr(
        &c,
        f.fid,
        SetAttr {
            size: Some(123_456),
            ..SetAttr::default()
        },
    )
    .await;
    assert_eq!(a.size, 123_456);
    let a = setattr(
        &c,
        f.fid,
        SetAttr {
            size: Some(10),
            ..SetAttr::default()
        },
    )
    .await;
    assert_eq!(a.size, 10, "truncate shrinks");

    let t = Time {
        sec: 1_000_000,
        nsec: 5,
    };
    let at = Time {
        sec: 2_000_000,
        nsec: 7,
    };
    let a = setattr(
        &c,
        f.fid,
        SetAttr {
            mtime: Some(SetTime::At(t)),
            atime: Some(SetTime::At(at)),
            ..SetAttr::default()
        },
    )
    .await;
    assert_eq!(a.mtime, t);
    assert_eq!(a.atime, at);
    // Everything reads back through getattr and lookup.
    let g = c.getattr(f.fid).await;
    assert_eq!(g, a);
    assert_eq!(c.lookup(ROOT, "f").await, a);
    assert_eq!((g.perm, g.uid, g.gid, g.size), (0o751, 42, 43, 10));

    // Truncate of a directory or symlink is refused.
    let d = c.mkdir(ROOT, "d").await.fid;
    let size = SetAttr {
        size: Some(0),
        ..SetAttr::default()
    };
    assert_eq!(
        c.errno(MdtRequest::SetAttr {
            fid: d,
            set: size.clone()
        })
        .await,
        Errno::EISDIR
    );
    let (s, _) = c
        .entry(MdtRequest::Symlink {
            parent: ROOT,
            name: "s".into(),
            target: "t".into(),
        })
        .await;
    assert_eq!(
        c.errno(MdtRequest::SetAttr {
            fid: s.fid,
            set: size
        })
        .await,
        Errno::EINVAL
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn update_size_only_ever_grows_the_size() {
    let c = Cluster::start().await;
    let f = c.create(ROOT, "f").await.fid;
    let later = |s: i64| Time {
        sec: Time::now().sec + s,
        nsec: 0,
    };
    let t1 = later(100);
    c.ok(MdtRequest::UpdateSize {
        fid: f,
        size: 5000,
        mtime: t1,
        durable: false,
    })
    .await;
    let a = c.getattr(f).await;
    assert_eq!(a.size, 5000);
    assert_eq!(a.mtime, t1);
    c.ok(MdtRequest::UpdateSize {
        fid: f,
        size: 10,
        mtime: later(50),
        durable: true,
    })
    .await;
    let a = c.getattr(f).await;
    assert_eq!(a.size, 5000, "a late small report");
    assert_eq!(a.mtime, t1, "a late, older report");
    c.ok(MdtRequest::UpdateSize {
        fid: f,
        size: 1 << 40,
        mtime: later(300),
        durable: false,
    })
    .await;
    assert_eq!(c.getattr(f).await.size, 1 << 40);
    // Only regular files have a size to report.
    let d = c.mkdir(ROOT, "d").await.fid;
    assert_eq!(
        c.errno(MdtRequest::UpdateSize {
            fid: d,
            size: 1,
            mtime: t1,
            durable: false,
        })
        .await,
        Errno::EINVAL
    );
}

// ---------------------------------------------------------------------------
// Striping and layouts
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn a_directory_default_stripe_is_inherited_by_new_files_and_subdirectories() {
    let c = Cluster::start().await;
    let d = c.mkdir(ROOT, "d").await.fid;
    assert_eq!(
        c.call(MdtRequest::GetDefaultStripe { fid: d }).await,
        Ok(Reply::Stripe(None))
    );
    let s = spec(2, 128 << 10, -1);
    c.ok(MdtRequest::SetDefaultStripe {
        fid: d,
        spec: Some(s.clone()),
    })
    .await;
    assert_eq!(
        c.call(MdtRequest::GetDefaultStripe { fid: d }).await,
        Ok(Reply::Stripe(Some(s.clone())))
    );

    let (_, l) = c.create_striped(d, "f", None).await;
    let (size, objs) = stripe_params(&l.expect("layout"));
    assert_eq!(size, 128 << 10);
    assert_eq!(objs.len(), 2);
    assert_ne!(objs[0].ost, objs[1].ost);

    let sub = c.mkdir(d, "sub").await.fid;
    assert_eq!(
        c.call(MdtRequest::GetDefaultStripe { fid: sub }).await,
        Ok(Reply::Stripe(Some(s.clone())))
    );
    let (_, l) = c.create_striped(sub, "g", None).await;
    let (size, objs) = stripe_params(&l.expect("layout"));
    assert_eq!((size, objs.len()), (128 << 10, 2));

    // An explicit spec's set fields win, unset ones are inherited.
    let (_, l) = c.create_striped(d, "h", Some(spec(1, 0, -1))).await;
    let (size, objs) = stripe_params(&l.expect("layout"));
    assert_eq!((size, objs.len()), (128 << 10, 1));

    // Files elsewhere keep the file system default.
    let (_, l) = c.create_striped(ROOT, "plain", None).await;
    let (size, objs) = stripe_params(&l.expect("layout"));
    assert_eq!((size, objs.len()), (DEFAULT_STRIPE_SIZE, 1));

    // Removing the default makes the directory inherit from its ancestors.
    c.ok(MdtRequest::SetDefaultStripe { fid: d, spec: None })
        .await;
    assert_eq!(
        c.call(MdtRequest::GetDefaultStripe { fid: d }).await,
        Ok(Reply::Stripe(None))
    );
    // A bad default is refused; so is a default on a file.
    assert_eq!(
        c.errno(MdtRequest::SetDefaultStripe {
            fid: d,
            spec: Some(spec(1, 1000, -1))
        })
        .await,
        Errno::EINVAL
    );
    let f = c.lookup(d, "f").await.fid;
    assert_eq!(
        c.errno(MdtRequest::SetDefaultStripe {
            fid: f,
            spec: Some(s)
        })
        .await,
        Errno::ENOTDIR
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_directory_default_start_ost_is_inherited_by_new_files() {
    let c = Cluster::start().await;
    let d = c.mkdir(ROOT, "d").await.fid;
    c.ok(MdtRequest::SetDefaultStripe {
        fid: d,
        spec: Some(spec(1, 0, 2)),
    })
    .await;
    for i in 0..3 {
        let (_, l) = c.create_striped(d, &format!("f{i}"), None).await;
        let objs = objects(&l);
        assert_eq!(objs.len(), 1);
        assert_eq!(objs[0].ost, 2, "the directory says: start on OST 2");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_directory_default_is_inherited_through_grandparents() {
    let c = Cluster::start().await;
    let a = c.mkdir(ROOT, "a").await.fid;
    let b = c.mkdir(a, "b").await.fid;
    let s = spec(-1, 64 << 10, -1);
    c.ok(MdtRequest::SetDefaultStripe {
        fid: a,
        spec: Some(s.clone()),
    })
    .await;
    // b existed before the default was set: it inherits through the walk.
    assert_eq!(
        c.call(MdtRequest::GetDefaultStripe { fid: b }).await,
        Ok(Reply::Stripe(Some(s)))
    );
    let (_, l) = c.create_striped(b, "f", None).await;
    assert_eq!(objects(&l).len(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_explicit_stripe_spec_places_objects_on_the_named_osts() {
    let c = Cluster::start().await;
    let (f, l) = c.create_striped(ROOT, "f", Some(spec(2, 65536, 1))).await;
    let l = l.expect("layout");
    let (size, objs) = stripe_params(&l);
    assert_eq!(size, 65536);
    assert_eq!(objs.len(), 2);
    assert_eq!(objs[0].ost, 1);
    assert_eq!(objs[1].ost, 2);
    let distinct: HashSet<ObjRef> = objs.iter().copied().collect();
    assert_eq!(distinct.len(), 2, "distinct objects");
    assert_eq!(c.layout(f.fid).await, l);

    // Wrapping around: start on the last OST.
    let (_, l) = c.create_striped(ROOT, "w", Some(spec(2, 0, 2))).await;
    let osts: Vec<u32> = objects(&l).iter().map(|o| o.ost).collect();
    assert_eq!(osts, vec![2, 0]);

    // Two files on the same OST never share an object.
    let (_, l2) = c.create_striped(ROOT, "g", Some(spec(2, 65536, 1))).await;
    let all: HashSet<ObjRef> = objects(&l).into_iter().chain(objects(&l2)).collect();
    assert_eq!(all.len(), 4);
}

#[tokio::test(flavor = "multi_thread")]
async fn stripe_count_minus_one_uses_every_ost() {
    let c = Cluster::start().await;
    let (_, l) = c.create_striped(ROOT, "f", Some(spec(-1, 0, -1))).await;
    let osts: BTreeSet<u32> = objects(&l).iter().map(|o| o.ost).collect();
    assert_eq!(osts, BTreeSet::from([0, 1, 2]));
    assert_eq!(objects(&l).len(), 3);
    // Asking for more stripes than OSTs gives one per OST.
    let (_, l) = c.create_striped(ROOT, "g", Some(spec(7, 0, -1))).await;
    assert_eq!(objects(&l).len(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_stripe_specs_are_einval_and_create_nothing() {
    let c = Cluster::start().await;
    let bad = [
        spec(1, 0, 3),     // no OST 3
        spec(1, 0, 99),    // no OST 99
        spec(1, 1000, -1), // not a multiple of 64 KiB
        spec(1, 65536 + 1, 0),
        spec(-2, 0, -1),   // count below -1
        spec(1, 0, -5),    // start below -1
        spec(5000, 0, -1), // over the maximum count
    ];
    for (i, s) in bad.into_iter().enumerate() {
        let what = format!("{s:?}");
        assert_eq!(
            c.errno(create_req(ROOT, &format!("f{i}"), Some(s))).await,
            Errno::EINVAL,
            "{what}"
        );
    }
    assert!(c.readdir_all(ROOT).await.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn files_without_striping_are_spread_over_the_osts() {
    // With no explicit start OST the MDT picks one round robin, so that
    // default files do not all land on OST 0.
    let c = Cluster::start().await;
    let mut used = BTreeSet::new();
    for i in 0..9 {
        let (_, l) = c.create_striped(ROOT, &format!("f{i}"), None).await;
        used.extend(objects(&l).iter().map(|o| o.ost));
    }
    assert_eq!(used, BTreeSet::from([0, 1, 2]), "OSTs used: {used:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn files_can_be_created_when_ost_zero_does_not_exist() {
    let c = Cluster::with_osts(&[1, 2]).await;
    let (_, l) = c.create_striped(ROOT, "f", None).await;
    let o = objects(&l);
    assert_eq!(o.len(), 1);
    assert!(o[0].ost == 1 || o[0].ost == 2);
}

// ---------------------------------------------------------------------------
// Objects and crash safety
// ---------------------------------------------------------------------------

async fn create_many(
    c: &Arc<Cluster>,
    dir: Fid,
    prefix: &str,
    n: usize,
) -> Vec<(Fid, Vec<ObjRef>)> {
    let mut tasks = Vec::new();
    for w in 0..16 {
        let c = c.clone();
        let prefix = prefix.to_string();
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::new();
            for i in (w..n).step_by(16) {
                let (a, l) = c
                    .create_striped(dir, &format!("{prefix}{i}"), Some(spec(-1, 0, -1)))
                    .await;
                out.push((a.fid, objects(&l)));
            }
            out
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("create task"));
    }
    all
}

#[tokio::test(flavor = "multi_thread")]
async fn objects_and_fids_are_never_handed_out_twice_even_across_a_restart() {
    let c = Arc::new(Cluster::start().await);
    let d = c.mkdir(ROOT, "d").await.fid;
    // Every file takes one object per OST: 5000 per OST passes the MDT's
    // precreate batch, so pools are refilled on the way.
    let mut made = create_many(&c, d, "a", 5000).await;
    c.restart_mdt().await;
    made.extend(create_many(&c, d, "b", 300).await);
    c.restart_all().await;
    made.extend(create_many(&c, d, "c", 300).await);

    let mut fids = HashSet::new();
    let mut objs = HashSet::new();
    for (fid, os) in &made {
        assert!(fids.insert(*fid), "FID {fid} handed out twice");
        assert_eq!(os.len(), 3);
        for o in os {
            assert!(o.oid != 0, "object id 0 is never valid");
            assert!(objs.insert(*o), "object {o:?} handed out twice");
        }
    }
    assert_eq!(objs.len(), 5600 * 3);
    assert_eq!(c.readdir_all(d).await.len(), 5600);
}

/// What the test expects of the tree: path -> (kind, fid, size, perm).
type Model = BTreeMap<String, (FileKind, Fid, u64, u32)>;

async fn walk(c: &Cluster, dir: Fid, prefix: &str, out: &mut Model) {
    for e in c.readdir_all(dir).await {
        let path = format!("{prefix}/{}", e.name);
        assert_eq!(c.lookup(dir, &e.name.to_string()).await, e.attr, "{path}");
        out.insert(
            path.clone(),
            (e.attr.kind, e.attr.fid, e.attr.size, e.attr.perm),
        );
        if e.attr.kind == FileKind::Dir {
            Box::pin(walk(c, e.attr.fid, &path, out)).await;
        }
    }
}

/// Check every directory's link count against the number of its subdirectories.
async fn check_dir_links(c: &Cluster, model: &Model) {
    let mut dirs: Vec<(String, Fid)> = vec![(String::new(), ROOT)];
    dirs.extend(
        model
            .iter()
            .filter(|(_, v)| v.0 == FileKind::Dir)
            .map(|(k, v)| (k.clone(), v.1)),
    );
    for (path, fid) in dirs {
        let subdirs = model
            .iter()
            .filter(|(k, v)| {
                v.0 == FileKind::Dir
                    && k.strip_prefix(&format!("{path}/"))
                        .is_some_and(|rest| !rest.contains('/'))
            })
            .count();
        assert_eq!(
            c.getattr(fid).await.nlink as usize,
            2 + subdirs,
            "link count of {path:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_acknowledged_change_survives_reopening_every_service() {
    let c = Cluster::start().await;
    let mut model = Model::new();
    let mut dirs = vec![(String::new(), ROOT)];
    for i in 0..10 {
        let (pp, pf) = dirs[i % dirs.len()].clone();
        let d = c.mkdir(pf, &format!("d{i}")).await;
        let path = format!("{pp}/d{i}");
        model.insert(path.clone(), (FileKind::Dir, d.fid, d.size, d.perm));
        dirs.push((path, d.fid));
    }
    for i in 0..200 {
        let (pp, pf) = dirs[i % dirs.len()].clone();
        let f = c.create(pf, &format!("f{i}")).await;
        let mut size = 0;
        if i % 3 == 0 {
            size = 1000 + i as u64;
            c.ok(MdtRequest::UpdateSize {
                fid: f.fid,
                size,
                mtime: Time::now(),
                // Reported at a close: flushed to the OS, not synced; it
                // must survive a restart of the services all the same.
                durable: i % 2 == 0,
            })
            .await;
        }
        model.insert(format!("{pp}/f{i}"), (FileKind::File, f.fid, size, f.perm));
    }
    // Renames: files across directories, and a directory with its subtree.
    for i in (0..200).step_by(7) {
        let (sp, sf) = dirs[i % dirs.len()].clone();
        let (dp, df) = dirs[(i + 3) % dirs.len()].clone();
        c.rename(sf, &format!("f{i}"), df, &format!("r{i}"), 0)
            .await
            .expect("rename file");
        let v = model.remove(&format!("{sp}/f{i}")).expect("in model");
        model.insert(format!("{dp}/r{i}"), v);
    }
    // Move d9 (under d8? wherever it is) to the root as "moved".
    let (d9path, d9) = dirs[10].clone();
    c.rename(
        model_parent(&d9path, &dirs),
        d9path.rsplit('/').next().expect("name"),
        ROOT,
        "moved",
        0,
    )
    .await
    .expect("rename dir");
    assert_eq!(c.lookup(ROOT, "moved").await.fid, d9);
    let moved: Vec<(String, (FileKind, Fid, u64, u32))> = model
        .iter()
        .filter(|(k, _)| k.as_str() == d9path || k.starts_with(&format!("{d9path}/")))
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    for (k, v) in moved {
        model.remove(&k);
        model.insert(format!("/moved{}", &k[d9path.len()..]), v);
    }
    // Unlinks, and an emptied directory removed.
    for i in (1..200).step_by(11) {
        let path = model
            .keys()
            .find(|k| k.ends_with(&format!("/f{i}")))
            .cloned();
        if let Some(path) = path {
            let (parent, name) = path.rsplit_once('/').expect("slash");
            let pf = if parent.is_empty() {
                ROOT
            } else {
                model[parent].1
            };
            c.ok(MdtRequest::Unlink {
                parent: pf,
                name: name.into(),
                keep_orphan: false,
            })
            .await;
            model.remove(&path);
        }
    }
    c.mkdir(ROOT, "gone").await;
    c.ok(MdtRequest::Rmdir {
        parent: ROOT,
        name: "gone".into(),
    })
    .await;
    let xf = model["/d0"].1;
    c.ok(MdtRequest::SetXattr {
        fid: xf,
        name: "user.k".into(),
        value: b"v".to_vec(),
        flags: 0,
    })
    .await;

    let mut before = Model::new();
    walk(&c, ROOT, "", &mut before).await;
    assert_eq!(before, model, "tree before the restart");
    let root_before = c.getattr(ROOT).await;

    c.restart_all().await;

    let mut after = Model::new();
    walk(&c, ROOT, "", &mut after).await;
    assert_eq!(after, model, "tree after the restart");
    assert_eq!(c.getattr(ROOT).await, root_before);
    check_dir_links(&c, &model).await;
    assert_eq!(
        c.call(MdtRequest::GetXattr {
            fid: xf,
            name: "user.k".into()
        })
        .await,
        Ok(Reply::Xattr(b"v".to_vec()))
    );
    // New inodes after the restart get new FIDs.
    let n = c.create(ROOT, "new").await.fid;
    assert!(model.values().all(|v| v.1 != n), "FID {n} reused");
    let nd = c.mkdir(ROOT, "newdir").await.fid;
    assert!(model.values().all(|v| v.1 != nd), "FID {nd} reused");
}

/// The FID of the directory holding `path` in `dirs`.
fn model_parent(path: &str, dirs: &[(String, Fid)]) -> Fid {
    let (parent, _) = path.rsplit_once('/').expect("slash");
    dirs.iter()
        .find(|(p, _)| p == parent)
        .map(|(_, f)| *f)
        .expect("parent known")
}

#[tokio::test(flavor = "multi_thread")]
async fn unlinking_a_file_eventually_destroys_its_objects() {
    let c = Cluster::start().await;
    let (f, l) = c.create_striped(ROOT, "f", Some(spec(-1, 0, -1))).await;
    let objs = objects(&l);
    assert_eq!(objs.len(), 3);
    for o in &objs {
        c.write_object(*o, b"some bytes").await;
        assert!(c.object_path(*o).exists(), "object {o:?} written");
    }
    c.ok(MdtRequest::Unlink {
        parent: ROOT,
        name: "f".into(),
        keep_orphan: false,
    })
    .await;
    assert_eq!(
        c.errno(MdtRequest::GetAttr { fid: f.fid }).await,
        Errno::ENOENT
    );
    let paths: Vec<_> = objs.iter().map(|o| c.object_path(*o)).collect();
    assert!(
        eventually(10, || paths.iter().all(|p| !p.exists())).await,
        "objects still exist after 10 s: {paths:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn objects_of_a_file_unlinked_while_its_ost_was_away_are_destroyed_after_a_restart() {
    let c = Cluster::start().await;
    let (_, l) = c.create_striped(ROOT, "f", Some(spec(1, 0, 1))).await;
    let o = objects(&l)[0];
    c.write_object(o, b"bytes").await;
    let path = c.object_path(o);
    // Take OST1 out of service: the destroy after unlink fails and its
    // record must stay for the next start.
    let ost = c.close_ost(1).expect("OST1 was open");
    c.ok(MdtRequest::Unlink {
        parent: ROOT,
        name: "f".into(),
        keep_orphan: false,
    })
    .await;
    // Wait for the destroy attempt to fail (not merely to be pending: one
    // still in flight when OST1 returns would succeed without the retry
    // this test is about).
    let deferred = |m: &loom_server::mdt::MdtService| {
        m.stats
            .snapshot()
            .iter()
            .any(|(k, n)| k == "destroy_deferred" && *n > 0)
    };
    assert!(
        eventually(10, || deferred(&c.mdt())).await,
        "the destroy was not attempted within 10 s"
    );
    assert!(path.exists(), "OST1 was away, nothing could destroy it");
    assert_eq!(
        c.mdt().pending_destroys().expect("destroy records").len(),
        1,
        "the record stays for the next start"
    );
    c.reopen_ost(1, ost);
    c.restart_mdt().await;
    assert!(
        eventually(10, || !path.exists()).await,
        "object {o:?} still exists 10 s after the MDT restarted"
    );
}

// ---------------------------------------------------------------------------
// A real crash: the cluster runs in a child process that is SIGKILLed while
// creates are in flight; every create it acknowledged must be there when
// the same directories are reopened.
// ---------------------------------------------------------------------------

/// Set in the child process: the directory its cluster lives in.
const CRASH_DIR_ENV: &str = "LOOM_TEST_MDT_CRASH_DIR";
/// Name of the test the child process runs.
const CRASH_CHILD: &str = "crash_child_serves_a_cluster_until_it_is_killed";

/// The server half of the crash test below. Run by the test harness as an
/// ordinary test it returns at once; re-executed by the crash test with
/// [`CRASH_DIR_ENV`] set, it serves a cluster until SIGKILL.
#[tokio::test(flavor = "multi_thread")]
async fn crash_child_serves_a_cluster_until_it_is_killed() {
    let Ok(dir) = std::env::var(CRASH_DIR_ENV) else {
        return;
    };
    let key = loom_rpc::ClusterKey::generate();
    let c = Cluster::open_at(dir.into(), None, key.clone(), &[0, 1]).await;
    // On a line of its own: libtest has already printed "test ... " here.
    println!("\nREADY {} {}", c.addr, key.to_hex());
    use std::io::Write;
    std::io::stdout().flush().expect("flush stdout");
    loop {
        tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
    }
}

/// A create the server acknowledged: name, FID and objects.
type Acked = (String, Fid, Vec<ObjRef>);

/// A child process that is SIGKILLed when dropped.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_acknowledged_create_survives_a_sigkill_of_the_server() {
    use std::io::BufRead;
    use std::sync::Mutex;
    let tmp = tempfile::tempdir().expect("tempdir");
    let exe = std::env::current_exe().expect("current_exe");
    let child = std::process::Command::new(exe)
        .args([CRASH_CHILD, "--exact", "--nocapture", "--test-threads=1"])
        .env(CRASH_DIR_ENV, tmp.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn the server process");
    // Killed on every path out of this test, panics included, so that no
    // server outlives it and the stdout reader below always sees EOF.
    let mut child = KillOnDrop(child);
    let stdout = child.0.stdout.take().expect("child stdout");
    let ready = tokio::task::spawn_blocking(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let line = line.expect("read child stdout");
            if let Some(i) = line.find("READY ") {
                return Some(line[i + "READY ".len()..].to_string());
            }
        }
        None
    });
    let ready = tokio::time::timeout(std::time::Duration::from_secs(60), ready)
        .await
        .expect("child ready within 60 s")
        .expect("reader task");
    let Some(ready) = ready else {
        panic!("the server process exited before serving");
    };
    let (addr, key_hex) = ready.split_once(' ').expect("addr and key");
    let key = loom_rpc::ClusterKey::from_hex(key_hex).expect("key");
    let client = Arc::new(loom_rpc::RpcClient::new(
        addr,
        key,
        loom_rpc::ClientOptions {
            call_timeout: std::time::Duration::from_secs(2),
            ..loom_rpc::ClientOptions::default()
        },
    ));

    // Creates from 8 writers; each remembers what was acknowledged.
    let acked: Arc<Mutex<Vec<Acked>>> = Arc::default();
    let mut tasks = Vec::new();
    for w in 0..8 {
        let client = client.clone();
        let acked = acked.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0.. {
                let name = format!("w{w}-{i}");
                let env = loom_proto::msg::Envelope {
                    target: loom_proto::msg::TargetId::mdt(0),
                    ctx: loom_proto::msg::ReqCtx {
                        uid: UID,
                        gid: GID,
                        ..Default::default()
                    },
                    req: create_req(ROOT, &name, Some(spec(-1, 0, -1))).into(),
                    capa: None,
                    snapshot: None,
                };
                match client.call(&env, bytes::Bytes::new()).await {
                    Ok((Reply::Entry { attr, layout }, _)) => acked
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push((name, attr.fid, objects(&layout))),
                    _ => return,
                }
            }
        }));
    }
    let enough = eventually(60, || {
        acked.lock().unwrap_or_else(|p| p.into_inner()).len() >= 400
    })
    .await;
    // SIGKILL: no destructor, no flush, no clean shutdown.
    child.0.kill().expect("kill the server process");
    let _ = child.0.wait();
    for t in tasks {
        t.await.expect("writer task");
    }
    assert!(
        enough,
        "the server acknowledged too few creates before the kill"
    );
    let acked = std::mem::take(&mut *acked.lock().unwrap_or_else(|p| p.into_inner()));

    let c = Cluster::open_at(
        tmp.path().to_path_buf(),
        None,
        loom_rpc::ClusterKey::generate(),
        &[0, 1],
    )
    .await;
    let mut objs = HashSet::new();
    for (name, fid, os) in &acked {
        let a = c.lookup(ROOT, name).await;
        assert_eq!(a.fid, *fid, "{name} names another inode after the crash");
        assert_eq!(objects(&Some(c.layout(*fid).await)), *os, "{name} layout");
        objs.extend(os.iter().copied());
    }
    // Whatever survived is consistent, and nothing is handed out again.
    let listed = c.readdir_all(ROOT).await;
    assert!(listed.len() >= acked.len());
    let mut fids: HashSet<Fid> = listed.iter().map(|e| e.attr.fid).collect();
    for e in &listed {
        objs.extend(c.layout(e.attr.fid).await.objects());
    }
    for i in 0..50 {
        let (a, l) = c
            .create_striped(ROOT, &format!("after-{i}"), Some(spec(-1, 0, -1)))
            .await;
        assert!(fids.insert(a.fid), "FID {} reused after the crash", a.fid);
        for o in objects(&l) {
            assert!(objs.insert(o), "object {o:?} reused after the crash");
        }
    }
}

/// Unlinks applied while a commit is awaited are destroyed together: one
/// `Destroy` request per OST for the lot (at most two rounds: what was
/// queued when the first unlink arrived, and everything after it), not a
/// request per file.
#[tokio::test(flavor = "multi_thread")]
async fn objects_of_many_unlinked_files_are_destroyed_in_a_few_requests() {
    // Commits are held 30 s: no unlink below is committed, so no destroy
    // starts, until the client's Sync.
    let c = Cluster::with_mdt_options(
        &[0, 1, 2],
        loom_server::mdt::MdtOptions {
            commit_interval: std::time::Duration::from_secs(30),
            ..Default::default()
        },
    )
    .await;
    const FILES: usize = 60;
    let mut objs = Vec::new();
    for i in 0..FILES {
        let (_, l) = c
            .create_striped(ROOT, &format!("f{i}"), Some(spec(1, 0, -1)))
            .await;
        let o = objects(&l)[0];
        c.write_object(o, b"bytes").await;
        objs.push(o);
    }
    assert_eq!(
        objs.iter().map(|o| o.ost).collect::<BTreeSet<_>>().len(),
        3,
        "the files' objects are spread over the three OSTs"
    );
    // As client 7, whose changes are answered before their commit.
    for (i, seq) in (0..FILES).zip(1u64..) {
        let r = c
            .call_as(
                7,
                seq,
                seq,
                MdtRequest::Unlink {
                    parent: ROOT,
                    name: format!("f{i}").as_str().into(),
                    keep_orphan: false,
                },
            )
            .await;
        assert!(r.is_ok(), "unlink f{i}: {r:?}");
    }
    let before = c.ost_destroys();
    let r = c
        .call_as(7, FILES as u64 + 1, FILES as u64 + 1, MdtRequest::Sync)
        .await;
    assert!(r.is_ok(), "sync: {r:?}");
    let paths: Vec<_> = objs.iter().map(|o| c.object_path(*o)).collect();
    assert!(
        eventually(10, || paths.iter().all(|p| !p.exists())).await,
        "objects still exist 10 s after the sync"
    );
    assert!(
        eventually(10, || c
            .mdt()
            .pending_destroys()
            .is_ok_and(|p| p.is_empty()))
        .await,
        "destroy records left 10 s after the sync"
    );
    let requests = c.ost_destroys();
    // The first client change waited for its commit (it registers the
    // client): its destroy may have gone alone, before the Sync.
    assert!(
        requests <= 2 * 3 + 1,
        "{requests} Destroy requests ({before} before the sync) for {FILES} files on 3 OSTs"
    );
}

/// A setattr may carry the writer's unreported size (`written`): it only
/// grows the size, like `UpdateSize`, and goes in with the rest or not
/// at all.
#[tokio::test(flavor = "multi_thread")]
async fn a_setattr_carrying_the_written_size_grows_it_with_the_times() {
    let c = Cluster::start().await;
    let f = c.create(ROOT, "f").await.fid;
    let times = |written: u64| MdtRequest::SetAttr {
        fid: f,
        set: SetAttr {
            mtime: Some(SetTime::At(Time { sec: 2000, nsec: 0 })),
            written: Some(written),
            ..SetAttr::default()
        },
    };
    match c.call(times(5000)).await {
        Ok(Reply::Attr(a)) => assert_eq!((a.size, a.mtime.sec), (5000, 2000)),
        other => panic!("setattr: {other:?}"),
    }
    match c.call(times(10)).await {
        Ok(Reply::Attr(a)) => assert_eq!(a.size, 5000, "a smaller report"),
        other => panic!("setattr: {other:?}"),
    }
    // Refused (explicit times on a file the caller no longer owns): the
    // size stays too.
    c.call_root(MdtRequest::SetAttr {
        fid: f,
        set: SetAttr {
            uid: Some(4321),
            ..SetAttr::default()
        },
    })
    .await
    .expect("chown by root");
    let e = c.call(times(9000)).await.expect_err("not the owner");
    assert_eq!(e.errno, Errno::EPERM);
    assert_eq!(c.getattr(f).await.size, 5000);
    // Only regular files have a size to report.
    let d = c.mkdir(ROOT, "d").await.fid;
    let e = c
        .call(MdtRequest::SetAttr {
            fid: d,
            set: SetAttr {
                written: Some(1),
                ..SetAttr::default()
            },
        })
        .await
        .expect_err("a directory");
    assert_eq!(e.errno, Errno::EINVAL);
}
