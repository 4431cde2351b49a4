//! An OST whose disk fills up: writes fail with ENOSPC (reported by the
//! write, fsync or close, never silently), files written before are
//! intact, and once space is freed the file system writes again; the same
//! when the file system compresses its data (with data that does not
//! compress). The OST lives on a 24 MiB tmpfs this test mounts (and
//! unmounts, also on failure).
mod common;
use common::*;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

struct Setup {
    /// Removed after the mounts (fields drop after `Drop::drop`).
    _tmp: tempfile::TempDir,
    small: PathBuf,
    children: Vec<Child>,
    mnt: PathBuf,
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(self.mnt.as_path(), nix::mount::MntFlags::MNT_DETACH);
        for c in self.children.iter_mut().rev() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(c.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            let _ = c.wait();
        }
        let _ = nix::mount::umount2(self.small.as_path(), nix::mount::MntFlags::MNT_DETACH);
    }
}

/// Commits are held 100 ms, so the objects of a removed file are freed
/// late and the write after it meets a full OST first (the retry path).
fn config(d: &Path, name: &str, listen: &str, mgs: &str, targets: &[&str]) -> PathBuf {
    let p = d.join(format!("{name}.toml"));
    let t: Vec<String> = targets.iter().map(|t| format!("{t:?}")).collect();
    std::fs::write(
        &p,
        format!(
            "fsname = \"full\"\nlisten = \"{listen}\"\nmgs = \"{mgs}\"\nkey_file = \"k.key\"\ntargets = [{}]\ntimeout_secs = 30\ncommit_interval_ms = 100\n",
            t.join(", ")
        ),
    )
    .expect("config");
    p
}

/// `n` bytes that do not compress (xorshift).
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn a_full_ost_says_enospc_and_loses_nothing() {
    full_ost(None);
}

#[test]
fn a_full_ost_under_compression_says_enospc_and_loses_nothing() {
    full_ost(Some("zstd:1"));
}

fn full_ost(compress: Option<&str>) {
    let tmp = tempfile::Builder::new()
        .prefix("loomfull")
        .tempdir_in("/var/tmp")
        .expect("tmp");
    let d = tmp.path().to_path_buf();
    let small = d.join("small");
    std::fs::create_dir(&small).expect("mkdir");
    let mut s = Setup {
        _tmp: tmp,
        small: small.clone(),
        children: Vec::new(),
        mnt: d.join("mnt"),
    };
    sh(&format!(
        "mount -t tmpfs -o size=24m loomfull {}",
        small.display()
    ));
    loom_ok(&["keygen", d.join("k.key").to_str().expect("utf8")]);
    for (role, dir) in [("--mgs", d.join("mgs")), ("--mdt", d.join("mdt0"))] {
        loom_ok(&[
            "format",
            role,
            "--fsname",
            "full",
            dir.to_str().expect("utf8"),
        ]);
    }
    let ost = small.join("ost0");
    loom_ok(&[
        "format",
        "--ost",
        "--fsname",
        "full",
        ost.to_str().expect("utf8"),
    ]);
    let mgs = format!("127.0.0.1:{}", server_port());
    let a = config(&d, "a", &mgs, &mgs, &["mgs", "mdt0"]);
    let b = config(
        &d,
        "b",
        &format!("127.0.0.1:{}", server_port()),
        &mgs,
        &[ost.to_str().expect("utf8")],
    );
    for (cfg, log) in [(&a, "a.log"), (&b, "b.log")] {
        let mut cmd = Command::new(loom_bin());
        cmd.arg("server").arg("--config").arg(cfg);
        s.children
            .push(spawn_until(cmd, "loom server: serving", log, &d.join(log)));
    }
    let mut cmd = Command::new(loom_bin());
    cmd.arg("mount")
        .arg(format!("{mgs}:/full"))
        .arg(&s.mnt)
        .arg("--key-file")
        .arg(d.join("k.key"))
        .arg("--timeout")
        .arg("30")
        .arg("--foreground");
    s.children.push(spawn_until(
        cmd,
        "mounted at",
        "mount",
        &d.join("mount.log"),
    ));

    if let Some(z) = compress {
        loom_ok(&["setstripe", "--compress", z, s.mnt.to_str().expect("utf8")]);
    }
    let keep = s.mnt.join("kept.bin");
    let kept: Vec<u8> = (0..4_000_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&keep, &kept).expect("a file that fits");

    // 40 MiB into 24: the failure must surface by close at the latest.
    let big = s.mnt.join("too-big.bin");
    let result = (|| -> std::io::Result<()> {
        let mut f = std::fs::File::create(&big)?;
        for i in 0..40 {
            f.write_all(&noise(1 << 20, i))?;
        }
        f.sync_all()
    })();
    let e = result.expect_err("40 MiB fitted on a 24 MiB OST");
    assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");

    // What was written before is intact; the file system answers.
    assert!(std::fs::read(&keep).expect("read kept") == kept);
    // A reservation larger than the OST is refused up front, and the
    // file keeps its size.
    {
        use std::os::fd::AsRawFd;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&keep)
            .expect("open kept");
        let e = nix::fcntl::fallocate(
            f.as_raw_fd(),
            nix::fcntl::FallocateFlags::empty(),
            0,
            64 << 20,
        )
        .expect_err("64 MiB reserved on a 24 MiB OST");
        // A compressed file cannot promise space (what its data will take
        // is not known before it is written).
        let want = match compress {
            Some(_) => nix::errno::Errno::EOPNOTSUPP,
            None => nix::errno::Errno::ENOSPC,
        };
        assert_eq!(e, want);
        assert_eq!(f.metadata().expect("stat").len(), kept.len() as u64);
    }
    let df = loom_ok(&["df", s.mnt.to_str().expect("utf8")]);
    assert!(df.contains("full-OST0000_UUID"), "{df}");
    // Free the space: writing works again.
    std::fs::remove_file(&big).expect("rm");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut refused = 0;
    loop {
        // Not std::fs::write: it ignores the error a close reports, and a
        // write-behind failure may surface only there (or at fsync).
        let attempt = (|| -> std::io::Result<()> {
            let mut f = std::fs::File::create(s.mnt.join("after.bin"))?;
            f.write_all(&noise(2 << 20, 99))?;
            f.sync_all()
        })();
        match attempt {
            Ok(()) => break,
            // The freed objects are destroyed in the background.
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => {
                refused += 1;
                assert!(
                    std::time::Instant::now() < deadline,
                    "space never came back"
                );
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Err(e) => panic!("write after freeing space: {e}"),
        }
    }
    eprintln!("writes refused while the space was being freed: {refused}");
    assert!(
        std::fs::read(s.mnt.join("after.bin")).expect("read") == noise(2 << 20, 99),
        "what was written after the space came back reads back differently"
    );
}
