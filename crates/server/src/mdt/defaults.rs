//! What a directory's new entries inherit: the nearest default layout,
//! compression and subdirectory placement up its parent chain, kept per
//! directory.
//!
//! Every create asks for these; without the cache each ask walked the
//! parent chain through the store (a fjall read per level, three walks
//! per create: a fifth of the MDT's CPU in an mdtest create phase).
//!
//! The cache is forgotten whole whenever a change could alter any walk:
//! a directory's defaults or parent changed, or a directory made or
//! removed (see [`changes_walks`]). Such changes are rare (setstripe,
//! rename or migration of a directory, mkdir, rmdir) beside the creates
//! that read. A walk races a change that forgets the cache: it keeps its
//! answer only if no forgetting happened since it began (`generation`).

use super::records::InodeRec;
use super::tx::read_inode;
use crate::error::ServerError;
use loom_proto::layout::LayoutSpec;
use loom_proto::msg::{DirDefault, FileKind};
use loom_proto::{Compress, Errno, Fid};
use loom_store::kv::KvStore;
use std::collections::HashMap;
use std::sync::Mutex;

/// Directories whose answers are kept at most (beyond it, forgotten
/// whole: a create-heavy run touches few directories at a time).
const KEPT: usize = 16 * 1024;

/// The defaults that apply in one directory.
#[derive(Clone, Debug, Default)]
pub struct Inherited {
    /// Default layout of new files (a plain `default_stripe` as a
    /// one-component spec).
    pub layout: Option<LayoutSpec>,
    /// Default compression of new files' data.
    pub compress: Option<Compress>,
    /// Default placement of new subdirectories.
    pub dir: Option<DirDefault>,
}

/// The cache of [`Inherited`] per directory.
#[derive(Default)]
pub struct Defaults {
    kept: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    /// Bumped at each forgetting.
    generation: u64,
    by_dir: HashMap<Fid, Inherited>,
}

impl Defaults {
    /// What applies in `dir`, from the cache or by a walk of `store`.
    pub fn of(&self, store: &dyn KvStore, dir: Fid) -> Result<Inherited, ServerError> {
        let generation = {
            let k = self.lock();
            if let Some(i) = k.by_dir.get(&dir) {
                return Ok(i.clone());
            }
            k.generation
        };
        let found = walk(store, dir)?;
        let mut k = self.lock();
        if k.generation == generation {
            if k.by_dir.len() >= KEPT {
                k.by_dir.clear();
            }
            k.by_dir.insert(dir, found.clone());
        }
        Ok(found)
    }

