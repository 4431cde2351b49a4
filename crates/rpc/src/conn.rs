//! Whole frames on a byte stream.

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
    let mut bulk = vec![0u8; header.bulk_len as usize];
    tokio::time::timeout(FRAME_BODY_TIMEOUT, async {
        r.read_exact(&mut body).await?;
        r.read_exact(&mut bulk).await?;
        Ok::<_, std::io::Error>(())
    })
    .await
    .map_err(|_| ReadError::Stalled(FRAME_BODY_TIMEOUT))??;
    let bad_bulk = header.check_bulk(&bulk).err();
    Ok(Frame {
        header,
        body,
        bulk,
        bad_bulk,
    })
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
