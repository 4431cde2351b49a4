//! The policy engine's tests, run against SQLite and against a real
//! PostgreSQL server through the same body.

use super::*;

/// A fresh PostgreSQL database on the local server (started if it is
/// not), dropped at the end.
pub struct Pg {
    pub url: String,
    name: String,
}

const ROLE: &str = "loomtest";

fn psql(sql: &str) -> Output {
    Command::new("runuser")
        .args([
            "-u",
            "postgres",
            "--",
            "psql",
            "-v",
            "ON_ERROR_STOP=1",
            "-q",
            "-c",
            sql,
        ])
        .output()
        .expect("psql")
}

impl Pg {
    pub fn new() -> Pg {
        // The README's set-up installs it; start it if it is down.
        let up = Command::new("pg_lsclusters")
            .arg("-h")
            .output()
            .expect("pg_lsclusters");
        let list = String::from_utf8_lossy(&up.stdout).to_string();
        for line in list.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() >= 4 && f[3] != "online" {
                // pg_ctlcluster waits until it serves; one started by
                // another test at the same moment fails here but is up.
                let st = Command::new("pg_ctlcluster")
                    .args([f[0], f[1], "start"])
                    .status()
                    .expect("pg_ctlcluster");
                let now = Command::new("pg_lsclusters")
                    .args(["-h", f[0], f[1]])
                    .output()
                    .expect("pg_lsclusters");
                assert!(
                    st.success() || String::from_utf8_lossy(&now.stdout).contains("online"),
                    "starting PostgreSQL {} {}",
                    f[0],
                    f[1]
                );
            }
        }
        assert!(
            !list.trim().is_empty(),
            "no PostgreSQL cluster: run the README's set-up"
        );
        let o = psql(&format!(
            "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{ROLE}') THEN CREATE ROLE {ROLE} LOGIN PASSWORD '{ROLE}'; END IF; END $$;"
        ));
        // Two tests on a fresh server may both find the role missing;
        // the one that loses the race finds it made.
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            o.status.success() || err.contains("already exists"),
            "{err}"
        );
        let name = format!("loomcat_{}_{}", std::process::id(), rand::random::<u32>());
        let o = psql(&format!("CREATE DATABASE {name} OWNER {ROLE}"));
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        Pg {
            url: format!("postgres://{ROLE}:{ROLE}@127.0.0.1:5432/{name}"),
            name,
        }
    }
}

impl Drop for Pg {
    fn drop(&mut self) {
        let _ = psql(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        ));
    }
}

/// `loom policy dump` of `catalog`, as sorted lines.
pub fn dump(c: &Cluster, catalog: &str) -> Vec<String> {
    let out = loom_ok(&[
        "policy",
        "dump",
        c.mnt.to_str().expect("utf8"),
        "--catalog",
        catalog,
    ]);
    let mut v: Vec<String> = out.lines().map(str::to_string).collect();
    v.sort();
    v
}

/// Whether the followed catalog `a` equals a fresh scan into `b`; the
/// lines that differ otherwise.
pub fn same_as_a_fresh_scan(c: &Cluster, a: &str, b: &str) -> Result<(), String> {
    let mnt = c.mnt.to_str().expect("utf8");
    loom_ok(&["policy", "follow", mnt, "--once", "-q", "--catalog", a]);
    loom_ok(&["policy", "scan", mnt, "-q", "--catalog", b]);
    // A change committed after the first follow was idle (a writer's
    // size reported late, when something asked for it) may be in the
    // scan: its record is then in the log, and a second follow has it.
    // A change without a record would still differ.
    loom_ok(&["policy", "follow", mnt, "--once", "-q", "--catalog", a]);
    let (x, y) = (dump(c, a), dump(c, b));
    if x == y {
        return Ok(());
    }
    let only_a: Vec<&String> = x.iter().filter(|l| !y.contains(l)).collect();
    let only_b: Vec<&String> = y.iter().filter(|l| !x.contains(l)).collect();
    Err(format!(
        "followed catalog ({} rows) differs from a fresh scan ({} rows):\nonly followed: {only_a:#?}\nonly scanned: {only_b:#?}",
        x.len(),
        y.len()
    ))
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf8")
}

