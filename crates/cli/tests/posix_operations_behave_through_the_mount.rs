//! The operations the FUSE adapter translates, each checked through the
//! kernel the way programs use them: chmod, chown, truncate, utimens,
//! hard links, symlinks, rename with RENAME_NOREPLACE and RENAME_EXCHANGE,
//! rename of a directory into itself, xattrs, file capabilities cleared by
//! a write, FIFOs, readdir with many
//! entries, rmdir of a non-empty directory, statfs.
mod common;
use common::*;
use nix::fcntl::{renameat2, RenameFlags};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};

/// Python that asks the terminal ioctl `TCGETS` of file argv[1] and
/// prints the errno it fails with.
const TCGETS: &str = "import fcntl, sys, termios
try:
    fcntl.ioctl(open(sys.argv[1]), termios.TCGETS, bytes(64))
except OSError as e:
    print(e.errno)
";

fn errno(r: std::io::Result<impl std::fmt::Debug>) -> i32 {
    r.expect_err("must fail").raw_os_error().expect("an errno")
}

#[test]
fn posix_operations_behave_through_the_mount() {
    let c = Cluster::up(1, 2, &[]);
    let p = |rel: &str| c.path(rel);

    // Attributes.
    std::fs::write(p("a"), b"0123456789").expect("write");
    // An ioctl no loomfs file knows (a terminal's, which programs ask of
    // every file): ENOTTY, as from a local file system.
    let o = std::process::Command::new("python3")
        .args(["-c", TCGETS])
        .arg(p("a"))
        .output()
        .expect("python3");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "25",
        "TCGETS: {o:?}"
    );
    // Answered by loomfs, not by fuser's default, which logs a warning for
    // each (the kernel turns its ENOSYS into the same ENOTTY).
    let log = std::fs::read_to_string(c.tmp.path().join("up.log")).expect("the mount's log");
    assert!(!log.contains("[Not Implemented] ioctl"), "{log}");
    std::fs::set_permissions(p("a"), std::fs::Permissions::from_mode(0o600)).expect("chmod");
    nix::unistd::chown(&p("a"), Some(1234.into()), Some(5678.into())).expect("chown");
    let m = std::fs::metadata(p("a")).expect("stat");
    assert_eq!((m.mode() & 0o7777, m.uid(), m.gid()), (0o600, 1234, 5678));
    std::fs::OpenOptions::new()
        .write(true)
        .open(p("a"))
        .and_then(|f| f.set_len(4))
        .expect("truncate");
    assert_eq!(std::fs::read(p("a")).expect("read"), b"0123");
    sh(&format!(
        "touch -d '1999-12-31 23:59:58' {}",
        p("a").display()
    ));
    assert_eq!(std::fs::metadata(p("a")).expect("stat").mtime(), 946684798);
    // Truncate up reads back zeros.
    std::fs::OpenOptions::new()
        .write(true)
        .open(p("a"))
        .and_then(|f| f.set_len(100_000))
        .expect("extend");
    let data = std::fs::read(p("a")).expect("read");
    assert_eq!(data.len(), 100_000);
    assert!(data[4..].iter().all(|&b| b == 0));

    // open with O_TRUNC (the mount truncates in the open itself,
    // FUSE_ATOMIC_O_TRUNC): the old bytes are gone, the new ones there.
    std::fs::write(p("t"), vec![7u8; 300_000]).expect("write");
    std::fs::write(p("t"), b"short").expect("rewrite with O_TRUNC");
    assert_eq!(std::fs::read(p("t")).expect("read"), b"short");
    assert_eq!(std::fs::metadata(p("t")).expect("stat").len(), 5);

    // Links.
    std::fs::hard_link(p("a"), p("b")).expect("link");
    assert_eq!(std::fs::metadata(p("a")).expect("stat").nlink(), 2);
    assert_eq!(
        std::fs::metadata(p("a")).expect("a").ino(),
        std::fs::metadata(p("b")).expect("b").ino()
    );
    std::os::unix::fs::symlink("a", p("s")).expect("symlink");
    assert_eq!(
        std::fs::read_link(p("s")).expect("readlink").to_str(),
        Some("a")
    );
    assert_eq!(
        std::fs::read(p("s")).expect("through the link").len(),
        100_000
    );
    std::fs::remove_file(p("b")).expect("unlink");
    assert_eq!(std::fs::metadata(p("a")).expect("stat").nlink(), 1);

    // Rename flags.
    std::fs::write(p("x"), b"x").expect("x");
    std::fs::write(p("y"), b"y").expect("y");
    assert_eq!(
        renameat2(None, &p("x"), None, &p("y"), RenameFlags::RENAME_NOREPLACE),
        Err(nix::errno::Errno::EEXIST)
    );
    renameat2(None, &p("x"), None, &p("y"), RenameFlags::RENAME_EXCHANGE).expect("exchange");
    assert_eq!(std::fs::read(p("x")).expect("x"), b"y");
    assert_eq!(std::fs::read(p("y")).expect("y"), b"x");
    renameat2(None, &p("x"), None, &p("z"), RenameFlags::RENAME_NOREPLACE)
        .expect("noreplace to a free name");
    std::fs::create_dir_all(p("d1/d2")).expect("mkdir -p");
    assert_eq!(
        errno(std::fs::rename(p("d1"), p("d1/d2/d3"))),
        libc::EINVAL,
        "a directory cannot move into itself"
    );
    assert_eq!(errno(std::fs::remove_dir(p("d1"))), libc::ENOTEMPTY);
    std::fs::rename(p("d1/d2"), p("d2")).expect("move a directory up");
    std::fs::remove_dir(p("d1")).expect("rmdir");

    // Extended attributes.
    sh(&format!(
        "setfattr -n user.color -v blue {}",
        p("a").display()
    ));
    let got = sh(&format!(
        "getfattr --only-values -n user.color {}",
        p("a").display()
    ));
    assert_eq!(got, "blue");
    let names = sh(&format!("getfattr -d {}", p("a").display()));
    assert!(names.contains("user.color=\"blue\""), "{names}");
    sh(&format!("setfattr -x user.color {}", p("a").display()));
    let o = std::process::Command::new("getfattr")
        .args(["-n", "user.color"])
        .arg(p("a"))
        .output()
        .expect("getfattr");
    assert!(!o.status.success(), "removed xattr still readable");

    // File capabilities: set, seen, and cleared by the kernel on the next
    // write (the kernel asks for security.capability before every write;
    // the mount answers from what it knows when it can).
    std::fs::write(p("capfile"), b"bin").expect("write");
    sh(&format!("setcap cap_net_raw+ep {}", p("capfile").display()));
    let caps = sh(&format!("getcap {}", p("capfile").display()));
    assert!(caps.contains("cap_net_raw=ep"), "{caps}");
    std::fs::OpenOptions::new()
        .append(true)
        .open(p("capfile"))
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"more"))
        .expect("append");
    let caps = sh(&format!("getcap {}", p("capfile").display()));
    assert_eq!(caps.trim(), "", "a write clears file capabilities");

    // A FIFO: a writer and a reader meet through it.
    nix::unistd::mkfifo(&p("fifo"), nix::sys::stat::Mode::from_bits_truncate(0o644))
        .expect("mkfifo");
    assert!(std::fs::metadata(p("fifo"))
        .expect("stat")
        .file_type()
        .is_fifo());
    let fifo = p("fifo");
    let w = std::thread::spawn(move || std::fs::write(fifo, b"through the pipe"));
    assert_eq!(
        std::fs::read(p("fifo")).expect("read fifo"),
        b"through the pipe"
    );
    w.join().expect("join").expect("write fifo");

    // A directory of 3000 entries lists completely, once each.
    std::fs::create_dir(p("many")).expect("mkdir");
    for i in 0..3000 {
        std::fs::write(p(&format!("many/f{i:04}")), b"").expect("create");
    }
    let mut names: Vec<String> = std::fs::read_dir(p("many"))
        .expect("readdir")
        .map(|e| e.expect("entry").file_name().into_string().expect("utf8"))
        .collect();
    names.sort();
    let want: Vec<String> = (0..3000).map(|i| format!("f{i:04}")).collect();
    assert_eq!(names, want);
    // ls -l reads attributes of every entry (readdirplus).
    let listed = sh(&format!("ls -l {} | wc -l", p("many").display()));
    assert_eq!(listed.trim(), "3001");

    // The mount's kernel readahead was raised from the kernel's 128 KiB.
    let dev = std::fs::metadata(&c.mnt).expect("stat mnt").dev();
    let ra = std::fs::read_to_string(format!(
        "/sys/class/bdi/{}:{}/read_ahead_kb",
        libc::major(dev),
        libc::minor(dev)
    ))
    .expect("read_ahead_kb");
    assert_eq!(ra.trim(), "4096");

    let st = nix::sys::statvfs::statvfs(c.mnt.as_path()).expect("statfs");
    assert!(st.blocks() > 0 && st.files() > 3000);
}
