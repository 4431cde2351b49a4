//! What an MDT's scrub walks: every record of every keyspace, a page of
//! records per step, the cursor being the last key done.

use crate::scrub::{Step, Walk};
use loom_proto::msg::Finding;
use loom_store::kv::{hex, KvError, KvStore, Space};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

/// Records verified per step.
const PAGE: usize = 512;

/// The scrub's view of an MDT's store.
pub(super) struct MdtWalk {
    pub(super) store: Arc<dyn KvStore>,
    /// The store's directory (its size is a pass's expected bytes).
    pub(super) dir: PathBuf,
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn finding(s: Space, key: &[u8], by_scrub: bool) -> Finding {
    Finding {
        oid: 0,
        offset: 0,
        record: format!("{}/{}", s.name(), hex(key)),
        by_scrub,
        when: now(),
    }
}

/// The keyspace and key a finding names.
fn parse(record: &str) -> Option<(Space, Vec<u8>)> {
    let (name, key) = record.split_once('/')?;
    let s = Space::ALL.into_iter().find(|s| s.name() == name)?;
    let key = (0..key.len())
        .step_by(2)
        .map(|i| {
            key.get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect::<Option<Vec<u8>>>()?;
    Some((s, key))
}

impl Walk for MdtWalk {
    fn buckets(&self) -> u32 {
        Space::ALL.len() as u32
    }

    fn step(&self, bucket: u32, after: &[u8]) -> Result<Step, String> {
        let Some(&s) = Space::ALL.get(bucket as usize) else {
            return Ok(Step::default());
        };
        let after = (!after.is_empty()).then_some(after);
        let recs = self
            .store
            .verify_scan(s, after, PAGE)
            .map_err(|e| e.to_string())?;
        Ok(Step {
            next: (recs.len() == PAGE)
                .then(|| recs.last().map(|r| r.key.clone()))
                .flatten(),
            units: recs.len() as u64,
            bytes: recs.iter().map(|r| r.len as u64).sum(),
            bad: recs
                .iter()
                .filter(|r| !r.good)
                .map(|r| finding(s, &r.key, true))
                .collect(),
        })
    }

    fn total_bytes(&self) -> u64 {
        fn du(p: &std::path::Path) -> u64 {
            std::fs::read_dir(p)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| match e.file_type() {
                    Ok(t) if t.is_dir() => du(&e.path()),
                    _ => e.metadata().map_or(0, |m| m.len()),
                })
                .sum()
        }
        du(&self.dir)
    }

    fn still_bad(&self, f: &Finding) -> bool {
        match parse(&f.record) {
            Some((s, key)) => matches!(self.store.get(s, &key), Err(KvError::Corrupt { .. })),
            None => false,
        }
    }

    fn seen(&self) -> (u64, Vec<Finding>) {
        let (n, seen) = self.store.damage_seen();
        (n, seen.iter().map(|(s, k)| finding(*s, k, false)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finding_names_its_record_both_ways() {
        let f = finding(Space::Dentries, &[0, 0xab, 7], false);
        assert_eq!(f.record, "dentries/00ab07");
        assert_eq!(parse(&f.record), Some((Space::Dentries, vec![0, 0xab, 7])));
        assert_eq!(parse("nope/00"), None);
        assert_eq!(parse("inodes/0g"), None);
    }
}
