//! Issue #11, compression: set for the whole file system (on the root) or
//! as a directory default inherited by new files and subdirectories,
//! stored per chunk on the OSTs and invisible to clients. A user's random
//! writes, truncates and punches across chunk and stripe boundaries read
//! back identically, from a second mount too, and after an OST is killed
//! with -9; `loom getstripe` shows the setting, `loom df` the logical and
//! stored bytes; bad settings are refused; a damaged chunk is EIO, never
//! data, and scrub reports it. (Who may set it is tested
//! through the library, `a_directory_compression_is_its_owners_to_set_and_follows_its_tree`.)
mod common;
use common::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

/// A deterministic generator, so a failure can be replayed.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// `len` bytes that compress as text does (words from a small
/// vocabulary), now and then a run of random bytes or zeros.
fn text(r: &mut Lcg, len: usize) -> Vec<u8> {
    const WORDS: [&str; 12] = [
        "temperature ",
        "pressure ",
        "0.000123 ",
        "ensemble\n",
        "lat=45.25 ",
        "lon=-122.5 ",
        "step ",
        "rank ",
        "NaN ",
        "checkpoint ",
        "1.5e-7 ",
        "\t",
    ];
    let mut v = Vec::with_capacity(len + 16);
    while v.len() < len {
        match r.below(40) {
            0 => v.extend((0..r.below(3000)).map(|_| r.next() as u8)),
            1 => v.extend(std::iter::repeat_n(0u8, r.below(9000) as usize)),
            _ => v.extend_from_slice(WORDS[r.below(WORDS.len() as u64) as usize].as_bytes()),
        }
    }
    v.truncate(len);
    v
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf8 path")
}

