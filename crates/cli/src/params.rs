//! `loom set-param` and `loom get-param`: the site's parameters, kept by
//! the MGS and read by every target within seconds (as Lustre's
//! `lctl set_param -P`).

use crate::registry;
use crate::tools::{caller, connect, errno};
use anyhow::bail;
use clap::Args;
use loom_proto::msg::SiteParams;
use std::path::PathBuf;

fn known() -> String {
    SiteParams::KNOWN
        .iter()
        .map(|(n, what)| format!("  {n}: {what}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `loom set-param MOUNT NAME=VALUE...`.
#[derive(Args, Debug)]
#[command(after_help = format!("Parameters:\n{}\n\nExample, remote and striped \
directories for group 2000 only: `loom set-param /mnt/loom remote_dir_gid=2000`.", known()))]
pub struct SetParamArgs {
    /// A path on the file system's mount.
    pub path: PathBuf,
    /// NAME=VALUE pairs, set in order.
    #[arg(required = true, value_name = "NAME=VALUE")]
    pub settings: Vec<String>,
}

/// `loom get-param MOUNT [NAME...]`.
#[derive(Args, Debug)]
#[command(after_help = format!("Parameters:\n{}", known()))]
pub struct GetParamArgs {
    /// A path on the file system's mount.
    pub path: PathBuf,
    /// The parameters to show (all by default).
    pub names: Vec<String>,
}

pub fn set_param(a: SetParamArgs) -> anyhow::Result<()> {
    let mut pairs = Vec::new();
    for s in &a.settings {
        let Some((name, value)) = s.split_once('=') else {
            bail!("{s:?} is not NAME=VALUE");
        };
        // Checked here first, for a clear error before any is set.
        SiteParams::default()
            .set(name, value)
            .map_err(|m| anyhow::anyhow!(m))?;
        pairs.push((name.to_string(), value.to_string()));
    }
    let (entry, _) = registry::find(&a.path)?;
    let s = connect(entry)?;
    let me = caller();
    for (name, value) in pairs {
        s.rt.block_on(s.client.set_param(&me, &name, &value))
            .map_err(|e| errno(e, &format!("setting {name} (root only)")))?;
        println!("{name}={value}");
    }
    Ok(())
}

pub fn get_param(a: GetParamArgs) -> anyhow::Result<()> {
    let (entry, _) = registry::find(&a.path)?;
    let s = connect(entry)?;
    let params =
        s.rt.block_on(s.client.site_params())
            .map_err(|e| errno(e, "reading the site parameters"))?;
    let shown = params.show();
    for n in &a.names {
        if !shown.iter().any(|(k, _)| k == n) {
            bail!("no parameter {n:?}\nParameters:\n{}", known());
        }
    }
    for (k, v) in shown {
        if a.names.is_empty() || a.names.iter().any(|n| n == k) {
            println!("{k}={v}");
        }
    }
    Ok(())
}
