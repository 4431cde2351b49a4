//! POSIX access control lists (POSIX.1e draft 17, as Linux has them).
//!
//! An ACL is read and written as an extended attribute:
//! [`ACCESS_XATTR`] (who may do what to an inode) and, on directories,
//! [`DEFAULT_XATTR`] (what new entries inherit). The value is Linux's
//! xattr form, so `getfacl`/`setfacl` through the mount and library
//! callers see the same bytes: a 4-byte little-endian version (2), then
//! 8 bytes per entry (tag u16, permissions u16, id u32, little-endian).
//!
//! The MDT keeps an inode's ACLs in its record, parsed ([`Acl`]), and
//! checks every access against them; this module holds the pure algebra
//! both sides share (Linux's `posix_acl_*` functions): validation, the
//! permission rule, and how an ACL and the mode bits follow each other
//! on chmod, on create and on setting an ACL.

use serde::{Deserialize, Serialize};

/// Name of the access ACL's extended attribute.
pub const ACCESS_XATTR: &[u8] = b"system.posix_acl_access";
/// Name of a directory's default ACL's extended attribute.
pub const DEFAULT_XATTR: &[u8] = b"system.posix_acl_default";

/// Whether `name` is one of the two ACL attributes.
pub fn is_acl_name(name: &[u8]) -> bool {
    name == ACCESS_XATTR || name == DEFAULT_XATTR
}

/// Version in the xattr header (Linux's POSIX_ACL_XATTR_VERSION).
const XATTR_VERSION: u32 = 2;
/// Id of entries that name no user or group (ACL_UNDEFINED_ID).
const NO_ID: u32 = u32::MAX;
/// Most entries one ACL may have: what fits a 64 KiB xattr value.
pub const MAX_ENTRIES: usize = (64 * 1024 - 4) / 8;

/// What an entry applies to; the order is the order entries must have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Tag {
    /// The owner (ACL_USER_OBJ).
    UserObj,
    /// A named user (ACL_USER).
    User,
    /// The owning group (ACL_GROUP_OBJ).
    GroupObj,
    /// A named group (ACL_GROUP).
    Group,
    /// The most any entry of the group class grants (ACL_MASK).
    Mask,
    /// Everyone else (ACL_OTHER).
    Other,
}

impl Tag {
    fn wire(self) -> u16 {
        match self {
            Tag::UserObj => 0x01,
            Tag::User => 0x02,
            Tag::GroupObj => 0x04,
            Tag::Group => 0x08,
            Tag::Mask => 0x10,
            Tag::Other => 0x20,
        }
    }

    fn from_wire(t: u16) -> Option<Tag> {
        Some(match t {
            0x01 => Tag::UserObj,
            0x02 => Tag::User,
            0x04 => Tag::GroupObj,
            0x08 => Tag::Group,
            0x10 => Tag::Mask,
            0x20 => Tag::Other,
            _ => return None,
        })
    }

    fn named(self) -> bool {
        matches!(self, Tag::User | Tag::Group)
    }
}

/// One entry: who, and which of read (4), write (2), execute (1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// What the entry applies to.
    pub tag: Tag,
    /// The user or group id of a named entry (0 for the others).
    pub id: u32,
    /// Permission bits, 0 to 7.
    pub perm: u32,
}

/// A valid ACL: entries in [`Tag`] order, named ones by ascending id,
/// with exactly one owner, owning-group and other entry, and a mask when
/// there is a named entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Acl {
    entries: Vec<Entry>,
}

