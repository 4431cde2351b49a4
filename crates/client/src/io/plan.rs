//! Planning striped I/O, without doing any.
//!
//! A file range is cut by [`split_raid0`] into stripe-unit chunks; the chunks
//! that fall on one object at consecutive object offsets are merged into one
//! [`ObjExtent`] of at most `max_rpc` bytes, so a large read or write sends
//! one request per object per `max_rpc` bytes rather than one per stripe
//! unit. An extent's bytes are contiguous in the object but may be several
//! [`Piece`]s of the caller's buffer (one per stripe row).
//!
//! Invariants of [`plan`]'s output, for a range of `len` bytes:
//! - the pieces of all extents tile `[0, len)` of the buffer exactly once;
//! - within an extent, pieces are in object order and their lengths add up
//!   to the extent's `len`, which is in `1..=max_rpc`.

use loom_proto::layout::split_raid0;

/// Most bytes one object request carries (the design's 4 MiB).
pub const MAX_RPC: usize = 4 << 20;

/// A run of the caller's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    /// Offset in the caller's buffer.
    pub buf_offset: usize,
    /// Length.
    pub len: usize,
}

/// One request's worth of I/O on one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjExtent {
    /// Index of the object in the layout's object list.
    pub stripe: usize,
    /// First byte in the object.
    pub obj_offset: u64,
    /// Bytes, = the sum of the pieces' lengths.
    pub len: usize,
    /// Where those bytes are in the caller's buffer, in object order.
    pub pieces: Vec<Piece>,
}

/// Plan I/O of `len` bytes at file offset `offset` over a RAID-0 layout of
/// `stripe_count` objects and `stripe_size`-byte units, in requests of at
/// most `max_rpc` bytes (treated as at least 1).
pub fn plan(
    stripe_size: u32,
    stripe_count: usize,
    offset: u64,
    len: usize,
    max_rpc: usize,
) -> Vec<ObjExtent> {
    let max_rpc = max_rpc.max(1);
    let mut out: Vec<ObjExtent> = Vec::new();
    // The extent each stripe is filling, as an index into `out`.
    let mut filling: Vec<Option<usize>> = vec![None; stripe_count.max(1)];
    for ch in split_raid0(stripe_size, stripe_count, offset, len) {
        let mut done = 0usize;
        while done < ch.len {
            let obj_offset = ch.obj_offset + done as u64;
            let buf_offset = ch.buf_offset + done;
            let idx = match filling[ch.stripe] {
                Some(i)
                    if out[i].obj_offset + out[i].len as u64 == obj_offset
                        && out[i].len < max_rpc =>
                {
                    i
                }
                _ => {
                    out.push(ObjExtent {
                        stripe: ch.stripe,
                        obj_offset,
                        len: 0,
                        pieces: Vec::new(),
                    });
                    filling[ch.stripe] = Some(out.len() - 1);
                    out.len() - 1
                }
            };
            let ext = &mut out[idx];
            let n = (max_rpc - ext.len).min(ch.len - done);
            match ext.pieces.last_mut() {
                // One object: consecutive units are consecutive in the buffer too.
                Some(p) if p.buf_offset + p.len == buf_offset => p.len += n,
                _ => ext.pieces.push(Piece { buf_offset, len: n }),
            }
            ext.len += n;
            done += n;
        }
    }
    out
}

/// The bytes of `buf` that `ext` writes, in object order, as a bulk to
/// send: a view of `buf` when they lie in one piece (a write within one
/// stripe unit, the streaming case), a copy only when they must be
/// joined.
pub fn gather_bulk(buf: &bytes::Bytes, ext: &ObjExtent) -> bytes::Bytes {
    match ext.pieces.as_slice() {
        [p] => buf.slice(p.buf_offset..p.buf_offset + p.len),
        _ => bytes::Bytes::from(gather(buf, ext)),
    }
}

/// The bytes of `buf` that `ext` writes, in object order.
pub fn gather(buf: &[u8], ext: &ObjExtent) -> Vec<u8> {
    let mut v = Vec::with_capacity(ext.len);
    for p in &ext.pieces {
        v.extend_from_slice(&buf[p.buf_offset..p.buf_offset + p.len]);
    }
    v
}

/// Put the bytes an object returned for `ext` into `out`. `data` may be
/// short (the object ends early, or has a hole at its end): the bytes it
/// lacks are left as they are in `out`, which the caller zero-filled.
/// Extra bytes beyond `ext.len` are ignored.
pub fn scatter(out: &mut [u8], ext: &ObjExtent, data: &[u8]) {
    let mut pos = 0usize;
    for p in &ext.pieces {
        if pos >= data.len() {
            break;
        }
        let n = p.len.min(data.len() - pos);
        out[p.buf_offset..p.buf_offset + n].copy_from_slice(&data[pos..pos + n]);
        pos += p.len;
    }
}