/// Run `args` as nobody and insist it succeeds.
fn nobody_ok(args: &[&str]) -> Vec<u8> {
    let o = as_nobody(args);
    assert!(
        o.status.success(),
        "{args:?} as nobody: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o.stdout
}

/// What `loom getstripe -Z PATH` says.
fn compression_of(p: &Path) -> String {
    loom_ok(&["getstripe", "-Z", s(p)]).trim().to_string()
}

/// The 2-byte version of an object's checksum file (1 plain, 2 packed).
fn sum_version(object: &Path) -> u16 {
    let b = std::fs::read(object.with_extension("sum")).expect("the object's .sum file");
    assert_eq!(&b[..4], b"LSUM");
    u16::from_le_bytes([b[4], b[5]])
}

/// The "compressed data" summary of `loom df`: (logical KiB, stored KiB),
/// once every OST has counted what it held at its start (a restarted OST
/// counts in the background and `loom df` says "(counting)" until then).
fn df_packed(mnt: &Path) -> (u64, u64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let out = loom_ok(&["df", s(mnt)]);
        let rest = out
            .split("compressed data")
            .nth(1)
            .unwrap_or_else(|| panic!("no compressed data in loom df:\n{out}"));
        let line = rest
            .lines()
            .find(|l| l.starts_with("filesystem_summary:"))
            .unwrap_or_else(|| panic!("no summary of compressed data:\n{out}"));
        if line.contains("counting") {
            assert!(
                std::time::Instant::now() < deadline,
                "still counting after 60 s: {line}"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
            continue;
        }
        let w: Vec<&str> = line.split_whitespace().collect();
        return (
            w[1].parse().expect("logical"),
            w[2].parse().expect("stored"),
        );
    }
}

#[test]
fn compressed_files_read_back_identically_under_random_io() {
    let mut c = Cluster::up(1, 2, &[]);
    // The file system's default, then directory defaults under it.
    loom_ok(&["setstripe", "--compress", "zstd:3", s(&c.mnt)]);
    let zs = c.open_dir("zs");
    let lz = c.open_dir("lz");
    let off = c.open_dir("off");
    loom_ok(&["setstripe", "--compress", "lz4", s(&lz)]);
    loom_ok(&["setstripe", "--compress", "off", s(&off)]);
    // Striped over both OSTs in 128 KiB units: writes cross stripes and
    // 64 KiB chunks alike.
    for d in [&zs, &lz, &off] {
        loom_ok(&["setstripe", "-c", "2", "-S", "128K", s(d)]);
    }
    nobody_ok(&["mkdir", s(&lz.join("sub"))]);
    assert_eq!(compression_of(&c.mnt), "zstd:3");
    assert_eq!(compression_of(&zs), "zstd:3", "inherited from the root");
    assert_eq!(compression_of(&lz), "lz4");
    assert_eq!(compression_of(&lz.join("sub")), "lz4", "a new subdirectory");
    assert_eq!(compression_of(&off), "off");
    let shown = loom_ok(&["getstripe", s(&lz)]);
    assert!(shown.contains("compress:      lz4"), "{shown}");

    // Bad settings are refused with a reason.
    for bad in ["gzip", "zstd:25", "lz4:2"] {
        let o = loom(&["setstripe", "--compress", bad, s(&zs)]);
        assert!(!o.status.success(), "--compress {bad} was accepted");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(bad.split(':').next().unwrap_or(bad)) || err.contains("level"),
            "{err}"
        );
    }

    // A user's random I/O, mirrored on a local reference file.
    let mut r = Lcg(0x5eed_1011);
    let refs = c.tmp.path().join("refs");
    std::fs::create_dir(&refs).expect("mkdir refs");
    let patch = c.tmp.path().join("patch");
    const SPAN: u64 = 3 << 20;
    for d in [&zs, &lz, &off] {
        let f = d.join("data");
        let local = refs.join(d.file_name().expect("name"));
        let base = text(&mut r, (SPAN / 2) as usize);
        std::fs::write(&patch, &base).expect("patch");
        std::fs::set_permissions(&patch, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        nobody_ok(&["cp", s(&patch), s(&f)]);
        std::fs::write(&local, &base).expect("reference");
        for step in 0..60 {
            let offset = r.below(SPAN);
            match r.below(10) {
                0 => {
                    let size = r.below(SPAN);
                    nobody_ok(&["truncate", "-s", &size.to_string(), s(&f)]);
                    std::fs::OpenOptions::new()
                        .write(true)
                        .open(&local)
                        .and_then(|l| l.set_len(size))
                        .expect("truncate the reference");
                }
                1 => {
                    let len = 1 + r.below(300_000);
                    nobody_ok(&[
                        "fallocate",
                        "-p",
                        "-o",
                        &offset.to_string(),
                        "-l",
                        &len.to_string(),
                        s(&f),
                    ]);
                    let mut m = std::fs::read(&local).expect("reference");
                    let end = ((offset + len) as usize).min(m.len());
                    if (offset as usize) < end {
                        m[offset as usize..end].fill(0);
                    }
                    std::fs::write(&local, &m).expect("reference");
                }
                _ => {
                    let len = 1 + r.below(200_000) as usize;
                    let data = text(&mut r, len);
                    std::fs::write(&patch, &data).expect("patch");
                    nobody_ok(&[
                        "dd",
                        &format!("if={}", s(&patch)),
                        &format!("of={}", s(&f)),
                        "bs=1M",
                        &format!("seek={offset}"),
                        "oflag=seek_bytes",
                        "conv=notrunc",
                        "status=none",
                    ]);
                    let mut m = std::fs::read(&local).expect("reference");
                    let end = offset as usize + len;
                    if m.len() < end {
                        m.resize(end, 0);
                    }
                    m[offset as usize..end].copy_from_slice(&data);
                    std::fs::write(&local, &m).expect("reference");
                }
            }
            if step % 10 == 9 {
                let got = nobody_ok(&["cat", s(&f)]);
                let want = std::fs::read(&local).expect("reference");
                assert!(got == want, "{} differs after step {step}", f.display());
            }
        }
        nobody_ok(&["sync", s(&f)]);
    }

    // Reserving space in a compressed file is refused, not faked.
    let o = as_nobody(&["fallocate", "-l", "1M", s(&zs.join("data"))]);
    assert!(
        !o.status.success(),
        "a reservation in a compressed file passed"
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("not supported"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // The objects say how they are stored; compressed ones take less.
    let mut logical = 0u64;
    let mut on_disk = 0u64;
    for (d, packed) in [(&zs, true), (&lz, true), (&off, false)] {
        let f = d.join("data");
        assert_eq!(
            compression_of(&f),
            if packed {
                compression_of(d)
            } else {
                "off".into()
            }
        );
        for o in c.object_files(s(&f)) {
            if !o.exists() {
                continue;
            }
            assert_eq!(
                sum_version(&o),
                if packed { 2 } else { 1 },
                "{}",
                o.display()
            );
            if packed {
                on_disk += std::fs::metadata(&o).expect("stat").blocks() * 512;
            }
        }
        if packed {
            logical += std::fs::metadata(&f).expect("stat").len();
        }
    }
    assert!(
        on_disk * 2 < logical,
        "compressed objects take {on_disk} bytes for {logical}"
    );
    let (dl, ds) = df_packed(&c.mnt);
    assert!(
        dl > 2 * ds && ds > 0,
        "loom df: logical {dl} KiB, stored {ds} KiB"
    );

    // A directory's default changed later applies to new files only.
    loom_ok(&["setstripe", "--compress", "off", s(&lz)]);
    assert_eq!(compression_of(&lz.join("data")), "lz4");
    nobody_ok(&["cp", s(&lz.join("data")), s(&lz.join("copy"))]);
    assert_eq!(compression_of(&lz.join("copy")), "off");

    // Everything reads back the same from a mount with nothing cached,
    // after both OSTs were killed with -9 and restarted; the OSTs count
    // the same usage again.
    for ost in ["ost0", "ost1"] {
        c.kill9(ost);
        c.restart(ost);
    }
    let m2 = c.second_mount("m2");
    std::fs::set_permissions(&m2, std::fs::Permissions::from_mode(0o755)).ok();
    for d in ["zs", "lz", "off"] {
        let got = nobody_ok(&["cat", s(&m2.join(d).join("data"))]);
        let want = std::fs::read(refs.join(d)).expect("reference");
        assert!(got == want, "{d}/data differs after the OSTs' restart");
    }
    let (dl2, ds2) = df_packed(&m2);
    assert_eq!((dl2, ds2), (dl, ds), "usage counted again at start");
    let (code, out) = {
        let o = loom(&["scrub", s(&c.mnt)]);
        (
            o.status.code(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ),
        )
    };
    assert_eq!(code, Some(0), "scrub of compressed objects:\n{out}");

    // A flipped byte in a chunk's stored form is EIO to the reader, never
    // data, and scrub reports the chunk at its offset in the object.
    // The first chunk with a stored form (32-byte header, then 32-byte
    // entries: stored length at 4, slot at 16).
    let (obj, chunk, slot, stored) = c
        .object_files(s(&lz.join("data")))
        .into_iter()
        .filter(|o| o.exists())
        .find_map(|o| {
            let sums = std::fs::read(o.with_extension("sum")).expect("its .sum");
            sums[32..].chunks(32).enumerate().find_map(|(i, e)| {
                let stored = u32::from_le_bytes([e[4], e[5], e[6], e[7]]);
                (stored > 0).then(|| (o.clone(), i as u64, u64::from(e[16]), u64::from(stored)))
            })
        })
        .expect("a stored chunk of lz/data");
    let at = (2 * chunk + slot) * 65536 + stored / 2;
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&obj)
            .expect("open the object");
        let mut b = [0u8];
        f.read_exact_at(&mut b, at).expect("read a byte");
        f.write_all_at(&[b[0] ^ 0x20], at).expect("flip it");
    }
    std::fs::write("/proc/sys/vm/drop_caches", "3").expect("drop caches");
    let o = as_nobody(&["cat", s(&m2.join("lz").join("data"))]);
    assert!(!o.status.success(), "a damaged compressed chunk read back");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("Input/output error"), "cat said: {err}");
    let oid: u64 = obj
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.parse().ok())
        .expect("an object id");
    let o = loom(&["scrub", s(&c.mnt)]);
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        o.status.code(),
        Some(1),
        "scrub with a damaged chunk:\n{out}"
    );
    assert!(
        out.contains(&format!("object {oid} offset {}", chunk * 65536)),
        "{out}"
    );

    // A file's compression is its directory's: setstripe refuses a file.
    let o = loom(&["setstripe", "--compress", "lz4", s(&zs.join("data"))]);
    assert!(!o.status.success(), "--compress on a file was accepted");
}