impl Acl {
    /// Parse and check an xattr value. `Ok(None)`: the value has no
    /// entries, which removes the ACL (as Linux).
    pub fn from_xattr(b: &[u8]) -> Result<Option<Acl>, String> {
        let Some((head, body)) = b.split_first_chunk::<4>() else {
            return Err(format!("ACL of {} bytes has no header", b.len()));
        };
        let version = u32::from_le_bytes(*head);
        if version != XATTR_VERSION {
            return Err(format!(
                "ACL version {version}; only {XATTR_VERSION} is known"
            ));
        }
        if body.len() % 8 != 0 {
            return Err(format!(
                "ACL body of {} bytes is not whole entries",
                body.len()
            ));
        }
        if body.is_empty() {
            return Ok(None);
        }
        let mut entries = Vec::with_capacity(body.len() / 8);
        for e in body.chunks_exact(8) {
            let tag = u16::from_le_bytes([e[0], e[1]]);
            let perm = u16::from_le_bytes([e[2], e[3]]);
            let id = u32::from_le_bytes([e[4], e[5], e[6], e[7]]);
            let tag = Tag::from_wire(tag).ok_or_else(|| format!("unknown ACL tag {tag:#x}"))?;
            entries.push(Entry {
                tag,
                id: if tag.named() { id } else { 0 },
                perm: u32::from(perm),
            });
        }
        Acl::new(entries).map(Some)
    }

    /// Check `entries` as [`Acl`] says they must be.
    pub fn new(entries: Vec<Entry>) -> Result<Acl, String> {
        if entries.len() > MAX_ENTRIES {
            return Err(format!(
                "{} ACL entries; at most {MAX_ENTRIES}",
                entries.len()
            ));
        }
        let count = |t: Tag| entries.iter().filter(|e| e.tag == t).count();
        for t in [Tag::UserObj, Tag::GroupObj, Tag::Other] {
            if count(t) != 1 {
                return Err(format!("an ACL needs exactly one {t:?} entry"));
            }
        }
        let named = count(Tag::User) + count(Tag::Group);
        match count(Tag::Mask) {
            0 if named > 0 => return Err("an ACL with named entries needs a mask".into()),
            0 | 1 => {}
            _ => return Err("an ACL has at most one mask".into()),
        }
        for w in entries.windows(2) {
            let (a, b) = (w[0], w[1]);
            if (a.tag, a.id) >= (b.tag, b.id) {
                return Err(format!(
                    "ACL entries out of order or repeated: {:?} {} before {:?} {}",
                    a.tag, a.id, b.tag, b.id
                ));
            }
        }
        if let Some(e) = entries.iter().find(|e| e.perm > 7) {
            return Err(format!("ACL permissions {:#o} of {:?}", e.perm, e.tag));
        }
        Ok(Acl { entries })
    }

    /// The minimal ACL of mode bits `mode` (owner, owning group, other).
    pub fn from_mode(mode: u32) -> Acl {
        Acl {
            entries: vec![
                Entry {
                    tag: Tag::UserObj,
                    id: 0,
                    perm: (mode >> 6) & 7,
                },
                Entry {
                    tag: Tag::GroupObj,
                    id: 0,
                    perm: (mode >> 3) & 7,
                },
                Entry {
                    tag: Tag::Other,
                    id: 0,
                    perm: mode & 7,
                },
            ],
        }
    }

    /// The xattr value.
    pub fn to_xattr(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(4 + 8 * self.entries.len());
        b.extend_from_slice(&XATTR_VERSION.to_le_bytes());
        for e in &self.entries {
            b.extend_from_slice(&e.tag.wire().to_le_bytes());
            b.extend_from_slice(&(e.perm as u16).to_le_bytes());
            let id = if e.tag.named() { e.id } else { NO_ID };
            b.extend_from_slice(&id.to_le_bytes());
        }
        b
    }

