//! Directories spread over MDTs: where a name's entry lives, listing a
//! striped directory, and making remote or striped directories.
//!
//! A striped directory's layout lists its shards (shard 0 is the master
//! inode, which the kernel knows the directory by); a name lives in shard
//! `name_hash(name) % count`, on that shard's MDT. The client learns a
//! directory's layout from the entry that named it (lookup, mkdir) or, for
//! a directory it met otherwise (readdirplus, a path handle), by asking
//! its MDT once, and caches it by FID. A plain directory may be striped
//! later (`loom migrate -c`, auto-split): its MDT then answers a request
//! for a name of another shard, or a listing, with `Reply::Restriped`,
//! and the router sends it on (`Router::call_within`). A remote directory
//! needs nothing here: its FID leads to its MDT like any other.

use crate::ctx::Caller;
use crate::io::file::unexpected;
use crate::Client;
use loom_proto::msg::{Attr, DirEntry, DirStripe, FileKind, MdtRequest, Reply};
use loom_proto::{Errno, Fid, Layout, Name};
use std::sync::Arc;
use tokio::task::JoinSet;

impl Client {
    /// Remember the layout of a directory named by an entry reply.
    pub(crate) fn note_dir(&self, attr: &Attr, layout: Option<&Layout>) {
        if attr.kind == FileKind::Dir {
            self.note_shards(attr.fid, layout);
        }
    }

    /// Whether `dir` is known (from its layout) not to be striped.
    pub(crate) fn dir_is_plain(&self, dir: Fid) -> bool {
        matches!(self.router.fresh.shards(dir), Some(None))
    }

    /// The shards of directory `dir`, or `None` if it is not striped.
    pub async fn dir_shards(&self, c: &Caller, dir: Fid) -> Result<Option<Arc<[Fid]>>, Errno> {
        if let Some(s) = self.router.fresh.shards(dir) {
            return Ok(s);
        }
        let layout = match self
            .mdt_call(c, dir, MdtRequest::GetLayout { fid: dir })
            .await
        {
            Ok(Reply::Layout(l)) => Some(l),
            Ok(other) => return Err(unexpected("GetLayout", &other)),
            Err(Errno::ENODATA) => None,
            Err(e) => return Err(e),
        };
        Ok(self.note_shards(dir, layout.as_ref()))
    }

    /// Remember directory `dir`'s shards from its layout (in its inode's
    /// object); the shards, if striped.
    fn note_shards(&self, dir: Fid, layout: Option<&Layout>) -> Option<Arc<[Fid]>> {
        let shards: Option<Arc<[Fid]>> = layout.and_then(|l| l.dir_shards()).map(Arc::from);
        self.router.fresh.set_shards(dir, shards.clone());
        shards
    }

    /// The directory object that holds (or will hold) `name` of `dir`:
    /// `dir` itself unless it is striped.
    pub(crate) async fn name_dir(&self, c: &Caller, dir: Fid, name: &[u8]) -> Result<Fid, Errno> {
        Ok(match self.dir_shards(c, dir).await? {
            Some(shards) if !shards.is_empty() => Layout::dir_striped(shards.to_vec())
                .shard_for(name)
                .unwrap_or(dir),
            _ => dir,
        })
    }

    /// Where an operation on entry `name` of `dir` goes: the checked name
    /// and the directory object (shard) that holds it.
    pub(crate) async fn entry_at(
        &self,
        c: &Caller,
        dir: Fid,
        name: &[u8],
    ) -> Result<(Fid, Name), Errno> {
        crate::meta::check_name(name)?;
        Ok((self.name_dir(c, dir, name).await?, Name::from(name)))
    }

