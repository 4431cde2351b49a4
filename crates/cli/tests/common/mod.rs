//! Test harness: real `loom up` clusters, real mounts, real processes.
//!
//! Every resource a test makes is released in `Drop`, so a failing test
//! leaves no mount, process or directory behind.
#![allow(dead_code)]

pub mod hosts;
pub mod locker;
pub mod policy;
pub mod replicas;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The binary under test.
pub fn loom_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_loom"))
}

/// A free loopback port for a server the test starts itself: below the
/// kernel's ephemeral range, so no outgoing connection can take it before
/// the server binds it (as `loom up` chooses its ports).
pub fn server_port() -> u16 {
    let top: u16 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(32768);
    for _ in 0..200 {
        let port = 20000 + rand::random::<u16>() % (top.saturating_sub(20000).max(1));
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port below {top}");
}

/// Run `args` as uid and gid 65534 (nobody), with no supplementary
/// groups: a user of the cluster who is not root.
pub fn as_nobody(args: &[&str]) -> Output {
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .args(args)
        .output()
        .expect("setpriv")
}

/// `sh -c CMD` as uid and gid 65534, with no supplementary groups (not
/// started yet: the caller waits for it or reads its output).
pub fn sh_as_nobody(cmd: &str) -> Command {
    let mut c = Command::new("setpriv");
    c.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "sh",
        "-c",
    ])
    .arg(cmd);
    c
}

/// Run `loom fsck ARGS MOUNT` on `c`'s mount: its exit code, and what it
/// printed (standard output, then error).
pub fn fsck(c: &Cluster, args: &[&str]) -> (i32, String) {
    let o = Command::new(loom_bin())
        .arg("fsck")
        .args(args)
        .arg(&c.mnt)
        .output()
        .expect("loom fsck");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.code().unwrap_or(-1), text)
}

/// Run `loom ARGS`, returning its output.
pub fn loom(args: &[&str]) -> Output {
    Command::new(loom_bin())
        .args(args)
        .output()
        .expect("running loom")
}

/// Run `loom ARGS` and insist it succeeds; returns stdout.
pub fn loom_ok(args: &[&str]) -> String {
    let o = loom(args);
    assert!(
        o.status.success(),
        "loom {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&o.stderr),
        String::from_utf8_lossy(&o.stdout)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Give directory `dir` a default layout whose files keep their first
/// 64 KiB on the MDT (Data-on-MDT), the rest on one OST.
pub fn data_on_mdt(dir: &Path) {
    loom_ok(&[
        "setstripe",
        "-E",
        "64K",
        "-L",
        "mdt",
        "-E",
        "-1",
        "-c",
        "1",
        dir.to_str().expect("utf-8 path"),
    ]);
}

/// Run a shell command and insist it succeeds; returns stdout.
pub fn sh(cmd: &str) -> String {
    let o = Command::new("bash")
        .arg("-c")
        .arg(cmd)
        .output()
        .expect("bash");
    assert!(
        o.status.success(),
        "`{cmd}` failed ({}):\n{}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A `python3` command, run as root or (`nobody`) as uid and gid 65534
/// with no supplementary groups; the system's python, since a per-user
/// install may be closed to other users.
pub fn python3(nobody: bool) -> Command {
    if nobody {
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "/usr/bin/python3",
        ]);
        c
    } else {
        Command::new("python3")
    }
}

/// GET /metrics from 127.0.0.1:`port`.
pub fn scrape_metrics(port: u16) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect to metrics");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("send");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
    out
}

/// Every changelog record of every MDT (`loom changelog MOUNT --json
/// EXTRA`), in the order printed.
pub fn changelog_records(c: &Cluster, extra: &[&str]) -> Vec<serde_json::Value> {
    let mnt = c.mnt.to_str().expect("utf-8");
    let mut args = vec!["changelog", mnt, "--json"];
    args.extend_from_slice(extra);
    loom_ok(&args)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON record"))
        .collect()
}

/// Each of `mdts`' records in `all` are numbered from 1 with no gap or
/// repeat.
pub fn assert_numbered_from_one(all: &[serde_json::Value], mdts: &[u64]) {
    for &mdt in mdts {
        let idx: Vec<u64> = all
            .iter()
            .filter(|r| r["mdt"] == mdt)
            .map(|r| r["index"].as_u64().expect("index"))
            .collect();
        let want: Vec<u64> = (1..=idx.len() as u64).collect();
        assert_eq!(idx, want, "MDT{mdt}'s record numbers");
    }
}

/// Spawn `cmd` and wait (bounded) for a stdout line starting with `ready`.
pub fn spawn_until(cmd: Command, ready: &str, what: &str, log: &Path) -> Child {
    spawn_until_or(cmd, ready, what, log, String::new)
}

/// As [`spawn_until`]; if `cmd` never becomes ready, the panic also shows
/// what `more` says (logs that would go with the test's temp dir).
pub fn spawn_until_or(
    mut cmd: Command,
    ready: &str,
    what: &str,
    log: &Path,
    more: impl FnOnce() -> String,
) -> Child {
    let logf = std::fs::File::create(log).expect("log file");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(logf)
        .spawn()
        .expect("spawn");
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    let ready = ready.to_string();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if line.starts_with(&ready) {
                let _ = tx.send(());
            }
        }
    });
    if rx.recv_timeout(Duration::from_secs(120)).is_err() {
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "{what} did not become ready:\n{}{}",
            std::fs::read_to_string(log).unwrap_or_default(),
            more()
        );
    }
    child
}

