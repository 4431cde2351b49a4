//! Bytes this mount wrote that the kernel holds in folios it does not
//! count as up to date, kept until they can be handed back to it.
//!
//! Without a kernel writeback cache, a write(2) copies its bytes into the
//! page cache and marks a folio up to date only if the write covered the
//! whole of it. A write that starts or ends inside a page (IOR-hard's
//! 47,008-byte records, appends of text lines) leaves the folio it starts
//! in (up to 32 KiB here, the kernel sizes folios to the write) and the page
//! it ends in not up to date, even once another write has covered the rest.
//! Every later read of such a folio is a synchronous FUSE READ, one folio
//! at a time: the page cache kept under a lease served IOR-hard at 344 MiB/s
//! against 1,093 when every open dropped it (issue #34).
//!
//! So the mount keeps the bytes of every write that leaves a page ragged,
//! and of any write over bytes it keeps, under the file's attribute lease
//! (the write's own buffer, shared with the client's send, in pieces):
//! - A READ that kept bytes cover is answered from them, without the OSTs.
//! - A chunk kept whole is stored into the kernel's cache
//!   (`FUSE_NOTIFY_STORE`, which marks every folio it fills whole up to
//!   date) from inside a later WRITE elsewhere in the file, before that
//!   WRITE is answered (`LoomFs::store_while_writing` says why that is
//!   safe), and dropped.
//! - When the last handle of this mount that may write the file is
//!   released, a thread of its own stores what is left, and drops it.
//!
//! What makes a store at the release safe: it starts only with no handle
//! open for writing, and an open for writing that comes while it runs is
//! answered when it ends ([`KeptPages::writer_opened`]), so no write(2)
//! can be copying into the file's folios meanwhile and the kept bytes are
//! what the file holds; a size change that comes meanwhile drops what is
//! kept, which ends the store, and is answered when it has ended
//! ([`KeptPages::size_changed`]), so the kernel cuts its pages after it.
//! It runs under the file's *gate*, which every lease recall (`notify.rs`)
//! takes first: with the lease unchanged, no other client changed the
//! file, and a recall that comes waits for the store before it drops the
//! pages. That store runs on a thread of its own, not a FUSE worker, and
//! no open or size change waits for it on a worker: it waits for folio locks, which readers hold
//! until a worker answers them. A store from inside a WRITE runs on a
//! worker only as `LoomFs::store_while_writing` says.
//!
//! Written through mmap (`FUSE_WRITE_CACHE`): nothing of the file is kept
//! until no handle of this mount may write it. Past [`CAP`] bytes kept in
//! all, the file's bytes are dropped, and the caller makes the next open
//! drop the kernel's pages instead (as without leases).

use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

/// Bytes of a page.
pub const PAGE: u64 = 4096;
/// Kept bytes never cross a multiple of this, so merging a write into
/// what is kept copies at most this much, and a store never splits a
/// folio (folios are aligned to their size, at most 1 MiB on a FUSE
/// mount with 1 MiB requests).
pub const CHUNK: u64 = 1 << 20;
/// Bytes kept in all, over every file of the mount.
pub const CAP: usize = 256 << 20;

/// What a write did to what is kept.
#[derive(Debug, PartialEq, Eq)]
pub enum Kept {
    /// Nothing to keep, or kept.
    Fine,
    /// The file's bytes could not all be kept: its next open must drop
    /// the kernel's pages.
    Dropped,
}

#[derive(Default)]
struct File {
    /// Open handles of this mount that may write the file, and of those
    /// the ones opened for reading too (O_RDWR), the only ones that may
    /// map it shared and writable.
    writers: u32,
    readers_too: u32,
    /// The lease the bytes are kept under.
    lease: Option<u64>,
    /// Start offset to bytes; never overlapping, never crossing a
    /// multiple of [`CHUNK`]. Pieces of the writes themselves, shared
    /// with the client's sends: keeping a write copies nothing, and a
    /// piece written over is cut, not copied. (A piece cut short keeps
    /// its whole write's buffer alive; [`CAP`] counts what is kept.)
    runs: BTreeMap<u64, Bytes>,
    /// Bytes kept of each chunk, to tell a chunk kept whole.
    covered: HashMap<u64, u64>,
    /// Written through mmap, or overflowed: keep nothing more until no
    /// handle writes the file.
    closed: bool,
    /// Chunks kept whole (one run of [`CHUNK`] bytes), not yet stored.
    ready: BTreeSet<u64>,
}

