//! The frame: a fixed 40-byte header, a postcard body, then optional bulk data.
//!
//! ```text
//!  0       4   5   6       8               16      20      24      28      32      36      40
//!  +-------+---+---+-------+---------------+-------+-------+-------+-------+-------+-------+
//!  | magic |ver|flg|opcode | request id    |bodylen|bulklen|bulkcrc| rsvd  | rsvd  |hdr crc|
//!  +-------+---+---+-------+---------------+-------+-------+-------+-------+-------+-------+
//! ```
//!
//! All integers are little-endian. `hdr crc` is crc32c of bytes 0..36, so a
//! corrupt length is caught before it is used. `bulk crc` is crc32c of the
//! bulk bytes (0 when there are none): every bulk transfer is checksummed end
//! to end. Lengths are bounded by [`MAX_BODY`] and [`MAX_BULK`] before any
//! buffer is allocated.
//!
//! Decoding is pure: [`FrameHeader::decode`] takes bytes and answers
//! `Ok(None)` when more are needed ("incomplete" is a value, not an error).

use thiserror::Error;

/// "LOOM" in ASCII, read as a little-endian u32.
pub const MAGIC: u32 = u32::from_le_bytes(*b"LOOM");
/// The protocol version this code speaks. Bumped only for incompatible changes.
pub const VERSION: u8 = 1;
/// Size of the fixed header.
pub const HEADER_LEN: usize = 40;
/// Largest body accepted: bodies are metadata, never file data.
pub const MAX_BODY: u32 = 1 << 20;
/// Largest bulk payload accepted in one frame (4 MiB of file data, the
/// largest request the client sends, plus room to spare).
pub const MAX_BULK: u32 = 8 << 20;

/// Frame flag bits.
pub mod flags {
    /// The frame is a reply (else a request).
    pub const REPLY: u8 = 0x01;
    /// The reply body is a `WireError` instead of a reply message.
    pub const ERROR: u8 = 0x02;
    /// The reply body starts with a `msg::Commit` (an MDT's answer to a
    /// client: the change's transaction number and what is committed).
    pub const COMMIT: u8 = 0x04;
    /// Bits that this version knows; others must be zero.
    pub const KNOWN: u8 = REPLY | ERROR | COMMIT;
}

/// The fixed part of every frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// Flag bits from [`flags`].
    pub flags: u8,
    /// The operation; replies echo the request's.
    pub opcode: u16,
    /// Chosen by the requester, echoed by the reply; unique per connection
    /// among requests in flight.
    pub request_id: u64,
    /// Length of the postcard body that follows the header.
    pub body_len: u32,
    /// Length of the bulk data that follows the body.
    pub bulk_len: u32,
    /// crc32c of the bulk data.
    pub bulk_crc: u32,
    /// Where the bulk's 4 KiB pieces start: the length of a short first
    /// piece ([`crate::chunk_sums`]). In bytes 28..30, reserved (zero)
    /// before; a receiver that ignores it only sums more.
    pub bulk_phase: u16,
}

/// Why a header was refused. Each is fatal for the connection: after a bad
/// header the stream position can no longer be trusted.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum FrameError {
    /// The first four bytes are not "LOOM".
    #[error("bad magic {0:#010x}")]
    BadMagic(u32),
    /// A protocol version this code does not speak.
    #[error("unsupported protocol version {0}")]
    BadVersion(u8),
    /// Flag bits this version does not know.
    #[error("unknown flag bits {0:#04x}")]
    BadFlags(u8),
    /// The header checksum does not match.
    #[error("header checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    BadHeaderCrc {
        /// The checksum in the frame.
        stored: u32,
        /// The checksum of the bytes received.
        computed: u32,
    },
    /// Body longer than [`MAX_BODY`].
    #[error("body length {0} exceeds the limit of {MAX_BODY}")]
    BodyTooLong(u32),
    /// Bulk longer than [`MAX_BULK`].
    #[error("bulk length {0} exceeds the limit of {MAX_BULK}")]
    BulkTooLong(u32),
    /// Bulk data does not match its checksum.
    #[error("bulk checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    BadBulkCrc {
        /// The checksum in the header.
        stored: u32,
        /// The checksum of the bytes received.
        computed: u32,
    },
}

fn le_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

impl FrameHeader {
    /// A header for `body` and `bulk` (computes the bulk checksum).
    pub fn new(flags: u8, opcode: u16, request_id: u64, body: &[u8], bulk: &[u8]) -> FrameHeader {
        FrameHeader {
            flags,
            opcode,
            request_id,
            body_len: body.len() as u32,
            bulk_len: bulk.len() as u32,
            bulk_crc: if bulk.is_empty() {
                0
            } else {
                crc32c::crc32c(bulk)
            },
            bulk_phase: 0,
        }
    }

    /// This header with its bulk's pieces starting at `phase` (see
    /// [`FrameHeader::bulk_phase`]).
    pub fn with_bulk_phase(self, phase: u16) -> FrameHeader {
        FrameHeader {
            bulk_phase: phase,
            ..self
        }
    }

