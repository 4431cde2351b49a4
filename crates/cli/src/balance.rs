//! `loom balance MOUNT [--tolerance PCT] [--max-fill PCT] [--rate MB/s]`:
//! move files off the fullest OSTs onto the emptiest, by data migration
//! (`loom_client::datamig`), until every OST's fill is within the
//! tolerance of the others' (and under --max-fill), at most --rate MB/s.
//! It keeps no state: each step reads the OSTs' fill and finds the files
//! of the fullest (`loom find -ost`), so a run stopped by Ctrl-C, a crash
//! of the tool or of a server goes on where it stood when run again.

use crate::registry;
use crate::tools::{caller, connect, errno, Session};
use anyhow::bail;
use clap::Args;
use loom_proto::find::{FindQuery, Pred, Test};
use loom_proto::layout::{ComponentSpec, LayoutSpec, Pattern};
use loom_proto::msg::{FileKind, Role};
use loom_proto::{Errno, Fid, StripeSpec};
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Options of `loom balance`.
#[derive(Args)]
#[command(
    after_help = "Each step moves one file with an object on the fullest OST (largest \
files first) onto new objects starting at the emptiest, its stripe count and size kept, then \
reads the fills again. It stops when the fullest and the emptiest OST are within --tolerance \
points of each other and none is above --max-fill, or when no file can move (open elsewhere, \
striped over every OST, or with several components: these stay and are counted). Files are \
moved while in use, as `loom migrate` moves them. Root only. Example: keep every OST within \
5 points, moving at most 200 MB/s:
  loom balance --tolerance 5 --rate 200 /mnt/loom"
)]
pub struct BalanceArgs {
    /// A path on the file system's mount.
    pub path: PathBuf,
    /// Largest difference of fill (percentage points) between the fullest
    /// and the emptiest OST that is left as it is.
    #[arg(long, default_value_t = 10.0, value_parser = pct)]
    pub tolerance: f64,
    /// No OST above this fill (percent), whatever the others hold.
    #[arg(long, value_parser = pct)]
    pub max_fill: Option<f64>,
    /// Most bytes moved per second, in MB/s (0: as fast as it goes).
    #[arg(long, default_value_t = 0.0)]
    pub rate: f64,
    /// Say what would move, and move nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Seconds between progress lines on standard error.
    #[arg(long, default_value_t = 1.0)]
    pub progress: f64,
}

fn pct(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..=100.0).contains(&v) => Ok(v),
        _ => Err(format!("{s:?} is not a percentage from 0 to 100")),
    }
}

/// Fill of each OST, in percent.
fn fills(s: &Session) -> anyhow::Result<BTreeMap<u32, f64>> {
    let mut out = BTreeMap::new();
    for t in s.rt.block_on(s.client.target_statfs()) {
        if t.target.role != Role::Ost {
            continue;
        }
        let u = t
            .usage
            .map_err(|e| errno(e, &format!("OST{:04x} did not answer", t.target.index)))?;
        let used = u.bytes_total.saturating_sub(u.bytes_avail);
        out.insert(
            t.target.index,
            100.0 * used as f64 / u.bytes_total.max(1) as f64,
        );
    }
    if out.len() < 2 {
        bail!("balancing needs two OSTs or more");
    }
    Ok(out)
}

/// The fullest and the emptiest OST, and whether they need balancing.
fn worst(f: &BTreeMap<u32, f64>, a: &BalanceArgs) -> (u32, u32, bool) {
    let by = |x: &(&u32, &f64), y: &(&u32, &f64)| x.1.total_cmp(y.1);
    let (&hi, &hv) = f.iter().max_by(by).unwrap_or((&0, &0.0));
    let (&lo, &lv) = f.iter().min_by(by).unwrap_or((&0, &0.0));
    let over = a.max_fill.is_some_and(|m| hv > m);
    (hi, lo, hv - lv > a.tolerance || over)
}

