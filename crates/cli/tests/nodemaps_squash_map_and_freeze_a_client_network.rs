//! Nodemaps (issue #29, point 6 in part): root sets a nodemap on the MGS
//! for one client network, and every server applies it live to the
//! requests of clients from that network. The second mount's connections
//! leave from 127.0.0.2 (`--source-addr`), its own client network on this
//! machine's loopback; the first mount's do not, and are served as they
//! say throughout.
//! - root on the mapped mount is squashed: it cannot read root's 0600
//!   file, and what it makes is nobody's;
//! - a mapped uid (1000 -> 2000) makes files that are 2000's;
//! - read-only, set while the mount is up: its changes answer EROFS, its
//!   reads go on, the other mount still writes;
//! - removed: the mount is served as it says again;
//! - bad nodemaps are refused with a clear error, and nothing changes.
mod common;
use common::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

/// Wait (at most a minute) until `f` holds: servers read the nodemaps
/// with the configuration, within seconds.
fn until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !f() {
        assert!(Instant::now() < deadline, "{what}: not within a minute");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Run `cmd` in sh as uid:gid 1000, answering its exit and stderr.
fn as_user_1000(cmd: &str) -> (bool, String) {
    let o = std::process::Command::new("setpriv")
        .args([
            "--reuid=1000",
            "--regid=1000",
            "--clear-groups",
            "sh",
            "-c",
            cmd,
        ])
        .output()
        .expect("setpriv");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn owner(p: &Path) -> (u32, u32) {
    let m = std::fs::metadata(p).expect("stat");
    (m.uid(), m.gid())
}

#[test]
fn a_client_network_is_squashed_mapped_and_made_read_only_live() {
    let mut c = Cluster::up(2, 2, &[]);
    std::fs::set_permissions(c.tmp.path(), std::fs::Permissions::from_mode(0o755))
        .expect("chmod tmp");
    let mnt = c.mnt.to_str().expect("utf-8").to_string();
    std::fs::write(c.path("secret"), b"root's").expect("write secret");
    std::fs::set_permissions(c.path("secret"), std::fs::Permissions::from_mode(0o600))
        .expect("chmod secret");
    std::fs::create_dir(c.path("pub")).expect("mkdir pub");
    std::fs::set_permissions(c.path("pub"), std::fs::Permissions::from_mode(0o777))
        .expect("chmod pub");

    // Bad nodemaps first: refused, nothing set.
    for (args, says) in [
        (vec!["--net", "10.0.0.0/40"], "prefix"),
        (vec!["--net", "nowhere"], "not an address"),
        (vec!["--net", "127.0.0.2", "--map-uid", "1000"], "CLIENT:FS"),
        (
            vec!["--net", "127.0.0.2", "--map-uid", "1:2", "--map-uid", "1:3"],
            "mapped twice",
        ),
    ] {
        let mut all = vec!["nodemap", "set", &mnt, "lab"];
        all.extend(args.iter().copied());
        let o = loom(&all);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} was taken");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    assert_eq!(
        loom_ok(&["nodemap", "list", &mnt]).trim(),
        "",
        "nothing was set"
    );
    let o = loom(&["nodemap", "del", &mnt, "lab"]);
    assert!(!o.status.success(), "removing a nodemap that is not there");

    let shown = loom_ok(&[
        "nodemap",
        "set",
        &mnt,
        "lab",
        "--net",
        "127.0.0.2",
        "--map-uid",
        "1000:2000",
    ]);
    assert!(
        shown.contains("lab net=127.0.0.2/32 root_squash"),
        "{shown}"
    );
    assert!(loom_ok(&["nodemap", "list", &mnt]).contains("map_uid=1000:2000"));

    // A mount from the mapped network, made after the nodemap.
    let m2 = c.second_mount_with("m2", &["--source-addr", "127.0.0.2"]);
    // Every server reads the nodemaps within seconds.
    until(
        "root squashed on the mapped mount",
        || match std::fs::read(m2.join("secret")) {
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(libc::EACCES), "{e}");
                true
            }
            Ok(_) => false,
        },
    );
    std::fs::write(m2.join("pub/by-root"), b"x").expect("squashed root writes in a 0777 dir");
    assert_eq!(
        owner(&c.path("pub/by-root")),
        (65534, 65534),
        "squashed root's file"
    );
    let (ok, err) = as_user_1000(&format!("echo u > {}", m2.join("pub/by-1000").display()));
    assert!(ok, "uid 1000 on the mapped mount: {err}");
    assert_eq!(
        owner(&c.path("pub/by-1000")).0,
        2000,
        "uid 1000 is 2000 here"
    );
    // The first mount is served as it says.
    assert_eq!(
        std::fs::read(c.path("secret")).expect("root reads"),
        b"root's"
    );
    std::fs::write(c.path("pub/by-root-1"), b"x").expect("write on mount 1");
    assert_eq!(owner(&c.path("pub/by-root-1")).0, 0);

    // Read-only, live, while the mount is up.
    loom_ok(&[
        "nodemap",
        "set",
        &mnt,
        "lab",
        "--net",
        "127.0.0.2",
        "--map-uid",
        "1000:2000",
        "--readonly",
    ]);
    until(
        "the mapped mount's writes refused",
        || match std::fs::write(m2.join("pub/ro"), b"x") {
            Err(e) => e.raw_os_error() == Some(libc::EROFS),
            Ok(()) => {
                let _ = std::fs::remove_file(c.path("pub/ro"));
                false
            }
        },
    );
    let e = std::fs::create_dir(m2.join("pub/d")).expect_err("mkdir on a read-only client");
    assert_eq!(e.raw_os_error(), Some(libc::EROFS));
    let e = std::fs::remove_file(m2.join("pub/by-1000")).expect_err("rm on a read-only client");
    assert_eq!(e.raw_os_error(), Some(libc::EROFS));
    assert_eq!(
        std::fs::read(m2.join("pub/by-1000")).expect("reads go on"),
        b"u\n"
    );
    std::fs::write(c.path("pub/still"), b"x").expect("mount 1 still writes");
    // The servers' metrics count what each nodemap did, by verdict.
    let verdict = |v: &str| -> f64 {
        let series = format!("loom_nodemap_requests_total{{nodemap=\"lab\",verdict=\"{v}\"}}");
        c.ports()
            .iter()
            .filter(|(k, _)| k.starts_with("metrics-"))
            .map(|(_, p)| scrape_metrics(*p))
            .filter_map(|m| {
                m.lines()
                    .find_map(|l| l.strip_prefix(series.as_str()))
                    .and_then(|n| n.trim().parse::<f64>().ok())
            })
            .sum()
    };
    assert!(verdict("mapped") > 0.0, "requests mapped under lab");
    assert!(
        verdict("read_only") >= 3.0,
        "the write, mkdir and rm refused"
    );

    // Removed: served as it says again (root is root).
    loom_ok(&["nodemap", "del", &mnt, "lab"]);
    until("the mount served as it says again", || {
        std::fs::write(m2.join("pub/after"), b"x").is_ok()
    });
    assert_eq!(owner(&c.path("pub/after")).0, 0, "root is root again");
    assert_eq!(
        std::fs::read(m2.join("secret")).expect("root reads"),
        b"root's"
    );
}
