//! A replicated MDT's primary cut off from the MGS (on network
//! namespaces this test makes: the MGS and the OST on one host, the MDT's
//! two replicas on two others) while both sides of the cut make names:
//! the cut primary stops serving once its lease runs out, before the MGS
//! hands its role to the other replica; the mount that still reaches the
//! MGS carries on through the new primary; the mount on the cut side
//! waits and finishes once the cut heals; every acknowledged name and
//! byte is there, and the old primary rejoins.
mod common;
use common::hosts::{node_toml, Hosts};
use common::replicas::{ask_mdt_replica, wait_for_target};
use common::*;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

fn wait_for(mnt: &Path, want: [(u32, &str, &str); 2], secs: u64) {
    wait_for_target(mnt, "MDT0000", &want, secs);
}

/// As uid 65534, started now: a directory `dir`, a file in it holding
/// `text` renamed into place, fsync'd.
fn write_as_nobody(dir: &Path, text: &str) -> std::process::Child {
    sh_as_nobody(&format!(
        "mkdir {0} && printf '{text}' > {0}/tmp && mv {0}/tmp {0}/f && sync {0}/f",
        dir.display()
    ))
    .stderr(Stdio::piped())
    .spawn()
    .expect("writer")
}

#[test]
fn an_mdt_primary_cut_from_the_mgs_stops_serving_before_it_is_replaced() {
    let tmp = tempfile::Builder::new()
        .prefix("loomcut")
        .tempdir_in("/var/tmp")
        .expect("tmp");
    let d = tmp.path();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let mut hosts = Hosts::new(3);
    let key = d.join("multi.key");
    loom_ok(&["keygen", key.to_str().expect("utf8")]);
    let dir = |h: usize, t: &str| d.join(format!("host{h}")).join(t);
    let fmt = |args: &[&str], p: &Path| {
        let mut a = vec!["format", "--fsname", "multi"];
        a.extend(args);
        a.push(p.to_str().expect("utf8"));
        loom_ok(&a);
    };
    fmt(&["--mgs"], &dir(0, "mgs"));
    fmt(&["--ost"], &dir(0, "ost0"));
    fmt(
        &["--mdt", "--replica", "0", "--replicas", "2"],
        &dir(1, "mdt0"),
    );
    fmt(
        &["--mdt", "--replica", "1", "--replicas", "2"],
        &dir(2, "mdt0"),
    );
    let mgs = format!("{}:7000", hosts.addr(0));
    let cfgs = d.join("cfg");
    std::fs::create_dir_all(&cfgs).expect("cfg dir");
    // Host 1's replica registers first: it is the primary.
    for (h, targets) in [
        (0, vec![dir(0, "mgs"), dir(0, "ost0")]),
        (1, vec![dir(1, "mdt0")]),
        (2, vec![dir(2, "mdt0")]),
    ] {
        let refs: Vec<&Path> = targets.iter().map(|p| p.as_path()).collect();
        let cfg = cfgs.join(format!("host{h}.toml"));
        let listen = format!("{}:7000", hosts.addr(h));
        std::fs::write(&cfg, node_toml(&listen, &mgs, &refs)).expect("config");
        hosts.server(h, &cfg, &d.join(format!("host{h}.log")));
    }
    // One mount here, which will keep reaching the MGS; one on host 1's
    // side of the cut.
    let mount = |cmd: &mut Command, mnt: &Path| {
        cmd.arg("mount")
            .arg(format!("{mgs}:/multi"))
            .arg(mnt)
            .arg("--key-file")
            .arg(&key)
            .arg("--foreground");
    };
    let here = d.join("here");
    let mut cmd = Command::new(loom_bin());
    mount(&mut cmd, &here);
    hosts
        .children
        .push(spawn_until(cmd, "mounted at", "mount", &d.join("here.log")));
    hosts.mounts.push(here.clone());
    let there = d.join("there");
    let mut cmd = hosts.loom_in(1);
    mount(&mut cmd, &there);
    hosts.children.push(spawn_until(
        cmd,
        "mounted at",
        "mount",
        &d.join("there.log"),
    ));
    hosts.mounts.push(there.clone());
    wait_for(
        &here,
        [(0, "primary", "in-sync"), (1, "secondary", "in-sync")],
        30,
    );
    let work = here.join("work");
    std::fs::create_dir(&work).expect("mkdir");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&work, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    }
    std::fs::create_dir(work.join("before")).expect("mkdir");
    std::fs::write(work.join("before").join("f"), b"written before the cut").expect("write");

    // Host 1 (the primary) can no longer reach the MGS (nor the OST on
    // its host); it still reaches its replica and both mounts reach it.
    hosts.cut(1, 0);
    let cut_at = Instant::now();
    let mut a = write_as_nobody(&work.join("from-here"), "written here during the cut");
    let mut b = write_as_nobody(
        &there.join("work").join("from-there"),
        "written there during the cut",
    );
    wait_for(
        &here,
        [(0, "secondary", "stale"), (1, "primary", "in-sync")],
        30,
    );
    // Shown once the new primary's recovery ended: it waits for every
    // client it knew, the cut-off mount too, until its recovery window
    // closes (that mount cannot learn where the primary went).
    println!(
        "replica 1 served this side {:.1} s after the cut",
        cut_at.elapsed().as_secs_f64()
    );
    // By then the old primary serves nothing, not even a read of what it
    // holds: its lease ran out before the MGS handed its role over.
    let key = loom_server::node::load_key(&key).expect("key");
    for r in ask_mdt_replica(&format!("{}:7000", hosts.addr(1)), key) {
        assert_eq!(r, Err(loom_proto::Errno::EREMCHG));
    }
    // This side carries on through the new primary.
    let done = a.wait().expect("writer here");
    assert!(done.success(), "the write here failed");
    // The other side's changes wait: that side reaches neither the MGS
    // nor the OST (on the MGS's host), and its MDT's old primary serves
    // nothing now. They finish once the cut heals, through the new one.
    assert!(
        b.try_wait().expect("writer there").is_none(),
        "the write on the cut side finished while cut off from the MGS"
    );
    hosts.heal(1, 0);
    let done = b.wait().expect("writer there");
    assert!(done.success(), "the write there failed after the heal");
    for (name, text) in [
        ("before", "written before the cut"),
        ("from-here", "written here during the cut"),
        ("from-there", "written there during the cut"),
    ] {
        assert_eq!(
            std::fs::read_to_string(work.join(name).join("f")).expect("read"),
            text,
            "{name}"
        );
        assert!(!work.join(name).join("tmp").exists(), "{name}/tmp");
    }
    // The old primary rejoins, brought up to date.
    wait_for(
        &here,
        [(0, "secondary", "in-sync"), (1, "primary", "in-sync")],
        60,
    );
}
