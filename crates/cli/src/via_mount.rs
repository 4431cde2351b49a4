//! The lfs-style tools for users who cannot read the mount's key: they
//! ask the mount itself, through the `loom.` extended attributes it
//! answers as the calling process (see `loom_fuse::tools`), as Lustre's
//! `lfs` goes through ioctls on its mount. What the MDT would refuse the
//! user is refused here too.

use crate::registry::Entry;
use crate::tools::{GetstripeArgs, Stripes};
use anyhow::{bail, Context};
use loom_proto::StripeSpec;
use std::path::Path;

/// Whether this process may read the mount's key (else it asks the mount).
pub(crate) fn key_readable(e: &Entry) -> bool {
    std::fs::File::open(&e.key_file).is_ok()
}

/// The message of a command that needs the key, for a user who cannot
/// read it.
pub(crate) fn needs_key(what: &str, e: &Entry) -> anyhow::Error {
    anyhow::anyhow!(
        "{what} needs the mount's key ({}), which only root may read; as a user, \
         getstripe, setstripe of a directory, getdirstripe, mkdir -i/-c, df and quota \
         work through the mount",
        e.key_file.display()
    )
}

fn get(path: &Path, name: &str) -> anyhow::Result<serde_json::Value> {
    let mut buf = vec![0u8; 1 << 16];
    let n = rustix::fs::getxattr(path, name, &mut buf[..])
        .map_err(std::io::Error::from)
        .with_context(|| format!("{}: asking the mount for {name}", path.display()))?;
    serde_json::from_slice(&buf[..n])
        .with_context(|| format!("{}: the mount's {name}", path.display()))
}

pub(crate) fn get_as<T: serde::de::DeserializeOwned>(path: &Path, name: &str) -> anyhow::Result<T> {
    serde_json::from_value(get(path, name)?)
        .with_context(|| format!("{}: the mount's {name}", path.display()))
}

/// `df` of the mount at `mountpoint`, through it.
pub(crate) fn df(mountpoint: &Path) -> anyhow::Result<Vec<loom_client::meta::TargetUsage>> {
    get_as(mountpoint, "loom.df")
}

/// `quota` of `who` through the mount at `mountpoint`: its usage per
/// target and its limits, if the caller may see them.
pub(crate) fn quota(
    mountpoint: &Path,
    who: loom_proto::quota::QuotaId,
) -> anyhow::Result<(
    Vec<(loom_proto::msg::TargetId, loom_proto::quota::QuotaUsage)>,
    loom_client::quota::QuotaState,
)> {
    let (kind, id) = match who.kind {
        loom_proto::quota::QuotaKind::User => ("u", who.id),
        loom_proto::quota::QuotaKind::Group => ("g", who.id),
        loom_proto::quota::QuotaKind::Project => ("p", who.id),
    };
    let name = format!("loom.quota.{kind}.{id}");
    get_as(mountpoint, &name).map_err(|e| {
        let denied = e
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.raw_os_error() == Some(libc::EPERM));
        if denied {
            anyhow::anyhow!("{who}: only root may see the usage of another user or group")
        } else {
            e
        }
    })
}

/// `getdirstripe` of directory `path` through the mount (`default`:
/// where its new subdirectories go).
pub(crate) fn getdirstripe(
    default: bool,
    path: &Path,
) -> anyhow::Result<crate::dirtools::DirShown> {
    if !std::fs::metadata(path)
        .with_context(|| format!("{}", path.display()))?
        .is_dir()
    {
        bail!("{} is not a directory", path.display());
    }
    Ok(if default {
        crate::dirtools::DirShown::Default(get_as(path, "loom.dir_default")?)
    } else {
        crate::dirtools::DirShown::Placed(get_as(path, "loom.dirstripe")?)
    })
}

/// `setstripe` of a new file `path`: made through the mount with its own
/// striping.
pub(crate) fn create(path: &Path, perm: u32, stripe: StripeSpec) -> anyhow::Result<()> {
    make_in_parent(path, "loom.create", |name| loom_fuse::tools::CreateAsked {
        name,
        perm,
        stripe,
    })
}

