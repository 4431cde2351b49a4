//! Issue #9, point 3: progressive layouts and Data-on-MDT.
//!
//! `loom setstripe -E 64K -L mdt -E 1M -c 1 -E -1 -c -1 DIR` gives DIR's
//! new files (and its new subdirectories' files) three components: the
//! first 64 KiB on the MDT, the rest of the first MiB on one OST, the rest
//! on every OST. Shown through the mount:
//! - `loom getstripe` shows the components, of the directory and a file;
//!   bad component lists are refused with a reason;
//! - each byte is where the components say: the OST object files hold
//!   exactly the bytes of their extents, and the first 64 KiB are read with
//!   every OST stopped;
//! - a small file's create, write, read and stat need no OST at all, from
//!   this mount and from a second one;
//! - holes, truncates (down into the MDT's part and up again), appends and
//!   fallocate punches across the boundaries, run by an unprivileged
//!   user, read back exactly as a local file given the same operations;
//! - what was written on the MDT survives its `kill -9` (no fsync).
mod common;
use common::*;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

/// One component as `loom getstripe` shows it: its start, its pattern and
/// the (OST, object id) of its objects (none for the MDT's).
type Shown = (u64, String, Vec<(u32, u64)>);

/// The components of `loom getstripe FILE`.
fn components(path: &std::path::Path) -> Vec<Shown> {
    let out = loom_ok(&["getstripe", path.to_str().expect("utf-8")]);
    let mut v: Vec<Shown> = Vec::new();
    for l in out.lines().map(str::trim) {
        if let Some(s) = l.strip_prefix("lcme_extent.e_start:") {
            v.push((s.trim().parse().expect("start"), String::new(), Vec::new()));
        } else if let Some(p) = l.strip_prefix("lmm_pattern:") {
            v.last_mut().expect("a component").1 = p.trim().to_string();
        } else if let Some(o) = l.strip_prefix("- ") {
            // "- k: { l_ost_idx: N, l_oid: 0xH }"
            let ost = o
                .split("l_ost_idx: ")
                .nth(1)
                .and_then(|r| r.split(',').next());
            let oid = o
                .split("l_oid: 0x")
                .nth(1)
                .and_then(|r| r.split(' ').next());
            let (Some(ost), Some(oid)) = (ost, oid) else {
                panic!("object line {l}")
            };
            v.last_mut().expect("a component").2.push((
                ost.parse().expect("ost"),
                u64::from_str_radix(oid, 16).expect("oid"),
            ));
        }
    }
    v
}

/// The bytes an object file holds at `[from, to)` (zeros past its end).
fn object_bytes(c: &Cluster, obj: (u32, u64), from: u64, to: u64) -> Vec<u8> {
    let data = std::fs::read(c.object_file(obj.0, obj.1)).unwrap_or_default();
    (from..to)
        .map(|i| data.get(i as usize).copied().unwrap_or(0))
        .collect()
}

/// Holes, truncates, appends and punches across the components'
/// boundaries, applied to a file in D and to a local reference file in
/// REF; prints "same" when they read back the same.
const BOUNDARIES: &str = r#"
import ctypes, os, random, sys
d, ref = sys.argv[1], sys.argv[2]
libc = ctypes.CDLL(None, use_errno=True)
rnd = random.Random(7)
paths = [os.path.join(d, "edges"), os.path.join(ref, "edges")]
fds = [os.open(p, os.O_CREAT | os.O_RDWR, 0o644) for p in paths]
def both(f):
    for fd in fds:
        f(fd)
def pwrite(n, off):
    data = bytes(rnd.getrandbits(8) for _ in range(n))
    both(lambda fd: os.pwrite(fd, data, off))
def punch(off, n):
    for fd in fds:
        if libc.fallocate(fd, 3, ctypes.c_long(off), ctypes.c_long(n)) != 0:
            sys.exit("fallocate: errno %d" % ctypes.get_errno())
def same(what):
    a = open(paths[0], "rb").read()
    b = open(paths[1], "rb").read()
    if a != b or os.stat(paths[0]).st_size != len(b):
        first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        sys.exit("%s: %d bytes, want %d; first difference at %d" % (what, len(a), len(b), first))
pwrite(10000, 60000)          # across the MDT / one-OST boundary
pwrite(5000, 2 * 1048576)     # past a hole, in the all-OST component
pwrite(100, 10)
same("holes")
both(lambda fd: os.ftruncate(fd, 30000))   # down into the MDT's part
same("truncate down")
both(lambda fd: os.ftruncate(fd, 1100000)) # up again: zeros
same("truncate up")
for fd in fds:
    os.lseek(fd, 0, os.SEEK_END)
data = bytes(rnd.getrandbits(8) for _ in range(200000))
both(lambda fd: os.write(fd, data))        # append across 1 MiB
same("append")
punch(50000, 1000000)                      # a hole over both boundaries
same("punch")
print("same")
"#;

