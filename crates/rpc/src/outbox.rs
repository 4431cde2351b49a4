//! The sending side of one connection: frames are written by the task
//! that sends them when the socket takes them at once, and by the
//! connection's writer task only when it does not.
//!
//! Why: a hand-off to a writer task costs a thread wake-up per request
//! (the sender's thread queues, a parked runtime worker is woken to make
//! the system call). On a small machine that wake-up is a good part of a
//! metadata round trip. A sender that finds nothing queued makes one
//! non-blocking write itself; what the socket does not take (it is full)
//! is queued, and from then on every frame goes through the queue, in
//! order, until the writer task has drained it.
//!
//! The direct write has no await point, so a sender whose future is
//! dropped can never leave half a frame on the stream.

use bytes::Bytes;
use loom_proto::frame::FrameHeader;
use std::collections::VecDeque;
use std::io::{ErrorKind, IoSlice};
use std::sync::Mutex;
use std::time::Duration;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::Notify;

/// Bytes the queue may hold before senders wait for the writer (a peer
/// that stopped reading holds up its senders, not the process's memory).
const QUEUE_MAX: usize = 64 << 20;
/// Buffers written with one system call by the writer.
const WRITEV_MAX: usize = 64;

/// The connection is closed: nothing more can be sent on it.
#[derive(Debug)]
pub struct Closed;

/// See the module documentation.
pub struct Outbox {
    wr: OwnedWriteHalf,
    state: Mutex<Queue>,
    /// Wakes the writer: something was queued, or the box closed.
    work: Notify,
    /// Wakes senders waiting for room.
    room: Notify,
}

#[derive(Default)]
struct Queue {
    parts: VecDeque<Bytes>,
    bytes: usize,
    /// Frames go through the queue until the writer has drained it.
    queued: bool,
    closed: bool,
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Outbox")
    }
}

