//! Issue #29, point 4: POSIX ACLs enforced by the MDT for library callers
//! (no kernel in between): access ACLs with named users and groups and
//! the mask, the mode bits that show them, chmod's effect on the mask,
//! default ACLs inherited by new files and directories instead of the
//! umask, and the errors of bad ACLs and of callers who may not set them.

mod common;
use common::*;
use loom_client::{Caller, Client};
use loom_proto::acl::{Acl, Entry, Tag, ACCESS_XATTR, DEFAULT_XATTR};
use loom_proto::msg::{access, DirStripe, FileKind, SetAttr};
use loom_proto::{Errno, Fid};
use std::sync::Arc;

fn root() -> Caller {
    user_in(0, 0, &[])
}

fn e(tag: Tag, id: u32, perm: u32) -> Entry {
    Entry { tag, id, perm }
}

/// user::rw-, user:1001:rw-, group::---, group:3000:r--, mask::rw-, other::---
fn shared_acl() -> Acl {
    Acl::new(vec![
        e(Tag::UserObj, 0, 6),
        e(Tag::User, 1001, 6),
        e(Tag::GroupObj, 0, 0),
        e(Tag::Group, 3000, 4),
        e(Tag::Mask, 0, 6),
        e(Tag::Other, 0, 0),
    ])
    .expect("a valid ACL")
}

async fn chmod(client: &Arc<Client>, c: &Caller, fid: Fid, perm: u32) {
    let set = SetAttr {
        perm: Some(perm),
        ..SetAttr::default()
    };
    client.setattr(c, fid, set).await.expect("chmod");
}

