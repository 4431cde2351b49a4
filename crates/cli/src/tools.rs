//! lfs-style tools: `setstripe`, `getstripe`, `df` (directory placement
//! is in `dirtools`).
//!
//! They find the mount that holds the path in the mount registry and talk
//! to the cluster through the client library, as `lfs` does through ioctls.

use crate::registry::{self, Entry};
use anyhow::{bail, Context};
use clap::Args;
use loom_client::meta::{OpCounts, TargetUsage};
use loom_client::{Caller, Client, ClientOptions};
use loom_proto::layout::{ComponentSpec, LayoutSpec, Pattern};
use loom_proto::msg::{FileKind, Role, StatFs, TargetId};
use loom_proto::{Compress, Errno, StripeSpec};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Options of `loom setstripe`.
#[derive(Args)]
#[command(
    after_help = "Component layouts (progressive file layouts, Data-on-MDT), on a directory: \
each -E END starts a component that ends at END (-1: end of file), and the -L, -c, -S, -i and -p \
after it apply to that component. -L mdt keeps the component's bytes on the file's MDT with its \
inode (the first component only, at most 1M). Example: small files on the MDT, larger ones on one \
OST, the rest of big files on all OSTs:
  loom setstripe -E 64K -L mdt -E 1G -c 1 -E -1 -c -1 DIR"
)]
pub struct SetstripeArgs {
    /// Stripe count: -1 for all OSTs.
    #[arg(short = 'c', long = "stripe-count", allow_negative_numbers = true)]
    pub count: Vec<i32>,
    /// Stripe size, e.g. 1M, 4M, 65536 (multiple of 64K).
    #[arg(short = 'S', long = "stripe-size", value_parser = parse_size)]
    pub size: Vec<u64>,
    /// Index of the first OST.
    #[arg(short = 'i', long = "stripe-index", allow_negative_numbers = true)]
    pub index: Vec<i32>,
    /// OST pool.
    #[arg(short = 'p', long)]
    pub pool: Vec<String>,
    /// End of a component (a size such as 64K or 1G; -1: end of file):
    /// starts a component of a directory's default layout.
    #[arg(short = 'E', long = "component-end", value_parser = parse_end, allow_negative_numbers = true)]
    pub ends: Vec<u64>,
    /// Where the current component's bytes live: `mdt` (Data-on-MDT) or
    /// `raid0` (striped over OSTs, the default).
    #[arg(short = 'L', long = "layout", value_parser = ["mdt", "raid0"])]
    pub layouts: Vec<String>,
    /// Compress new files' data on the OSTs: lz4, zstd, zstd:LEVEL (1 to
    /// 19) or off (which stops a default set higher up). Set on a
    /// directory, its new files (and new subdirectories) take it; on the
    /// mount's root it is the file system's default. Files keep what they
    /// were made with.
    #[arg(short = 'Z', long, value_name = "ALGO[:LEVEL]")]
    pub compress: Option<Compress>,
    /// Remove a directory's default striping (and compression).
    #[arg(short = 'd', long)]
    pub delete: bool,
    /// A new file to create with this striping, or a directory whose
    /// default striping to set.
    pub path: PathBuf,
}

/// `-E`'s value: a size, or -1 for the end of the file.
fn parse_end(s: &str) -> Result<u64, String> {
    if s == "-1" || s.eq_ignore_ascii_case("eof") {
        return Ok(u64::MAX);
    }
    parse_size(s)
}

