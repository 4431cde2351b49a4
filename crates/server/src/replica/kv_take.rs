//! What a replica of an MDT does with what its primary sends
//! (`KvCopy`): batches applied in the primary's order, and the steps of
//! being brought up to date.

use super::kv::ReplicatedKv;
use super::lock;
use crate::error::{Handled, ServerError};
use loom_proto::msg::{KvCopy, Reply};
use loom_proto::replica::{kv_wire, KvOp, KvRange};
use loom_proto::Errno;
use loom_store::kv::{Batch, KvStore, Space};

/// Records read from the store at a time while summing or filling a
/// range.
const SCAN: usize = 1024;

impl ReplicatedKv {
    /// Do `req`, sent by the primary under `term` (checked by the caller).
    pub(super) fn take(&self, term: u64, req: KvCopy, bulk: &[u8]) -> Handled {
        match req {
            KvCopy::Ship { from, sync } => {
                let batches = decode(bulk)?;
                let mut base = lock(&self.base);
                let next = match *base {
                    Some((t, next)) if t == term => next,
                    _ => {
                        return Err(ServerError::refused(
                            Errno::ESTALE,
                            format!(
                                "{}: batches under term {term} before the primary set this replica's base",
                                self.held.id
                            ),
                        ))
                    }
                };
                if from > next {
                    return Err(ServerError::refused(
                        Errno::ESTALE,
                        format!(
                            "{}: batches from {from}, but this replica holds those before {next} only",
                            self.held.id
                        ),
                    ));
                }
                // A shipment sent again: what is held already is skipped.
                let skip = (next - from) as usize;
                let mut ticket = None;
                let mut took = next;
                for ops in batches.into_iter().skip(skip) {
                    ticket = Some(self.store.apply(batch_of(ops)?)?);
                    took += 1;
                }
                if sync {
                    let t = match ticket {
                        Some(t) => t,
                        None => self.store.apply(Batch::new())?,
                    };
                    self.store.sync_through(t)?;
                }
                *base = Some((term, took));
                Ok(Reply::Ok)
            }
            KvCopy::Digest { ranges } => {
                // Being brought up to date: no batch is taken until the
                // base is set again.
                *lock(&self.base) = None;
                let sums = ranges
                    .iter()
                    .map(|r| sum_range(&*self.store, r))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Reply::KvSums(sums))
            }
            KvCopy::Fill { range } => {
                *lock(&self.base) = None;
                let space = space_of(range.space)?;
                let pairs: Vec<KvOp> = decode(bulk)?.into_iter().flatten().collect();
                let mut b = Batch::new();
                let mut theirs = std::collections::HashSet::new();
                for op in pairs {
                    let (Some(v), true) =
                        (op.value, op.space == range.space && range.holds(&op.key))
                    else {
                        return Err(ServerError::refused(
                            Errno::EINVAL,
                            format!("{}: a fill's record is outside its range", self.held.id),
                        ));
                    };
                    theirs.insert(op.key.clone());
                    b.put(space, op.key, v);
                }
                each_in(&*self.store, &range, |k, _| {
                    if !theirs.contains(k) {
                        b.delete(space, k.to_vec());
                    }
                })?;
                self.store.apply(b)?;
                Ok(Reply::Ok)
            }
            KvCopy::Base { seq } => {
                let t = self.store.apply(Batch::new())?;
                self.store.sync_through(t)?;
                *lock(&self.base) = Some((term, seq + 1));
                tracing::info!(target = %self.held.id, replica = self.held.replica, term, seq, "replica brought up to date: taking batches");
                Ok(Reply::Ok)
            }
        }
    }
}

fn decode(bulk: &[u8]) -> Result<Vec<Vec<KvOp>>, ServerError> {
    kv_wire::decode(bulk)
        .map_err(|e| ServerError::refused(Errno::EPROTO, format!("key-value batches: {e}")))
}

fn space_of(n: u8) -> Result<Space, ServerError> {
    Space::numbered(n)
        .ok_or_else(|| ServerError::refused(Errno::EPROTO, format!("no keyspace numbered {n}")))
}

/// `ops` as one store batch.
fn batch_of(ops: Vec<KvOp>) -> Result<Batch, ServerError> {
    let mut b = Batch::new();
    for op in ops {
        let s = space_of(op.space)?;
        match op.value {
            Some(v) => b.put(s, op.key, v),
            None => b.delete(s, op.key),
        }
    }
    Ok(b)
}

/// Call `f` with each record of `range` in `store`, in key order.
pub(super) fn each_in(
    store: &dyn KvStore,
    range: &KvRange,
    mut f: impl FnMut(&[u8], &[u8]),
) -> Result<(), ServerError> {
    let space = space_of(range.space)?;
    let mut after = range.after.clone();
    loop {
        let got = store.scan(space, b"", after.as_deref(), SCAN)?;
        let n = got.len();
        for (k, v) in &got {
            if !range.holds(k) {
                return Ok(());
            }
            f(k, v);
        }
        match got.into_iter().last() {
            Some((k, _)) if n == SCAN => after = Some(k),
            _ => return Ok(()),
        }
    }
}

/// The crc32c of the records of `range` in `store` and their count.
pub(super) fn sum_range(store: &dyn KvStore, range: &KvRange) -> Result<(u32, u64), ServerError> {
    let mut sum = Summer::default();
    each_in(store, range, |k, v| sum.add(k, v))?;
    Ok((sum.crc, sum.count))
}

/// The crc32c and count of records, added in key order.
#[derive(Default)]
pub(super) struct Summer {
    pub(super) crc: u32,
    pub(super) count: u64,
}

impl Summer {
    pub(super) fn add(&mut self, k: &[u8], v: &[u8]) {
        for part in [k, v] {
            self.crc = crc32c::crc32c_append(self.crc, &(part.len() as u32).to_le_bytes());
            self.crc = crc32c::crc32c_append(self.crc, part);
        }
        self.count += 1;
    }
}
