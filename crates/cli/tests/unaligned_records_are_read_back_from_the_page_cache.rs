//! Issue #34: records written unaligned (IOR-hard's 47,008 bytes, one
//! shared file) leave the folios at their edges not up to date in the
//! kernel. The mount keeps those bytes and hands them back (`kept.rs`), so
//! a read of the file by the mount that wrote it, under its lease, needs
//! nothing from the OSTs. Before, every such folio was a synchronous read
//! from an OST, at 344 MiB/s for IOR-hard (8.6% of the file).
//!
//! Run as a user who is not root, through `loom bench io` (IOR's pattern,
//! every byte verified). Then what a second mount rewrites across record
//! edges, and a truncate on this mount, are read here as they are.
mod common;
use common::*;

const REC: u64 = 47_008;
const SEGMENTS: u64 = 2000;
const PROCS: u64 = 2;

/// Bytes the OSTs have served reads of, over every client and job.
fn ost_read_bytes(c: &Cluster) -> u64 {
    let out = loom_ok(&["jobstats", "--json", "--top", "0", &c.mnt.to_string_lossy()]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("jobstats JSON");
    v.as_array()
        .expect("targets")
        .iter()
        .filter(|t| t["target"].as_str().is_some_and(|n| n.contains("OST")))
        .flat_map(|t| t["clients"].as_array().cloned().unwrap_or_default())
        .map(|c| c["read_bytes"].as_u64().unwrap_or(0))
        .sum()
}

fn nobody_bench(dir: &str, phase: &[&str]) {
    let bin = loom_bin();
    let (t, s, p) = (REC.to_string(), SEGMENTS.to_string(), PROCS.to_string());
    let mut args = vec![
        bin.to_str().expect("path"),
        "bench",
        "io",
        "-t",
        &t,
        "-b",
        &t,
        "-s",
        &s,
        "-p",
        &p,
        "--name",
        "h",
        "--keep",
        "--no-progress",
    ];
    args.extend_from_slice(phase);
    args.push(dir);
    let o = as_nobody(&args);
    assert!(
        o.status.success(),
        "bench io {phase:?} as nobody failed:\n{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn unaligned_records_are_read_back_from_the_page_cache() {
    let mut c = Cluster::up(1, 2, &[]);
    let m2 = c.second_mount("mnt2");
    let dir = c.path("ior");
    std::fs::create_dir(&dir).expect("mkdir");
    sh(&format!("chmod 0777 {}", dir.display()));
    let dir = dir.to_string_lossy().into_owned();

    let before = ost_read_bytes(&c);
    // Write, then at once read: -C, each process what the other wrote; -v,
    // every byte checked. The read starts while the kept bytes are being
    // stored into the kernel's cache.
    nobody_bench(&dir, &["-w", "-r", "-C", "-v"]);
    let served = ost_read_bytes(&c) - before;
    let size = REC * SEGMENTS * PROCS;
    assert!(
        served * 100 < size,
        "reading back {size} bytes just written here took {served} bytes from the OSTs"
    );

    // Mount 2 rewrites 100 bytes across 20 record edges; this mount reads
    // them (the recall of its lease dropped its pages and kept bytes).
    let file = format!("{dir}/h/iter.0/testfile");
    let rel = file
        .strip_prefix(&*c.mnt.to_string_lossy())
        .expect("under the mount")
        .trim_start_matches('/')
        .to_string();
    let mut want = std::fs::read(&file).expect("read");
    assert_eq!(want.len() as u64, size);
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(m2.join(&rel))
            .expect("open on mount 2");
        for k in 1..=20u64 {
            let at = k * 7 * REC - 50;
            let bytes = vec![k as u8 ^ 0xa5; 100];
            f.write_all_at(&bytes, at).expect("rewrite on mount 2");
            want[at as usize..at as usize + 100].copy_from_slice(&bytes);
        }
    }
    assert!(
        std::fs::read(&file).expect("read") == want,
        "this mount reads what mount 2 rewrote"
    );

    // Ragged writes here, then a truncate by path (no handle) inside
    // them: the bytes past the new end are gone, the rest read back.
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&file)
            .expect("open");
        for k in 0..40u64 {
            let at = k * REC + 4000;
            let bytes = vec![k as u8; 300];
            f.write_all_at(&bytes, at).expect("write");
            want[at as usize..at as usize + 300].copy_from_slice(&bytes);
        }
        let cut = 20 * REC + 4100;
        nix::unistd::truncate(file.as_str(), cut as i64).expect("truncate");
        want.truncate(cut as usize);
        f.write_all_at(b"after", 30 * REC)
            .expect("write past the end");
        want.resize(30 * REC as usize, 0);
        want.extend_from_slice(b"after");
    }
    assert!(
        std::fs::read(&file).expect("read") == want,
        "ragged writes, a truncate and a write past the end read back here"
    );
    assert!(
        std::fs::read(m2.join(&rel)).expect("read on mount 2") == want,
        "and on mount 2"
    );
}

/// A page changed through a shared writable map is not overwritten by the
/// kept bytes of ragged writes through another handle: the store from
/// inside a WRITE waits while a handle that may map the file (O_RDWR) is
/// open. Through Debian's python3 and its mmap, as a user who is not
/// root.
#[test]
fn a_page_changed_through_a_map_survives_ragged_writes_beside_it() {
    let mut c = Cluster::up(1, 1, &[]);
    let dir = c.path("map");
    std::fs::create_dir(&dir).expect("mkdir");
    sh(&format!("chmod 0777 {}", dir.display()));
    let script = format!(
        r#"
import mmap, os
p = "{dir}/f"
REC = 47008
fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
want = bytearray()
def put(off, b):
    global want
    if len(want) < off + len(b):
        want.extend(bytes(off + len(b) - len(want)))
    want[off:off + len(b)] = b
    os.pwrite(fd, b, off)
# Chunk 0 (1 MiB) and on, written in ragged records, the first last: the
# write that makes chunk 0 whole lies in it, so it stays kept.
for k in list(range(1, 25)) + [0]:
    put(k * REC, bytes([k + 1]) * REC)
m = mmap.mmap(fd, len(want))
for at in range(100, 1 << 20, 65536):
    m[at:at + 4] = b"MAP!"
    want[at:at + 4] = b"MAP!"
# Ragged writes in chunk 3: a WRITE that could store chunk 0.
for k in range(70, 75):
    put(k * REC + 7, bytes([0xEE]) * (REC - 9))
got = os.pread(fd, len(want), 0)
assert got == bytes(want), "read back with the map open"
m.close()
os.close(fd)
assert open(p, "rb").read() == bytes(want), "read back after close"
print("ok")
"#,
        dir = dir.display()
    );
    let o = as_nobody(&["/usr/bin/python3", "-c", &script]);
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    // And from the OSTs, through a second mount (a drop_caches here would
    // also empty the page cache the other test reads from).
    let m2 = c.second_mount("mnt2");
    let o = as_nobody(&[
        "/usr/bin/python3",
        "-c",
        &format!(
            "d=open('{}/map/f','rb').read(); import sys; sys.exit(0 if all(d[a:a+4]==b'MAP!' for a in range(100, 1<<20, 65536)) else 1)",
            m2.display()
        ),
    ]);
    assert!(o.status.success(), "the map's bytes reached the OSTs");
}
