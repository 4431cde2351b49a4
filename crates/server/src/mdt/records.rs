//! The MDT's on-disk records and key encodings (see docs/ARCHITECTURE.md).
//!
//! | keyspace | key | value |
//! | --- | --- | --- |
//! | inodes | FID (16 bytes, big-endian) | postcard [`InodeRec`] |
//! | dentries | parent FID (16) \| name_hash (8, BE) \| name | postcard [`DentryRec`] |
//! | xattrs | FID (16) \| name | raw value |
//! | meta | ASCII name | postcard value |
//! | destroy | FID (16) | postcard `Vec<ObjRef>` |

use loom_proto::acl::Acl;
use loom_proto::fid::name_hash;
use loom_proto::layout::LayoutSpec;
use loom_proto::layout::LayoutV1;
use loom_proto::msg::{Attr, DirDefault, FileKind};
use loom_proto::Name;
use loom_proto::{Compress, Fid, Layout, StripeSpec};
use serde::{Deserialize, Serialize};

/// Version of the inode record; stored in each record so later formats can
/// read old ones.
pub const INODE_REC_VERSION: u8 = 6;

/// Everything the MDT keeps about one inode.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct InodeRec {
    /// Record format version.
    pub version: u8,
    /// Attributes (size and mtime included).
    pub attr: Attr,
    /// Parent directory, for directories (rename loop checks, "..").
    pub parent: Fid,
    /// File layout, for regular files.
    pub layout: Option<Layout>,
    /// Link target, for symlinks (any bytes; stored as a `String` was, so
    /// records from before names were bytes read the same).
    pub symlink: Option<Name>,
    /// Default striping for new files, for directories.
    pub default_stripe: Option<StripeSpec>,
    /// Default component layout for new files (PFL, Data-on-MDT), for
    /// directories; set instead of `default_stripe` (version 2).
    pub default_layout: Option<LayoutSpec>,
    /// Default placement of new subdirectories over MDTs, for directories
    /// (`setdirstripe -D`; version 3).
    pub default_dir: Option<DirDefault>,
    /// Default compression of new files' data, for directories
    /// (`setstripe --compress`; version 4, whose layouts carry the
    /// file's own).
    pub default_compress: Option<Compress>,
    /// For directories: new entries take this directory's project id
    /// (`loom project -s`; version 5).
    pub proj_inherit: bool,
    /// POSIX access ACL beyond the mode bits (version 6); `None` when
    /// the mode says it all. Kept here, not among the xattrs, because
    /// every permission check needs it.
    pub acl: Option<Acl>,
    /// For directories: the ACL new entries inherit (version 6).
    pub default_acl: Option<Acl>,
}

/// Version 5 of [`InodeRec`]: the current fields but the ACLs.
#[derive(Deserialize)]
struct InodeRecV5 {
    _version: u8,
    attr: Attr,
    parent: Fid,
    layout: Option<Layout>,
    symlink: Option<Name>,
    default_stripe: Option<StripeSpec>,
    default_layout: Option<LayoutSpec>,
    default_dir: Option<DirDefault>,
    default_compress: Option<Compress>,
    proj_inherit: bool,
}

/// Version 4 of [`InodeRec`]: the current fields but `proj_inherit`.
#[derive(Deserialize)]
struct InodeRecV4 {
    _version: u8,
    attr: Attr,
    parent: Fid,
    layout: Option<Layout>,
    symlink: Option<Name>,
    default_stripe: Option<StripeSpec>,
    default_layout: Option<LayoutSpec>,
    default_dir: Option<DirDefault>,
    default_compress: Option<Compress>,
}

/// The fields versions 1 to 3 of [`InodeRec`] start with (version 1 is
/// only these); later ones appended theirs, so such a record is decoded
/// as this prefix and then the fields its version has. Their layouts
/// have no compression ([`LayoutV1`]).
#[derive(Deserialize)]
struct InodeRecV1 {
    version: u8,
    attr: Attr,
    parent: Fid,
    layout: Option<LayoutV1>,
    symlink: Option<Name>,
    default_stripe: Option<StripeSpec>,
}

impl InodeRec {
    /// A record of the current version of an inode with `attr` in
    /// `parent`, with no layout, link target, defaults or ACLs.
    pub fn new(attr: Attr, parent: Fid) -> InodeRec {
        InodeRec {
            version: INODE_REC_VERSION,
            attr,
            parent,
            layout: None,
            symlink: None,
            default_stripe: None,
            default_layout: None,
            default_dir: None,
            default_compress: None,
            proj_inherit: false,
            acl: None,
            default_acl: None,
        }
    }

