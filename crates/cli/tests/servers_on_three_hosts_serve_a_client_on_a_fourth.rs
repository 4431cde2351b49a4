//! The multi-machine path, on network namespaces this test makes: three
//! "hosts" (an MGS with MDT0, and two OSTs) each run `loom server --config`
//! on their own address, formatted with `loom format` and keyed with
//! `loom keygen`; the client mounts from the root namespace with `loom
//! mount ADDR:/FSNAME`. A file striped over both OSTs lands on both hosts'
//! target directories and reads back; `loom df` names every target.
//!
//! Only addresses of a private subnet on a bridge this test creates are
//! used; the namespaces, links, processes and mount go in `Drop`.
mod common;
use common::hosts::{node_toml, Hosts};
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

#[test]
fn servers_on_three_hosts_serve_a_client_on_a_fourth() {
    let tmp = tempfile::Builder::new()
        .prefix("loomnet")
        .tempdir_in("/var/tmp")
        .expect("tmp");
    let d = tmp.path();
    let mut hosts = Hosts::new(3);
    let key = d.join("multi.key");
    loom_ok(&["keygen", key.to_str().expect("utf8")]);
    // Each host's targets in a directory of its own.
    let dir = |h: usize, t: &str| d.join(format!("host{h}")).join(t);
    let fmt = |role: &str, index: &str, p: &Path| {
        loom_ok(&[
            "format",
            role,
            "--index",
            index,
            "--fsname",
            "multi",
            p.to_str().expect("utf8"),
        ]);
    };
    fmt("--mgs", "0", &dir(0, "mgs"));
    fmt("--mdt", "0", &dir(0, "mdt0"));
    fmt("--ost", "0", &dir(1, "ost0"));
    fmt("--ost", "1", &dir(2, "ost1"));
    // A target formatted for another file system is refused by name.
    let foreign = d.join("foreign");
    loom_ok(&[
        "format",
        "--ost",
        "--fsname",
        "other",
        foreign.to_str().expect("utf8"),
    ]);

    let mgs = format!("{}:7000", hosts.addr(0));
    let layout: [(usize, Vec<PathBuf>); 3] = [
        (0, vec![dir(0, "mgs"), dir(0, "mdt0")]),
        (1, vec![dir(1, "ost0")]),
        (2, vec![dir(2, "ost1")]),
    ];
    let cfgs = d.join("cfg");
    std::fs::create_dir_all(&cfgs).expect("cfg dir");
    for (h, targets) in &layout {
        let refs: Vec<&Path> = targets.iter().map(|p| p.as_path()).collect();
        let cfg = cfgs.join(format!("host{h}.toml"));
        std::fs::write(
            &cfg,
            node_toml(&format!("{}:7000", hosts.addr(*h)), &mgs, &refs),
        )
        .expect("config");
        hosts.server(*h, &cfg, &d.join(format!("host{h}.log")));
    }
    let bad = cfgs.join("foreign.toml");
    std::fs::write(&bad, node_toml("127.0.0.1:0", &mgs, &[foreign.as_path()])).expect("cfg");
    let o = loom(&["server", "--config", bad.to_str().expect("utf8")]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("formatted for file system 'other'"), "{err}");

    // The client, in the root namespace, reaches the hosts over the bridge.
    let mnt = d.join("mnt");
    let mut cmd = Command::new(loom_bin());
    cmd.arg("mount")
        .arg(format!("{mgs}:/multi"))
        .arg(&mnt)
        .arg("--key-file")
        .arg(&key)
        .arg("--foreground");
    let client = spawn_until(cmd, "mounted at", "mount", &d.join("mount.log"));
    hosts.children.push(client);
    hosts.mounts.push(mnt.clone());

    let f = mnt.join("wide.bin");
    let fs = f.to_str().expect("utf8");
    loom_ok(&["setstripe", "-c", "2", "-S", "64K", fs]);
    let data: Vec<u8> = (0..1_000_000u32).map(|i| (i * 31 % 255) as u8).collect();
    std::fs::write(&f, &data).expect("write");
    assert!(
        std::fs::read(&f).expect("read") == data,
        "read back differs"
    );
    // Each OST host holds about half of the bytes.
    for h in [1, 2] {
        let t = if h == 1 { "ost0" } else { "ost1" };
        let bytes = sh(&format!(
            "find {}/objects -type f -printf '%s\\n' | awk '{{s+=$1}} END {{print s+0}}'",
            dir(h, t).display()
        ));
        let n: u64 = bytes.trim().parse().expect("du");
        assert!(n >= 400_000, "host{h} holds {n} bytes of the file");
    }
    let df = loom_ok(&["df", mnt.to_str().expect("utf8")]);
    for t in ["MDT0000", "OST0000", "OST0001"] {
        assert!(df.contains(&format!("multi-{t}_UUID")), "{df}");
    }
    assert!(!df.contains("inactive"), "{df}");
}
