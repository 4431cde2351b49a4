//! Wire corruption for tests: the bulk data of the next frames this
//! process sends gets one bit flipped after its checksum was computed, as
//! a bad NIC or cable would do. Armed by [`corrupt_next`], or for a whole
//! process by `LOOM_CORRUPT_BULK=N` (its first N frames with bulk data).
//! Unarmed (always, outside tests), a frame costs one atomic load.

use bytes::Bytes;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The environment variable that arms it for a whole process.
pub const ENV: &str = "LOOM_CORRUPT_BULK";

fn left() -> &'static AtomicU64 {
    static LEFT: OnceLock<AtomicU64> = OnceLock::new();
    LEFT.get_or_init(|| {
        AtomicU64::new(
            std::env::var(ENV)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
        )
    })
}

/// Corrupt the bulk data of the next `n` frames this process sends.
pub fn corrupt_next(n: u64) {
    left().store(n, Ordering::Relaxed);
}

/// `bulk` as it goes on the wire: a copy with one bit flipped while armed.
pub(crate) fn on_the_wire(bulk: &Bytes) -> Option<Bytes> {
    if bulk.is_empty() {
        return None;
    }
    let l = left();
    let mut n = l.load(Ordering::Relaxed);
    loop {
        if n == 0 {
            return None;
        }
        match l.compare_exchange_weak(n, n - 1, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => break,
            Err(now) => n = now,
        }
    }
    let mut v = bulk.to_vec();
    let at = v.len() / 2;
    v[at] ^= 0x08;
    tracing::warn!(
        "{ENV}: flipped a bit of a {}-byte bulk on its way out",
        v.len()
    );
    Some(Bytes::from(v))
}
