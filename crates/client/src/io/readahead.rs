//! Reading ahead for a sequential reader of the client library, by stripe.
//!
//! A FUSE mount has the kernel's readahead: its large reads already reach
//! several OSTs at once. A program on the library reads what it asks for,
//! and a reader going through a striped file in small pieces would wait
//! for one OST at a time. So a handle whose reader goes on where it
//! stopped reads a whole *window* at once, one stripe width of the file
//! (stripe size times stripe count, within [`MIN_WINDOW`]..[`MAX_WINDOW`]),
//! which its objects serve in parallel, and fetches the next window in the
//! background while the reader consumes this one. A read elsewhere drops
//! both.
//!
//! What a window holds is what a page cache would: it is used only while
//! nothing could have changed the bytes behind this client's back, and
//! after what this client did itself it is dropped. A window is valid
//! while
//! - no write, truncate or allocation went through this client to the
//!   file since the fetch started (`FileWrites::changes`),
//! - no lease was recalled from this client since (another client's change
//!   to a file whose attributes this client leases recalls them), and
//! - it is younger than the client's attribute timeout (what an answer
//!   without a lease may be trusted for).

use loom_proto::layout::Pattern;
use loom_proto::{Errno, Layout};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// The smallest window worth reading ahead.
pub const MIN_WINDOW: u64 = 256 * 1024;
/// The largest window: memory per reading handle is at most twice this.
pub const MAX_WINDOW: u64 = 16 << 20;

/// When a window's fetch started, as its validity is judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stamp {
    /// This client's changes to the file so far.
    pub changes: u64,
    /// Leases recalled from this client so far.
    pub recalls: u64,
    /// When.
    pub at: Instant,
}

impl Stamp {
    /// Whether bytes fetched at `self` may still be used at `now`, with
    /// `ttl` the client's attribute timeout.
    fn holds(&self, now: &Stamp, ttl: Duration) -> bool {
        self.changes == now.changes
            && self.recalls == now.recalls
            && now.at.saturating_duration_since(self.at) < ttl
    }
}

/// Bytes of the file from `start`, read ahead.
struct Window {
    start: u64,
    data: Vec<u8>,
    stamp: Stamp,
}

impl Window {
    fn end(&self) -> u64 {
        self.start + self.data.len() as u64
    }
}

/// The next window, being fetched.
struct Pending {
    start: u64,
    task: JoinHandle<Result<Vec<u8>, Errno>>,
    stamp: Stamp,
}

/// One handle's readahead state.
pub(crate) struct ReadAhead {
    /// A window's length.
    width: u64,
    /// How long what was read ahead may be trusted without a recall (the
    /// client's attribute timeout).
    ttl: Duration,
    /// Where the reader's next read starts if it goes on sequentially.
    next: u64,
    window: Option<Window>,
    pending: Option<Pending>,
}

/// What [`ReadAhead::serve`] needs to fetch a window: `fetch(start, len)`
/// reads `len` bytes (the caller clamps to the file's size) and may run
/// as a task of its own.
pub(crate) trait Fetch {
    /// A task reading `[start, start + len)`.
    fn spawn(&self, start: u64, len: usize) -> JoinHandle<Result<Vec<u8>, Errno>>;
}

impl ReadAhead {
    /// Windows of `width` bytes, trusted for `ttl` at most.
    pub(crate) fn new(width: u64, ttl: Duration) -> ReadAhead {
        ReadAhead {
            width,
            ttl,
            next: 0,
            window: None,
            pending: None,
        }
    }

    /// Drop what is no longer valid at `now`.
    fn expire(&mut self, now: &Stamp, ttl: Duration) {
        if self
            .window
            .as_ref()
            .is_some_and(|w| !w.stamp.holds(now, ttl))
        {
            self.window = None;
        }
        if self
            .pending
            .as_ref()
            .is_some_and(|p| !p.stamp.holds(now, ttl))
        {
            self.drop_pending();
        }
    }

    fn drop_pending(&mut self) {
        if let Some(p) = self.pending.take() {
            p.task.abort();
        }
    }

    /// Read `[offset, offset + n)` of a file of `size` bytes through the
    /// windows: `Ok(None)` when the reader is not sequential (the caller
    /// reads directly), else the bytes.
    pub(crate) async fn serve(
        &mut self,
        offset: u64,
        n: usize,
        size: u64,
        now: Stamp,
        fetch: &impl Fetch,
    ) -> Result<Option<Vec<u8>>, Errno> {
        let (width, ttl) = (self.width, self.ttl);
        self.expire(&now, ttl);
        let end = offset + n as u64;
        // Only a reader going on exactly where it stopped: a read of
        // anything else (before, after, again) is the servers' to answer,
        // as it is without reading ahead.
        if offset != self.next {
            self.window = None;
            self.drop_pending();
            self.next = end;
            return Ok(None);
        }
        self.next = end;
        let mut out = Vec::with_capacity(n);
        let mut pos = offset;
        while pos < end {
            if let Some(w) = self
                .window
                .as_ref()
                .filter(|w| w.start <= pos && pos < w.end())
            {
                let to = end.min(w.end());
                out.extend_from_slice(&w.data[(pos - w.start) as usize..(to - w.start) as usize]);
                pos = to;
                continue;
            }
            let next = match self.pending.take() {
                // The window being fetched starts here: wait for it.
                Some(p) if p.start == pos => p,
                other => {
                    if let Some(p) = other {
                        p.task.abort();
                    }
                    let len = width.min(size.saturating_sub(pos)) as usize;
                    Pending {
                        start: pos,
                        task: fetch.spawn(pos, len),
                        stamp: now,
                    }
                }
            };
            let data = next
                .task
                .await
                .map_err(|_| Errno::EIO)
                .and_then(|r| r)
                .inspect_err(|_| self.window = None)?;
            if data.is_empty() {
                break;
            }
            self.window = Some(Window {
                start: next.start,
                data,
                stamp: next.stamp,
            });
        }
        // The next window on its way while this one is read.
        if let Some(w) = &self.window {
            let from = w.end();
            if self.pending.is_none() && from < size {
                let len = width.min(size - from) as usize;
                self.pending = Some(Pending {
                    start: from,
                    task: fetch.spawn(from, len),
                    stamp: now,
                });
            }
        }
        Ok(Some(out))
    }
}

