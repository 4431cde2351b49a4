//! Bad input to the servers and tools fails with an error that names what
//! is wrong, and changes nothing: malformed and incomplete node configs,
//! unknown keys, missing key files, formatting a used directory, and bad
//! command-line values.
mod common;
use common::*;

fn fails_with(args: &[&str], want: &str) {
    let o = loom(args);
    assert!(!o.status.success(), "loom {args:?} succeeded");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(want),
        "loom {args:?}: expected {want:?} in:\n{err}"
    );
}

#[test]
fn bad_server_configs_and_arguments_fail_clearly() {
    let tmp = tempfile::tempdir().expect("tmp");
    let d = tmp.path();
    let cfg = d.join("node.toml");
    let c = cfg.to_str().expect("utf8");
    let key = d.join("k.key");
    loom_ok(&["keygen", key.to_str().expect("utf8")]);
    let ost = d.join("ost0");
    loom_ok(&[
        "format",
        "--ost",
        "--fsname",
        "fs1",
        ost.to_str().expect("utf8"),
    ]);

    std::fs::write(&cfg, "fsname = \"fs1\"\nlisten = [oops").expect("write");
    fails_with(&["server", "--config", c], "parsing");
    std::fs::write(
        &cfg,
        "fsname = \"fs1\"\nlisten = \"127.0.0.1:0\"\nmgs = \"127.0.0.1:1\"\nkey_file = \"k.key\"\ntargets = [\"ost0\"]\ncolour = \"blue\"\n",
    )
    .expect("write");
    fails_with(&["server", "--config", c], "unknown field `colour`");
    std::fs::write(
        &cfg,
        "fsname = \"fs1\"\nlisten = \"127.0.0.1:0\"\nmgs = \"127.0.0.1:1\"\nkey_file = \"k.key\"\ntargets = []\n",
    )
    .expect("write");
    fails_with(&["server", "--config", c], "lists no target directories");
    std::fs::write(
        &cfg,
        "fsname = \"fs1\"\nlisten = \"127.0.0.1:0\"\nmgs = \"127.0.0.1:1\"\nkey_file = \"missing.key\"\ntargets = [\"ost0\"]\n",
    )
    .expect("write");
    fails_with(&["server", "--config", c], "missing.key");
    fails_with(
        &["server", "--config", "/nonexistent/node.toml"],
        "/nonexistent/node.toml",
    );

    // Formatting: a used directory, another file system, bad names.
    fails_with(
        &[
            "format",
            "--ost",
            "--fsname",
            "fs2",
            ost.to_str().expect("utf8"),
        ],
        "fs1",
    );
    fails_with(
        &[
            "format",
            "--mdt",
            "--fsname",
            "way-too-long-name",
            d.join("m").to_str().expect("utf8"),
        ],
        "way-too-long-name",
    );
    fails_with(
        &[
            "format",
            "--fsname",
            "fs1",
            d.join("x").to_str().expect("utf8"),
        ],
        "--mgs, --mdt or --ost",
    );
    // The OST formatted first is untouched by the refused format.
    let id = std::fs::read_to_string(ost.join("target.toml")).expect("identity");
    assert!(id.contains("fs1"), "{id}");
    // keygen refuses to overwrite a key.
    fails_with(&["keygen", key.to_str().expect("utf8")], "k.key");
    // Tool arguments.
    fails_with(&["setstripe", "-S", "4X", "/tmp/x"], "is not a size");
    fails_with(
        &["setstripe", "-c", "2", "/tmp/not-on-loomfs"],
        "is not on a loomfs mount",
    );
    fails_with(&["up", "--mdts", "0"], "0 is not in 1..=64");
}
