//! Per-operation counters of an OST, read by the metrics exporter: one set
//! per operation [`OstRequest`] declares, named as declared, so metrics
//! line up across services.

use loom_proto::msg::{Op, OstRequest};
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
struct Counter {
    count: AtomicU64,
    bytes: AtomicU64,
    errors: AtomicU64,
}

/// Counters for every OST operation, lock-free.
#[derive(Debug)]
pub(super) struct OpStats {
    counters: Vec<Counter>,
}

impl Default for OpStats {
    fn default() -> OpStats {
        OpStats {
            counters: OstRequest::OPS.iter().map(|_| Counter::default()).collect(),
        }
    }
}

impl OpStats {
    /// Count one request; its bytes count only if it succeeded.
    pub(super) fn record(&self, op: Op, bytes: u64, ok: bool) {
        let Some(c) = OstRequest::OPS
            .iter()
            .position(|o| o.opcode == op.opcode)
            .and_then(|i| self.counters.get(i))
        else {
            return;
        };
        c.count.fetch_add(1, Ordering::Relaxed);
        if ok {
            c.bytes.fetch_add(bytes, Ordering::Relaxed);
        } else {
            c.errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(super) fn snapshot(&self) -> Vec<(String, u64)> {
        let mut out = Vec::with_capacity(OstRequest::OPS.len() * 3);
        for (op, c) in OstRequest::OPS.iter().zip(&self.counters) {
            let name = op.name;
            out.push((format!("{name}.count"), c.count.load(Ordering::Relaxed)));
            out.push((format!("{name}.bytes"), c.bytes.load(Ordering::Relaxed)));
            out.push((format!("{name}.errors"), c.errors.load(Ordering::Relaxed)));
        }
        out
    }
}
