//! Write-behind: a write returns once its requests are on their way; the
//! OSTs' answers are collected in the background.
//!
//! A streaming writer then keeps several OSTs busy at once instead of
//! waiting for one round trip per write. What a caller relies on still
//! holds:
//!
//! - **Order.** A write waits for every write in flight (through any handle
//!   of this client) whose range overlaps its own, so overlapping writes
//!   reach the OSTs in the order they were made; non-overlapping ones go in
//!   parallel.
//! - **Visibility.** Reads, truncates, flushes (close) and fsyncs of a file
//!   first wait for its writes in flight ([`FileWrites::wait`]).
//! - **Errors.** A write that fails is counted for its file. Every handle
//!   open when it failed reports it: its next write once, and every flush
//!   (close) and fsync from then on, so `close` and `fsync` never report
//!   success for data that did not land. (Sticky, not once: a forked
//!   child's exec closes a copy of the caller's descriptor, and that flush
//!   must not be the one that eats the error.)
//! - **Memory.** At most [`WINDOW`] bytes of a file, and
//!   [`WRITE_BUDGET`](crate::client::WRITE_BUDGET) bytes of all the
//!   client's files, are in flight; a writer beyond that waits.
//!
//! One [`FileWrites`] per file with open handles on this client, shared
//! by its handles.

use loom_proto::Errno;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use tokio::sync::Notify;

/// Bytes of one file in flight at most.
pub const WINDOW: u64 = 32 << 20;

/// The writes in flight of one file on this client.
#[derive(Debug, Default)]
pub struct FileWrites {
    state: Mutex<State>,
    changed: Notify,
    /// Changes to the file's bytes through this client (writes,
    /// truncates, allocations) begun so far: what was read ahead before
    /// the last one is stale. Counted on every write, so not under the
    /// lock.
    changes: AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    /// Ranges [start, end) in flight, with their ids.
    inflight: Vec<(u64, u64, u64)>,
    bytes: u64,
    next_id: u64,
    /// Writes that failed, and the error of the last one.
    failures: u64,
    last_error: Option<Errno>,
}

/// A write admitted in flight; [`FileWrites::finish`] it when done.
#[derive(Debug)]
pub struct Ticket {
    id: u64,
    len: u64,
}

fn overlaps(a: (u64, u64), b: (u64, u64)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

impl FileWrites {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Failures so far, and the last one's error: a handle remembers the
    /// count when it opens and reports what came after.
    pub fn failures(&self) -> (u64, Option<Errno>) {
        let s = self.lock();
        (s.failures, s.last_error)
    }

    /// A change to the file's bytes begins through this client.
    pub fn note_change(&self) {
        self.changes.fetch_add(1, Ordering::AcqRel);
    }

    /// Changes begun so far (see [`FileWrites::note_change`]).
    pub fn changes(&self) -> u64 {
        self.changes.load(Ordering::Acquire)
    }

    /// Wait until a write of [start, end) may go: nothing overlapping in
    /// flight and room in the window (a write larger than the window goes
    /// alone).
    pub async fn admit(&self, start: u64, end: u64) -> Ticket {
        let len = end - start;
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            // Register before looking, so a finish in between is not missed.
            notified.as_mut().enable();
            {
                let mut s = self.lock();
                let blocked = s
                    .inflight
                    .iter()
                    .any(|r| overlaps((r.0, r.1), (start, end)))
                    || (s.bytes > 0 && s.bytes + len > WINDOW);
                if !blocked {
                    let id = s.next_id;
                    s.next_id += 1;
                    s.inflight.push((start, end, id));
                    s.bytes += len;
                    return Ticket { id, len };
                }
            }
            notified.await;
        }
    }

    /// A write admitted with `t` is done, with `result`.
    pub fn finish(&self, t: Ticket, result: Result<(), Errno>) {
        {
            let mut s = self.lock();
            s.inflight.retain(|r| r.2 != t.id);
            s.bytes -= t.len;
            if let Err(e) = result {
                s.failures += 1;
                s.last_error = Some(e);
            }
        }
        self.changed.notify_waiters();
    }

    /// Wait until nothing is in flight.
    pub async fn wait(&self) {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.lock().inflight.is_empty() {
                return;
            }
            notified.await;
        }
    }

    /// The writes admitted so far, as a bound for [`FileWrites::wait_before`].
    pub fn admitted(&self) -> u64 {
        self.lock().next_id
    }

    /// Wait until every write admitted before `bound` (from
    /// [`FileWrites::admitted`]) is done; later ones may go on. A size
    /// report waits this way, so a writer that never pauses cannot hold
    /// it back for ever.
    pub async fn wait_before(&self, bound: u64) {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if !self.lock().inflight.iter().any(|r| r.2 < bound) {
                return;
            }
            notified.await;
        }
    }

    /// Whether writes are in flight (for tests and statistics).
    pub fn busy(&self) -> bool {
        !self.lock().inflight.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test]
    async fn overlapping_writes_wait_and_disjoint_ones_do_not() {
        let w = Arc::new(FileWrites::default());
        let a = w.admit(0, 100).await;
        let b = w.admit(100, 200).await;
        let w2 = w.clone();
        let c = tokio::spawn(async move { w2.admit(50, 150).await });
        tokio::task::yield_now().await;
        assert!(!c.is_finished(), "an overlapping write must wait");
        w.finish(a, Ok(()));
        tokio::task::yield_now().await;
        assert!(!c.is_finished(), "still overlaps b");
        w.finish(b, Ok(()));
        let c = c.await.expect("join");
        w.finish(c, Ok(()));
        w.wait().await;
        assert!(!w.busy());
        assert_eq!(w.failures(), (0, None));
    }

    #[tokio::test]
    async fn failures_are_counted_with_the_last_error() {
        let w = FileWrites::default();
        let a = w.admit(0, 10).await;
        w.finish(a, Err(Errno::EIO));
        let b = w.admit(0, 10).await;
        w.finish(b, Err(Errno::ENOSPC));
        let c = w.admit(0, 10).await;
        w.finish(c, Ok(()));
        assert_eq!(w.failures(), (2, Some(Errno::ENOSPC)));
    }

    #[tokio::test]
    async fn the_window_bounds_bytes_in_flight() {
        let w = Arc::new(FileWrites::default());
        let a = w.admit(0, WINDOW).await;
        let w2 = w.clone();
        let b = tokio::spawn(async move { w2.admit(WINDOW, WINDOW + 1).await });
        tokio::task::yield_now().await;
        assert!(!b.is_finished(), "the window is full");
        w.finish(a, Ok(()));
        let b = b.await.expect("join");
        w.finish(b, Ok(()));
    }
}
