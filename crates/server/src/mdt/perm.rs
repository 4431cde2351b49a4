//! POSIX permission rules, enforced by the MDT from the credentials each
//! request carries ([`ReqCtx`]: uid, gid, supplementary groups).
//!
//! Whose word the identity is: the client node's, as with NFS AUTH_SYS. A
//! client that holds the cluster key is trusted to say who its caller is
//! (the FUSE mount takes it from the kernel, the library from the
//! process); the key keeps out machines that are not part of the cluster,
//! not users of a client. The FUSE mount's kernel checks the same rules
//! first (`default_permissions`), on the attributes it caches; the MDT's
//! check is the one that holds for every path, the library included.
//!
//! uid 0 is root: it passes every check but execution of a file with no
//! execute bit at all, as Linux's CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_CHOWN
//! and CAP_FSETID together. Requests from other MDTs carry uid 0.
//!
//! An inode with a POSIX ACL is checked against it ([`Acl::grants`]); the
//! mode bits then show the ACL's owner, mask and other entries, kept in
//! step by chmod and by setting the ACL (see `attrs.rs`).
//!
//! Errors are POSIX's: EACCES where a mode bit refuses, EPERM where only
//! the owner (or root) may act.

use super::records::InodeRec;
use crate::error::ServerError;
use loom_proto::acl::Acl;
use loom_proto::msg::{access, Attr, FileKind, ReqCtx, SetAttr, SetTime};
use loom_proto::{Errno, Name};

const S_ISUID: u32 = 0o4000;
const S_ISGID: u32 = 0o2000;
const S_ISVTX: u32 = 0o1000;
const S_IXGRP: u32 = 0o010;

/// The caller of one request.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cred<'a> {
    /// User id.
    pub uid: u32,
    /// Primary group.
    pub gid: u32,
    /// Supplementary groups.
    pub groups: &'a [u32],
}

impl<'a> Cred<'a> {
    /// The caller named by a request's context.
    pub fn of(ctx: &'a ReqCtx) -> Cred<'a> {
        Cred {
            uid: ctx.uid,
            gid: ctx.gid,
            groups: &ctx.groups,
        }
    }

    /// Root: every check passes (but see [`may`] for execution).
    pub fn is_root(&self) -> bool {
        self.uid == 0
    }

    /// Whether the caller is in group `gid`, primary or supplementary.
    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.contains(&gid)
    }

    /// Owner of `a`, or root (Linux's inode_owner_or_capable).
    pub fn owns(&self, a: &Attr) -> bool {
        self.is_root() || self.uid == a.uid
    }
}

/// An inode as a permission check sees it: its attributes and its access
/// ACL.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Inode<'a> {
    /// Mode, owner, group and type.
    pub attr: &'a Attr,
    /// The access ACL, if it has one.
    pub acl: Option<&'a Acl>,
}

impl<'a> From<&'a InodeRec> for Inode<'a> {
    fn from(r: &'a InodeRec) -> Inode<'a> {
        Inode {
            attr: &r.attr,
            acl: r.acl.as_ref(),
        }
    }
}

/// In tests, attributes alone are an inode without an ACL. (Elsewhere
/// an inode's ACL must be at hand: a check without it would be wrong.)
#[cfg(test)]
impl<'a> From<&'a Attr> for Inode<'a> {
    fn from(attr: &'a Attr) -> Inode<'a> {
        Inode { attr, acl: None }
    }
}

fn denied(what: impl std::fmt::Display) -> ServerError {
    ServerError::refused(Errno::EACCES, format!("permission denied: {what}"))
}

fn not_permitted(what: impl std::fmt::Display) -> ServerError {
    ServerError::refused(Errno::EPERM, format!("operation not permitted: {what}"))
}

