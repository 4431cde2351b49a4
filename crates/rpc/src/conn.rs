//! Whole frames on a byte stream.

use bytes::BufMut;
use loom_proto::chunk_sums::ChunkSums;
use loom_proto::frame::{FrameError, FrameHeader, HEADER_LEN};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// A received frame.
#[derive(Debug)]
pub struct Frame {
    /// Its header.
    pub header: FrameHeader,
    /// Postcard body.
    pub body: Vec<u8>,
    /// Bulk data, checksum verified unless `bad_bulk` says otherwise.
    pub bulk: Vec<u8>,
    /// The crc32c of each 4 KiB piece of `bulk`, found by that check.
    pub sums: ChunkSums,
    /// Why the bulk data does not match its checksum, if it does not: the
    /// frame came whole (its header checksum passed) but its data was
    /// damaged on the way, so the connection stays and the receiver asks
    /// for it again.
    pub bad_bulk: Option<FrameError>,
}

/// Why a frame could not be read. All are fatal for the connection.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The peer closed the stream between frames.
    #[error("connection closed")]
    Closed,
    /// A malformed header.
    #[error("malformed frame: {0}")]
    Malformed(#[from] FrameError),
    /// The rest of a frame did not arrive in time.
    #[error("frame body not received within {0:?}")]
    Stalled(Duration),
    /// Socket error.
    #[error("read: {0}")]
    Io(#[from] std::io::Error),
}

/// How long the remainder of a frame may take once its header has arrived:
/// a peer that sends a header and then stalls is dropped.
pub const FRAME_BODY_TIMEOUT: Duration = Duration::from_secs(60);

/// Read one frame. Lengths are checked by the header decoder before the
/// body and bulk buffers are allocated.
pub async fn read_frame<R: AsyncRead + Unpin>(r: &mut R) -> Result<Frame, ReadError> {
    let mut hb = [0u8; HEADER_LEN];
    let mut got = 0;
    while got < HEADER_LEN {
        let n = r.read(&mut hb[got..]).await?;
        if n == 0 {
            return Err(if got == 0 {
                ReadError::Closed
            } else {
                ReadError::Io(std::io::ErrorKind::UnexpectedEof.into())
            });
        }
        got += n;
    }
    let header = match FrameHeader::decode(&hb)? {
        Some(h) => h,
        None => return Err(ReadError::Io(std::io::ErrorKind::UnexpectedEof.into())),
    };
    let mut body = vec![0u8; header.body_len as usize];
    let mut bulk = Vec::with_capacity(header.bulk_len as usize);
    tokio::time::timeout(FRAME_BODY_TIMEOUT, async {
        r.read_exact(&mut body).await?;
        read_into_spare(r, &mut bulk).await
    })
    .await
    .map_err(|_| ReadError::Stalled(FRAME_BODY_TIMEOUT))??;
    let (sums, checked) = header.check_bulk_summed(&bulk);
    Ok(Frame {
        header,
        body,
        bulk,
        sums,
        bad_bulk: checked.err(),
    })
}

/// Fill `buf` up to its capacity from `r`, reading into the spare capacity
/// as it is: a bulk of a few MiB is not zeroed first only to be written
/// over (that memset was 5% of an OST's CPU streaming writes).
async fn read_into_spare<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut Vec<u8>,
) -> std::io::Result<()> {
    let want = buf.capacity();
    while buf.len() < want {
        let room = want - buf.len();
        if r.read_buf(&mut (&mut *buf).limit(room)).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
    }
    Ok(())
}

/// A request's bulk data as a service receives it.
#[derive(Debug, Default)]
pub struct Bulk {
    /// The bytes, checked against the frame's crc32c.
    pub data: Vec<u8>,
    /// The crc32c of each 4 KiB piece of `data`, found by that check
    /// (empty when the bulk did not come off the wire).
    pub sums: ChunkSums,
}

impl Bulk {
    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether it holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

impl From<Vec<u8>> for Bulk {
    /// Bytes whose pieces' sums are not known.
    fn from(data: Vec<u8>) -> Bulk {
        Bulk {
            data,
            sums: ChunkSums::default(),
        }
    }
}

/// Write one frame (header, body, bulk) in a single vectored burst.
pub async fn write_frame<W: AsyncWrite + Unpin>(
    w: &mut W,
    header: &FrameHeader,
    body: &[u8],
    bulk: &[u8],
) -> std::io::Result<()> {
    let hb = header.encode();
    if body.len() + bulk.len() <= 64 * 1024 {
        // Small frames: one buffer, one syscall.
        let mut buf = Vec::with_capacity(HEADER_LEN + body.len() + bulk.len());
        buf.extend_from_slice(&hb);
        buf.extend_from_slice(body);
        buf.extend_from_slice(bulk);
        w.write_all(&buf).await?;
    } else {
        let mut head = Vec::with_capacity(HEADER_LEN + body.len());
        head.extend_from_slice(&hb);
        head.extend_from_slice(body);
        w.write_all(&head).await?;
        w.write_all(bulk).await?;
    }
    w.flush().await
}