    /// Decode a stored inode record of any version (1: without
    /// `default_layout`, 2: without `default_dir`, 3: without
    /// `default_compress` and with layouts of [`LayoutV1`]'s form, 4:
    /// without `proj_inherit`, 5: without the ACLs). The record comes back in the current form
    /// and version, as it will be written back.
    pub fn decode(b: &[u8]) -> Result<InodeRec, loom_proto::WireError> {
        use loom_proto::msg::decode_prefix;
        let rest = match b.first() {
            Some(&v) if v >= 6 => {
                let (r, rest): (InodeRec, _) = decode_prefix(b)?;
                trailing(rest)?;
                return Ok(r);
            }
            Some(5) => {
                let (r, rest): (InodeRecV5, _) = decode_prefix(b)?;
                trailing(rest)?;
                return Ok(InodeRec {
                    version: INODE_REC_VERSION,
                    attr: r.attr,
                    parent: r.parent,
                    layout: r.layout,
                    symlink: r.symlink,
                    default_stripe: r.default_stripe,
                    default_layout: r.default_layout,
                    default_dir: r.default_dir,
                    default_compress: r.default_compress,
                    proj_inherit: r.proj_inherit,
                    acl: None,
                    default_acl: None,
                });
            }
            Some(4) => {
                let (r, rest): (InodeRecV4, _) = decode_prefix(b)?;
                trailing(rest)?;
                return Ok(InodeRec {
                    version: INODE_REC_VERSION,
                    attr: r.attr,
                    parent: r.parent,
                    layout: r.layout,
                    symlink: r.symlink,
                    default_stripe: r.default_stripe,
                    default_layout: r.default_layout,
                    default_dir: r.default_dir,
                    default_compress: r.default_compress,
                    proj_inherit: false,
                    acl: None,
                    default_acl: None,
                });
            }
            _ => b,
        };
        let (v1, rest): (InodeRecV1, _) = decode_prefix(rest)?;
        let (default_layout, rest) = match v1.version {
            1 => (None, rest),
            _ => decode_prefix(rest)?,
        };
        let (default_dir, rest) = match v1.version {
            1 | 2 => (None, rest),
            _ => decode_prefix(rest)?,
        };
        trailing(rest)?;
        Ok(InodeRec {
            version: INODE_REC_VERSION,
            attr: v1.attr,
            parent: v1.parent,
            layout: v1.layout.map(Layout::from),
            symlink: v1.symlink,
            default_stripe: v1.default_stripe,
            default_layout,
            default_dir,
            default_compress: None,
            proj_inherit: false,
            acl: None,
            default_acl: None,
        })
    }
}

