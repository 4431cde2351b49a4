//! What the write-back layer answers itself: each returns `None` where it
//! does not (the directory is not written back here, or the inode was
//! sent), and the operation takes its usual path after
//! [`Client::wb_settle`].

use super::perms::{self, may};
use super::quota::{self, Check};
use super::room::Bytes;
use super::{Held, Made, Op, State};
use crate::ctx::Caller;
use crate::Client;
use loom_proto::msg::{Attr, DirEntry, FileKind, SetAttr, Time};
use loom_proto::quota::QuotaId;
use loom_proto::{Errno, Fid, Layout, Name};
use std::time::Instant;

/// What became of a write to a file made here.
pub(crate) enum Absorbed {
    /// Kept with the file until it is sent.
    Kept,
    /// The file is being sent: wait for the flush, then write again.
    Busy,
    /// Past what is kept here, or past the room known for it (see
    /// `room`), or the file was sent: written the usual way, on its
    /// layout, once it is sent.
    No,
    /// The room for the bytes is not known: ask
    /// ([`Client::wb_ask_write_room`]), then write again.
    Ask,
}

/// The layout a file made here has until it is sent: none. Its handles
/// keep its bytes here and ask for the real one once it is sent.
pub(crate) fn provisional_layout() -> Layout {
    Layout {
        generation: 0,
        components: Vec::new(),
        compress: None,
    }
}

/// A directory answered here, for changes by `c` in it.
fn answering(s: &State, dir: Fid) -> Option<&Held> {
    s.dirs.get(&dir).filter(|h| h.answering)
}

/// Take one FID of MDT `mdt`'s grants, if any is left.
fn take_fid(s: &mut State, mdt: u32) -> Option<Fid> {
    let runs = s.fids.get_mut(&mdt)?;
    let (first, count) = runs.front_mut()?;
    let fid = *first;
    *count -= 1;
    *first = Fid::new(first.seq, first.oid + 1);
    if *count == 0 {
        runs.pop_front();
    }
    Some(fid)
}

/// The attributes of `fid` as this layer holds them.
fn attr_of(s: &State, fid: Fid) -> Option<Attr> {
    match s.dirs.get(&fid) {
        Some(h) => Some(h.attr.clone()),
        None => s.made.get(&fid).map(|m| m.attr.clone()),
    }
}

/// A change to `dir`'s names: its times, and its link count for a
/// directory made or removed.
fn touch_dir(s: &mut State, dir: Fid, links: i32, now: Time) {
    if let Some(h) = s.dirs.get_mut(&dir) {
        h.attr.mtime = now;
        h.attr.ctime = now;
        h.attr.nlink = h.attr.nlink.saturating_add_signed(links);
    }
}

/// What a create waits for before it is answered here.
enum Next {
    /// FIDs from this MDT.
    Refill(u32),
    /// The quota room of these ids on this MDT (after sending what
    /// waits, when `true`).
    Room(u32, Vec<QuotaId>, bool),
}

impl Client {
    /// The attributes of `fid`, named in a directory written back here:
    /// as this layer holds them, or, once sent, as the leases its MDT
    /// granted with its answer keep them.
    fn known_attr(&self, s: &State, fid: Fid) -> Option<Attr> {
        attr_of(s, fid).or_else(|| {
            // Not while a change is on its way: it may be applied and
            // not noted yet (as the leased listing of `meta`).
            (self.router.changes_in_flight() == 0)
                .then(|| self.router.fresh.leased_attr(fid))
                .flatten()
        })
    }

