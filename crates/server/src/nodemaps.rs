//! The nodemaps a server process applies to its clients' requests (see
//! `loom_proto::nodemap`): read with the configuration, applied in the
//! process before any target sees a request, so the MGS, MDTs and OSTs
//! all see the mapped caller.
//!
//! A client whose ids a nodemap changes takes no leases: its mount
//! would otherwise answer from its cache under checks made with its own
//! ids. Every request is mapped as it comes, under the nodemaps in force;
//! what a client holds from before a change is its leases, so when the
//! nodemaps change, the connections on which a client whose nodemap
//! changed subscribed to leases are closed: it reconnects (its requests
//! are resent, its leases and their caches dropped, as after any lost
//! connection) and subscribes again under the new map.

use crate::error::ServerError;
use loom_proto::msg::{Envelope, MdtRequest};
use loom_proto::nodemap::{self, Nodemap};
use loom_proto::requests::{Effect, Request};
use loom_proto::Errno;
use loom_rpc::Channel;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, RwLock, Weak};

/// The nodemaps in force, and the client connections they may cover.
#[derive(Default)]
pub struct ClientMaps {
    maps: RwLock<Arc<Vec<Nodemap>>>,
    /// Client connections that subscribed to leases, by serial: closed
    /// when their nodemap changes. (The others' requests are mapped as
    /// they come: they hold nothing granted under another map.)
    channels: Mutex<HashMap<u64, Weak<Channel>>>,
    /// Requests per nodemap, by verdict, for the metrics.
    counts: Mutex<HashMap<String, [u64; 3]>>,
}

/// What a nodemap did with a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verdict {
    /// Served with the context mapped.
    Mapped,
    /// A change from a read-only network: EROFS.
    ReadOnly,
    /// Leases asked by a client whose ids are mapped: EOPNOTSUPP.
    NoLeases,
}

impl Verdict {
    const ALL: [Verdict; 3] = [Verdict::Mapped, Verdict::ReadOnly, Verdict::NoLeases];

    /// Its name in the metrics.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Mapped => "mapped",
            Verdict::ReadOnly => "read_only",
            Verdict::NoLeases => "no_leases",
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ClientMaps {
    /// Install `maps` (from the configuration); close the connections of
    /// the clients whose nodemap changed.
    pub fn set(&self, maps: Vec<Nodemap>) {
        let old = {
            let cur = self.maps.read().unwrap_or_else(|p| p.into_inner());
            if **cur == maps {
                return;
            }
            cur.clone()
        };
        let new = Arc::new(maps);
        *self.maps.write().unwrap_or_else(|p| p.into_inner()) = new.clone();
        let changed = |ip: IpAddr| nodemap::for_addr(&old, ip) != nodemap::for_addr(&new, ip);
        let mut closed = 0;
        lock(&self.channels).retain(|_, w| {
            let Some(ch) = w.upgrade() else {
                return false;
            };
            if ch.is_dead() {
                return false;
            }
            match ch.client_addr() {
                Some(a) if changed(a.ip()) => {
                    ch.close();
                    closed += 1;
                    false
                }
                _ => true,
            }
        });
        tracing::info!(
            nodemaps = new.len(),
            closed,
            "nodemaps changed; client connections they cover were closed"
        );
    }

    /// Serve the request on `ch` as its client's nodemap makes it: its
    /// context mapped (and the contexts of the changes a replay carries,
    /// which the MDT runs as they say), the fileset set. EROFS for a
    /// change from a read-only client; EOPNOTSUPP for leases asked by a
    /// client whose ids are mapped.
    pub fn admit(&self, ch: &Arc<Channel>, env: &mut Envelope) -> Result<(), ServerError> {
        let Some(addr) = ch.client_addr() else {
            return Ok(());
        };
        let subscribe = matches!(env.req, Request::Mdt(MdtRequest::Subscribe));
        if subscribe {
            // What a change of nodemap must undo is what the client was
            // leased: its connections that asked for leases are kept.
            lock(&self.channels)
                .entry(ch.serial())
                .or_insert_with(|| Arc::downgrade(ch));
        }
        let maps = self.maps.read().unwrap_or_else(|p| p.into_inner()).clone();
        let Some(m) = nodemap::for_addr(&maps, addr.ip()) else {
            return Ok(());
        };
        let op = env.req.op();
        let count = |v: Verdict| {
            let mut c = lock(&self.counts);
            match c.get_mut(m.name.as_str()) {
                Some(n) => n[v as usize] += 1,
                None => {
                    let mut n = [0; 3];
                    n[v as usize] = 1;
                    c.insert(m.name.clone(), n);
                }
            }
        };
        if m.readonly && op.effect != Effect::Reads && !op.session {
            count(Verdict::ReadOnly);
            return Err(ServerError::refused(
                Errno::EROFS,
                format!("{}: clients of nodemap {} are read-only", op.name, m.name),
            ));
        }
        if !m.keeps_ids() && subscribe {
            count(Verdict::NoLeases);
            return Err(ServerError::refused(
                Errno::EOPNOTSUPP,
                format!(
                    "clients of nodemap {} have their ids mapped: no leases",
                    m.name
                ),
            ));
        }
        count(Verdict::Mapped);
        env.ctx = m.map(&env.ctx);
        if let Request::Mdt(MdtRequest::Replay { entries, .. }) = &mut env.req {
            for e in entries {
                e.ctx = m.map(&e.ctx);
            }
        }
        Ok(())
    }

    /// Requests per nodemap and verdict since the process started.
    pub fn counts(&self) -> Vec<((String, Verdict), u64)> {
        let mut v: Vec<_> = lock(&self.counts)
            .iter()
            .flat_map(|(name, n)| Verdict::ALL.map(|vd| ((name.clone(), vd), n[vd as usize])))
            .filter(|(_, n)| *n > 0)
            .collect();
        v.sort();
        v
    }
}
