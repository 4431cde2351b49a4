//! POSIX's rules for what this layer answers itself, by mode bits: an
//! inode it made has no ACL (a directory with a default ACL is not
//! written back, and an xattr change sends the inode first). The MDT
//! checks each change again when it is sent (`perm::apply_setattr` and
//! `made_owner` there); these keep the answers the kernel gets the same.

use crate::ctx::Caller;
use loom_proto::msg::{Attr, FileKind, SetAttr, SetTime, Time};
use loom_proto::Errno;

const S_ISUID: u32 = 0o4000;
const S_ISGID: u32 = 0o2000;
const S_IXGRP: u32 = 0o0010;

fn in_group(c: &Caller, gid: u32) -> bool {
    c.gid == gid || c.groups.contains(&gid)
}

/// Whether `c` has `bit` (0o4 read, 0o2 write, 0o1 search or execute) on
/// `a` by its mode bits; root always.
pub(super) fn may(c: &Caller, a: &Attr, bit: u32) -> bool {
    if c.uid == 0 {
        return true;
    }
    let shift = if c.uid == a.uid {
        6
    } else if in_group(c, a.gid) {
        3
    } else {
        0
    };
    a.perm & (bit << shift) != 0
}

/// Whether `c` may remove `victim` from `dir`: write and search on the
/// directory, and with its sticky bit, own one of them.
pub(super) fn may_remove(c: &Caller, dir: &Attr, victim: &Attr) -> Result<(), Errno> {
    if !may(c, dir, 0o3) {
        return Err(Errno::EACCES);
    }
    if dir.perm & 0o1000 != 0 && c.uid != 0 && c.uid != dir.uid && c.uid != victim.uid {
        return Err(Errno::EPERM);
    }
    Ok(())
}

/// Owner, group and mode of a new inode `c` makes in `parent` with mode
/// `perm` (cut by the caller's umask when it left that to the MDT), as
/// the MDT gives them: a set-group-ID directory passes its group on (and
/// the bit to a directory); a file whose group the caller is not in loses
/// set-group-ID.
pub(super) fn new_owner(c: &Caller, parent: &Attr, kind: FileKind, perm: u32) -> (u32, u32, u32) {
    let mut perm = perm & !c.umask.unwrap_or(0) & 0o7777;
    let gid = if parent.perm & S_ISGID != 0 {
        if kind == FileKind::Dir {
            perm |= S_ISGID;
        }
        parent.gid
    } else {
        c.gid
    };
    if kind == FileKind::Symlink {
        return (c.uid, gid, 0o777);
    }
    if kind != FileKind::Dir
        && perm & (S_ISGID | S_IXGRP) == (S_ISGID | S_IXGRP)
        && c.uid != 0
        && !in_group(c, gid)
    {
        perm &= !S_ISGID;
    }
    (c.uid, gid, perm)
}

/// The bits a truncate or chown leaves: set-user-ID goes, and
/// set-group-ID with group execute.
fn killed(perm: u32) -> u32 {
    let mut p = perm & !S_ISUID;
    if p & (S_ISGID | S_IXGRP) == (S_ISGID | S_IXGRP) {
        p &= !S_ISGID;
    }
    p
}