    /// The entries, in order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    fn perm_of(&self, tag: Tag) -> Option<u32> {
        self.entries.iter().find(|e| e.tag == tag).map(|e| e.perm)
    }

    /// The permission bits (0o777) the ACL shows as mode: owner, mask (or
    /// owning group without one), other.
    pub fn mode_bits(&self) -> u32 {
        let group = self
            .perm_of(Tag::Mask)
            .or(self.perm_of(Tag::GroupObj))
            .unwrap_or(0);
        (self.perm_of(Tag::UserObj).unwrap_or(0) << 6)
            | (group << 3)
            | self.perm_of(Tag::Other).unwrap_or(0)
    }

    /// Whether the mode bits say all this ACL says (no named entries):
    /// then no ACL is kept (Linux's posix_acl_equiv_mode).
    pub fn is_mode_only(&self) -> bool {
        !self.entries.iter().any(|e| e.tag.named())
    }

    /// Follow a chmod to `mode`: the owner, other, and the mask (or the
    /// owning group without one) take the new bits (posix_acl_chmod).
    pub fn chmod(&mut self, mode: u32) {
        let has_mask = self.perm_of(Tag::Mask).is_some();
        for e in &mut self.entries {
            match e.tag {
                Tag::UserObj => e.perm = (mode >> 6) & 7,
                Tag::Other => e.perm = mode & 7,
                Tag::Mask => e.perm = (mode >> 3) & 7,
                Tag::GroupObj if !has_mask => e.perm = (mode >> 3) & 7,
                _ => {}
            }
        }
    }

    /// A new inode's access ACL from its directory's default ACL (this),
    /// and its mode: the mode asked for (before any umask, which a
    /// default ACL replaces) is cut to what the ACL grants, and the ACL
    /// to what the mode grants (posix_acl_create_masq). `None`: the mode
    /// says it all.
    pub fn inherit(&self, mode: &mut u32) -> Option<Acl> {
        let mut acl = self.clone();
        let mut m = *mode & 0o777;
        let has_mask = acl.perm_of(Tag::Mask).is_some();
        for e in &mut acl.entries {
            match e.tag {
                Tag::UserObj => {
                    e.perm &= (m >> 6) & 7;
                    m &= (e.perm << 6) | !0o700;
                }
                Tag::Other => {
                    e.perm &= m & 7;
                    m &= e.perm | !0o007;
                }
                _ => {}
            }
        }
        for e in &mut acl.entries {
            let class = if has_mask { Tag::Mask } else { Tag::GroupObj };
            if e.tag == class {
                e.perm &= (m >> 3) & 7;
                m &= (e.perm << 3) | !0o070;
            }
        }
        *mode = (*mode & !0o777) | (m & 0o777);
        (!acl.is_mode_only()).then_some(acl)
    }

    /// Whether a caller gets `want` (read 4, write 2, execute 1) from this
    /// ACL on an inode owned by `owner`:`group`, by POSIX's rule: the
    /// owner entry for the owner; a named user's entry, masked; else any
    /// group-class entry (the owning group's or a named group's) of a
    /// group the caller is in that grants it all, masked; if the caller is
    /// in such a group but none grants it, nothing; else other.
    pub fn grants(
        &self,
        (uid, in_group): (u32, &dyn Fn(u32) -> bool),
        (owner, group): (u32, u32),
        want: u32,
    ) -> bool {
        let mask = self.perm_of(Tag::Mask).unwrap_or(7);
        let has = |perm: u32| perm & want == want;
        if uid == owner {
            return self.perm_of(Tag::UserObj).is_some_and(has);
        }
        if let Some(e) = self
            .entries
            .iter()
            .find(|e| e.tag == Tag::User && e.id == uid)
        {
            return has(e.perm & mask);
        }
        let mut found = false;
        for e in &self.entries {
            let member = match e.tag {
                Tag::GroupObj => in_group(group),
                Tag::Group => in_group(e.id),
                _ => false,
            };
            if member {
                if has(e.perm & mask) {
                    return true;
                }
                found = true;
            }
        }
        !found && self.perm_of(Tag::Other).is_some_and(has)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(tag: Tag, id: u32, perm: u32) -> Entry {
        Entry { tag, id, perm }
    }

    /// user::rw-, user:1000:rwx, group::r--, group:50:-w-, mask::rw-, other::---
    fn sample() -> Acl {
        Acl::new(vec![
            e(Tag::UserObj, 0, 6),
            e(Tag::User, 1000, 7),
            e(Tag::GroupObj, 0, 4),
            e(Tag::Group, 50, 2),
            e(Tag::Mask, 0, 6),
            e(Tag::Other, 0, 0),
        ])
        .expect("valid")
    }

    #[test]
    fn the_xattr_form_is_linuxs() {
        let a = sample();
        let b = a.to_xattr();
        assert_eq!(b.len(), 4 + 6 * 8);
        assert_eq!(&b[..4], &[2, 0, 0, 0]);
        // user::rw- : tag 1, perm 6, undefined id.
        assert_eq!(&b[4..12], &[1, 0, 6, 0, 0xff, 0xff, 0xff, 0xff]);
        // user:1000:rwx
        assert_eq!(&b[12..20], &[2, 0, 7, 0, 0xe8, 0x03, 0, 0]);
        assert_eq!(Acl::from_xattr(&b), Ok(Some(a)));
        assert_eq!(
            Acl::from_xattr(&2u32.to_le_bytes()),
            Ok(None),
            "empty removes"
        );
    }

    #[test]
    fn malformed_acls_are_refused() {
        for bad in [
            &b""[..],
            &[1, 0, 0, 0][..],
            &[2, 0, 0, 0, 1, 0][..],
            &[2, 0, 0, 0, 0x40, 0, 7, 0, 0, 0, 0, 0][..],
        ] {
            assert!(Acl::from_xattr(bad).is_err(), "{bad:?}");
        }
        let ok = [
            e(Tag::UserObj, 0, 6),
            e(Tag::GroupObj, 0, 4),
            e(Tag::Other, 0, 4),
        ];
        assert!(Acl::new(ok.to_vec()).is_ok());
        // Named entry without a mask; owner missing; out of order; repeated id; bad bits.
        let no_mask = vec![ok[0], e(Tag::User, 5, 7), ok[1], ok[2]];
        assert!(Acl::new(no_mask).is_err());
        assert!(Acl::new(ok[1..].to_vec()).is_err());
        assert!(Acl::new(vec![ok[1], ok[0], ok[2]]).is_err());
        let twice = vec![
            ok[0],
            e(Tag::User, 5, 7),
            e(Tag::User, 5, 1),
            ok[1],
            e(Tag::Mask, 0, 7),
            ok[2],
        ];
        assert!(Acl::new(twice).is_err());
        assert!(Acl::new(vec![ok[0], ok[1], e(Tag::Other, 0, 8)]).is_err());
    }

    #[test]
    fn permission_follows_posix_order_and_the_mask() {
        let a = sample();
        let groups = |gs: &'static [u32]| move |g: u32| gs.contains(&g);
        let (owner, group) = (10, 20);
        let check =
            |uid, gs: &'static [u32], want| a.grants((uid, &groups(gs)), (owner, group), want);
        assert!(check(10, &[], 6), "owner: user::rw-");
        assert!(!check(10, &[], 1));
        assert!(check(1000, &[], 6), "named user rwx masked to rw-");
        assert!(!check(1000, &[], 1), "the mask removes x");
        assert!(check(11, &[20], 4), "owning group r--");
        assert!(!check(11, &[20], 2));
        assert!(check(11, &[20, 50], 2), "named group -w- grants w");
        assert!(!check(11, &[20, 50], 6), "no single group entry grants rw");
        assert!(
            !check(11, &[50], 4),
            "in a named group: other is not consulted"
        );
        assert!(!check(11, &[], 4), "other ---");
    }

    #[test]
    fn chmod_sets_the_mask_not_the_group_entry() {
        let mut a = sample();
        a.chmod(0o751);
        assert_eq!(a.mode_bits(), 0o751);
        assert_eq!(a.perm_of(Tag::GroupObj), Some(4), "kept under the mask");
        let mut m = Acl::from_mode(0o640);
        m.chmod(0o604);
        assert_eq!(m, Acl::from_mode(0o604));
    }

    #[test]
    fn inheritance_masks_mode_and_acl_both_ways() {
        let d = sample();
        let mut mode = 0o100666;
        let acl = d.inherit(&mut mode).expect("named entries stay an ACL");
        // user::rw- & rw- ; mask rw- & rw- ; other --- & rw-
        assert_eq!(mode, 0o100660);
        assert_eq!(acl.mode_bits(), 0o660);
        let mut mode = 0o100600;
        let acl = d.inherit(&mut mode).expect("valid");
        assert_eq!(
            acl.perm_of(Tag::Mask),
            Some(0),
            "the mode's group bits cap the mask"
        );
        assert_eq!(
            acl.perm_of(Tag::User),
            Some(7),
            "named entries keep their bits"
        );
        let mut mode = 0o777;
        assert_eq!(Acl::from_mode(0o750).inherit(&mut mode), None);
        assert_eq!(mode, 0o750);
    }
}