/// How many of the `len` bytes asked for at `offset` a read returns from a
/// file of `size` bytes: none at or past the end.
pub fn clamp_read(offset: u64, len: usize, size: u64) -> usize {
    if offset >= size {
        0
    } else {
        (len as u64).min(size - offset) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An in-memory stand-in for a striped file: one growable byte vector
    /// per object, written and read only through the plan.
    struct Objects(Vec<Vec<u8>>);

    impl Objects {
        fn write(&mut self, ss: u32, offset: u64, data: &[u8], max_rpc: usize) {
            let count = self.0.len();
            for ext in plan(ss, count, offset, data.len(), max_rpc) {
                let bytes = gather(data, &ext);
                let o = &mut self.0[ext.stripe];
                let end = ext.obj_offset as usize + bytes.len();
                if o.len() < end {
                    o.resize(end, 0);
                }
                o[ext.obj_offset as usize..end].copy_from_slice(&bytes);
            }
        }

        fn read(&self, ss: u32, offset: u64, len: usize, size: u64, max_rpc: usize) -> Vec<u8> {
            let n = clamp_read(offset, len, size);
            let mut out = vec![0u8; n];
            for ext in plan(ss, self.0.len(), offset, n, max_rpc) {
                // Short at the object's end, as an OST answers.
                let o = &self.0[ext.stripe];
                let start = (ext.obj_offset as usize).min(o.len());
                let end = (ext.obj_offset as usize + ext.len).min(o.len());
                scatter(&mut out, &ext, &o[start..end]);
            }
            out
        }
    }

    #[test]
    fn a_full_row_over_four_objects_is_one_request_per_object() {
        let exts = plan(1 << 20, 4, 0, 4 << 20, MAX_RPC);
        assert_eq!(exts.len(), 4);
        for (i, e) in exts.iter().enumerate() {
            assert_eq!(e.stripe, i);
            assert_eq!(e.obj_offset, 0);
            assert_eq!(
                e.pieces,
                vec![Piece {
                    buf_offset: i << 20,
                    len: 1 << 20
                }]
            );
        }
    }

    #[test]
    fn rows_on_one_object_merge_into_one_request_of_several_pieces() {
        // 2 stripes of 4 bytes, 16 bytes: object 0 holds file bytes 0-3 and 8-11.
        let exts = plan(4, 2, 0, 16, MAX_RPC);
        assert_eq!(exts.len(), 2);
        assert_eq!(exts[0].stripe, 0);
        assert_eq!(exts[0].len, 8);
        assert_eq!(
            exts[0].pieces,
            vec![
                Piece {
                    buf_offset: 0,
                    len: 4
                },
                Piece {
                    buf_offset: 8,
                    len: 4
                }
            ]
        );
    }

    #[test]
    fn a_single_stripe_file_is_cut_at_the_request_limit_only() {
        let exts = plan(1 << 20, 1, 0, 10 << 20, MAX_RPC);
        assert_eq!(
            exts.iter().map(|e| e.len).collect::<Vec<_>>(),
            vec![4 << 20, 4 << 20, 2 << 20]
        );
        assert!(exts.iter().all(|e| e.pieces.len() == 1));
    }

    #[test]
    fn holes_and_short_objects_read_as_zeros() {
        let mut objs = Objects(vec![Vec::new(); 3]);
        objs.write(4, 20, b"xy", 64);
        // File size 22: bytes 0..20 are a hole, some objects never written.
        let got = objs.read(4, 0, 100, 22, 64);
        let mut want = vec![0u8; 22];
        want[20..].copy_from_slice(b"xy");
        assert_eq!(got, want);
    }

    #[test]
    fn reads_past_the_end_are_clamped() {
        assert_eq!(clamp_read(10, 5, 12), 2);
        assert_eq!(clamp_read(12, 5, 12), 0);
        assert_eq!(clamp_read(20, 5, 12), 0);
        assert_eq!(clamp_read(0, 0, 12), 0);
    }

    proptest! {
        #[test]
        fn plans_tile_the_buffer_and_respect_the_request_limit(
            ss in 1u32..64, sc in 1usize..6, off in 0u64..2048, len in 0usize..2048, max_rpc in 1usize..200,
        ) {
            let exts = plan(ss, sc, off, len, max_rpc);
            let mut covered = vec![0u8; len];
            for e in &exts {
                prop_assert!(e.len >= 1 && e.len <= max_rpc);
                prop_assert!(e.stripe < sc);
                prop_assert_eq!(e.pieces.iter().map(|p| p.len).sum::<usize>(), e.len);
                for p in &e.pieces {
                    for b in &mut covered[p.buf_offset..p.buf_offset + p.len] {
                        *b += 1;
                    }
                }
            }
            prop_assert!(covered.iter().all(|c| *c == 1));
        }

        #[test]
        fn striped_writes_then_reads_match_a_flat_file(
            ss in 1u32..32,
            sc in 1usize..5,
            max_rpc in 1usize..100,
            ops in proptest::collection::vec((0u64..300, proptest::collection::vec(any::<u8>(), 0..120)), 1..8),
            reads in proptest::collection::vec((0u64..500, 0usize..400), 1..8),
        ) {
            let mut objs = Objects(vec![Vec::new(); sc]);
            let mut model: Vec<u8> = Vec::new();
            for (off, data) in ops.iter().filter(|(_, d)| !d.is_empty()) {
                objs.write(ss, *off, data, max_rpc);
                let end = *off as usize + data.len();
                if model.len() < end {
                    model.resize(end, 0);
                }
                model[*off as usize..*off as usize + data.len()].copy_from_slice(data);
            }
            let size = model.len() as u64;
            for (off, len) in &reads {
                let got = objs.read(ss, *off, *len, size, max_rpc);
                let n = clamp_read(*off, *len, size);
                let want = &model[(*off as usize).min(model.len())..][..n];
                prop_assert_eq!(&got[..], want);
            }
        }
    }
}
