//! Keeping this client's uncommitted changes safe: a task that notices an
//! MDT's restart (a lost connection, or a change left uncommitted too
//! long) and replays what the restarted MDT acknowledged and did not
//! commit; fsync's wait for commits; leaving the MDTs at the end. The log
//! itself is `crate::replay`.

use super::Router;
use crate::replay::{ASK_AFTER, REPLAY_BATCH};
use bytes::Bytes;
use loom_proto::msg::{Commit, Envelope, MdtRequest, Reply, ReqCtx, TargetId};
use loom_proto::Errno;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// How often the recovery task looks for lost connections and old
/// uncommitted changes.
const RECOVERY_TICK: Duration = Duration::from_millis(50);
/// How often, while the cluster has a replicated MDT, the recovery task
/// asks the MGS where its primary is: a new primary waits for every
/// client it knew to say what it has to replay and to hold its open files
/// again, idle ones too, and what a client keeps under the old primary's
/// leases goes when it learns of the move.
const PRIMARY_CHECK: Duration = Duration::from_secs(2);
/// How long a leaving client tries to tell an MDT.
const DISCONNECT_TIMEOUT: Duration = Duration::from_secs(2);

impl Router {
    /// Start the task that keeps this client's uncommitted changes safe:
    /// when a connection to an MDT it changed something on is lost, or a
    /// change stays uncommitted for [`ASK_AFTER`], it asks the MDT
    /// (`CommitState`) and replays to it if it restarted. Ends with the router.
    pub fn spawn_recovery(self: &Arc<Router>, client_id: u64) {
        self.client_id
            .store(client_id, std::sync::atomic::Ordering::Relaxed);
        let weak: Weak<Router> = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut asked = Instant::now();
            loop {
                tokio::time::sleep(RECOVERY_TICK).await;
                let Some(r) = weak.upgrade() else { return };
                if asked.elapsed() >= PRIMARY_CHECK {
                    asked = Instant::now();
                    let replicated =
                        r.addrs.config().targets.iter().any(|t| {
                            t.id.role == loom_proto::msg::Role::Mdt && !t.replicas.is_empty()
                        });
                    if replicated {
                        r.addrs.refresh().await;
                    }
                }
                for mdt in r.replay.mdts() {
                    if r.needs_check(mdt) {
                        let r = r.clone();
                        tokio::spawn(async move { r.check_mdt(mdt).await });
                    }
                }
            }
        });
    }

    /// Whether MDT `mdt` may have restarted or owes us a commit notice.
    fn needs_check(&self, mdt: u32) -> bool {
        let Some((addr, _)) = self.addrs.addr_of(TargetId::mdt(mdt)) else {
            return false;
        };
        let losses = *self.addrs.connection(&addr).losses().borrow();
        self.replay.with(mdt, |l| {
            if l.checking || !l.registered {
                return false;
            }
            let lost = losses != l.losses_seen;
            let old =
                !l.entries.is_empty() && l.last_reply.is_none_or(|t| t.elapsed() >= ASK_AFTER);
            let moved = l.addr_seen.as_ref().is_some_and(|a| *a != addr);
            l.addr_seen = Some(addr.clone());
            if lost || old || moved {
                l.losses_seen = losses;
                l.checking = true;
                true
            } else {
                false
            }
        })
    }

    /// One request to MDT `mdt` on this client's behalf (commit state, a replay,
    /// a sync): its result and commit state, without taking note of them.
    async fn mdt_exchange(
        &self,
        mdt: u32,
        req: MdtRequest,
    ) -> Result<(Result<Reply, loom_proto::WireError>, Option<Commit>), Errno> {
        let target = TargetId::mdt(mdt);
        let (addr, replicated) = self.addrs.addr_of(target).ok_or(Errno::EIO)?;
        // A replicated MDT's primary that does not answer soon may have
        // been replaced: the question is asked again, of the MGS's
        // primary then (see `check_mdt`).
        let timeout = match (&req, replicated) {
            (MdtRequest::CommitState, true) => super::call::FAILOVER_PROBE * 2,
            _ => self.call_timeout,
        };
        let (seq, low) = self.seqs.begin();
        let ctx = ReqCtx {
            client_id: self.client_id.load(std::sync::atomic::Ordering::Relaxed),
            seq: seq.1,
            acked_below: low,
            ..ReqCtx::default()
        };
        let env = Envelope {
            target,
            ctx,
            req: req.into(),
            capa: None,
            snapshot: None,
        };
        let deadline = Instant::now() + timeout;
        match self
            .addrs
            .connection(&addr)
            .call_replied(&env, Bytes::new(), deadline, timeout)
            .await
        {
            Ok(r) => Ok((r.result, r.commit)),
            Err(e) => Err(e.errno()),
        }
    }

    /// Ask MDT `mdt` how far it committed; replay to it if it restarted.
    async fn check_mdt(&self, mdt: u32) {
        let r = self.mdt_exchange(mdt, MdtRequest::CommitState).await;
        let elsewhere =
            matches!(&r, Ok((Err(e), _)) if matches!(e.errno, Errno::EREMCHG | Errno::EAGAIN));
        if r.is_err() || elsewhere {
            // Ask again at the next tick; a replicated MDT's primary may
            // have moved, which the MGS says.
            self.replay.with(mdt, |l| l.losses_seen = u64::MAX);
            if self
                .addrs
                .addr_of(TargetId::mdt(mdt))
                .is_some_and(|(_, replicated)| replicated)
            {
                self.addrs.refresh().await;
            }
        }
        if let Ok((_, Some(c))) = r {
            let known = self.replay.with(mdt, |l| l.boot);
            if c.boot == known {
                let env = Envelope {
                    target: TargetId::mdt(mdt),
                    ctx: ReqCtx::default(),
                    req: MdtRequest::CommitState.into(),
                    capa: None,
                    snapshot: None,
                };
                self.replay
                    .note(mdt, Commit { transno: 0, ..c }, &env, None);
            } else {
                self.replay_to(mdt, c).await;
            }
        }
        self.replay.with(mdt, |l| l.checking = false);
    }

    /// Send MDT `mdt`, restarted as instance `boot`, every change it
    /// acknowledged and did not commit, in transaction order, and end the
    /// replay (also with nothing to send: the MDT waits for every client
    /// it knew). The last request returns when the MDT has applied every
    /// client's replays and committed them.
    async fn replay_to(&self, mdt: u32, now: Commit) {
        let boot = now.boot;
        let (old_boot, entries) = self.replay.with(mdt, |l| {
            l.replaying_to = Some(boot);
            // What the old instance committed survived its end.
            l.entries.retain(|t, _| *t > now.started_at);
            (l.boot, l.entries.values().cloned().collect::<Vec<_>>())
        });
        let total = entries.len();
        tracing::info!("MDT{mdt:04x} restarted: replaying {total} uncommitted changes");
        let mut chunks: Vec<Vec<_>> = entries.chunks(REPLAY_BATCH).map(|c| c.to_vec()).collect();
        if chunks.is_empty() {
            chunks.push(Vec::new());
        }
        let n = chunks.len();
        for (i, chunk) in chunks.into_iter().enumerate() {
            let req = MdtRequest::Replay {
                boot: old_boot,
                entries: chunk,
                last: i + 1 == n,
            };
            match self.mdt_exchange(mdt, req).await {
                Ok((Ok(_), _)) => {}
                Ok((Err(e), c)) if e.errno == Errno::ESTALE => {
                    // Too late: the MDT closed its window without us.
                    let lost = self.replay.with(mdt, |l| {
                        let n = l.entries.len();
                        l.entries.clear();
                        l.replaying_to = None;
                        l.registered = false;
                        l.boot = c.map(|c| c.boot).unwrap_or(boot);
                        l.last_committed = c.map(|c| c.last_committed).unwrap_or(0);
                        n
                    });
                    if lost > 0 {
                        self.replay.evicted(mdt, lost);
                    } else {
                        tracing::info!("MDT{mdt:04x}: {e}");
                    }
                    return;
                }
                other => {
                    let why = match other {
                        Ok((Err(e), _)) => e.to_string(),
                        Err(e) => e.to_string(),
                        Ok((Ok(_), _)) => String::new(),
                    };
                    tracing::warn!("replay to MDT{mdt:04x}: {why}; trying again");
                    // Ask again at the next tick.
                    self.replay.with(mdt, |l| {
                        l.replaying_to = None;
                        l.losses_seen = u64::MAX;
                    });
                    return;
                }
            }
        }
        // Applied and committed by the MDT before it answered the last.
        self.replay.with(mdt, |l| {
            l.entries.clear();
            l.boot = boot;
            l.replaying_to = None;
        });
        tracing::info!("MDT{mdt:04x}: replayed {total} changes");
    }

    /// Wait until every change this client made is committed on every MDT
    /// (fsync, syncfs): one `Sync` to each MDT that holds some.
    pub async fn commit_all(&self) -> Result<(), Errno> {
        let waiting: Vec<u32> = self
            .replay
            .mdts()
            .into_iter()
            .filter(|m| self.replay.kept(*m) > 0)
            .collect();
        for mdt in waiting {
            self.call(
                TargetId::mdt(mdt),
                self.own_ctx(),
                MdtRequest::Sync,
                Bytes::new(),
            )
            .await?;
        }
        Ok(())
    }

    /// Leave every MDT this client changed something on: each commits and
    /// stops counting on this client in its recovery (unmount, the end of
    /// a tool).
    pub async fn disconnect_all(&self) {
        let mdts: Vec<u32> = self
            .replay
            .mdts()
            .into_iter()
            .filter(|m| self.replay.with(*m, |l| l.registered))
            .collect();
        for mdt in mdts {
            // Best effort, briefly: an MDT that is down when the client
            // leaves waits for it only until its recovery window ends.
            let r = self
                .call_within(
                    TargetId::mdt(mdt),
                    self.own_ctx(),
                    MdtRequest::Disconnect,
                    Bytes::new(),
                    DISCONNECT_TIMEOUT,
                )
                .await;
            match r {
                Ok(_) => self.replay.with(mdt, |l| {
                    l.registered = false;
                    l.entries.clear();
                }),
                Err(e) => tracing::warn!("disconnecting from MDT{mdt:04x}: {e}"),
            }
        }
    }
}
