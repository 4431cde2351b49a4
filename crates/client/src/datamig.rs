//! File data migration as the migrating client runs it (`loom migrate
//! -c/-S/-p/-E`): the file's MDT keeps the file still and gives the new
//! objects (`MigrateData`), this copies the bytes onto them and makes them
//! durable, and the MDT swaps the layouts (`MigrateDataEnd`), or undoes
//! it when another client reached the file meanwhile (EBUSY: try again
//! later). See `server/src/mdt/datamig.rs`.

use crate::client::Client;
use crate::ctx::Caller;
use crate::io::file::{read_layout, unexpected};
use loom_proto::layout::LayoutSpec;
use loom_proto::msg::{MdtRequest, Reply};
use loom_proto::{Errno, Fid};
use std::sync::Arc;

/// Bytes copied per read and write.
const CHUNK: usize = 4 << 20;
/// Reads ahead of the writes.
const AHEAD: usize = 4;

impl Client {
    /// Move regular file `fid`'s data onto new objects laid out as
    /// `spec`, the FID kept; `progress` hears of each chunk's bytes.
    /// EBUSY: another client had it open, or reached it while it was
    /// copied (nothing changed; try again later). Returns the bytes
    /// copied.
    pub async fn migrate_data(
        self: &Arc<Self>,
        c: &Caller,
        fid: Fid,
        spec: LayoutSpec,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<u64, Errno> {
        let req = MdtRequest::MigrateData { fid, layout: spec };
        let (old, new, size) = match self.mdt_call(c, fid, req).await? {
            Reply::DataMigrating { old, new, size } => (old, new, size),
            other => return Err(unexpected("DataMigrating", &other)),
        };
        let copied = self.copy_layout(c, fid, &old, &new, size, progress).await;
        let end = MdtRequest::MigrateDataEnd {
            fid,
            commit: copied.is_ok(),
        };
        let ended = self.mdt_call(c, fid, end).await;
        let copied = copied?;
        ended?;
        // The MDT may have undone it after a restart that lost the swap
        // (a resent end then finds nothing to do): look.
        let now = self.get_layout_as(c, fid).await?;
        if now.objects() != new.objects() {
            return Err(Errno::EAGAIN);
        }
        self.router().fresh.seen_layout(fid, &now);
        Ok(copied)
    }

    /// Copy `size` bytes of `fid` from `old` to `new`, durably; chunks of
    /// zeros are left as holes.
    async fn copy_layout(
        self: &Arc<Self>,
        c: &Caller,
        fid: Fid,
        old: &loom_proto::Layout,
        new: &loom_proto::Layout,
        size: u64,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<u64, Errno> {
        let attr = self.getattr(c, fid).await?;
        let dst = self.open_untold(c, fid, new.clone(), size);
        dst.note_attr(&attr);
        let mut reads = std::collections::VecDeque::new();
        let mut next = 0u64;
        let mut copied = 0;
        loop {
            while reads.len() < AHEAD && next < size {
                let n = (size - next).min(CHUNK as u64) as usize;
                let (client, caller, layout) = (self.clone(), c.clone(), old.clone());
                let at = next;
                reads.push_back((
                    at,
                    tokio::spawn(
                        async move { read_layout(client, caller, fid, layout, at, n).await },
                    ),
                ));
                next += n as u64;
            }
            let Some((at, read)) = reads.pop_front() else {
                break;
            };
            let data = read.await.map_err(|_| Errno::EIO)??;
            if data.iter().any(|&b| b != 0) {
                dst.write(at, &data).await?;
            }
            copied += data.len() as u64;
            progress(data.len() as u64);
        }
        dst.sync_objects_only().await?;
        Ok(copied)
    }
}
