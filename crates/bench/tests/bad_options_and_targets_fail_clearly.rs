//! Bad options are refused at parse time or before any file is made, with
//! messages that name the problem; missing, non-directory, occupied and
//! read-only targets are refused with the path and the reason.

use clap::Parser;
use loom_bench::{run, BenchArgs, BenchCommand};

#[derive(Parser, Debug)]
struct Cli {
    #[command(flatten)]
    args: BenchArgs,
}

fn parse(args: &[&str]) -> Result<BenchArgs, clap::Error> {
    let mut argv = vec!["loom-bench"];
    argv.extend_from_slice(args);
    Cli::try_parse_from(argv).map(|c| c.args)
}

fn run_err(args: &[&str]) -> String {
    let a = parse(args).expect("parses");
    format!("{:#}", run(a).expect_err("must fail"))
}

#[test]
fn md_options_parse_with_mdtest_letters() {
    let a = parse(&[
        "md",
        "-n",
        "100",
        "-I",
        "10",
        "-z",
        "2",
        "-b",
        "3",
        "-u",
        "-F",
        "-w",
        "3901",
        "-e",
        "4k",
        "-N",
        "1",
        "-i",
        "3",
        "-p",
        "4",
        "--stonewall",
        "2.5",
        "/tmp",
    ])
    .expect("parses");
    let BenchCommand::Md(m) = a.command else {
        panic!("not md")
    };
    let o = m.opts;
    assert_eq!(
        (o.items, o.items_per_dir, o.depth, o.branch),
        (Some(100), Some(10), 2, 3)
    );
    assert!(o.unique_dir && o.files_only && !o.dirs_only);
    assert_eq!(
        (o.write_bytes, o.read_bytes, o.stride, o.iterations, o.procs),
        (3901, 4096, 1, 3, 4)
    );
    assert_eq!(o.stonewall, Some(2.5));
}

#[test]
fn io_options_parse_with_ior_letters() {
    let a = parse(&[
        "io", "-t", "47008", "-b", "94016", "-s", "4", "-F", "-w", "-r", "-C", "-e", "-v", "-i",
        "2", "-p", "3", "/tmp",
    ])
    .expect("parses");
    let BenchCommand::Io(i) = a.command else {
        panic!("not io")
    };
    let o = i.opts;
    assert_eq!((o.transfer, o.block, o.segments), (47008, 94016, 4));
    assert!(o.file_per_proc && o.write && o.read && o.reorder && o.fsync && o.verify);
    assert_eq!((o.iterations, o.procs), (2, 3));
}

#[test]
fn contradictory_or_malformed_options_are_parse_errors() {
    for bad in [
        vec!["md", "-n", "10", "-F", "-D", "/tmp"],
        vec!["md", "-n", "ten", "/tmp"],
        vec!["md", "-n", "10", "-p", "0", "/tmp"],
        vec!["md", "-n", "10", "-b", "0", "/tmp"],
        vec!["md", "-n", "10", "--stonewall", "-1", "/tmp"],
        vec!["md", "-n", "10"],
        vec!["io", "-t", "4x", "/tmp"],
        vec!["io", "-i", "0", "/tmp"],
        vec!["compare", "md", "-n", "10"],
        vec!["compare", "md", "-n", "10", "=/tmp", "b=/tmp"],
        vec!["compare", "md", "-n", "10", "a=/tmp"],
        vec!["suite", "--reps", "1", "/tmp"],
        vec![
            "sweep", "--param", "nodes", "--values", "1", "md", "-n", "1",
        ],
    ] {
        assert!(parse(&bad).is_err(), "{bad:?} parsed");
    }
}

#[test]
fn inconsistent_options_fail_before_touching_the_target() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = tmp.path().to_str().expect("utf8");
    let e = run_err(&["io", "-t", "3000", "-b", "4096", d]);
    assert!(e.contains("not a multiple of -t"), "{e}");
    let e = run_err(&["md", "-n", "10", "-I", "3", "-z", "1", "-b", "2", d]);
    assert!(e.contains("-n 10 and -I 3 disagree"), "{e}");
    let e = run_err(&["md", d]);
    assert!(e.contains("give -n"), "{e}");
    assert_eq!(std::fs::read_dir(tmp.path()).expect("dir").count(), 0);
}

#[test]
fn missing_and_non_directory_targets_are_named() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let missing = tmp.path().join("nope");
    let e = run_err(&["md", "-n", "10", missing.to_str().expect("utf8")]);
    assert!(e.contains("nope") && e.contains("does not exist"), "{e}");
    let file = tmp.path().join("plain");
    std::fs::write(&file, b"x").expect("write");
    let e = run_err(&["io", file.to_str().expect("utf8")]);
    assert!(e.contains("is not a directory"), "{e}");
}

#[test]
fn an_existing_work_directory_is_never_reused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(tmp.path().join("loom-md")).expect("mkdir");
    std::fs::write(tmp.path().join("loom-md/precious"), b"user data").expect("write");
    let e = run_err(&["md", "-n", "5", tmp.path().to_str().expect("utf8")]);
    assert!(e.contains("already exists"), "{e}");
    assert_eq!(
        std::fs::read(tmp.path().join("loom-md/precious")).expect("kept"),
        b"user data"
    );
}

/// Detaches a mount when dropped, so a failing test leaves none behind.
struct Unmount<'a>(&'a std::path::Path);

impl Drop for Unmount<'_> {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(self.0, nix::mount::MntFlags::MNT_DETACH);
    }
}

#[test]
fn a_read_only_mount_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let ro = tmp.path();
    nix::mount::mount(
        Some("tmpfs"),
        ro,
        Some("tmpfs"),
        nix::mount::MsFlags::MS_RDONLY,
        Some("size=1m"),
    )
    .unwrap_or_else(|e| {
        panic!("cannot mount a read-only tmpfs on {} ({e}): this test needs root, as the whole suite does", ro.display())
    });
    let _unmount = Unmount(ro);
    let e = run_err(&["md", "-n", "5", ro.to_str().expect("utf8")]);
    assert!(e.contains("read-only"), "{e}");
}