    /// Make `name` in `parent` here if it is written back: a file (which
    /// gets [`provisional_layout`]), FIFO, device, socket, directory, or a
    /// symbolic link to `target`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn wb_make(
        &self,
        c: &Caller,
        parent: Fid,
        name: &Name,
        kind: FileKind,
        perm: u32,
        rdev: u32,
        target: Option<Name>,
    ) -> Option<Result<(Attr, Option<Layout>), Errno>> {
        // Room asked for at that instant (its answer holds for this
        // create, however short the trust), and whether after a flush.
        let mut asked: Option<(Instant, bool)> = None;
        loop {
            let next = 'pick: {
                let mut s = self.wb.lock();
                let h = answering(&s, parent)?;
                if !may(c, &h.attr, 0o3) {
                    return Some(Err(Errno::EACCES));
                }
                if h.names.contains_key(name) {
                    return Some(Err(Errno::EEXIST));
                }
                let (mdt, pattr, spec) = (h.mdt, h.attr.clone(), h.spec.clone());
                let (uid, gid, perm) = perms::new_owner(c, &pattr, kind, perm);
                let ids = quota::ids_of(c, uid, gid, pattr.projid);
                let at = asked.map_or_else(Instant::now, |(at, _)| at);
                match s.room_check(mdt, &ids, at) {
                    quota::Check::Fits => {}
                    quota::Check::Ask => break 'pick Next::Room(mdt, ids, false),
                    quota::Check::Full if !asked.is_some_and(|(_, settled)| settled) => {
                        break 'pick Next::Room(mdt, ids, true)
                    }
                    quota::Check::Full => return Some(Err(Errno::EDQUOT)),
                }
                if let Some(fid) = take_fid(&mut s, mdt) {
                    s.room_take(mdt, &ids);
                    let now = Time::now();
                    let attr = Attr {
                        fid,
                        kind,
                        perm,
                        nlink: if kind == FileKind::Dir { 2 } else { 1 },
                        uid,
                        gid,
                        size: target.as_ref().map_or(0, |t| t.len() as u64),
                        atime: now,
                        mtime: now,
                        ctime: now,
                        rdev,
                        projid: pattr.projid,
                    };
                    let made = Made {
                        parent,
                        name: name.clone(),
                        attr: attr.clone(),
                        target,
                        data: Vec::new(),
                        made: now,
                        caller: Caller {
                            umask: None,
                            ..c.clone()
                        },
                        sending: false,
                        taken: Default::default(),
                    };
                    s.made.insert(fid, made);
                    if let Some(h) = s.dirs.get_mut(&parent) {
                        h.names.insert(name.clone(), (fid, kind));
                    }
                    let is_dir = kind == FileKind::Dir;
                    touch_dir(&mut s, parent, i32::from(is_dir), now);
                    if is_dir {
                        s.dirs.insert(
                            fid,
                            Held {
                                mdt,
                                attr: attr.clone(),
                                names: Default::default(),
                                spec,
                                answering: true,
                                granted: false,
                            },
                        );
                    }
                    s.push(mdt, Op::Make(fid));
                    let due = s.due(std::time::Instant::now());
                    let low = s.fids_low(mdt);
                    drop(s);
                    if due {
                        self.wb_kick();
                    }
                    if low {
                        self.wb_prefetch(mdt, parent);
                    }
                    self.router.lease_hit();
                    let layout = (kind == FileKind::File).then(provisional_layout);
                    return Some(Ok((attr, layout)));
                }
                Next::Refill(mdt)
            };
            let done = match next {
                Next::Refill(mdt) => self.wb_refill(mdt, parent).await,
                Next::Room(mdt, ids, settle) => {
                    asked = Some((Instant::now(), settle));
                    self.wb_ask_room(c, mdt, parent, &ids, settle).await
                }
            };
            if let Err(e) = done {
                return Some(Err(e));
            }
        }
    }

    /// `name` in `parent` if it is written back: its attributes, or ENOENT.
    /// `None` for a name that was sent and is not under a lease (its MDT
    /// answers).
    pub(crate) fn wb_lookup(
        &self,
        c: &Caller,
        parent: Fid,
        name: &Name,
    ) -> Option<Result<Attr, Errno>> {
        let s = self.wb.lock();
        let h = answering(&s, parent)?;
        if !may(c, &h.attr, 0o1) {
            return Some(Err(Errno::EACCES));
        }
        let r = match h.names.get(name) {
            None => Err(Errno::ENOENT),
            Some((fid, _)) => Ok(self.known_attr(&s, *fid)?),
        };
        self.router.lease_hit();
        Some(r)
    }

    /// The attributes of `fid` if this layer holds them.
    pub(crate) fn wb_attr(&self, fid: Fid) -> Option<Attr> {
        let s = self.wb.lock();
        let a = attr_of(&s, fid)?;
        // A directory written back after it was sent: its MDT knows it as
        // well, but not what was made in it since.
        self.router.lease_hit();
        Some(a)
    }

    /// The target of symbolic link `fid` made here.
    pub(crate) fn wb_readlink(&self, fid: Fid) -> Option<Name> {
        self.wb.lock().made.get(&fid).and_then(|m| m.target.clone())
    }

    /// Change the attributes of `fid`, made here and not sent, by `c`.
    pub(crate) async fn wb_setattr(
        &self,
        c: &Caller,
        fid: Fid,
        set: &SetAttr,
    ) -> Option<Result<Attr, Errno>> {
        loop {
            {
                let mut s = self.wb.lock();
                if !s.made.contains_key(&fid) {
                    return self.wb_setattr_sent_dir(&mut s, c, fid, set);
                }
                let m = s.made.get(&fid)?;
                if !m.sending {
                    let parent = m.parent;
                    let max = s.dirs.get(&parent).map_or(0, Held::data_max);
                    if set.size.is_some_and(|n| n > max) {
                        // Too large to keep: sent, then resized as usual.
                        return None;
                    }
                    let mut attr = attr_of(&s, fid)?;
                    if let Err(e) = perms::apply(c, &mut attr, set, Time::now()) {
                        return Some(Err(e));
                    }
                    if let Some(h) = s.dirs.get_mut(&fid) {
                        h.attr = attr.clone();
                    }
                    let m = s.made.get_mut(&fid)?;
                    if let Some(n) = set.size {
                        m.data.resize(n as usize, 0);
                    }
                    m.attr = attr.clone();
                    if c.uid == 0 {
                        // Root may have given it away: root makes it.
                        m.caller = Caller {
                            umask: None,
                            ..c.clone()
                        };
                    }
                    self.router.lease_hit();
                    return Some(Ok(attr));
                }
            }
            self.wb_wait_flush().await;
        }
    }

    /// Change the attributes of directory `fid`, written back here and
    /// sent: answered here, and queued after what was made in it (a
    /// change of its mode must not overtake the creates it allowed).
    fn wb_setattr_sent_dir(
        &self,
        s: &mut State,
        c: &Caller,
        fid: Fid,
        set: &SetAttr,
    ) -> Option<Result<Attr, Errno>> {
        let h = answering(s, fid)?;
        if set.size.is_some() {
            return Some(Err(Errno::EISDIR));
        }
        let (mdt, mut attr) = (h.mdt, h.attr.clone());
        if let Err(e) = perms::apply(c, &mut attr, set, Time::now()) {
            return Some(Err(e));
        }
        if let Some(h) = s.dirs.get_mut(&fid) {
            h.attr = attr.clone();
        }
        s.push(
            mdt,
            Op::SetAttr {
                fid,
                set: set.clone(),
                caller: c.clone(),
            },
        );
        self.router.lease_hit();
        Some(Ok(attr))
    }

    /// Remove `name` from `parent` if it is written back: a directory
    /// (rmdir) if `dir`, else anything else (unlink). What was never sent
    /// is forgotten; what was, queued. `None` where the usual path must
    /// do it (a file open here: it may become an orphan).
    pub(crate) async fn wb_remove(
        &self,
        c: &Caller,
        parent: Fid,
        name: &Name,
        dir: bool,
    ) -> Option<Result<(), Errno>> {
        loop {
            {
                let mut s = self.wb.lock();
                let h = answering(&s, parent)?;
                let Some(&(fid, kind)) = h.names.get(name) else {
                    return Some(Err(Errno::ENOENT));
                };
                match (dir, kind == FileKind::Dir) {
                    (true, false) => return Some(Err(Errno::ENOTDIR)),
                    (false, true) => return Some(Err(Errno::EISDIR)),
                    _ => {}
                }
                let (mdt, pattr) = (h.mdt, h.attr.clone());
                // A sent file's owner matters only under the sticky bit.
                let victim = attr_of(&s, fid);
                let sticky_owner_unknown = victim.is_none()
                    && pattr.perm & 0o1000 != 0
                    && c.uid != 0
                    && c.uid != pattr.uid;
                if sticky_owner_unknown {
                    return None;
                }
                let victim = victim.unwrap_or_else(|| Attr {
                    uid: pattr.uid,
                    ..pattr.clone()
                });
                if let Err(e) = perms::may_remove(c, &pattr, &victim) {
                    return Some(Err(e));
                }
                if dir {
                    match s.dirs.get(&fid) {
                        Some(d) if !d.names.is_empty() => return Some(Err(Errno::ENOTEMPTY)),
                        Some(d) if d.answering => {}
                        // Not written back here: its MDT knows whether
                        // it is empty.
                        _ => return None,
                    }
                } else if !self.open_handles(fid).is_empty() {
                    return None;
                }
                let sending = s.made.get(&fid).map(|m| m.sending);
                if sending != Some(true) {
                    let now = Time::now();
                    if sending.is_some() {
                        s.cancel(mdt, fid);
                    } else if dir {
                        s.push(
                            mdt,
                            Op::Rmdir {
                                parent,
                                name: name.clone(),
                                caller: c.clone(),
                            },
                        );
                    } else {
                        let keep_orphan = self.has_open_files();
                        s.push(
                            mdt,
                            Op::Unlink {
                                parent,
                                name: name.clone(),
                                caller: c.clone(),
                                keep_orphan,
                            },
                        );
                    }
                    if dir {
                        s.dirs.remove(&fid);
                    }
                    if let Some(h) = s.dirs.get_mut(&parent) {
                        h.names.remove(name);
                    }
                    touch_dir(&mut s, parent, -i32::from(dir), now);
                    let due = s.due(std::time::Instant::now());
                    drop(s);
                    if due {
                        self.wb_kick();
                    }
                    self.router.lease_hit();
                    return Some(Ok(()));
                }
            }
            self.wb_wait_flush().await;
        }
    }

    /// Up to `max` entries of `dir` after `cookie`, if it is written back
    /// and every name in it is known with its attributes (here, or under
    /// a lease once sent): in its MDT's order (by name hash, the cookie).
    pub(crate) fn wb_listing(
        &self,
        c: &Caller,
        dir: Fid,
        cookie: u64,
        max: u32,
    ) -> Option<Result<(Vec<DirEntry>, bool), Errno>> {
        let s = self.wb.lock();
        let h = answering(&s, dir)?;
        if !may(c, &h.attr, 0o4) {
            return Some(Err(Errno::EACCES));
        }
        let mut after = Vec::with_capacity(h.names.len());
        for (name, (fid, _)) in &h.names {
            if loom_proto::fid::name_hash(name.as_bytes()) > cookie {
                after.push((name.clone(), self.known_attr(&s, *fid)?));
            }
        }
        let (entries, eof) = crate::meta::listing_page(after, cookie, max);
        self.router.lease_hit();
        Some(Ok((entries, eof)))
    }

    /// Keep a write of `data` at `offset` to file `fid` with it, if it was
    /// made here and is not sent yet, the write ends within what is
    /// kept, and its new bytes fit the room known for them (see `room`).
    pub(crate) fn wb_write(&self, fid: Fid, offset: u64, data: &[u8]) -> Absorbed {
        let mut s = self.wb.lock();
        let Some(m) = s.made.get(&fid) else {
            return Absorbed::No;
        };
        if m.sending {
            return Absorbed::Busy;
        }
        let Some(h) = s.dirs.get(&m.parent) else {
            return Absorbed::No;
        };
        let Some(end) = offset
            .checked_add(data.len() as u64)
            .filter(|e| *e <= h.data_max())
        else {
            return Absorbed::No;
        };
        // Only bytes past those kept need room (a rewrite needs none).
        let kept = m.data.len() as u64;
        let grow = end.saturating_sub(kept);
        let mut taken = None;
        if grow > 0 {
            let a = &m.attr;
            match h.bytes_go() {
                Bytes::Dom { mdt } => {
                    let ids = quota::ids_of(&m.caller, a.uid, a.gid, a.projid);
                    match s.dom_check(mdt, &ids, grow, Instant::now()) {
                        Check::Fits => s.dom_take(mdt, &ids, grow),
                        Check::Ask => return Absorbed::Ask,
                        Check::Full => return Absorbed::No,
                    }
                }
                Bytes::Objects => {
                    let cost = loom_proto::grant::cost(kept, grow, false);
                    match self.wb_first_grant(super::owner_of(a), cost) {
                        Some(t) => taken = Some(t),
                        None => return Absorbed::No,
                    }
                }
            }
        }
        let Some(m) = s.made.get_mut(&fid) else {
            return Absorbed::No;
        };
        if let Some(t) = taken {
            m.taken.absorb(t);
        }
        if m.data.len() < end as usize {
            m.data.resize(end as usize, 0);
        }
        m.data[offset as usize..end as usize].copy_from_slice(data);
        let now = Time::now();
        m.attr.size = m.attr.size.max(end);
        m.attr.mtime = now;
        m.attr.ctime = now;
        s.kept_bytes += data.len() as u64;
        let due = s.due(std::time::Instant::now());
        drop(s);
        if due {
            self.wb_kick();
        }
        Absorbed::Kept
    }

    /// Bytes of file `fid` made here and not sent: `len` at `offset`
    /// (short at its end). `None` once it is sent.
    pub(crate) fn wb_read(&self, fid: Fid, offset: u64, len: usize) -> Option<Vec<u8>> {
        let s = self.wb.lock();
        let m = s.made.get(&fid)?;
        let size = m.attr.size;
        let start = offset.min(size) as usize;
        let end = offset.saturating_add(len as u64).min(size) as usize;
        let mut out = vec![0u8; end - start];
        let have = m.data.len().min(end);
        if have > start {
            out[..have - start].copy_from_slice(&m.data[start..have]);
        }
        Some(out)
    }
}

impl Client {
    /// An open of `attr`, made here and not sent, for `access`
    /// (`loom_proto::msg::access` bits), checked as its MDT would.
    pub(crate) fn open_made_here(
        &self,
        c: &Caller,
        attr: Attr,
        access: u32,
    ) -> Result<(Attr, Option<Layout>), Errno> {
        use loom_proto::msg::access::{READ, WRITE};
        let want = (if access & READ != 0 { 0o4 } else { 0 })
            | (if access & WRITE != 0 { 0o2 } else { 0 });
        if want != 0 && !may(c, &attr, want) {
            return Err(Errno::EACCES);
        }
        let layout = (attr.kind == FileKind::File).then(provisional_layout);
        Ok((attr, layout))
    }
}