/// The components a `setstripe -E ...` command line names, in order: its
/// words are read again, since each -E opens a component that the options
/// after it (until the next -E) describe. Clap has checked each value.
pub(crate) fn components_from_args(words: &[String]) -> Result<LayoutSpec, String> {
    let mut comps: Vec<ComponentSpec> = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let (flag, value) = match words[i].split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (words[i].clone(), None),
        };
        let takes = matches!(
            flag.as_str(),
            "-E" | "--component-end"
                | "-L"
                | "--layout"
                | "-c"
                | "--stripe-count"
                | "-S"
                | "--stripe-size"
                | "-i"
                | "--stripe-index"
                | "-p"
                | "--pool"
        );
        if !takes {
            i += 1;
            continue;
        }
        let v = match value {
            Some(v) => v,
            None => {
                i += 1;
                words
                    .get(i)
                    .cloned()
                    .ok_or(format!("{flag} needs a value"))?
            }
        };
        i += 1;
        if matches!(flag.as_str(), "-E" | "--component-end") {
            comps.push(ComponentSpec {
                end: parse_end(&v)?,
                on_mdt: false,
                stripe: StripeSpec::default(),
            });
            continue;
        }
        let Some(c) = comps.last_mut() else {
            return Err(format!("{flag} {v} comes before the first -E: with components, each option follows the -E of its component"));
        };
        match flag.as_str() {
            "-L" | "--layout" => c.on_mdt = v == "mdt",
            "-c" | "--stripe-count" => {
                c.stripe.count = v
                    .parse()
                    .map_err(|_| format!("stripe count {v} is not a number"))?
            }
            "-S" | "--stripe-size" => {
                c.stripe.size = u32::try_from(parse_size(&v)?)
                    .map_err(|_| format!("stripe size {v} is too large"))?
            }
            "-i" | "--stripe-index" => {
                c.stripe.start_ost = v
                    .parse()
                    .map_err(|_| format!("OST index {v} is not a number"))?
            }
            _ => c.stripe.pool = Some(v),
        }
    }
    let spec = LayoutSpec { components: comps };
    spec.validate()?;
    Ok(spec)
}

/// The one value given of an option, if any (without -E, each may be
/// given once).
fn one<T: Clone>(v: &[T], flag: &str) -> anyhow::Result<Option<T>> {
    match v {
        [] => Ok(None),
        [x] => Ok(Some(x.clone())),
        _ => bail!("{flag} given {} times: only with components (-E) can options repeat, one per component", v.len()),
    }
}

/// Options of `loom getstripe`.
#[derive(Args)]
pub struct GetstripeArgs {
    /// Print only the stripe count.
    #[arg(short = 'c', long = "stripe-count")]
    pub count: bool,
    /// Print only the stripe size.
    #[arg(short = 'S', long = "stripe-size")]
    pub size: bool,
    /// Print only the first OST index.
    #[arg(short = 'i', long = "stripe-index")]
    pub index: bool,
    /// Print only the index of the MDT that holds the inode.
    #[arg(short = 'm', long = "mdt-index")]
    pub mdt: bool,
    /// Print only the compression: a file's, or what a directory's new
    /// files get (`off` if none).
    #[arg(short = 'Z', long)]
    pub compress: bool,
    /// Files or directories.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
}

/// Options of `loom df`.
#[derive(Args)]
pub struct DfArgs {
    /// Show inodes instead of space.
    #[arg(short = 'i', long)]
    pub inodes: bool,
    /// Human-readable sizes.
    #[arg(short = 'H', long = "human-readable")]
    pub human: bool,
    /// Warn (on standard error) about every target fuller than this, in
    /// percent of its space or inodes: new files avoid filling OSTs, but a
    /// full one refuses writes to the files already on it.
    #[arg(long, value_name = "PERCENT", default_value_t = 90,
          value_parser = clap::value_parser!(u8).range(1..=100))]
    pub warn_at: u8,
    /// A path on a loomfs mount (default: every loomfs mount).
    pub path: Option<PathBuf>,
}

/// Parse "4M", "64k", "1048576".
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mult) = match s.chars().last() {
        Some('k' | 'K') => (&s[..s.len() - 1], 1u64 << 10),
        Some('m' | 'M') => (&s[..s.len() - 1], 1 << 20),
        Some('g' | 'G') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size (e.g. 1M, 64K, 65536)"))?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("{s:?} is too large"))
}

pub(crate) fn caller() -> Caller {
    Caller {
        uid: nix::unistd::getuid().as_raw(),
        gid: nix::unistd::getgid().as_raw(),
        groups: Vec::new(),
        pid: std::process::id(),
        umask: None,
    }
}

pub(crate) struct Session {
    pub(crate) rt: tokio::runtime::Runtime,
    pub(crate) client: Arc<Client>,
    pub(crate) entry: Entry,
}

impl Drop for Session {
    fn drop(&mut self) {
        // Commit what the tool changed and leave the MDTs' recovery.
        self.rt.block_on(self.client.close());
    }
}

