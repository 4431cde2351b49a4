//! Replicated targets: a target kept on several servers, one of which
//! (the primary) serves it while the others hold every change it
//! acknowledged.
//!
//! The MGS is the one authority on who holds what ([`crate::msg::TargetInfo`]'s
//! `term`, `primary` and `replicas`):
//! - A server renews its hold on its replicas' roles every
//!   [`HEARTBEAT_MS`] (`MgsRequest::Heartbeat`). One that has not been
//!   answered for [`LEASE_MS`] stops serving them (it fences itself).
//! - The MGS hands the primary's role to an in-sync replica only after it
//!   has not heard from the primary for [`FAILOVER_MS`], longer than the
//!   lease: by then the old primary has stopped, so two primaries never
//!   accept writes for one target. The new one serves under a new `term`,
//!   and replicas refuse copies sent under any other term.
//! - A primary acknowledges a change once every replica in sync holds it,
//!   or the MGS has agreed that one that failed to is no longer in sync
//!   (`MgsRequest::SetReplica`). So any replica in sync holds every
//!   acknowledged change, and may take over.
//! - A replica that comes back is brought up to date by its primary while
//!   changes go on, then counted in sync again.

use crate::msg::TargetId;
use serde::{Deserialize, Serialize};

/// How often a server renews its replicas' roles with the MGS.
pub const HEARTBEAT_MS: u64 = 500;
/// How long a server keeps serving its replicas after the MGS last
/// answered a renewal it sent.
pub const LEASE_MS: u64 = 3_000;
/// How long the MGS waits without a renewal from a primary before another
/// replica takes its role: longer than [`LEASE_MS`], so that the old
/// primary has fenced itself first.
pub const FAILOVER_MS: u64 = 4_500;

/// Where a replica stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReplicaState {
    /// Holds every change its primary acknowledged; may take over.
    InSync,
    /// Being brought up to date by its primary; gets new changes too.
    Syncing,
    /// Missed changes; brought up to date once its server is back.
    Stale,
}

impl ReplicaState {
    /// For tables.
    pub fn name(self) -> &'static str {
        match self {
            ReplicaState::InSync => "in-sync",
            ReplicaState::Syncing => "syncing",
            ReplicaState::Stale => "stale",
        }
    }
}

/// One copy of a replicated target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replica {
    /// Its number, 0..N, given by `loom format --replica`.
    pub replica: u32,
    /// Made by `loom format`; another uuid for the same replica is refused.
    pub uuid: String,
    /// Address of the server that hosts it.
    pub addr: String,
    /// Where it stands.
    pub state: ReplicaState,
    /// While syncing: the bytes its primary has still to compare.
    #[serde(default)]
    pub lag: u64,
    /// Milliseconds since the MGS last heard from its server (filled in
    /// the MGS's answers; never stored).
    #[serde(default)]
    pub heard_ms: Option<u64>,
}

/// Which replica of how many a target directory is (`loom format
/// --replica R --replicas N`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaOf {
    /// This one, 0..`of`.
    pub replica: u32,
    /// How many the target has.
    pub of: u32,
}

/// A replica a server hosts, as its renewal tells the MGS.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hosted {
    /// The target.
    pub target: TargetId,
    /// Which replica.
    pub replica: u32,
    /// A primary bringing replicas up to date: their remaining bytes.
    pub syncing: Vec<(u32, u64)>,
}
