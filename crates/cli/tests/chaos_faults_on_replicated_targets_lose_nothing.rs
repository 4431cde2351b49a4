//! A short chaos run (issue #33): a cluster on network namespaces this
//! test makes (the MGS on one host; an MDT and two OSTs each kept on two
//! other hosts, a replica on each), two mounts, and three workloads
//! running throughout as uid 65534: IOR-like (2 MiB files written in
//! 1 MiB transfers and fsync'd), mdtest-like (directories and files made,
//! stat'd, some removed) and an untar compared with its source. Faults,
//! one after the other: kill -9 of the primaries' server, SIGSTOP of the
//! other, delay and loss on a link (`tc netem`, or a slow link by `tc
//! tbf` where the kernel has no netem), a primary's link to the
//! MGS cut, and a full disk under a secondary. After each, until every
//! replica is in sync again: every acknowledged file, name and tree is
//! read back through the other mount. The table it prints is the one in
//! docs/RELIABILITY.md.
mod common;
use common::hosts::{node_toml, Hosts};
use common::replicas::roles;
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The workloads, by the mode in argv[1], each in the directory argv[2]
/// (the untar's tarball is argv[6]); each runs until the file argv[3]
/// exists and logs a line per acknowledged step to argv[4], and every
/// error (an application would see it) to argv[5].
const WORKLOAD: &str = r#"
import hashlib, os, subprocess, sys, time, traceback
mode, top, stop, log, errs = sys.argv[1:6]
log, errs = open(log, "a"), open(errs, "a")
i = 0
while not os.path.exists(stop):
    try:
        if mode == "ior":
            name = os.path.join(top, "f%05d" % i)
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            seed = hashlib.sha256(name.encode()).digest()
            for _ in range(2):
                os.write(fd, seed * (1048576 // 32))
            os.fsync(fd)
            os.close(fd)
            print(name, flush=True, file=log)
        elif mode == "md":
            d = os.path.join(top, "d%05d" % i)
            os.mkdir(d)
            for j in range(10):
                open(os.path.join(d, "e%d" % j), "w").close()
            for j in range(10):
                os.stat(os.path.join(d, "e%d" % j))
            for j in range(0, 10, 2):
                os.unlink(os.path.join(d, "e%d" % j))
            fd = os.open(d, os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)
            print(d, flush=True, file=log)
        else:
            d = os.path.join(top, "t%05d" % i)
            os.mkdir(d)
            for cmd in (["tar", "-xf", sys.argv[6], "-C", d], ["sync", "-f", d]):
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode != 0:
                    raise RuntimeError("%s: %s" % (cmd[0], r.stderr))
            print(d, flush=True, file=log)
    except Exception:
        print(mode, i, traceback.format_exc(), flush=True, file=errs)
        time.sleep(0.5)
    i += 1
"#;

/// Lines of `path` (acknowledged steps, errors), none if it is missing.
fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Every target's rows are (primary, in-sync) for replica `primary` and
/// (secondary, in-sync) for the other, or fail after `secs`.
fn all_in_sync(mnt: &Path, primary: Option<u32>, secs: u64) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let rows: Vec<_> = ["MDT0000", "OST0000", "OST0001"]
            .iter()
            .map(|t| roles(mnt, t))
            .collect();
        let synced = rows
            .iter()
            .all(|r| r.len() == 2 && r.iter().all(|(_, _, state)| state == "in-sync"));
        let primaries: Vec<u32> = rows
            .iter()
            .flatten()
            .filter(|(_, role, _)| role == "primary")
            .map(|(r, _, _)| *r)
            .collect();
        let same = primaries.len() == 3 && primaries.iter().all(|p| *p == primaries[0]);
        if synced && same && primary.is_none_or(|p| p == primaries[0]) {
            return primaries[0];
        }
        assert!(
            Instant::now() < deadline,
            "not all in sync under replica {primary:?} after {secs} s: {rows:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Acknowledged steps read back through `via` (the other mount): the
/// count of those missing or wrong, after the first `from` of each.
fn check(work: &Path, via: &Path, logs: &Path, src: &Path, from: [usize; 3]) -> usize {
    let mut bad = 0;
    let on = |p: &str| via.join(Path::new(p).strip_prefix(work).expect("under work"));
    for name in lines(&logs.join("ior.log")).iter().skip(from[0]) {
        use sha2::Digest;
        let seed = sha2::Sha256::digest(name.as_bytes());
        let want = seed.repeat(1048576 / 32).repeat(2);
        if std::fs::read(on(name)).ok().as_deref() != Some(want.as_slice()) {
            eprintln!("lost or damaged: {name}");
            bad += 1;
        }
    }
    for d in lines(&logs.join("md.log")).iter().skip(from[1]) {
        let mut names: Vec<String> = std::fs::read_dir(on(d))
            .map(|r| {
                r.map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        if names != ["e1", "e3", "e5", "e7", "e9"] {
            eprintln!("lost or changed: {d}: {names:?}");
            bad += 1;
        }
    }
    for d in lines(&logs.join("untar.log")).iter().skip(from[2]) {
        let diff = Command::new("diff")
            .arg("-r")
            .arg(src)
            .arg(on(d).join(src.file_name().expect("name")))
            .output()
            .expect("diff");
        if !diff.status.success() {
            eprintln!(
                "untar differs: {d}: {}",
                String::from_utf8_lossy(&diff.stdout)
            );
            bad += 1;
        }
    }
    bad
}

struct Row {
    fault: &'static str,
    recovered: f64,
    ops: [usize; 3],
    errors: usize,
    lost: usize,
}

#[test]
#[ignore = "unfinished (issue #33, point 5): after the SIGSTOP fault and its recovery the workloads stall for 30 s or more, not understood yet; run it with --ignored"]
fn faults_on_replicated_targets_under_three_workloads_lose_nothing() {
    let tmp = tempfile::Builder::new()
        .prefix("loomchaos")
        .tempdir_in("/var/tmp")
        .expect("tmp");
    let d = tmp.path();
    /// A failed run's logs (servers', mounts', the workloads' errors)
    /// go to `$LOOM_TEST_LOGS`.
    struct KeepLogs(PathBuf);
    impl Drop for KeepLogs {
        fn drop(&mut self) {
            if std::thread::panicking() {
                for f in ["ior.err", "md.err", "untar.err"] {
                    let _ = std::fs::copy(self.0.join("wl").join(f), self.0.join(f));
                }
                keep_logs(&self.0);
            }
        }
    }
    let _keep = KeepLogs(d.to_path_buf());
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let mut hosts = Hosts::new(3);
    let key = d.join("multi.key");
    loom_ok(&["keygen", key.to_str().expect("utf8")]);
    let dir = |h: usize, t: &str| d.join(format!("host{h}")).join(t);
    // Host 1's OST1 replica lives on a disk of its own, to be filled.
    let small = dir(1, "ost1");
    std::fs::create_dir_all(&small).expect("mkdir");
    sh(&format!(
        "mount -t tmpfs -o size=6g loomchaos {}",
        small.display()
    ));
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = nix::mount::umount2(&self.0, nix::mount::MntFlags::MNT_DETACH);
        }
    }
    let _small = Unmount(small.clone());
    let fmt = |args: &[&str], p: &Path| {
        let mut a = vec!["format", "--fsname", "multi"];
        a.extend(args);
        a.push(p.to_str().expect("utf8"));
        loom_ok(&a);
    };
    fmt(&["--mgs"], &dir(0, "mgs"));
    for h in [1usize, 2] {
        let r = (h - 1).to_string();
        let rep = ["--replica", r.as_str(), "--replicas", "2"];
        fmt(&[&["--mdt"][..], &rep].concat(), &dir(h, "mdt0"));
        fmt(
            &[&["--ost", "--index", "0"][..], &rep].concat(),
            &dir(h, "ost0"),
        );
        let mut a = vec!["--ost", "--index", "1", "--reformat"];
        a.extend(rep);
        fmt(&a, &dir(h, "ost1"));
    }
    let mgs = format!("{}:7000", hosts.addr(0));
    let cfgs = d.join("cfg");
    std::fs::create_dir_all(&cfgs).expect("cfg dir");
    let mut cfg_of = Vec::new();
    for (h, targets) in [
        (0, vec![dir(0, "mgs")]),
        (1, vec![dir(1, "mdt0"), dir(1, "ost0"), dir(1, "ost1")]),
        (2, vec![dir(2, "mdt0"), dir(2, "ost0"), dir(2, "ost1")]),
    ] {
        let refs: Vec<&Path> = targets.iter().map(|p| p.as_path()).collect();
        let cfg = cfgs.join(format!("host{h}.toml"));
        let listen = format!("{}:7000", hosts.addr(h));
        std::fs::write(&cfg, node_toml(&listen, &mgs, &refs)).expect("config");
        // Host 1's replicas register first: they are the primaries.
        hosts.server(h, &cfg, &d.join(format!("host{h}.log")));
        cfg_of.push(cfg);
    }
    let mut mounts = Vec::new();
    for name in ["one", "two"] {
        let mnt = d.join(name);
        let mut cmd = Command::new(loom_bin());
        cmd.arg("mount")
            .arg(format!("{mgs}:/multi"))
            .arg(&mnt)
            .arg("--key-file")
            .arg(&key)
            .arg("--foreground");
        hosts.children.push(spawn_until(
            cmd,
            "mounted at",
            "mount",
            &d.join(format!("{name}.log")),
        ));
        hosts.mounts.push(mnt.clone());
        mounts.push(mnt);
    }
    let (one, two) = (&mounts[0], &mounts[1]);
    all_in_sync(one, Some(0), 60);
    let work = one.join("work");
    std::fs::create_dir(&work).expect("mkdir");
    loom_ok(&[
        "setstripe",
        "-c",
        "2",
        "-S",
        "1M",
        work.to_str().expect("utf8"),
    ]);
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&work, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    }
    // The tree untarred: this crate's own sources.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let tarball = d.join("src.tar");
    sh(&format!(
        "tar -cf {} -C {} src && chmod 644 {}",
        tarball.display(),
        src.parent().expect("parent").display(),
        tarball.display()
    ));
    // The workloads' logs, on local disk.
    let local = d.join("wl");
    std::fs::create_dir(&local).expect("mkdir");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&local, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    }
    let stop = local.join("stop");
    /// The workloads, killed if the test ends early.
    struct Workers(Vec<Child>);
    impl Drop for Workers {
        fn drop(&mut self) {
            for c in &mut self.0 {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
    let mut workers = Workers(
        ["ior", "md", "untar"]
            .iter()
            .map(|mode| {
                let top = work.join(mode);
                std::fs::create_dir(&top).expect("mkdir");
                {
                    use std::os::unix::fs::PermissionsExt;
                    std::fs::set_permissions(&top, std::fs::Permissions::from_mode(0o777))
                        .expect("chmod");
                }
                python3(true)
                    .args(["-c", WORKLOAD, mode])
                    .arg(&top)
                    .arg(&stop)
                    .arg(local.join(format!("{mode}.log")))
                    .arg(local.join(format!("{mode}.err")))
                    .arg(&tarball)
                    .stdout(Stdio::null())
                    .spawn()
                    .expect("workload")
            })
            .collect(),
    );
    let counts = || -> [usize; 3] {
        ["ior", "md", "untar"].map(|m| lines(&local.join(format!("{m}.log"))).len())
    };
    let errors = || -> usize {
        ["ior", "md", "untar"]
            .iter()
            .map(|m| lines(&local.join(format!("{m}.err"))).len())
            .sum()
    };
    std::thread::sleep(Duration::from_secs(3));
    let mut table = Vec::new();
    let mut checked = [0usize; 3];
    let mut run_fault = |fault: &'static str, inject: &mut dyn FnMut() -> Option<u32>| {
        let (ops0, errs0) = (counts(), errors());
        let t0 = Instant::now();
        let primary = inject();
        let now = all_in_sync(one, primary, 120);
        let recovered = t0.elapsed().as_secs_f64();
        // Some work after the recovery too.
        let after = counts();
        let deadline = Instant::now() + Duration::from_secs(30);
        while counts().iter().zip(after).any(|(c, a)| *c <= a) {
            assert!(
                Instant::now() < deadline,
                "the workloads stopped after {fault}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        let ops1 = counts();
        let lost = check(&work, &two.join("work"), &local, &src, checked);
        checked = ops1;
        table.push(Row {
            fault,
            recovered,
            ops: [0, 1, 2].map(|i| ops1[i] - ops0[i]),
            errors: errors() - errs0,
            lost,
        });
        now
    };
    let pid = |h: usize| hosts.children[h].id() as i32;
    // 1. kill -9 of host 1's server, the primary of every target.
    let host1 = pid(1);
    /// A server started again here, stopped at the end (before the
    /// namespaces go), also when the test fails.
    struct Restarted(Vec<Child>);
    impl Drop for Restarted {
        fn drop(&mut self) {
            for c in &mut self.0 {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
    let mut restarted = Restarted(Vec::new());
    run_fault("kill -9 of the primaries' server", &mut || {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(host1),
            nix::sys::signal::Signal::SIGKILL,
        )
        .expect("kill");
        all_in_sync_primary_only(one, 1, 30);
        let mut cmd = hosts.loom_in(1);
        cmd.arg("server").arg("--config").arg(&cfg_of[1]);
        restarted.0.push(spawn_until(
            cmd,
            "loom server: serving",
            "host1",
            &d.join("host1-2.log"),
        ));
        Some(1)
    });
    // 2. SIGSTOP of host 2's server, the primary now, for 10 s.
    let host2 = pid(2);
    run_fault("SIGSTOP of the primaries' server for 10 s", &mut || {
        let stopped = Stopped::new(host2);
        all_in_sync_primary_only(one, 0, 30);
        std::thread::sleep(Duration::from_secs(2));
        drop(stopped);
        Some(0)
    });
    // 3. Delay and loss on host 1's link (the primaries') for 10 s, by
    // `tc netem`; where the kernel has no netem (this development
    // machine's), the link is slowed to 20 Mbit/s by `tc tbf` instead.
    let dev = format!("{}v1", hosts.names[1].trim_end_matches("h1"));
    let ns = hosts.names[1].clone();
    let netem = Command::new("ip")
        .args([
            "netns", "exec", &ns, "tc", "qdisc", "add", "dev", &dev, "root", "netem",
        ])
        .args(["delay", "20ms", "loss", "2%"])
        .status()
        .is_ok_and(|s| s.success());
    if netem {
        sh(&format!("ip netns exec {ns} tc qdisc del dev {dev} root"));
    }
    let slow: &'static str = if netem {
        "netem delay 20 ms, loss 2% on the primaries' link, 10 s"
    } else {
        "the primaries' link slowed to 20 Mbit/s (tbf; no netem in this kernel), 10 s"
    };
    run_fault(slow, &mut || {
        if netem {
            sh(&format!(
                "ip netns exec {ns} tc qdisc add dev {dev} root netem delay 20ms loss 2%"
            ));
        } else {
            sh(&format!(
                "ip netns exec {ns} tc qdisc add dev {dev} root tbf rate 20mbit burst 64kb latency 200ms"
            ));
        }
        std::thread::sleep(Duration::from_secs(10));
        sh(&format!("ip netns exec {ns} tc qdisc del dev {dev} root"));
        None
    });
    // 4. The primaries' host cut from the MGS for 10 s.
    let primary_now = all_in_sync(one, None, 30);
    let host = primary_now as usize + 1;
    run_fault("the primaries' link to the MGS cut, 10 s", &mut || {
        hosts.cut(host, 0);
        all_in_sync_primary_only(one, 1 - primary_now, 30);
        std::thread::sleep(Duration::from_secs(2));
        hosts.heal(host, 0);
        Some(1 - primary_now)
    });
    // 5. The disk under host 1's OST1 replica fills (a secondary or
    // primary, whichever it is now): filled, some work, freed.
    run_fault("a replica's disk full for 10 s", &mut || {
        let fill = small.join("fill");
        let _ = Command::new("dd")
            .arg("if=/dev/zero")
            .arg(format!("of={}", fill.display()))
            .args(["bs=1M", "status=none"])
            .status();
        std::thread::sleep(Duration::from_secs(10));
        std::fs::remove_file(&fill).expect("free the disk");
        None
    });

    std::fs::write(&stop, b"").expect("stop");
    for w in &mut workers.0 {
        let out = w.wait().expect("workload");
        assert!(out.success(), "a workload died");
    }
    let lost_all = check(&work, &two.join("work"), &local, &src, [0; 3]);
    println!("| fault | recovered (all replicas in sync) | IOR files | mdtest dirs | untars | application errors | data lost |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for r in &table {
        println!(
            "| {} | {:.1} s | {} | {} | {} | {} | {} |",
            r.fault, r.recovered, r.ops[0], r.ops[1], r.ops[2], r.errors, r.lost
        );
    }
    let total = counts();
    println!(
        "| whole run, read back at the end | | {} | {} | {} | {} | {} |",
        total[0],
        total[1],
        total[2],
        errors(),
        lost_all
    );
    for e in ["ior", "md", "untar"] {
        for l in lines(&local.join(format!("{e}.err"))) {
            eprintln!("{e}: {l}");
        }
    }
    assert_eq!(errors(), 0, "applications saw errors");
    assert_eq!(lost_all, 0, "acknowledged data was lost");
    assert!(table.iter().all(|r| r.lost == 0));
    drop(restarted);
}

/// Every target's primary is replica `primary` (the others may be in any
/// state), or fail after `secs`.
fn all_in_sync_primary_only(mnt: &Path, primary: u32, secs: u64) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let ok = ["MDT0000", "OST0000", "OST0001"].iter().all(|t| {
            roles(mnt, t)
                .iter()
                .any(|(r, role, state)| *r == primary && role == "primary" && state == "in-sync")
        });
        if ok {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "replica {primary} is not every target's primary after {secs} s"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
