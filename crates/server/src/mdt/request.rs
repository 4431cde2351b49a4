//! The request a handler serves, passed explicitly to every operation
//! (no task-local state): the caller's context and, for a client's change,
//! the slot of its reply.
//!
//! [`Current`] is what the commit step needs of a client's change: where
//! its reply is recorded, the transaction number it was given, whether the
//! reply must wait for the commit, and for a replayed change the reply it
//! first got. Changelog records, quota deltas and per-job counters will be
//! gathered here too, for the same batch.

use super::changelog::Planned;
use super::leases::ReadToken;
use super::replies::ReplyKey;
use loom_proto::layout::Layout;
use loom_proto::msg::{Attr, Effects, Lease, Reply, ReqCtx};
use loom_proto::requests::Op;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// A client's change being handled.
#[derive(Debug)]
pub struct Current {
    /// Where its reply is recorded.
    pub key: ReplyKey,
    /// Set when replaying: the transaction number and the reply the change
    /// got when it was first done (its new FID, layout and times are kept).
    pub replay: Option<(u64, Reply)>,
    /// The transaction number of the change that recorded the reply.
    transno: AtomicU64,
    /// The reply must wait for the commit: the client's first change on
    /// this MDT registers it, and that must be durable before the client
    /// can hold changes that only a replay would bring back.
    must_commit: AtomicBool,
    /// What the change did, for its reply.
    effects: Mutex<Option<Effects>>,
    /// Apply even where others hold leases, and recall them after (a
    /// change that recalled several times already, or the last step of a
    /// cross-MDT operation, which cannot be run again).
    pub recall_after: bool,
    /// Leases to recall before the reply leaves (see `recall_after`).
    late: Mutex<Vec<Lease>>,
    /// The maker was granted the leases its answer implies.
    leased: AtomicBool,
}

impl Current {
    /// A request being handled for the first time.
    pub fn new(key: ReplyKey) -> Current {
        Current {
            key,
            replay: None,
            transno: AtomicU64::new(0),
            must_commit: AtomicBool::new(false),
            effects: Mutex::new(None),
            recall_after: false,
            late: Mutex::new(Vec::new()),
            leased: AtomicBool::new(false),
        }
    }

    /// A change replayed after a restart: it keeps `transno` and the
    /// results of `reply`, its first execution's answer.
    pub fn replayed(key: ReplyKey, transno: u64, reply: Reply) -> Current {
        Current {
            replay: Some((transno, reply)),
            ..Current::new(key)
        }
    }

    /// The change was applied as `transno`; `must_commit` if its reply
    /// must wait for the commit.
    pub fn applied(&self, transno: u64, must_commit: bool) {
        self.transno.store(transno, Ordering::Release);
        if must_commit {
            self.must_commit.store(true, Ordering::Release);
        }
    }

    /// The transaction number of the change that recorded the reply (0:
    /// none).
    pub fn transno(&self) -> u64 {
        self.transno.load(Ordering::Acquire)
    }

    /// Note what the change's last transaction did.
    pub fn set_effects(&self, e: Effects) {
        *self.effects.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
    }

    /// `reply` with what the change did, for the client.
    pub fn with_effects(&self, reply: Reply) -> Reply {
        match self
            .effects
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            Some(effects) => Reply::Changed {
                reply: Box::new(reply),
                effects,
            },
            None => reply,
        }
    }

    /// Whether the reply must wait for the commit.
    pub fn must_commit(&self) -> bool {
        self.must_commit.load(Ordering::Acquire)
    }

    /// The maker was (or was not) granted its leases.
    pub fn set_leased(&self, v: bool) {
        self.leased.store(v, Ordering::Release);
    }

    /// Whether the maker was granted the leases its answer implies.
    pub fn leased(&self) -> bool {
        self.leased.load(Ordering::Acquire)
    }

    /// Leases to recall after the change was applied.
    pub fn recall_late(&self, l: Vec<Lease>) {
        self.late
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(l);
    }

    /// What [`Current::recall_late`] gathered.
    pub fn take_late(&self) -> Vec<Lease> {
        std::mem::take(&mut *self.late.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// The request a handler serves.
#[derive(Clone, Copy, Debug)]
pub struct Rq<'a> {
    /// Who asks (credentials, client, sequence, job id).
    pub ctx: &'a ReqCtx,
    /// Set for a client's change: its reply is recorded with it.
    pub cur: Option<&'a Current>,
    /// Set when the caller subscribed to leases on this connection.
    pub tok: Option<ReadToken>,
    /// What the change records in the changelog (see `changelog`).
    pub log: Option<&'a Planned>,
    /// The operation, for the commit step (a client's request).
    pub op: Option<Op>,
}

impl<'a> Rq<'a> {
    /// A request whose reply is not recorded (a read, a peer's step).
    pub fn plain(ctx: &'a ReqCtx) -> Rq<'a> {
        Rq {
            ctx,
            cur: None,
            tok: None,
            log: None,
            op: None,
        }
    }

    /// A client's change, recorded under `cur`.
    pub fn change(ctx: &'a ReqCtx, cur: &'a Current) -> Rq<'a> {
        Rq {
            ctx,
            cur: Some(cur),
            tok: None,
            log: None,
            op: None,
        }
    }

    /// The same request, from a client subscribed to leases.
    pub fn with_token(self, tok: Option<ReadToken>) -> Rq<'a> {
        Rq { tok, ..self }
    }

    /// The same request, known to be operation `op`.
    pub fn operation(self, op: Op) -> Rq<'a> {
        Rq {
            op: Some(op),
            ..self
        }
    }

    /// The same request, recording `log` in the changelog.
    pub fn logging(self, log: Option<&'a Planned>) -> Rq<'a> {
        Rq { log, ..self }
    }

    /// The attributes and layout a replayed create's first execution
    /// returned.
    pub fn replayed_entry(&self) -> Option<(Attr, Option<Layout>)> {
        match self.cur.and_then(|c| c.replay.as_ref()) {
            Some((_, Reply::Entry { attr, layout })) => Some((attr.clone(), layout.clone())),
            _ => None,
        }
    }
}

impl std::ops::Deref for Rq<'_> {
    type Target = ReqCtx;
    fn deref(&self) -> &ReqCtx {
        self.ctx
    }
}
