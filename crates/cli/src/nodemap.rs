//! `loom nodemap`: what the servers make of each client network's
//! requests (root squash, id maps, read-only), kept by the MGS and
//! applied by every server within seconds (as Lustre's `lctl nodemap_*`).

use crate::registry;
use crate::tools::{caller, connect, errno};
use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use loom_proto::nodemap::{Fileset, Net, Nodemap};
use std::path::{Path, PathBuf};

/// `loom nodemap ...`.
#[derive(Subcommand, Debug)]
pub enum NodemapCmd {
    /// Make or replace nodemap NAME (root). Example, root squashed and
    /// read-only for a login network: `loom nodemap set /mnt/loom login
    /// --net 10.2.0.0/16 --readonly`.
    Set(SetArgs),
    /// Remove nodemap NAME (root): its clients are served as they say.
    Del(DelArgs),
    /// Show every nodemap.
    List(ListArgs),
}

/// `loom nodemap set MOUNT NAME --net CIDR... [...]`.
#[derive(Args, Debug)]
#[command(after_help = "A client connection is served under the nodemap whose \
network holds its address (the most specific one); clients no nodemap holds, \
and connections made with the cluster key, are served as they say. The \
connections of clients whose nodemap changes are closed and made again, \
so a change holds from their next request. A client whose ids are mapped \
or squashed takes no leases.")]
pub struct SetArgs {
    /// A path on the file system's mount.
    pub path: PathBuf,
    /// The nodemap's name.
    pub name: String,
    /// A client network, ADDR/PREFIX or one ADDR (repeat for several).
    #[arg(long = "net", required = true, value_name = "CIDR")]
    pub nets: Vec<String>,
    /// Root stays root (otherwise it is squashed).
    #[arg(long)]
    pub admin: bool,
    /// Ids not mapped are squashed too (otherwise they pass as they are).
    #[arg(long)]
    pub untrusted: bool,
    /// The uid squashed ids become.
    #[arg(long, default_value_t = 65534)]
    pub squash_uid: u32,
    /// The gid squashed ids become.
    #[arg(long, default_value_t = 65534)]
    pub squash_gid: u32,
    /// Map a client uid to a file system uid (repeat for several).
    #[arg(long = "map-uid", value_name = "CLIENT:FS")]
    pub map_uids: Vec<String>,
    /// Map a client gid to a file system gid (repeat for several).
    #[arg(long = "map-gid", value_name = "CLIENT:FS")]
    pub map_gids: Vec<String>,
    /// Refuse every change from these clients (EROFS).
    #[arg(long)]
    pub readonly: bool,
    /// Confine these clients to a directory, given as a path on this
    /// mount (Lustre's fileset): they mount it as their root and reach
    /// nothing outside it. It stays their fileset if renamed.
    #[arg(long, value_name = "DIR")]
    pub fileset: Option<PathBuf>,
}

/// `loom nodemap del MOUNT NAME`.
#[derive(Args, Debug)]
pub struct DelArgs {
    /// A path on the file system's mount.
    pub path: PathBuf,
    /// The nodemap's name.
    pub name: String,
}

/// `loom nodemap list MOUNT`.
#[derive(Args, Debug)]
pub struct ListArgs {
    /// A path on the file system's mount.
    pub path: PathBuf,
}

fn id_pairs(what: &str, v: &[String]) -> anyhow::Result<Vec<(u32, u32)>> {
    v.iter()
        .map(|s| {
            let (c, f) = s
                .split_once(':')
                .with_context(|| format!("--map-{what} {s:?}: give CLIENT:FS ids"))?;
            let id = |x: &str| {
                x.trim()
                    .parse::<u32>()
                    .with_context(|| format!("--map-{what} {s:?}: {x:?} is not a numeric id"))
            };
            Ok((id(c)?, id(f)?))
        })
        .collect()
}

