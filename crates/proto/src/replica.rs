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

/// One write of an MDT's key-value batch, as its primary sends it to its
/// replicas: the keyspace (by its number in the store's fixed order), the
/// key, and the value (`None`: removed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvOp {
    /// The keyspace's number.
    pub space: u8,
    /// The key.
    pub key: Vec<u8>,
    /// The value; `None` removes the key.
    pub value: Option<Vec<u8>>,
}

/// A range of one keyspace of an MDT replica: the keys after `after`
/// (from the first when `None`) up to and including `through` (to the last
/// when `None`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvRange {
    /// The keyspace's number.
    pub space: u8,
    /// The range starts after this key.
    pub after: Option<Vec<u8>>,
    /// The range ends with this key.
    pub through: Option<Vec<u8>>,
}

impl KvRange {
    /// Whether `key` is in the range.
    pub fn holds(&self, key: &[u8]) -> bool {
        self.after.as_deref().is_none_or(|a| key > a)
            && self.through.as_deref().is_none_or(|t| key <= t)
    }
}

/// Batches as they travel in a `KvCopy::Ship`'s bulk, and pairs in a
/// `KvCopy::Fill`'s, without a serde layer (they are most of an MDT
/// replica's traffic): per batch its write count (u32 LE), then per write
/// its keyspace (u8), key length (u32 LE), key, 1 and value length (u32 LE)
/// and value, or 0 for a removal.
pub mod kv_wire {
    use super::KvOp;

    /// `batches` in the wire form.
    pub fn encode<'a>(batches: impl IntoIterator<Item = &'a [KvOp]>) -> Vec<u8> {
        let mut out = Vec::new();
        for b in batches {
            out.extend_from_slice(&(b.len() as u32).to_le_bytes());
            for op in b {
                out.push(op.space);
                out.extend_from_slice(&(op.key.len() as u32).to_le_bytes());
                out.extend_from_slice(&op.key);
                match &op.value {
                    Some(v) => {
                        out.push(1);
                        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
                        out.extend_from_slice(v);
                    }
                    None => out.push(0),
                }
            }
        }
        out
    }

    /// The batches in `buf`, or what is wrong with it.
    pub fn decode(mut buf: &[u8]) -> Result<Vec<Vec<KvOp>>, String> {
        fn take<'a>(buf: &mut &'a [u8], n: usize) -> Result<&'a [u8], String> {
            if buf.len() < n {
                return Err(format!("{n} bytes wanted, {} left", buf.len()));
            }
            let (a, b) = buf.split_at(n);
            *buf = b;
            Ok(a)
        }
        fn len(buf: &mut &[u8]) -> Result<usize, String> {
            let b = take(buf, 4)?;
            Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
        }
        let mut batches = Vec::new();
        while !buf.is_empty() {
            let n = len(&mut buf)?;
            // Each write takes 6 bytes at least: a count past that is damage.
            if n > buf.len() / 6 {
                return Err(format!("a batch of {n} writes in {} bytes", buf.len()));
            }
            let mut b = Vec::with_capacity(n);
            for _ in 0..n {
                let space = take(&mut buf, 1)?[0];
                let k = len(&mut buf)?;
                let key = take(&mut buf, k)?.to_vec();
                let value = match take(&mut buf, 1)?[0] {
                    0 => None,
                    1 => {
                        let v = len(&mut buf)?;
                        Some(take(&mut buf, v)?.to_vec())
                    }
                    x => return Err(format!("value marker {x}")),
                };
                b.push(KvOp { space, key, value });
            }
            batches.push(b);
        }
        Ok(batches)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn batches_come_back_as_sent_and_damage_is_an_error() {
            let op = |s: u8, k: &[u8], v: Option<&[u8]>| KvOp {
                space: s,
                key: k.to_vec(),
                value: v.map(|v| v.to_vec()),
            };
            let batches = vec![
                vec![op(0, b"a", Some(b"1")), op(3, b"", None)],
                vec![],
                vec![op(9, b"key", Some(b""))],
            ];
            let wire = encode(batches.iter().map(Vec::as_slice));
            assert_eq!(decode(&wire).expect("decodes"), batches);
            for cut in 1..wire.len() {
                // Cut short anywhere but at a batch's end: refused.
                if let Ok(got) = decode(&wire[..cut]) {
                    assert!(got.len() < batches.len(), "cut at {cut}");
                }
            }
            let mut bad = wire.clone();
            bad[0] = 0xff;
            assert!(decode(&bad).is_err());
        }
    }
}