/// Check `mask` (`access::READ | WRITE | EXEC`) against `i`'s ACL, or
/// without one its mode bits: the owner's class if the caller owns it,
/// else the group's if the caller is in its group, else the others'.
/// Root passes, except that executing a non-directory needs an execute
/// bit in some class.
pub(crate) fn may<'a>(c: &Cred<'_>, i: impl Into<Inode<'a>>, mask: u32) -> Result<(), ServerError> {
    let Inode { attr: a, acl } = i.into();
    let mask = mask & 7;
    if mask == 0 {
        return Ok(());
    }
    if c.is_root() {
        if mask & access::EXEC != 0 && a.kind != FileKind::Dir && a.perm & 0o111 == 0 {
            return Err(denied(format!("{} has no execute bit", a.fid)));
        }
        return Ok(());
    }
    if let Some(acl) = acl {
        if acl.grants((c.uid, &|g| c.in_group(g)), (a.uid, a.gid), mask) {
            return Ok(());
        }
        return Err(denied(format!(
            "uid {} wants {} on {} (its ACL refuses; owner {}:{})",
            c.uid,
            mask_name(mask),
            a.fid,
            a.uid,
            a.gid
        )));
    }
    let bits = if c.uid == a.uid {
        a.perm >> 6
    } else if c.in_group(a.gid) {
        a.perm >> 3
    } else {
        a.perm
    } & 7;
    if bits & mask == mask {
        Ok(())
    } else {
        Err(denied(format!(
            "uid {} wants {} on {} (mode {:04o}, owner {}:{})",
            c.uid,
            mask_name(mask),
            a.fid,
            a.perm,
            a.uid,
            a.gid
        )))
    }
}

fn mask_name(mask: u32) -> String {
    let mut s = String::new();
    for (bit, ch) in [
        (access::READ, 'r'),
        (access::WRITE, 'w'),
        (access::EXEC, 'x'),
    ] {
        if mask & bit != 0 {
            s.push(ch);
        }
    }
    s
}

/// Looking up a name needs search permission on the directory.
pub(crate) fn may_search<'a>(c: &Cred<'_>, dir: impl Into<Inode<'a>>) -> Result<(), ServerError> {
    may(c, dir, access::EXEC)
}

/// Adding or removing a name needs write and search permission on the
/// directory.
pub(crate) fn may_change_dir<'a>(
    c: &Cred<'_>,
    dir: impl Into<Inode<'a>>,
) -> Result<(), ServerError> {
    may(c, dir, access::WRITE | access::EXEC)
}

/// Removing (or renaming away, or replacing) entry `name` of `dir` whose
/// inode is owned by `victim_uid`: write and search on the directory, and
/// in a sticky directory the caller must own the entry's inode or the
/// directory (or be root). `victim_uid` is `None` when the inode is on
/// another MDT and was not asked for: then only the owner of the
/// directory or root pass a sticky directory.
pub(crate) fn may_delete<'a>(
    c: &Cred<'_>,
    dir: impl Into<Inode<'a>>,
    name: &Name,
    victim_uid: Option<u32>,
) -> Result<(), ServerError> {
    let i = dir.into();
    let dir = i.attr;
    may_change_dir(c, i)?;
    if dir.perm & S_ISVTX == 0 || c.is_root() || c.uid == dir.uid || victim_uid == Some(c.uid) {
        return Ok(());
    }
    Err(not_permitted(format!(
        "{name} in sticky directory {} belongs to another user",
        dir.fid
    )))
}

/// Hard links to a file the caller does not own need what Linux's
/// `protected_hardlinks` asks: a regular file, not set-user-ID nor
/// executable set-group-ID, that the caller may read and write. This keeps
/// a user from pinning another user's setuid binary or private file.
pub(crate) fn may_link<'a>(c: &Cred<'_>, i: impl Into<Inode<'a>>) -> Result<(), ServerError> {
    let i = i.into();
    let a = i.attr;
    if c.owns(a) {
        return Ok(());
    }
    let risky = a.perm & S_ISUID != 0 || a.perm & (S_ISGID | S_IXGRP) == (S_ISGID | S_IXGRP);
    if a.kind != FileKind::File || risky || may(c, i, access::READ | access::WRITE).is_err() {
        return Err(not_permitted(format!(
            "hard link to {} owned by uid {}",
            a.fid, a.uid
        )));
    }
    Ok(())
}

