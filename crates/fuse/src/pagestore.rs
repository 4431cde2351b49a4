//! Storing kept bytes into the kernel's page cache (`FUSE_NOTIFY_STORE`)
//! straight from the pieces they are kept in (`kept.rs`).
//!
//! fuser's `Notifier::store` takes one slice: a chunk kept as the pieces
//! of the writes that made it would be copied into one buffer first, a
//! megabyte per chunk of every ragged stream (IOR-hard). The notification
//! is one write to /dev/fuse of its header and the bytes, so this writes
//! it with `writev` over the pieces, through a duplicate of the session's
//! descriptor.

use bytes::Bytes;
use std::fs::File;
use std::io::{self, IoSlice, Write};
use std::os::fd::BorrowedFd;

/// `FUSE_NOTIFY_STORE`, the notification code (include/uapi/linux/fuse.h).
const NOTIFY_STORE: i32 = 4;
/// `struct fuse_out_header` (len, error, unique) and `struct
/// fuse_notify_store_out` (nodeid, offset, size, padding).
const HEADER: usize = 16 + 24;
/// Pieces past this many are joined first: writev takes at most
/// `IOV_MAX` (1024) slices, the header being one.
const MAX_PIECES: usize = 1000;

/// Writes `FUSE_NOTIFY_STORE` notifications to one mount's /dev/fuse.
#[derive(Debug)]
pub struct PageStore {
    dev: File,
}

impl PageStore {
    /// Over a duplicate of `dev`, the session's /dev/fuse descriptor.
    pub fn new(dev: BorrowedFd<'_>) -> io::Result<PageStore> {
        Ok(PageStore {
            dev: File::from(dev.try_clone_to_owned()?),
        })
    }

    /// Store `pieces`, which follow each other from `offset`, as the
    /// bytes of `ino` there. Fails with `NotFound` when the kernel has
    /// forgotten the inode.
    pub fn store(&self, ino: u64, offset: u64, pieces: &[Bytes]) -> io::Result<()> {
        let size: usize = pieces.iter().map(Bytes::len).sum();
        let too_big = || io::Error::new(io::ErrorKind::InvalidInput, "store of over 4 GiB");
        let size32 = u32::try_from(size).map_err(|_| too_big())?;
        let total = u32::try_from(HEADER + size).map_err(|_| too_big())?;
        let mut header = [0u8; HEADER];
        header[0..4].copy_from_slice(&total.to_ne_bytes());
        header[4..8].copy_from_slice(&NOTIFY_STORE.to_ne_bytes());
        // unique (8..16) is 0: a notification, not a reply.
        header[16..24].copy_from_slice(&ino.to_ne_bytes());
        header[24..32].copy_from_slice(&offset.to_ne_bytes());
        header[32..36].copy_from_slice(&size32.to_ne_bytes());
        let joined;
        let mut iov = Vec::with_capacity(pieces.len().min(MAX_PIECES) + 1);
        iov.push(IoSlice::new(&header));
        if pieces.len() > MAX_PIECES {
            joined = pieces.concat();
            iov.push(IoSlice::new(&joined));
        } else {
            iov.extend(pieces.iter().map(|p| IoSlice::new(p)));
        }
        // One writev is one notification: /dev/fuse takes it whole or not.
        let n = (&self.dev).write_vectored(&iov)?;
        if n != HEADER + size {
            return Err(io::Error::other(format!(
                "/dev/fuse took {n} of a {}-byte store",
                HEADER + size
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layout fuser writes for the same store (its `abi` structs),
    /// byte for byte: a pipe stands in for /dev/fuse.
    #[test]
    fn a_store_is_the_header_then_the_pieces_in_one_write() {
        let (rx, tx) = std::io::pipe().expect("pipe");
        let tx: std::os::fd::OwnedFd = tx.into();
        let store = PageStore::new(std::os::fd::AsFd::as_fd(&tx)).expect("dup");
        let pieces = [Bytes::from_static(b"abc"), Bytes::from_static(b"defg")];
        store.store(7, 4096, &pieces).expect("store");
        drop(store);
        drop(tx);
        let mut got = Vec::new();
        std::io::Read::read_to_end(&mut &rx, &mut got).expect("read");
        let mut want = Vec::new();
        want.extend_from_slice(&47u32.to_ne_bytes());
        want.extend_from_slice(&4i32.to_ne_bytes());
        want.extend_from_slice(&0u64.to_ne_bytes());
        want.extend_from_slice(&7u64.to_ne_bytes());
        want.extend_from_slice(&4096u64.to_ne_bytes());
        want.extend_from_slice(&7u32.to_ne_bytes());
        want.extend_from_slice(&0u32.to_ne_bytes());
        want.extend_from_slice(b"abcdefg");
        assert_eq!(got, want);
    }

    #[test]
    fn more_pieces_than_writev_takes_are_joined_into_one_store() {
        let (rx, tx) = std::io::pipe().expect("pipe");
        let tx: std::os::fd::OwnedFd = tx.into();
        let store = PageStore::new(std::os::fd::AsFd::as_fd(&tx)).expect("dup");
        let pieces: Vec<Bytes> = (0..MAX_PIECES + 24)
            .map(|i| Bytes::from(vec![(i % 251) as u8]))
            .collect();
        store.store(3, 0, &pieces).expect("store");
        drop(store);
        drop(tx);
        let mut got = Vec::new();
        std::io::Read::read_to_end(&mut &rx, &mut got).expect("read");
        assert_eq!(got.len(), HEADER + pieces.len());
        assert_eq!(&got[HEADER..], &pieces.concat()[..]);
    }
}
