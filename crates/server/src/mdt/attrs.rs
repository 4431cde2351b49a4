//! Attributes, sizes and extended attributes.

use super::acls;
use super::owners::file_owner;
use super::perm::{self, Cred};
use super::records::xattr_key;
use super::request::Rq;
use super::tx::{read_inode, store_err, Tx};
use super::MdtService;
use crate::error::{Handled, ServerError};
use loom_proto::acl::is_acl_name;
use loom_proto::msg::{xattr_flags, Attr, FileKind, Reply, SetAttr, Time};
use loom_proto::Name;
use loom_proto::{Errno, Fid};
use loom_store::kv::Space;
use std::sync::Arc;

/// Longest xattr name (Linux XATTR_NAME_MAX).
const XATTR_NAME_MAX: usize = 255;
/// Largest xattr value (Linux XATTR_SIZE_MAX).
const XATTR_SIZE_MAX: usize = 64 * 1024;
/// E2BIG: value too large.
const E2BIG: Errno = Errno(7);

/// Attributes of a new inode.
pub fn new_attr(fid: Fid, kind: FileKind, perm: u32, uid: u32, gid: u32, now: Time) -> Attr {
    Attr {
        fid,
        kind,
        perm: perm & 0o7777,
        nlink: if kind == FileKind::Dir { 2 } else { 1 },
        uid,
        gid,
        size: 0,
        atime: now,
        mtime: now,
        ctime: now,
        rdev: 0,
        projid: 0,
    }
}

impl MdtService {
    /// Change attributes under POSIX's rules for the caller (see
    /// [`perm::apply_setattr`]).
    pub(super) async fn setattr(self: &Arc<Self>, ctx: &Rq<'_>, fid: Fid, set: SetAttr) -> Handled {
        let (mut t, g) = self.begin().await.into_parts();
        let r = t.inode(fid)?;
        if let Some(end) = set.written {
            // The writer's report (as `update_size`), before the times.
            regular_file(fid, r.attr.kind)?;
            r.attr.size = r.attr.size.max(end);
        }
        let old_size = r.attr.size;
        let old_owner = file_owner(&r.attr);
        perm::apply_setattr(
            &Cred::of(ctx),
            &mut r.attr,
            r.acl.as_ref(),
            &set,
            Time::now(),
        )?;
        if set.perm.is_some() {
            // The ACL's owner, mask and other entries follow the mode.
            if let Some(acl) = &mut r.acl {
                acl.chmod(r.attr.perm);
            }
        }
        let attr = r.attr.clone();
        let layout = r.layout.clone();
        if set.size.is_some() {
            self.dom_truncate(&mut t, fid, layout.as_ref(), old_size, attr.size)?;
        }
        let new_owner = file_owner(&attr);
        let told = match new_owner != old_owner {
            true => self.note_owner(&mut t, fid, layout.as_ref(), new_owner)?,
            false => None,
        };
        let reply = Reply::Attr(attr);
        let ticket = self.apply(ctx, t, &reply)?;
        drop(g);
        self.settle(ctx, ticket).await?;
        self.tell_owner(told);
        Ok(reply)
    }

    /// The writer reports data written: the size and mtime only grow here
    /// (truncate and utimens go through setattr), so reports arriving out
    /// of order are harmless. A report at close is answered once the
    /// operating system has it (like the data, which reaches stable
    /// storage at fsync); one at fsync once it is on stable storage, with
    /// everything applied before it. On a replicated MDT both are
    /// committed first: only a commit puts them on the replicas.
    pub(super) async fn update_size(
        &self,
        ctx: &Rq<'_>,
        fid: Fid,
        size: u64,
        mtime: Time,
        durable: bool,
    ) -> Handled {
        let (mut t, g) = self.begin().await.into_parts();
        let r = t.inode(fid)?;
        regular_file(fid, r.attr.kind)?;
        r.attr.size = r.attr.size.max(size);
        r.attr.mtime = r.attr.mtime.max(mtime);
        r.attr.ctime = r.attr.ctime.max(mtime);
        if !durable && !self.names.store.replicated() {
            self.apply_flushed(ctx, t, &Reply::Ok)?;
            return Ok(Reply::Ok);
        }
        let ticket = self.apply(ctx, t, &Reply::Ok)?;
        drop(g);
        self.commit_through(ticket).await?;
        Ok(Reply::Ok)
    }

    /// `AppendReserve`: the file's size grows by `len`; the bytes from its
    /// old end are the caller's to write. Under the namespace lock, so
    /// that two appends never get one range; other clients' size leases
    /// are recalled first (they report the sizes they wrote), as for any
    /// change of the inode.
    pub(super) async fn append_reserve(&self, ctx: &Rq<'_>, fid: Fid, len: u64) -> Handled {
        let (mut t, g) = self.begin().await.into_parts();
        let r = t.inode(fid)?;
        regular_file(fid, r.attr.kind)?;
        perm::may(&Cred::of(ctx), &*r, loom_proto::msg::access::WRITE)?;
        let offset = r.attr.size;
        r.attr.size = offset.checked_add(len).ok_or_else(|| {
            ServerError::refused(Errno::EFBIG, format!("{fid}: appending {len} bytes"))
        })?;
        let now = Time::now();
        r.attr.mtime = r.attr.mtime.max(now);
        r.attr.ctime = r.attr.ctime.max(now);
        let reply = Reply::Reserved { offset };
        self.apply(ctx, t, &reply)?;
        drop(g);
        Ok(reply)
    }