/// Every server log in `dir`, for a failure's message.
fn server_logs(dir: &Path) -> String {
    let mut out = String::new();
    let mut logs: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    logs.sort();
    for l in logs {
        let text = std::fs::read_to_string(&l).unwrap_or_default();
        out.push_str(&format!("\n--- {} ---\n{text}", l.display()));
    }
    out
}

fn terminate(child: &mut Child) {
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// MDT index of the inode at `path` on a mount, from `loom getstripe -m`.
pub fn mdt_of(path: &Path) -> u32 {
    loom_ok(&["getstripe", "-m", path.to_str().expect("utf-8")])
        .trim()
        .parse()
        .expect("MDT index")
}

/// Inodes in use on each MDT of the mount at `mnt`, from `loom df -i`.
pub fn inodes_per_mdt(mnt: &Path) -> Vec<u64> {
    loom_ok(&["df", "-i", mnt.to_str().expect("utf-8")])
        .lines()
        // The inode table, not the operations below it.
        .take_while(|l| !l.starts_with("operations since"))
        .filter(|l| l.contains("-MDT"))
        .map(|l| {
            l.split_whitespace()
                .nth(2)
                .expect("IUsed")
                .parse()
                .expect("number")
        })
        .collect()
}

/// A server process a test started itself, killed if the test ends early.
/// A size-limited tmpfs mounted by a test, unmounted when dropped (also
/// when the test fails); see [`Cluster::up_with`].
pub struct Tmpfs(pub PathBuf);

impl Tmpfs {
    /// Mount a tmpfs of `size` (e.g. "64m") at `dir`, made if missing.
    pub fn mount(dir: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(dir).expect("tmpfs mount point");
        sh(&format!(
            "mount -t tmpfs -o size={size} loomtest {}",
            dir.display()
        ));
        Tmpfs(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(self.0.as_path(), nix::mount::MntFlags::MNT_DETACH);
    }
}

pub struct Server(pub Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A cluster from `loom up`, mounted.
pub struct Cluster {
    pub tmp: tempfile::TempDir,
    pub state: PathBuf,
    pub mnt: PathBuf,
    up: Option<Child>,
    /// The `loom up` arguments after the subcommand.
    up_args: Vec<std::ffi::OsString>,
    /// Extra processes (restarted servers, second mounts) to stop at the end.
    pub extra: Vec<(Child, Option<PathBuf>)>,
    /// Servers restarted by the test: name -> index in `extra`.
    restarted: std::collections::HashMap<String, usize>,
    /// File systems mounted in the state directory, for targets.
    disks: Vec<Tmpfs>,
}

impl Cluster {
    /// `loom up --mdts M --osts N` with extra arguments.
    pub fn up(mdts: u32, osts: u32, extra: &[&str]) -> Cluster {
        Cluster::up_with(mdts, osts, extra, |_| Vec::new())
    }

    /// As [`Cluster::up`], with `prepare` run on the state directory (its
    /// path; not made yet) before `loom up` starts; the file systems it
    /// mounts there are unmounted once the cluster is stopped.
    pub fn up_with(
        mdts: u32,
        osts: u32,
        extra: &[&str],
        prepare: impl FnOnce(&Path) -> Vec<Tmpfs>,
    ) -> Cluster {
        let tmp = tempfile::Builder::new()
            .prefix("loomtest")
            .tempdir_in("/var/tmp")
            .expect("tempdir");
        let state = tmp.path().join("state");
        let disks = prepare(&state);
        let mnt = tmp.path().join("mnt");
        let mut up_args: Vec<std::ffi::OsString> = vec![
            "--mdts".into(),
            mdts.to_string().into(),
            "--osts".into(),
            osts.to_string().into(),
            "--dir".into(),
            state.clone().into(),
            "--mount".into(),
            mnt.clone().into(),
        ];
        up_args.extend(extra.iter().map(|a| a.into()));
        let mut cmd = Command::new(loom_bin());
        cmd.arg("up").args(&up_args);
        let logs = state.join("logs");
        let up = spawn_until_or(
            cmd,
            "mounted at",
            "loom up",
            &tmp.path().join("up.log"),
            || server_logs(&logs),
        );
        Cluster {
            tmp,
            state,
            mnt,
            up: Some(up),
            up_args,
            extra: Vec::new(),
            restarted: Default::default(),
            disks,
        }
    }

    /// Stop `loom up` as Ctrl-C does (unmount, stop every server) and
    /// wait for it; the state directory stays.
    pub fn stop_up(&mut self) {
        if let Some(mut up) = self.up.take() {
            let pid = nix::unistd::Pid::from_raw(up.id() as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
            let status = up.wait().expect("wait for loom up");
            assert!(status.success(), "loom up exited with {status}");
        }
    }

    /// Run `loom up` again with the same arguments and state directory.
    pub fn up_again(&mut self) {
        assert!(self.up.is_none(), "stop_up first");
        let mut cmd = Command::new(loom_bin());
        cmd.arg("up").args(&self.up_args);
        let log = self.tmp.path().join("up-again.log");
        self.up = Some(spawn_until(cmd, "mounted at", "loom up again", &log));
    }

    /// Make directory `rel` on the mount open to every user (mode 0777),
    /// and the test's temporary directory (where second mounts and files
    /// to copy live) traversable by them.
    pub fn open_dir(&self, rel: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(self.tmp.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod the test's directory");
        let dir = self.path(rel);
        std::fs::create_dir(&dir).expect("mkdir");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        dir
    }

    /// Path on the mount.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.mnt.join(rel)
    }

    /// (OST index, object id) of every stripe of `file`, in stripe order,
    /// from `loom getstripe`'s object table.
    pub fn stripes(&self, file: &str) -> Vec<(u32, u64)> {
        let out = loom_ok(&["getstripe", file]);
        out.lines()
            .skip_while(|l| !l.contains("obdidx"))
            .skip(1)
            .map(|l| {
                let mut w = l.split_whitespace();
                (
                    w.next().expect("obdidx").parse().expect("idx"),
                    w.next().expect("objid").parse().expect("oid"),
                )
            })
            .collect()
    }

    /// The file that holds object `oid` in OST `ost`'s target directory.
    pub fn object_file(&self, ost: u32, oid: u64) -> PathBuf {
        self.state
            .join(format!("targets/ost{ost}/objects/{:02x}/{oid}", oid % 256))
    }

    /// The object files of `file`, in stripe order.
    pub fn object_files(&self, file: &str) -> Vec<PathBuf> {
        self.stripes(file)
            .into_iter()
            .map(|(ost, oid)| self.object_file(ost, oid))
            .collect()
    }

    /// The MGS address.
    pub fn mgs(&self) -> String {
        let s = std::fs::read_to_string(self.state.join("cluster.toml")).expect("cluster.toml");
        let port = s
            .lines()
            .find(|l| l.trim_start().starts_with("mgs ="))
            .and_then(|l| l.split('=').nth(1))
            .map(|p| p.trim().to_string())
            .expect("mgs port");
        format!("127.0.0.1:{port}")
    }

    /// The port `loom up` recorded under `key` ("mdt0", "metrics-ost1",
    /// "dashboard", ...).
    pub fn port(&self, key: &str) -> Option<u16> {
        self.ports()
            .into_iter()
            .find(|(k, _)| k == key)
            .map(|(_, p)| p)
    }

    /// Every server port, by name.
    pub fn ports(&self) -> Vec<(String, u16)> {
        let s = std::fs::read_to_string(self.state.join("cluster.toml")).expect("cluster.toml");
        let mut in_ports = false;
        let mut v = Vec::new();
        for l in s.lines() {
            if l.trim() == "[ports]" {
                in_ports = true;
                continue;
            }
            if in_ports {
                if let Some((k, p)) = l.split_once('=') {
                    v.push((k.trim().to_string(), p.trim().parse().expect("port")));
                }
            }
        }
        v
    }

    /// Pid of server `name` (e.g. "ost1").
    pub fn pid(&self, name: &str) -> i32 {
        std::fs::read_to_string(self.state.join("pids").join(format!("{name}.pid")))
            .expect("pid file")
            .trim()
            .parse()
            .expect("pid")
    }

    /// kill -9 server `name` and wait until it is gone.
    pub fn kill9(&self, name: &str) {
        let pid = nix::unistd::Pid::from_raw(self.pid(name));
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).expect("kill");
        let deadline = Instant::now() + Duration::from_secs(10);
        // The server is a child of `loom up`, which reaps it; wait for that.
        while nix::sys::signal::kill(pid, None).is_ok() {
            assert!(Instant::now() < deadline, "server {name} did not die");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Start server `name` again from its config (stopped with the cluster).
    pub fn restart(&mut self, name: &str) {
        let mut cmd = Command::new(loom_bin());
        cmd.arg("server")
            .arg("--config")
            .arg(self.state.join("nodes").join(format!("{name}.toml")));
        // Each restart keeps its own log.
        let mut log = self.tmp.path().join(format!("{name}-restart.log"));
        let mut n = 1;
        while log.exists() {
            n += 1;
            log = self.tmp.path().join(format!("{name}-restart-{n}.log"));
        }
        let child = spawn_until(cmd, "loom server: serving", name, &log);
        self.restarted.insert(name.to_string(), self.extra.len());
        self.extra.push((child, None));
    }

    /// kill -9 server `name`, whether `loom up` or [`Cluster::restart`]
    /// started it last, and wait until it is gone.
    pub fn kill9_latest(&mut self, name: &str) {
        match self.restarted.remove(name) {
            Some(i) => {
                let child = &mut self.extra[i].0;
                child.kill().expect("kill");
                child.wait().expect("wait");
            }
            None => self.kill9(name),
        }
    }

    /// Start server `name` again from its config with crash point `point`
    /// armed (`LOOM_FAIL_AT`; "" for none); `n` tells its log apart.
    pub fn start_armed(&self, name: &str, point: &str, n: u32) -> Server {
        let mut cmd = Command::new(loom_bin());
        cmd.arg("server")
            .arg("--config")
            .arg(self.state.join("nodes").join(format!("{name}.toml")))
            .env("LOOM_FAIL_AT", point);
        let log = self.tmp.path().join(format!("{name}-restart{n}.log"));
        Server(spawn_until(cmd, "loom server: serving", name, &log))
    }

    /// Mount the same file system a second time at `rel` under the temp dir.
    pub fn second_mount(&mut self, rel: &str) -> PathBuf {
        self.second_mount_with(rel, &[])
    }

    /// As [`Cluster::second_mount`], with more `loom mount` arguments.
    pub fn second_mount_with(&mut self, rel: &str, args: &[&str]) -> PathBuf {
        let dir = self.tmp.path().join(rel);
        let mut cmd = Command::new(loom_bin());
        cmd.arg("mount")
            .arg(format!("{}:/loom", self.mgs()))
            .arg(&dir)
            .arg("--key-file")
            .arg(self.state.join("client.key"))
            .args(args)
            .arg("--foreground");
        let log = self.tmp.path().join(format!("{rel}.log"));
        let child = spawn_until(cmd, "mounted at", "second mount", &log);
        self.extra.push((child, Some(dir.clone())));
        dir
    }
}

impl Cluster {
    /// The process serving the extra mount at `dir`.
    pub fn mount_pid(&self, dir: &Path) -> i32 {
        self.extra
            .iter()
            .find(|(_, d)| d.as_deref() == Some(dir))
            .map(|(c, _)| c.id() as i32)
            .expect("an extra mount there")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for (child, _) in self.extra.iter_mut().rev() {
            terminate(child);
        }
        if let Some(mut up) = self.up.take() {
            terminate(&mut up);
        }
        // Whatever survived (a test that panicked mid-way): detach mounts,
        // stop leftover servers.
        let _ = nix::mount::umount2(&self.mnt, nix::mount::MntFlags::MNT_DETACH);
        for (_, dir) in &self.extra {
            if let Some(d) = dir {
                let _ = nix::mount::umount2(d, nix::mount::MntFlags::MNT_DETACH);
            }
        }
        let _ = Command::new(loom_bin())
            .arg("down")
            .arg("--dir")
            .arg(&self.state)
            .output();
        // Unmounted before the temporary directory goes.
        self.disks.clear();
        if std::thread::panicking() {
            keep_logs(self.tmp.path());
        }
    }
}

/// A failed test's logs (the mounts', `loom up`'s, the servers'), copied
/// to `$LOOM_TEST_LOGS/<temp dir name>/` when that is set: the temporary
/// directory goes with the test, and a rare failure needs them.
pub fn keep_logs(tmp: &Path) {
    let Some(to) = std::env::var_os("LOOM_TEST_LOGS") else {
        return;
    };
    let name = tmp.file_name().unwrap_or_default();
    let to = Path::new(&to).join(name);
    let logs = [tmp.to_path_buf(), tmp.join("state").join("logs")];
    for dir in logs {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "log") {
                let _ = std::fs::create_dir_all(&to);
                let _ = std::fs::copy(&p, to.join(e.file_name()));
            }
        }
    }
    eprintln!("logs kept in {}", to.display());
}

/// A process stopped with SIGSTOP (a server no question may reach, a
/// mount frozen in a recall), continued when dropped, also when the test
/// fails.
pub struct Stopped(pub nix::unistd::Pid);

impl Stopped {
    pub fn new(pid: i32) -> Stopped {
        let pid = nix::unistd::Pid::from_raw(pid);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).expect("SIGSTOP");
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(self.0, nix::sys::signal::Signal::SIGCONT);
    }
}

/// `f` run in a thread: its result, or None if it did not finish within
/// 20 s (it went to a stopped server and waits in the kernel until the
/// server is continued, which the caller's [`Stopped`] does).
pub fn within<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(20)).ok()
}

