//! The changelog (issue #28): every namespace change made through the
//! mount, by root and by an unprivileged user, is recorded once, in
//! order, with its type, FIDs, names, caller and job; consumers register,
//! acknowledge and are purged up to; bad requests say why and change
//! nothing; only root reads or manages the log. Real servers from `loom
//! up` with 2 MDTs, real FUSE mounts, and the MDT's wire protocol as a
//! user's process would speak it.
mod common;
use common::*;
use loom_proto::msg::{MdtRequest, MgsRequest, Reply, ReqCtx, Request, TargetId};
use loom_proto::{Errno, Fid};
use loom_rpc::{ClientOptions, RpcClient};
use serde_json::Value;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Runs one user's operations in directory argv[1] with Python's thin
/// wrappers over the system calls (so each is one FUSE request), and
/// prints the records each must leave, in order, as JSON: type, inode
/// numbers of the FID changed and of the name's directory, name, flags
/// that must be set, rename source and the inode it replaced.
const OPS: &str = r#"
import json, os, subprocess, sys
b = sys.argv[1]
root = os.getuid() == 0
ino = lambda p: os.lstat(p).st_ino
out = []
def e(t, fid, parent, name=None, flags=0, source=None, replaced=None):
    out.append(dict(type=t, fid=fid, parent=parent, name=name, flags=flags,
                    source=source, replaced=replaced))
W = os.O_CREAT | os.O_WRONLY | os.O_EXCL
d = b + "/d"; os.mkdir(d, 0o755); D = ino(d); e("MKDIR", D, ino(b), "d")
f = d + "/f"; fd = os.open(f, W, 0o644); F = ino(f); e("CREAT", F, D, "f")
os.write(fd, b"x" * 5000); os.close(fd)
os.mkfifo(d + "/p"); P = ino(d + "/p"); e("MKNOD", P, D, "p")
os.symlink("f", d + "/s"); S = ino(d + "/s"); e("SLINK", S, D, "s")
os.link(f, d + "/h"); e("HLINK", F, D, "h")
os.rename(d + "/h", d + "/h2"); e("RENME", F, D, "h2", source=[D, "h"])
os.close(os.open(d + "/g", W, 0o600)); G = ino(d + "/g"); e("CREAT", G, D, "g")
os.rename(d + "/g", d + "/h2"); e("RENME", G, D, "h2", source=[D, "g"], replaced=F)
os.chmod(f, 0o600); e("SATTR", F, D, flags=0x1)
os.truncate(f, 1); e("TRUNC", F, D, flags=0x8)
os.utime(f, (1, 2)); e("SATTR", F, D, flags=0x30)
os.setxattr(f, "user.k", b"v"); e("XATTR", F, D, "user.k")
os.removexattr(f, "user.k"); e("XATTR", F, D, "user.k", flags=0x400)
if root:
    os.chown(f, 65534, 65534); e("SATTR", F, D, flags=0x6)
    subprocess.run(["LOOM", "setstripe", "-c", "2", d], check=True)
    e("LYOUT", D, ino(b))
os.unlink(d + "/h2"); e("UNLNK", G, D, "h2", flags=0x100)
os.unlink(f); e("UNLNK", F, D, "f", flags=0x100)
os.unlink(d + "/p"); e("UNLNK", P, D, "p", flags=0x100)
os.unlink(d + "/s"); e("UNLNK", S, D, "s", flags=0x100)
os.rmdir(d); e("RMDIR", D, ino(b), "d", flags=0x100)
fd = os.open(b + "/w", W, 0o644); W_ = ino(b + "/w"); e("CREAT", W_, ino(b), "w")
os.write(fd, b"y" * 100); os.close(fd)
print(json.dumps(dict(records=out, written=[F, W_])))
"#;

fn fid_of_ino(ino: u64) -> String {
    Fid::from_ino(ino).to_string()
}

fn changelog(c: &Cluster, extra: &[&str]) -> Vec<Value> {
    changelog_records(c, extra)
}

