//! A target directory's identity, written by `loom format`.
//!
//! `DIR/target.toml` names the file system, role, index and a uuid. A server
//! refuses a target formatted for another file system, and the MGS refuses a
//! second target claiming an index with a different uuid.

use anyhow::{bail, Context};
use loom_proto::msg::{Role, TargetId};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Version of the target directory format.
pub const TARGET_FORMAT_VERSION: u32 = 1;
const IDENTITY_FILE: &str = "target.toml";

/// What `target.toml` holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetIdentity {
    /// Directory format version.
    pub format_version: u32,
    /// File system name.
    pub fsname: String,
    /// MGS, MDT or OST.
    pub role: Role,
    /// Index among targets of the role.
    pub index: u32,
    /// Unique id made at format time.
    pub uuid: String,
    /// Which replica of the target this directory holds (`loom format
    /// --replica R --replicas N`); none: the target is not replicated.
    #[serde(default)]
    pub replica: Option<loom_proto::replica::ReplicaOf>,
}

impl TargetIdentity {
    /// The target id.
    pub fn id(&self) -> TargetId {
        TargetId {
            role: self.role,
            index: self.index,
        }
    }
}

/// Check a file system name: 1 to 8 characters of [a-zA-Z0-9_-], as Lustre.
pub fn check_fsname(name: &str) -> anyhow::Result<()> {
    if name.is_empty()
        || name.len() > 8
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        bail!("file system name {name:?} must be 1 to 8 characters of letters, digits, '_' or '-'");
    }
    Ok(())
}

/// Read the identity of the target in `dir`.
pub fn load(dir: &Path) -> anyhow::Result<TargetIdentity> {
    let p = dir.join(IDENTITY_FILE);
    let s = std::fs::read_to_string(&p).with_context(|| {
        format!(
            "{} is not a formatted loomfs target (no {}); run `loom format` first",
            dir.display(),
            p.display()
        )
    })?;
    let id: TargetIdentity =
        toml::from_str(&s).with_context(|| format!("reading {}", p.display()))?;
    if id.format_version > TARGET_FORMAT_VERSION {
        bail!("{} was formatted by a newer loomfs (format {}; this one reads up to {TARGET_FORMAT_VERSION})", dir.display(), id.format_version);
    }
    Ok(id)
}

/// Format `dir` as a target. An existing target of the same file system,
/// role and index is kept as it is (formatting is idempotent); anything
/// else already there is refused unless `reformat` is set, which wipes it.
pub fn format(
    dir: &Path,
    fsname: &str,
    role: Role,
    index: u32,
    replica: Option<loom_proto::replica::ReplicaOf>,
    reformat: bool,
) -> anyhow::Result<TargetIdentity> {
    check_fsname(fsname)?;
    if role == Role::Mgs && index != 0 {
        bail!("there is one MGS per file system; its index is 0");
    }
    if let Some(r) = replica {
        if role == Role::Mgs {
            bail!("the MGS is not replicated: only MDTs and OSTs have replicas");
        }
        if r.of < 2 || r.replica >= r.of {
            bail!(
                "replica {} of {}: a replicated target has 2 or more replicas, numbered from 0",
                r.replica,
                r.of
            );
        }
    }
    if dir.join(IDENTITY_FILE).exists() && !reformat {
        let old = load(dir)?;
        if old.fsname != fsname {
            bail!("{} is formatted for file system '{}', not '{fsname}'; refusing (use --reformat to wipe it)", dir.display(), old.fsname);
        }
        if old.role != role || old.index != index || old.replica != replica {
            bail!(
                "{} is already {} of '{}'; refusing (use --reformat to wipe it)",
                dir.display(),
                old.id(),
                old.fsname
            );
        }
        return Ok(old);
    }
    if dir.exists() {
        let nonempty = std::fs::read_dir(dir)
            .with_context(|| format!("reading {}", dir.display()))?
            .next()
            .is_some();
        if nonempty && !reformat {
            bail!(
                "{} is not empty; refusing to format it (use --reformat to wipe it)",
                dir.display()
            );
        }
        if nonempty {
            std::fs::remove_dir_all(dir).with_context(|| format!("wiping {}", dir.display()))?;
        }
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let id = TargetIdentity {
        format_version: TARGET_FORMAT_VERSION,
        fsname: fsname.to_string(),
        role,
        index,
        uuid: uuid::Uuid::new_v4().to_string(),
        replica,
    };
    let text = toml::to_string(&id).context("encoding target identity")?;
    loom_store::durable::write_atomic(&dir.join(IDENTITY_FILE), text.as_bytes())
        .with_context(|| format!("writing {}", dir.join(IDENTITY_FILE).display()))?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_is_idempotent_and_refuses_another_file_system() {
        let d = tempfile::tempdir().expect("tempdir");
        let t = d.path().join("ost0");
        let a = format(&t, "alpha", Role::Ost, 0, None, false).expect("format");
        assert_eq!(
            format(&t, "alpha", Role::Ost, 0, None, false).expect("again"),
            a
        );
        let e = format(&t, "beta", Role::Ost, 0, None, false).expect_err("other fs");
        assert!(
            e.to_string().contains("formatted for file system 'alpha'"),
            "{e}"
        );
        assert!(format(&t, "alpha", Role::Ost, 1, None, false).is_err());
        let b = format(&t, "beta", Role::Ost, 0, None, true).expect("reformat");
        assert_ne!(a.uuid, b.uuid);
    }

    #[test]
    fn bad_names_are_refused() {
        assert!(check_fsname("").is_err());
        assert!(check_fsname("waytoolongname").is_err());
        assert!(check_fsname("a/b").is_err());
        assert!(check_fsname("scratch").is_ok());
    }
}
