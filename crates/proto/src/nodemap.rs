//! Nodemaps: what the servers make of the requests of one client
//! network, as Lustre's nodemaps.
//!
//! The MGS keeps them in the cluster configuration (`ClusterConfig::
//! nodemaps`), so every server reads them with it, live. A server applies
//! the nodemap whose networks hold the address a client connection comes
//! from (the most specific network wins) to every request on it, before
//! any target sees the request:
//! - root squash: root's uid and gid become the squash ids, unless the
//!   nodemap is `admin` (its root stays root);
//! - id maps: a client uid or gid listed is the file system's id it maps
//!   to; others pass unchanged (or, unless `trusted`, are squashed);
//! - read-only: every request that would change the file system is
//!   refused with EROFS;
//! - fileset: its clients mount a subtree as their root, and the MDTs
//!   refuse them every inode outside it (EACCES).
//!
//! Connections proven with the cluster key (servers, tools run with the
//! key) are not clients of any nodemap. A client no nodemap names is
//! served as it says it is.

use crate::msg::ReqCtx;
use crate::Fid;
use serde::{Deserialize, Serialize};
use std::net::IpAddr;

/// A client network: an address and the length of its prefix.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Net {
    /// The network's address.
    pub addr: IpAddr,
    /// Bits of the prefix (up to 32 for IPv4, 128 for IPv6).
    pub prefix: u8,
}

impl Net {
    /// Parse `ADDR/PREFIX` or a single `ADDR` (a host).
    pub fn parse(s: &str) -> Result<Net, String> {
        let (a, p) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = a
            .trim()
            .parse()
            .map_err(|_| format!("{s:?}: not an address (ADDR or ADDR/PREFIX)"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match p {
            Some(p) => p
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("{s:?}: a prefix is 0 to {max}"))?,
            None => max,
        };
        Ok(Net { addr, prefix })
    }

    /// Whether `ip` is in this network.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
            v4 => v4,
        };
        match (self.addr, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let mask = u32::MAX.checked_shl(32 - self.prefix as u32).unwrap_or(0);
                u32::from(n) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let mask = u128::MAX.checked_shl(128 - self.prefix as u32).unwrap_or(0);
                u128::from(n) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

impl std::fmt::Display for Net {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// What the servers make of one client network's requests.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Nodemap {
    /// Its name (`loom nodemap set MOUNT NAME ...`).
    pub name: String,
    /// The client networks it covers.
    pub nets: Vec<Net>,
    /// Root stays root (Lustre's `admin`); otherwise root is squashed.
    pub admin: bool,
    /// Ids not in the maps pass as they are (Lustre's `trusted`);
    /// otherwise they are squashed too.
    pub trusted: bool,
    /// The uid squashed ids become.
    pub squash_uid: u32,
    /// The gid squashed ids become.
    pub squash_gid: u32,
    /// Client uid to file system uid.
    pub uids: Vec<(u32, u32)>,
    /// Client gid to file system gid.
    pub gids: Vec<(u32, u32)>,
    /// Every change is refused (EROFS).
    pub readonly: bool,
    /// The subtree its clients are confined to (Lustre's fileset): they
    /// mount it as their root and reach nothing outside it. A table in
    /// the MGS's state file, so last.
    pub fileset: Option<Fileset>,
}

/// A subtree a nodemap confines its clients to: a directory, named by
/// its FID (it stays the fileset when renamed), with the path it had
/// when set, to show.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fileset {
    /// The directory.
    pub fid: Fid,
    /// Its path in the file system when the nodemap was set.
    pub path: String,
}

impl Nodemap {
    /// A nodemap of `nets` with Lustre's defaults but trusted ids: root
    /// squashed to nobody (65534), other ids as they are, read-write.
    pub fn new(name: &str, nets: Vec<Net>) -> Nodemap {
        Nodemap {
            name: name.to_string(),
            nets,
            admin: false,
            trusted: true,
            squash_uid: 65534,
            squash_gid: 65534,
            uids: Vec::new(),
            gids: Vec::new(),
            readonly: false,
            fileset: None,
        }
    }

    /// Refuse what cannot work: no name, no network, an id mapped twice.
    pub fn validate(&self) -> Result<(), String> {
        if self.name.is_empty() || self.name.len() > 64 || self.name.contains(char::is_whitespace) {
            return Err(format!(
                "{:?}: a nodemap's name is 1 to 64 characters, no spaces",
                self.name
            ));
        }
        if self.nets.is_empty() {
            return Err(format!(
                "nodemap {}: name at least one client network (--net)",
                self.name
            ));
        }
        for (what, map) in [("uid", &self.uids), ("gid", &self.gids)] {
            let mut from: Vec<u32> = map.iter().map(|(c, _)| *c).collect();
            from.sort_unstable();
            if from.windows(2).any(|w| w[0] == w[1]) {
                return Err(format!(
                    "nodemap {}: a client {what} is mapped twice",
                    self.name
                ));
            }
        }
        Ok(())
    }

    /// How specifically it covers `ip`: the longest prefix of its
    /// networks that holds it.
    pub fn covers(&self, ip: IpAddr) -> Option<u8> {
        self.nets
            .iter()
            .filter(|n| n.contains(ip))
            .map(|n| n.prefix)
            .max()
    }

