//! Capabilities: what lets a client touch an object on an OST.
//!
//! An OST trusts a server (a connection proven with the cluster key) with
//! any object; a client (the client key) only with the objects of a file
//! its MDT let it open. The MDT hands the client a capability when it
//! creates or opens a file (or asks for one, `GetCapa`): the file's FID,
//! its objects, whether it may write, and until when, signed with a key
//! only servers can derive from the cluster key (HMAC-SHA256). The client
//! sends it with every request on those objects; the OST's server process
//! checks it before the OST sees the request.

use crate::fid::Fid;
use crate::layout::ObjRef;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// How long a capability holds, in seconds. A client asks for a new one
/// before it ends.
pub const LIFETIME_SECS: u64 = 3600;

/// The right to touch the objects of one file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capa {
    /// The file.
    pub fid: Fid,
    /// Its objects.
    pub objs: Vec<ObjRef>,
    /// Writes allowed (else reads only).
    pub write: bool,
    /// Seconds since the epoch (the servers' clocks) until which it holds.
    pub expires: u64,
    /// HMAC-SHA256 of the rest under the capability key.
    pub mac: [u8; 32],
}

/// The capability key of a cluster key: HMAC-SHA256(cluster key,
/// "loomfs capability key v1"). Servers hold it; a client cannot derive
/// it from the client key.
pub fn key_of(cluster_key: &[u8]) -> [u8; 32] {
    mac(cluster_key, b"loomfs capability key v1")
}

fn mac(key: &[u8], data: &[u8]) -> [u8; 32] {
    // HMAC takes a key of any length.
    let Ok(mut m) = HmacSha256::new_from_slice(key) else {
        return [0; 32];
    };
    m.update(data);
    m.finalize().into_bytes().into()
}

fn body(fid: Fid, objs: &[ObjRef], write: bool, expires: u64) -> Vec<u8> {
    // postcard of a tuple of plain types cannot fail.
    postcard::to_stdvec(&(fid, objs, write, expires)).unwrap_or_default()
}

/// Now, in seconds since the epoch.
pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Capa {
    /// A capability for `objs` of `fid`, holding [`LIFETIME_SECS`] from
    /// now, signed with `key` (see [`key_of`]).
    pub fn sign(key: &[u8; 32], fid: Fid, objs: Vec<ObjRef>, write: bool) -> Capa {
        let expires = now_secs() + LIFETIME_SECS;
        let mac = mac(key, &body(fid, &objs, write, expires));
        Capa {
            fid,
            objs,
            write,
            expires,
            mac,
        }
    }

    /// Whether it lets its holder touch `obj` (to write when `write`) at
    /// `now`, signed with `key`; why not otherwise.
    pub fn allows(&self, key: &[u8; 32], obj: ObjRef, write: bool, now: u64) -> Result<(), String> {
        let want = mac(key, &body(self.fid, &self.objs, self.write, self.expires));
        // Not a secret comparison worth timing attacks: the MAC is over
        // what the client sends, and a wrong guess only gets a refusal.
        if want != self.mac {
            return Err(format!(
                "capability of {} not signed by this cluster",
                self.fid
            ));
        }
        if now > self.expires {
            return Err(format!("capability of {} expired", self.fid));
        }
        if !self.objs.contains(&obj) {
            return Err(format!(
                "object {}:{} is not {}'s",
                obj.ost, obj.oid, self.fid
            ));
        }
        if write && !self.write {
            return Err(format!("capability of {} is for reading", self.fid));
        }
        Ok(())
    }

    /// Whether it still holds for `margin` seconds and allows writes if
    /// `write`.
    pub fn good_for(&self, write: bool, margin: u64) -> bool {
        (self.write || !write) && self.expires > now_secs() + margin
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capability_allows_its_objects_for_its_rights_until_it_expires() {
        let key = key_of(b"a cluster key of some length");
        let fid = Fid::new(5, 9);
        let (a, b, other) = (
            ObjRef { ost: 0, oid: 7 },
            ObjRef { ost: 1, oid: 8 },
            ObjRef { ost: 1, oid: 9 },
        );
        let c = Capa::sign(&key, fid, vec![a, b], false);
        let now = now_secs();
        assert!(c.allows(&key, a, false, now).is_ok());
        assert!(c.allows(&key, b, false, now).is_ok());
        assert!(c.allows(&key, other, false, now).is_err(), "another object");
        assert!(
            c.allows(&key, a, true, now).is_err(),
            "a read capability writing"
        );
        assert!(c.allows(&key, a, false, c.expires + 1).is_err(), "expired");
        let forged = Capa {
            write: true,
            ..c.clone()
        };
        assert!(forged.allows(&key, a, true, now).is_err(), "rights changed");
        let other_key = key_of(b"another cluster");
        assert!(
            c.allows(&other_key, a, false, now).is_err(),
            "another cluster's"
        );
        let w = Capa::sign(&key, fid, vec![a], true);
        assert!(w.allows(&key, a, true, now).is_ok());
        assert!(w.good_for(true, 60) && c.good_for(false, 60) && !c.good_for(true, 60));
    }
}
