//! The lfs-style tools of users who hold no cluster key, through the
//! mount: extended attributes in the `loom.` namespace that no file
//! has, answered by the mount as the calling process (the MDT checks each
//! under its credentials), as Lustre's `lfs` reaches its client through
//! ioctls and `lustre.lov`. Values are JSON, so `getfattr -n loom.layout
//! FILE` shows them too. They are not listed by listxattr.
//!
//! | name | on | get | set |
//! | --- | --- | --- | --- |
//! | `loom.layout` | file | its layout | - |
//! | `loom.default_layout` | directory | its default layout (`null`: none) | - |
//! | `loom.default_compress` | directory | its default compression | - |
//! | `loom.mdt` | any | the index of the MDT keeping it | - |
//! | `loom.df` | any | every target's usage, as `loom df` shows it | - |
//! | `loom.pools` | any | the OST pools and their OSTs | - |
//! | `loom.quota.u.UID` (`.g.GID`, `.p.PROJID`) | any | the id's usage per target and its limits, if the caller may see them | - |
//! | `loom.dirstripe` | directory | its MDT and shards (`DirStripeShown`) | - |
//! | `loom.dir_default` | directory | where its new subdirectories go | the same (`DirDefault`; empty: removed) |
//! | `loom.mkdir` | directory | - | makes a directory in it (`MkdirAsked`: name, mode, placement) |
//! | `loom.create` | directory | - | makes a file in it with its own striping (`CreateAsked`) |
//! | `loom.default_stripe` | directory | - | its default striping (`StripeSpec`; empty: removed) |
//! | `loom.default_layout` | directory | (above) | its default component layout (`LayoutSpec`; empty: removed) |
//! | `loom.default_compress` | directory | (above) | its default compression (`Compress`; empty: removed) |
//! | `loom.migrate` | file | - | moves its data onto new objects laid out as the `LayoutSpec` given (`loom migrate`; the caller must be allowed to write it; returns when the copy is done, holding one of the mount's threads) |

use loom_client::{Caller, Client};
use loom_proto::msg::{DirStripe, FileKind};
use loom_proto::quota::QuotaId;
use loom_proto::{Errno, Fid, StripeSpec};

/// The prefix of the tools' names.
pub const PREFIX: &[u8] = b"loom.";

/// A tool's question about `fid` (of kind `kind`), as `c`: its answer.
pub async fn get(
    client: &Client,
    c: &Caller,
    fid: Fid,
    kind: FileKind,
    name: &[u8],
) -> Result<Vec<u8>, Errno> {
    let json = match name {
        b"loom.layout" if kind == FileKind::File => {
            serde_json::to_vec(&client.get_layout_as(c, fid).await?)
        }
        b"loom.default_layout" if kind == FileKind::Dir => {
            serde_json::to_vec(&client.get_default_layout_as(c, fid).await?)
        }
        b"loom.default_compress" if kind == FileKind::Dir => {
            serde_json::to_vec(&client.get_default_compress(c, fid).await?)
        }
        b"loom.mdt" => serde_json::to_vec(&client.locate_as(c, fid).await?),
        // `getdirstripe`: the directory's MDT and its shards with theirs.
        b"loom.dirstripe" if kind == FileKind::Dir => {
            let mdt = client.locate_as(c, fid).await?;
            let shards = match client.dir_shards(c, fid).await? {
                None => None,
                Some(s) => {
                    let mut v = Vec::with_capacity(s.len());
                    for f in s.iter() {
                        v.push((client.router().mdt_of(*f).await?.index, *f));
                    }
                    Some(v)
                }
            };
            serde_json::to_vec(&DirStripeShown { mdt, shards })
        }
        b"loom.dir_default" if kind == FileKind::Dir => {
            serde_json::to_vec(&client.get_dir_default(c, fid).await?)
        }
        // What `df` shows: every target's usage (no one's secret).
        b"loom.df" => serde_json::to_vec(&client.target_statfs().await),
        // `loom target status`: where each target is served, and each
        // replica's state, as the MGS has them now.
        b"loom.targets" => {
            client.router().refresh().await;
            serde_json::to_vec(&client.router().config().targets)
        }
        // `loom pool list`: the OST pools (no one's secret either).
        b"loom.pools" => serde_json::to_vec(&client.pools().await?),
        // `loom.quota.u.UID`, `.g.GID`, `.p.PROJID`: what `loom quota`
        // shows of that id, if the caller may see it (EPERM).
        n if n.starts_with(b"loom.quota.") => {
            let who = quota_id(&n[b"loom.quota.".len()..]).ok_or(Errno::EINVAL)?;
            let usage = client.quota_usage_as(c, who).await?;
            let state = client.get_quota_as(c, who).await?;
            serde_json::to_vec(&(usage, state))
        }
        // Of another kind, or no such question: as a missing attribute.
        _ => return Err(Errno::ENODATA),
    };
    json.map_err(|_| Errno::EIO)
}