async fn acl_of(client: &Arc<Client>, fid: Fid, name: &[u8]) -> Option<Acl> {
    match client.getxattr(&root(), fid, name).await {
        Ok(v) => Acl::from_xattr(&v).expect("a stored ACL parses"),
        Err(Errno::ENODATA) => None,
        Err(e) => panic!("getxattr: {e:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_acls_decide_who_may_do_what() {
    let cluster = start_cluster("acls").await;
    let client = connect(&cluster, "acls").await;
    let alice = user_in(1000, 1000, &[]);
    let bob = user_in(1001, 1001, &[]);
    let carol = user_in(1002, 1002, &[3000]);
    let dave = user_in(1003, 1003, &[]);
    let work = client
        .mkdir(&root(), Fid::ROOT, "work", 0o777)
        .await
        .expect("mkdir")
        .fid;
    let (attr, _) = client
        .create(&alice, work, "f", FileKind::File, 0o600, 0, None)
        .await
        .expect("alice's file");
    let f = attr.fid;
    for who in [&bob, &carol, &dave] {
        assert_eq!(
            client.open_checked(who, f, access::READ).await.err(),
            Some(Errno::EACCES),
            "mode 0600 before any ACL"
        );
    }

    // Only the owner (or root) sets an ACL.
    let value = shared_acl().to_xattr();
    assert_eq!(
        client
            .setxattr(&bob, f, ACCESS_XATTR, &value, 0)
            .await
            .err(),
        Some(Errno::EPERM)
    );
    client
        .setxattr(&alice, f, ACCESS_XATTR, &value, 0)
        .await
        .expect("the owner sets an ACL");
    assert_eq!(
        client.getattr(&root(), f).await.expect("stat").perm,
        0o660,
        "the mask shows as the group bits"
    );
    assert_eq!(acl_of(&client, f, ACCESS_XATTR).await, Some(shared_acl()));
    let names = client.listxattr(&dave, f).await.expect("listxattr");
    assert!(
        names.iter().any(|n| n.as_bytes() == ACCESS_XATTR),
        "listed: {names:?}"
    );

    // Named user: read and write; named group: read only; others: none.
    assert!(client
        .open_checked(&bob, f, access::READ | access::WRITE)
        .await
        .is_ok());
    assert!(client.open_checked(&carol, f, access::READ).await.is_ok());
    assert_eq!(
        client.open_checked(&carol, f, access::WRITE).await.err(),
        Some(Errno::EACCES)
    );
    assert_eq!(
        client.open_checked(&dave, f, access::READ).await.err(),
        Some(Errno::EACCES)
    );

    // chmod sets the mask: g=r leaves bob read only; g= leaves him none.
    chmod(&client, &alice, f, 0o640).await;
    let acl = acl_of(&client, f, ACCESS_XATTR).await.expect("kept");
    assert_eq!(acl.mode_bits(), 0o640);
    assert_eq!(
        acl.entries()
            .iter()
            .find(|e| e.tag == Tag::User)
            .map(|e| e.perm),
        Some(6),
        "the named entry keeps its bits under the mask"
    );
    assert!(client.open_checked(&bob, f, access::READ).await.is_ok());
    assert_eq!(
        client.open_checked(&bob, f, access::WRITE).await.err(),
        Some(Errno::EACCES)
    );
    chmod(&client, &alice, f, 0o600).await;
    assert_eq!(
        client.open_checked(&bob, f, access::READ).await.err(),
        Some(Errno::EACCES)
    );

    // The ACL of a directory governs lookups and creates in it.
    let d = client
        .mkdir(&alice, work, "d", 0o700)
        .await
        .expect("mkdir")
        .fid;
    let dir_acl = Acl::new(vec![
        e(Tag::UserObj, 0, 7),
        e(Tag::User, 1001, 3),
        e(Tag::GroupObj, 0, 0),
        e(Tag::Mask, 0, 7),
        e(Tag::Other, 0, 0),
    ])
    .expect("valid");
    client
        .setxattr(&alice, d, ACCESS_XATTR, &dir_acl.to_xattr(), 0)
        .await
        .expect("set the directory's ACL");
    client
        .create(&bob, d, "bobs", FileKind::File, 0o644, 0, None)
        .await
        .expect("bob may write and search d");
    assert_eq!(
        client.readdir(&bob, d, 0, 10).await.err(),
        Some(Errno::EACCES),
        "bob has no read bit on d"
    );
    assert_eq!(
        client
            .create(&dave, d, "daves", FileKind::File, 0o644, 0, None)
            .await
            .err(),
        Some(Errno::EACCES)
    );

    // An ACL the mode says all of is not kept; a removal leaves the mode.
    let plain = Acl::from_mode(0o604).to_xattr();
    client
        .setxattr(&alice, f, ACCESS_XATTR, &plain, 0)
        .await
        .expect("plain ACL");
    assert_eq!(client.getattr(&root(), f).await.expect("stat").perm, 0o604);
    assert_eq!(acl_of(&client, f, ACCESS_XATTR).await, None);
    assert_eq!(
        client.removexattr(&alice, f, ACCESS_XATTR).await.err(),
        Some(Errno::ENODATA)
    );
    client
        .setxattr(&alice, d, ACCESS_XATTR, &value, 0)
        .await
        .expect("again");
    client
        .removexattr(&alice, d, ACCESS_XATTR)
        .await
        .expect("removed");
    assert_eq!(acl_of(&client, d, ACCESS_XATTR).await, None);
    assert_eq!(
        client.getattr(&root(), d).await.expect("stat").perm,
        0o660,
        "the mode the ACL set stays"
    );

    // Malformed values; a default ACL on a file.
    for bad in [&b"\x02\x00\x00\x00\x01\x00"[..], &b"\x01\x00\x00\x00"[..]] {
        assert_eq!(
            client.setxattr(&alice, f, ACCESS_XATTR, bad, 0).await.err(),
            Some(Errno::EINVAL)
        );
    }
    let no_mask = [
        2u8, 0, 0, 0, 1, 0, 6, 0, 255, 255, 255, 255, 2, 0, 6, 0, 0xe9, 3, 0, 0,
    ];
    assert_eq!(
        client
            .setxattr(&alice, f, ACCESS_XATTR, &no_mask, 0)
            .await
            .err(),
        Some(Errno::EINVAL),
        "a named entry needs a mask (and the other entries)"
    );
    assert_eq!(
        client
            .setxattr(&alice, f, DEFAULT_XATTR, &value, 0)
            .await
            .err(),
        Some(Errno::EACCES)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_acls_are_inherited_in_place_of_the_umask() {
    let cluster = start_cluster_with_mdts("acldef", 2).await;
    let client = connect(&cluster, "acldef").await;
    let alice = Caller {
        umask: Some(0o077),
        ..user_in(1000, 1000, &[])
    };
    let bob = user_in(1001, 1001, &[]);
    let top = client
        .mkdir(&root(), Fid::ROOT, "top", 0o777)
        .await
        .expect("mkdir")
        .fid;
    let proj = client
        .mkdir(&alice, top, "proj", 0o777)
        .await
        .expect("mkdir");
    // Without a default ACL the umask the caller gave cuts the mode.
    assert_eq!(proj.perm, 0o700);
    let proj = proj.fid;
    let default = Acl::new(vec![
        e(Tag::UserObj, 0, 7),
        e(Tag::User, 1001, 7),
        e(Tag::GroupObj, 0, 5),
        e(Tag::Mask, 0, 7),
        e(Tag::Other, 0, 0),
    ])
    .expect("valid");
    client
        .setxattr(&alice, proj, DEFAULT_XATTR, &default.to_xattr(), 0)
        .await
        .expect("a default ACL");
    chmod(&client, &alice, proj, 0o770).await;
    client
        .setxattr(&alice, proj, ACCESS_XATTR, &default.to_xattr(), 0)
        .await
        .expect("bob may enter");

    // A file: the mode asked for (0666) cut by the ACL, not by the umask.
    let (f, _) = client
        .create(&alice, proj, "f", FileKind::File, 0o666, 0, None)
        .await
        .expect("create");
    assert_eq!(f.perm, 0o660, "user rw-, mask rw-, other ---");
    let inherited = acl_of(&client, f.fid, ACCESS_XATTR)
        .await
        .expect("inherited");
    assert_eq!(inherited.mode_bits(), 0o660);
    assert_eq!(acl_of(&client, f.fid, DEFAULT_XATTR).await, None);
    assert!(client
        .open_checked(&bob, f.fid, access::READ | access::WRITE)
        .await
        .is_ok());

    // Directories, here and on the other MDT, and striped over both:
    // their own default ACL too, and what is made in them inherits it.
    let sub = client
        .mkdir(&alice, proj, "sub", 0o777)
        .await
        .expect("mkdir");
    let on = |count, start_mdt| DirStripe { count, start_mdt };
    let remote = client
        .mkdir_striped(&alice, proj, "remote", 0o777, on(1, 1))
        .await
        .expect("mkdir on MDT1");
    let striped = client
        .mkdir_striped(&alice, proj, "striped", 0o777, on(2, 0))
        .await
        .expect("striped mkdir");
    for d in [&sub, &remote, &striped] {
        assert_eq!(d.perm, 0o770, "mode 0777 cut by other ---");
        assert_eq!(
            acl_of(&client, d.fid, DEFAULT_XATTR).await,
            Some(default.clone())
        );
        assert!(acl_of(&client, d.fid, ACCESS_XATTR).await.is_some());
        for i in 0..6 {
            let name = format!("g{i}");
            let (g, _) = client
                .create(&bob, d.fid, name.as_str(), FileKind::File, 0o644, 0, None)
                .await
                .expect("bob creates: his named entry lets him");
            assert_eq!(g.perm, 0o640, "{name}: 0644 cut by the inherited ACL");
            assert!(
                acl_of(&client, g.fid, ACCESS_XATTR).await.is_some(),
                "{name}"
            );
        }
    }
    // A symbolic link takes neither.
    let l = client
        .symlink(&alice, proj, "l", "f")
        .await
        .expect("symlink");
    assert_eq!(acl_of(&client, l.fid, ACCESS_XATTR).await, None);
}