fn shown(f: &BTreeMap<u32, f64>) -> String {
    f.iter()
        .map(|(o, v)| format!("OST{o:04x} {v:.1}%"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn balance(a: BalanceArgs) -> anyhow::Result<()> {
    if nix::unistd::getuid().as_raw() != 0 {
        bail!("only root may balance OSTs (it needs the mount's key)");
    }
    let (entry, _) = registry::find(&a.path)?;
    let s = connect(entry)?;
    let c = caller();
    let started = Instant::now();
    let mut shown_at = Instant::now();
    let (mut moved, mut bytes) = (0u64, 0u64);
    // Files that cannot move this run (in use, striped everywhere, ...).
    let mut stuck: HashSet<Fid> = HashSet::new();
    // The files of the fullest OST, largest last, found once for it.
    let mut files: (u32, Vec<Candidate>) = (u32::MAX, Vec::new());
    loop {
        let f = fills(&s)?;
        let (hi, lo, unbalanced) = worst(&f, &a);
        if !a.quiet_progress(&mut shown_at) {
            eprintln!(
                "loom balance: {}; {moved} files moved, {} MiB, {:.0} MiB/s",
                shown(&f),
                bytes >> 20,
                bytes as f64 / (1 << 20) as f64 / started.elapsed().as_secs_f64().max(1e-3)
            );
        }
        if !unbalanced {
            println!(
                "balanced: {}; {moved} files moved ({} MiB in {:.1} s)",
                shown(&f),
                bytes >> 20,
                started.elapsed().as_secs_f64()
            );
            return Ok(());
        }
        let osts: Vec<u32> = f.keys().copied().collect();
        if files.0 != hi {
            files = (hi, candidates(&s, &c, hi, osts.len())?);
        }
        let next = loop {
            match files.1.pop() {
                Some(x) if stuck.contains(&x.fid) => continue,
                Some(x) => match x.spec(hi, lo, &osts) {
                    Some(spec) => break Some((x, spec)),
                    None => {
                        stuck.insert(x.fid);
                    }
                },
                None => break None,
            }
        };
        let Some((
            Candidate {
                fid, path, size, ..
            },
            spec,
        )) = next
        else {
            println!(
                "no more files can move off OST{hi:04x}: {}; {moved} files moved, {} left (in use, or placed where no other start avoids it)",
                shown(&f),
                stuck.len()
            );
            bail!("OSTs not within {} points of each other", a.tolerance);
        };
        if a.dry_run {
            println!("would move {} ({} MiB) off OST{hi:04x}", path, size >> 20);
            stuck.insert(fid);
            continue;
        }
        match s.rt.block_on(s.client.migrate_data(&c, fid, spec, &|_| {})) {
            Ok(n) => {
                moved += 1;
                bytes += n;
            }
            Err(Errno::EBUSY | Errno::EAGAIN | Errno::ESTALE | Errno::ENOENT) => {
                stuck.insert(fid);
            }
            Err(e) => {
                eprintln!("loom balance: {}", errno(e, &path));
                stuck.insert(fid);
            }
        }
        // The rate: wait until the bytes moved are due.
        if a.rate > 0.0 {
            let due = Duration::from_secs_f64(bytes as f64 / (a.rate * 1e6));
            if let Some(wait) = due.checked_sub(started.elapsed()) {
                std::thread::sleep(wait);
            }
        }
    }
}

impl BalanceArgs {
    /// Whether the progress line waits (not yet due).
    fn quiet_progress(&self, at: &mut Instant) -> bool {
        if at.elapsed() < Duration::from_secs_f64(self.progress) {
            return true;
        }
        *at = Instant::now();
        false
    }
}

/// A file with an object on the fullest OST.
struct Candidate {
    fid: Fid,
    path: String,
    size: u64,
    /// Its stripe count and size.
    count: usize,
    stripe_size: u32,
}

impl Candidate {
    /// The striping that takes it off `hi`: its count and size, its first
    /// stripe on `lo`, or on the first OST from which its stripes (in
    /// index order) leave `hi` out.
    fn spec(&self, hi: u32, lo: u32, osts: &[u32]) -> Option<LayoutSpec> {
        let n = self.count;
        let at = |o: u32| osts.iter().position(|x| *x == o).unwrap_or(0);
        let avoids = |start: usize| (0..n).all(|k| osts[(start + k) % osts.len()] != hi);
        let start = std::iter::once(at(lo))
            .chain(0..osts.len())
            .find(|&st| avoids(st))?;
        Some(LayoutSpec {
            components: vec![ComponentSpec {
                end: u64::MAX,
                on_mdt: false,
                stripe: StripeSpec {
                    count: n as i32,
                    size: self.stripe_size,
                    start_ost: osts[start] as i32,
                    pool: None,
                },
            }],
        })
    }
}

/// The files with an object on OST `hi` that one plain striping over
/// fewer than `n_osts` OSTs holds, smallest first (the caller takes the
/// largest first).
fn candidates(
    s: &Session,
    c: &loom_client::Caller,
    hi: u32,
    n_osts: usize,
) -> anyhow::Result<Vec<Candidate>> {
    let q = FindQuery {
        preds: vec![
            Pred {
                not: false,
                test: Test::Ost(vec![hi]),
            },
            Pred {
                not: false,
                test: Test::Type(vec![FileKind::File]),
            },
        ],
        now: 0,
    };
    s.rt.block_on(async {
        let r = s
            .client
            .find_as(c, Fid::ROOT, b"/", &q)
            .await
            .map_err(|e| errno(e, "finding the files of the fullest OST"))?;
        let mut out = Vec::new();
        for (path, fid) in r.matches.iter().zip(&r.fids) {
            let (Ok(attr), Ok(layout)) = (
                s.client.getattr(c, *fid).await,
                s.client.get_layout_as(c, *fid).await,
            ) else {
                continue;
            };
            let [comp] = layout.components.as_slice() else {
                continue;
            };
            let Pattern::Raid0 {
                stripe_size,
                objects,
            } = &comp.pattern
            else {
                continue;
            };
            if objects.len() >= n_osts {
                continue;
            }
            out.push(Candidate {
                fid: *fid,
                path: format!("/{}", String::from_utf8_lossy(path)),
                size: attr.size,
                count: objects.len(),
                stripe_size: *stripe_size,
            });
        }
        out.sort_by_key(|x| x.size);
        Ok(out)
    })
}
