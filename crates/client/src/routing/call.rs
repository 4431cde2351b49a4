//! One call: its sequence number, its target's address, the following of
//! moved inodes, and what its answer teaches the cache and the replay log.
//!
//! Deadlines: a call waits for its reply until the client's `call_timeout`,
//! then fails with EIO. It is sent again only on a new connection after its
//! connection died (the MDTs' reply caches recognise such a resend by the
//! request's client id and sequence number). When a target's server cannot
//! be reached for [`RETRY_SLICE`], the configuration is fetched again and
//! the call goes on, to the new address if the target moved.

use super::Router;
use crate::fresh::Validity;
use bytes::Bytes;
use loom_proto::capa::Capa;
use loom_proto::msg::{
    Batched, Commit, Effect, Envelope, MdtRequest, Reply, ReqCtx, Request, Role, TargetId,
};
use loom_proto::{Errno, WireError};
use loom_rpc::{Replied, RpcClient, RpcError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a server may stay unreachable before the router fetches the
/// configuration again, in case its targets moved.
pub const RETRY_SLICE: Duration = Duration::from_secs(15);
/// As [`RETRY_SLICE`], for a replicated target, whose primary another
/// replica replaces within seconds.
pub const FAILOVER_PROBE: Duration = Duration::from_secs(1);

/// What the client knew when it sent a request: what its answer may be
/// cached under.
struct Sent {
    rpc: Arc<RpcClient>,
    /// Sent to an MDT by a client that takes leases.
    leasing: bool,
    /// `Fresh::recalls` and `Fresh::changes` before it was sent.
    since: u64,
    changes: u64,
}

impl Router {
    /// Send `req` to `target` as `ctx` with `bulk`; the reply and its bulk.
    /// Fails with the server's errno, or EIO once `call_timeout` has passed
    /// without an answer. The call's sequence number is set here.
    pub async fn call(
        &self,
        target: TargetId,
        ctx: ReqCtx,
        req: impl Into<Request>,
        bulk: Bytes,
    ) -> Result<(Reply, Vec<u8>), Errno> {
        self.call_within(target, ctx, req, bulk, self.call_timeout)
            .await
    }

    /// As [`Router::call`], with the capability of the object an OST
    /// request touches.
    pub async fn call_capa(
        &self,
        target: TargetId,
        ctx: ReqCtx,
        req: impl Into<Request>,
        bulk: Bytes,
        capa: Option<Capa>,
    ) -> Result<(Reply, Vec<u8>), Errno> {
        self.call_full(target, ctx, req.into(), bulk, self.call_timeout, capa)
            .await
    }

    /// As [`Router::call`], giving up after `timeout` (for questions such
    /// as statfs that must not wait the full call timeout for one target).
    pub async fn call_within(
        &self,
        target: TargetId,
        ctx: ReqCtx,
        req: impl Into<Request>,
        bulk: Bytes,
        timeout: Duration,
    ) -> Result<(Reply, Vec<u8>), Errno> {
        self.call_full(target, ctx, req.into(), bulk, timeout, None)
            .await
    }

    async fn call_full(
        &self,
        target: TargetId,
        mut ctx: ReqCtx,
        req: Request,
        bulk: Bytes,
        timeout: Duration,
        capa: Option<Capa>,
    ) -> Result<(Reply, Vec<u8>), Errno> {
        let (seq, low) = self.seqs.begin();
        ctx.seq = seq.1;
        ctx.acked_below = low;
        let snapshot = match target.role {
            Role::Mgs => None,
            _ => self.snapshot,
        };
        let mut env = Envelope {
            target,
            ctx,
            req,
            capa,
            snapshot,
        };
        self.counters.sent(target.role, env.req.opcode());
        // A change of names or inodes on its way (until its answer is noted
        // in `fresh`): see [`Router::changes_in_flight`].
        let _changing = matches!(&env.req, Request::Mdt(r) if r.op().effect != Effect::Reads)
            .then(|| self.counters.changing());
        // Every request the mount makes, for counting them per operation
        // (LOOM_LOG=loom_client::routing=trace).
        tracing::trace!(%target, op = %env.req.name(), "call");
        let deadline = Instant::now() + timeout;
        let once = env.req.op().effect == Effect::Once;
        let mut moves = 0;
        loop {
            let (r, sent) = self.exchange(&env, &bulk, deadline, once).await?;
            if env.target.role == Role::Mdt {
                match self.redirect(&mut env, &r.result, &mut moves).await {
                    Some(Ok(_)) => continue,
                    Some(Err(e)) => return Err(e),
                    None => {}
                }
            }
            return match self.answered(&env, r.result, r.commit, &sent) {
                Ok(reply) => Ok((reply, r.bulk)),
                Err(e) => {
                    tracing::debug!(target = %env.target, op = env.req.name(), "{e}");
                    Err(e.errno)
                }
            };
        }
    }

    /// Send the changes `reqs` to MDT `target` as `ctx`, in one request
    /// (`MdtRequest::Batch`): each with its own sequence number, answered,
    /// learned and kept for replay as if sent alone. The answers, in
    /// order, up to the first that failed (the changes after it were not
    /// made). A change answered where its inode went is sent again alone,
    /// with those after it. Fails as a whole only when the batch got no
    /// answer.
    pub async fn call_batch(
        &self,
        target: TargetId,
        mut ctx: ReqCtx,
        reqs: Vec<MdtRequest>,
    ) -> Result<Vec<Result<Reply, Errno>>, Errno> {
        // The batch's own number first: the mark it carries is at or
        // below every item's.
        let (seq, low) = self.seqs.begin();
        let seqs: Vec<_> = reqs.iter().map(|_| self.seqs.begin().0).collect();
        ctx.seq = seq.1;
        ctx.acked_below = low;
        let items: Vec<Batched> = reqs
            .into_iter()
            .zip(&seqs)
            .map(|(req, s)| Batched { seq: s.1, req })
            .collect();
        let env = Envelope {
            target,
            ctx: ctx.clone(),
            req: MdtRequest::Batch {
                items: items.clone(),
            }
            .into(),
            capa: None,
            snapshot: self.snapshot,
        };
        self.counters.sent(target.role, env.req.opcode());
        for item in &items {
            self.counters.batched(item.req.op().opcode);
        }
        let _changing = self.counters.changing();
        let deadline = Instant::now() + self.call_timeout;
        let (r, sent) = self.exchange(&env, &Bytes::new(), deadline, true).await?;
        let results = match r.result {
            Ok(Reply::Batch { results }) if results.len() <= items.len() => results,
            Ok(other) => {
                tracing::warn!(%target, "a batch answered with {other:?}");
                return Err(Errno::EPROTO);
            }
            Err(e) => {
                tracing::debug!(%target, "batch: {e}");
                return Err(e.errno);
            }
        };
        let mut out = Vec::with_capacity(results.len());
        for (i, (item, done)) in items.iter().zip(results).enumerate() {
            if matches!(
                done.result,
                Ok(Reply::Moved { .. } | Reply::Restriped { .. })
            ) {
                // Not done there: this and the rest go alone, each to
                // where its inode went.
                for rest in &items[i..] {
                    let r = self
                        .call(target, ctx.clone(), rest.req.clone(), Bytes::new())
                        .await
                        .map(|(reply, _)| reply);
                    let failed = r.is_err();
                    out.push(r);
                    if failed {
                        break;
                    }
                }
                return Ok(out);
            }
            let one = Envelope {
                target,
                ctx: ReqCtx {
                    seq: item.seq,
                    ..ctx.clone()
                },
                req: item.req.clone().into(),
                capa: None,
                snapshot: self.snapshot,
            };
            let r = self.answered(&one, done.result, done.commit, &sent);
            out.push(r.map_err(|e| {
                tracing::debug!(%target, op = item.req.op().name, "in a batch: {e}");
                e.errno
            }));
        }
        Ok(out)
    }

    /// Send `env` until it is answered, its deadline passes or its
    /// connection fails with the request perhaps applied (`once`: a change
    /// that may then have been made unseen, so what is known is dropped).
    async fn exchange(
        &self,
        env: &Envelope,
        bulk: &Bytes,
        deadline: Instant,
        once: bool,
    ) -> Result<(Replied, Sent), Errno> {
        let target = env.target;
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            let Some((addr, replicated)) = self.addrs.addr_of(target) else {
                // Not registered (yet): its server may still be starting.
                if remaining.is_zero() {
                    tracing::warn!(%target, "target is not in the cluster configuration");
                    return Err(Errno::EIO);
                }
                self.addrs.refresh().await;
                if self.addrs.addr_of(target).is_none() {
                    tokio::time::sleep(Duration::from_secs(1).min(remaining)).await;
                }
                continue;
            };
            let rpc = self.addrs.connection(&addr);
            let leasing = target.role == Role::Mdt && self.caching.lease_time.is_some();
            if leasing {
                self.subscribe(target.index, &rpc).await;
                // Subscriptions queue one behind the other: a replicated
                // MDT's primary may have moved meanwhile.
                if replicated && self.addrs.addr_of(target).is_some_and(|(a, _)| a != addr) {
                    continue;
                }
            }
            let since = self.fresh.recalls();
            let changes = self.fresh.changes();
            // A replicated target's primary may have moved: the MGS is
            // asked soon (see `loom_proto::replica`).
            let slice = if replicated {
                FAILOVER_PROBE
            } else {
                RETRY_SLICE
            };
            let call = rpc.call_replied(env, bulk.clone(), deadline, slice);
            let answer = if replicated {
                // A primary that stopped without closing its connections
                // (SIGSTOP, a cut link) answers nothing until its probe
                // times out: the call goes to the replica that took over
                // as soon as the MGS names it. The old one, fenced by
                // then, does nothing of it (see `loom_proto::replica`).
                tokio::select! {
                    r = call => r,
                    () = self.moved_from(target, &addr) => {
                        tracing::info!(%target, op = env.req.name(), from = %addr, "its primary changed while the call waited; sending it to the new one");
                        continue;
                    }
                }
            } else {
                call.await
            };
            match answer {
                Ok(r)
                    if matches!(&r.result, Err(w) if w.errno == Errno::EREMCHG)
                        && Instant::now() < deadline =>
                {
                    // A replica that does not serve the target now: its
                    // primary is elsewhere, or about to be. Nothing was
                    // done.
                    tracing::debug!(%target, op = env.req.name(), "not served there; checking the configuration");
                    tokio::time::sleep(FAILOVER_PROBE / 10).await;
                    self.addrs.refresh().await;
                }
                Ok(r) => {
                    let sent = Sent {
                        rpc,
                        leasing,
                        since,
                        changes,
                    };
                    return Ok((r, sent));
                }
                Err(RpcError::Remote(e)) => {
                    tracing::debug!(%target, op = env.req.name(), "{e}");
                    return Err(e.errno);
                }
                Err(e @ RpcError::Unreachable { .. }) => {
                    // Not sent: nothing was changed.
                    if Instant::now() >= deadline {
                        tracing::warn!(%target, op = env.req.name(), "giving up: {e}");
                        return Err(Errno::EIO);
                    }
                    // The server may have moved: ask the MGS, then go on.
                    tracing::info!(%target, op = env.req.name(), "{e}; checking the configuration");
                    self.addrs.refresh().await;
                }
                Err(e) => {
                    tracing::warn!(%target, op = env.req.name(), "giving up: {e}");
                    if once {
                        // A change to names or inodes may have been
                        // applied, unseen.
                        self.fresh.clear();
                    }
                    return Err(e.errno());
                }
            }
        }
    }

    /// Returns once the configuration names another address than `addr`
    /// for `target` (asked of the MGS every other second meanwhile).
    async fn moved_from(&self, target: TargetId, addr: &str) {
        loop {
            tokio::time::sleep(FAILOVER_PROBE * 2).await;
            self.addrs.refresh().await;
            if self.addrs.addr_of(target).is_some_and(|(a, _)| a != addr) {
                return;
            }
        }
    }

    /// `result`, the answer to `env` sent as `sent`, with commit state
    /// `commit`, as the caller sees it: a created or opened file's
    /// capability kept for its I/O, and an MDT's answer learned (under the
    /// leases it grants) and kept for replay until committed.
    fn answered(
        &self,
        env: &Envelope,
        result: Result<Reply, WireError>,
        commit: Option<Commit>,
        sent: &Sent,
    ) -> Result<Reply, WireError> {
        let result = match result {
            Ok(Reply::WithCapa { reply, capa }) => {
                self.capas.remember(capa);
                Ok(*reply)
            }
            other => other,
        };
        let target = env.target;
        if target.role != Role::Mdt {
            return result;
        }
        let now = Instant::now();
        let leased = sent.leasing
            && commit.is_some_and(|c| c.leased)
            && self.leases.subscribed(target.index, &sent.rpc);
        let v = Validity {
            leased: self.caching.lease_time.filter(|_| leased).map(|t| now + t),
            short: now + self.caching.attr_timeout,
            since: sent.since,
            changes: sent.changes,
            stamp: commit.map_or(0, |c| c.transno),
        };
        // Only the answer itself is kept for replay.
        let result = self.learn(target.index, env, result, leased, v);
        if let Some(c) = commit {
            self.replay.note(target.index, c, env, result.as_ref().ok());
        }
        result
    }
}