pub(crate) fn connect(entry: Entry) -> anyhow::Result<Session> {
    if !crate::via_mount::key_readable(&entry) {
        return Err(crate::via_mount::needs_key("this command", &entry));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let key = loom_server::node::load_key(&entry.key_file)?;
    let opts = ClientOptions {
        call_timeout: Duration::from_secs(30),
        ..ClientOptions::default()
    };
    let client = rt
        .block_on(Client::connect(&entry.mgs, &entry.fsname, key, opts))
        .with_context(|| format!("connecting to {}:/{}", entry.mgs, entry.fsname))?;
    Ok(Session { rt, client, entry })
}

pub(crate) fn errno(e: Errno, what: &str) -> anyhow::Error {
    anyhow::anyhow!("{what}: {}", std::io::Error::from_raw_os_error(e.raw()))
}

/// Refuse pools the file system at `path` does not have, or that hold
/// no OSTs, naming the ones it has (the MDT refuses them too, with
/// EINVAL alone).
fn check_pools(path: &Path, names: &[String], first: Option<i32>) -> anyhow::Result<()> {
    let pools = crate::pool::list(path)?;
    for n in names {
        match loom_proto::pool::find(&pools, n) {
            Some(p) if p.osts.is_empty() => bail!("OST pool {n} has no OSTs (loom pool add)"),
            Some(p) if first.is_some_and(|i| i >= 0 && !p.osts.contains(&(i as u32))) => bail!(
                "OST index {} is not in pool {n} ({})",
                first.unwrap_or_default(),
                loom_proto::pool::list_osts(&p.osts)
            ),
            Some(_) => {}
            None => {
                let have: Vec<&str> = pools.iter().map(|p| p.name.as_str()).collect();
                bail!(
                    "no OST pool {n}; the pools are: {}",
                    if have.is_empty() {
                        "none".to_string()
                    } else {
                        have.join(", ")
                    }
                )
            }
        }
    }
    Ok(())
}

pub fn setstripe(a: SetstripeArgs) -> anyhow::Result<()> {
    let striping = !(a.count.is_empty()
        && a.size.is_empty()
        && a.index.is_empty()
        && a.pool.is_empty()
        && a.ends.is_empty()
        && a.layouts.is_empty());
    if a.compress.is_some() || a.delete {
        if a.compress.is_some() && a.delete {
            bail!("-d removes the defaults; --compress sets one: give one of them");
        }
        setstripe_compress(&a)?;
        if !striping && !a.delete {
            return Ok(());
        }
    }
    if !a.pool.is_empty() {
        // A first OST is checked against a plain striping's pool.
        let first = a.index.first().filter(|_| a.ends.is_empty()).copied();
        check_pools(&a.path, &a.pool, first)?;
    }
    if !a.ends.is_empty() || !a.layouts.is_empty() {
        return setstripe_components(&a);
    }
    let size = match one(&a.size, "-S")? {
        Some(s) if s > u64::from(u32::MAX) => {
            bail!("stripe size {s} is too large (at most 4G - 64K)")
        }
        Some(s) => s as u32,
        None => 0,
    };
    let spec = StripeSpec {
        count: one(&a.count, "-c")?.unwrap_or(0),
        size,
        start_ost: one(&a.index, "-i")?.unwrap_or(-1),
        pool: one(&a.pool, "-p")?,
    };
    spec.validate().map_err(|m| anyhow::anyhow!(m))?;
    let (entry, rel) = registry::find(&a.path)?;
    if !crate::via_mount::key_readable(&entry) {
        if !a.delete && !a.path.exists() {
            // A new file with its own striping.
            let umask = nix::sys::stat::umask(nix::sys::stat::Mode::empty());
            nix::sys::stat::umask(umask);
            return crate::via_mount::create(&a.path, 0o666 & !umask.bits(), spec);
        }
        let spec = if a.delete { None } else { Some(spec) };
        return crate::via_mount::set_default_stripe(&a.path, spec);
    }
    let s = connect(entry)?;
    let c = caller();
    let shown = a.path.display();
    s.rt.block_on(async {
        match s.client.resolve_path(rel.as_os_str().as_bytes()).await {
            Ok(attr) if attr.kind == FileKind::Dir => {
                let spec = if a.delete { None } else { Some(spec) };
                s.client
                    .set_default_stripe(attr.fid, spec)
                    .await
                    .map_err(|e| errno(e, &format!("{shown}")))
            }
            Ok(_) => bail!(
                "{shown} exists: the striping of an existing file cannot be changed; setstripe creates new files"
            ),
            Err(e) if e == Errno::ENOENT => {
                if a.delete {
                    bail!("{shown}: no such directory");
                }
                let dir = rel.parent().unwrap_or(Path::new(""));
                let name = rel.file_name().unwrap_or_default();
                let parent = s
                    .client
                    .resolve_path(dir.as_os_str().as_bytes())
                    .await
                    .map_err(|e| errno(e, &format!("{shown}")))?;
                let umask = nix::sys::stat::umask(nix::sys::stat::Mode::empty());
                nix::sys::stat::umask(umask);
                let perm = 0o666 & !umask.bits();
                s.client
                    .create(&c, parent.fid, name.as_bytes(), FileKind::File, perm, 0, Some(spec))
                    .await
                    .map(|_| ())
                    .map_err(|e| errno(e, &format!("{shown}")))
            }
            Err(e) => Err(errno(e, &format!("{shown}"))),
        }
    })
}

/// `setstripe --compress` (or `-d`): a directory's default compression.
fn setstripe_compress(a: &SetstripeArgs) -> anyhow::Result<()> {
    let not_dir = if a.delete {
        "-d removes a directory's defaults; this is not a directory"
    } else {
        "compression is set on directories (their new files take it); an existing file keeps what it was made with"
    };
    let via = (
        "loom.default_compress",
        a.compress.map(|c| serde_json::to_vec(&c)).transpose()?,
    );
    on_directory(&a.path, not_dir, via, async |client, c, fid| {
        client.set_default_compress_as(c, fid, a.compress).await
    })
}

/// `setstripe -E ...`: a directory's default component layout.
fn setstripe_components(a: &SetstripeArgs) -> anyhow::Result<()> {
    if a.ends.is_empty() {
        bail!("-L names the layout of a component: start each component with -E END");
    }
    let words: Vec<String> = std::env::args().collect();
    let from = words
        .iter()
        .position(|w| w == "setstripe")
        .map_or(0, |i| i + 1);
    let spec = components_from_args(&words[from..]).map_err(|m| anyhow::anyhow!(m))?;
    let via = ("loom.default_layout", Some(serde_json::to_vec(&spec)?));
    on_directory(
        &a.path,
        "component layouts (-E) are set on directories; their new files take them",
        via,
        async |client, c, fid| client.set_default_layout_as(c, fid, Some(spec)).await,
    )
}

/// Run `set` on the directory at `path` as this process, or say why not
/// (`not_dir`: why anything else is refused). A user who cannot read the
/// mount's key sets the mount's `via` attribute instead (its value, or
/// empty for none).
fn on_directory(
    path: &Path,
    not_dir: &str,
    via: (&str, Option<Vec<u8>>),
    set: impl AsyncFnOnce(&Client, &Caller, loom_proto::Fid) -> Result<(), Errno>,
) -> anyhow::Result<()> {
    let (entry, rel) = registry::find(path)?;
    if !crate::via_mount::key_readable(&entry) {
        return crate::via_mount::set_on_directory(path, not_dir, via.0, via.1);
    }
    let s = connect(entry)?;
    let c = caller();
    let shown = path.display();
    s.rt.block_on(async {
        match s.client.resolve_path(rel.as_os_str().as_bytes()).await {
            Ok(attr) if attr.kind == FileKind::Dir => set(&s.client, &c, attr.fid)
                .await
                .map_err(|e| errno(e, &format!("{shown}"))),
            Ok(_) => bail!("{shown}: {not_dir}"),
            Err(e) if e == Errno::ENOENT => bail!("{shown}: no such directory ({not_dir})"),
            Err(e) => Err(errno(e, &format!("{shown}"))),
        }
    })
}

/// An extent's end as `setstripe -E` takes it (`EOF` for the end of file).
fn shown_end(end: u64) -> String {
    if end == u64::MAX {
        "EOF".into()
    } else {
        end.to_string()
    }
}

/// Print a component layout as `lfs getstripe` prints a composite one.
fn print_components(layout: &loom_proto::Layout) {
    println!("  lcm_layout_gen:    {}", layout.generation);
    println!("  lcm_entry_count:   {}", layout.components.len());
    for (i, c) in layout.components.iter().enumerate() {
        println!("    lcme_id:             {}", i + 1);
        println!("    lcme_extent.e_start: {}", c.start);
        println!("    lcme_extent.e_end:   {}", shown_end(c.end));
        match &c.pattern {
            Pattern::Mdt => {
                println!("      lmm_pattern:       mdt");
                println!("      lmm_stripe_size:   {}", c.end - c.start);
            }
            Pattern::Raid0 {
                stripe_size,
                objects,
            } => {
                println!("      lmm_stripe_count:  {}", objects.len());
                println!("      lmm_stripe_size:   {stripe_size}");
                println!("      lmm_pattern:       raid0");
                if let Some(p) = &c.pool {
                    println!("      lmm_pool:          {p}");
                }
                println!("      lmm_objects:");
                for (k, o) in objects.iter().enumerate() {
                    println!(
                        "      - {k}: {{ l_ost_idx: {}, l_oid: {:#x} }}",
                        o.ost, o.oid
                    );
                }
            }
            Pattern::DirShards { .. } => println!("      lmm_pattern:       dir shards"),
        }
    }
}

/// Print a directory's default component layout.
fn print_component_spec(spec: &LayoutSpec) {
    println!("  lcm_entry_count:   {}", spec.components.len());
    let mut start = 0;
    for (i, c) in spec.components.iter().enumerate() {
        println!("    lcme_id:             {}", i + 1);
        println!("    lcme_extent.e_start: {start}");
        println!("    lcme_extent.e_end:   {}", shown_end(c.end));
        if c.on_mdt {
            println!("      lmm_pattern:       mdt");
        } else {
            let count = if c.stripe.count == 0 {
                1
            } else {
                c.stripe.count
            };
            let size = if c.stripe.size == 0 {
                loom_proto::layout::DEFAULT_STRIPE_SIZE
            } else {
                c.stripe.size
            };
            println!("      lmm_stripe_count:  {count}");
            println!("      lmm_stripe_size:   {size}");
            println!("      lmm_pattern:       raid0");
            println!("      lmm_stripe_offset: {}", c.stripe.start_ost);
            if let Some(p) = &c.stripe.pool {
                println!("      lmm_pool:          {p}");
            }
        }
        start = c.end;
    }
}

pub fn getstripe(a: GetstripeArgs) -> anyhow::Result<()> {
    let mut failed = false;
    for p in &a.paths {
        if let Err(e) = getstripe_one(&a, p) {
            eprintln!("loom getstripe: {e:#}");
            failed = true;
        }
    }
    if failed {
        bail!("some paths could not be shown");
    }
    Ok(())
}

/// What `getstripe` shows of one path, however it was asked for.
pub(crate) enum Stripes {
    /// `-m`: the MDT keeping it.
    Mdt(u32),
    /// `--compress`: the compression of a file, or a directory's default.
    Compress(Option<Compress>),
    /// A directory's defaults.
    Dir {
        default: Option<LayoutSpec>,
        compress: Option<Compress>,
    },
    /// A file's layout.
    File(loom_proto::Layout),
}

fn getstripe_one(a: &GetstripeArgs, path: &Path) -> anyhow::Result<()> {
    let (entry, rel) = registry::find(path)?;
    let stripes = if crate::via_mount::key_readable(&entry) {
        getstripe_with_key(a, entry, &rel, path)?
    } else {
        crate::via_mount::getstripe(a, path)?
    };
    print_stripes(a, path, stripes)
}

/// [`Stripes`] asked of the servers with the mount's key.
fn getstripe_with_key(
    a: &GetstripeArgs,
    entry: Entry,
    rel: &Path,
    path: &Path,
) -> anyhow::Result<Stripes> {
    let s = connect(entry)?;
    let shown = path.display();
    let e = |e| errno(e, &format!("{shown}"));
    s.rt.block_on(async {
        let attr = s
            .client
            .resolve_path(rel.as_os_str().as_bytes())
            .await
            .map_err(e)?;
        if a.mdt {
            return Ok(Stripes::Mdt(s.client.locate(attr.fid).await.map_err(e)?));
        }
        match attr.kind {
            FileKind::Dir if a.compress => Ok(Stripes::Compress(
                s.client
                    .get_default_compress(&caller(), attr.fid)
                    .await
                    .map_err(e)?,
            )),
            FileKind::Dir => Ok(Stripes::Dir {
                compress: s
                    .client
                    .get_default_compress(&caller(), attr.fid)
                    .await
                    .map_err(e)?,
                default: s.client.get_default_layout(attr.fid).await.map_err(e)?,
            }),
            FileKind::File => {
                let layout = s.client.get_layout(attr.fid).await.map_err(e)?;
                Ok(if a.compress {
                    Stripes::Compress(layout.compress)
                } else {
                    Stripes::File(layout)
                })
            }
            _ => bail!("{shown} has no layout (not a regular file or directory)"),
        }
    })
}

fn print_stripes(a: &GetstripeArgs, path: &Path, stripes: Stripes) -> anyhow::Result<()> {
    let shown = path.display();
    let only = a.count || a.size || a.index;
    match stripes {
        Stripes::Mdt(mdt) => println!("{mdt}"),
        Stripes::Compress(c) => println!("{}", c.unwrap_or(Compress::OFF)),
        Stripes::Dir { default, compress } => {
            let compress = compress.filter(Compress::is_on);
            if let Some(l) = default.as_ref().filter(|l| l.as_plain().is_none()) {
                if only {
                    bail!("{shown}: its default layout has {} components; -c, -S and -i show a plain striping", l.components.len());
                }
                println!("{shown}");
                print_component_spec(l);
                if let Some(c) = compress {
                    println!("  lcm_compress:      {c}");
                }
                return Ok(());
            }
            let spec = default
                .and_then(|l| l.as_plain().cloned())
                .unwrap_or_default();
            let count = if spec.count == 0 { 1 } else { spec.count };
            let size = if spec.size == 0 {
                loom_proto::layout::DEFAULT_STRIPE_SIZE
            } else {
                spec.size
            };
            if only {
                print_only(a, count as i64, u64::from(size), spec.start_ost as i64);
            } else {
                println!("{shown}");
                println!("stripe_count:  {count} stripe_size:   {size} pattern:       raid0 stripe_offset: {}", spec.start_ost);
                if let Some(p) = spec.pool {
                    println!("pool:          {p}");
                }
                if let Some(c) = compress {
                    println!("compress:      {c}");
                }
            }
        }
        Stripes::File(layout) => {
            if layout.components.len() > 1 || layout.dom_end() > 0 {
                if only {
                    bail!("{shown}: its layout has {} components; -c, -S and -i show a plain striping", layout.components.len());
                }
                println!("{shown}");
                print_components(&layout);
                if let Some(c) = layout.compress {
                    println!("  lcm_compress:      {c}");
                }
                return Ok(());
            }
            let (size, objs) = layout
                .raid0_params()
                .context("layout has no RAID-0 component")?;
            let first = objs.first().map(|o| o.ost as i64).unwrap_or(-1);
            if only {
                print_only(a, objs.len() as i64, u64::from(size), first);
            } else {
                println!("{shown}");
                println!("lmm_stripe_count:  {}", objs.len());
                println!("lmm_stripe_size:   {size}");
                println!("lmm_pattern:       raid0");
                println!("lmm_layout_gen:    {}", layout.generation);
                println!("lmm_stripe_offset: {first}");
                if let Some(p) = layout.components.first().and_then(|c| c.pool.clone()) {
                    println!("lmm_pool:          {p}");
                }
                if let Some(c) = layout.compress {
                    println!("lmm_compress:      {c}");
                }
                println!("\tobdidx\t\t objid\t\t objid\t\t group");
                for o in objs {
                    println!("\t{:>6}\t{:>14}\t{:>#14x}\t{:>14}", o.ost, o.oid, o.oid, 0);
                }
            }
        }
    }
    Ok(())
}

fn print_only(a: &GetstripeArgs, count: i64, size: u64, index: i64) {
    if a.count {
        println!("{count}");
    }
    if a.size {
        println!("{size}");
    }
    if a.index {
        println!("{index}");
    }
}

pub(crate) fn human(kib: u64) -> String {
    let units = ["K", "M", "G", "T", "P"];
    let mut v = kib as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < units.len() {
        v /= 1024.0;
        i += 1;
    }
    format!("{v:.1}{}", units[i])
}

fn pct(used: u64, total: u64) -> String {
    if total == 0 {
        "-".into()
    } else {
        format!("{}%", (used * 100).div_ceil(total))
    }
}

pub fn df(a: DfArgs) -> anyhow::Result<()> {
    let entries = match &a.path {
        Some(p) => vec![registry::find(p)?.0],
        None => registry::all(),
    };
    if entries.is_empty() {
        bail!("no loomfs mounts (mount one with `loom mount` or `loom up`)");
    }
    for e in entries {
        if !crate::via_mount::key_readable(&e) {
            // A user: the mount asks the targets (no operation counts).
            let mut st = crate::via_mount::df(&e.mountpoint)?;
            st.sort_by_key(|x| (x.target.role != Role::Mdt, x.target.index));
            print_df(&a, &e, &st);
            continue;
        }
        let s = connect(e)?;
        let mut st = s.rt.block_on(s.client.target_statfs());
        st.sort_by_key(|x| (x.target.role != Role::Mdt, x.target.index));
        print_df(&a, &s.entry, &st);
        // What snapshots hold (counted in the targets' used space above).
        if let Ok(snaps) = s.rt.block_on(s.client.snapshots(&caller())) {
            if !snaps.is_empty() {
                let held: u64 = snaps.iter().map(|x| x.bytes).sum();
                println!(
                    "{} snapshots hold {} (loom snapshot list)",
                    snaps.len(),
                    human(held / 1024)
                );
            }
        }
        if a.inodes {
            print_ops(&s.entry, &s.rt.block_on(s.client.mdt_op_stats()));
        }
    }
    Ok(())
}

/// Operations per MDT by type, as `lctl get_param mdt.*.md_stats` lists
/// them: every counter that is not zero, since the MDT started.
fn print_ops(e: &Entry, ops: &[(u32, Result<OpCounts, Errno>)]) {
    println!();
    println!("operations since each MDT started:");
    for (m, r) in ops {
        let uuid = format!("{}-MDT{m:04x}_UUID", e.fsname);
        match r {
            Ok(v) => {
                let total: u64 = v.iter().map(|(_, n)| n).sum();
                let each: Vec<String> = v
                    .iter()
                    .filter(|(_, n)| *n > 0)
                    .map(|(op, n)| format!("{op}={n}"))
                    .collect();
                println!("{uuid:<22} total={total} {}", each.join(" "));
            }
            Err(errno) => println!("{uuid:<22} : inactive device ({errno})"),
        }
    }
}

fn print_df(a: &DfArgs, e: &Entry, st: &[TargetUsage]) {
    let fmt = |v: u64| if a.human { human(v) } else { v.to_string() };
    if a.inodes {
        println!(
            "{:<22}{:>12}{:>12}{:>12}{:>6} Mounted on",
            "UUID", "Inodes", "IUsed", "IFree", "IUse%"
        );
    } else {
        println!(
            "{:<22}{:>14}{:>14}{:>14}{:>6} Mounted on",
            "UUID",
            if a.human { "bytes" } else { "1K-blocks" },
            "Used",
            "Available",
            "Use%"
        );
    }
    let (mut tb, mut tu, mut ta) = (0u64, 0u64, 0u64);
    let (mut ti, mut tiu, mut tif) = (0u64, 0u64, 0u64);
    let mut warnings = Vec::new();
    for u in st {
        let t = u.target;
        let uuid = format!("{}-{}_UUID", e.fsname, t);
        let mnt = format!("{}[{}:{}]", e.mountpoint.display(), t.role, t.index);
        let s = match &u.usage {
            Ok(s) => s,
            Err(errno) => {
                // As `lfs df` shows a target that does not answer; the
                // summary counts only those that did.
                println!("{uuid:<22} : inactive device ({errno})");
                continue;
            }
        };
        let space = used_pct(s.bytes_total.saturating_sub(s.bytes_free), s.bytes_avail);
        let inodes = used_pct(s.files_total.saturating_sub(s.files_free), s.files_free);
        for (what, p) in [("space", space), ("inodes", inodes)] {
            if p > u64::from(a.warn_at) {
                warnings.push(format!(
                    "{}-{t} is {p}% full ({what}), above --warn-at {}%",
                    e.fsname, a.warn_at
                ));
            }
        }
        if a.inodes {
            let used = s.files_total.saturating_sub(s.files_free);
            println!(
                "{uuid:<22}{:>12}{:>12}{:>12}{:>6} {mnt}",
                s.files_total,
                used,
                s.files_free,
                pct(used, s.files_total)
            );
            if t.role == Role::Mdt {
                ti += s.files_total;
                tiu += used;
                tif += s.files_free;
            }
        } else {
            let total = s.bytes_total / 1024;
            let used = s.bytes_total.saturating_sub(s.bytes_free) / 1024;
            let avail = s.bytes_avail / 1024;
            println!(
                "{uuid:<22}{:>14}{:>14}{:>14}{:>6} {mnt}",
                fmt(total),
                fmt(used),
                fmt(avail),
                pct(used, used + avail)
            );
            if t.role == Role::Ost {
                tb += total;
                tu += used;
                ta += avail;
            }
        }
    }
    println!();
    if a.inodes {
        println!(
            "{:<22}{:>12}{:>12}{:>12}{:>6} {}",
            "filesystem_summary:",
            ti,
            tiu,
            tif,
            pct(tiu, ti),
            e.mountpoint.display()
        );
    } else {
        println!(
            "{:<22}{:>14}{:>14}{:>14}{:>6} {}",
            "filesystem_summary:",
            fmt(tb),
            fmt(tu),
            fmt(ta),
            pct(tu, tu + ta),
            e.mountpoint.display()
        );
    }
    println!();
    if !a.inodes {
        print_packed(a, e, st);
    }
    for w in warnings {
        eprintln!("loom df: warning: {w}");
    }
}

/// Compressed data per OST: its bytes as written (logical) and what they
/// take on disk (stored, in the target's 4 KiB blocks), when there is any.
fn print_packed(a: &DfArgs, e: &Entry, st: &[TargetUsage]) {
    let osts: Vec<(TargetId, &StatFs)> = st
        .iter()
        .filter(|u| u.target.role == Role::Ost)
        .filter_map(|u| u.usage.as_ref().ok().map(|s| (u.target, s)))
        .collect();
    if osts
        .iter()
        .all(|(_, s)| s.packed_logical == 0 && s.packed_counted)
    {
        return;
    }
    let fmt = |b: u64| {
        if a.human {
            human(b / 1024)
        } else {
            (b / 1024).to_string()
        }
    };
    let ratio = |l: u64, s: u64| {
        if s == 0 {
            "-".to_string()
        } else {
            format!("{:.2}x", l as f64 / s as f64)
        }
    };
    println!(
        "{:<22}{:>14}{:>14}{:>8}",
        "compressed data",
        if a.human { "logical" } else { "logical 1K" },
        if a.human { "stored" } else { "stored 1K" },
        "ratio"
    );
    let (mut tl, mut ts, mut all_counted) = (0u64, 0u64, true);
    for (t, s) in &osts {
        let partial = if s.packed_counted { "" } else { " (counting)" };
        println!(
            "{:<22}{:>14}{:>14}{:>8}{partial}",
            format!("{}-{}_UUID", e.fsname, t),
            fmt(s.packed_logical),
            fmt(s.packed_stored),
            ratio(s.packed_logical, s.packed_stored)
        );
        tl += s.packed_logical;
        ts += s.packed_stored;
        all_counted &= s.packed_counted;
    }
    println!(
        "{:<22}{:>14}{:>14}{:>8}{}",
        "filesystem_summary:",
        fmt(tl),
        fmt(ts),
        ratio(tl, ts),
        if all_counted { "" } else { " (counting)" }
    );
    println!();
}

/// Percent used of `used + avail`, rounded up (as df).
fn used_pct(used: u64, avail: u64) -> u64 {
    let all = used + avail;
    if all == 0 {
        0
    } else {
        (used * 100).div_ceil(all)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_suffixes() {
        assert_eq!(parse_size("4M"), Ok(4 << 20));
        assert_eq!(parse_size("64k"), Ok(64 << 10));
        assert_eq!(parse_size("65536"), Ok(65536));
        assert!(parse_size("4X").is_err());
        assert!(parse_size("").is_err());
    }
}
