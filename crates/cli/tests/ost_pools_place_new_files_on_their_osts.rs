//! Issue #31, point 1: OST pools. `loom pool new|add|remove|list|destroy`
//! keeps named sets of OSTs on the MGS (they survive its kill -9);
//! `setstripe -p POOL` on a file, a directory's default and a component of
//! a progressive layout puts new objects on that pool's OSTs only, spread
//! by free space within the pool; users list pools and stripe into them
//! without the key; bad pools, OSTs and names get clear errors and change
//! nothing. OST2 and OST3 live on 64 MiB tmpfs mounts so that one of them
//! can be filled behind loomfs's back.
mod common;
use common::*;
use std::collections::BTreeSet;

fn s(p: &std::path::Path) -> &str {
    p.to_str().expect("utf8")
}

/// The OSTs of each component of `file`, from `loom getstripe`.
fn component_osts(file: &str) -> Vec<BTreeSet<u32>> {
    let out = loom_ok(&["getstripe", file]);
    let mut comps: Vec<BTreeSet<u32>> = Vec::new();
    for l in out.lines() {
        if l.contains("lcme_id:") {
            comps.push(BTreeSet::new());
        }
        if let Some(i) = l.find("l_ost_idx: ") {
            let n: String = l[i + 11..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            comps
                .last_mut()
                .expect("a component")
                .insert(n.parse().expect("index"));
        }
    }
    comps
}

/// `loom ARGS` as uid 65534.
fn loom_as_nobody(args: &[&str]) -> std::process::Output {
    let bin = loom_bin();
    let mut all = vec![bin.to_str().expect("utf8")];
    all.extend_from_slice(args);
    as_nobody(&all)
}

fn fails_with(args: &[&str], why: &str) {
    let o = loom(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{args:?} succeeded");
    assert!(err.contains(why), "{args:?}: {err}");
}

#[test]
fn ost_pools_place_new_files_on_their_osts() {
    let mut c = Cluster::up_with(1, 4, &[], |state| {
        (2..4)
            .map(|i| Tmpfs::mount(&state.join(format!("targets/ost{i}")), "64m"))
            .collect()
    });
    let m = c.mnt.clone();
    let mnt = s(&m);

    // Pools are made and filled by root, shown to anyone.
    loom_ok(&["pool", "new", mnt, "fast"]);
    loom_ok(&["pool", "add", mnt, "fast", "OST0002-OST0003"]);
    loom_ok(&["pool", "new", mnt, "slow"]);
    loom_ok(&["pool", "add", mnt, "slow", "0", "1"]);
    let list = loom_ok(&["pool", "list", mnt]);
    assert_eq!(
        list.lines().collect::<Vec<_>>(),
        ["fast OST0002, OST0003", "slow OST0000, OST0001"],
        "{list}"
    );

    // Bad input: each refused with its reason, and nothing changes.
    fails_with(&["pool", "new", mnt, "fast"], "exists already");
    fails_with(
        &["pool", "add", mnt, "fast", "9"],
        "OST0009 (9) is not registered",
    );
    fails_with(
        &["pool", "add", mnt, "fast", "2"],
        "is in pool fast already",
    );
    fails_with(&["pool", "add", mnt, "nosuch", "1"], "no pool nosuch");
    fails_with(&["pool", "remove", mnt, "slow", "3"], "is not in pool slow");
    fails_with(&["pool", "destroy", mnt, "slow"], "remove them first");
    fails_with(&["pool", "new", mnt, "a_name_far_too_long"], "1 to 15");
    fails_with(&["pool", "add", mnt, "fast", "OSTxyz"], "hexadecimal");
    let f = c.path("nopool");
    fails_with(
        &["setstripe", "-p", "nosuch", s(&f)],
        "no OST pool nosuch; the pools are: fast, slow",
    );
    assert!(!f.exists(), "no file made for a refused pool");
    fails_with(
        &["setstripe", "-p", "fast", "-i", "0", s(&f)],
        "not in pool fast",
    );
    assert_eq!(
        loom_ok(&["pool", "list", mnt]),
        list,
        "refusals changed nothing"
    );

    // A file of its own striping: both stripes in the pool.
    let one = c.path("one");
    loom_ok(&["setstripe", "-p", "fast", "-c", "2", s(&one)]);
    let on: BTreeSet<u32> = c.stripes(s(&one)).iter().map(|x| x.0).collect();
    assert_eq!(on, BTreeSet::from([2, 3]), "file striped over pool fast");
    assert!(loom_ok(&["getstripe", s(&one)]).contains("lmm_pool:          fast"));
    // -c -1 is every OST of the pool, not of the file system.
    let all = c.path("all");
    loom_ok(&["setstripe", "-p", "slow", "-c", "-1", s(&all)]);
    let on: BTreeSet<u32> = c.stripes(s(&all)).iter().map(|x| x.0).collect();
    assert_eq!(on, BTreeSet::from([0, 1]));

    // A directory's default, spread by free space within the pool: with
    // OST2 about 80% full, OST3 takes most new files, OST2 some, and no
    // file lands outside the pool.
    std::fs::write(c.state.join("targets/ost2/filler"), vec![1u8; 50 << 20]).expect("fill OST2");
    let dir = c.path("d");
    std::fs::create_dir(&dir).expect("mkdir");
    loom_ok(&["setstripe", "-p", "fast", "-c", "1", s(&dir)]);
    // The MDT's view of the OSTs' usage is a few seconds old: make
    // files in batches until a batch shows the fill (each a real
    // create), then count a batch of 100.
    let mut n = 0;
    let mut batch = |size: u32| {
        let mut counts = [0u32; 4];
        for _ in 0..size {
            let f = dir.join(format!("f{n}"));
            n += 1;
            std::fs::File::create(&f).expect("create");
            let (ost, _) = c.stripes(s(&f))[0];
            counts[ost as usize] += 1;
        }
        counts
    };
    let seen = (0..200).any(|_| {
        let b = batch(10);
        assert_eq!(b[0] + b[1], 0, "files outside the pool: {b:?}");
        b[3] >= 7
    });
    assert!(
        seen,
        "no batch of 10 went mostly to the emptier OST of the pool"
    );
    let counts = batch(100);
    assert_eq!(
        counts[0] + counts[1],
        0,
        "files outside the pool: {counts:?}"
    );
    assert!(
        counts[3] > 2 * counts[2],
        "the emptier OST of the pool takes most: {counts:?}"
    );
    assert!(
        counts[2] >= 1,
        "the fuller OST of the pool still takes some: {counts:?}"
    );

    // A progressive layout whose components draw from different pools.
    let pfl = c.path("pfl");
    std::fs::create_dir(&pfl).expect("mkdir");
    loom_ok(&[
        "setstripe",
        "-E",
        "1M",
        "-c",
        "1",
        "-p",
        "slow",
        "-E",
        "-1",
        "-c",
        "2",
        "-p",
        "fast",
        s(&pfl),
    ]);
    for i in 0..6 {
        let f = pfl.join(format!("f{i}"));
        std::fs::write(&f, vec![7u8; 3 << 20]).expect("write");
        let comps = component_osts(s(&f));
        assert_eq!(comps.len(), 2, "{comps:?}");
        assert!(
            comps[0].is_subset(&BTreeSet::from([0, 1])) && comps[0].len() == 1,
            "{comps:?}"
        );
        assert_eq!(comps[1], BTreeSet::from([2, 3]), "{comps:?}");
        assert_eq!(std::fs::read(&f).expect("read").len(), 3 << 20);
    }

    // A user lists pools and stripes into them through the mount.
    let mine = c.path("mine");
    std::fs::create_dir(&mine).expect("mkdir");
    sh(&format!("chown 65534:65534 {}", s(&mine)));
    let o = loom_as_nobody(&["pool", "list", mnt]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout), list);
    let o = loom_as_nobody(&["pool", "new", mnt, "theirs"]);
    assert!(!o.status.success(), "a user made a pool");
    let theirs = mine.join("file");
    let o = loom_as_nobody(&["setstripe", "-p", "slow", "-c", "1", s(&theirs)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!([0, 1].contains(&c.stripes(s(&theirs))[0].0));
    let o = loom_as_nobody(&["setstripe", "-p", "nosuch", s(&mine)]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("no OST pool nosuch"),
        "{err}"
    );
    let o = loom_as_nobody(&["setstripe", "-p", "fast", "-c", "1", s(&mine)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = sh_as_nobody(&format!("touch {}/made", s(&mine)))
        .output()
        .expect("touch");
    assert!(o.status.success());
    assert!([2, 3].contains(&c.stripes(s(&mine.join("made")))[0].0));

    // The pools are the MGS's state: they survive its kill -9.
    c.kill9("mgs");
    c.restart("mgs");
    assert_eq!(
        loom_ok(&["pool", "list", mnt]),
        list,
        "pools after the MGS's kill -9"
    );

    // An OST taken out of a pool gets none of its new files.
    loom_ok(&["pool", "remove", mnt, "fast", "OST0002"]);
    for i in 0..10 {
        let f = dir.join(format!("after{i}"));
        std::fs::File::create(&f).expect("create");
        assert_eq!(c.stripes(s(&f))[0].0, 3, "OST2 left pool fast");
    }
    // A destroyed pool that a directory's default still names: new files
    // take any OST and record no pool; its old files keep theirs.
    loom_ok(&["pool", "remove", mnt, "fast", "3"]);
    loom_ok(&["pool", "destroy", mnt, "fast"]);
    assert_eq!(
        loom_ok(&["pool", "list", mnt]).trim(),
        "slow OST0000, OST0001"
    );
    let f = dir.join("orphaned");
    std::fs::File::create(&f).expect("create in a directory whose pool is gone");
    assert!(!loom_ok(&["getstripe", s(&f)]).contains("lmm_pool"));
    assert!(loom_ok(&["getstripe", s(&one)]).contains("lmm_pool:          fast"));
}
