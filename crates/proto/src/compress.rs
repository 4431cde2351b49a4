//! How a file's data is compressed on the OSTs.
//!
//! A file's layout carries its [`Compress`] setting (set at its create from
//! the nearest directory default, the root's being the file system's); every
//! write and truncate names it to the OST, which applies it to an object it
//! makes and keeps it in the object's checksum file from then on. Clients
//! see the bytes they wrote: compression is the OSTs' business, per chunk
//! of an object (see `loom_store::packed`).
//!
//! Text form, as `loom setstripe --compress` takes it and `getstripe` shows
//! it: `lz4`, `zstd` (level 3), `zstd:LEVEL` (1 to 19), `off`.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The compression algorithm. Variants are append-only (postcard encodes
/// their index).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Method {
    /// Stored as written. As a directory default, it stops a default set
    /// higher up from applying.
    Off,
    /// LZ4 (block format): fast, modest ratios; no levels.
    Lz4,
    /// Zstandard at a level.
    Zstd,
}

/// A compression setting: an algorithm and, for zstd, its level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Compress {
    /// The algorithm.
    pub method: Method,
    /// zstd's level (1..=19); 0 for the others.
    pub level: i8,
}

/// zstd's level when none is given: zstd's own default.
pub const ZSTD_DEFAULT_LEVEL: i8 = 3;
/// The highest zstd level accepted (past it zstd needs far more memory).
pub const ZSTD_MAX_LEVEL: i8 = 19;

impl Compress {
    /// No compression.
    pub const OFF: Compress = Compress {
        method: Method::Off,
        level: 0,
    };

    /// LZ4.
    pub const LZ4: Compress = Compress {
        method: Method::Lz4,
        level: 0,
    };

    /// zstd at `level`.
    pub fn zstd(level: i8) -> Compress {
        Compress {
            method: Method::Zstd,
            level,
        }
    }

    /// Whether data written under this setting is compressed.
    pub fn is_on(&self) -> bool {
        self.method != Method::Off
    }

    /// `Some(self)` if it compresses, `None` if it is `off`: what a
    /// file's layout keeps.
    pub fn if_on(self) -> Option<Compress> {
        self.is_on().then_some(self)
    }

    /// Check a setting that came over the wire, with a reason.
    pub fn validate(&self) -> Result<(), String> {
        match self.method {
            Method::Zstd if !(1..=ZSTD_MAX_LEVEL).contains(&self.level) => Err(format!(
                "zstd level {} is outside 1..={ZSTD_MAX_LEVEL}",
                self.level
            )),
            Method::Off | Method::Lz4 if self.level != 0 => Err(format!(
                "{} takes no level (got {})",
                Compress { level: 0, ..*self },
                self.level
            )),
            _ => Ok(()),
        }
    }
}

impl fmt::Display for Compress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.method {
            Method::Off => f.write_str("off"),
            Method::Lz4 => f.write_str("lz4"),
            Method::Zstd => write!(f, "zstd:{}", self.level),
        }
    }
}

impl std::str::FromStr for Compress {
    type Err = String;

    /// `lz4`, `zstd`, `zstd:LEVEL`, `off` (or `none`).
    fn from_str(s: &str) -> Result<Compress, String> {
        let (name, level) = match s.split_once(':') {
            Some((n, l)) => (n, Some(l)),
            None => (s, None),
        };
        let c = match (name.to_ascii_lowercase().as_str(), level) {
            ("off" | "none", None) => Compress::OFF,
            ("lz4", None) => Compress::LZ4,
            ("zstd", None) => Compress::zstd(ZSTD_DEFAULT_LEVEL),
            ("zstd", Some(l)) => {
                let level: i8 = l.parse().map_err(|_| {
                    format!("zstd level {l:?} is not a number from 1 to {ZSTD_MAX_LEVEL}")
                })?;
                Compress::zstd(level)
            }
            ("off" | "none" | "lz4", Some(_)) => {
                return Err(format!("{name} takes no level: use {name:?}"))
            }
            _ => {
                return Err(format!(
                "unknown compression {s:?}: use lz4, zstd, zstd:LEVEL (1-{ZSTD_MAX_LEVEL}) or off"
            ))
            }
        };
        c.validate()?;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_parse_and_print_as_users_write_them() {
        for (text, want, shown) in [
            ("lz4", Compress::LZ4, "lz4"),
            ("zstd", Compress::zstd(3), "zstd:3"),
            ("ZSTD:19", Compress::zstd(19), "zstd:19"),
            ("off", Compress::OFF, "off"),
            ("none", Compress::OFF, "off"),
        ] {
            let c: Compress = text.parse().expect(text);
            assert_eq!(c, want);
            assert_eq!(c.to_string(), shown);
            assert_eq!(shown.parse::<Compress>(), Ok(c));
        }
        for bad in ["zstd:0", "zstd:20", "zstd:x", "lz4:3", "gzip", ""] {
            assert!(bad.parse::<Compress>().is_err(), "{bad} was accepted");
        }
        assert!(Compress::zstd(25).validate().is_err());
        assert!(Compress {
            method: Method::Lz4,
            level: 2
        }
        .validate()
        .is_err());
        assert_eq!(Compress::OFF.if_on(), None);
        assert_eq!(Compress::LZ4.if_on(), Some(Compress::LZ4));
    }
}
