//! The send stream (`loom send`, `loom receive`): a magic, then records,
//! each framed as `[u32 length][postcard payload][u32 crc32c]`. The
//! checksum is chained: each record's covers its payload and every record
//! before it, so a record damaged, dropped, repeated or moved is found
//! where it is read, and a receive that resumes knows it is reading the
//! same stream as before (the chain at its checkpoint matches).
//!
//! Records are append-only variants: a later version adds some, and a
//! receiver refuses a stream whose version it does not know.

use loom_proto::compress::Compress;
use loom_proto::layout::LayoutSpec;
use loom_proto::msg::{DirDefault, FileKind, Time};
use loom_proto::Fid;
use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};

/// The stream's first bytes.
pub const MAGIC: &[u8; 8] = b"LOOMSEND";
/// The stream format this build writes and reads.
pub const VERSION: u32 = 1;
/// Largest record a reader accepts: a data record holds at most
/// [`DATA_CHUNK`] bytes; past this the length itself is damage.
pub const MAX_RECORD: usize = 16 << 20;
/// Bytes of file data per record.
pub const DATA_CHUNK: usize = 1 << 20;

/// A snapshot as the stream names it: its file system's name and the
/// MGS's number and creation time make it unique across clusters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapRef {
    /// The sending file system's name.
    pub fsname: String,
    /// The snapshot's name.
    pub name: String,
    /// Its number on the sending MGS (never reused there).
    pub id: u32,
    /// When it was taken (seconds since the epoch).
    pub created: u64,
}

impl SnapRef {
    /// What identifies it in a receiver's ledger and a resume checkpoint.
    pub fn guid(&self) -> String {
        format!("{}:{}:{}", self.fsname, self.id, self.created)
    }
}

/// The first record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// [`VERSION`] of the writer.
    pub version: u32,
    /// The snapshot the stream recreates.
    pub snapshot: SnapRef,
    /// For an incremental stream, the snapshot it builds on: the receiver
    /// must hold it (the last one it received into that tree).
    pub base: Option<SnapRef>,
    /// The sent tree's path in the sending file system ('/'-joined from
    /// its root; empty for the root).
    pub tree: Vec<u8>,
}

/// How a regular file keeps its bytes: its layout as a spec (stripe
/// counts and sizes, components, Data-on-MDT; not which OSTs) and its
/// compression.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileLayout {
    /// Its components.
    pub spec: LayoutSpec,
    /// How its objects are compressed.
    pub compress: Option<Compress>,
}

/// Where a directory is placed: its shard count and its MDT, kept when
/// the receiving file system has that MDT.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirPlace {
    /// Shards (1: not striped).
    pub count: u32,
    /// MDT of its master inode.
    pub mdt: u32,
}

/// Which pass of the receive the records that follow belong to (see
/// `send::plan`): a resume never goes back across one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Phase {
    /// Names leave: removed, or moved aside to the staging directory.
    Remove,
    /// Names arrive: made, moved back from staging, linked.
    Place,
    /// File data, extended attributes and directory defaults.
    Content,
    /// Owners, modes and times, deepest first.
    Attrs,
}

/// One record. Paths are relative to the tree received into, '/'-joined;
/// empty is that tree's root.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Record {
    /// Always the first.
    Header(Header),
    /// The records that follow belong to this pass.
    Phase(Phase),
    /// Move `path` aside to the staging directory, under the sender's
    /// FID of its inode.
    Stage {
        /// Where it is.
        path: Vec<u8>,
        /// Its name in staging.
        fid: Fid,
    },
    /// Remove non-directory `path`.
    Unlink {
        /// What goes.
        path: Vec<u8>,
    },
    /// Remove empty directory `path`.
    Rmdir {
        /// What goes.
        path: Vec<u8>,
    },
    /// Move staged `fid` to `path`.
    Unstage {
        /// Its name in staging.
        fid: Fid,
        /// Where it goes.
        path: Vec<u8>,
    },
    /// Make directory `path`.
    Mkdir {
        /// Where.
        path: Vec<u8>,
        /// Its mode bits.
        perm: u32,
        /// Its placement.
        place: DirPlace,
    },
    /// Make a non-directory, non-symlink `path`.
    Create {
        /// Where.
        path: Vec<u8>,
        /// What kind.
        kind: FileKind,
        /// Its mode bits.
        perm: u32,
        /// A device's number.
        rdev: u32,
        /// A regular file's layout.
        layout: Option<FileLayout>,
    },
    /// Make symbolic link `path` to `target`.
    Symlink {
        /// Where.
        path: Vec<u8>,
        /// What it points to.
        target: Vec<u8>,
    },
    /// Make `path` another name of the inode at `to`.
    Link {
        /// The new name.
        path: Vec<u8>,
        /// An existing name of the inode.
        to: Vec<u8>,
    },
    /// The data records that follow are regular file `path`'s, which is
    /// `size` bytes long (cut or grown, as a hole, to it).
    Open {
        /// The file.
        path: Vec<u8>,
        /// Its size.
        size: u64,
    },
    /// Bytes of the open file at `offset`.
    Data {
        /// Where.
        offset: u64,
        /// What.
        bytes: Vec<u8>,
    },
    /// A range of the open file that now reads as zeros (punched).
    Zero {
        /// Where.
        offset: u64,
        /// How long.
        len: u64,
    },
    /// The whole set of `path`'s extended attributes (ACLs among them):
    /// others it has go.
    Xattrs {
        /// Whose.
        path: Vec<u8>,
        /// Names and values.
        set: Vec<(Vec<u8>, Vec<u8>)>,
    },
    /// Directory `path`'s defaults for what is made in it.
    DirDefaults {
        /// Whose.
        path: Vec<u8>,
        /// Its files' layout.
        layout: Option<LayoutSpec>,
        /// Its files' compression.
        compress: Option<Compress>,
        /// Its subdirectories' placement.
        dirs: Option<DirDefault>,
    },
    /// `path`'s owner, mode and times.
    Attr {
        /// Whose.
        path: Vec<u8>,
        /// Owner.
        uid: u32,
        /// Group.
        gid: u32,
        /// Mode bits (with set-id and sticky bits).
        perm: u32,
        /// Last access.
        atime: Time,
        /// Last modification.
        mtime: Time,
    },
    /// Always the last: how many records came before it.
    End {
        /// Records before this one, the header included.
        records: u64,
    },
}