/// Issue #31, point 5: a catalog filled by a scan and kept by the
/// changelog equals a fresh scan after a workload of every kind of
/// change (by root and by a user through a second mount), after kill -9
/// of an MDT, and after the engine itself was killed and started again.
pub fn catalog_follows_every_change(a: &str, b: &str) {
    let mut c = Cluster::up(2, 2, &[]);
    let mnt = s(&c.mnt).to_string();
    let d = c.path("d");
    std::fs::create_dir(&d).expect("mkdir");
    loom_ok(&["mkdir", "-i", "1", s(&d.join("remote"))]);
    loom_ok(&["setdirstripe", "-c", "2", s(&d.join("striped"))]);
    sh(&format!(
        r#"set -e; cd {}
        mkdir sub users; chown 65534:65534 users
        echo one > a; head -c 100000 /dev/urandom > sub/b; ln a sub/a-link; ln -s a sym; mkfifo fifo
        for i in $(seq 1 40); do echo $i > striped/f$i; done
        for i in 1 2 3 4 5; do head -c $((i * 3000)) /dev/urandom > remote/r$i; done
        touch -d '3 days ago' sub/b
        "#,
        s(&d)
    ));
    // Not a catalog yet: following is refused.
    let o = loom(&["policy", "follow", &mnt, "--once", "--catalog", a]);
    assert!(
        !o.status.success() && String::from_utf8_lossy(&o.stderr).contains("loom policy scan"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out = loom_ok(&["policy", "scan", &mnt, "--catalog", a]);
    assert!(out.contains("names"), "{out}");
    same_as_a_fresh_scan(&c, a, b).expect("right after the scan");

    // Every kind of change, by root and by a user on a second mount.
    let m2 = c.second_mount("m2");
    sh(&format!(
        r#"set -e; cd {}
        echo more >> a; truncate -s 5000 sub/b; chmod 600 sub/b; chown 65534 sub/b
        mv a remote/a-moved; mv striped/f1 striped/g1; mv striped/f3 sub/f3; rm striped/f2 sub/a-link
        mkdir new; touch new/x; mkdir new/y; rmdir new/y; ln -s remote/r1 new/sym
        setfattr -n user.k -v v remote/r2; mv -T remote/r3 remote/r4
        "#,
        s(&d)
    ));
    loom_ok(&["project", "-p", "42", "-s", "-r", s(&d.join("new"))]);
    loom_ok(&["migrate", "-c", "1", s(&d.join("sub/b"))]);
    loom_ok(&["setdirstripe", "-c", "2", s(&d.join("new2"))]);
    let o = sh_as_nobody(&format!(
        r#"set -e; cd {}
        for i in 1 2 3; do head -c $((i * 7000)) /dev/urandom > u$i; done
        mv u1 u1b; echo x >> u2; rm u3; mkdir ud; echo y > ud/z; ln u2 ud/u2-link
        "#,
        s(&m2.join("d/users"))
    ))
    .output()
    .expect("user's workload");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    same_as_a_fresh_scan(&c, a, b).expect("after the workload");

    // kill -9 of an MDT in the middle of changes: what it acknowledged
    // is in its changelog, and the catalog gets it.
    sh(&format!(
        "cd {} && for i in 1 2 3; do echo $i > remote/k$i; done; rm remote/r5",
        s(&d)
    ));
    c.kill9("mdt1");
    c.restart("mdt1");
    sh(&format!(
        "cd {} && echo after > remote/k4 && mv remote/k1 k1-here && rm striped/f10",
        s(&d)
    ));
    same_as_a_fresh_scan(&c, a, b).expect("after kill -9 of MDT1");

    // The engine killed while it follows, changes made while it is down:
    // started again, it misses none.
    let log = c.tmp.path().join("follow.log");
    let mut follower = Command::new(loom_bin())
        .args(["policy", "follow", &mnt, "--catalog", a])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("loom policy follow");
    sh(&format!(
        "cd {} && for i in $(seq 1 30); do echo $i > sub/w$i; done",
        s(&d)
    ));
    follower.kill().expect("kill -9 the follower");
    follower.wait().expect("wait");
    sh(&format!(
        "cd {} && rm sub/w1 sub/w2 && mv sub/w3 remote/",
        s(&d)
    ));
    same_as_a_fresh_scan(&c, a, b).expect("after the engine's own kill -9");
    loom_ok(&["policy", "forget", &mnt, "--catalog", a]);
    loom_ok(&["policy", "forget", &mnt, "--catalog", b]);
}

/// Issue #31, points 5 and 6: each rule with --dry-run and for real,
/// the report against GNU find, and bad input refused before anything
/// is done.
pub fn rules_act(cat: &str) {
    let mut c = Cluster::up(1, 2, &[]);
    let mnt = s(&c.mnt).to_string();
    loom_ok(&["pool", "new", &mnt, "archive"]);
    loom_ok(&["pool", "add", &mnt, "archive", "1"]);
    let root = c.mnt.clone();
    sh(&format!(
        r#"set -e; cd {}
        mkdir -p scratch/deep outside proj u; chown 65534:65534 u
        loom() {{ {} "$@"; }}
        loom setstripe -i 0 -c 1 proj
        for f in scratch/old1 scratch/old2 scratch/deep/old3 outside/old4; do echo old > $f; touch -d '40 days ago' $f; done
        echo linked > scratch/linked; ln scratch/linked outside/linked; touch -d '40 days ago' scratch/linked
        echo new > scratch/new1; echo recent > scratch/deep/new2; touch -a -d '40 days ago' scratch/deep/new2
        head -c 300000 /dev/urandom > proj/cold1; touch -d '100 days ago' proj/cold1
        head -c 300000 /dev/urandom > proj/hot1
        head -c 100000 /dev/urandom > rootfile
        "#,
        s(&root),
        s(&loom_bin())
    ));
    let o = sh_as_nobody(&format!(
        "cd {} && for i in 1 2 3; do head -c 1000000 /dev/urandom > big$i; done",
        s(&root.join("u"))
    ))
    .output()
    .expect("user writes");
    assert!(o.status.success());
    loom_ok(&["policy", "scan", &mnt, "-q", "--catalog", cat]);

    // The report, against GNU find through the mount.
    let rep: serde_json::Value = serde_json::from_str(&loom_ok(&[
        "policy",
        "report",
        &mnt,
        "--json",
        "--catalog",
        cat,
    ]))
    .expect("json");
    // Each inode once, as the catalog counts them (a hard link is a
    // second name of one file).
    let found = sh(&format!(
        "find {} -type f -printf '%i %U %s\\n' | sort -u -k1,1",
        s(&root)
    ));
    let mut per: std::collections::BTreeMap<i64, (i64, i64)> = Default::default();
    for l in found.lines() {
        let mut f = l.split_whitespace().map(|x| x.parse::<i64>().expect("n"));
        let (u, size) = (f.nth(1).expect("uid"), f.next().expect("size"));
        let e = per.entry(u).or_default();
        e.0 += 1;
        e.1 += size;
    }
    for (uid, (files, bytes)) in &per {
        let u = rep["users"]
            .as_array()
            .expect("users")
            .iter()
            .find(|x| x["id"] == *uid)
            .unwrap_or_else(|| panic!("uid {uid} in {rep}"));
        assert_eq!(
            (u["files"].as_i64(), u["bytes"].as_i64()),
            (Some(*files), Some(*bytes)),
            "uid {uid}"
        );
    }
    let total: i64 = rep["sizes"]
        .as_array()
        .expect("sizes")
        .iter()
        .map(|b| b["files"].as_i64().expect("n"))
        .sum();
    assert_eq!(
        total,
        per.values().map(|x| x.0).sum::<i64>(),
        "the size histogram counts every file"
    );
    let old: i64 = rep["ages"]
        .as_array()
        .expect("ages")
        .iter()
        .filter(|b| {
            b["label"] == ">= 1 year" || b["label"] == "< 1 year" || b["label"] == "< 90 days"
        })
        .map(|b| b["files"].as_i64().expect("n"))
        .sum();
    assert_eq!(old, 6, "files older than 30 days: {rep}");
    let text = loom_ok(&["policy", "report", &mnt, "--catalog", cat]);
    assert!(
        text.contains("Largest directories") && text.contains("/scratch"),
        "{text}"
    );

    let rules = c.tmp.path().join("rules.toml");
    std::fs::write(
        &rules,
        r#"
[[purge]]
name = "scratch"
tree = "/scratch"
unused_days = 30

[[migrate]]
name = "cold"
tree = "/proj"
older_than_days = 90
pool = "archive"

[[alert]]
name = "big-users"
per = "user"
bytes = "2M"
"#,
    )
    .expect("rules");
    let r = s(&rules).to_string();
    let exists = |p: &str| root.join(p).exists();
    let osts = |p: &str| -> Vec<u32> { c.stripes(s(&root.join(p))).iter().map(|x| x.0).collect() };
    assert_eq!(osts("proj/cold1"), vec![0]);

    // Dry run: says what it would do, does nothing.
    let out = loom_ok(&[
        "policy",
        "run",
        &mnt,
        "--rules",
        &r,
        "--dry-run",
        "--once",
        "--catalog",
        cat,
    ]);
    for want in [
        "would purge /scratch/old1 ",
        "would purge /scratch/old2 ",
        "would purge /scratch/deep/old3 ",
        "would migrate /proj/cold1 ",
        "ALERT user 65534",
    ] {
        assert!(out.contains(want), "{want} in {out}");
    }
    for not in ["new1", "new2", "old4", "linked", "hot1", "ALERT user 0"] {
        assert!(!out.contains(not), "{not} in {out}");
    }
    for p in ["scratch/old1", "scratch/old2", "scratch/deep/old3"] {
        assert!(exists(p), "{p} removed by a dry run");
    }
    assert_eq!(osts("proj/cold1"), vec![0], "moved by a dry run");

    // Bad input: a clear error, nothing done.
    std::fs::write(
        c.tmp.path().join("bad.toml"),
        "[[purge]]\nname = 'scratch'\ntree = '/scratch'\nunused_days = 'thirty'\n",
    )
    .expect("bad");
    let nopool = c.tmp.path().join("nopool.toml");
    std::fs::write(&nopool, "[[purge]]\nname='p'\ntree='/scratch'\nunused_days=30\n[[migrate]]\nname='m'\nolder_than_days=1\npool='tape'\n").expect("nopool");
    for (args, why) in [
        (
            vec!["--rules", s(&c.tmp.path().join("bad.toml"))],
            "not valid rules",
        ),
        (vec!["--rules", s(&nopool)], "no OST pool tape"),
        (
            vec!["--rules", "/nonexistent/rules.toml"],
            "cannot read the rules file",
        ),
        (vec!["--rules", &r, "--rate=-1"], "--rate"),
        (vec!["--rules", &r, "--interval", "0"], "--interval"),
    ] {
        let mut full = vec!["policy", "run", &mnt, "--once", "--catalog", cat];
        full.extend(args);
        let o = loom(&full);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(why), "{full:?}: {err}");
    }
    let o = loom(&[
        "policy",
        "report",
        &mnt,
        "--catalog",
        "postgres://nobody:x@127.0.0.1:9/none",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success()
            && err.contains("cannot reach the PostgreSQL catalog")
            && !err.contains(":x@"),
        "{err}"
    );
    let o = as_nobody(&[s(&loom_bin()), "policy", "report", &mnt, "--catalog", cat]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("only root"));
    for p in ["scratch/old1", "scratch/old2", "scratch/deep/old3"] {
        assert!(exists(p), "{p} removed by a rules file that failed");
    }

    // For real, with a log.
    let logf = c.tmp.path().join("actions.log");
    let out = loom_ok(&[
        "policy",
        "run",
        &mnt,
        "--rules",
        &r,
        "--once",
        "--catalog",
        cat,
        "--log",
        s(&logf),
        "--rate",
        "100",
    ]);
    for p in ["scratch/old1", "scratch/old2", "scratch/deep/old3"] {
        assert!(!exists(p), "{p} not purged: {out}");
    }
    for p in [
        "scratch/new1",
        "scratch/deep/new2",
        "outside/old4",
        "scratch/linked",
        "outside/linked",
        "proj/hot1",
        "rootfile",
    ] {
        assert!(exists(p), "{p} purged: {out}");
    }
    assert_eq!(osts("proj/cold1"), vec![1], "cold1 on pool archive: {out}");
    assert_eq!(osts("proj/hot1"), vec![0]);
    let logged = std::fs::read_to_string(&logf).expect("log");
    assert_eq!(
        logged.lines().filter(|l| l.contains(": done")).count(),
        4,
        "{logged}"
    );
    assert!(logged.contains("ALERT user 65534"), "{logged}");
    // The pass published the report: the dashboard's Policy panel, as
    // headless Chromium renders it, shows the user's files as find does.
    let port = c.port("dashboard").expect("a dashboard port");
    let o = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
        ])
        .arg(format!(
            "--user-data-dir={}",
            c.tmp.path().join("chromium").display()
        ))
        .args(["--virtual-time-budget=4000", "--dump-dom"])
        .arg(format!("http://127.0.0.1:{port}/"))
        .output()
        .expect("chromium (Debian package chromium)");
    let dom = String::from_utf8_lossy(&o.stdout);
    let inodes = sh(&format!("find {} -uid 65534 | wc -l", s(&root)))
        .trim()
        .to_string();
    let (files, bytes) = per.get(&65534).copied().expect("the user's files");
    let human = {
        let (mut v, mut i) = (bytes as f64, 0);
        while v >= 1024.0 && i < 5 {
            v /= 1024.0;
            i += 1;
        }
        format!("{v:.1}{}", ["B", "K", "M", "G", "T", "P"][i])
    };
    let row = format!("<tr data-id=\"65534\"><td>65534</td><td>{inodes}</td><td>{files}</td><td>{human}</td></tr>");
    assert!(dom.contains(&row), "{row} not on the dashboard: {dom}");
    assert!(
        dom.contains("<tr data-id=\"/scratch\">"),
        "largest directories: {dom}"
    );

    // The next pass: nothing left to do, the alert not raised again.
    let out = loom_ok(&[
        "policy",
        "run",
        &mnt,
        "--rules",
        &r,
        "--once",
        "--catalog",
        cat,
    ]);
    assert!(
        out.contains("0 acted on") && out.contains("0 alerts") && !out.contains("ALERT"),
        "{out}"
    );

    // As a service: an MDT killed and restarted under it, it goes on and
    // purges a file that became a candidate meanwhile.
    let svc_log = c.tmp.path().join("service.log");
    let svc = Server(
        Command::new(loom_bin())
            .args([
                "policy",
                "run",
                &mnt,
                "--rules",
                &r,
                "--catalog",
                cat,
                "--interval",
                "1",
            ])
            .stdout(std::fs::File::create(&svc_log).expect("log"))
            .stderr(std::fs::File::create(c.tmp.path().join("service.err")).expect("log"))
            .spawn()
            .expect("loom policy run"),
    );
    c.kill9("mdt0");
    c.restart("mdt0");
    let late = root.join("scratch/late");
    sh(&format!(
        "echo old > {0}; touch -d '40 days ago' {0}",
        s(&late)
    ));
    let gone = within(move || {
        while late.exists() {
            std::thread::yield_now();
        }
    });
    drop(svc);
    let logged = std::fs::read_to_string(&svc_log).expect("log");
    let err = std::fs::read_to_string(c.tmp.path().join("service.err")).unwrap_or_default();
    assert!(
        gone.is_some(),
        "the service did not purge scratch/late: {logged}{err}"
    );
    assert!(
        logged.contains("purge /scratch/late ") && logged.contains(": done"),
        "{logged}"
    );
    loom_ok(&["policy", "forget", &mnt, "--catalog", cat]);
}
