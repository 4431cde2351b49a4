//! New files' first bytes kept here only within room (issue #32, point 3).
//!
//! - **Data-on-MDT bytes** fit within what their MDT said is left
//!   (`DomRoom`): its free space above its reserve, and each id's room
//!   in its block quota share there. Trusted for `WriteBack::quota_trust`,
//!   less the bytes this client kept since; not a reservation (the MDT
//!   checks every write again when it is sent, as it does inodes).
//! - **Bytes for the first objects** are kept under a space grant taken
//!   at the write from the OST that holds the most for this client, as a
//!   write sent behind is (the file's OST is chosen only when it is
//!   sent). The grant goes back when the file is sent, for its write to
//!   spend. An owner near a block limit on any OST keeps nothing here.
//!
//! A write that does not fit is not kept: the file is sent at once and
//! the write goes to its layout, where its error (ENOSPC, EDQUOT) is the
//! write's own, as on a local file system. Root's bytes are checked for
//! space only (root is not limited by quotas).

use super::quota::{Check, Room};
use super::{Held, State};
use crate::client::Client;
use crate::ctx::Caller;
use crate::io::grant::Taken;
use loom_proto::msg::{MdtRequest, Reply};
use loom_proto::quota::{Owner, QuotaId};
use loom_proto::{Errno, Fid};
use std::time::Instant;

/// Bytes asked room for at a time: what a flush sends at most.
const WANT: u64 = super::BYTES_AT;

/// Where a kept write's bytes go, and what keeping them needs.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Bytes {
    /// With the inode, on MDT `mdt` (Data-on-MDT): room there.
    Dom { mdt: u32 },
    /// To the first objects: a grant.
    Objects,
}

impl Held {
    /// Where the first bytes of new files in this directory go.
    pub(super) fn bytes_go(&self) -> Bytes {
        match self.dom_end() {
            0 => Bytes::Objects,
            _ => Bytes::Dom { mdt: self.mdt },
        }
    }
}

impl State {
    /// Whether `grow` more Data-on-MDT bytes of `ids` fit what MDT `mdt`
    /// said, at `now`.
    pub(super) fn dom_check(&self, mdt: u32, ids: &[QuotaId], grow: u64, now: Instant) -> Check {
        let fits = |r: Option<&Room>| match r {
            Some(r) if r.until <= now => Check::Ask,
            None => Check::Ask,
            Some(r) if r.left.is_some_and(|n| n < grow) => Check::Full,
            Some(_) => Check::Fits,
        };
        let mut check = fits(self.dom_space.get(&mdt));
        for id in ids {
            match fits(self.dom_rooms.get(&(mdt, *id))) {
                Check::Ask => return Check::Ask,
                Check::Full => check = Check::Full,
                Check::Fits => {}
            }
        }
        check
    }

    /// `grow` more Data-on-MDT bytes of `ids` kept for MDT `mdt`.
    pub(super) fn dom_take(&mut self, mdt: u32, ids: &[QuotaId], grow: u64) {
        let less = |r: &mut Room| {
            if let Some(n) = r.left.as_mut() {
                *n = n.saturating_sub(grow);
            }
        };
        for id in ids {
            if let Some(r) = self.dom_rooms.get_mut(&(mdt, *id)) {
                less(r);
            }
        }
        if let Some(r) = self.dom_space.get_mut(&mdt) {
            less(r);
        }
    }

    /// Keep MDT `mdt`'s answer, less the bytes kept here for it since.
    fn dom_keep(
        &mut self,
        mdt: u32,
        space: u64,
        rooms: Vec<(QuotaId, Option<u64>)>,
        until: Instant,
    ) {
        let left = Some(space.saturating_sub(self.dom_kept(mdt, None)));
        self.dom_space.insert(mdt, Room { left, until });
        for (id, left) in rooms {
            let left = left.map(|n| n.saturating_sub(self.dom_kept(mdt, Some(id))));
            self.dom_rooms.insert((mdt, id), Room { left, until });
        }
    }