/// Refuse bytes left after a record's fields.
fn trailing(rest: &[u8]) -> Result<(), loom_proto::WireError> {
    if rest.is_empty() {
        return Ok(());
    }
    Err(loom_proto::WireError::new(
        loom_proto::Errno::EPROTO,
        format!("inode record: {} bytes after its fields", rest.len()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use loom_proto::layout::{ComponentSpec, DirHash};

    /// A record of version 1, 2 or 3 as those builds wrote it, from `rec`
    /// without a layout and whose newer fields are all `None` (one byte
    /// each in postcard): the same bytes without them.
    fn old(rec: &InodeRec, version: u8) -> Vec<u8> {
        assert!(rec.layout.is_none());
        let mut r = rec.clone();
        r.version = version;
        let full = loom_proto::msg::encode(&r).expect("encode");
        // Fields each version added, one byte each when unset.
        let added = [(2, 1), (3, 1), (4, 1), (5, 1), (6, 2)];
        let newer_fields: usize = added
            .iter()
            .filter(|(v, _)| *v > version)
            .map(|(_, n)| n)
            .sum();
        full[..full.len() - newer_fields].to_vec()
    }

    #[test]
    fn records_of_every_version_decode() {
        let t = loom_proto::msg::Time::default();
        let attr = Attr {
            fid: Fid::new(1, 9),
            kind: FileKind::Dir,
            perm: 0o755,
            nlink: 2,
            uid: 1,
            gid: 2,
            size: 0,
            atime: t,
            mtime: t,
            ctime: t,
            rdev: 0,
            projid: 0,
        };
        let plain = InodeRec {
            default_stripe: Some(StripeSpec::default()),
            ..InodeRec::new(attr, Fid::ROOT)
        };
        for v in [1u8, 2, 3, 4, 5] {
            let r = InodeRec::decode(&old(&plain, v)).expect("an old record");
            // Read into the current form, it is written back as one: a
            // record of version 4 changed by this build reads again.
            assert_eq!(r.version, INODE_REC_VERSION);
            let again = InodeRec::decode(&loom_proto::msg::encode(&r).expect("encode"))
                .expect("an old record written back");
            assert_eq!(again.default_stripe, plain.default_stripe);
            assert_eq!(r.default_stripe, plain.default_stripe);
            assert!(r.default_layout.is_none() && r.default_dir.is_none());
        }
        let full = InodeRec {
            default_layout: Some(LayoutSpec {
                components: vec![ComponentSpec {
                    end: u64::MAX,
                    on_mdt: false,
                    stripe: StripeSpec::default(),
                }],
            }),
            default_dir: Some(DirDefault {
                count: 2,
                mdts: vec![0, 2],
                hash: DirHash::NameHashMod,
            }),
            proj_inherit: true,
            acl: Some(loom_proto::acl::Acl::from_mode(0o750)),
            default_acl: Some(loom_proto::acl::Acl::from_mode(0o700)),
            ..plain
        };
        let b = loom_proto::msg::encode(&full).expect("encode");
        let r = InodeRec::decode(&b).expect("a current record");
        assert_eq!(r.default_layout, full.default_layout);
        assert_eq!(r.default_dir, full.default_dir);
        assert!(r.proj_inherit);
        assert_eq!((&r.acl, &r.default_acl), (&full.acl, &full.default_acl));
        let mut long = b.clone();
        long.push(0);
        assert!(InodeRec::decode(&long).is_err(), "trailing bytes");
    }

    #[test]
    fn a_version_3_file_reads_with_its_layout_and_no_compression() {
        let t = loom_proto::msg::Time::default();
        let attr = Attr {
            fid: Fid::new(1, 10),
            kind: FileKind::File,
            perm: 0o644,
            nlink: 1,
            uid: 1,
            gid: 2,
            size: 5,
            atime: t,
            mtime: t,
            ctime: t,
            rdev: 0,
            projid: 0,
        };
        let l = Layout::raid0(1 << 20, vec![loom_proto::ObjRef { ost: 1, oid: 7 }]);
        let v1 = LayoutV1 {
            generation: l.generation,
            components: l.components.clone(),
        };
        // Version 3's fields in order, its layout without compression.
        let none: Option<StripeSpec> = None;
        let b = loom_proto::msg::encode(&(
            3u8,
            attr,
            Fid::ROOT,
            Some(v1),
            None::<Name>,
            none,
            None::<LayoutSpec>,
            None::<DirDefault>,
        ))
        .expect("encode");
        let r = InodeRec::decode(&b).expect("a version 3 file");
        assert_eq!(r.layout, Some(l.clone()));
        assert!(r.default_compress.is_none());
        // The current version keeps both.
        let now = InodeRec {
            version: INODE_REC_VERSION,
            layout: Some(Layout {
                compress: Some(Compress::zstd(5)),
                ..l
            }),
            default_compress: Some(Compress::LZ4),
            ..r
        };
        let back = InodeRec::decode(&loom_proto::msg::encode(&now).expect("encode"))
            .expect("a version 4 record");
        assert_eq!(back.layout, now.layout);
        assert_eq!(back.default_compress, Some(Compress::LZ4));
    }
}

/// One directory entry's value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DentryRec {
    /// The inode named.
    pub fid: Fid,
    /// Its type, so listing need not read it.
    pub kind: FileKind,
}

/// Key of `fid` in the inodes keyspace.
pub fn inode_key(fid: Fid) -> Vec<u8> {
    fid.to_key().to_vec()
}

/// Prefix of every entry of directory `dir`.
pub fn dentry_prefix(dir: Fid) -> Vec<u8> {
    dir.to_key().to_vec()
}

/// Key of entry `name` in `dir`.
pub fn dentry_key(dir: Fid, name: &Name) -> Vec<u8> {
    let mut k = Vec::with_capacity(24 + name.len());
    k.extend_from_slice(&dir.to_key());
    k.extend_from_slice(&name_hash(name.as_bytes()).to_be_bytes());
    k.extend_from_slice(name.as_bytes());
    k
}

/// A key that sorts before every entry of `dir` with a hash above
/// `cookie` and after every other: readdir resumes after it. Real keys are
/// longer than 24 bytes, so none equals it.
pub fn dentry_resume_key(dir: Fid, cookie: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(24);
    k.extend_from_slice(&dir.to_key());
    // Hashes are below 2^63, so cookie + 1 cannot overflow.
    k.extend_from_slice(&cookie.saturating_add(1).to_be_bytes());
    k
}

/// Split a dentry key into (hash, name).
pub fn parse_dentry_key(k: &[u8]) -> Option<(u64, Name)> {
    let h = u64::from_be_bytes(k.get(16..24)?.try_into().ok()?);
    Some((h, Name::from(k.get(24..)?)))
}

/// Key of xattr `name` of `fid`.
pub fn xattr_key(fid: Fid, name: &Name) -> Vec<u8> {
    let mut k = fid.to_key().to_vec();
    k.extend_from_slice(name.as_bytes());
    k
}

/// Meta keys.
pub mod meta {
    /// Current FID sequence and next oid: `(seq, next_oid)`.
    pub const FID_ALLOC: &str = "fid_alloc";
    /// Inodes in use: `u64`.
    pub const INODE_COUNT: &str = "inode_count";
    /// Precreated object pool of OST `i`: `(next, end)`.
    pub fn pool(ost: u32) -> String {
        format!("pool/{ost:08x}")
    }
}