    /// Forget every answer (a change altered some walk). Called after the
    /// change is applied to the store, so that a walk begun before it
    /// keeps nothing.
    pub fn forget(&self) {
        let mut k = self.lock();
        k.generation += 1;
        k.by_dir.clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Whether a change taking an inode from `before` to `after` (`None`:
/// absent) can alter what a walk finds: it makes, removes or moves a
/// directory, or changes a directory's defaults.
pub fn changes_walks(before: Option<&InodeRec>, after: Option<&InodeRec>) -> bool {
    let is_dir = |r: Option<&InodeRec>| r.is_some_and(|r| r.attr.kind == FileKind::Dir);
    if !is_dir(before) && !is_dir(after) {
        return false;
    }
    match (before, after) {
        (Some(b), Some(a)) => {
            b.parent != a.parent
                || b.default_layout != a.default_layout
                || b.default_stripe != a.default_stripe
                || b.default_compress != a.default_compress
                || b.default_dir != a.default_dir
        }
        _ => true,
    }
}

/// Walk up from `dir`: each default is taken from the nearest directory
/// on this MDT that sets it. A directory made here by a cross-MDT mkdir
/// copied its parent's effective defaults, so the walk stops where the
/// parent chain leaves this MDT (an ancestor not found here).
fn walk(store: &dyn KvStore, dir: Fid) -> Result<Inherited, ServerError> {
    let mut found = Inherited::default();
    let mut fid = dir;
    // Bounded: a corrupt parent chain must not loop forever.
    for _ in 0..4096 {
        let r = match read_inode(store, fid) {
            Ok(r) => r,
            Err(e) if e.errno() == Errno::ENOENT && fid != dir => break,
            Err(e) => return Err(e),
        };
        if found.layout.is_none() {
            found.layout = r
                .default_layout
                .clone()
                .or_else(|| r.default_stripe.clone().map(LayoutSpec::plain));
        }
        if found.compress.is_none() {
            found.compress = r.default_compress;
        }
        if found.dir.is_none() {
            found.dir = r.default_dir.clone();
        }
        let all = found.layout.is_some() && found.compress.is_some() && found.dir.is_some();
        if all || fid == Fid::ROOT || r.parent == fid {
            break;
        }
        fid = r.parent;
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mdt::attrs::new_attr;
    use crate::mdt::records::inode_key;
    use crate::mdt::tx::encode_record;
    use loom_proto::msg::Time;
    use loom_proto::StripeSpec;
    use loom_store::kv::{Batch, FjallStore, Space};

    fn dir(fid: Fid, parent: Fid) -> InodeRec {
        InodeRec::new(
            new_attr(fid, FileKind::Dir, 0o755, 0, 0, Time::default()),
            parent,
        )
    }

    fn put(store: &FjallStore, r: &InodeRec) {
        let mut b = Batch::new();
        b.put(
            Space::Inodes,
            inode_key(r.attr.fid),
            encode_record(r).expect("encode"),
        );
        store.apply(b).expect("apply");
    }

    fn stripes(n: i32) -> StripeSpec {
        StripeSpec {
            count: n,
            ..StripeSpec::default()
        }
    }

    /// Each default comes from the nearest directory that sets it; a
    /// kept answer holds until a change that alters walks forgets it,
    /// and a walk begun before a forgetting is not kept.
    #[test]
    fn answers_are_the_nearest_defaults_until_forgotten() {
        let d = tempfile::tempdir().expect("tmp");
        let store = FjallStore::open(d.path()).expect("open");
        let (a, b) = (Fid::new(9, 1), Fid::new(9, 2));
        let mut root = dir(Fid::ROOT, Fid::ROOT);
        root.default_stripe = Some(stripes(2));
        put(&store, &root);
        let mut ra = dir(a, Fid::ROOT);
        ra.default_compress = Some(Compress::OFF);
        put(&store, &ra);
        put(&store, &dir(b, a));

        let cache = Defaults::default();
        let got = cache.of(&store, b).expect("walk");
        assert_eq!(got.layout, Some(LayoutSpec::plain(stripes(2))));
        assert_eq!(got.compress, Some(Compress::OFF));
        assert_eq!(got.dir, None);

        // Changed in the store without a forgetting: the kept answer.
        let mut rb = dir(b, a);
        rb.default_stripe = Some(stripes(4));
        put(&store, &rb);
        let kept = cache.of(&store, b).expect("kept");
        assert_eq!(kept.layout, Some(LayoutSpec::plain(stripes(2))));
        assert!(changes_walks(Some(&dir(b, a)), Some(&rb)));
        cache.forget();
        let again = cache.of(&store, b).expect("walk again");
        assert_eq!(again.layout, Some(LayoutSpec::plain(stripes(4))));

        // A directory that is not there is an error, not "no defaults".
        assert!(cache.of(&store, Fid::new(9, 77)).is_err());
    }

    #[test]
    fn only_directory_changes_that_move_or_set_defaults_alter_walks() {
        let (a, b) = (Fid::new(9, 1), Fid::new(9, 2));
        let d = dir(b, a);
        let mut touched = d.clone();
        touched.attr.nlink += 1;
        touched.attr.mtime = Time::now();
        assert!(!changes_walks(Some(&d), Some(&touched)), "entries changed");
        let mut moved = d.clone();
        moved.parent = Fid::ROOT;
        assert!(changes_walks(Some(&d), Some(&moved)), "renamed elsewhere");
        assert!(changes_walks(None, Some(&d)), "made");
        assert!(changes_walks(Some(&d), None), "removed");
        let file = InodeRec::new(
            new_attr(Fid::new(9, 3), FileKind::File, 0o644, 0, 0, Time::default()),
            b,
        );
        assert!(!changes_walks(None, Some(&file)), "a file made");
    }
}