/// `mkdir -i/-c` of `path` through the mount.
pub(crate) fn mkdir(
    path: &Path,
    perm: u32,
    stripe: loom_proto::msg::DirStripe,
) -> anyhow::Result<()> {
    make_in_parent(path, "loom.mkdir", |name| loom_fuse::tools::MkdirAsked {
        name,
        perm,
        stripe,
    })
    .map_err(|e| {
        // The MDT's reason does not cross the kernel; EPERM here is the
        // site's rule (EACCES would be the directory's mode).
        let eperm = e
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.raw_os_error() == Some(libc::EPERM));
        match eperm {
            true => e.context(
                "the site reserves remote and striped directories to root or a group \
                 (site parameter remote_dir_gid: `loom get-param MOUNT`)",
            ),
            false => e,
        }
    })
}

/// Make what `path` names by setting the mount's attribute `attr` of its
/// parent to `asked(name)`.
fn make_in_parent<T: serde::Serialize>(
    path: &Path,
    attr: &str,
    asked: impl FnOnce(String) -> T,
) -> anyhow::Result<()> {
    let Some(name) = path.file_name() else {
        bail!("{}: names nothing new", path.display());
    };
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = name
        .to_str()
        .with_context(|| format!("{}: the name is not UTF-8", path.display()))?
        .to_string();
    let value = serde_json::to_vec(&asked(name))?;
    rustix::fs::setxattr(parent, attr, &value, rustix::fs::XattrFlags::empty())
        .map_err(std::io::Error::from)
        .with_context(|| format!("{}", path.display()))
}

/// `getstripe` of `path` through the mount.
pub(crate) fn getstripe(a: &GetstripeArgs, path: &Path) -> anyhow::Result<Stripes> {
    let m = std::fs::metadata(path).with_context(|| format!("{}", path.display()))?;
    if a.mdt {
        return Ok(Stripes::Mdt(get_as(path, "loom.mdt")?));
    }
    if m.is_dir() {
        let compress = get_as(path, "loom.default_compress")?;
        if a.compress {
            return Ok(Stripes::Compress(compress));
        }
        return Ok(Stripes::Dir {
            default: get_as(path, "loom.default_layout")?,
            compress,
        });
    }
    if !m.is_file() {
        bail!(
            "{} has no layout (not a regular file or directory)",
            path.display()
        );
    }
    let layout: loom_proto::Layout = get_as(path, "loom.layout")?;
    Ok(if a.compress {
        Stripes::Compress(layout.compress)
    } else {
        Stripes::File(layout)
    })
}

/// `setstripe` of directory `path`'s default striping (None: removed)
/// through the mount.
pub(crate) fn set_default_stripe(path: &Path, spec: Option<StripeSpec>) -> anyhow::Result<()> {
    let value = spec.map(|s| serde_json::to_vec(&s)).transpose()?;
    set_on_directory(
        path,
        "the striping of an existing file cannot be changed; setstripe creates new files \
         and sets a directory's default striping",
        "loom.default_stripe",
        value,
    )
}

/// Set the mount's attribute `name` of directory `path` to `value` (None:
/// the default removed), or say why not (`not_dir`).
pub(crate) fn set_on_directory(
    path: &Path,
    not_dir: &str,
    name: &str,
    value: Option<Vec<u8>>,
) -> anyhow::Result<()> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => bail!("{}: {not_dir}", path.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("{}: no such directory ({not_dir})", path.display())
        }
        Err(e) => return Err(e).with_context(|| format!("{}", path.display())),
    }
    rustix::fs::setxattr(
        path,
        name,
        &value.unwrap_or_default(),
        rustix::fs::XattrFlags::empty(),
    )
    .map_err(std::io::Error::from)
    .with_context(|| format!("{}", path.display()))
}