/// Run [`OPS`] in `dir`, as root or as nobody, under job `job`: the
/// records it expects, and the inodes it wrote.
fn run_ops(c: &Cluster, dir: &Path, job: &str, nobody: bool) -> (Vec<Value>, Vec<u64>) {
    let script = c.tmp.path().join("ops.py");
    let text = OPS.replace(
        "\"LOOM\"",
        &format!("{:?}", loom_bin().display().to_string()),
    );
    std::fs::write(&script, text).expect("write the script");
    let o = python3(nobody)
        .env("SLURM_JOB_ID", job)
        .arg(&script)
        .arg(dir)
        .output()
        .expect("python3");
    assert!(
        o.status.success(),
        "the operations failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&o.stdout).expect("the script's JSON");
    let recs = v["records"].as_array().expect("records").clone();
    let written = v["written"]
        .as_array()
        .expect("written")
        .iter()
        .map(|i| i.as_u64().expect("ino"))
        .collect();
    (recs, written)
}

/// Check that `got` (one user's records, CLOSE left out) are `want`,
/// field by field, by `uid:gid` under `job`.
fn check(got: &[&Value], want: &[Value], uid: u64, job: &str) {
    let types = |v: &[&Value]| -> Vec<String> {
        v.iter()
            .map(|r| format!("{} {}", r["type"], r["name"]))
            .collect()
    };
    let want_refs: Vec<&Value> = want.iter().collect();
    assert_eq!(
        types(got),
        types(&want_refs),
        "the records, in order (type and name)"
    );
    for (g, w) in got.iter().zip(want) {
        let what = format!("record {g}");
        let ino = |k: &str| w[k].as_u64().map(fid_of_ino);
        assert_eq!(
            g["fid"].as_str().map(str::to_string),
            ino("fid"),
            "fid of {what}"
        );
        assert_eq!(
            g["parent"].as_str().map(str::to_string),
            ino("parent"),
            "parent of {what}"
        );
        let flags = w["flags"].as_u64().expect("flags");
        assert_eq!(
            g["flags"].as_u64().expect("flags") & 0x7ff,
            flags,
            "flags of {what}"
        );
        match w["source"].as_array() {
            Some(s) => {
                assert_eq!(
                    g["source_parent"].as_str(),
                    Some(fid_of_ino(s[0].as_u64().expect("ino")).as_str()),
                    "source of {what}"
                );
                assert_eq!(g["source_name"], s[1], "source name of {what}");
            }
            None => assert!(g["source_parent"].is_null(), "no source in {what}"),
        }
        assert_eq!(
            g["replaced"].as_str().map(str::to_string),
            ino("replaced"),
            "replaced of {what}"
        );
        assert_eq!(g["uid"].as_u64(), Some(uid), "uid of {what}");
        assert_eq!(g["gid"].as_u64(), Some(uid), "gid of {what}");
        assert_eq!(g["jobid"].as_str(), Some(job), "job of {what}");
    }
}

#[test]
fn every_operation_is_recorded_once_in_order_with_its_caller() {
    let mut c = Cluster::up(2, 2, &[]);
    let mnt = c.mnt.to_str().expect("utf-8").to_string();
    let mnt = mnt.as_str();
    // A directory on MDT1 every user may write in, made before any
    // consumer registers: nothing is recorded until one does.
    let pubdir = c.path("pub");
    loom_ok(&["mkdir", "-i", "1", pubdir.to_str().expect("utf-8")]);
    sh(&format!("chmod 1777 {}", pubdir.display()));
    assert_eq!(mdt_of(&pubdir), 1);
    assert!(changelog(&c, &[]).is_empty(), "recorded before a consumer");
    let reg = loom_ok(&["changelog", "register", mnt]);
    assert_eq!(
        reg.matches("registered consumer cl1").count(),
        2,
        "one consumer on each MDT: {reg}"
    );

    // Root on MDT0 (the mount's root), then nobody in the directory on
    // MDT1 (each user's records on their directory's MDT).
    let rootdir = c.path("");
    let (want_root, wrote_root) = run_ops(&c, &rootdir, "cl-root", false);
    let (want_user, wrote_user) = run_ops(&c, &pubdir, "cl-nobody", true);
    // A stat from a second mount asks the MDTs for the sizes the writers
    // report, if they have not yet.
    let other = c.second_mount("m2");
    for dir in [other.clone(), other.join("pub")] {
        let w = std::fs::metadata(dir.join("w")).expect("stat w");
        assert_eq!(w.len(), 100, "{}", dir.display());
    }

    let all = changelog(&c, &[]);
    // Record numbers on each MDT run from 1 with no gap or repeat.
    assert_numbered_from_one(&all, &[0, 1]);
    let on = |mdt: u64, uid: u64| -> Vec<&Value> {
        all.iter()
            .filter(|r| r["mdt"] == mdt && r["uid"] == uid && r["type"] != "CLOSE")
            .collect()
    };
    check(&on(0, 0), &want_root, 0, "cl-root");
    check(&on(1, 65534), &want_user, 65534, "cl-nobody");
    assert!(on(1, 0).is_empty() && on(0, 65534).is_empty(), "{all:#?}");

    // A CLOSE for each file written, by its writer, once; none for a file
    // made and closed without a write.
    for (mdt, uid, wrote) in [(0, 0, &wrote_root), (1, 65534, &wrote_user)] {
        let closes: Vec<String> = all
            .iter()
            .filter(|r| r["mdt"] == mdt && r["type"] == "CLOSE")
            .map(|r| {
                assert_eq!(r["uid"].as_u64(), Some(uid), "{r}");
                r["fid"].as_str().expect("fid").to_string()
            })
            .collect();
        let mut want: Vec<String> = wrote.iter().map(|i| fid_of_ino(*i)).collect();
        let mut got = closes.clone();
        want.sort();
        got.sort();
        assert_eq!(got, want, "MDT{mdt}'s CLOSE records");
    }

    // --mask and --mdt choose records; the text form has the same ones.
    let creates = changelog(&c, &["--mask", "creat,mkdir", "--mdt", "1"]);
    assert!(!creates.is_empty());
    assert!(creates
        .iter()
        .all(|r| r["mdt"] == 1 && (r["type"] == "CREAT" || r["type"] == "MKDIR")));
    assert_eq!(
        creates.len(),
        want_user
            .iter()
            .filter(|r| r["type"] == "CREAT" || r["type"] == "MKDIR")
            .count()
    );
    let text = loom_ok(&["changelog", mnt]);
    assert_eq!(text.lines().count(), all.len());
    assert!(
        text.lines()
            .any(|l| l.contains(" RENME ") && l.contains(" h2 s=")),
        "{text}"
    );
    let since = changelog(&c, &["--since", "3", "--mdt", "0"]);
    assert_eq!(since[0]["index"].as_u64(), Some(3));
}

/// Send `req` to MDT0 as `uid` with the client key, as a user's process
/// holding it would.
fn ask_as(c: &Cluster, uid: u32, req: MdtRequest) -> Result<Reply, Errno> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    let key = key(c, "client.key");
    rt.block_on(async {
        let mgs = RpcClient::new(c.mgs(), key.clone(), ClientOptions::default());
        let get = MgsRequest::GetConfig.into();
        let cfg = match ask_raw(&mgs, TargetId::MGS, ReqCtx::default(), get).await {
            Ok(Reply::Config(cfg)) => cfg,
            other => panic!("GetConfig: {other:?}"),
        };
        let addr = cfg.target(TargetId::mdt(0)).expect("MDT0").addr.clone();
        let ctx = ReqCtx {
            uid,
            gid: uid,
            ..ReqCtx::default()
        };
        let rpc = RpcClient::new(addr, key, ClientOptions::default());
        ask_raw(&rpc, TargetId::mdt(0), ctx, Request::Mdt(req)).await
    })
}