impl std::fmt::Debug for ReadAhead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadAhead")
            .field("next", &self.next)
            .field("window", &self.window.as_ref().map(|w| (w.start, w.end())))
            .field("pending", &self.pending.as_ref().map(|p| p.start))
            .finish()
    }
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        self.drop_pending();
    }
}

/// The window for a layout of `stripe_size` bytes over `count` objects:
/// one stripe width, within [`MIN_WINDOW`]..[`MAX_WINDOW`].
pub fn window_for(stripe_size: u64, count: usize) -> u64 {
    stripe_size
        .saturating_mul(count as u64)
        .clamp(MIN_WINDOW, MAX_WINDOW)
}

/// The window of a file with `layout`: its widest striped component's
/// stripe width; `None` when no component is on OSTs (all on the MDT).
pub fn window_of(layout: &Layout) -> Option<u64> {
    layout
        .components
        .iter()
        .filter_map(|c| match &c.pattern {
            Pattern::Raid0 {
                stripe_size,
                objects,
            } => Some(window_for(u64::from(*stripe_size), objects.len())),
            _ => None,
        })
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// A file whose byte `i` is `i % 251`, counting fetches.
    struct Pattern(Arc<AtomicUsize>);

    impl Fetch for Pattern {
        fn spawn(&self, start: u64, len: usize) -> JoinHandle<Result<Vec<u8>, Errno>> {
            self.0.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                Ok((start..start + len as u64)
                    .map(|i| (i % 251) as u8)
                    .collect())
            })
        }
    }

    fn want(offset: u64, n: usize) -> Vec<u8> {
        (offset..offset + n as u64)
            .map(|i| (i % 251) as u8)
            .collect()
    }

    #[tokio::test]
    async fn a_sequential_reader_reads_whole_windows_and_a_jump_reads_directly() {
        let fetches = Arc::new(AtomicUsize::new(0));
        let f = Pattern(fetches.clone());
        let size = 1_000_000u64;
        let mut ra = ReadAhead::new(100_000, Duration::from_secs(60));
        let stamp = Stamp {
            changes: 0,
            recalls: 0,
            at: Instant::now(),
        };
        let mut pos = 0;
        while pos < size {
            let n = 7_000.min((size - pos) as usize);
            let got = ra
                .serve(pos, n, size, stamp, &f)
                .await
                .expect("read")
                .expect("sequential");
            assert_eq!(got, want(pos, n), "at {pos}");
            pos += n as u64;
        }
        // Ten windows, each fetched once (the last prefetch stops at EOF).
        assert_eq!(fetches.load(Ordering::SeqCst), 10);
        // A jump, or reading again what was read, is read directly (not
        // served here); a reader going on from there is served again.
        assert!(ra
            .serve(size - 7_000, 10, size, stamp, &f)
            .await
            .expect("read")
            .is_none());
        assert!(ra
            .serve(5, 10, size, stamp, &f)
            .await
            .expect("read")
            .is_none());
        let got = ra.serve(15, 10, size, stamp, &f).await.expect("read");
        assert_eq!(got, Some(want(15, 10)));
    }

    #[tokio::test]
    async fn a_change_or_a_recall_drops_what_was_read_ahead() {
        let fetches = Arc::new(AtomicUsize::new(0));
        let f = Pattern(fetches.clone());
        let size = 1_000_000u64;
        let mut ra = ReadAhead::new(100_000, Duration::from_secs(60));
        let s0 = Stamp {
            changes: 0,
            recalls: 0,
            at: Instant::now(),
        };
        ra.serve(0, 10, size, s0, &f).await.expect("read");
        assert_eq!(fetches.load(Ordering::SeqCst), 2, "a window and the next");
        ra.serve(10, 10, size, s0, &f).await.expect("read");
        assert_eq!(fetches.load(Ordering::SeqCst), 2, "served from the window");
        let changed = Stamp { changes: 1, ..s0 };
        ra.serve(20, 10, size, changed, &f).await.expect("read");
        assert_eq!(
            fetches.load(Ordering::SeqCst),
            4,
            "fetched again after a change"
        );
        let recalled = Stamp {
            recalls: 1,
            ..changed
        };
        ra.serve(30, 10, size, recalled, &f).await.expect("read");
        assert_eq!(
            fetches.load(Ordering::SeqCst),
            6,
            "fetched again after a recall"
        );
        let later = Stamp {
            at: recalled.at + Duration::from_secs(61),
            ..recalled
        };
        ra.serve(40, 10, size, later, &f).await.expect("read");
        assert_eq!(
            fetches.load(Ordering::SeqCst),
            8,
            "fetched again once too old"
        );
    }

    #[test]
    fn the_window_is_a_stripe_width_within_bounds() {
        assert_eq!(window_for(1 << 20, 4), 4 << 20);
        assert_eq!(window_for(64 << 10, 1), MIN_WINDOW);
        assert_eq!(window_for(4 << 20, 64), MAX_WINDOW);
    }
}
