//! Linux names are bytes: files, directories, symlink targets and xattr
//! names in Latin-1 or any other encoding are stored and given back
//! exactly, and tar of such a tree extracts identically.
mod common;
use common::*;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

fn os(b: &[u8]) -> &OsStr {
    OsStr::from_bytes(b)
}

#[test]
fn names_are_any_bytes_not_only_utf8() {
    let c = Cluster::up(1, 2, &[]);
    let dir = c.path("enc");
    std::fs::create_dir(&dir).expect("mkdir");
    let names: [&[u8]; 5] = [
        b"caf\xe9.txt",       // Latin-1
        b"\xff\xfe\xfd",      // not UTF-8 at all
        "żółw".as_bytes(),    // UTF-8
        b"tab\tand\nnewline", // control characters
        b"d\xe9j\xe0-vu",     // Latin-1 again
    ];
    for (i, n) in names.iter().enumerate() {
        std::fs::write(dir.join(os(n)), format!("file {i}")).expect("create");
    }
    std::fs::create_dir(dir.join(os(b"r\xe9pertoire"))).expect("mkdir latin-1");
    std::os::unix::fs::symlink(os(b"caf\xe9.txt"), dir.join(os(b"lien-\xe9"))).expect("symlink");

    // Listed exactly, once each.
    let mut listed: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .expect("readdir")
        .map(|e| e.expect("entry").file_name().as_bytes().to_vec())
        .collect();
    listed.sort();
    let mut want: Vec<Vec<u8>> = names.iter().map(|n| n.to_vec()).collect();
    want.push(b"r\xe9pertoire".to_vec());
    want.push(b"lien-\xe9".to_vec());
    want.sort();
    assert_eq!(listed, want);
    // Read back by name, through the symlink too.
    for (i, n) in names.iter().enumerate() {
        assert_eq!(
            std::fs::read_to_string(dir.join(os(n))).expect("read"),
            format!("file {i}")
        );
    }
    assert_eq!(
        std::fs::read_link(dir.join(os(b"lien-\xe9")))
            .expect("readlink")
            .as_os_str()
            .as_bytes(),
        b"caf\xe9.txt"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join(os(b"lien-\xe9"))).expect("through the link"),
        "file 0"
    );
    // Renames keep the bytes.
    std::fs::rename(dir.join(os(b"\xff\xfe\xfd")), dir.join(os(b"\xfe\xff"))).expect("rename");
    assert!(dir.join(os(b"\xfe\xff")).exists());

    // xattr names are bytes too (bash's $'..' passes the raw byte).
    let x = c.path("xattr-file");
    std::fs::write(&x, b"x").expect("xattr file");
    sh(&format!(
        "setfattr -n $'user.\\xe9t\\xe9' -v summer {}",
        x.display()
    ));
    let got = sh(&format!(
        "getfattr --only-values -n $'user.\\xe9t\\xe9' {}",
        x.display()
    ));
    assert_eq!(got, "summer");
    // getfattr prints names as their raw bytes.
    let dump = std::process::Command::new("getfattr")
        .args(["-d", "-m", "-"])
        .arg(&x)
        .output()
        .expect("getfattr");
    let wanted: &[u8] = b"user.\xe9t\xe9=\"summer\"";
    assert!(
        dump.stdout.windows(wanted.len()).any(|w| w == wanted),
        "{}",
        String::from_utf8_lossy(&dump.stdout)
    );

    // tar of such a tree onto the mount is identical.
    let src = c.tmp.path().join("src");
    let dst = c.path("untar");
    std::fs::create_dir(&src).expect("src");
    std::fs::create_dir(&dst).expect("dst");
    for n in names {
        std::fs::write(src.join(os(n)), n).expect("src file");
    }
    sh(&format!(
        "tar -C {} -cf - . | tar -C {} -xf -",
        src.display(),
        dst.display()
    ));
    let d = std::process::Command::new("diff")
        .arg("-r")
        .arg(&src)
        .arg(&dst)
        .output()
        .expect("diff");
    assert!(
        d.status.success() && d.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&d.stdout)
    );
}