/// Bits a new inode starts with: set-group-ID is dropped from a new file
/// whose group the caller is not in (Linux's mode_strip_sgid), unless the
/// caller is root.
pub(crate) fn new_perm(c: &Cred<'_>, kind: FileKind, perm: u32, gid: u32) -> u32 {
    if kind != FileKind::Dir
        && perm & (S_ISGID | S_IXGRP) == (S_ISGID | S_IXGRP)
        && !c.is_root()
        && !c.in_group(gid)
    {
        perm & !S_ISGID
    } else {
        perm
    }
}

/// The access and default ACLs of a new inode in a directory whose
/// default ACL is `inherited`, and its mode: with a default ACL, the mode
/// asked for is cut by it, not by the umask (POSIX.1e), and a new
/// directory keeps it as its own default; without one, the caller's
/// umask cuts the mode when the client left that to the MDT. Symbolic
/// links have neither.
pub(crate) fn new_acls(
    inherited: Option<&Acl>,
    kind: FileKind,
    perm: &mut u32,
    umask: Option<u32>,
) -> (Option<Acl>, Option<Acl>) {
    if kind == FileKind::Symlink {
        return (None, None);
    }
    match inherited {
        Some(d) => {
            let acl = d.inherit(perm);
            let default = (kind == FileKind::Dir).then(|| d.clone());
            (acl, default)
        }
        None => {
            *perm &= !umask.unwrap_or(0) & 0o7777;
            (None, None)
        }
    }
}

/// The bits a write, truncate or chown leaves: set-user-ID goes, and
/// set-group-ID with group execute (without it, the bit means mandatory
/// locking and stays).
fn killed(perm: u32) -> u32 {
    let mut p = perm & !S_ISUID;
    if p & (S_ISGID | S_IXGRP) == (S_ISGID | S_IXGRP) {
        p &= !S_ISGID;
    }
    p
}