#[test]
fn consumers_acknowledge_records_which_are_purged_up_to_the_slowest() {
    let c = Cluster::up(2, 1, &[]);
    let mnt = c.mnt.to_str().expect("utf-8");
    // Only root reads or manages the log, over the wire as through the tool.
    for req in [
        MdtRequest::ChangelogRegister,
        MdtRequest::ChangelogRead {
            since: 1,
            max: 10,
            wait_ms: 0,
        },
        MdtRequest::ChangelogClear { user: 1, upto: 0 },
    ] {
        assert_eq!(ask_as(&c, 65534, req.clone()), Err(Errno::EPERM), "{req:?}");
    }
    loom_ok(&["changelog", "register", mnt]);
    loom_ok(&["changelog", "register", mnt, "--mdt", "0"]);
    let users = loom_ok(&["changelog", "users", mnt]);
    assert!(users.contains("cl2"), "{users}");
    for i in 0..10 {
        sh(&format!("touch {mnt}/f{i}"));
    }
    // 10 creates and 10 time changes (touch), on MDT0.
    let n = changelog(&c, &["--mdt", "0"]).len() as u64;
    assert_eq!(n, 20);
    let users = loom_ok(&["changelog", "users", mnt]);
    assert!(
        users.contains(&format!("cl1: acknowledged up to 0, lag {n} records"))
            && users.contains(&format!("cl2: acknowledged up to 0, lag {n} records")),
        "{users}"
    );
    // The lag shows in `loom stats` and in the MDT's metrics.
    let stats: Value = serde_json::from_str(&loom_ok(&["stats", mnt, "--json"])).expect("JSON");
    let mdt0 = stats
        .as_array()
        .expect("targets")
        .iter()
        .find(|t| t["target"].as_str().is_some_and(|n| n.ends_with("MDT0000")))
        .expect("MDT0's stats");
    let lags: Vec<(String, u64)> = mdt0["changelog"]["consumers"]
        .as_array()
        .expect("consumers")
        .iter()
        .map(|u| {
            (
                u["id"].as_str().expect("id").into(),
                u["lag"].as_u64().expect("lag"),
            )
        })
        .collect();
    assert_eq!(lags, vec![("cl1".into(), n), ("cl2".into(), n)]);
    let metrics = scrape_metrics(c.port("metrics-mdt0").expect("the MDT's metrics port"));
    for id in ["cl1", "cl2"] {
        let line = format!(
            "loom_changelog_consumer_lag_records{{target=\"MDT0000\",consumer=\"{id}\"}} {n}"
        );
        assert!(metrics.contains(&line), "{line} in\n{metrics}");
    }
    // cl1 read up to 12: nothing is purged while cl2 has not.
    loom_ok(&["changelog", "clear", mnt, "cl1", "12", "--mdt", "0"]);
    assert_eq!(changelog(&c, &["--mdt", "0"])[0]["index"].as_u64(), Some(1));
    let users = loom_ok(&["changelog", "users", mnt]);
    assert!(users.contains(&format!("lag {}", n - 12)), "{users}");
    // cl2 read up to 5: records 1..=5 go.
    loom_ok(&["changelog", "clear", mnt, "2", "5", "--mdt", "0"]);
    let left = changelog(&c, &["--mdt", "0"]);
    assert_eq!(left[0]["index"].as_u64(), Some(6));
    assert_eq!(left.len() as u64, n - 5);
    // Asking from before the oldest kept starts at the oldest.
    assert_eq!(
        changelog(&c, &["--mdt", "0", "--since", "2"])[0]["index"].as_u64(),
        Some(6)
    );
    // Bad requests say why and change nothing.
    for (args, says) in [
        (
            vec!["clear", mnt, "cl9", "1", "--mdt", "0"],
            "no consumer cl9",
        ),
        (
            vec!["clear", mnt, "cl1", "999", "--mdt", "0"],
            "has not written record 999",
        ),
        (vec!["clear", mnt, "clx", "1"], "not a consumer id"),
        // Record 15 is on MDT0, not on MDT1: neither MDT is cleared.
        (
            vec!["clear", mnt, "cl1", "15"],
            "MDT0001 has not written record 15",
        ),
        (vec!["deregister", mnt, "cl7"], "no consumer cl7"),
        (vec!["users", mnt, "--mdt", "9"], "unexpected argument"),
        (vec![mnt, "--mdt", "9"], "has no MDT 9"),
        (vec![mnt, "--mask", "CREATE"], "not a record type"),
    ] {
        let mut a = vec!["changelog"];
        a.extend(args.iter().copied());
        let o = loom(&a);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "loom {a:?} succeeded");
        assert!(err.contains(says), "loom {a:?}: {err}");
    }
    assert_eq!(changelog(&c, &["--mdt", "0"]).len() as u64, n - 5);
    let users = loom_ok(&["changelog", "users", mnt]);
    assert!(users.contains("cl1: acknowledged up to 12,"), "{users}");
    // cl2 leaves: what only it kept (up to cl1's 12) is purged.
    loom_ok(&["changelog", "deregister", mnt, "cl2", "--mdt", "0"]);
    assert_eq!(
        changelog(&c, &["--mdt", "0"])[0]["index"].as_u64(),
        Some(13)
    );
    // The last consumer leaves: nothing is kept or recorded any more.
    loom_ok(&["changelog", "deregister", mnt, "cl1"]);
    sh(&format!("touch {mnt}/after"));
    assert!(changelog(&c, &[]).is_empty());
    // A consumer registered later gets numbers that go on from before.
    loom_ok(&["changelog", "register", mnt, "--mdt", "0"]);
    sh(&format!("mkdir {mnt}/later"));
    let later = changelog(&c, &["--mdt", "0"]);
    assert_eq!(later.len(), 1);
    assert_eq!(later[0]["index"].as_u64(), Some(n + 1));
    assert_eq!(later[0]["type"], "MKDIR");
}

