//! Issue #10: a readdir under concurrent changes. A directory striped
//! over 3 MDTs holds 600 files that stay; two other processes create,
//! rename and unlink other names in it as fast as they can while it is
//! listed again and again, through the mount and through a second mount.
//! Every listing holds every file that stayed, each exactly once, and no
//! name twice.
mod common;
use common::*;
use std::collections::HashMap;
use std::process::{Child, Command, Stdio};

/// A churning process, stopped when dropped.
struct Churn(Child);

impl Drop for Churn {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn churn(dir: &std::path::Path, tag: &str) -> Churn {
    Churn(
        Command::new("sh")
            .args(["-c", "cd \"$1\" && i=0; while :; do i=$((i+1)); : > \"$2-$i\"; mv \"$2-$i\" \"$2-$i.r\"; [ $((i % 3)) = 0 ] && rm -f \"$2-$((i-2)).r\"; done", "sh"])
            .arg(dir)
            .arg(tag)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("a churning shell"),
    )
}

fn check(listing: &[String], round: usize) {
    let mut seen: HashMap<&str, u32> = HashMap::new();
    for n in listing {
        *seen.entry(n.as_str()).or_default() += 1;
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "listing {round}: names listed twice: {twice:?}"
    );
    for i in 0..600 {
        let name = format!("keep-{i}");
        assert!(
            seen.contains_key(name.as_str()),
            "listing {round}: {name} is missing"
        );
    }
}

#[test]
fn a_striped_directory_listed_while_it_changes_lists_each_entry_once() {
    let mut c = Cluster::up(3, 1, &[]);
    let dir = c.path("wide");
    loom_ok(&["setdirstripe", "-c", "3", dir.to_str().expect("utf8")]);
    for i in 0..600 {
        std::fs::write(dir.join(format!("keep-{i}")), b"").expect("create");
    }
    let m2 = c.second_mount("m2");
    let _a = churn(&dir, "a");
    let _b = churn(&m2.join("wide"), "b");
    for round in 0..30 {
        let list_dir = if round % 2 == 0 {
            dir.clone()
        } else {
            m2.join("wide")
        };
        let listing: Vec<String> = std::fs::read_dir(&list_dir)
            .expect("list")
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        check(&listing, round);
    }
    // The churn really ran meanwhile.
    let others = std::fs::read_dir(&dir)
        .expect("list")
        .filter_map(|e| e.ok())
        .filter(|e| !e.file_name().to_string_lossy().starts_with("keep-"))
        .count();
    assert!(others > 0, "no other name was ever made");
}
