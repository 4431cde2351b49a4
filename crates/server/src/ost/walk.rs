//! What an OST's scrub walks: its 256 object buckets (`objects/XX`), one
//! object per step, the cursor being the last object id done.

use crate::scrub::{Step, Walk};
use loom_proto::msg::Finding;
use loom_store::object::{ObjectError, ObjectStore};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// The scrub's view of an object store.
pub(super) struct OstWalk {
    store: Arc<ObjectStore>,
    /// The last bucket listed, and its object ids in order.
    listing: Mutex<Option<(u32, Vec<u64>)>>,
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn finding(oid: u64, offset: u64) -> Finding {
    Finding {
        oid,
        offset,
        record: String::new(),
        by_scrub: true,
        when: now(),
    }
}

impl OstWalk {
    pub(super) fn new(store: Arc<ObjectStore>) -> OstWalk {
        OstWalk {
            store,
            listing: Mutex::new(None),
        }
    }

    /// The first object of `bucket` after `after`.
    fn next_in(&self, bucket: u32, after: u64) -> Result<Option<u64>, String> {
        let mut l = self.listing.lock().unwrap_or_else(|p| p.into_inner());
        if l.as_ref().is_none_or(|(b, _)| *b != bucket) {
            let oids = self
                .store
                .objects_in(bucket as u8)
                .map_err(|e| e.to_string())?;
            *l = Some((bucket, oids));
        }
        Ok(l.as_ref()
            .and_then(|(_, oids)| oids.iter().find(|&&o| o > after).copied()))
    }
}

impl Walk for OstWalk {
    fn buckets(&self) -> u32 {
        256
    }

    fn step(&self, bucket: u32, after: &[u8]) -> Result<Step, String> {
        let after = <[u8; 8]>::try_from(after).map_or(0, u64::from_be_bytes);
        let Some(oid) = self.next_in(bucket, after)? else {
            return Ok(Step::default());
        };
        let mut step = Step {
            next: Some(oid.to_be_bytes().to_vec()),
            units: 1,
            ..Step::default()
        };
        match self.store.verify(oid) {
            Ok((bytes, bad)) => {
                step.bytes = bytes;
                step.bad = bad.iter().map(|b| finding(oid, b.offset)).collect();
            }
            Err(ObjectError::BadSums { .. }) => step.bad.push(finding(oid, 0)),
            // Destroyed meanwhile, or unreadable: no checksum finding.
            Err(e) => tracing::warn!(oid, "scrub could not check an object: {e}"),
        }
        Ok(step)
    }

    fn total_bytes(&self) -> u64 {
        (0..=255u8)
            .filter_map(|b| self.store.objects_in(b).ok())
            .flatten()
            .map(|oid| self.store.size(oid).unwrap_or(0))
            .sum()
    }

    fn still_bad(&self, f: &Finding) -> bool {
        match self.store.verify(f.oid) {
            Ok((_, bad)) => bad.iter().any(|b| b.offset == f.offset),
            Err(ObjectError::BadSums { .. }) => self.store.object_path(f.oid).exists(),
            Err(_) => false,
        }
    }
}