/// Cross-MDT changes by an unprivileged user: each MDT they touch
/// records its part once, flagged PART, with the user's identity and job.
const CROSS: &str = r#"
import json, os, sys
a, b = sys.argv[1], sys.argv[2]          # directories on MDT0 and MDT1
ino = lambda p: os.lstat(p).st_ino
out = []
def e(t, fid, mdts):
    out.append(dict(type=t, fid=fid, mdts=mdts))
os.close(os.open(a + "/f", os.O_CREAT | os.O_WRONLY, 0o644)); F = ino(a + "/f")
e("CREAT", F, [0])
os.rename(a + "/f", b + "/g"); e("RENME", F, [0, 1])
os.link(b + "/g", b + "/l"); e("HLINK", F, [0, 1])
os.unlink(b + "/l"); e("UNLNK", F, [0, 1])
os.mkdir(b + "/d"); D = ino(b + "/d"); e("MKDIR", D, [1])
os.rename(b + "/d", a + "/d2"); e("RENME", D, [0, 1])
os.rmdir(a + "/d2"); e("RMDIR", D, [0, 1])
print(json.dumps(out))
"#;

#[test]
fn cross_mdt_changes_are_recorded_once_on_each_mdt_they_touch() {
    let c = Cluster::up(2, 1, &[]);
    let mnt = c.mnt.to_str().expect("utf-8");
    let (a, b) = (c.path("a"), c.path("b"));
    std::fs::create_dir(&a).expect("mkdir a");
    loom_ok(&["mkdir", "-i", "1", b.to_str().expect("utf-8")]);
    sh(&format!("chmod 1777 {} {}", a.display(), b.display()));
    assert_eq!((mdt_of(&a), mdt_of(&b)), (0, 1));
    loom_ok(&["changelog", "register", mnt]);
    // Root's remote mkdir: the parent's MDT and the directory's each
    // record it.
    let r = c.path("r");
    loom_ok(&["mkdir", "-i", "1", r.to_str().expect("utf-8")]);
    let rfid = Fid::from_ino(std::fs::metadata(&r).expect("stat").ino()).to_string();
    let script = c.tmp.path().join("cross.py");
    std::fs::write(&script, CROSS).expect("write the script");
    let o = python3(true)
        .env("SLURM_JOB_ID", "cross-job")
        .arg(&script)
        .arg(&a)
        .arg(&b)
        .output()
        .expect("python3");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let want: Vec<Value> = serde_json::from_slice(&o.stdout).expect("JSON");

    // Root migrates a directory from MDT0 to MDT1: both record it, under
    // the directory's FID (which a migration keeps).
    let mig = c.path("mig");
    std::fs::create_dir(&mig).expect("mkdir mig");
    std::fs::write(mig.join("inside"), b"x").expect("a file inside");
    let mfid = Fid::from_ino(std::fs::metadata(&mig).expect("stat").ino()).to_string();
    loom_ok(&["migrate", "-m", "1", mig.to_str().expect("utf-8")]);
    assert_eq!(mdt_of(&mig), 1);

    // Root restripes a directory of MDT0 over both MDTs: its MDT records
    // the layout change (LYOUT), in the batch that sets the layout.
    let wide = c.path("wide");
    std::fs::create_dir(&wide).expect("mkdir wide");
    for i in 0..8 {
        std::fs::write(wide.join(format!("e{i}")), b"").expect("an entry");
    }
    let wfid = Fid::from_ino(std::fs::metadata(&wide).expect("stat").ino()).to_string();
    loom_ok(&[
        "migrate",
        "-c",
        "2",
        "-m",
        "0,1",
        wide.to_str().expect("utf-8"),
    ]);

    let all = changelog_records(&c, &[]);
    assert_numbered_from_one(&all, &[0, 1]);
    let layouts: Vec<&Value> = all
        .iter()
        .filter(|r| r["type"] == "LYOUT" && r["fid"].as_str() == Some(wfid.as_str()))
        .collect();
    assert_eq!(
        layouts.len(),
        1,
        "LYOUT records of the restriped directory: {layouts:?}"
    );
    assert_eq!(
        (&layouts[0]["mdt"], &layouts[0]["uid"]),
        (&Value::from(0), &Value::from(0))
    );
    for mdt in [0u64, 1] {
        let migs: Vec<&Value> = all
            .iter()
            .filter(|r| r["mdt"] == mdt && r["type"] == "MIGRT")
            .collect();
        assert_eq!(migs.len(), 1, "MDT{mdt}'s MIGRT records: {migs:?}");
        assert_eq!(migs[0]["fid"].as_str(), Some(mfid.as_str()));
        assert_eq!(migs[0]["uid"], 0);
        assert_eq!(
            migs[0]["flags"].as_u64().expect("flags") & 0x100,
            0,
            "a migrated directory is not removed: {}",
            migs[0]
        );
        let mkdirs: Vec<&Value> = all
            .iter()
            .filter(|r| r["mdt"] == mdt && r["uid"] == 0 && r["type"] == "MKDIR")
            .filter(|r| r["fid"].as_str() == Some(rfid.as_str()))
            .collect();
        assert_eq!(mkdirs.len(), 1, "MDT{mdt}: root's remote mkdir");
        assert_ne!(mkdirs[0]["flags"].as_u64().expect("flags") & 0x800, 0);
        let got: Vec<(String, String)> = all
            .iter()
            .filter(|r| r["mdt"] == mdt && r["uid"] == 65534)
            .filter(|r| r["type"] != "SATTR" && r["type"] != "CLOSE")
            .map(|r| {
                assert_eq!(r["gid"], 65534, "{r}");
                assert_eq!(r["jobid"], "cross-job", "{r}");
                (
                    r["type"].as_str().expect("type").into(),
                    r["fid"].as_str().expect("fid").into(),
                )
            })
            .collect();
        let expected: Vec<(String, String)> = want
            .iter()
            .filter(|w| {
                w["mdts"]
                    .as_array()
                    .expect("mdts")
                    .contains(&Value::from(mdt))
            })
            .map(|w| {
                let ino = w["fid"].as_u64().expect("ino");
                (w["type"].as_str().expect("type").into(), fid_of_ino(ino))
            })
            .collect();
        assert_eq!(got, expected, "MDT{mdt}'s records of the user's changes");
        // The records of changes that span MDTs say so.
        for r in all.iter().filter(|r| {
            r["mdt"] == mdt
                && r["uid"] == 65534
                && ["RENME", "HLINK", "UNLNK", "RMDIR"].contains(&r["type"].as_str().unwrap_or(""))
        }) {
            assert_ne!(
                r["flags"].as_u64().expect("flags") & 0x800,
                0,
                "PART in {r}"
            );
        }
    }
}

