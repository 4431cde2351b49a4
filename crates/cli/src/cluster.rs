//! `loom format` and `loom keygen`.

use anyhow::{bail, Context};
use clap::Args;
use loom_proto::msg::Role;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Options of `loom format`.
#[derive(Args)]
pub struct FormatArgs {
    /// File system name (1 to 8 of [a-zA-Z0-9_-]).
    #[arg(long)]
    pub fsname: String,
    /// Make the management service target.
    #[arg(long, group = "role")]
    pub mgs: bool,
    /// Make a metadata target.
    #[arg(long, group = "role")]
    pub mdt: bool,
    /// Make an object storage target.
    #[arg(long, group = "role")]
    pub ost: bool,
    /// Index of the MDT or OST.
    #[arg(long, default_value_t = 0)]
    pub index: u32,
    /// This directory holds replica R (0 to N-1) of a replicated MDT or OST,
    /// each replica on a server of its own: the MGS makes the first to
    /// register its primary, and the others copies of it (with
    /// --replicas).
    #[arg(long, value_name = "R", requires = "replicas")]
    pub replica: Option<u32>,
    /// How many replicas the target has (2 or more; with --replica).
    #[arg(long, value_name = "N", requires = "replica", value_parser = clap::value_parser!(u32).range(2..))]
    pub replicas: Option<u32>,
    /// Wipe whatever the directory holds (a target of another file system included).
    #[arg(long)]
    pub reformat: bool,
    /// The target directory.
    pub dir: PathBuf,
}

pub fn format(a: FormatArgs) -> anyhow::Result<()> {
    let role = match (a.mgs, a.mdt, a.ost) {
        (true, false, false) => Role::Mgs,
        (false, true, false) => Role::Mdt,
        (false, false, true) => Role::Ost,
        _ => bail!("say which target to make: --mgs, --mdt or --ost"),
    };
    let replica = match (a.replica, a.replicas) {
        (Some(replica), Some(of)) => Some(loom_proto::replica::ReplicaOf { replica, of }),
        _ => None,
    };
    let id = loom_server::target::format(&a.dir, &a.fsname, role, a.index, replica, a.reformat)?;
    println!(
        "{}: {} of file system '{}' (uuid {})",
        a.dir.display(),
        id.id(),
        id.fsname,
        id.uuid
    );
    Ok(())
}

/// Write a fresh cluster key to `path`, readable by its owner only.
pub fn keygen(path: &Path) -> anyhow::Result<()> {
    write_key(path, &loom_rpc::ClusterKey::generate())
}

/// Write the client key of the cluster key in `cluster` to `path`: what
/// client nodes hold instead of the cluster key (docs/OPERATIONS.md).
pub fn client_keygen(cluster: &Path, path: &Path) -> anyhow::Result<()> {
    let key = loom_server::node::load_key(cluster)?;
    write_key(path, &key.client_key())
}

fn write_key(path: &Path, key: &loom_rpc::ClusterKey) -> anyhow::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating key file {}", path.display()))?;
    writeln!(f, "{}", key.to_hex())?;
    f.sync_all()?;
    Ok(())
}