/// The chain's start: the checksum of the magic.
pub fn chain_start() -> u32 {
    crc32c::crc32c(MAGIC)
}

/// Writes records, chaining their checksums.
pub struct Writer<W: Write> {
    out: W,
    chain: u32,
    records: u64,
    bytes: u64,
}

impl<W: Write> Writer<W> {
    /// Start a stream on `out` (its magic is written at once).
    pub fn new(mut out: W) -> io::Result<Writer<W>> {
        out.write_all(MAGIC)?;
        Ok(Writer {
            out,
            chain: chain_start(),
            records: 0,
            bytes: MAGIC.len() as u64,
        })
    }

    /// Append `r`.
    pub fn put(&mut self, r: &Record) -> io::Result<()> {
        let payload = postcard::to_stdvec(r).map_err(io::Error::other)?;
        self.chain = crc32c::crc32c_append(self.chain, &payload);
        let len = u32::try_from(payload.len()).map_err(io::Error::other)?;
        self.out.write_all(&len.to_le_bytes())?;
        self.out.write_all(&payload)?;
        self.out.write_all(&self.chain.to_le_bytes())?;
        self.records += 1;
        self.bytes += payload.len() as u64 + 8;
        Ok(())
    }

    /// Records written so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Bytes written so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// End the stream with its [`Record::End`] and flush it.
    pub fn finish(mut self) -> io::Result<W> {
        let records = self.records;
        self.put(&Record::End { records })?;
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Why a stream cannot be read on.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// Not a loomfs stream at all.
    #[error("not a loomfs send stream (bad magic)")]
    NotAStream,
    /// It stops before its end record.
    #[error("the stream ends early, after {0} records (interrupted?)")]
    Truncated(u64),
    /// A record does not match its checksum, or cannot be decoded.
    #[error("the stream is damaged at record {0}: {1}")]
    Damaged(u64, String),
    /// Reading failed.
    #[error("reading the stream: {0}")]
    Io(#[from] io::Error),
}

/// Reads records, checking the chain.
pub struct Reader<R: Read> {
    input: R,
    chain: u32,
    records: u64,
    bytes: u64,
    ended: bool,
}

/// Read exactly `buf.len()` bytes, or `Ok(false)` at a clean end before
/// the first.
fn fill(input: &mut impl Read, buf: &mut [u8]) -> io::Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        match input.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

impl<R: Read> Reader<R> {
    /// Start reading `input`, checking its magic.
    pub fn new(mut input: R) -> Result<Reader<R>, StreamError> {
        let mut magic = [0u8; 8];
        match fill(&mut input, &mut magic) {
            Ok(true) if &magic == MAGIC => {}
            Ok(_) => return Err(StreamError::NotAStream),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                return Err(StreamError::NotAStream)
            }
            Err(e) => return Err(e.into()),
        }
        Ok(Reader {
            input,
            chain: chain_start(),
            records: 0,
            bytes: MAGIC.len() as u64,
            ended: false,
        })
    }

    /// Records read so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// The checksum chain after the records read so far.
    pub fn chain(&self) -> u32 {
        self.chain
    }

    /// Bytes read so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The next record; `None` after [`Record::End`]. A stream that stops
    /// before it is [`StreamError::Truncated`].
    pub fn next_record(&mut self) -> Result<Option<Record>, StreamError> {
        if self.ended {
            return Ok(None);
        }
        let truncated = |n| StreamError::Truncated(n);
        let mut len = [0u8; 4];
        match fill(&mut self.input, &mut len) {
            Ok(true) => {}
            Ok(false) => return Err(truncated(self.records)),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                return Err(truncated(self.records))
            }
            Err(e) => return Err(e.into()),
        }
        let len = u32::from_le_bytes(len) as usize;
        if len > MAX_RECORD {
            return Err(StreamError::Damaged(
                self.records,
                format!("record length {len} is past the largest, {MAX_RECORD}"),
            ));
        }
        let mut buf = vec![0u8; len + 4];
        match fill(&mut self.input, &mut buf) {
            Ok(true) => {}
            Ok(false) => return Err(truncated(self.records)),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                return Err(truncated(self.records))
            }
            Err(e) => return Err(e.into()),
        }
        let (payload, sum) = buf.split_at(len);
        let chain = crc32c::crc32c_append(self.chain, payload);
        let mut want = [0u8; 4];
        want.copy_from_slice(sum);
        if u32::from_le_bytes(want) != chain {
            return Err(StreamError::Damaged(
                self.records,
                "checksum mismatch".into(),
            ));
        }
        let r: Record = postcard::from_bytes(payload)
            .map_err(|e| StreamError::Damaged(self.records, e.to_string()))?;
        if let Record::End { records } = r {
            if records != self.records {
                return Err(StreamError::Damaged(
                    self.records,
                    format!(
                        "the end record counts {records} records, {} came",
                        self.records
                    ),
                ));
            }
            self.ended = true;
        }
        self.chain = chain;
        self.records += 1;
        self.bytes += len as u64 + 8;
        Ok(Some(r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(records: &[Record]) -> Vec<u8> {
        let mut w = Writer::new(Vec::new()).expect("writer");
        for r in records {
            w.put(r).expect("put");
        }
        w.finish().expect("finish")
    }

    fn read_all(bytes: &[u8]) -> Result<Vec<Record>, StreamError> {
        let mut r = Reader::new(bytes)?;
        let mut out = Vec::new();
        while let Some(x) = r.next_record()? {
            out.push(x);
        }
        Ok(out)
    }

    fn sample() -> Vec<Record> {
        vec![
            Record::Phase(Phase::Place),
            Record::Mkdir {
                path: b"d".to_vec(),
                perm: 0o755,
                place: DirPlace { count: 2, mdt: 1 },
            },
            Record::Open {
                path: b"d/f".to_vec(),
                size: 10,
            },
            Record::Data {
                offset: 0,
                bytes: b"0123456789".to_vec(),
            },
        ]
    }

    #[test]
    fn records_come_back_as_written_then_the_end() {
        let got = read_all(&stream(&sample())).expect("read");
        assert_eq!(got.len(), 5);
        assert_eq!(&got[..4], &sample()[..]);
        assert_eq!(got[4], Record::End { records: 4 });
    }

    #[test]
    fn every_flipped_byte_is_damage_or_a_refusal() {
        let good = stream(&sample());
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x5a;
            assert!(read_all(&bad).is_err(), "byte {i} flipped went unnoticed");
        }
    }

    #[test]
    fn a_cut_stream_is_truncated_and_a_dropped_record_is_damage() {
        let good = stream(&sample());
        for cut in 8..good.len() {
            match read_all(&good[..cut]) {
                Err(StreamError::Truncated(_)) | Err(StreamError::Damaged(..)) => {}
                other => panic!("cut at {cut}: {other:?}"),
            }
        }
        // Drop the second record (the Mkdir): the chain breaks at the next.
        let mut w = Writer::new(Vec::new()).expect("writer");
        let mut skipped = Writer::new(Vec::new()).expect("writer");
        for (i, r) in sample().iter().enumerate() {
            skipped.put(r).expect("put");
            if i != 1 {
                w.put(r).expect("put");
            }
        }
        let whole = skipped.finish().expect("finish");
        let first = 8 + 4 + postcard::to_stdvec(&sample()[0]).expect("enc").len() + 4;
        let second_len = 4 + postcard::to_stdvec(&sample()[1]).expect("enc").len() + 4;
        let mut spliced = whole[..first].to_vec();
        spliced.extend_from_slice(&whole[first + second_len..]);
        assert!(matches!(
            read_all(&spliced),
            Err(StreamError::Damaged(1, _))
        ));
        assert!(matches!(
            Reader::new(&b"NOTLOOMS"[..]),
            Err(StreamError::NotAStream)
        ));
    }
}