impl File {
    fn bytes(&self) -> usize {
        self.runs.values().map(Bytes::len).sum()
    }

    fn put(&mut self, at: u64, b: Bytes) {
        *self.covered.entry(at / CHUNK * CHUNK).or_default() += b.len() as u64;
        self.runs.insert(at, b);
    }

    fn take(&mut self, at: u64) -> Option<Bytes> {
        let b = self.runs.remove(&at)?;
        let chunk = at / CHUNK * CHUNK;
        if let Some(c) = self.covered.get_mut(&chunk) {
            *c -= b.len() as u64;
            if *c == 0 {
                self.covered.remove(&chunk);
            }
        }
        Some(b)
    }

    fn clear(&mut self) {
        self.runs.clear();
        self.covered.clear();
        self.ready.clear();
    }

    /// The runs from `from` on that follow each other without a gap,
    /// within `from`'s chunk.
    fn contiguous(&self, from: u64) -> Option<(u64, Vec<Bytes>)> {
        let (&start, _) = self.runs.range(from..).next()?;
        let end = (start / CHUNK + 1) * CHUNK;
        let mut at = start;
        let mut pieces = Vec::new();
        for (&st, b) in self.runs.range(start..end) {
            if st != at {
                break;
            }
            at += b.len() as u64;
            pieces.push(b.clone());
        }
        Some((start, pieces))
    }
}

/// What an open for writing does once it may: answer the kernel.
pub type Then = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct State {
    files: HashMap<u64, File>,
    total: usize,
    /// Files whose kept bytes the store thread is storing at their
    /// release, and what came meanwhile and waits for its end: opens for
    /// writing (whether for reading too), counted then, and size changes
    /// (`None`).
    storing: HashMap<u64, Vec<(Option<bool>, Then)>>,
}

impl State {
    fn count_writer(&mut self, ino: u64, rdwr: bool) {
        let f = self.files.entry(ino).or_default();
        f.writers += 1;
        f.readers_too += u32::from(rdwr);
    }
}

impl State {
    fn clear(&mut self, ino: u64) {
        if let Some(f) = self.files.get_mut(&ino) {
            self.total -= f.bytes();
            f.clear();
            f.lease = None;
        }
    }
}

/// The kept bytes of every file of one mount, and their gates.
#[derive(Default)]
pub struct KeptPages {
    state: Mutex<State>,
    gates: Mutex<HashMap<u64, Arc<Mutex<()>>>>,
    cap: usize,
}

impl std::fmt::Debug for KeptPages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeptPages").finish_non_exhaustive()
    }
}

/// `[start, end)` cut at multiples of [`CHUNK`].
fn chunks(start: u64, end: u64) -> impl Iterator<Item = (u64, u64)> {
    let mut at = start;
    std::iter::from_fn(move || {
        if at >= end {
            return None;
        }
        let next = ((at / CHUNK + 1) * CHUNK).min(end);
        let r = (at, next);
        at = next;
        Some(r)
    })
}

