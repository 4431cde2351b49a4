//! Inode quotas checked where creates are answered (issue #32, point 3).
//!
//! Before the layer answers a create, it knows how many more inodes the
//! new inode's owner, group and project may own on the directory's MDT
//! (`QuotaRoom`: what the MDT's share of their limits leaves, the MDT
//! asking the quota master for more as a create would). Each create it
//! answers takes one from what it knows. At none left, it sends what
//! waits and asks again, and answers EDQUOT only if there is still no
//! room: the error comes from the create, as on a local file system.
//!
//! An answer is trusted for `WriteBack::quota_trust` (the mount's
//! `--wb-quota-trust`), then asked again, less this client's own creates
//! not yet applied. It reserves nothing: another client's creates may
//! take the room meanwhile. The MDT checks every create again when it is
//! sent, and a refusal there is reported at the next fsync (or the
//! file's close), as Linux reports write-back errors.
//!
//! Root's creates are not checked (root is not limited). A group the
//! caller is not in (a setgid directory's) is left to the MDT's check:
//! a user may not ask about it.

use super::State;
use crate::client::Client;
use crate::ctx::Caller;
use loom_proto::msg::{MdtRequest, Reply};
use loom_proto::quota::QuotaId;
use loom_proto::{Errno, Fid};
use std::time::Instant;

/// Inodes asked room for at a time (the MDT asks the master for as many
/// where its share is short).
const WANT: u32 = 64;

/// What an MDT said of one id's room, less what this client made since.
#[derive(Debug, Clone, Copy)]
pub(super) struct Room {
    /// Inodes (or bytes) left (`None`: no limit).
    pub(super) left: Option<u64>,
    /// Trusted until then.
    pub(super) until: Instant,
}

/// What the rooms known say of one more inode.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Check {
    /// It fits.
    Fits,
    /// Some id's room is not known (or no longer trusted).
    Ask,
    /// Some id has no room left.
    Full,
}

/// The ids a new inode owned by `uid`:`gid` in project `projid`, made
/// by caller `c`, is checked against here (see the module's
/// documentation for who is left to the MDT).
pub(super) fn ids_of(c: &Caller, uid: u32, gid: u32, projid: u32) -> Vec<QuotaId> {
    if c.uid == 0 {
        return Vec::new();
    }
    let mut ids = vec![QuotaId::user(uid)];
    if gid == c.gid || c.groups.contains(&gid) {
        ids.push(QuotaId::group(gid));
    }
    if projid != 0 {
        ids.push(QuotaId::project(projid));
    }
    ids
}

impl State {
    /// Whether one more inode of `ids` fits what MDT `mdt` said, at `now`.
    pub(super) fn room_check(&self, mdt: u32, ids: &[QuotaId], now: Instant) -> Check {
        let mut check = Check::Fits;
        for id in ids {
            match self.rooms.get(&(mdt, *id)) {
                Some(r) if r.until <= now => return Check::Ask,
                None => return Check::Ask,
                Some(Room { left: Some(0), .. }) => check = Check::Full,
                Some(_) => {}
            }
        }
        check
    }

    /// One more inode of `ids` made (after [`State::room_check`] said it
    /// fits).
    pub(super) fn room_take(&mut self, mdt: u32, ids: &[QuotaId]) {
        for id in ids {
            if let Some(Room { left: Some(n), .. }) = self.rooms.get_mut(&(mdt, *id)) {
                *n = n.saturating_sub(1);
            }
        }
    }

    /// Keep MDT `mdt`'s answer, less the inodes of each id made here and
    /// not known to be applied there.
    fn room_keep(&mut self, mdt: u32, rooms: Vec<(QuotaId, Option<u64>)>, until: Instant) {
        for (id, left) in rooms {
            let left = left.map(|n| n.saturating_sub(self.made_counting(mdt, id)));
            self.rooms.insert((mdt, id), Room { left, until });
        }
    }

    /// Inodes made here, for MDT `mdt`, that count against `id` and may
    /// not be counted there yet.
    pub(super) fn made_counting(&self, mdt: u32, id: QuotaId) -> u64 {
        self.made
            .values()
            .filter(|m| self.dirs.get(&m.parent).is_none_or(|h| h.mdt == mdt))
            .filter(|m| super::owner_of(&m.attr).ids().contains(&id))
            .count() as u64
    }
}

impl Client {
    /// Ask MDT `mdt` (through directory `via`, one of its own) for the
    /// room of `ids`, as `c`, and keep it. With `settle`, what this
    /// client made for those ids is sent first, so that the answer counts
    /// it exactly.
    pub(super) async fn wb_ask_room(
        &self,
        c: &Caller,
        mdt: u32,
        via: Fid,
        ids: &[QuotaId],
        settle: bool,
    ) -> Result<(), Errno> {
        if settle
            && ids
                .iter()
                .any(|id| self.wb.lock().made_counting(mdt, *id) > 0)
        {
            // A refusal is the change's, reported at its fsync.
            let _ = self.wb_flush().await;
        }
        let req = MdtRequest::QuotaRoom {
            ids: ids.to_vec(),
            want: WANT,
        };
        let rooms = match self.mdt_call(c, via, req).await? {
            Reply::QuotaRoom { rooms } => rooms,
            other => return Err(crate::io::file::unexpected("QuotaRoom", &other)),
        };
        let until = Instant::now() + self.wb.quota_trust;
        self.wb.lock().room_keep(mdt, rooms, until);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::perms::tests::caller;
    use super::*;
    use std::time::Duration;

    #[test]
    fn root_is_not_checked_and_a_group_the_caller_is_not_in_is_left_to_the_mdt() {
        assert!(ids_of(&caller(0, 0, vec![]), 0, 0, 7).is_empty());
        let c = caller(1000, 100, vec![200]);
        assert_eq!(
            ids_of(&c, 1000, 200, 7),
            [
                QuotaId::user(1000),
                QuotaId::group(200),
                QuotaId::project(7)
            ]
        );
        assert_eq!(ids_of(&c, 1000, 300, 0), [QuotaId::user(1000)]);
    }

    #[test]
    fn a_room_is_taken_one_inode_at_a_time_and_trusted_for_its_time() {
        let mut s = State::default();
        let now = Instant::now();
        let ids = [QuotaId::user(5), QuotaId::group(6)];
        assert_eq!(s.room_check(0, &ids, now), Check::Ask);
        s.room_keep(
            0,
            vec![(ids[0], Some(2)), (ids[1], None)],
            now + Duration::from_secs(10),
        );
        assert_eq!(s.room_check(0, &ids, now), Check::Fits);
        assert_eq!(s.room_check(1, &ids, now), Check::Ask, "another MDT's");
        s.room_take(0, &ids);
        assert_eq!(s.room_check(0, &ids, now), Check::Fits);
        s.room_take(0, &ids);
        assert_eq!(s.room_check(0, &ids, now), Check::Full);
        let later = now + Duration::from_secs(11);
        assert_eq!(s.room_check(0, &ids, later), Check::Ask);
    }
}
