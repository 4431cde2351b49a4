//! Which parts of the MDT's state each module reaches.
//!
//! `MdtService` holds three parts, one role each (see `mod.rs`):
//! `names` (the namespace store), `commit` (commit and recovery) and
//! `dne` (the distributed namespace). Rust lets every module under
//! `mdt` see them all, so the table below says which each module may
//! reach, and the test fails when a module reaches another part, or a
//! new module is not in the table: the change then says so here, where a
//! reviewer sees it. A module asks another part's question through the
//! method of the module that owns it (`is_sealed`, `intents_resolved`).

/// Each module of `mdt` and the parts it reaches; `mod.rs`, which holds
/// them and runs the commit step, reaches all three.
const REACHES: &[(&str, &[&str])] = &[
    ("mod.rs", &["names", "commit", "dne"]),
    // The one entry point of a change, and the local namespace.
    ("change.rs", &["names"]),
    ("namespace.rs", &["names"]),
    ("attrs.rs", &["names"]),
    ("acls.rs", &[]),
    ("capas.rs", &["names"]),
    ("fileset.rs", &["names"]),
    ("dom.rs", &["names"]),
    // Each change of a batch goes through `handle`, as if sent alone.
    ("batch.rs", &[]),
    ("orphans.rs", &["names"]),
    ("objects.rs", &["names"]),
    // The defaults cache is held by `names` but reaches nothing itself.
    ("defaults.rs", &[]),
    ("owners.rs", &["names"]),
    ("fsck.rs", &["names"]),
    ("grants.rs", &["names"]),
    ("writeback.rs", &["names"]),
    ("find.rs", &["names"]),
    ("datamig.rs", &["names"]),
    // Destroys wait for the commit of the unlink that freed the objects;
    // lockers are recorded durably; the changelog and quota counts are
    // written by the commit step.
    ("destroys.rs", &["names", "commit"]),
    ("locks.rs", &["names", "commit"]),
    ("changelog.rs", &["names", "commit"]),
    ("quota.rs", &["names", "commit"]),
    // The distributed namespace. A remote mkdir's part is held to the
    // caller's quota where it is made; the quota master spans all three.
    ("placement.rs", &["dne"]),
    ("intents.rs", &["names", "dne"]),
    ("moves.rs", &["names", "dne"]),
    ("migrate.rs", &["names", "dne"]),
    ("restripe.rs", &["names", "dne"]),
    // A snapshot's barrier holds the distributed and namespace locks.
    ("snapshots.rs", &["names", "dne"]),
    ("remote.rs", &["names", "commit", "dne"]),
    ("quota_master.rs", &["names", "commit", "dne"]),
    // Types of their own, reaching no part of the service.
    ("holds.rs", &[]),
    ("leases.rs", &[]),
    ("perm.rs", &[]),
    ("records.rs", &[]),
    // Each keyspace's decoder behind one entry point (the fuzz targets').
    ("stored.rs", &[]),
    ("recovery.rs", &[]),
    ("replies.rs", &[]),
    ("request.rs", &[]),
    ("staged.rs", &[]),
    ("syncer.rs", &[]),
    ("tx.rs", &[]),
    ("walk.rs", &[]),
    ("reach.rs", &[]),
];

/// The parts `source` reaches: `self.names.` and the like, across line
/// breaks, outside comments.
fn reached(source: &str) -> Vec<&'static str> {
    let code: String = source
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .flat_map(|l| l.chars())
        .filter(|c| !c.is_whitespace())
        .collect();
    ["names", "commit", "dne"]
        .into_iter()
        .filter(|part| {
            ["self", "me", "mdt", "this"]
                .iter()
                .any(|owner| code.contains(&format!("{owner}.{part}.")))
        })
        .collect()
}

#[test]
fn every_module_reaches_only_the_parts_it_declares() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/mdt");
    let mut seen = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("the mdt sources") {
        let path = entry.expect("an entry").path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if !name.ends_with(".rs") {
            continue;
        }
        seen.push(name.to_string());
        if name == "reach.rs" {
            // Its examples are strings, not reaches.
            continue;
        }
        let source = std::fs::read_to_string(&path).expect("a source");
        let declared = REACHES
            .iter()
            .find(|(m, _)| *m == name)
            .map(|(_, parts)| *parts)
            .unwrap_or_else(|| panic!("mdt/{name} is not in reach.rs's table"));
        for part in reached(&source) {
            assert!(
                declared.contains(&part),
                "mdt/{name} reaches the MDT's `{part}` part, which reach.rs does not give it"
            );
        }
    }
    for (m, _) in REACHES {
        assert!(
            seen.iter().any(|s| s == m),
            "reach.rs names mdt/{m}, which is gone"
        );
    }
}

#[test]
fn a_reach_is_seen_across_line_breaks_and_not_in_comments() {
    assert_eq!(
        reached("let s = &*self\n    .names\n    .store;"),
        ["names"]
    );
    assert!(reached("// self.commit.syncer").is_empty());
    assert_eq!(
        reached("me.dne.sealed; mdt.commit.quotas"),
        ["commit", "dne"]
    );
}
