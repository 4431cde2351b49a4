//! "Hosts" for multi-machine tests: network namespaces on a bridge this
//! test makes, each with its own address of a private subnet, and the
//! processes run in them. Everything goes in `Drop`.

use super::{loom_bin, sh, spawn_until};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

/// Network namespaces on a bridge, plus the processes run in them.
pub struct Hosts {
    tag: String,
    subnet: String,
    pub names: Vec<String>,
    pub children: Vec<Child>,
    /// Mounts to unmount at the end.
    pub mounts: Vec<PathBuf>,
}

fn run(cmd: &str) {
    sh(cmd);
}

impl Hosts {
    pub fn new(n: usize) -> Hosts {
        let r: u32 = rand::random();
        let tag = format!("lm{:05x}", r & 0xfffff);
        let subnet = format!("10.213.{}", r % 250);
        let bridge = format!("{tag}br");
        let mut h = Hosts {
            tag: tag.clone(),
            subnet: subnet.clone(),
            names: Vec::new(),
            children: Vec::new(),
            mounts: Vec::new(),
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

    pub fn addr(&self, i: usize) -> String {
        format!("{}.{}", self.subnet, i + 1)
    }

    /// `loom` run in host `i`'s network namespace (only the network: the
    /// mount namespace stays ours, so a mount made there is ours too).
    pub fn loom_in(&self, i: usize) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.arg(format!("--net=/run/netns/{}", self.names[i]))
            .arg(loom_bin());
        cmd
    }

    /// Start `loom server --config cfg` in host `i`'s network namespace.
    pub fn server(&mut self, i: usize, cfg: &Path, log: &Path) {
        let mut cmd = self.loom_in(i);
        cmd.arg("server").arg("--config").arg(cfg);
        let child = spawn_until(cmd, "loom server: serving", &self.names[i], log);
        self.children.push(child);
    }

    /// Cut what host `i` sends to host `to` (a route to nowhere): `to`'s
    /// packets reach `i`, but nothing of `i` reaches `to`, so no
    /// connection between them works; the others are untouched.
    pub fn cut(&self, i: usize, to: usize) {
        run(&format!(
            "ip -n {} route add blackhole {}/32",
            self.names[i],
            self.addr(to)
        ));
    }

    /// Undo [`Hosts::cut`].
    pub fn heal(&self, i: usize, to: usize) {
        run(&format!(
            "ip -n {} route del blackhole {}/32",
            self.names[i],
            self.addr(to)
        ));
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for m in &self.mounts {
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

pub fn node_toml(listen: &str, mgs: &str, targets: &[&Path]) -> String {
    let t: Vec<String> = targets
        .iter()
        .map(|p| format!("{:?}", p.display().to_string()))
        .collect();
    format!(
        "fsname = \"multi\"\nlisten = \"{listen}\"\nmgs = \"{mgs}\"\nkey_file = \"../multi.key\"\ntargets = [{}]\ntimeout_secs = 60\n",
        t.join(", ")
    )
}
