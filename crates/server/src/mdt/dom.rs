//! Data-on-MDT: the bytes of a file's first layout component, kept with
//! its inode (Lustre's DoM), so that a small file's create, write, read
//! and stat all go to one server.
//!
//! The bytes live in the `dom` keyspace in blocks of [`DOM_BLOCK`] (key:
//! FID | block number, big-endian; value: the block's bytes up to the last
//! one written; what lies past a stored block's end, or in a missing
//! block, reads as zeros). A write is one change under the namespace
//! lock: its blocks, the inode's grown size and its new mtime go in one
//! batch, answered before its commit like any change (the client keeps
//! it for replay until committed; fsync commits it). A truncate cuts the
//! blocks in the batch of its setattr, and the last unlink drops them
//! with the inode.
//!
//! Data-on-MDT bytes leave part of the MDT's file system free (1/
//! [`DOM_RESERVE_PART`]), so that the metadata itself can always change,
//! also to remove files: a write or a new file's first bytes that would
//! reach into it are refused with ENOSPC. A client that writes back asks
//! what is left (`DomRoom`) and keeps new files' bytes only within it.

use super::request::Rq;
use super::tx::{read_inode, store_err, Tx};
use super::MdtService;
use crate::error::{Handled, ServerError};
use crate::quota::Res;
use loom_proto::msg::{Reply, ReqCtx, Time};
use loom_proto::quota::QuotaId;
use loom_proto::{Errno, Fid, Layout};
use loom_store::kv::Space;
use std::sync::Arc;

/// Bytes per stored block.
pub const DOM_BLOCK: u64 = 64 << 10;

/// Data-on-MDT bytes leave this part of the MDT's file system free:
/// 1/20, 5%.
pub const DOM_RESERVE_PART: u64 = 20;

fn block_key(fid: Fid, n: u64) -> Vec<u8> {
    let mut k = fid.to_key().to_vec();
    k.extend_from_slice(&n.to_be_bytes());
    k
}

/// The end of `layout`'s Data-on-MDT component, or EINVAL for a file
/// without one.
fn dom_end(fid: Fid, layout: Option<&Layout>) -> Result<u64, ServerError> {
    match layout.map(Layout::dom_end) {
        Some(end) if end > 0 => Ok(end),
        _ => Err(ServerError::refused(
            Errno::EINVAL,
            format!("{fid} has no Data-on-MDT component"),
        )),
    }
}

/// A range [offset, offset + len) that must lie inside [0, end).
fn inside(fid: Fid, offset: u64, len: u64, end: u64) -> Result<u64, ServerError> {
    match offset.checked_add(len) {
        Some(stop) if stop <= end => Ok(stop),
        _ => Err(ServerError::refused(
            Errno::EINVAL,
            format!(
                "{fid}: bytes {offset}+{len} lie past its Data-on-MDT component (ends at {end})"
            ),
        )),
    }
}

impl MdtService {
    /// Bytes of Data-on-MDT this MDT can still take: its file system's
    /// free space above the reserve.
    pub(super) fn dom_space(&self) -> Result<u64, ServerError> {
        let (total, _, avail) = self.disk()?;
        Ok(avail.saturating_sub(total / DOM_RESERVE_PART))
    }

    /// ENOSPC unless `len` more bytes of Data-on-MDT for `fid` fit.
    fn dom_fits(&self, fid: Fid, len: u64) -> Result<(), ServerError> {
        let room = self.dom_space()?;
        if len > room {
            return Err(ServerError::refused(
                Errno::ENOSPC,
                format!(
                    "MDT{:04x} has room for {room} more bytes of Data-on-MDT above its reserve, not {len} ({fid})",
                    self.index
                ),
            ));
        }
        Ok(())
    }

    /// `DomRoom`: this MDT's room for Data-on-MDT bytes, and each of
    /// `ids`' room within its block quota share here (the master asked
    /// for `want` more bytes where the share leaves less).
    pub(super) async fn dom_room(
        self: &Arc<Self>,
        ctx: &ReqCtx,
        ids: &[QuotaId],
        want: u64,
    ) -> Handled {
        let rooms = self.rooms(ctx, ids, want, Res::Bytes).await?;
        // Half: until the store folds its journal into its tables, each
        // byte written takes about twice its size on the disk, and the
        // check at the write counts the disk as it is then.
        Ok(Reply::DomRoom {
            space: self.dom_space()? / 2,
            rooms,
        })
    }

    fn dom_block(&self, fid: Fid, n: u64) -> Result<Vec<u8>, ServerError> {
        Ok(self
            .names
            .store
            .get(Space::Dom, &block_key(fid, n))
            .map_err(store_err)?
            .unwrap_or_default())
    }

    /// Write `data` at `offset` of `fid`'s Data-on-MDT component; the size
    /// grows to cover it, the mtime and ctime are now.
    pub(super) async fn dom_write(
        &self,
        rq: &Rq<'_>,
        fid: Fid,
        offset: u64,
        data: Vec<u8>,
    ) -> Handled {
        self.dom_fits(fid, data.len() as u64)?;
        let (mut t, g) = self.begin().await.into_parts();
        let r = t.inode(fid)?;
        super::attrs::regular_file(fid, r.attr.kind)?;
        let stop = inside(
            fid,
            offset,
            data.len() as u64,
            dom_end(fid, r.layout.as_ref())?,
        )?;
        let now = Time::now();
        r.attr.size = r.attr.size.max(stop);
        r.attr.mtime = now;
        r.attr.ctime = now;
        let mut at = offset;
        while at < stop {
            let n = at / DOM_BLOCK;
            let within = (at % DOM_BLOCK) as usize;
            let take = ((DOM_BLOCK as usize) - within).min((stop - at) as usize);
            let from = (at - offset) as usize;
            let mut block = self.dom_block(fid, n)?;
            if block.len() < within + take {
                block.resize(within + take, 0);
            }
            block[within..within + take].copy_from_slice(&data[from..from + take]);
            t.batch.put(Space::Dom, block_key(fid, n), block);
            at += take as u64;
        }
        let ticket = self.apply(rq, t, &Reply::Ok)?;
        drop(g);
        self.settle(rq, ticket).await?;
        Ok(Reply::Ok)
    }

