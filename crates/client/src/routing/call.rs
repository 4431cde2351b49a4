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
use loom_proto::msg::{Effect, Envelope, Reply, ReqCtx, Request, Role, TargetId};
use loom_proto::Errno;
use loom_rpc::RpcError;
use std::time::{Duration, Instant};

/// How long a server may stay unreachable before the router fetches the
/// configuration again, in case its targets moved.
pub const RETRY_SLICE: Duration = Duration::from_secs(15);

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
        mut target: TargetId,
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
        let mut moves = 0;
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            let Some(addr) = self.addrs.addr_of(target) else {
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
            }
            let since = self.fresh.recalls();
            let changes = self.fresh.changes();
            match rpc
                .call_replied(&env, bulk.clone(), deadline, RETRY_SLICE)
                .await
            {
                Ok(mut r) => {
                    if target.role == Role::Mdt {
                        match self.redirect(&mut env, &r.result, &mut moves).await {
                            Some(Ok(to)) => {
                                target = to;
                                continue;
                            }
                            Some(Err(e)) => return Err(e),
                            None => {}
                        }
                    }
                    // A created or opened file's capability: kept for its
                    // I/O; the caller sees the answer alone.
                    r.result = match r.result {
                        Ok(Reply::WithCapa { reply, capa }) => {
                            self.capas.remember(capa);
                            Ok(*reply)
                        }
                        other => other,
                    };
                    if target.role == Role::Mdt {
                        let now = Instant::now();
                        let leased = leasing
                            && r.commit.is_some_and(|c| c.leased)
                            && self.leases.subscribed(target.index, &rpc);
                        let v = Validity {
                            leased: self.caching.lease_time.filter(|_| leased).map(|t| now + t),
                            short: now + self.caching.attr_timeout,
                            since,
                            changes,
                            stamp: r.commit.map_or(0, |c| c.transno),
                        };
                        // Only the answer itself is kept for replay.
                        r.result = self.learn(target.index, &env, r.result, leased, v);
                        if let Some(c) = r.commit {
                            self.replay
                                .note(target.index, c, &env, r.result.as_ref().ok());
                        }
                    }
                    return match r.result {
                        Ok(reply) => Ok((reply, r.bulk)),
                        Err(e) => {
                            tracing::debug!(%target, op = env.req.name(), "{e}");
                            Err(e.errno)
                        }
                    };
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
                    if env.req.op().effect == Effect::Once {
                        // A change to names or inodes may have been
                        // applied, unseen.
                        self.fresh.clear();
                    }
                    return Err(e.errno());
                }
            }
        }
    }
}