/// Sum of "N changes replayed" over the restarted servers' logs.
/// A library client of `c` in this test's process, with `opts`, and the
/// runtime it runs on (the tests themselves are synchronous).
pub fn library_client(
    c: &Cluster,
    opts: loom_client::ClientOptions,
) -> (tokio::runtime::Runtime, std::sync::Arc<loom_client::Client>) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let key = loom_server::node::load_key(&c.state.join("client.key")).expect("client key");
    let client = rt
        .block_on(loom_client::Client::connect(&c.mgs(), "loom", key, opts))
        .expect("connect");
    (rt, client)
}

/// Root, as a caller of the library.
pub fn root_caller() -> loom_client::Caller {
    loom_client::Caller {
        uid: 0,
        gid: 0,
        groups: Vec::new(),
        pid: 0,
        umask: None,
    }
}

pub fn replayed_in_logs(c: &Cluster) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(c.tmp.path()).expect("tmp").flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.contains("restart") {
            continue;
        }
        let log = std::fs::read_to_string(e.path()).unwrap_or_default();
        for l in log.lines() {
            if let Some(rest) = l.split("recovery done: ").nth(1) {
                n += rest
                    .split_whitespace()
                    .next()
                    .and_then(|k| k.parse::<usize>().ok())
                    .unwrap_or(0);
            }
        }
    }
    n
}

/// The key in `c`'s state directory named `file` ("client.key" or
/// "cluster.key").
pub fn key(c: &Cluster, file: &str) -> loom_rpc::ClusterKey {
    let hex = std::fs::read_to_string(c.state.join(file)).expect("key file");
    loom_rpc::ClusterKey::from_hex(&hex).expect("key")
}

/// Send `req` to `target` through `rpc` with `ctx`, over the wire as a
/// client's would go: the reply, or the errno the server answered (any
/// other failure panics).
pub async fn ask_raw(
    rpc: &loom_rpc::RpcClient,
    target: loom_proto::msg::TargetId,
    ctx: loom_proto::msg::ReqCtx,
    req: loom_proto::msg::Request,
) -> Result<loom_proto::msg::Reply, loom_proto::Errno> {
    let env = loom_proto::msg::Envelope {
        target,
        ctx,
        req,
        capa: None,
        snapshot: None,
    };
    match rpc.call(&env, bytes::Bytes::new()).await {
        Ok((r, _)) => Ok(r),
        Err(loom_rpc::RpcError::Remote(e)) => Err(e.errno),
        Err(e) => panic!("{target}: {e}"),
    }
}