/// Apply `set` by `c` to `a` under POSIX's rules (all or nothing), as the
/// MDT's `apply_setattr` does; `now` for times set to now and the ctime.
pub(super) fn apply(c: &Caller, a: &mut Attr, set: &SetAttr, now: Time) -> Result<(), Errno> {
    let root = c.uid == 0;
    let owns = root || c.uid == a.uid;
    let mut out = a.clone();
    if set.uid.is_some_and(|u| u != a.uid) && !root {
        return Err(Errno::EPERM);
    }
    if let Some(gid) = set.gid {
        let same_owner = set.uid.is_none_or(|u| u == a.uid);
        if gid != a.gid && !(root || (c.uid == a.uid && same_owner && in_group(c, gid))) {
            return Err(Errno::EPERM);
        }
    }
    if let Some(p) = set.perm {
        if !owns {
            return Err(Errno::EPERM);
        }
        let mut p = p & 0o7777;
        if !root && !in_group(c, set.gid.unwrap_or(a.gid)) {
            p &= !S_ISGID;
        }
        out.perm = p;
    }
    let may_kill = set.perm.is_none();
    if set.uid.is_some_and(|u| u != a.uid) || set.gid.is_some_and(|g| g != a.gid) {
        if a.kind != FileKind::Dir && may_kill {
            out.perm = killed(out.perm);
        }
        out.uid = set.uid.unwrap_or(a.uid);
        out.gid = set.gid.unwrap_or(a.gid);
    }
    if let Some(size) = set.size {
        match a.kind {
            FileKind::File => {}
            FileKind::Dir => return Err(Errno::EISDIR),
            _ => return Err(Errno::EINVAL),
        }
        if !set.by_write_handle && !may(c, a, 0o2) {
            return Err(Errno::EACCES);
        }
        out.size = size;
        out.mtime = now;
        if !root && may_kill {
            out.perm = killed(out.perm);
        }
    }
    if set.kill_suid {
        if !set.by_write_handle && !may(c, a, 0o2) {
            return Err(Errno::EACCES);
        }
        if !root && may_kill {
            out.perm = killed(out.perm);
        }
    }
    for (t, field) in [(set.atime, &mut out.atime), (set.mtime, &mut out.mtime)] {
        match t {
            None => {}
            Some(SetTime::Now) => {
                if !owns && !may(c, a, 0o2) {
                    return Err(Errno::EACCES);
                }
                *field = now;
            }
            Some(SetTime::At(t)) => {
                if !owns {
                    return Err(Errno::EPERM);
                }
                *field = t;
            }
        }
    }
    out.ctime = now;
    *a = out;
    Ok(())
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use loom_proto::Fid;

    /// A caller with these ids (the layer's other tests use it too).
    pub(in crate::writeback) fn caller(uid: u32, gid: u32, groups: Vec<u32>) -> Caller {
        Caller {
            uid,
            gid,
            groups,
            ..Caller::default()
        }
    }

    fn file(uid: u32, gid: u32, perm: u32) -> Attr {
        Attr {
            fid: Fid::new(1, 1),
            kind: FileKind::File,
            perm,
            nlink: 1,
            uid,
            gid,
            size: 0,
            atime: Time::default(),
            mtime: Time::default(),
            ctime: Time::default(),
            rdev: 0,
            projid: 0,
        }
    }

    #[test]
    fn only_root_gives_a_file_away_and_owners_pick_their_groups() {
        let mut a = file(1000, 1000, 0o644);
        let user = caller(1000, 1000, vec![50]);
        let set = |f: fn(&mut SetAttr)| {
            let mut s = SetAttr::default();
            f(&mut s);
            s
        };
        assert_eq!(
            apply(&user, &mut a, &set(|s| s.uid = Some(0)), Time::now()),
            Err(Errno::EPERM)
        );
        assert_eq!(
            apply(&user, &mut a, &set(|s| s.gid = Some(60)), Time::now()),
            Err(Errno::EPERM)
        );
        apply(&user, &mut a, &set(|s| s.gid = Some(50)), Time::now()).expect("own group");
        assert_eq!(a.gid, 50);
        let other = caller(2000, 2000, vec![]);
        assert_eq!(
            apply(&other, &mut a, &set(|s| s.perm = Some(0o777)), Time::now()),
            Err(Errno::EPERM)
        );
        assert_eq!(
            apply(
                &other,
                &mut a,
                &set(|s| s.mtime = Some(SetTime::Now)),
                Time::now()
            ),
            Err(Errno::EACCES)
        );
        let mut b = file(1000, 1000, 0o6755);
        apply(
            &caller(0, 0, vec![]),
            &mut b,
            &set(|s| s.uid = Some(7)),
            Time::now(),
        )
        .expect("root chowns");
        assert_eq!((b.uid, b.perm), (7, 0o755), "a chown clears set-ID bits");
    }

    #[test]
    fn new_inodes_take_the_umask_and_a_set_group_id_parent() {
        let mut dir = file(0, 77, 0o2775);
        dir.kind = FileKind::Dir;
        let c = Caller {
            umask: Some(0o022),
            ..caller(1000, 1000, vec![])
        };
        assert_eq!(
            new_owner(&c, &dir, FileKind::Dir, 0o777),
            (1000, 77, 0o2755)
        );
        assert_eq!(
            new_owner(&c, &dir, FileKind::File, 0o2777),
            (1000, 77, 0o0755)
        );
        assert_eq!(
            new_owner(&c, &dir, FileKind::Symlink, 0o600),
            (1000, 77, 0o777)
        );
    }
}
