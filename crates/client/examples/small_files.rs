//! Small files through the library, as tar makes them, two ways (issue
//! #32's benchmark of the MDT side of write-back):
//!
//! - `each`: per file a create, its bytes written (Data-on-MDT), then
//!   the chown, chmod and utimens tar sends: five requests, one after
//!   another;
//! - `batch`: per file one `MakeAt` (its final owner, mode, times and
//!   bytes) under FIDs granted to the client, `BATCH` to a request.
//!
//! `small_files MGS KEY_FILE DIR FILES each|batch [BATCH]`: makes `DIR`
//! under the root with a 64 KiB Data-on-MDT default layout and `FILES`
//! files of 1 to 8 KiB in it; prints one JSON line (files, seconds,
//! files per second). Run it against a `loom up` (see
//! `scripts/bench-small-files.sh`, which adds the servers' CPU time).

use loom_client::{Caller, Client, ClientOptions};
use loom_proto::layout::LayoutSpec;
use loom_proto::msg::{FileKind, MdtRequest, SetAttr, SetTime, Time};
use loom_proto::Fid;
use std::time::{Duration, Instant};

fn data(i: u32) -> Vec<u8> {
    vec![b'a' + (i % 26) as u8; 1024 + (i as usize * 37) % 7168]
}

fn die(msg: String) -> ! {
    eprintln!("small_files: {msg}");
    std::process::exit(1)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 6 {
        die("usage: small_files MGS KEY_FILE DIR FILES each|batch [BATCH]".into());
    }
    let key =
        std::fs::read_to_string(&args[2]).unwrap_or_else(|e| die(format!("{}: {e}", args[2])));
    let key = loom_client::ClusterKey::from_hex(key.trim())
        .unwrap_or_else(|e| die(format!("{}: {e}", args[2])));
    let files: u32 = args[4]
        .parse()
        .unwrap_or_else(|e| die(format!("FILES: {e}")));
    let batch: usize = args
        .get(6)
        .map_or(Ok(256), |b| b.parse())
        .unwrap_or_else(|e| die(format!("BATCH: {e}")));
    let opts = ClientOptions {
        call_timeout: Duration::from_secs(60),
        ..ClientOptions::default()
    };
    let client = Client::connect(&args[1], "loom", key, opts)
        .await
        .unwrap_or_else(|e| die(format!("connect: {e}")));
    let me = Caller {
        uid: 0,
        gid: 0,
        groups: Vec::new(),
        pid: 0,
        umask: None,
    };
    let dir = client
        .mkdir(&me, Fid::ROOT, &args[3], 0o755)
        .await
        .unwrap_or_else(|e| die(format!("mkdir {}: {e}", args[3])));
    let spec = LayoutSpec::dom_first(64 << 10);
    client
        .set_default_layout_as(&me, dir.fid, Some(spec))
        .await
        .unwrap_or_else(|e| die(format!("layout: {e}")));
    let t = Time {
        sec: 1_700_000_000,
        nsec: 0,
    };
    let start = Instant::now();
    match args[5].as_str() {
        "each" => {
            for i in 0..files {
                let name = format!("f{i:07}");
                let (a, layout) = client
                    .create(&me, dir.fid, &name, FileKind::File, 0o600, 0, None)
                    .await
                    .unwrap_or_else(|e| die(format!("create {name}: {e}")));
                let layout = layout.unwrap_or_else(|| die(format!("{name}: no layout")));
                let f = client.open_as(&me, a.fid, layout, 0);
                f.write(0, &data(i))
                    .await
                    .unwrap_or_else(|e| die(format!("write {name}: {e}")));
                f.flush()
                    .await
                    .unwrap_or_else(|e| die(format!("close {name}: {e}")));
                for set in [
                    SetAttr {
                        uid: Some(0),
                        gid: Some(0),
                        ..SetAttr::default()
                    },
                    SetAttr {
                        perm: Some(0o644),
                        ..SetAttr::default()
                    },
                    SetAttr {
                        atime: Some(SetTime::At(t)),
                        mtime: Some(SetTime::At(t)),
                        ..SetAttr::default()
                    },
                ] {
                    client
                        .setattr(&me, a.fid, set)
                        .await
                        .unwrap_or_else(|e| die(format!("setattr {name}: {e}")));
                }
            }
        }
        "batch" => {
            let mut i = 0;
            while i < files {
                let n = (files - i).min(4096);
                let (first, _) = client
                    .grant_fids(dir.fid, n)
                    .await
                    .unwrap_or_else(|e| die(format!("grant: {e}")));
                let reqs: Vec<MdtRequest> = (0..n)
                    .map(|k| MdtRequest::MakeAt {
                        parent: dir.fid,
                        name: format!("f{:07}", i + k).into(),
                        fid: Fid::new(first.seq, first.oid + k),
                        kind: FileKind::File,
                        perm: 0o644,
                        rdev: 0,
                        uid: 0,
                        gid: 0,
                        atime: t,
                        mtime: t,
                        ctime: t,
                        made: t,
                        target: None,
                        data: data(i + k),
                    })
                    .collect();
                // At most BATCH files and 512 KiB of bytes to a request
                // (a frame's body holds 1 MiB).
                let mut chunks: Vec<Vec<MdtRequest>> = vec![Vec::new()];
                let mut bytes = 0;
                for r in reqs {
                    let len = match &r {
                        MdtRequest::MakeAt { data, .. } => data.len(),
                        _ => 0,
                    };
                    let last = chunks.len() - 1;
                    if chunks[last].len() >= batch.max(1) || bytes + len > 512 << 10 {
                        chunks.push(Vec::new());
                        bytes = 0;
                    }
                    bytes += len;
                    let last = chunks.len() - 1;
                    chunks[last].push(r);
                }
                for chunk in chunks.iter().filter(|c| !c.is_empty()) {
                    let r = client
                        .batch(&me, dir.fid, chunk.to_vec())
                        .await
                        .unwrap_or_else(|e| die(format!("batch: {e}")));
                    if let Some(Err(e)) = r.iter().find(|r| r.is_err()) {
                        die(format!("batch: {e}"));
                    }
                    if r.len() != chunk.len() {
                        die(format!("batch: {} of {} done", r.len(), chunk.len()));
                    }
                }
                i += n;
            }
        }
        other => die(format!("mode {other}: each or batch")),
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{{\"mode\":\"{}\",\"files\":{files},\"seconds\":{secs:.3},\"files_per_s\":{:.0}}}",
        args[5],
        f64::from(files) / secs
    );
    client.close().await;
}