    /// Client id `id` as the file system sees it, under `map` (uids or
    /// gids) and `squash`: root squashed unless admin, mapped ids mapped,
    /// others as they are if trusted.
    fn id(&self, id: u32, map: &[(u32, u32)], squash: u32) -> u32 {
        if id == 0 && !self.admin {
            return squash;
        }
        match map.iter().find(|(c, _)| *c == id) {
            Some((_, f)) => *f,
            None if self.trusted || id == 0 => id,
            None => squash,
        }
    }

    fn uid(&self, uid: u32) -> u32 {
        self.id(uid, &self.uids, self.squash_uid)
    }

    fn gid(&self, gid: u32) -> u32 {
        self.id(gid, &self.gids, self.squash_gid)
    }

    /// `ctx` as this nodemap makes it: ids mapped or squashed.
    pub fn map(&self, ctx: &ReqCtx) -> ReqCtx {
        let mut groups: Vec<u32> = ctx.groups.iter().map(|g| self.gid(*g)).collect();
        groups.sort_unstable();
        groups.dedup();
        ReqCtx {
            uid: self.uid(ctx.uid),
            gid: self.gid(ctx.gid),
            groups,
            fileset: self.fileset.as_ref().map(|f| f.fid),
            ..ctx.clone()
        }
    }

    /// Whether its clients' ids are served as they are (nothing squashed
    /// or mapped): only then may they take leases, under which a client
    /// checks permissions with its own ids.
    pub fn keeps_ids(&self) -> bool {
        self.admin && self.trusted && self.uids.is_empty() && self.gids.is_empty()
    }
}

/// The nodemap for a client at `ip`: the one whose network holding it is
/// the most specific (the first of those at a tie).
pub fn for_addr(maps: &[Nodemap], ip: IpAddr) -> Option<&Nodemap> {
    let mut best: Option<(&Nodemap, u8)> = None;
    for m in maps {
        if let Some(p) = m.covers(ip) {
            if best.is_none_or(|(_, b)| p > b) {
                best = Some((m, p));
            }
        }
    }
    best.map(|(m, _)| m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("an address")
    }

    #[test]
    fn networks_parse_and_hold_their_addresses() {
        let n = Net::parse("10.1.0.0/16").expect("net");
        assert!(n.contains(ip("10.1.200.3")));
        assert!(!n.contains(ip("10.2.0.1")));
        assert!(n.contains(ip("::ffff:10.1.0.9")), "a v4-mapped v6 address");
        let host = Net::parse("127.0.0.2").expect("host");
        assert_eq!(host.prefix, 32);
        assert!(host.contains(ip("127.0.0.2")) && !host.contains(ip("127.0.0.1")));
        assert!(Net::parse("0.0.0.0/0")
            .expect("all")
            .contains(ip("192.0.2.1")));
        assert!(Net::parse("fd00::/8").expect("v6").contains(ip("fd12::1")));
        for bad in ["10.0.0.0/33", "nonsense", "10.0.0.0/x", "fd00::/129"] {
            assert!(Net::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn root_is_squashed_ids_are_mapped_and_the_most_specific_map_wins() {
        let mut lab = Nodemap::new("lab", vec![Net::parse("10.0.0.0/8").expect("net")]);
        lab.uids = vec![(1000, 2000)];
        lab.gids = vec![(100, 200)];
        let ctx = ReqCtx {
            uid: 0,
            gid: 0,
            groups: vec![0, 100, 5],
            client_id: 7,
            ..ReqCtx::default()
        };
        let m = lab.map(&ctx);
        assert_eq!(
            (m.uid, m.gid, m.groups.clone(), m.client_id),
            (65534, 65534, vec![5, 200, 65534], 7)
        );
        let user = lab.map(&ReqCtx {
            uid: 1000,
            gid: 100,
            ..ReqCtx::default()
        });
        assert_eq!((user.uid, user.gid), (2000, 200));
        lab.trusted = false;
        assert_eq!(
            lab.map(&ReqCtx {
                uid: 1001,
                ..ReqCtx::default()
            })
            .uid,
            65534
        );
        lab.admin = true;
        assert_eq!(
            lab.map(&ReqCtx::default()).uid,
            0,
            "an admin nodemap keeps root"
        );
        assert_eq!(lab.map(&ReqCtx::default()).fileset, None);
        lab.fileset = Some(Fileset {
            fid: Fid::new(7, 1),
            path: "/proj".into(),
        });
        assert_eq!(
            lab.map(&ReqCtx::default()).fileset,
            Some(Fid::new(7, 1)),
            "its clients are confined to the fileset"
        );
        let one = Nodemap::new("one", vec![Net::parse("10.9.9.9").expect("host")]);
        let maps = vec![lab, one];
        assert_eq!(
            for_addr(&maps, ip("10.9.9.9")).map(|m| m.name.as_str()),
            Some("one")
        );
        assert_eq!(
            for_addr(&maps, ip("10.9.9.8")).map(|m| m.name.as_str()),
            Some("lab")
        );
        assert!(for_addr(&maps, ip("192.0.2.1")).is_none());
    }

    #[test]
    fn a_nodemap_without_networks_or_with_an_id_mapped_twice_is_refused() {
        assert!(Nodemap::new("x", vec![]).validate().is_err());
        assert!(
            Nodemap::new("a b", vec![Net::parse("10.0.0.1").expect("n")])
                .validate()
                .is_err()
        );
        let mut m = Nodemap::new("x", vec![Net::parse("10.0.0.1").expect("n")]);
        m.uids = vec![(1, 2), (1, 3)];
        assert!(m.validate().is_err());
        m.uids = vec![(1, 2)];
        assert!(m.validate().is_ok());
    }
}
