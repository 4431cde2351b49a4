//! An OST whose disk fills up: writes fail with ENOSPC (reported by the
//! write, fsync or close, never silently), files written before are
//! intact, and once space is freed the file system writes again; the same
//! when the file system compresses its data (with data that does not
//! compress). Writes sent behind under space grants never fail later:
//! two users on two mounts fill the OST with files they close without
//! fsync, and every file whose writes and close succeeded reads back
//! whole from the other mount. The OST lives on a 24 MiB tmpfs this test
//! mounts (and unmounts, also on failure).
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
    /// A second mount, if made.
    mnt2: Option<PathBuf>,
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(self.mnt.as_path(), nix::mount::MntFlags::MNT_DETACH);
        if let Some(m) = &self.mnt2 {
            let _ = nix::mount::umount2(m.as_path(), nix::mount::MntFlags::MNT_DETACH);
        }
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
        mnt2: None,
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
    let mount = |at: &Path, log: &str| {
        std::fs::create_dir_all(at).expect("mountpoint");
        let mut cmd = Command::new(loom_bin());
        cmd.arg("mount")
            .arg(format!("{mgs}:/full"))
            .arg(at)
            .arg("--key-file")
            .arg(d.join("k.key"))
            .arg("--timeout")
            .arg("30")
            .arg("--foreground");
        spawn_until(cmd, "mounted at", "mount", &d.join(log))
    };
    s.children.push(mount(&s.mnt, "mount.log"));

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

    // Two users on two mounts fill the OST with 1 MiB files closed
    // without fsync, each until a write says ENOSPC. Writes sent behind
    // spend grants; the rest are waited for, so nothing acknowledged can
    // fail after close.
    let mnt2 = d.join("mnt2");
    s.children.push(mount(&mnt2, "mount2.log"));
    s.mnt2 = Some(mnt2.clone());
    let shared = s.mnt.join("fill");
    std::fs::create_dir(&shared).expect("mkdir");
    sh(&format!("chmod 1777 {}", shared.display()));
    let writers: Vec<_> = [(&s.mnt, "a"), (&mnt2, "b")]
        .into_iter()
        .map(|(m, tag)| {
            Command::new("setpriv")
                .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .args(["/usr/bin/python3", "-c", FILLER, "write"])
                .arg(m.join("fill"))
                .arg(tag)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("python3 as nobody")
        })
        .collect();
    let mut acknowledged = Vec::new();
    for (w, tag) in writers.into_iter().zip(["a", "b"]) {
        let out = w.wait_with_output().expect("writer");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "writer {tag}: {err}");
        assert!(
            err.contains("ENOSPC"),
            "writer {tag} never met a full OST: {err}"
        );
        let files: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect();
        eprintln!("writer {tag}: {} files acknowledged; {err}", files.len());
        acknowledged.push((tag, files));
    }
    // One writer may fill the OST before the other's first write (which,
    // without a grant yet, is waited for and refused): fine, so long as
    // something was written.
    assert!(
        acknowledged.iter().any(|(_, f)| !f.is_empty()),
        "no file was written before the OST filled"
    );
    // Each user's files, read through the other mount.
    for ((tag, files), other) in acknowledged.iter().zip([&mnt2, &s.mnt]) {
        if files.is_empty() {
            continue;
        }
        let out = Command::new("/usr/bin/python3")
            .args(["-c", FILLER, "check"])
            .arg(other.join("fill"))
            .arg(tag)
            .args(files)
            .output()
            .expect("checker");
        assert!(
            out.status.success(),
            "acknowledged files of writer {tag} differ: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for log in ["mount.log", "mount2.log"] {
        let text = std::fs::read_to_string(d.join(log)).expect("mount log");
        assert!(
            !text.contains("of a closed file failed"),
            "{log}: a write failed after its close:\n{text}"
        );
    }
}

/// `write DIR TAG`: make files TAG-0, TAG-1, ... of 1 MiB that do not
/// compress, in 64 KiB writes, each closed without fsync, until a write
/// fails; print each file whose writes and close succeeded, and the
/// error on stderr. `check DIR TAG NAMES...`: compare those files.
const FILLER: &str = r#"
import os, random, sys, errno
def block(tag, i, k):
    return random.Random(f"{tag}-{i}-{k}").randbytes(65536)
mode, d, tag = sys.argv[1], sys.argv[2], sys.argv[3]
if mode == "write":
    for i in range(64):
        name = f"{tag}-{i}"
        try:
            fd = os.open(f"{d}/{name}", os.O_CREAT | os.O_WRONLY, 0o644)
            try:
                for k in range(16):
                    os.write(fd, block(tag, i, k))
            finally:
                os.close(fd)
        except OSError as e:
            print(f"stopped at {name}: {errno.errorcode.get(e.errno)}", file=sys.stderr)
            break
        print(name, flush=True)
else:
    bad = 0
    for name in sys.argv[4:]:
        with open(f"{d}/{name}", "rb") as f:
            data = f.read()
        want = b"".join(block(tag, int(name.split("-")[1]), k) for k in range(16))
        if data != want:
            print(f"{name}: {len(data)} bytes, differs", flush=True)
            bad += 1
    sys.exit(1 if bad else 0)
"#;