/// Check a setattr against POSIX's rules and apply it to `a` (all or
/// nothing: `a` is only changed when every check passes). `now` is the
/// MDT's clock for times set to now and the ctime.
///
/// - chmod: the owner or root; a non-root caller not in the file's group
///   loses set-group-ID.
/// - chown: only root changes the owner (to the same owner is allowed);
///   the owner may change the group to one of its groups.
/// - A chown of a non-directory clears set-user-ID and executable
///   set-group-ID (also by root, as Linux does), and so do a truncate and
///   a write (`kill_suid`) by a non-root caller.
/// - truncate: write permission, unless through a handle opened for
///   writing.
/// - times to now: the owner, or a caller with write permission; to a
///   given time: only the owner.
pub(crate) fn apply_setattr(
    c: &Cred<'_>,
    a: &mut Attr,
    acl: Option<&Acl>,
    set: &SetAttr,
    now: loom_proto::msg::Time,
) -> Result<(), ServerError> {
    let mut out = a.clone();
    if let Some(uid) = set.uid {
        if uid != a.uid && !c.is_root() {
            return Err(not_permitted(format!(
                "chown of {} to uid {uid}: only root may give a file away",
                a.fid
            )));
        }
    }
    if let Some(gid) = set.gid {
        let same_owner = set.uid.is_none_or(|u| u == a.uid);
        let allowed = c.is_root() || (c.uid == a.uid && same_owner && c.in_group(gid));
        if gid != a.gid && !allowed {
            return Err(not_permitted(format!(
                "chgrp of {} to gid {gid}: the owner may only pick one of its groups",
                a.fid
            )));
        }
    }
    if let Some(p) = set.perm {
        if !c.owns(a) {
            return Err(not_permitted(format!(
                "chmod of {} owned by uid {}",
                a.fid, a.uid
            )));
        }
        let gid = set.gid.unwrap_or(a.gid);
        let mut p = p & 0o7777;
        if !c.is_root() && !c.in_group(gid) {
            p &= !S_ISGID;
        }
        out.perm = p;
    }
    // A mode given in the same request wins over what a change clears
    // (Linux never sends both: a chmod and a chown are separate calls).
    let may_kill = set.perm.is_none();
    if set.uid.is_some_and(|u| u != a.uid) || set.gid.is_some_and(|g| g != a.gid) {
        if a.kind != FileKind::Dir && may_kill {
            out.perm = killed(out.perm);
        }
        if let Some(uid) = set.uid {
            out.uid = uid;
        }
        if let Some(gid) = set.gid {
            out.gid = gid;
        }
    }
    if let Some(size) = set.size {
        match a.kind {
            FileKind::File => {}
            FileKind::Dir => {
                return Err(ServerError::refused(
                    Errno::EISDIR,
                    "truncate of a directory",
                ))
            }
            _ => {
                return Err(ServerError::refused(
                    Errno::EINVAL,
                    "truncate of a special file",
                ))
            }
        }
        if !set.by_write_handle {
            may(c, Inode { attr: a, acl }, access::WRITE)?;
        }
        out.size = size;
        out.mtime = now;
        if !c.is_root() && may_kill {
            out.perm = killed(out.perm);
        }
    }
    if set.kill_suid {
        if !set.by_write_handle {
            may(c, Inode { attr: a, acl }, access::WRITE)?;
        }
        if !c.is_root() && may_kill {
            out.perm = killed(out.perm);
        }
    }
    for (t, field) in [(set.atime, &mut out.atime), (set.mtime, &mut out.mtime)] {
        match t {
            None => {}
            Some(SetTime::Now) => {
                if !c.owns(a) {
                    may(c, Inode { attr: a, acl }, access::WRITE).map_err(|_| {
                        denied(format!(
                            "setting times of {} to now: not the owner and no write permission",
                            a.fid
                        ))
                    })?;
                }
                *field = now;
            }
            Some(SetTime::At(t)) => {
                if !c.owns(a) {
                    return Err(not_permitted(format!(
                        "setting times of {}: only the owner may set a given time",
                        a.fid
                    )));
                }
                *field = t;
            }
        }
    }
    out.ctime = now;
    *a = out;
    Ok(())
}

/// Extended attributes by namespace, as Linux's xattr_permission: `user.`
/// follows the mode bits (and only on regular files and directories; in a
/// sticky directory only its owner writes them); `trusted.` is root's;
/// `security.` and `system.` are written by root (and `system.` by the
/// owner), read by anyone.
pub(crate) fn may_xattr<'a>(
    c: &Cred<'_>,
    i: impl Into<Inode<'a>>,
    name: &Name,
    write: bool,
) -> Result<(), ServerError> {
    let i = i.into();
    let a = i.attr;
    let n = name.as_bytes();
    if n.starts_with(b"trusted.") {
        return if c.is_root() {
            Ok(())
        } else {
            Err(not_permitted(format!("{name} is for root")))
        };
    }
    if n.starts_with(b"user.") {
        if !matches!(a.kind, FileKind::File | FileKind::Dir) {
            return Err(not_permitted(format!("{name} on a special file")));
        }
        if write && a.kind == FileKind::Dir && a.perm & S_ISVTX != 0 && !c.owns(a) {
            return Err(not_permitted(format!(
                "{name} on sticky directory {}",
                a.fid
            )));
        }
        return may(c, i, if write { access::WRITE } else { access::READ });
    }
    if !write {
        return Ok(());
    }
    if n.starts_with(b"system.") && c.owns(a) {
        return Ok(());
    }
    if c.is_root() {
        Ok(())
    } else {
        Err(not_permitted(format!("setting {name}")))
    }
}