impl Outbox {
    /// An outbox writing to `wr`; run [`Outbox::run`] in a task of its own.
    pub fn new(wr: OwnedWriteHalf) -> Outbox {
        Outbox {
            wr,
            state: Mutex::new(Queue::default()),
            work: Notify::new(),
            room: Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Send one frame: written now when nothing is queued and the socket
    /// takes it, queued for the writer otherwise.
    pub async fn send(
        &self,
        header: &FrameHeader,
        body: &[u8],
        bulk: &Bytes,
    ) -> Result<(), Closed> {
        let hb = header.encode();
        let mut head = Vec::with_capacity(hb.len() + body.len());
        head.extend_from_slice(&hb);
        head.extend_from_slice(body);
        let corrupted = crate::fail::on_the_wire(bulk);
        let bulk = corrupted.as_ref().unwrap_or(bulk);
        let len = head.len() + bulk.len();
        loop {
            // Wait for room first: nothing is written before this returns.
            let room = self.room.notified();
            {
                let q = self.lock();
                if q.closed {
                    return Err(Closed);
                }
                if q.bytes + len <= QUEUE_MAX || q.bytes == 0 {
                    break;
                }
            }
            room.await;
        }
        let mut q = self.lock();
        if q.closed {
            return Err(Closed);
        }
        let mut written = 0;
        if !q.queued {
            let parts = [IoSlice::new(&head), IoSlice::new(bulk)];
            match self.wr.try_write_vectored(&parts) {
                Ok(n) => written = n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => {
                    tracing::debug!("write: {e}");
                    q.closed = true;
                    drop(q);
                    self.work.notify_one();
                    self.room.notify_waiters();
                    return Err(Closed);
                }
            }
            if written == len {
                return Ok(());
            }
        }
        // What the socket did not take, in order after what is queued.
        let head = Bytes::from(head);
        if written < head.len() {
            q.parts.push_back(head.slice(written..));
            q.parts.push_back(bulk.clone());
        } else {
            q.parts.push_back(bulk.slice(written - head.len()..));
        }
        q.parts.retain(|p| !p.is_empty());
        q.bytes += len - written;
        if !q.queued {
            q.queued = true;
            self.work.notify_one();
        }
        Ok(())
    }

    /// Close: senders get [`Closed`] and the writer stops.
    pub fn close(&self) {
        self.lock().closed = true;
        self.work.notify_one();
        self.room.notify_waiters();
    }

    /// Close, and shut the socket down both ways at once: the peer sees
    /// the connection end even while others still hold this outbox.
    pub fn shutdown(&self) {
        use std::os::fd::AsRawFd;
        self.close();
        let stream: &tokio::net::TcpStream = self.wr.as_ref();
        // ENOTCONN: the peer is gone already.
        let _ = nix::sys::socket::shutdown(stream.as_raw_fd(), nix::sys::socket::Shutdown::Both);
    }

    /// Whether the outbox was closed (by [`Outbox::close`] or a failed
    /// write).
    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Write what senders queued, in order, until the box closes or a
    /// write fails or stalls for `write_timeout`. Queued frames are
    /// written before a close is honoured, so replies already sent leave
    /// before the socket closes.
    pub async fn run(&self, write_timeout: Duration) -> Result<(), String> {
        loop {
            let work = self.work.notified();
            let batch: Vec<Bytes> = {
                let mut q = self.lock();
                if q.parts.is_empty() {
                    q.queued = false;
                    if q.closed {
                        return Ok(());
                    }
                    Vec::new()
                } else {
                    let n = q.parts.len().min(WRITEV_MAX);
                    q.parts.drain(..n).collect()
                }
            };
            if batch.is_empty() {
                work.await;
                continue;
            }
            let total: usize = batch.iter().map(|b| b.len()).sum();
            let r = tokio::time::timeout(write_timeout, self.write_all(&batch)).await;
            let failure = match r {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(format!("write: {e}")),
                Err(_) => Some(format!("write stalled for {write_timeout:?}")),
            };
            {
                let mut q = self.lock();
                q.bytes = q.bytes.saturating_sub(total);
                if failure.is_some() {
                    q.closed = true;
                }
            }
            self.room.notify_waiters();
            if let Some(f) = failure {
                return Err(f);
            }
        }
    }

    async fn write_all(&self, parts: &[Bytes]) -> std::io::Result<()> {
        let (mut i, mut off) = (0, 0);
        while i < parts.len() {
            self.wr.writable().await?;
            let slices: Vec<IoSlice<'_>> = std::iter::once(&parts[i][off..])
                .chain(parts[i + 1..].iter().map(|p| &p[..]))
                .map(IoSlice::new)
                .collect();
            let mut n = match self.wr.try_write_vectored(&slices) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            };
            while n > 0 {
                let left = parts[i].len() - off;
                if n >= left {
                    n -= left;
                    i += 1;
                    off = 0;
                } else {
                    off += n;
                    n = 0;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::read_frame;
    use std::sync::Arc;
    use tokio::net::{TcpListener, TcpStream};

    /// Many senders, frames of every size (some far larger than a socket
    /// buffer, so that the queue and the writer are used while a reader
    /// drains slowly): every frame arrives whole, and each sender's in the
    /// order it sent them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn frames_arrive_whole_and_in_order_whoever_writes_them() {
        let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = l.local_addr().expect("addr");
        let client = TcpStream::connect(addr).await.expect("connect");
        let (server, _) = l.accept().await.expect("accept");
        let (_rd, wr) = client.into_split();
        let out = Arc::new(Outbox::new(wr));
        let writer = {
            let out = out.clone();
            tokio::spawn(async move { out.run(Duration::from_secs(30)).await })
        };
        let mut senders = Vec::new();
        for s in 0..4u64 {
            let out = out.clone();
            senders.push(tokio::spawn(async move {
                for i in 0..200u64 {
                    let size = match i % 5 {
                        0 => 3 << 20,
                        1 => 70_000,
                        _ => (i * 37 % 1000) as usize,
                    };
                    let bulk = Bytes::from(vec![(s * 31 + i) as u8; size]);
                    let body = (s << 32 | i).to_le_bytes();
                    let h = FrameHeader::new(0, 1, s << 32 | i, &body, &bulk);
                    out.send(&h, &body, &bulk).await.expect("send");
                }
            }));
        }
        let (mut rd, _wr) = server.into_split();
        let mut next = [0u64; 4];
        for _ in 0..800 {
            let f = read_frame(&mut rd).await.expect("a whole frame");
            let id = f.header.request_id;
            let (s, i) = ((id >> 32) as usize, id & 0xffff_ffff);
            assert_eq!(i, next[s], "sender {s}'s frames in order");
            next[s] += 1;
            assert_eq!(f.body, id.to_le_bytes());
            assert!(f.bulk.iter().all(|b| *b == (s as u64 * 31 + i) as u8));
        }
        for s in senders {
            s.await.expect("sender");
        }
        out.close();
        writer.await.expect("writer").expect("no write failure");
    }
}
