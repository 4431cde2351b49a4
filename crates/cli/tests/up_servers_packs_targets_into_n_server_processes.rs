//! `loom up --servers N` runs the MGS, MDTs and OSTs in N server processes,
//! dealt round-robin with the MGS in the first (each with its config, pid
//! file and log), serves a working mount, and `loom down` stops them all;
//! more processes than targets is refused with the count in the message.

mod common;

use common::{loom, loom_ok, Cluster};

#[test]
fn up_servers_packs_targets_into_n_server_processes() {
    let cluster = Cluster::up(2, 3, &["--servers", "2"]);
    // mgs, mdt0, mdt1, ost0, ost1, ost2 dealt to server0, server1, server0, ...
    let expect = [
        ("server0", vec!["mgs", "mdt1", "ost1"]),
        ("server1", vec!["mdt0", "ost0", "ost2"]),
    ];
    let mut pids = Vec::new();
    for (node, targets) in &expect {
        let cfg = std::fs::read_to_string(cluster.state.join(format!("nodes/{node}.toml")))
            .expect("node config");
        let line = cfg
            .lines()
            .find(|l| l.starts_with("targets"))
            .expect("targets line");
        let listed: Vec<&str> = line
            .split('"')
            .filter(|s| s.starts_with("../targets/"))
            .map(|s| s.trim_start_matches("../targets/"))
            .collect();
        assert_eq!(&listed, targets, "{node}");
        let pid = cluster.pid(node);
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).expect("server is alive");
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        assert!(cmdline.contains(&format!("nodes/{node}.toml")), "{cmdline}");
        assert!(cluster.state.join(format!("logs/{node}.log")).is_file());
        pids.push(pid);
    }
    assert_ne!(pids[0], pids[1]);
    let pid_files = std::fs::read_dir(cluster.state.join("pids"))
        .expect("pids")
        .count();
    assert_eq!(pid_files, 2, "one pid file per server process");
    // The MGS keeps its port under "mgs" whatever the packing.
    assert_eq!(
        cluster
            .ports()
            .iter()
            .find(|(n, _)| n == "mgs")
            .map(|p| p.1),
        Some(
            cluster
                .mgs()
                .rsplit(':')
                .next()
                .expect("port")
                .parse()
                .expect("port")
        )
    );

    // The file system works across both processes: a file striped over
    // all three OSTs (two of them in server1, one in server0).
    let f = cluster.path("wide");
    loom_ok(&[
        "setstripe",
        "-c",
        "3",
        "-S",
        "64k",
        f.to_str().expect("utf8"),
    ]);
    let data: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&f, &data).expect("write");
    assert_eq!(std::fs::read(&f).expect("read"), data);
    let df = loom_ok(&["df", cluster.mnt.to_str().expect("utf8")]);
    for t in ["MDT0000", "MDT0001", "OST0000", "OST0001", "OST0002"] {
        assert!(df.contains(t), "{df}");
    }

    loom_ok(&["down", "--dir", cluster.state.to_str().expect("utf8")]);
    for pid in pids {
        assert!(
            std::fs::metadata(format!("/proc/{pid}")).is_err()
                || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .map(|s| s.contains(") Z "))
                    .unwrap_or(true),
            "server {pid} still running after loom down"
        );
    }
}

#[test]
fn more_server_processes_than_targets_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let o = loom(&[
        "up",
        "--mdts",
        "1",
        "--osts",
        "1",
        "--servers",
        "4",
        "--no-mount",
        "--dir",
        tmp.path().join("state").to_str().expect("utf8"),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("--servers 4") && err.contains("3 targets"),
        "{err}"
    );
}
