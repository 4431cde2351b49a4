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
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

/// Network namespaces on a bridge, plus the processes run in them.
struct Hosts {
    tag: String,
    subnet: String,
    names: Vec<String>,
    children: Vec<Child>,
    mount: Option<PathBuf>,
}

fn run(cmd: &str) {
    sh(cmd);
}

impl Hosts {
    fn new(n: usize) -> Hosts {
        let r: u32 = rand::random();
        let tag = format!("lm{:05x}", r & 0xfffff);
        let subnet = format!("10.213.{}", r % 250);
        let bridge = format!("{tag}br");
        let mut h = Hosts {
            tag: tag.clone(),
            subnet: subnet.clone(),
            names: Vec::new(),
            children: Vec::new(),
            mount: None,
        };
        run(&format!(
            "ip link add {bridge} type bridge && ip addr add {subnet}.254/24 dev {bridge} && ip link set {bridge} up"
        ));
        for i in 0..n {
            let ns = format!("{tag}h{i}");
            let (v, p) = (format!("{tag}v{i}"), format!("{tag}p{i}"));
            h.names.push(ns.clone());
            run(&format!(
                "ip netns add {ns} && ip link add {v} type veth peer name {p} && \
                 ip link set {v} netns {ns} && ip link set {p} master {bridge} && ip link set {p} up && \
                 ip -n {ns} addr add {subnet}.{}/24 dev {v} && ip -n {ns} link set {v} up && \
                 ip -n {ns} link set lo up",
                i + 1
            ));
        }
        h
    }

    fn addr(&self, i: usize) -> String {
        format!("{}.{}", self.subnet, i + 1)
    }

    /// Start `loom server --config cfg` in host `i`'s network namespace
    /// (only the network: the mount namespace stays ours).
    fn server(&mut self, i: usize, cfg: &Path, log: &Path) {
        let mut cmd = Command::new("nsenter");
        cmd.arg(format!("--net=/run/netns/{}", self.names[i]))
            .arg(loom_bin())
            .arg("server")
            .arg("--config")
            .arg(cfg);
        let child = spawn_until(cmd, "loom server: serving", &self.names[i], log);
        self.children.push(child);
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        if let Some(m) = &self.mount {
            let _ = nix::mount::umount2(m.as_path(), nix::mount::MntFlags::MNT_DETACH);
        }
        for c in self.children.iter_mut().rev() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(c.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            let _ = c.wait();
        }
        for ns in &self.names {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
        let _ = Command::new("ip")
            .args(["link", "del", &format!("{}br", self.tag)])
            .status();
    }
}

fn node_toml(listen: &str, mgs: &str, targets: &[&Path]) -> String {
    let t: Vec<String> = targets
        .iter()
        .map(|p| format!("{:?}", p.display().to_string()))
        .collect();
    format!(
        "fsname = \"multi\"\nlisten = \"{listen}\"\nmgs = \"{mgs}\"\nkey_file = \"../multi.key\"\ntargets = [{}]\ntimeout_secs = 60\n",
        t.join(", ")
    )
}

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
    hosts.mount = Some(mnt.clone());

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