    /// A new file's first bytes (`MakeAt`), put in its change `t`: they
    /// must lie inside its Data-on-MDT component. Returns the size.
    pub(super) fn dom_fill(
        &self,
        t: &mut Tx<'_>,
        fid: Fid,
        layout: Option<&Layout>,
        data: &[u8],
    ) -> Result<u64, ServerError> {
        let stop = inside(fid, 0, data.len() as u64, dom_end(fid, layout)?)?;
        if !data.is_empty() {
            self.dom_fits(fid, data.len() as u64)?;
        }
        for (n, chunk) in data.chunks(DOM_BLOCK as usize).enumerate() {
            t.batch
                .put(Space::Dom, block_key(fid, n as u64), chunk.to_vec());
        }
        Ok(stop)
    }

    /// Up to `len` bytes at `offset` of `fid`'s Data-on-MDT component: short
    /// at the end of the file or of the component, zeros in holes.
    /// As with an OST's objects, the open checked the caller's access
    /// (an open descriptor keeps it through a later chmod).
    pub(super) fn dom_read(&self, fid: Fid, offset: u64, len: u32) -> Handled {
        let r = read_inode(&*self.names.store, fid)?;
        let end = dom_end(fid, r.layout.as_ref())?.min(r.attr.size);
        let stop = offset.saturating_add(u64::from(len)).min(end);
        if offset >= stop {
            return Ok(Reply::Bytes(Vec::new()));
        }
        let mut out = vec![0u8; (stop - offset) as usize];
        let mut at = offset;
        while at < stop {
            let n = at / DOM_BLOCK;
            let within = (at % DOM_BLOCK) as usize;
            let take = ((DOM_BLOCK as usize) - within).min((stop - at) as usize);
            let block = self.dom_block(fid, n)?;
            let have = block.len().saturating_sub(within).min(take);
            let to = (at - offset) as usize;
            if have > 0 {
                out[to..to + have].copy_from_slice(&block[within..within + have]);
            }
            at += take as u64;
        }
        Ok(Reply::Bytes(out))
    }

    /// Make [offset, offset + len) of `fid`'s Data-on-MDT component read
    /// as zeros; the size stays.
    pub(super) async fn dom_punch(&self, rq: &Rq<'_>, fid: Fid, offset: u64, len: u64) -> Handled {
        let (mut t, g) = self.begin().await.into_parts();
        let r = t.inode(fid)?;
        let end = dom_end(fid, r.layout.as_ref())?;
        let stop = inside(fid, offset, len, end)?;
        r.attr.ctime = Time::now();
        self.dom_zero(&mut t, fid, offset, stop)?;
        let ticket = self.apply(rq, t, &Reply::Ok)?;
        drop(g);
        self.settle(rq, ticket).await?;
        Ok(Reply::Ok)
    }

    /// In `t`: [from, to) of `fid`'s blocks reads as zeros (whole blocks
    /// dropped, a block's tail cut, a block's middle zeroed).
    fn dom_zero(&self, t: &mut Tx<'_>, fid: Fid, from: u64, to: u64) -> Result<(), ServerError> {
        let mut at = from;
        while at < to {
            let n = at / DOM_BLOCK;
            let within = (at % DOM_BLOCK) as usize;
            let take = ((DOM_BLOCK as usize) - within).min((to - at) as usize);
            let key = block_key(fid, n);
            let mut block = self.dom_block(fid, n)?;
            if within == 0 && take as u64 == DOM_BLOCK {
                t.batch.delete(Space::Dom, key);
            } else if block.len() <= within + take {
                // Cut: nothing stored past the range.
                if block.len() > within {
                    block.truncate(within);
                    t.batch.put(Space::Dom, key, block);
                }
            } else {
                block[within..within + take].fill(0);
                t.batch.put(Space::Dom, key, block);
            }
            at += take as u64;
        }
        Ok(())
    }

    /// In the batch of a truncate of `fid` from `old` to `new` bytes: its
    /// Data-on-MDT bytes past `new` go (a later extension reads zeros).
    pub(super) fn dom_truncate(
        &self,
        t: &mut Tx<'_>,
        fid: Fid,
        layout: Option<&Layout>,
        old: u64,
        new: u64,
    ) -> Result<(), ServerError> {
        let end = layout.map(Layout::dom_end).unwrap_or(0);
        let stop = old.min(end);
        if new < stop {
            self.dom_zero(t, fid, new, stop)?;
        }
        Ok(())
    }

    /// In the batch that frees `fid` (its last unlink, an orphan's
    /// release): every Data-on-MDT block goes.
    pub(super) fn dom_drop(&self, t: &mut Tx<'_>, fid: Fid, layout: &Layout) {
        let end = layout.dom_end();
        for n in 0..end.div_ceil(DOM_BLOCK) {
            t.batch.delete(Space::Dom, block_key(fid, n));
        }
    }
}