    /// Make directory `name` in `parent` placed by `stripe`: on another
    /// MDT (`loom mkdir -i`) or striped over several (`loom setdirstripe`).
    pub async fn mkdir_striped(
        &self,
        c: &Caller,
        parent: Fid,
        name: impl AsRef<[u8]>,
        perm: u32,
        stripe: DirStripe,
    ) -> Result<Attr, Errno> {
        crate::meta::check_name(name.as_ref())?;
        if stripe.count == 0 || stripe.start_mdt < -1 {
            return Err(Errno::EINVAL);
        }
        let at = self.name_dir(c, parent, name.as_ref()).await?;
        let req = MdtRequest::MkdirStriped {
            parent: at,
            name: Name::from(name.as_ref()),
            perm: perm & 0o7777,
            stripe,
        };
        match self.mdt_call(c, at, req).await? {
            Reply::Entry { attr, layout } => {
                self.note_dir(&attr, layout.as_ref());
                Ok(attr)
            }
            other => Err(unexpected("MkdirStriped", &other)),
        }
    }

    /// Every entry of directory object `fid` itself (a directory, or one
    /// shard of a striped one; without `.` and `..`), as `c`: what the
    /// policy engine lists again when a directory's shards change.
    pub async fn list_dir_object(&self, c: &Caller, fid: Fid) -> Result<Vec<DirEntry>, Errno> {
        let target = self.router_handle().mdt_of(fid).await?;
        let mut all = Vec::new();
        let mut cookie = 0;
        loop {
            let req = MdtRequest::ReaddirShard {
                fid,
                cookie,
                max: 1024,
            };
            let (r, _) = self
                .router_handle()
                .call(target, self.ctx(c), req, bytes::Bytes::new())
                .await?;
            let Reply::Dir { entries, eof } = r else {
                return Err(unexpected("Dir", &r));
            };
            if let Some(e) = entries.last() {
                cookie = e.cookie;
            }
            let empty = entries.is_empty();
            all.extend(
                entries
                    .into_iter()
                    .filter(|e| e.name.as_bytes() != b"." && e.name.as_bytes() != b".."),
            );
            if eof || empty {
                return Ok(all);
            }
        }
    }

    /// Up to `max` entries of the striped directory with `shards` after
    /// `cookie`, in cookie (name hash) order as a plain directory lists
    /// them, so the same cookie resumes a listing whichever shard it came
    /// from. Each shard is asked for a share; only entries up to the
    /// lowest last cookie of the shards that have more are certain to be
    /// complete, so the page ends there.
    pub(crate) async fn readdir_shards(
        &self,
        c: &Caller,
        shards: &[Fid],
        cookie: u64,
        max: u32,
    ) -> Result<(Vec<DirEntry>, bool), Errno> {
        // A share of the page per shard, at least 32 entries but never
        // more than the page (clamp would panic for a page under 32).
        let share = max
            .div_ceil(shards.len().max(1) as u32)
            .max(32)
            .min(max.max(1));
        let mut set = JoinSet::new();
        for &fid in shards {
            let (router, ctx) = (self.router_handle(), self.ctx(c));
            set.spawn(async move {
                let target = router.mdt_of(fid).await?;
                // The master's own entries too: a `Readdir` of a master
                // that was restriped would answer `Restriped`.
                let req = MdtRequest::ReaddirShard {
                    fid,
                    cookie,
                    max: share,
                };
                // A page can come back empty but not last when every entry
                // it scanned went away meanwhile; it says nothing of how far
                // the shard got, so ask again.
                let mut tries = 0;
                loop {
                    let (r, _) = router
                        .call(target, ctx.clone(), req.clone(), bytes::Bytes::new())
                        .await?;
                    match &r {
                        Reply::Dir {
                            entries,
                            eof: false,
                        } if entries.is_empty() && tries < 8 => tries += 1,
                        _ => return Ok(r),
                    }
                }
            });
        }
        let mut all = Vec::new();
        let mut bound = u64::MAX;
        let mut eof = true;
        while let Some(r) = set.join_next().await {
            match r.map_err(|_| Errno::EIO)?? {
                Reply::Dir { entries, eof: done } => {
                    if !done {
                        eof = false;
                        // No entry: nothing beyond the cookie is certain.
                        bound = bound.min(entries.last().map_or(cookie, |e| e.cookie));
                    }
                    all.extend(entries);
                }
                other => return Err(unexpected("Readdir", &other)),
            }
        }
        all.retain(|e| e.cookie <= bound);
        all.sort_by_key(|e| e.cookie);
        if all.len() > max as usize {
            all.truncate(max as usize);
            eof = false;
        }
        Ok((all, eof))
    }
}
