//! A tar of a few thousand real files extracted onto the mount is
//! identical to its source, names, contents, modes, symlinks and all.
mod common;
use common::*;

#[test]
fn tar_of_usr_include_extracts_identically() {
    let c = Cluster::up(1, 4, &[]);
    let dst = c.path("include");
    std::fs::create_dir(&dst).expect("mkdir on the mount");
    let n: usize = sh("find /usr/include -type f | wc -l")
        .trim()
        .parse()
        .expect("count");
    assert!(n > 2000, "/usr/include holds only {n} files");
    sh(&format!(
        "tar -C /usr/include -cf - . | tar -C {} -xpf -",
        dst.display()
    ));
    let diff = std::process::Command::new("diff")
        .arg("-r")
        .arg("--no-dereference")
        .arg("/usr/include")
        .arg(&dst)
        .output()
        .expect("diff");
    assert!(
        diff.status.success() && diff.stdout.is_empty(),
        "diff -r found differences:\n{}",
        String::from_utf8_lossy(&diff.stdout)
            .lines()
            .take(20)
            .collect::<Vec<_>>()
            .join("\n")
    );
    // Same number of entries of each type.
    for t in ["f", "d", "l"] {
        let a = sh(&format!("find /usr/include -type {t} | wc -l"));
        let b = sh(&format!("find {} -type {t} | wc -l", dst.display()));
        assert_eq!(a, b, "number of entries of type {t}");
    }
}
