//! The order a primary does its changes in, kept on its replicas.
//!
//! A change holds the byte ranges of the objects it touches from before
//! the primary does it until every replica has: two changes whose ranges
//! meet are done one after the other, here and on each replica, so every
//! copy ends the same. Changes that do not meet commute, and go on side by
//! side (a file's stripes written in parallel by one client, IOR's
//! processes writing their own records of one shared file).

use std::collections::HashMap;
use std::sync::Mutex;
use tokio::sync::Notify;

/// Bytes `[start, end)` of object `oid`, widened to whole blocks (a
/// block's checksum covers it all, so writes to one block do not commute).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// The object.
    pub oid: u64,
    /// First byte.
    pub start: u64,
    /// One past the last.
    pub end: u64,
}

/// Bytes one checksum covers; a compressed object's chunks are larger.
const BLOCK: u64 = 4096;
const PACKED_CHUNK: u64 = 64 * 1024;

impl Span {
    /// Bytes `[offset, offset + len)` of `oid`, in a compressed object or
    /// not.
    pub fn range(oid: u64, offset: u64, len: u64, packed: bool) -> Span {
        let unit = if packed { PACKED_CHUNK } else { BLOCK };
        Span {
            oid,
            start: offset / unit * unit,
            end: offset
                .saturating_add(len)
                .div_ceil(unit)
                .saturating_mul(unit)
                .max(offset + 1),
        }
    }

    /// All of `oid`.
    pub fn whole(oid: u64) -> Span {
        Span {
            oid,
            start: 0,
            end: u64::MAX,
        }
    }

    fn meets(&self, o: &Span) -> bool {
        self.oid == o.oid && self.start < o.end && o.start < self.end
    }
}

/// The spans held now.
#[derive(Debug, Default)]
pub struct Order {
    held: Mutex<HashMap<u64, Vec<(Span, u64)>>>,
    next: Mutex<u64>,
    freed: Notify,
}

/// Spans held until dropped.
pub struct Entered<'a> {
    order: &'a Order,
    ticket: u64,
    spans: Vec<Span>,
}

impl Order {
    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Vec<(Span, u64)>>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hold `spans`, once no change holding one they meet is left.
    pub async fn enter(&self, spans: Vec<Span>) -> Entered<'_> {
        let ticket = {
            let mut n = self.next.lock().unwrap_or_else(|p| p.into_inner());
            *n += 1;
            *n
        };
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            {
                let mut held = self.held();
                let clear = spans.iter().all(|s| {
                    held.get(&s.oid)
                        .is_none_or(|v| v.iter().all(|(h, _)| !h.meets(s)))
                });
                if clear {
                    for s in &spans {
                        held.entry(s.oid).or_default().push((*s, ticket));
                    }
                    return Entered {
                        order: self,
                        ticket,
                        spans,
                    };
                }
            }
            freed.await;
        }
    }
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        {
            let mut held = self.order.held();
            for s in &self.spans {
                if let Some(v) = held.get_mut(&s.oid) {
                    v.retain(|(_, t)| *t != self.ticket);
                    if v.is_empty() {
                        held.remove(&s.oid);
                    }
                }
            }
        }
        self.order.freed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn spans_widen_to_blocks_and_meet_only_on_one_object() {
        let a = Span::range(1, 4000, 200, false);
        assert_eq!((a.start, a.end), (0, 8192));
        let b = Span::range(1, 8192, 10, false);
        assert!(!a.meets(&b));
        assert!(a.meets(&Span::range(1, 8191, 1, false)));
        assert!(!a.meets(&Span::range(2, 0, 10, false)));
        assert!(Span::whole(1).meets(&b));
        assert_eq!(Span::range(1, 70_000, 1, true).start, 65_536);
        assert_eq!(Span::range(1, 5, 0, false).end, 4096);
    }

    #[tokio::test]
    async fn a_change_that_meets_a_held_span_waits_for_it_and_others_do_not() {
        let o = Arc::new(Order::default());
        let first = o.enter(vec![Span::range(7, 0, 100, false)]).await;
        // Another object and another block of this one go on.
        drop(o.enter(vec![Span::range(8, 0, 100, false)]).await);
        drop(o.enter(vec![Span::range(7, 4096, 100, false)]).await);
        let (tx, mut rx) = tokio::sync::oneshot::channel();
        let o2 = o.clone();
        let waiter = tokio::spawn(async move {
            let _e = o2.enter(vec![Span::whole(7)]).await;
            let _ = tx.send(());
        });
        tokio::task::yield_now().await;
        assert!(rx.try_recv().is_err(), "entered while the span was held");
        drop(first);
        waiter.await.expect("waiter");
        assert!(rx.try_recv().is_ok());
        assert!(o.held().is_empty());
    }
}
