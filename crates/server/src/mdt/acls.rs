//! POSIX ACLs as the two extended attributes that carry them
//! (`system.posix_acl_access`, `system.posix_acl_default`).
//!
//! The MDT keeps them parsed in the inode record (`InodeRec::acl` and
//! `default_acl`), not among the other xattrs, because every permission
//! check needs the access ACL (see `perm.rs`) and every create the
//! parent's default. Setting, reading and removing them through the xattr
//! calls follows Linux (`posix_acl_update_mode`, `posix_acl_equiv_mode`):
//!
//! - Only the owner or root sets them (EPERM); a malformed value is
//!   EINVAL; a default ACL on anything but a directory is EACCES.
//! - An access ACL sets the mode's permission bits (owner, mask or
//!   owning group, other); one that the mode says all of is not kept.
//!   A caller outside the owning group loses set-group-ID, as by chmod.
//! - A value without entries, like a removal, drops the ACL and leaves
//!   the mode as it is.

use super::perm::{self, Cred};
use super::records::InodeRec;
use super::request::Rq;
use super::MdtService;
use crate::error::{Handled, ServerError};
use loom_proto::acl::{Acl, ACCESS_XATTR};
use loom_proto::msg::{FileKind, Reply, Time};
use loom_proto::{Errno, Fid, Name};

const S_ISGID: u32 = 0o2000;

impl MdtService {
    /// Set (or, with `None`, remove) ACL `name` of `fid`: `value` is the
    /// xattr form, or `None` for a removal (ENODATA if it has none).
    pub(super) async fn set_acl(
        &self,
        ctx: &Rq<'_>,
        fid: Fid,
        name: &Name,
        value: Option<&[u8]>,
    ) -> Handled {
        let acl = match value {
            Some(v) => Acl::from_xattr(v)
                .map_err(|m| ServerError::refused(Errno::EINVAL, format!("{name}: {m}")))?,
            None => None,
        };
        let (mut t, g) = self.begin().await.into_parts();
        let r = t.inode(fid)?;
        let c = Cred::of(ctx);
        perm::may_xattr(&c, &*r, name, true)?;
        if value.is_none() && held(r, name).is_none() {
            return Err(ServerError::refused(
                Errno::ENODATA,
                format!("no xattr {name}"),
            ));
        }
        put_acl(&c, r, name, acl)?;
        r.attr.ctime = Time::now();
        let ticket = self.apply(ctx, t, &Reply::Ok)?;
        drop(g);
        self.settle(ctx, ticket).await?;
        Ok(Reply::Ok)
    }
}

/// The ACL named `name` that `r` holds, if any.
pub(super) fn held<'a>(r: &'a InodeRec, name: &Name) -> Option<&'a Acl> {
    if name.as_bytes() == ACCESS_XATTR {
        r.acl.as_ref()
    } else {
        r.default_acl.as_ref()
    }
}

/// ACL `name` of `r` read as an xattr: its value, or ENODATA.
pub(super) fn get_acl(r: &InodeRec, name: &Name) -> Handled {
    held(r, name)
        .map(|a| Reply::Xattr(a.to_xattr()))
        .ok_or_else(|| ServerError::refused(Errno::ENODATA, format!("no xattr {name}")))
}

/// The ACL names `r` has, for a listing.
pub(super) fn acl_names(r: &InodeRec) -> impl Iterator<Item = Name> {
    let access = r
        .acl
        .is_some()
        .then(|| Name::from(loom_proto::acl::ACCESS_XATTR));
    let default = r
        .default_acl
        .is_some()
        .then(|| Name::from(loom_proto::acl::DEFAULT_XATTR));
    access.into_iter().chain(default)
}

/// Give `r` ACL `name` (`None`: drop it), with the mode change an access
/// ACL brings (see the module documentation).
fn put_acl(
    c: &Cred<'_>,
    r: &mut InodeRec,
    name: &Name,
    acl: Option<Acl>,
) -> Result<(), ServerError> {
    if name.as_bytes() != ACCESS_XATTR {
        if r.attr.kind != FileKind::Dir && acl.is_some() {
            return Err(ServerError::refused(
                Errno::EACCES,
                format!("a default ACL on {}, which is not a directory", r.attr.fid),
            ));
        }
        r.default_acl = acl;
        return Ok(());
    }
    let Some(acl) = acl else {
        r.acl = None;
        return Ok(());
    };
    let mut perm = (r.attr.perm & !0o777) | acl.mode_bits();
    if !c.is_root() && !c.in_group(r.attr.gid) {
        perm &= !S_ISGID;
    }
    r.attr.perm = perm;
    r.acl = (!acl.is_mode_only()).then_some(acl);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use loom_proto::acl::{Entry, Tag, DEFAULT_XATTR};
    use loom_proto::msg::Time;

    fn rec(kind: FileKind, perm: u32) -> InodeRec {
        let t = Time::default();
        let attr = super::super::attrs::new_attr(Fid::new(1, 2), kind, perm, 10, 20, t);
        InodeRec::new(attr, Fid::ROOT)
    }

    fn named(user: u32, perm: u32) -> Acl {
        let e = |tag, id, perm| Entry { tag, id, perm };
        Acl::new(vec![
            e(Tag::UserObj, 0, 7),
            e(Tag::User, user, perm),
            e(Tag::GroupObj, 0, 5),
            e(Tag::Mask, 0, 7),
            e(Tag::Other, 0, 0),
        ])
        .expect("valid")
    }

    #[test]
    fn an_access_acl_sets_the_mode_and_a_plain_one_is_not_kept() {
        let owner = Cred {
            uid: 10,
            gid: 30,
            groups: &[],
        };
        let access = Name::from(ACCESS_XATTR);
        let mut r = rec(FileKind::File, 0o2644);
        put_acl(&owner, &mut r, &access, Some(named(1000, 6))).expect("valid");
        assert_eq!(
            r.attr.perm, 0o0770,
            "mask shows as group; SGID dropped outside the group"
        );
        assert!(r.acl.is_some());
        put_acl(&owner, &mut r, &access, Some(Acl::from_mode(0o640))).expect("valid");
        assert_eq!((r.attr.perm, r.acl.is_none()), (0o640, true));
    }

    #[test]
    fn default_acls_are_for_directories() {
        let root = Cred {
            uid: 0,
            gid: 0,
            groups: &[],
        };
        let default = Name::from(DEFAULT_XATTR);
        let mut f = rec(FileKind::File, 0o644);
        let e = put_acl(&root, &mut f, &default, Some(named(5, 7))).expect_err("refused");
        assert_eq!(e.errno(), Errno::EACCES);
        assert!(
            put_acl(&root, &mut f, &default, None).is_ok(),
            "removing none is fine"
        );
        let mut d = rec(FileKind::Dir, 0o755);
        put_acl(&root, &mut d, &default, Some(named(5, 7))).expect("valid");
        assert_eq!(d.attr.perm, 0o755, "a default ACL leaves the mode");
        assert_eq!(acl_names(&d).collect::<Vec<_>>(), vec![default]);
    }
}