impl KeptPages {
    /// Keep at most `cap` bytes in all.
    pub fn new(cap: usize) -> KeptPages {
        KeptPages {
            cap,
            ..KeptPages::default()
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The gate of `ino` (see the module's docs). Hold its lock while
    /// storing at the release, or dropping its pages on a recall.
    pub fn gate(&self, ino: u64) -> Arc<Mutex<()>> {
        let mut g = self.gates.lock().unwrap_or_else(|p| p.into_inner());
        g.entry(ino).or_default().clone()
    }

    /// A handle that may write `ino` was opened, `rdwr` if for reading
    /// too: it is counted, and `then` (the answer to the kernel) runs, at
    /// once, or, while a store at the release runs, when it ends. An open
    /// never waits for a store on a FUSE worker: the store may wait for a
    /// reader's folio, which needs a worker to answer the READ.
    pub fn writer_opened(&self, ino: u64, rdwr: bool, then: Then) {
        let mut s = self.lock();
        if let Some(waiting) = s.storing.get_mut(&ino) {
            waiting.push((Some(rdwr), then));
            return;
        }
        s.count_writer(ino, rdwr);
        drop(s);
        then();
    }

    /// `ino`'s size changed (without a handle, or through one): what is
    /// kept of it is dropped, so a store at the release running now stops
    /// after the run it is storing, and `then` (the answer that lets the
    /// kernel cut its pages) runs when that store ends, or at once.
    pub fn size_changed(&self, ino: u64, then: Then) {
        let mut s = self.lock();
        s.clear(ino);
        if let Some(waiting) = s.storing.get_mut(&ino) {
            waiting.push((None, then));
            return;
        }
        drop(s);
        then();
    }

    /// Whether a store of `ino`'s kept bytes at the release may start: no
    /// handle writes it and bytes are kept. If so, opens for writing wait
    /// for [`Self::end_store`], which the caller must call.
    pub fn begin_store(&self, ino: u64) -> bool {
        let mut s = self.lock();
        let go = s
            .files
            .get(&ino)
            .is_some_and(|f| f.writers == 0 && !f.runs.is_empty());
        if go {
            s.storing.insert(ino, Vec::new());
        }
        go
    }

    /// The store of `ino` ended: the opens that came meanwhile are
    /// counted and answered.
    pub fn end_store(&self, ino: u64) {
        let mut s = self.lock();
        let waiting = s.storing.remove(&ino).unwrap_or_default();
        let mut answers = Vec::with_capacity(waiting.len());
        for (rdwr, then) in waiting {
            if let Some(rdwr) = rdwr {
                s.count_writer(ino, rdwr);
            }
            answers.push(then);
        }
        drop(s);
        for then in answers {
            then();
        }
    }

    /// A handle that may write `ino` was released: whether it was the
    /// last one and bytes are kept to store.
    pub fn writer_released(&self, ino: u64, rdwr: bool) -> bool {
        let mut s = self.lock();
        let Some(f) = s.files.get_mut(&ino) else {
            return false;
        };
        f.writers = f.writers.saturating_sub(1);
        f.readers_too = f.readers_too.saturating_sub(u32::from(rdwr));
        if f.writers == 0 {
            // A file overflowed or mapped may keep again from scratch.
            f.closed = false;
        }
        f.writers == 0 && !f.runs.is_empty()
    }

    /// `data` was written at `offset` of `ino` under `lease` (`None`: no
    /// lease), `cache` if by the kernel's write-back of mmap'ed pages.
    /// What is kept of it is `data` itself, shared, not a copy.
    pub fn wrote(
        &self,
        ino: u64,
        lease: Option<u64>,
        offset: u64,
        data: &Bytes,
        cache: bool,
    ) -> Kept {
        let end = offset + data.len() as u64;
        let ragged = !offset.is_multiple_of(PAGE) || !end.is_multiple_of(PAGE);
        let mut s = self.lock();
        let s = &mut *s;
        let f = s.files.entry(ino).or_default();
        let other_lease = f.lease.is_some_and(|l| Some(l) != lease);
        if cache || lease.is_none() || other_lease {
            // Kept under a lease since lost, another client may have
            // changed those bytes: drop them, and keep afresh under this one.
            s.total -= f.bytes();
            f.clear();
            f.lease = None;
            f.closed |= cache;
            if cache || lease.is_none() {
                return Kept::Fine;
            }
        }
        let overlaps = f
            .runs
            .range(..end)
            .next_back()
            .is_some_and(|(&st, b)| st + b.len() as u64 > offset);
        if (!ragged && !overlaps) || data.is_empty() {
            return Kept::Fine;
        }
        if f.closed {
            // Bytes written over kept ones would leave those stale.
            s.total -= f.bytes();
            f.clear();
            return Kept::Dropped;
        }
        f.lease = lease;
        for (cs, ce) in chunks(offset, end) {
            // The runs the piece overlaps lose what it covers: what is
            // left of each on either side stays, cut from the same bytes.
            let over: Vec<u64> = f
                .runs
                .range(..ce)
                .rev()
                .take_while(|(&st, b)| st + b.len() as u64 > cs)
                .map(|(&st, _)| st)
                .collect();
            for st in over {
                let Some(b) = f.take(st) else { continue };
                s.total -= b.len();
                let stop = st + b.len() as u64;
                if st < cs {
                    let left = b.slice(..(cs - st) as usize);
                    s.total += left.len();
                    f.put(st, left);
                }
                if stop > ce {
                    let right = b.slice((ce - st) as usize..);
                    s.total += right.len();
                    f.put(ce, right);
                }
            }
            let piece = data.slice((cs - offset) as usize..(ce - offset) as usize);
            s.total += piece.len();
            f.put(cs, piece);
            let chunk = cs / CHUNK * CHUNK;
            if f.covered.get(&chunk) == Some(&CHUNK) {
                f.ready.insert(chunk);
            }
        }
        if s.total > self.cap {
            s.total -= f.bytes();
            f.clear();
            f.closed = true;
            return Kept::Dropped;
        }
        Kept::Fine
    }

    /// The bytes `[offset, offset + len)` of `ino`, if kept under
    /// `lease` whole.
    pub fn read(
        &self,
        ino: u64,
        lease: impl FnOnce() -> Option<u64>,
        offset: u64,
        len: u64,
    ) -> Option<Vec<u8>> {
        let mut s = self.lock();
        let held = s.files.get(&ino)?.lease;
        if s.files.get(&ino)?.runs.is_empty() || len == 0 {
            return None;
        }
        if held != lease() {
            s.clear(ino);
            return None;
        }
        let f = s.files.get(&ino)?;
        let end = offset + len;
        let mut out = Vec::with_capacity(len as usize);
        let mut at = offset;
        while at < end {
            let (&st, b) = f.runs.range(..=at).next_back()?;
            let stop = st + b.len() as u64;
            if stop <= at {
                return None;
            }
            let take = stop.min(end);
            out.extend_from_slice(&b[(at - st) as usize..(take - st) as usize]);
            at = take;
        }
        Some(out)
    }

    /// `ino`'s first bytes kept from `from` on, to store in the kernel's
    /// cache: where they start, and the pieces that follow each other
    /// from there without a gap (within one chunk). Only with no handle
    /// open for writing and the same lease held, else everything kept of
    /// it is dropped (call under the gate, store, then [`Self::stored`],
    /// before letting the gate go). The pieces stay kept meanwhile, so
    /// READs of folios not yet stored are still answered from them.
    pub fn next_to_store(
        &self,
        ino: u64,
        lease: Option<u64>,
        from: u64,
    ) -> Option<(u64, Vec<Bytes>)> {
        let mut s = self.lock();
        let f = s.files.get(&ino)?;
        if f.writers != 0 || lease.is_none() || f.lease != lease {
            s.clear(ino);
            return None;
        }
        f.contiguous(from)
    }

    /// A chunk of `ino` kept whole under `lease`, that lies
    /// outside `[avoid_start, avoid_end)` rounded out to chunks: what a
    /// WRITE handler may store while the writer waits for its answer
    /// (the module's docs say when). None while a handle opened O_RDWR is
    /// open: it may map the file shared and writable, and a page changed
    /// through the map, not yet written back, would be overwritten.
    pub fn whole_chunk(
        &self,
        ino: u64,
        lease: Option<u64>,
        avoid_start: u64,
        avoid_end: u64,
    ) -> Option<(u64, Vec<Bytes>)> {
        let s = self.lock();
        let f = s.files.get(&ino)?;
        if lease.is_none() || f.lease != lease || f.readers_too > 0 {
            return None;
        }
        let (lo, hi) = (
            avoid_start / CHUNK * CHUNK,
            avoid_end.div_ceil(CHUNK) * CHUNK,
        );
        let at = *f.ready.iter().find(|&&c| c + CHUNK <= lo || c >= hi)?;
        f.contiguous(at)
    }

    /// Whether `ino` has chunks kept whole, not yet stored.
    pub fn has_whole_chunks(&self, ino: u64) -> bool {
        self.lock()
            .files
            .get(&ino)
            .is_some_and(|f| !f.ready.is_empty())
    }

    /// `[start, start + len)` of `ino`, kept in whole pieces as
    /// [`Self::next_to_store`] or [`Self::whole_chunk`] gave them, is in
    /// the kernel's cache: drop those pieces.
    pub fn stored(&self, ino: u64, start: u64, len: u64) {
        let mut s = self.lock();
        let s = &mut *s;
        let Some(f) = s.files.get_mut(&ino) else {
            return;
        };
        let gone: Vec<u64> = f
            .runs
            .range(start..start + len)
            .map(|(&st, _)| st)
            .collect();
        for st in gone {
            if let Some(b) = f.take(st) {
                s.total -= b.len();
            }
        }
        f.ready.retain(|&c| c + CHUNK <= start || c >= start + len);
    }

    /// Drop what is kept of `ino` (its size changed, a write failed, its
    /// lease was recalled).
    pub fn drop_file(&self, ino: u64) {
        self.lock().clear(ino);
    }

    /// The kernel forgot `ino`: nothing of it is cached or open.
    pub fn forget(&self, ino: u64) {
        let mut s = self.lock();
        if let Some(f) = s.files.remove(&ino) {
            s.total -= f.bytes();
        }
        drop(s);
        let mut g = self.gates.lock().unwrap_or_else(|p| p.into_inner());
        if g.get(&ino).is_some_and(|a| Arc::strong_count(a) == 1) {
            g.remove(&ino);
        }
    }

    /// Bytes kept in all.
    pub fn total(&self) -> usize {
        self.lock().total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(k: &KeptPages, ino: u64, lease: Option<u64>, at: u64, d: &[u8], cache: bool) -> Kept {
        k.wrote(ino, lease, at, &Bytes::copy_from_slice(d), cache)
    }

    fn pattern(offset: u64, len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| ((offset + i as u64) % 251) as u8 ^ seed)
            .collect()
    }

    #[test]
    fn unaligned_records_are_kept_and_read_back_whole() {
        let k = KeptPages::new(CAP);
        let rec = 47_008u64;
        // Two writers' records, in the order IOR-hard's ranks land them:
        // 25 of them, past the first chunk.
        let order = (0..12u64).flat_map(|p| [2 * p + 1, 2 * p]).chain([24]);
        for i in order {
            let d = pattern(i * rec, rec as usize, 0);
            assert_eq!(w(&k, 7, Some(1), i * rec, &d, false), Kept::Fine);
        }
        let want = pattern(0, 25 * rec as usize, 0);
        let got = k.read(7, || Some(1), 0, 25 * rec).expect("all kept");
        assert_eq!(got, want);
        // Across a chunk boundary and inside one record.
        let got = k.read(7, || Some(1), CHUNK - 10, 20).expect("kept");
        assert_eq!(got, want[(CHUNK - 10) as usize..(CHUNK + 10) as usize]);
        assert_eq!(k.total(), 25 * rec as usize);
        // Past what was written: not kept.
        assert!(k.read(7, || Some(1), 25 * rec - 4, 8).is_none());
        // Another lease: the other client's change may differ; dropped.
        assert!(k.read(7, || Some(2), 0, 10).is_none());
        assert_eq!(k.total(), 0);
        // Under the new lease, a ragged write is kept again; a write under
        // yet another drops it and is kept in its place.
        w(&k, 7, Some(2), 5, &[9; 10], false);
        assert_eq!(k.read(7, || Some(2), 5, 10), Some(vec![9; 10]));
        w(&k, 7, Some(3), 100, &[8; 10], false);
        assert_eq!(k.total(), 10);
        assert_eq!(k.read(7, || Some(3), 100, 10), Some(vec![8; 10]));
    }

    #[test]
    fn overlapping_ragged_writes_in_any_order_read_back_as_last_written() {
        let k = KeptPages::new(CAP);
        let span = 3 * CHUNK as usize;
        let mut model = vec![None::<u8>; span];
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for round in 0..400u64 {
            // Odd lengths: every write leaves a page ragged and is kept.
            let len = (next(200_000) | 1) as usize;
            let at = next((span - len) as u64);
            let d = pattern(at, len, round as u8);
            assert_eq!(w(&k, 2, Some(1), at, &d, false), Kept::Fine);
            for (i, b) in d.iter().enumerate() {
                model[at as usize + i] = Some(*b);
            }
        }
        // Every byte written reads back as its last write left it.
        let mut at = 0;
        while at < span {
            let some = model[at].is_some();
            let run = model[at..]
                .iter()
                .position(|b| b.is_some() != some)
                .unwrap_or(span - at);
            if some {
                let want: Vec<u8> = model[at..at + run].iter().flatten().copied().collect();
                let got = k.read(2, || Some(1), at as u64, run as u64).expect("kept");
                assert_eq!(got, want, "at {at}");
            }
            at += run;
        }
        assert!(k.total() <= CAP);
    }

    #[test]
    fn aligned_writes_keep_nothing_but_update_what_is_kept() {
        let k = KeptPages::new(CAP);
        assert_eq!(w(&k, 1, Some(1), 0, &[1; PAGE as usize], false), Kept::Fine);
        assert_eq!(k.total(), 0);
        w(&k, 1, Some(1), PAGE + 100, &[2; 200], false);
        assert_eq!(k.total(), 200);
        // A whole page over kept bytes: they must not go stale.
        w(&k, 1, Some(1), PAGE, &[3; PAGE as usize], false);
        assert_eq!(k.read(1, || Some(1), PAGE + 100, 200), Some(vec![3; 200]));
        // Through mmap: nothing is kept from then on.
        w(&k, 1, Some(1), 0, &[4; PAGE as usize], true);
        assert_eq!(k.total(), 0);
        assert_eq!(w(&k, 1, Some(1), 5, &[5; 10], false), Kept::Dropped);
        assert_eq!(k.total(), 0);
    }

    #[test]
    fn a_store_takes_the_bytes_only_once_no_handle_writes() {
        let k = KeptPages::new(CAP);
        k.writer_opened(3, false, Box::new(|| {}));
        k.writer_opened(3, false, Box::new(|| {}));
        w(&k, 3, Some(9), 10, &[1; 100], false);
        assert!(k.next_to_store(3, Some(9), 0).is_none(), "writers are open");
        w(&k, 3, Some(9), 10, &[1; 100], false);
        assert!(!k.writer_released(3, false));
        assert!(k.writer_released(3, false));
        assert!(
            k.next_to_store(3, Some(8), 0).is_none(),
            "the lease changed"
        );
        assert_eq!(k.total(), 0, "dropped with the lease");
        w(&k, 3, Some(9), 10, &[1; 100], false);
        w(&k, 3, Some(9), 2 * CHUNK + 5, &[2; 10], false);
        let (at, pieces) = k.next_to_store(3, Some(9), 0).expect("first run");
        assert_eq!((at, pieces.concat()), (10, vec![1; 100]));
        // Still answered while the store runs.
        assert_eq!(k.read(3, || Some(9), 10, 100), Some(vec![1; 100]));
        k.stored(3, 10, 100);
        let (at, _) = k.next_to_store(3, Some(9), 110).expect("second run");
        assert_eq!(at, 2 * CHUNK + 5);
        k.stored(3, at, 10);
        assert!(k.next_to_store(3, Some(9), at + 10).is_none());
        assert_eq!(k.total(), 0);
    }

    #[test]
    fn chunks_kept_whole_are_offered_away_from_the_write() {
        let k = KeptPages::new(CAP);
        let rec = 47_008u64;
        let mut at = 0;
        while at < 2 * CHUNK + rec {
            w(&k, 5, Some(1), at, &pattern(at, rec as usize, 0), false);
            at += rec;
        }
        assert!(k.has_whole_chunks(5));
        // Chunks 0 and 1 are whole; 2 is not. A write in chunk 2 may
        // store chunk 0 first; one across the edge of 0 and 1, neither.
        let (c, pieces) = k
            .whole_chunk(5, Some(1), 2 * CHUNK, 2 * CHUNK + 9)
            .expect("chunk 0");
        assert_eq!((c, pieces.concat()), (0, pattern(0, CHUNK as usize, 0)));
        assert!(k.whole_chunk(5, Some(1), CHUNK - 5, CHUNK + 5).is_none());
        assert!(
            k.whole_chunk(5, Some(2), 2 * CHUNK, 2 * CHUNK + 9)
                .is_none(),
            "another lease"
        );
        k.stored(5, 0, CHUNK);
        // Chunk 1 is offered to a write elsewhere.
        let (c, _) = k.whole_chunk(5, Some(1), 0, 10).expect("chunk 1");
        assert_eq!(c, CHUNK);
        // What was stored is no longer kept; the rest still reads back.
        assert!(k.read(5, || Some(1), 0, 10).is_none());
        assert_eq!(
            k.read(5, || Some(1), CHUNK, 100),
            Some(pattern(CHUNK, 100, 0))
        );
    }

    #[test]
    fn no_chunk_is_offered_while_a_handle_may_map_the_file_writable() {
        let k = KeptPages::new(CAP);
        k.writer_opened(6, true, Box::new(|| {}));
        w(&k, 6, Some(1), 1, &vec![1; CHUNK as usize + 10], false);
        w(&k, 6, Some(1), 0, &[1], false);
        assert!(k.has_whole_chunks(6));
        assert!(k
            .whole_chunk(6, Some(1), 5 * CHUNK, 5 * CHUNK + 1)
            .is_none());
        k.writer_opened(6, false, Box::new(|| {}));
        assert!(!k.writer_released(6, true));
        assert!(k
            .whole_chunk(6, Some(1), 5 * CHUNK, 5 * CHUNK + 1)
            .is_some());
    }

    #[test]
    fn an_open_for_writing_during_a_store_is_answered_when_it_ends() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let k = KeptPages::new(CAP);
        let answered = Arc::new(AtomicUsize::new(0));
        let answer = || {
            let a = answered.clone();
            Box::new(move || {
                a.fetch_add(1, Ordering::SeqCst);
            }) as Then
        };
        k.writer_opened(8, false, answer());
        assert_eq!(answered.load(Ordering::SeqCst), 1, "no store: at once");
        w(&k, 8, Some(1), 3, &[1; 10], false);
        assert!(!k.begin_store(8), "a handle writes");
        assert!(k.writer_released(8, false));
        assert!(k.begin_store(8));
        k.writer_opened(8, true, answer());
        assert_eq!(answered.load(Ordering::SeqCst), 1, "waits for the store");
        // Not counted yet: the store goes on.
        assert!(k.next_to_store(8, Some(1), 0).is_some());
        k.end_store(8);
        assert_eq!(answered.load(Ordering::SeqCst), 2);
        // Counted now: no store, and chunks wait for the O_RDWR handle.
        assert!(!k.begin_store(8));
        assert!(k.next_to_store(8, Some(1), 0).is_none());
    }

    #[test]
    fn a_size_change_during_a_store_is_answered_when_it_ends() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let k = KeptPages::new(CAP);
        let answered = Arc::new(AtomicUsize::new(0));
        let a = answered.clone();
        k.size_changed(
            9,
            Box::new(move || {
                a.fetch_add(1, Ordering::SeqCst);
            }),
        );
        assert_eq!(answered.load(Ordering::SeqCst), 1, "no store: at once");
        w(&k, 9, Some(1), 3, &[1; 10], false);
        assert!(k.begin_store(9));
        let a = answered.clone();
        k.size_changed(
            9,
            Box::new(move || {
                a.fetch_add(1, Ordering::SeqCst);
            }),
        );
        assert_eq!(answered.load(Ordering::SeqCst), 1, "waits for the store");
        assert!(
            k.next_to_store(9, Some(1), 0).is_none(),
            "nothing left to store"
        );
        k.end_store(9);
        assert_eq!(answered.load(Ordering::SeqCst), 2);
        assert!(!k.begin_store(9), "not counted as a writer, nothing kept");
    }

    #[test]
    fn past_the_cap_a_file_keeps_nothing_until_its_writers_are_gone() {
        let k = KeptPages::new(3 * PAGE as usize);
        k.writer_opened(4, false, Box::new(|| {}));
        assert_eq!(
            w(&k, 4, Some(1), 1, &[1; 2 * PAGE as usize], false),
            Kept::Fine
        );
        assert_eq!(
            w(&k, 4, Some(1), 3 * PAGE + 1, &[1; 2 * PAGE as usize], false),
            Kept::Dropped
        );
        assert_eq!(k.total(), 0);
        assert_eq!(w(&k, 4, Some(1), 7, &[1; 10], false), Kept::Dropped);
        k.writer_released(4, false);
        assert_eq!(w(&k, 4, Some(1), 7, &[1; 10], false), Kept::Fine);
        assert_eq!(k.total(), 10);
        k.forget(4);
        assert_eq!(k.total(), 0);
    }
}
