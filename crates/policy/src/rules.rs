//! The rules file (TOML): what the engine does to which files. Parsed
//! whole and checked before anything runs; an unknown key, a missing one,
//! a bad size or a pool that does not exist fails the whole file, so no
//! rule of a file that failed to parse ever acts.
//!
//! ```toml
//! [[purge]]                 # remove files unused for N days
//! name = "scratch"
//! tree = "/scratch"         # from the file system's root
//! unused_days = 30          # atime and mtime both older
//!
//! [[migrate]]               # move files older than N days to a pool
//! name = "cold"
//! tree = "/"
//! older_than_days = 90      # mtime older
//! pool = "archive"
//! stripe_count = 1          # optional
//!
//! [[alert]]                 # say when a user, group or project passes a threshold
//! name = "big"
//! per = "user"              # user, group or project
//! bytes = "10T"             # optional: bytes of its files
//! inodes = 1000000          # optional: inodes it owns
//! ```

use anyhow::{bail, Context};
use serde::Deserialize;

/// A whole rules file.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Rules {
    /// Purge rules.
    #[serde(default)]
    pub purge: Vec<Purge>,
    /// Migration rules.
    #[serde(default)]
    pub migrate: Vec<Migrate>,
    /// Alert rules.
    #[serde(default)]
    pub alert: Vec<Alert>,
}

/// Remove regular files in `tree` whose atime and mtime are both older
/// than `unused_days`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Purge {
    /// Its name, in the log.
    pub name: String,
    /// The tree, from the file system's root (`/scratch`).
    pub tree: String,
    /// Days unused.
    pub unused_days: u32,
}

/// Move regular files in `tree` whose mtime is older than
/// `older_than_days` onto OST pool `pool`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Migrate {
    /// Its name, in the log.
    pub name: String,
    /// The tree, from the file system's root (default: all of it).
    #[serde(default = "slash")]
    pub tree: String,
    /// Days since the last data change.
    pub older_than_days: u32,
    /// The pool to move to.
    pub pool: String,
    /// Stripes of the new layout (default: the file system's).
    #[serde(default)]
    pub stripe_count: Option<i32>,
}

fn slash() -> String {
    "/".into()
}

/// Whom an alert counts by.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Per {
    /// Owner.
    User,
    /// Group.
    Group,
    /// Project id.
    Project,
}

impl Per {
    /// The catalog column it counts by.
    pub fn column(self) -> &'static str {
        match self {
            Per::User => "uid",
            Per::Group => "gid",
            Per::Project => "projid",
        }
    }

    /// Its name, in reports and the log.
    pub fn name(self) -> &'static str {
        match self {
            Per::User => "user",
            Per::Group => "group",
            Per::Project => "project",
        }
    }
}

/// Say when a user, group or project holds more than `bytes` or
/// `inodes`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Alert {
    /// Its name, in the log.
    pub name: String,
    /// Counted by.
    pub per: Per,
    /// Bytes of regular files (`10T`, `500G`, a number).
    #[serde(default)]
    pub bytes: Option<Size>,
    /// Inodes.
    #[serde(default)]
    pub inodes: Option<u64>,
}

/// A size, written as a number of bytes or with a K/M/G/T/P suffix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Size(pub u64);

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Size, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u64),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(n) => Ok(Size(n)),
            Raw::S(s) => parse_size(&s).map(Size).map_err(serde::de::Error::custom),
        }
    }
}

/// `10T`, `500G`, `4k`, `123`: bytes (powers of 1024).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mul) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m: u64 = match c.to_ascii_uppercase() {
                'K' => 1 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'T' => 1 << 40,
                'P' => 1 << 50,
                _ => return Err(format!("{s:?}: the unit must be K, M, G, T or P")),
            };
            (&t[..i], m)
        }
        _ => (t, 1),
    };
    let n: u64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a size (a number, perhaps with K, M, G, T or P)"))?;
    n.checked_mul(mul)
        .ok_or_else(|| format!("{s:?} is too large"))
}