/// Whether a listing shows xattr `name` to the caller: `trusted.` names
/// only to root.
pub(crate) fn shows_xattr(c: &Cred<'_>, name: &[u8]) -> bool {
    c.is_root() || !name.starts_with(b"trusted.")
}

#[cfg(test)]
mod tests {
    use super::*;
    use loom_proto::msg::Time;
    use loom_proto::Fid;

    fn attr(kind: FileKind, perm: u32, uid: u32, gid: u32) -> Attr {
        super::super::attrs::new_attr(Fid::new(1, 2), kind, perm, uid, gid, Time::default())
    }

    fn cred(uid: u32, gid: u32, groups: &[u32]) -> Cred<'_> {
        Cred { uid, gid, groups }
    }

    #[test]
    fn mode_bits_are_read_by_class_owner_first() {
        let f = attr(FileKind::File, 0o604, 10, 20);
        // The owner's class decides for the owner, even when "other" allows more.
        assert!(may(&cred(10, 20, &[]), &f, access::READ).is_ok());
        assert_eq!(
            may(
                &cred(10, 20, &[]),
                &attr(FileKind::File, 0o044, 10, 20),
                access::READ
            )
            .map_err(|e| e.errno()),
            Err(Errno::EACCES)
        );
        // A group member gets the group's (none) bits, not the others'.
        assert_eq!(
            may(&cred(11, 20, &[]), &f, access::READ).map_err(|e| e.errno()),
            Err(Errno::EACCES)
        );
        assert_eq!(
            may(&cred(11, 5, &[20]), &f, access::READ).map_err(|e| e.errno()),
            Err(Errno::EACCES)
        );
        assert!(may(&cred(11, 21, &[]), &f, access::READ).is_ok());
        assert!(may(&cred(11, 21, &[]), &f, access::WRITE).is_err());
    }

    #[test]
    fn root_passes_except_executing_a_file_without_x() {
        let f = attr(FileKind::File, 0o000, 10, 20);
        assert!(may(&cred(0, 0, &[]), &f, access::READ | access::WRITE).is_ok());
        assert!(may(&cred(0, 0, &[]), &f, access::EXEC).is_err());
        assert!(may(
            &cred(0, 0, &[]),
            &attr(FileKind::File, 0o001, 1, 1),
            access::EXEC
        )
        .is_ok());
        assert!(may(
            &cred(0, 0, &[]),
            &attr(FileKind::Dir, 0o000, 1, 1),
            access::EXEC
        )
        .is_ok());
    }

    #[test]
    fn sticky_directories_let_only_owners_remove() {
        let d = attr(FileKind::Dir, 0o1777, 0, 0);
        let n = Name::from("x");
        assert!(may_delete(&cred(10, 10, &[]), &d, &n, Some(10)).is_ok());
        assert_eq!(
            may_delete(&cred(10, 10, &[]), &d, &n, Some(11)).map_err(|e| e.errno()),
            Err(Errno::EPERM)
        );
        assert!(may_delete(&cred(0, 0, &[]), &d, &n, Some(11)).is_ok());
        let own = attr(FileKind::Dir, 0o1777, 12, 12);
        assert!(may_delete(&cred(12, 12, &[]), &own, &n, Some(11)).is_ok());
        let plain = attr(FileKind::Dir, 0o777, 0, 0);
        assert!(may_delete(&cred(10, 10, &[]), &plain, &n, Some(11)).is_ok());
        let ro = attr(FileKind::Dir, 0o755, 0, 0);
        assert_eq!(
            may_delete(&cred(10, 10, &[]), &ro, &n, Some(10)).map_err(|e| e.errno()),
            Err(Errno::EACCES)
        );
    }

    fn set(f: impl FnOnce(&mut SetAttr)) -> SetAttr {
        let mut s = SetAttr::default();
        f(&mut s);
        s
    }

    fn errno(r: Result<(), ServerError>) -> Result<(), Errno> {
        r.map_err(|e| e.errno())
    }

    #[test]
    fn chown_rules() {
        let now = Time { sec: 5, nsec: 0 };
        let mut f = attr(FileKind::File, 0o6755, 10, 20);
        let me = cred(10, 20, &[30]);
        assert_eq!(
            errno(apply_setattr(
                &me,
                &mut f,
                None,
                &set(|s| s.uid = Some(11)),
                now
            )),
            Err(Errno::EPERM)
        );
        assert_eq!(
            errno(apply_setattr(
                &me,
                &mut f,
                None,
                &set(|s| s.gid = Some(40)),
                now
            )),
            Err(Errno::EPERM)
        );
        assert_eq!(f.perm, 0o6755, "a refused change changes nothing");
        assert!(apply_setattr(&me, &mut f, None, &set(|s| s.gid = Some(30)), now).is_ok());
        assert_eq!((f.gid, f.perm, f.ctime), (30, 0o0755, now));
        let mut g = attr(FileKind::File, 0o644, 10, 20);
        assert_eq!(
            errno(apply_setattr(
                &cred(11, 20, &[]),
                &mut g,
                None,
                &set(|s| s.gid = Some(20)),
                now
            )),
            Ok(()),
            "to the same group is no change"
        );
        assert!(apply_setattr(
            &cred(0, 0, &[]),
            &mut g,
            None,
            &set(|s| s.uid = Some(99)),
            now
        )
        .is_ok());
        assert_eq!(g.uid, 99);
    }

    #[test]
    fn chmod_is_the_owners_and_drops_sgid_outside_the_group() {
        let now = Time::default();
        let mut f = attr(FileKind::File, 0o644, 10, 20);
        assert_eq!(
            errno(apply_setattr(
                &cred(11, 20, &[]),
                &mut f,
                None,
                &set(|s| s.perm = Some(0o777)),
                now
            )),
            Err(Errno::EPERM)
        );
        assert!(apply_setattr(
            &cred(10, 5, &[]),
            &mut f,
            None,
            &set(|s| s.perm = Some(0o2755)),
            now
        )
        .is_ok());
        assert_eq!(f.perm, 0o0755);
        assert!(apply_setattr(
            &cred(10, 5, &[20]),
            &mut f,
            None,
            &set(|s| s.perm = Some(0o2755)),
            now
        )
        .is_ok());
        assert_eq!(f.perm, 0o2755);
    }

    #[test]
    fn truncate_and_writes_by_users_clear_suid_and_sgid() {
        let now = Time::default();
        let mut f = attr(FileKind::File, 0o6777, 10, 20);
        assert!(apply_setattr(
            &cred(11, 11, &[]),
            &mut f,
            None,
            &set(|s| s.size = Some(0)),
            now
        )
        .is_ok());
        assert_eq!(f.perm, 0o0777);
        let mut f = attr(FileKind::File, 0o6777, 10, 20);
        assert!(apply_setattr(
            &cred(0, 0, &[]),
            &mut f,
            None,
            &set(|s| s.size = Some(0)),
            now
        )
        .is_ok());
        assert_eq!(f.perm, 0o6777, "root keeps the bits (CAP_FSETID)");
        let mut f = attr(FileKind::File, 0o6777, 10, 20);
        assert!(apply_setattr(
            &cred(11, 11, &[]),
            &mut f,
            None,
            &set(|s| s.kill_suid = true),
            now
        )
        .is_ok());
        assert_eq!(f.perm, 0o0777);
        // Without group execute, set-group-ID is mandatory locking: kept.
        let mut f = attr(FileKind::File, 0o6606, 10, 20);
        assert!(apply_setattr(
            &cred(11, 11, &[]),
            &mut f,
            None,
            &set(|s| s.kill_suid = true),
            now
        )
        .is_ok());
        assert_eq!(f.perm, 0o2606);
        let mut ro = attr(FileKind::File, 0o644, 10, 20);
        assert_eq!(
            errno(apply_setattr(
                &cred(11, 11, &[]),
                &mut ro,
                None,
                &set(|s| s.size = Some(0)),
                now
            )),
            Err(Errno::EACCES)
        );
        let by_handle = set(|s| {
            s.size = Some(0);
            s.by_write_handle = true
        });
        assert!(apply_setattr(&cred(11, 11, &[]), &mut ro, None, &by_handle, now).is_ok());
    }

    #[test]
    fn times_to_now_need_write_and_given_times_need_ownership() {
        let now = Time { sec: 9, nsec: 0 };
        let given = Time { sec: 1, nsec: 0 };
        let mut f = attr(FileKind::File, 0o666, 10, 20);
        let writer = cred(11, 11, &[]);
        assert!(apply_setattr(
            &writer,
            &mut f,
            None,
            &set(|s| s.mtime = Some(SetTime::Now)),
            now
        )
        .is_ok());
        assert_eq!(f.mtime, now);
        assert_eq!(
            errno(apply_setattr(
                &writer,
                &mut f,
                None,
                &set(|s| s.mtime = Some(SetTime::At(given))),
                now
            )),
            Err(Errno::EPERM)
        );
        let mut ro = attr(FileKind::File, 0o644, 10, 20);
        assert_eq!(
            errno(apply_setattr(
                &writer,
                &mut ro,
                None,
                &set(|s| s.atime = Some(SetTime::Now)),
                now
            )),
            Err(Errno::EACCES)
        );
        assert!(apply_setattr(
            &cred(10, 1, &[]),
            &mut ro,
            None,
            &set(|s| s.atime = Some(SetTime::At(given))),
            now
        )
        .is_ok());
        assert_eq!(ro.atime, given);
    }

    #[test]
    fn new_files_lose_sgid_outside_the_group_but_directories_keep_it() {
        let c = cred(10, 10, &[]);
        assert_eq!(new_perm(&c, FileKind::File, 0o2755, 20), 0o0755);
        assert_eq!(new_perm(&c, FileKind::File, 0o2755, 10), 0o2755);
        assert_eq!(new_perm(&c, FileKind::Dir, 0o2755, 20), 0o2755);
    }

    #[test]
    fn hard_links_to_others_files_need_read_and_write() {
        let c = cred(10, 10, &[]);
        assert!(may_link(&c, &attr(FileKind::File, 0o666, 11, 11)).is_ok());
        assert!(may_link(&c, &attr(FileKind::File, 0o644, 11, 11)).is_err());
        assert!(may_link(&c, &attr(FileKind::File, 0o4777, 11, 11)).is_err());
        assert!(may_link(&c, &attr(FileKind::File, 0o600, 10, 11)).is_ok());
    }

    #[test]
    fn xattr_namespaces() {
        let c = cred(10, 10, &[]);
        let f = attr(FileKind::File, 0o644, 10, 10);
        let other = attr(FileKind::File, 0o644, 11, 11);
        assert!(may_xattr(&c, &f, &Name::from("user.a"), true).is_ok());
        assert!(may_xattr(&c, &other, &Name::from("user.a"), false).is_ok());
        assert!(may_xattr(&c, &other, &Name::from("user.a"), true).is_err());
        assert!(may_xattr(&c, &f, &Name::from("trusted.a"), false).is_err());
        assert!(may_xattr(&cred(0, 0, &[]), &f, &Name::from("trusted.a"), true).is_ok());
        assert!(may_xattr(&c, &f, &Name::from("security.capability"), true).is_err());
        assert!(may_xattr(&c, &other, &Name::from("security.capability"), false).is_ok());
        assert!(!shows_xattr(&c, b"trusted.x"));
    }
}
