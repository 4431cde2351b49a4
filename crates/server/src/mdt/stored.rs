//! Each keyspace's records decoded as the MDT reads them, behind one
//! entry point: what the fuzz targets (`fuzz/`) feed damaged bytes to.
//! A record that does not decode must come back as an error (the MDT
//! reports it as damage), never as a panic or an allocation its bytes
//! chose.
//!
//! Not covered: `meta` (named values of many small types, each read by
//! its own key), and `xattrs` and `dom`, which hold raw bytes.

use super::intents::IntentRec;
use super::records::{DentryRec, InodeRec};
use super::replies::Record;
use super::tx::decode_record;
use loom_proto::changelog::ChangeRec;
use loom_proto::layout::ObjRef;
use loom_proto::msg::Time;
use loom_store::kv::Space;

/// The keyspaces [`decode`] knows the records of.
pub const SPACES: [Space; 7] = [
    Space::Inodes,
    Space::Dentries,
    Space::Destroy,
    Space::Intents,
    Space::Changelog,
    Space::Replies,
    Space::Orphans,
];

/// Decode `value` as a record of keyspace `space`, with the decoder the
/// MDT uses; on success, encode it again and decode that too (a record
/// the MDT rewrites must read back). `Ok(false)` for a keyspace it does
/// not know.
pub fn decode(space: Space, value: &[u8]) -> Result<bool, String> {
    let inode = |b: &[u8]| InodeRec::decode(b).map_err(|e| e.msg);
    let intent = |b: &[u8]| IntentRec::decode(b).map_err(|e| e.to_string());
    match space {
        Space::Inodes => again(value, inode)?,
        Space::Dentries => again(value, plain::<DentryRec>)?,
        Space::Destroy => again(value, plain::<Vec<ObjRef>>)?,
        Space::Intents => again(value, intent)?,
        Space::Changelog => again(value, plain::<ChangeRec>)?,
        Space::Replies => again(value, plain::<Record>)?,
        Space::Orphans => again(value, plain::<(u64, Time)>)?,
        Space::Meta | Space::Xattrs | Space::Dom => return Ok(false),
    }
    Ok(true)
}

/// A record read as a plain postcard `T`.
fn plain<T: serde::de::DeserializeOwned>(b: &[u8]) -> Result<T, String> {
    decode_record(b).map_err(|e| e.to_string())
}

/// Decode `value` with `read`, encode it and read that again.
fn again<T: serde::Serialize>(
    value: &[u8],
    read: impl Fn(&[u8]) -> Result<T, String>,
) -> Result<(), String> {
    let r = read(value)?;
    let bytes = super::tx::encode_record(&r).map_err(|e| e.to_string())?;
    read(&bytes)
        .map(drop)
        .map_err(|e| format!("re-encoded: {e}"))
}
