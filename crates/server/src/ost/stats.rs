//! Per-operation counters of an OST, read by the metrics exporter.

use loom_proto::msg::Request;
use std::sync::atomic::{AtomicU64, Ordering};

/// The operations an OST counts; `Other` is everything it refuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Op {
    Ping,
    Write,
    Read,
    Truncate,
    Punch,
    Allocate,
    Sync,
    Precreate,
    Destroy,
    GetSize,
    StatFs,
    Other,
}

impl Op {
    const ALL: [Op; 12] = [
        Op::Ping,
        Op::Write,
        Op::Read,
        Op::Truncate,
        Op::Punch,
        Op::Allocate,
        Op::Sync,
        Op::Precreate,
        Op::Destroy,
        Op::GetSize,
        Op::StatFs,
        Op::Other,
    ];

    pub(super) fn of(req: &Request) -> Op {
        match req {
            Request::Ping => Op::Ping,
            Request::ObjWrite { .. } => Op::Write,
            Request::ObjRead { .. } => Op::Read,
            Request::ObjTruncate { .. } => Op::Truncate,
            Request::ObjPunch { .. } => Op::Punch,
            Request::ObjAllocate { .. } => Op::Allocate,
            Request::ObjSync { .. } => Op::Sync,
            Request::Precreate { .. } => Op::Precreate,
            Request::Destroy { .. } => Op::Destroy,
            Request::ObjGetSize { .. } => Op::GetSize,
            Request::StatFs => Op::StatFs,
            _ => Op::Other,
        }
    }

    /// Names match `Request::name` so metrics line up across services.
    fn name(self) -> &'static str {
        match self {
            Op::Ping => "ping",
            Op::Write => "obj_write",
            Op::Read => "obj_read",
            Op::Truncate => "obj_truncate",
            Op::Punch => "obj_punch",
            Op::Allocate => "obj_allocate",
            Op::Sync => "obj_sync",
            Op::Precreate => "precreate",
            Op::Destroy => "destroy",
            Op::GetSize => "obj_getsize",
            Op::StatFs => "statfs",
            Op::Other => "unsupported",
        }
    }
}

#[derive(Debug, Default)]
struct Counter {
    count: AtomicU64,
    bytes: AtomicU64,
    errors: AtomicU64,
}

/// Counters for every [`Op`], lock-free.
#[derive(Debug, Default)]
pub(super) struct OpStats {
    counters: [Counter; Op::ALL.len()],
}

impl OpStats {
    /// Count one `op`; its bytes count only if it succeeded.
    pub(super) fn record(&self, op: Op, bytes: u64, ok: bool) {
        let c = &self.counters[op as usize];
        c.count.fetch_add(1, Ordering::Relaxed);
        if ok {
            c.bytes.fetch_add(bytes, Ordering::Relaxed);
        } else {
            c.errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(super) fn snapshot(&self) -> Vec<(String, u64)> {
        let mut out = Vec::with_capacity(Op::ALL.len() * 3);
        for op in Op::ALL {
            let c = &self.counters[op as usize];
            let name = op.name();
            out.push((format!("{name}.count"), c.count.load(Ordering::Relaxed)));
            out.push((format!("{name}.bytes"), c.bytes.load(Ordering::Relaxed)));
            out.push((format!("{name}.errors"), c.errors.load(Ordering::Relaxed)));
        }
        out
    }
}
