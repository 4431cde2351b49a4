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
    let e = |e: crate::error::ServerError| e.to_string();
    match space {
        Space::Inodes => {
            let r = InodeRec::decode(value).map_err(|e| e.msg)?;
            let again = super::tx::encode_record(&r).map_err(e)?;
            InodeRec::decode(&again).map_err(|e| format!("re-encoded: {}", e.msg))?;
        }
        Space::Dentries => again::<DentryRec>(value)?,
        Space::Destroy => again::<Vec<ObjRef>>(value)?,
        Space::Intents => {
            let r = IntentRec::decode(value).map_err(e)?;
            let again = super::tx::encode_record(&r).map_err(e)?;
            IntentRec::decode(&again).map_err(|x| format!("re-encoded: {x}"))?;
        }
        Space::Changelog => again::<ChangeRec>(value)?,
        Space::Replies => again::<Record>(value)?,
        Space::Orphans => again::<(u64, Time)>(value)?,
        Space::Meta | Space::Xattrs | Space::Dom => return Ok(false),
    }
    Ok(true)
}

/// Decode `value` as a `T`, encode it and decode that again.
fn again<T: serde::Serialize + serde::de::DeserializeOwned>(value: &[u8]) -> Result<(), String> {
    let r: T = decode_record(value).map_err(|e| e.to_string())?;
    let bytes = super::tx::encode_record(&r).map_err(|e| e.to_string())?;
    decode_record::<T>(&bytes)
        .map(drop)
        .map_err(|e| format!("re-encoded: {e}"))
}