impl Rules {
    /// Parse and check the rules in `text` (from `origin`, for messages);
    /// `pools` are the file system's pools (`None`: not checked).
    pub fn parse(text: &str, origin: &str, pools: Option<&[String]>) -> anyhow::Result<Rules> {
        let r: Rules =
            toml::from_str(text).with_context(|| format!("{origin}: not valid rules"))?;
        let mut names = std::collections::BTreeSet::new();
        let all = r
            .purge
            .iter()
            .map(|p| (&p.name, Some(&p.tree)))
            .chain(r.migrate.iter().map(|m| (&m.name, Some(&m.tree))))
            .chain(r.alert.iter().map(|a| (&a.name, None)));
        for (name, tree) in all {
            if name.trim().is_empty() {
                bail!("{origin}: a rule has an empty name");
            }
            if !names.insert(name.clone()) {
                bail!("{origin}: two rules are named {name:?}");
            }
            if let Some(t) = tree {
                if !t.starts_with('/') {
                    bail!("{origin}: rule {name:?}: tree {t:?} must start with / (the file system's root)");
                }
            }
        }
        for p in &r.purge {
            if p.unused_days == 0 {
                bail!(
                    "{origin}: purge rule {:?}: unused_days must be at least 1",
                    p.name
                );
            }
        }
        for m in &r.migrate {
            if let Some(c) = m.stripe_count {
                if c == 0 || c < -1 {
                    bail!("{origin}: migrate rule {:?}: stripe_count must be -1 (all OSTs) or positive", m.name);
                }
            }
            if let Some(have) = pools {
                if !have.contains(&m.pool) {
                    bail!(
                        "{origin}: migrate rule {:?}: no OST pool {} (the pools are: {})",
                        m.name,
                        m.pool,
                        if have.is_empty() {
                            "none".to_string()
                        } else {
                            have.join(", ")
                        }
                    );
                }
            }
        }
        for a in &r.alert {
            if a.bytes.is_none() && a.inodes.is_none() {
                bail!(
                    "{origin}: alert rule {:?}: give bytes, inodes or both",
                    a.name
                );
            }
        }
        Ok(r)
    }

    /// Read and check the rules file at `path`.
    pub fn load(path: &std::path::Path, pools: Option<&[String]>) -> anyhow::Result<Rules> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the rules file {}", path.display()))?;
        Rules::parse(&text, &path.display().to_string(), pools)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_file_parses() {
        let r = Rules::parse(
            r#"
[[purge]]
name = "scratch"
tree = "/scratch"
unused_days = 30
[[migrate]]
name = "cold"
older_than_days = 90
pool = "archive"
[[alert]]
name = "big"
per = "project"
bytes = "10T"
"#,
            "t",
            Some(&["archive".to_string()]),
        )
        .expect("parses");
        assert_eq!(r.purge[0].unused_days, 30);
        assert_eq!(r.migrate[0].tree, "/");
        assert_eq!(r.alert[0].bytes, Some(Size(10 << 40)));
        assert_eq!(r.alert[0].per, Per::Project);
    }

    #[test]
    fn malformed_rules_are_refused_with_the_reason() {
        let pools = ["fast".to_string()];
        for (text, why) in [
            ("[[purge]]\nname='a'\ntree='/x'\n", "unused_days"),
            ("[[purge]]\nname='a'\ntree='/x'\nunused_days=3\nsize=4\n", "unknown field"),
            ("[[purge]]\nname='a'\ntree='x'\nunused_days=3\n", "must start with /"),
            ("[[purge]]\nname='a'\ntree='/x'\nunused_days=0\n", "at least 1"),
            ("[[migrate]]\nname='m'\nolder_than_days=1\npool='slow'\n", "no OST pool slow"),
            ("[[alert]]\nname='a'\nper='user'\n", "give bytes"),
            ("[[alert]]\nname='a'\nper='team'\nbytes=1\n", "unknown variant"),
            ("[[alert]]\nname='a'\nper='user'\nbytes='12Q'\n", "unit"),
            ("[[purge]]\nname='a'\ntree='/x'\nunused_days=3\n[[alert]]\nname='a'\nper='user'\ninodes=1\n", "two rules"),
            ("[[purge]\n", "not valid rules"),
            ("[[delete]]\nname='a'\n", "unknown field"),
        ] {
            let e = format!("{:#}", Rules::parse(text, "rules.toml", Some(&pools)).expect_err(text));
            assert!(e.contains(why), "{text}: {e}");
        }
    }
}