#[test]
fn follow_prints_each_mdts_new_records_as_they_are_committed() {
    let c = Cluster::up(2, 1, &[]);
    let mnt = c.mnt.to_str().expect("utf-8");
    loom_ok(&["changelog", "register", mnt]);
    // --follow prints each MDT's new records as they are committed.
    let far = c.path("far");
    loom_ok(&["mkdir", "-i", "1", far.to_str().expect("utf-8")]);
    let mut follow = std::process::Command::new(loom_bin())
        .args(["changelog", mnt, "--follow", "--json", "--mask", "CREAT"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("loom changelog --follow");
    let lines = std::io::BufRead::lines(std::io::BufReader::new(
        follow.stdout.take().expect("stdout"),
    ));
    sh(&format!("touch {mnt}/followed {mnt}/far/followed-far"));
    let seen = within(move || {
        let mut names = Vec::new();
        for l in lines {
            let r: Value = serde_json::from_str(&l.expect("a line")).expect("JSON");
            names.push((
                r["mdt"].as_u64().expect("mdt"),
                r["name"].as_str().expect("name").to_string(),
            ));
            if names.len() == 2 {
                break;
            }
        }
        names
    });
    let _ = follow.kill();
    let _ = follow.wait();
    let mut seen = seen.expect("--follow printed the new records");
    seen.sort();
    assert_eq!(
        seen,
        vec![(0, "followed".to_string()), (1, "followed-far".to_string())]
    );
}