#[test]
fn component_layouts_put_each_byte_where_they_say() {
    let mut c = Cluster::up(1, 4, &[]);
    let d = c.path("d");
    std::fs::create_dir(&d).expect("mkdir");
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
    let ds = d.to_str().expect("utf-8");
    loom_ok(&[
        "setstripe",
        "-E",
        "64K",
        "-L",
        "mdt",
        "-E",
        "1M",
        "-c",
        "1",
        "-E",
        "-1",
        "-c",
        "-1",
        ds,
    ]);
    let shown = loom_ok(&["getstripe", ds]);
    assert!(
        shown.contains("lcm_entry_count:   3") && shown.contains("lmm_pattern:       mdt"),
        "{shown}"
    );
    // Bad component lists: refused, with the reason.
    for (args, reason) in [
        (
            vec![
                "-E", "64K", "-L", "mdt", "-E", "1M", "-L", "mdt", "-E", "-1",
            ],
            "only the first component",
        ),
        (
            vec!["-E", "2M", "-L", "mdt", "-E", "-1"],
            "ends at 1048576 bytes at most",
        ),
        (
            vec!["-E", "1M", "-E", "64K", "-E", "-1"],
            "ends must increase",
        ),
        (vec!["-E", "64K", "-L", "mdt", "-E", "1M"], "extend to EOF"),
        (vec!["-L", "mdt"], "start each component with -E"),
    ] {
        let mut full = vec!["setstripe"];
        full.extend(args.iter().copied());
        full.push(ds);
        let o = loom(&full);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && err.contains(reason),
            "{args:?}: {err}"
        );
    }
    // A new subdirectory takes the layout too.
    std::fs::create_dir(d.join("sub")).expect("mkdir sub");
    let sub = loom_ok(&["getstripe", d.join("sub").to_str().expect("utf-8")]);
    assert!(sub.contains("lcm_entry_count:   3"), "{sub}");

    // Each byte where the components say.
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    std::fs::write(d.join("big"), &data).expect("write big");
    let comps = components(&d.join("big"));
    let starts: Vec<u64> = comps.iter().map(|c| c.0).collect();
    assert_eq!(starts, [0, 65536, 1 << 20], "{comps:?}");
    assert_eq!(comps[0].1, "mdt");
    assert!(comps[0].2.is_empty(), "no objects for the MDT's part");
    assert_eq!(comps[1].2.len(), 1, "one object");
    assert_eq!(comps[2].2.len(), 4, "every OST");
    // One OST: file offset = object offset; the part below 64 KiB is not
    // there.
    assert_eq!(
        object_bytes(&c, comps[1].2[0], 0, 1 << 20),
        [vec![0u8; 65536], data[65536..1 << 20].to_vec()].concat()
    );
    // All OSTs, 1 MiB units by file offset: units 1 and 2 of the file on
    // stripes 1 and 2, each at object offset 0; stripes 0 and 3 hold none.
    let mib = 1u64 << 20;
    assert_eq!(
        object_bytes(&c, comps[2].2[1], 0, mib),
        data[1 << 20..2 << 20]
    );
    assert_eq!(
        object_bytes(&c, comps[2].2[2], 0, 3_000_000 - 2 * mib),
        data[2 << 20..]
    );
    for k in [0, 3] {
        assert_eq!(
            std::fs::metadata(c.object_file(comps[2].2[k].0, comps[2].2[k].1))
                .map(|m| m.len())
                .unwrap_or(0),
            0,
            "stripe {k} holds nothing"
        );
    }

    // A small file needs no OST: create, write, read and stat with every
    // OST stopped, here and from a second mount.
    let m2 = c.second_mount("mnt2");
    let osts: Vec<Stopped> = (0..4)
        .map(|i| Stopped::new(c.pid(&format!("ost{i}"))))
        .collect();
    let small = d.join("small");
    let (first, big_start) = within(move || {
        std::fs::write(&small, b"on the MDT\n").expect("write small");
        let first = std::fs::read(&small).expect("read small");
        let big = d.join("big");
        let mut f = std::fs::File::open(&big).expect("open big");
        let mut head = vec![0u8; 65536];
        std::io::Read::read_exact(&mut f, &mut head).expect("read the MDT's part");
        (first, head)
    })
    .expect("a small file's I/O asked a stopped OST");
    assert_eq!(first, b"on the MDT\n");
    assert_eq!(big_start, data[..65536], "the first 64 KiB, from the MDT");
    let other = m2.join("d/small");
    let (len, seen) = within(move || {
        (
            std::fs::metadata(&other).expect("stat on mount 2").len(),
            std::fs::read(&other).expect("read on mount 2"),
        )
    })
    .expect("mount 2 asked a stopped OST");
    assert_eq!((len, seen.as_slice()), (11, b"on the MDT\n".as_slice()));
    drop(osts);

    // Boundaries under holes, truncate, append and punch, as a user.
    let reference = c.tmp.path().join("reference");
    std::fs::create_dir(&reference).expect("reference dir");
    std::fs::set_permissions(&reference, std::fs::Permissions::from_mode(0o1777))
        .expect("chmod reference");
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .args(["/usr/bin/python3", "-c", BOUNDARIES])
        .arg(c.path("d"))
        .arg(&reference)
        .output()
        .expect("python3 as nobody");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && out.trim() == "same",
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Seen the same from the other mount.
    let want = std::fs::read(reference.join("edges")).expect("read reference");
    assert_eq!(
        std::fs::read(m2.join("d/edges")).expect("read on mount 2"),
        want
    );

    // Acknowledged, not fsync'd: kept through a kill -9 of the MDT.
    c.kill9("mdt0");
    c.restart("mdt0");
    assert_eq!(
        std::fs::read(c.path("d/small")).expect("read"),
        b"on the MDT\n"
    );
    assert_eq!(std::fs::read(c.path("d/edges")).expect("read"), want);
}