pub fn run(c: NodemapCmd) -> anyhow::Result<()> {
    match c {
        NodemapCmd::Set(a) => set(a),
        NodemapCmd::Del(a) => {
            let (entry, _) = registry::find(&a.path)?;
            let s = connect(entry)?;
            s.rt.block_on(s.client.set_nodemap(&caller(), &a.name, None))
                .map_err(|e| errno(e, &format!("removing nodemap {} (root only)", a.name)))?;
            println!("nodemap {} removed", a.name);
            Ok(())
        }
        NodemapCmd::List(a) => {
            let (entry, _) = registry::find(&a.path)?;
            let s = connect(entry)?;
            let maps =
                s.rt.block_on(s.client.nodemaps())
                    .map_err(|e| errno(e, "reading the nodemaps"))?;
            for m in maps {
                println!("{}", show(&m));
            }
            Ok(())
        }
    }
}

fn set(a: SetArgs) -> anyhow::Result<()> {
    let nets = a
        .nets
        .iter()
        .map(|n| Net::parse(n).map_err(|e| anyhow::anyhow!("--net {e}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let m = Nodemap {
        admin: a.admin,
        trusted: !a.untrusted,
        squash_uid: a.squash_uid,
        squash_gid: a.squash_gid,
        uids: id_pairs("uid", &a.map_uids)?,
        gids: id_pairs("gid", &a.map_gids)?,
        readonly: a.readonly,
        ..Nodemap::new(&a.name, nets)
    };
    // Checked here first, for a clear error before anything is sent.
    if let Err(e) = m.validate() {
        bail!(e);
    }
    let (entry, _) = registry::find(&a.path)?;
    let s = connect(entry)?;
    let mut m = m;
    if let Some(dir) = &a.fileset {
        m.fileset = Some(fileset(&s, dir)?);
    }
    s.rt.block_on(s.client.set_nodemap(&caller(), &a.name, Some(m.clone())))
        .map_err(|e| errno(e, &format!("setting nodemap {} (root only)", a.name)))?;
    println!("{}", show(&m));
    Ok(())
}

/// The fileset `dir` names: a directory on the same file system as the
/// mount the command was given.
fn fileset(s: &crate::tools::Session, dir: &Path) -> anyhow::Result<Fileset> {
    let (entry, rel) = registry::find(dir)?;
    if entry.mgs != s.entry.mgs || entry.fsname != s.entry.fsname {
        bail!(
            "--fileset {}: not on {}:/{}",
            dir.display(),
            s.entry.mgs,
            s.entry.fsname
        );
    }
    let bytes = rel.as_os_str().as_encoded_bytes();
    let a =
        s.rt.block_on(s.client.resolve_path_as(&caller(), bytes))
            .map_err(|e| errno(e, &format!("--fileset {}", dir.display())))?;
    if a.kind != loom_proto::msg::FileKind::Dir {
        bail!("--fileset {}: not a directory", dir.display());
    }
    Ok(Fileset {
        fid: a.fid,
        path: format!("/{}", rel.display()),
    })
}

/// One line per nodemap: name, networks, then what it does.
fn show(m: &Nodemap) -> String {
    let nets: Vec<String> = m.nets.iter().map(|n| n.to_string()).collect();
    let pairs = |v: &[(u32, u32)]| {
        v.iter()
            .map(|(c, f)| format!("{c}:{f}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut line = format!("{} net={}", m.name, nets.join(","));
    line += if m.admin { " admin" } else { " root_squash" };
    line += if m.trusted { " trusted" } else { " untrusted" };
    line += &format!(" squash={}:{}", m.squash_uid, m.squash_gid);
    if !m.uids.is_empty() {
        line += &format!(" map_uid={}", pairs(&m.uids));
    }
    if !m.gids.is_empty() {
        line += &format!(" map_gid={}", pairs(&m.gids));
    }
    line += if m.readonly { " readonly" } else { " rw" };
    if let Some(f) = &m.fileset {
        line += &format!(" fileset={} ({})", f.path, f.fid);
    }
    line
}