    /// Data-on-MDT bytes kept here for MDT `mdt` (of `id`'s files, or
    /// all), not sent yet.
    fn dom_kept(&self, mdt: u32, id: Option<QuotaId>) -> u64 {
        self.made
            .values()
            .filter(|m| {
                self.dirs
                    .get(&m.parent)
                    .is_some_and(|h| h.bytes_go() == Bytes::Dom { mdt })
            })
            .filter(|m| id.is_none_or(|id| super::owner_of(&m.attr).ids().contains(&id)))
            .map(|m| m.data.len() as u64)
            .sum()
    }
}

impl Client {
    /// Ask MDT `mdt` (through directory `via`, one of its own) for its
    /// room for Data-on-MDT bytes of `ids`, as `c`, and keep it.
    async fn wb_ask_dom_room(
        &self,
        c: &Caller,
        mdt: u32,
        via: Fid,
        ids: &[QuotaId],
    ) -> Result<(), Errno> {
        let req = MdtRequest::DomRoom {
            ids: ids.to_vec(),
            want: WANT,
        };
        let (space, rooms) = match self.mdt_call(c, via, req).await? {
            Reply::DomRoom { space, rooms } => (space, rooms),
            other => return Err(crate::io::file::unexpected("DomRoom", &other)),
        };
        let until = Instant::now() + self.wb.quota_trust;
        self.wb.lock().dom_keep(mdt, space, rooms, until);
        Ok(())
    }

    /// Ask for the room a write kept with file `fid` needs (its
    /// `Absorbed::Ask`).
    pub(crate) async fn wb_ask_write_room(&self, fid: Fid) -> Result<(), Errno> {
        let (c, mdt, via, ids) = {
            let s = self.wb.lock();
            let Some(m) = s.made.get(&fid) else {
                return Ok(());
            };
            let Some(Bytes::Dom { mdt }) = s.dirs.get(&m.parent).map(Held::bytes_go) else {
                return Ok(());
            };
            let a = &m.attr;
            let ids = super::quota::ids_of(&m.caller, a.uid, a.gid, a.projid);
            (m.caller.clone(), mdt, m.parent, ids)
        };
        self.wb_ask_dom_room(&c, mdt, via, &ids).await
    }

    /// A grant for `cost` bytes of `owner`'s first bytes, whose OST is
    /// not chosen yet: from the OST that holds the most for this client.
    /// `None` without one, or when `owner` is near a block limit on any
    /// OST (its writes are then waited for, so that EDQUOT is theirs).
    pub(super) fn wb_first_grant(&self, owner: Owner, cost: u64) -> Option<Taken> {
        if self.grants.near_anywhere(owner) {
            return None;
        }
        self.grants.take_most(cost)
    }

    /// Give back the grants of first bytes no longer kept.
    pub(super) fn wb_give_back(&self) {
        let unspent = std::mem::take(&mut self.wb.lock().unspent);
        if !unspent.is_empty() {
            self.grants.give_back(unspent);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn data_on_mdt_bytes_fit_the_space_and_every_ids_room() {
        let mut s = State::default();
        let now = Instant::now();
        let later = now + Duration::from_secs(10);
        let ids = [QuotaId::user(5), QuotaId::group(6)];
        assert_eq!(s.dom_check(0, &ids, 1, now), Check::Ask);
        s.dom_keep(0, 1000, vec![(ids[0], Some(300)), (ids[1], None)], later);
        assert_eq!(s.dom_check(0, &ids, 300, now), Check::Fits);
        assert_eq!(
            s.dom_check(0, &ids, 301, now),
            Check::Full,
            "the user's room"
        );
        assert_eq!(s.dom_check(1, &ids, 1, now), Check::Ask, "another MDT's");
        assert_eq!(
            s.dom_check(0, &[], 1000, now),
            Check::Fits,
            "root: space only"
        );
        assert_eq!(s.dom_check(0, &[], 1001, now), Check::Full, "the space");
        s.dom_take(0, &ids, 200);
        assert_eq!(s.dom_check(0, &ids, 101, now), Check::Full);
        assert_eq!(s.dom_check(0, &[], 800, now), Check::Fits);
        assert_eq!(
            s.dom_check(0, &[], 801, now),
            Check::Full,
            "taken from the space too"
        );
        assert_eq!(
            s.dom_check(0, &ids, 1, later),
            Check::Ask,
            "no longer trusted"
        );
    }
}
