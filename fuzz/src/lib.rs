//! What each fuzz target does with its input (the targets in
//! `fuzz_targets/` call these; `tests/corpus.rs` replays the corpora
//! through them on stable Rust). Each feeds bytes a peer or a damaged disk
//! could present to the decoder loomfs reads them with. A decoder must
//! answer with an error, never panic, hang or allocate what the bytes ask
//! for; what decodes must encode and decode again to the same bytes.

use loom_proto::frame::{flags, FrameHeader, HEADER_LEN, MAGIC, VERSION};
use loom_proto::msg::{self, Commit, Envelope, Reply};
use loom_proto::WireError;
use loom_store::kv::Space;
use loom_store::object::ObjectStore;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// A frame as a connection delivers it: the header decoder on the raw
/// bytes; then the same bytes made into a header that passes its checksum
/// (so the fuzzer reaches the lengths and flags), read as a stream with
/// its body and bulk, the body decoded as a request.
pub fn frame(data: &[u8]) {
    if let Ok(Some(h)) = FrameHeader::decode(data) {
        let back = FrameHeader::decode(&h.encode());
        assert_eq!(back, Ok(Some(h)), "a decoded header encodes to itself");
    }
    if data.len() < HEADER_LEN {
        return;
    }
    let mut stream = data.to_vec();
    stream[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    stream[4] = VERSION;
    stream[5] &= flags::KNOWN;
    let crc = crc32c::crc32c(&stream[..36]);
    stream[36..40].copy_from_slice(&crc.to_le_bytes());
    let read = runtime().block_on(loom_rpc::conn::read_frame(&mut &stream[..]));
    if let Ok(f) = read {
        let (body, bulk) = (f.header.body_len as usize, f.header.bulk_len as usize);
        assert_eq!(
            (f.body.len(), f.bulk.len()),
            (body, bulk),
            "lengths as told"
        );
        if f.bad_bulk.is_none() && !f.bulk.is_empty() {
            assert_eq!(crc32c::crc32c(&f.bulk), f.header.bulk_crc);
        }
        let _ = msg::decode::<Envelope>(&f.body);
    }
}

/// A message body: the first byte picks what it is read as (a request,
/// a reply, an error, a reply behind its commit state, as the client
/// reads an MDT's answer, or the key-value batches a replicated MDT's
/// primary ships in a bulk).
pub fn message(data: &[u8]) {
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    match pick % 5 {
        0 => again::<Envelope>(body),
        1 => again::<Reply>(body),
        2 => again::<WireError>(body),
        4 => {
            use loom_proto::replica::kv_wire;
            if let Ok(batches) = kv_wire::decode(body) {
                let back = kv_wire::encode(batches.iter().map(Vec::as_slice));
                assert_eq!(back, body, "decoded batches encode to their bytes");
            }
        }
        _ => {
            if let Ok((c, rest)) = msg::decode_prefix::<Commit>(body) {
                let _ = msg::encode(&c).expect("a decoded commit state encodes");
                again::<Reply>(rest);
            }
        }
    }
}

/// Decode `body` as a `T`; if it decodes, its encoding decodes to a value
/// that encodes the same.
fn again<T: Serialize + DeserializeOwned>(body: &[u8]) {
    let Ok(v) = msg::decode::<T>(body) else {
        return;
    };
    let first = msg::encode(&v).expect("a decoded message encodes");
    let back: T = msg::decode(&first).expect("an encoded message decodes");
    let second = msg::encode(&back).expect("encodes again");
    assert_eq!(first, second, "a message reads back as itself");
}

/// A record of an MDT's store: the first byte picks the keyspace
/// (`loom_server::mdt::stored::SPACES`), the rest is the value.
pub fn mdt_record(data: &[u8]) {
    use loom_server::mdt::stored;
    let Some((&pick, value)) = data.split_first() else {
        return;
    };
    let space: Space = stored::SPACES[pick as usize % stored::SPACES.len()];
    if let Err(e) = stored::decode(space, value) {
        assert!(!e.starts_with("re-encoded"), "{space:?}: {e}");
    }
}

/// An OST object's two files as a damaged disk could leave them: byte 0
/// picks the checksum file's header (0: as given, 1: a plain object's,
/// 2: a compressed object's), bytes 1..3 how many of the rest go to the
/// checksum file (little-endian), the rest to the data file. The store
/// then reads, sizes and verifies the object: errors are fine, panics,
/// hangs and huge allocations are not. The whole input is also read as
/// a snapshot map (`loom_store::snaps`).
pub fn ost_object(data: &[u8]) {
    // The snapshot map a target keeps beside its objects, read the same
    // way (torn or damaged records skipped).
    let _ = loom_store::snaps::decode(data);
    let [pick, a, b, rest @ ..] = data else {
        return;
    };
    let split = usize::from(u16::from_le_bytes([*a, *b])).min(rest.len());
    let (sums_part, data_part) = rest.split_at(split);
    let mut sums = match pick % 3 {
        0 => Vec::new(),
        1 => loom_store::sums::header().to_vec(),
        _ => {
            let size = sums_part
                .get(..8)
                .map_or(0, |s| u64::from_le_bytes(s.try_into().unwrap_or([0; 8])));
            loom_store::packed::header(loom_proto::Compress::LZ4, size).to_vec()
        }
    };
    sums.extend_from_slice(sums_part);
    let store = store();
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let oid = NEXT.fetch_add(1, Ordering::Relaxed);
    let write = |p: std::path::PathBuf, b: &[u8]| std::fs::write(p, b).expect("a test file");
    write(store.object_path(oid), data_part);
    write(store.sums_path(oid), &sums);
    let _ = store.size(oid);
    let _ = store.read(oid, 0, 256 << 10);
    let _ = store.read(oid, 1 << 20, 4096);
    let _ = store.verify(oid);
    let _ = store.destroy(oid);
    let _ = std::fs::remove_file(store.object_path(oid));
    let _ = std::fs::remove_file(store.sums_path(oid));
}

/// One object store for the process, in a temporary directory (on
/// tmpfs when there is one: each input writes two files).
fn store() -> &'static ObjectStore {
    static STORE: OnceLock<(tempfile::TempDir, ObjectStore)> = OnceLock::new();
    let (_, s) = STORE.get_or_init(|| {
        let base = ["/dev/shm", "/tmp"]
            .into_iter()
            .find(|d| std::path::Path::new(d).is_dir())
            .unwrap_or("/tmp");
        let dir = tempfile::Builder::new()
            .prefix("loom-fuzz")
            .tempdir_in(base)
            .expect("a temporary directory");
        let s = ObjectStore::open(dir.path()).expect("an object store");
        (dir, s)
    });
    s
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime")
    })
}