/// `loom.dirstripe`: a directory's MDT, and its shards (MDT, FID) if
/// striped.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct DirStripeShown {
    /// The MDT keeping the directory (its master).
    pub mdt: u32,
    /// Its shards, if striped.
    pub shards: Option<Vec<(u32, Fid)>>,
}

/// `loom.mkdir`: a directory to make in the one it is set on.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct MkdirAsked {
    /// Its name.
    pub name: String,
    /// Its permission bits.
    pub perm: u32,
    /// Where its shards go.
    pub stripe: DirStripe,
}

/// `loom.create`: a file to make in the directory it is set on.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct CreateAsked {
    /// Its name.
    pub name: String,
    /// Its permission bits.
    pub perm: u32,
    /// Its striping.
    pub stripe: StripeSpec,
}

/// `u.ID`, `g.ID` or `p.ID`.
fn quota_id(s: &[u8]) -> Option<QuotaId> {
    let s = std::str::from_utf8(s).ok()?;
    let (kind, id) = s.split_once('.')?;
    let id: u32 = id.parse().ok()?;
    match kind {
        "u" => Some(QuotaId::user(id)),
        "g" => Some(QuotaId::group(id)),
        "p" => Some(QuotaId::project(id)),
        _ => None,
    }
}

/// A tool's change of `fid` (of kind `kind`), as `c`.
pub async fn set(
    client: &std::sync::Arc<Client>,
    c: &Caller,
    fid: Fid,
    kind: FileKind,
    name: &[u8],
    value: &[u8],
) -> Result<(), Errno> {
    match name {
        // `loom migrate FILE` of a user: the copy runs here, as the
        // caller; the MDT checks they may write the file.
        b"loom.migrate" if kind == FileKind::File => {
            let spec: loom_proto::layout::LayoutSpec =
                serde_json::from_slice(value).map_err(|_| Errno::EINVAL)?;
            spec.validate().map_err(|_| Errno::EINVAL)?;
            client.migrate_data(c, fid, spec, &|_| {}).await.map(|_| ())
        }
        b"loom.default_stripe" if kind == FileKind::Dir => {
            let spec = if value.is_empty() {
                None
            } else {
                let s: StripeSpec = serde_json::from_slice(value).map_err(|_| Errno::EINVAL)?;
                Some(s)
            };
            client.set_default_stripe_as(c, fid, spec).await
        }
        b"loom.default_compress" if kind == FileKind::Dir => {
            let z = if value.is_empty() {
                None
            } else {
                Some(serde_json::from_slice(value).map_err(|_| Errno::EINVAL)?)
            };
            client.set_default_compress_as(c, fid, z).await
        }
        b"loom.default_layout" if kind == FileKind::Dir => {
            let l = if value.is_empty() {
                None
            } else {
                Some(serde_json::from_slice(value).map_err(|_| Errno::EINVAL)?)
            };
            client.set_default_layout_as(c, fid, l).await
        }
        b"loom.dir_default" if kind == FileKind::Dir => {
            let d = if value.is_empty() {
                None
            } else {
                Some(serde_json::from_slice(value).map_err(|_| Errno::EINVAL)?)
            };
            client.set_dir_default_as(c, fid, d).await
        }
        // `mkdir -i/-c`: a directory made in this one, placed as asked
        // (the MDT checks the caller may make it there).
        b"loom.mkdir" if kind == FileKind::Dir => {
            let m: MkdirAsked = serde_json::from_slice(value).map_err(|_| Errno::EINVAL)?;
            client
                .mkdir_striped(c, fid, m.name.as_bytes(), m.perm, m.stripe)
                .await
                .map(|_| ())
        }
        // `setstripe NEWFILE`: a file made in this directory with its
        // own striping.
        b"loom.create" if kind == FileKind::Dir => {
            let m: CreateAsked = serde_json::from_slice(value).map_err(|_| Errno::EINVAL)?;
            m.stripe.validate().map_err(|_| Errno::EINVAL)?;
            client
                .create(
                    c,
                    fid,
                    m.name.as_bytes(),
                    FileKind::File,
                    m.perm,
                    0,
                    Some(m.stripe),
                )
                .await
                .map(|_| ())
        }
        b"loom.default_stripe"
        | b"loom.default_compress"
        | b"loom.default_layout"
        | b"loom.dir_default"
        | b"loom.mkdir"
        | b"loom.create" => Err(Errno::ENOTDIR),
        _ => Err(Errno::EOPNOTSUPP),
    }
}
