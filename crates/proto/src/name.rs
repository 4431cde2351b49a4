//! [`Name`]: a file name, symlink target or xattr name as Linux has them:
//! bytes, not necessarily UTF-8.
//!
//! Programs create names in any encoding (Latin-1 archives, binary junk
//! from a bug): a file system must store and give back exactly those
//! bytes. On the wire and on disk a `Name` is a length-prefixed byte
//! string, encoded by postcard exactly as a `String` is, so records and
//! messages written when names were `String`s read back unchanged.
//!
//! Rules on what a file name may hold (no `/`, no NUL, not `.` or `..`,
//! at most 255 bytes) are the MDT's to check, not this type's.

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use std::fmt;

/// Bytes that name something; see the module documentation.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name(Vec<u8>);

impl Name {
    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The bytes, owned.
    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether it has no bytes.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// As text for messages: invalid UTF-8 shows as U+FFFD.
    pub fn to_string_lossy(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.0)
    }

    /// As an `OsStr`, which on Unix is any bytes.
    #[cfg(unix)]
    pub fn as_os_str(&self) -> &std::ffi::OsStr {
        std::os::unix::ffi::OsStrExt::from_bytes(&self.0)
    }
}

impl AsRef<[u8]> for Name {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl From<&str> for Name {
    fn from(s: &str) -> Name {
        Name(s.as_bytes().to_vec())
    }
}

impl From<String> for Name {
    fn from(s: String) -> Name {
        Name(s.into_bytes())
    }
}

impl From<&[u8]> for Name {
    fn from(b: &[u8]) -> Name {
        Name(b.to_vec())
    }
}

impl From<Vec<u8>> for Name {
    fn from(b: Vec<u8>) -> Name {
        Name(b)
    }
}

#[cfg(unix)]
impl From<&std::ffi::OsStr> for Name {
    fn from(s: &std::ffi::OsStr) -> Name {
        Name(std::os::unix::ffi::OsStrExt::as_bytes(s).to_vec())
    }
}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        self.0 == other.as_bytes()
    }
}

impl PartialEq<String> for Name {
    fn eq(&self, other: &String) -> bool {
        self.0 == other.as_bytes()
    }
}

#[cfg(unix)]
impl AsRef<std::ffi::OsStr> for Name {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.as_os_str()
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        self.0 == other.as_bytes()
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_string_lossy())
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Valid UTF-8 prints as a string; other bytes are escaped.
        match std::str::from_utf8(&self.0) {
            Ok(s) => write!(f, "{s:?}"),
            Err(_) => write!(f, "b\"{}\"", self.0.escape_ascii()),
        }
    }
}

impl Serialize for Name {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // postcard: a varint length, then the bytes; the same bytes as
        // serialize_str of a String.
        s.serialize_bytes(&self.0)
    }
}

struct NameVisitor;

impl<'de> Visitor<'de> for NameVisitor {
    type Value = Name;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a name (bytes)")
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Name, E> {
        Ok(Name(v.to_vec()))
    }

    fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<Name, E> {
        Ok(Name(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Name, E> {
        Ok(Name(v.as_bytes().to_vec()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Name, E> {
        Ok(Name(v.into_bytes()))
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Name, A::Error> {
        let mut v = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(b) = seq.next_element::<u8>()? {
            v.push(b);
        }
        Ok(Name(v))
    }
}

impl<'de> Deserialize<'de> for Name {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Name, D::Error> {
        d.deserialize_byte_buf(NameVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_name_encodes_exactly_as_the_string_it_replaced() {
        for s in ["", "f", "file.mdtest.0.17", "żółw", &"n".repeat(300)] {
            let as_string = postcard::to_stdvec(&s.to_string()).expect("string");
            let as_name = postcard::to_stdvec(&Name::from(s)).expect("name");
            assert_eq!(as_string, as_name, "{s:?}");
            let back: Name = postcard::from_bytes(&as_string).expect("decode");
            assert_eq!(back, s);
        }
    }

    #[test]
    fn non_utf8_bytes_survive_and_print_escaped() {
        let latin1 = Name::from(&b"caf\xe9"[..]);
        let wire = postcard::to_stdvec(&latin1).expect("encode");
        let back: Name = postcard::from_bytes(&wire).expect("decode");
        assert_eq!(back.as_bytes(), b"caf\xe9");
        assert_eq!(format!("{back:?}"), "b\"caf\\xe9\"");
        assert_eq!(back.to_string(), "caf\u{fffd}");
    }

    proptest! {
        #[test]
        fn any_bytes_round_trip(b in proptest::collection::vec(any::<u8>(), 0..600)) {
            let n = Name::from(b.clone());
            let back: Name = postcard::from_bytes(&postcard::to_stdvec(&n).expect("encode")).expect("decode");
            prop_assert_eq!(back.as_bytes(), &b[..]);
        }
    }
}
