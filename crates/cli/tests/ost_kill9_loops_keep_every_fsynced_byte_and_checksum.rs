//! Issue #11: kill -9 of the OSTs, again and again, while a user's
//! program overwrites a striped file in unaligned, overlapping records
//! and fsyncs each one. After the last restart every fsync'd byte reads
//! back as written (through a mount with nothing cached), and scrub finds
//! no block whose checksum fails: a checksum never lags its data, however
//! a write was cut. The same for a compressed file, whose chunks are
//! rewritten copy-on-write.
mod common;
use common::*;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

/// Records of 100,000 bytes at offsets 48,000 apart, 20 positions over:
/// each overlaps its neighbours and straddles 64 KiB blocks and stripes.
const WRITER: &str = r#"
use Fcntl;
use IO::Handle;
$| = 1;
my ($path, $stop) = @ARGV;
sysopen(my $fh, $path, O_CREAT | O_RDWR, 0644) or die "open: $!";
for (my $i = 0; ! -e $stop; $i++) {
    my $buf = pack("N*", map { $i * 1000003 + $_ } 0 .. 24999);
    sysseek($fh, ($i % 20) * 48000, 0) or die "seek: $!";
    syswrite($fh, $buf) == 100000 or die "write: $!";
    $fh->sync or die "fsync: $!";
    print "synced $i\n";
}
"#;

fn record(i: u32) -> Vec<u8> {
    (0..25_000u32)
        .flat_map(|k| (i.wrapping_mul(1_000_003).wrapping_add(k)).to_be_bytes())
        .collect()
}

#[test]
fn ost_kill9_loops_keep_every_fsynced_byte_and_checksum() {
    kill9_loops(None);
}

#[test]
fn ost_kill9_loops_keep_every_fsynced_byte_of_a_compressed_file() {
    kill9_loops(Some("zstd:1"));
}

/// The loop, on a file made under `compress` (none: plain).
fn kill9_loops(compress: Option<&str>) {
    let mut c = Cluster::up(1, 2, &[]);
    let dir = c.open_dir("w");
    let d = dir.to_str().expect("utf8");
    loom_ok(&["setstripe", "-c", "2", "-S", "64K", d]);
    if let Some(z) = compress {
        loom_ok(&["setstripe", "--compress", z, d]);
    }
    let file = dir.join("log.bin");
    let stop = c.tmp.path().join("stop");
    let mut writer = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .args(["perl", "-e", WRITER])
        .arg(&file)
        .arg(&stop)
        .stdout(Stdio::piped())
        .spawn()
        .expect("writer");
    let mut lines = BufReader::new(writer.stdout.take().expect("stdout")).lines();
    let mut synced = 0u32;
    let mut wait_for = |n: u32, synced: &mut u32| {
        while *synced < n {
            let l = lines
                .next()
                .expect("the writer ended")
                .expect("read the writer");
            *synced = l
                .strip_prefix("synced ")
                .and_then(|k| k.parse::<u32>().ok())
                .expect("a synced line")
                + 1;
        }
    };
    for round in 0..12u32 {
        wait_for(round * 8 + 5, &mut synced);
        let ost = format!("ost{}", round % 2);
        c.kill9_latest(&ost);
        c.restart(&ost);
    }
    wait_for(12 * 8 + 5, &mut synced);
    std::fs::write(&stop, b"").expect("stop file");
    // Drain the records it finished before it saw the stop file.
    while let Some(Ok(l)) = lines.next() {
        if let Some(k) = l
            .strip_prefix("synced ")
            .and_then(|k| k.parse::<u32>().ok())
        {
            synced = k + 1;
        }
    }
    let status = writer.wait().expect("wait for the writer");
    assert!(status.success(), "the writer failed: {status}");
    let made_with = loom_ok(&["getstripe", "-Z", file.to_str().expect("utf8")]);
    assert_eq!(made_with.trim(), compress.unwrap_or("off"));

    let mut want = Vec::new();
    for i in 0..synced {
        let off = (i % 20) as usize * 48_000;
        let r = record(i);
        if want.len() < off + r.len() {
            want.resize(off + r.len(), 0);
        }
        want[off..off + r.len()].copy_from_slice(&r);
    }
    let m2 = c.second_mount("m2");
    let back = std::fs::read(m2.join("w/log.bin")).expect("read through a fresh mount");
    assert_eq!(back.len(), want.len(), "size after {synced} records");
    if let Some(at) = back.iter().zip(&want).position(|(a, b)| a != b) {
        panic!("byte {at} differs after {synced} fsync'd records and 12 OST kills");
    }
    let o = loom(&["scrub", c.mnt.to_str().expect("utf8")]);
    assert!(
        o.status.success(),
        "scrub after the kills:\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}