    pub(super) async fn setxattr(
        &self,
        ctx: &Rq<'_>,
        fid: Fid,
        name: &Name,
        value: Vec<u8>,
        flags: u32,
    ) -> Handled {
        if name.is_empty() || name.len() > XATTR_NAME_MAX {
            return Err(ServerError::refused(
                Errno::ERANGE,
                format!("xattr name of {} bytes", name.len()),
            ));
        }
        if value.len() > XATTR_SIZE_MAX {
            return Err(ServerError::refused(
                E2BIG,
                format!("xattr value of {} bytes", value.len()),
            ));
        }
        if is_acl_name(name.as_bytes()) {
            return self.set_acl(ctx, fid, name, Some(&value)).await;
        }
        let (_, g) = self.begin().await.into_parts();
        let r = read_inode(&*self.names.store, fid)?;
        perm::may_xattr(&Cred::of(ctx), &r, name, true)?;
        let key = xattr_key(fid, name);
        let exists = self
            .names
            .store
            .get(Space::Xattrs, &key)
            .map_err(store_err)?
            .is_some();
        if flags & xattr_flags::CREATE != 0 && exists {
            return Err(ServerError::refused(
                Errno::EEXIST,
                format!("xattr {name} exists"),
            ));
        }
        if flags & xattr_flags::REPLACE != 0 && !exists {
            return Err(ServerError::refused(
                Errno::ENODATA,
                format!("no xattr {name}"),
            ));
        }
        let mut t = Tx::new(&*self.names.store);
        t.inode(fid)?.attr.ctime = Time::now();
        t.batch.put(Space::Xattrs, key, value);
        let ticket = self.apply(ctx, t, &Reply::Ok)?;
        drop(g);
        self.settle(ctx, ticket).await?;
        Ok(Reply::Ok)
    }

    pub(super) fn getxattr(&self, ctx: &Rq<'_>, fid: Fid, name: &Name) -> Handled {
        let r = read_inode(&*self.names.store, fid)?;
        perm::may_xattr(&Cred::of(ctx), &r, name, false)?;
        if is_acl_name(name.as_bytes()) {
            return acls::get_acl(&r, name);
        }
        self.names
            .store
            .get(Space::Xattrs, &xattr_key(fid, name))
            .map_err(store_err)?
            .map(Reply::Xattr)
            .ok_or_else(|| ServerError::refused(Errno::ENODATA, format!("no xattr {name}")))
    }

    pub(super) fn listxattr(&self, ctx: &Rq<'_>, fid: Fid) -> Handled {
        let r = read_inode(&*self.names.store, fid)?;
        let c = Cred::of(ctx);
        let prefix = fid.to_key();
        let mut names: Vec<Name> = acls::acl_names(&r).collect();
        let mut after: Option<Vec<u8>> = None;
        loop {
            let page = self
                .names
                .store
                .scan(Space::Xattrs, &prefix, after.as_deref(), 256)
                .map_err(store_err)?;
            for (k, _) in &page {
                // ACLs are in the record; a row of one is left from
                // before the MDT kept them there, and is not theirs.
                let shown = |n: &&[u8]| perm::shows_xattr(&c, n) && !is_acl_name(n);
                if let Some(n) = k.get(16..).filter(shown) {
                    names.push(Name::from(n));
                }
            }
            if page.len() < 256 {
                return Ok(Reply::XattrNames(names));
            }
            after = page.last().map(|(k, _)| k.clone());
        }
    }

    pub(super) async fn removexattr(&self, ctx: &Rq<'_>, fid: Fid, name: &Name) -> Handled {
        if is_acl_name(name.as_bytes()) {
            return self.set_acl(ctx, fid, name, None).await;
        }
        let (_, g) = self.begin().await.into_parts();
        let r = read_inode(&*self.names.store, fid)?;
        perm::may_xattr(&Cred::of(ctx), &r, name, true)?;
        let key = xattr_key(fid, name);
        if self
            .names
            .store
            .get(Space::Xattrs, &key)
            .map_err(store_err)?
            .is_none()
        {
            return Err(ServerError::refused(
                Errno::ENODATA,
                format!("no xattr {name}"),
            ));
        }
        let mut t = Tx::new(&*self.names.store);
        t.inode(fid)?.attr.ctime = Time::now();
        t.batch.delete(Space::Xattrs, key);
        let ticket = self.apply(ctx, t, &Reply::Ok)?;
        drop(g);
        self.settle(ctx, ticket).await?;
        Ok(Reply::Ok)
    }
}

/// EINVAL unless `kind` is a regular file's (size reports, Data-on-MDT).
pub(super) fn regular_file(fid: Fid, kind: FileKind) -> Result<(), ServerError> {
    if kind == FileKind::File {
        return Ok(());
    }
    Err(ServerError::refused(
        Errno::EINVAL,
        format!("{fid} is not a regular file"),
    ))
}