    /// The header's 40 bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4] = VERSION;
        b[5] = self.flags;
        b[6..8].copy_from_slice(&self.opcode.to_le_bytes());
        b[8..16].copy_from_slice(&self.request_id.to_le_bytes());
        b[16..20].copy_from_slice(&self.body_len.to_le_bytes());
        b[20..24].copy_from_slice(&self.bulk_len.to_le_bytes());
        b[24..28].copy_from_slice(&self.bulk_crc.to_le_bytes());
        b[28..30].copy_from_slice(&self.bulk_phase.to_le_bytes());
        // 30..36 reserved, zero.
        let crc = crc32c::crc32c(&b[..36]);
        b[36..40].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decode a header from the start of `buf`: `Ok(None)` if fewer than
    /// [`HEADER_LEN`] bytes are there yet, an error if they are not a valid
    /// header. Lengths are checked against the limits here, so a caller may
    /// allocate `body_len + bulk_len` once this returns `Ok(Some(_))`.
    pub fn decode(buf: &[u8]) -> Result<Option<FrameHeader>, FrameError> {
        if buf.len() < HEADER_LEN {
            return Ok(None);
        }
        let magic = le_u32(buf, 0);
        if magic != MAGIC {
            return Err(FrameError::BadMagic(magic));
        }
        let stored = le_u32(buf, 36);
        let computed = crc32c::crc32c(&buf[..36]);
        if stored != computed {
            return Err(FrameError::BadHeaderCrc { stored, computed });
        }
        if buf[4] != VERSION {
            return Err(FrameError::BadVersion(buf[4]));
        }
        let flags = buf[5];
        if flags & !flags::KNOWN != 0 {
            return Err(FrameError::BadFlags(flags));
        }
        let h = FrameHeader {
            flags,
            opcode: le_u16(buf, 6),
            request_id: le_u64(buf, 8),
            body_len: le_u32(buf, 16),
            bulk_len: le_u32(buf, 20),
            bulk_crc: le_u32(buf, 24),
            bulk_phase: le_u16(buf, 28),
        };
        if h.body_len > MAX_BODY {
            return Err(FrameError::BodyTooLong(h.body_len));
        }
        if h.bulk_len > MAX_BULK {
            return Err(FrameError::BulkTooLong(h.bulk_len));
        }
        Ok(Some(h))
    }

    /// Check received bulk bytes against the header's checksum.
    pub fn check_bulk(&self, bulk: &[u8]) -> Result<(), FrameError> {
        let computed = if bulk.is_empty() {
            0
        } else {
            crc32c::crc32c(bulk)
        };
        if computed != self.bulk_crc {
            return Err(FrameError::BadBulkCrc {
                stored: self.bulk_crc,
                computed,
            });
        }
        Ok(())
    }

    /// [`FrameHeader::check_bulk`], in the same pass finding the crc32c
    /// of each 4 KiB piece of `bulk` (see [`crate::chunk_sums`]).
    pub fn check_bulk_summed(
        &self,
        bulk: &[u8],
    ) -> (crate::chunk_sums::ChunkSums, Result<(), FrameError>) {
        let (sums, computed) =
            crate::chunk_sums::ChunkSums::of_phased(bulk, self.bulk_phase.into());
        let r = if computed == self.bulk_crc {
            Ok(())
        } else {
            Err(FrameError::BadBulkCrc {
                stored: self.bulk_crc,
                computed,
            })
        };
        (sums, r)
    }

    /// Whether this frame is a reply.
    pub fn is_reply(&self) -> bool {
        self.flags & flags::REPLY != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn short_input_is_incomplete_not_an_error() {
        let h = FrameHeader::new(0, 7, 9, b"abc", b"");
        let bytes = h.encode();
        for n in 0..HEADER_LEN {
            assert_eq!(FrameHeader::decode(&bytes[..n]), Ok(None));
        }
        assert_eq!(FrameHeader::decode(&bytes), Ok(Some(h)));
    }

    #[test]
    fn oversized_lengths_are_refused_before_allocation() {
        let mut h = FrameHeader::new(0, 1, 1, b"", b"");
        h.body_len = MAX_BODY + 1;
        assert!(matches!(
            FrameHeader::decode(&h.encode()),
            Err(FrameError::BodyTooLong(_))
        ));
        h.body_len = 0;
        h.bulk_len = u32::MAX;
        assert!(matches!(
            FrameHeader::decode(&h.encode()),
            Err(FrameError::BulkTooLong(_))
        ));
    }

    #[test]
    fn flipped_header_bit_is_caught_by_the_header_crc() {
        let bytes = FrameHeader::new(0, 1, 42, b"xx", b"yy").encode();
        for i in 4..36 {
            let mut b = bytes;
            b[i] ^= 0x10;
            assert!(FrameHeader::decode(&b).is_err(), "byte {i}");
        }
    }

    #[test]
    fn bulk_corruption_is_detected() {
        let h = FrameHeader::new(0, 1, 1, b"", b"payload");
        assert_eq!(h.check_bulk(b"payload"), Ok(()));
        assert!(matches!(
            h.check_bulk(b"paylaod"),
            Err(FrameError::BadBulkCrc { .. })
        ));
    }

    proptest! {
        #[test]
        fn decode_never_panics_on_random_bytes(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = FrameHeader::decode(&b);
        }

        #[test]
        fn encode_decode_round_trip(flags in 0u8..8, op: u16, id: u64, body in 0u32..MAX_BODY, bulk in 0u32..MAX_BULK, crc: u32, phase: u16) {
            let h = FrameHeader { flags, opcode: op, request_id: id, body_len: body, bulk_len: bulk, bulk_crc: crc, bulk_phase: phase };
            prop_assert_eq!(FrameHeader::decode(&h.encode()), Ok(Some(h)));
        }
    }
}
