//! The inodes this MDT holds, and the bytes of their Data-on-MDT
//! components, counted per user, group and project.
//!
//! The count moves in the commit step ([`MdtService::apply_batch`]) from
//! each transaction's before- and after-images of the inodes it touches,
//! and is written in the same batch as the change: it is exact whenever
//! the change is kept, across kill -9, replays, cross-MDT steps finished
//! by the resolver and `loom migrate` (an inode that leaves is counted
//! out of one MDT in the batch that removes it, into the other in the one
//! that adopts it). A chown moves the inode between two users' counts.
//!
//! A file's Data-on-MDT bytes count as its size up to the end of its
//! Data-on-MDT component (the MDT stores them whole, in 64 KiB blocks,
//! holes aside).
//!
//! Stored in the meta keyspace as one count per (uid, gid, project)
//! that some inode has: `quota/t/<uid><gid><projid>` (each 8 hex digits)
//! holds a [`Held`], so a create or unlink writes one record, not one per
//! id (three cost creates 15%). The per-id counts are sums of these, kept
//! in memory. `quota/counted` marks a store whose counts are complete; a
//! store from before (or counted by an older version) is counted once,
//! by a scan, when it is opened.

use super::records::InodeRec;
use super::tx::{decode_record, encode_record, read_meta, store_err, Tx};
use super::MdtService;
use crate::error::{Handled, ServerError};
use crate::quota::{may_see, Grant, Res, Shares};
use loom_proto::msg::{Reply, ReqCtx};
use loom_proto::quota::{QuotaId, QuotaKind, QuotaUsage};
use loom_proto::Errno;
use loom_store::kv::{Batch, KvStore, Space};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Marks a store whose counts are complete: `u8`, the counting's version
/// (1: per-id keys under `quota/usage/`; 2: inodes per triple; 3: inodes
/// and Data-on-MDT bytes per triple). Older ones are recounted.
const COUNTED: &str = "quota/counted";
const COUNTED_VERSION: u8 = 3;
const USAGE_PREFIX: &str = "quota/usage/";
const TRIPLE_PREFIX: &str = "quota/t/";

/// The (uid, gid, project id) an inode counts against.
type Triple = (u32, u32, u32);

fn triple_key((u, g, p): Triple) -> String {
    format!("{TRIPLE_PREFIX}{u:08x}{g:08x}{p:08x}")
}

fn parse_triple_key(k: &[u8]) -> Option<Triple> {
    let rest = std::str::from_utf8(k).ok()?.strip_prefix(TRIPLE_PREFIX)?;
    if rest.len() != 24 {
        return None;
    }
    let n = |i: usize| u32::from_str_radix(rest.get(i..i + 8)?, 16).ok();
    Some((n(0)?, n(8)?, n(16)?))
}

fn ids((u, g, p): Triple) -> [QuotaId; 3] {
    [QuotaId::user(u), QuotaId::group(g), QuotaId::project(p)]
}

/// What one triple holds: a record's value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Held {
    /// Inodes.
    pub inodes: u64,
    /// Data-on-MDT bytes.
    pub bytes: u64,
}

impl Held {
    fn is_empty(&self) -> bool {
        *self == Held::default()
    }

    /// `self` moved by `d` (inodes, bytes).
    fn moved(self, (di, db): (i64, i64)) -> Held {
        Held {
            inodes: self.inodes.saturating_add_signed(di),
            bytes: self.bytes.saturating_add_signed(db),
        }
    }
}

/// The counts: per triple, as stored, and per id, their sums.
#[derive(Default)]
struct Counts {
    by_triple: HashMap<Triple, Held>,
    by_id: HashMap<QuotaId, QuotaUsage>,
}

impl Counts {
    fn of(by_triple: HashMap<Triple, Held>) -> Counts {
        let mut c = Counts::default();
        for (t, n) in by_triple {
            c.set(t, n);
        }
        c
    }

    /// Triple `t` now holds `n`.
    fn set(&mut self, t: Triple, n: Held) {
        let old = self.by_triple.get(&t).copied().unwrap_or_default();
        if n.is_empty() {
            self.by_triple.remove(&t);
        } else {
            self.by_triple.insert(t, n);
        }
        for who in ids(t) {
            let u = self.by_id.entry(who).or_default();
            u.inodes = (u.inodes + n.inodes).saturating_sub(old.inodes);
            u.bytes = (u.bytes + n.bytes).saturating_sub(old.bytes);
            if *u == QuotaUsage::default() {
                self.by_id.remove(&who);
            }
        }
    }
}

/// This MDT's share of a limited id, as the master last granted it or
/// took it back: `quota/share/<u|g|p>/<id>` (u64, inodes) and
/// `quota/bshare/<u|g|p>/<id>` (u64, Data-on-MDT bytes).
const SHARE_PREFIX: &str = "quota/share/";
const BSHARE_PREFIX: &str = "quota/bshare/";

fn share_prefix(res: Res) -> &'static str {
    match res {
        Res::Inodes => SHARE_PREFIX,
        Res::Bytes => BSHARE_PREFIX,
    }
}

/// Key of this MDT's share of `who`'s `res` limit.
pub fn share_key(who: QuotaId, res: Res) -> String {
    format!("{}{}/{:08x}", share_prefix(res), who.kind.letter(), who.id)
}

/// The id a meta key `PREFIX<u|g|p>/<id>` names; one that does not parse
/// is damage.
pub(super) fn id_under(k: &[u8], prefix: &str) -> Result<QuotaId, ServerError> {
    std::str::from_utf8(k)
        .ok()
        .and_then(|k| k.strip_prefix(prefix))
        .and_then(parse_id)
        .ok_or_else(|| store_err(format!("a quota key {:?}", String::from_utf8_lossy(k))))
}

/// `<u|g|p>/<id, 8 hex digits>`.
pub(super) fn parse_id(rest: &str) -> Option<QuotaId> {
    let (letter, id) = rest.split_once('/')?;
    let mut letters = letter.chars();
    let kind = QuotaKind::from_letter(letters.next()?)?;
    if letters.next().is_some() || id.len() != 8 {
        return None;
    }
    Some(QuotaId {
        kind,
        id: u32::from_str_radix(id, 16).ok()?,
    })
}

/// The triple an inode counts against.
fn triple_of(r: &InodeRec) -> Triple {
    (r.attr.uid, r.attr.gid, r.attr.projid)
}

/// The Data-on-MDT bytes of an inode: its size up to the end of its
/// Data-on-MDT component.
fn dom_bytes(r: &InodeRec) -> u64 {
    r.layout
        .as_ref()
        .map_or(0, |l| r.attr.size.min(l.dom_end()))
}

/// What one transaction changes in the counts (inodes, bytes): per
/// triple (what is stored) and per id (what limits are checked against).
#[derive(Default)]
pub struct Deltas {
    ids: Vec<(QuotaId, (i64, i64))>,
    triples: Vec<(Triple, (i64, i64))>,
}

fn bump<K: PartialEq>(v: &mut Vec<(K, (i64, i64))>, k: K, (i, b): (i64, i64)) {
    match v.iter_mut().find(|(w, _)| *w == k) {
        Some((_, x)) => *x = (x.0 + i, x.1 + b),
        None => v.push((k, (i, b))),
    }
}

impl Deltas {
    /// The changes `t` makes: an inode and its Data-on-MDT bytes counted
    /// out of the ids it counted against before it, into those after it.
    pub fn of(t: &Tx<'_>) -> Deltas {
        let mut d = Deltas::default();
        for (before, after) in t.images() {
            let counted = |r: &InodeRec| (triple_of(r), dom_bytes(r) as i64);
            let (b, a) = (before.map(counted), after.map(counted));
            if b == a {
                continue;
            }
            if let Some((t, n)) = b {
                d.add(t, (-1, -n));
            }
            if let Some((t, n)) = a {
                d.add(t, (1, n));
            }
        }
        d.ids.retain(|(_, n)| *n != (0, 0));
        d.triples.retain(|(_, n)| *n != (0, 0));
        d
    }

    fn add(&mut self, t: Triple, n: (i64, i64)) {
        bump(&mut self.triples, t, n);
        for who in ids(t) {
            bump(&mut self.ids, who, n);
        }
    }

    /// What a new inode of these ids adds.
    pub fn new_inode(uid: u32, gid: u32, projid: u32) -> Deltas {
        let mut d = Deltas::default();
        d.add((uid, gid, projid), (1, 0));
        d
    }

    /// No change.
    pub fn is_empty(&self) -> bool {
        self.triples.is_empty()
    }
}

/// The counts, as committed batches left them, and the grants.
pub struct Quotas {
    /// Ids a change exempt from limits took past this MDT's share, for
    /// the master to hear of ([`Quotas::overshot`]).
    overshot: Mutex<Vec<(QuotaId, Res)>>,
    counts: Mutex<Counts>,
    /// Shares of inode limits.
    shares: Shares,
    /// Shares of block limits, for Data-on-MDT bytes.
    bshares: Shares,
}

impl Quotas {
    /// Load the counts of `store`; a store that has none yet (made before
    /// quotas, or counted by an older version) is counted by a scan first.
    pub fn load(store: &dyn KvStore, index: u32) -> Result<Quotas, ServerError> {
        let by_triple = if read_meta::<u8>(store, COUNTED)? == Some(COUNTED_VERSION) {
            let mut m = HashMap::new();
            for (k, v) in scan_meta(store, TRIPLE_PREFIX)? {
                let t = parse_triple_key(&k).ok_or_else(|| {
                    store_err(format!("a quota key {:?}", String::from_utf8_lossy(&k)))
                })?;
                m.insert(t, decode_record::<Held>(&v)?);
            }
            m
        } else {
            let m = recount(store)?;
            let mut b = Batch::new();
            for prefix in [USAGE_PREFIX, TRIPLE_PREFIX] {
                for (k, _) in scan_meta(store, prefix)? {
                    b.delete(Space::Meta, k);
                }
            }
            for (t, n) in &m {
                b.put(Space::Meta, triple_key(*t).into_bytes(), encode_record(n)?);
            }
            b.put(
                Space::Meta,
                COUNTED.as_bytes().to_vec(),
                encode_record(&COUNTED_VERSION)?,
            );
            let ticket = store.apply(b).map_err(store_err)?;
            store.sync_through(ticket).map_err(store_err)?;
            tracing::info!(
                "MDT{index:04x}: counted its inodes by owner, group and project ({} kinds)",
                m.len()
            );
            m
        };
        let q = Quotas {
            overshot: Mutex::default(),
            counts: Mutex::new(Counts::of(by_triple)),
            shares: Shares::default(),
            bshares: Shares::default(),
        };
        q.load_shares(store)?;
        Ok(q)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Put the counts `d` leads to in `batch`, returning them for
    /// [`Quotas::published`] once the batch is applied. Called where
    /// batches are applied one at a time.
    pub fn stage(&self, batch: &mut Batch, d: &Deltas) -> Result<Vec<(Triple, Held)>, ServerError> {
        let c = self.lock();
        let mut out = Vec::with_capacity(d.triples.len());
        for (t, n) in &d.triples {
            let now = c.by_triple.get(t).copied().unwrap_or_default().moved(*n);
            let key = triple_key(*t).into_bytes();
            if now.is_empty() {
                batch.delete(Space::Meta, key);
            } else {
                batch.put(Space::Meta, key, encode_record(&now)?);
            }
            out.push((*t, now));
        }
        Ok(out)
    }

    /// The counts a staged batch set are applied.
    pub fn published(&self, counts: Vec<(Triple, Held)>) {
        let mut c = self.lock();
        for (t, n) in counts {
            c.set(t, n);
        }
    }

    /// What is counted for `who`.
    pub fn usage(&self, who: QuotaId) -> QuotaUsage {
        self.lock().by_id.get(&who).copied().unwrap_or_default()
    }

    /// Whether a client's change that moves the counts by `d` stays within
    /// what this MDT was granted: `ServerError::QuotaShort` for the first
    /// id and resource it does not (or that the master has not been asked
    /// about).
    pub fn admit(&self, d: &Deltas) -> Result<(), ServerError> {
        let counts = self.lock();
        let usage = &counts.by_id;
        for (who, (di, db)) in &d.ids {
            let u = usage.get(who).copied().unwrap_or_default();
            for (res, n) in [(Res::Inodes, *di), (Res::Bytes, *db)] {
                let Ok(n) = u64::try_from(n) else { continue };
                if n == 0 {
                    continue;
                }
                let used = res.of_usage(&u);
                let short = |need| ServerError::QuotaShort {
                    who: *who,
                    need,
                    res,
                };
                // The master grants `usage + need`: ask for the change's
                // own amount beyond the usage.
                match self.shares(res).get(*who) {
                    Some(Grant::Unlimited(_)) => {}
                    Some(Grant::Up(g)) if used + n <= g => {}
                    Some(Grant::Up(_)) | None => return Err(short(n)),
                }
            }
        }
        Ok(())
    }

    /// A change exempt from limits (root's) moves the counts by `d`:
    /// note every limited id it takes past this MDT's share, for the
    /// master to hear of. Called before the change is applied, with the
    /// counts as they are.
    pub fn overshot(&self, d: &Deltas) {
        let counts = self.lock();
        let mut over = Vec::new();
        for (who, (di, db)) in &d.ids {
            let u = counts.by_id.get(who).copied().unwrap_or_default();
            for (res, n) in [(Res::Inodes, *di), (Res::Bytes, *db)] {
                let Ok(n) = u64::try_from(n) else { continue };
                if let Some(Grant::Up(g)) = self.shares(res).get(*who) {
                    if n > 0 && res.of_usage(&u) + n > g {
                        over.push((*who, res));
                    }
                }
            }
        }
        drop(counts);
        if !over.is_empty() {
            self.overshot
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend(over);
        }
    }

    /// How much more of `res` `who` may own within this MDT's share:
    /// `None` when the master has not been asked (or its "no limits" is
    /// old), `Some(None)` when it has no limit of `res`.
    pub fn room(&self, who: QuotaId, res: Res) -> Option<Option<u64>> {
        let used = res.of_usage(&self.usage(who));
        match self.shares(res).get(who)? {
            Grant::Unlimited(_) => Some(None),
            Grant::Up(g) => Some(Some(g.saturating_sub(used))),
        }
    }

    /// Whether this MDT knows of any limited id (else no change can pass
    /// a share, and [`Quotas::overshot`] need not look).
    pub fn any_limited(&self) -> bool {
        self.shares.any_limited() || self.bshares.any_limited()
    }

    /// Whether [`Quotas::overshot`] noted any id not reported yet.
    pub fn has_overshot(&self) -> bool {
        !self
            .overshot
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty()
    }

    /// The ids noted by [`Quotas::overshot`] since the last call.
    pub fn take_overshot(&self) -> Vec<(QuotaId, Res)> {
        let mut v = std::mem::take(&mut *self.overshot.lock().unwrap_or_else(|p| p.into_inner()));
        v.sort_by_key(|(w, r)| (*w, *r == Res::Bytes));
        v.dedup();
        v
    }

    /// This MDT's shares of limited ids' `res` limits.
    pub fn shares(&self, res: Res) -> &Shares {
        match res {
            Res::Inodes => &self.shares,
            Res::Bytes => &self.bshares,
        }
    }

    /// Give back what is granted of `who`'s `res` beyond its usage: the
    /// usage, now all this MDT holds. With `forget`, also whether `who`
    /// is limited (its limits changed).
    pub fn release(&self, who: QuotaId, res: Res, forget: bool) -> u64 {
        let used = res.of_usage(&self.usage(who));
        self.shares(res).release(who, used, forget);
        used
    }

    /// The shares this MDT holds of limited ids, as stored (see
    /// [`share_key`]): known limited after a restart, also while the
    /// master cannot be asked.
    fn load_shares(&self, store: &dyn KvStore) -> Result<(), ServerError> {
        for res in [Res::Inodes, Res::Bytes] {
            let prefix = share_prefix(res);
            for (k, v) in scan_meta(store, prefix)? {
                self.shares(res)
                    .granted(id_under(&k, prefix)?, true, decode_record(&v)?);
            }
        }
        Ok(())
    }

    fn all(&self) -> HashMap<QuotaId, QuotaUsage> {
        self.lock().by_id.clone()
    }
}

/// Count every inode of `store` by its triple.
fn recount(store: &dyn KvStore) -> Result<HashMap<Triple, Held>, ServerError> {
    let mut by_triple: HashMap<Triple, Held> = HashMap::new();
    let mut after: Option<Vec<u8>> = None;
    loop {
        let page = store
            .scan(Space::Inodes, &[], after.as_deref(), 1024)
            .map_err(store_err)?;
        for (k, v) in &page {
            let r = InodeRec::decode(v)
                .map_err(|e| store_err(format!("inode {}: {}", hex(k), e.msg)))?;
            let h = by_triple.entry(triple_of(&r)).or_default();
            h.inodes += 1;
            h.bytes += dom_bytes(&r);
        }
        if page.len() < 1024 {
            return Ok(by_triple);
        }
        after = page.last().map(|(k, _)| k.clone());
    }
}

/// Every key of the meta keyspace under `prefix`, with its value.
pub(super) fn scan_meta(
    store: &dyn KvStore,
    prefix: &str,
) -> Result<loom_store::kv::Pairs, ServerError> {
    let mut out = Vec::new();
    let mut after: Option<Vec<u8>> = None;
    loop {
        let page = store
            .scan(Space::Meta, prefix.as_bytes(), after.as_deref(), 1024)
            .map_err(store_err)?;
        let done = page.len() < 1024;
        after = page.last().map(|(k, _)| k.clone());
        out.extend(page);
        if done {
            return Ok(out);
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl MdtService {
    /// What this MDT counts for `who`.
    pub(super) fn quota_usage(&self, ctx: &ReqCtx, who: QuotaId) -> Handled {
        may_see(ctx, who)?;
        Ok(Reply::QuotaUsage(self.commit.quotas.usage(who)))
    }

    /// `QuotaRoom`: how many more inodes each of `ids` may own here, after
    /// asking the master once for `want` more of each whose share leaves
    /// less (as a create held back by `QuotaShort` would).
    pub(super) async fn quota_room(
        self: &Arc<Self>,
        ctx: &ReqCtx,
        ids: &[QuotaId],
        want: u32,
    ) -> Handled {
        let rooms = self.rooms(ctx, ids, u64::from(want), Res::Inodes).await?;
        Ok(Reply::QuotaRoom { rooms })
    }

    /// Per id of `ids` (at most 3: a new inode's owner, group and
    /// project), how much more of `res` it may own here, after asking the
    /// master for `want` more where the share leaves less.
    pub(super) async fn rooms(
        self: &Arc<Self>,
        ctx: &ReqCtx,
        ids: &[QuotaId],
        want: u64,
        res: Res,
    ) -> Result<Vec<(QuotaId, Option<u64>)>, ServerError> {
        if ids.len() > 3 {
            let msg = format!("a new inode counts against 3 ids, not {}", ids.len());
            return Err(ServerError::refused(Errno::EINVAL, msg));
        }
        let want = want.max(1);
        let mut rooms = Vec::with_capacity(ids.len());
        for &who in ids {
            may_see(ctx, who)?;
            let room = match self.commit.quotas.room(who, res) {
                Some(r) if r.is_none_or(|n| n >= want) => r,
                _ => {
                    // Near a limit the master refuses `want` whole: then
                    // one (what the next create or byte needs). EDQUOT
                    // for that too only means no more is granted: the
                    // room is what is left (maybe none).
                    for need in [want, 1] {
                        match self.quota_round(who, need, res, 1).await {
                            Ok(()) => break,
                            Err(e) if e.errno() == Errno::EDQUOT => {}
                            Err(e) => return Err(e),
                        }
                    }
                    self.commit.quotas.room(who, res).unwrap_or(Some(0))
                }
            };
            rooms.push((who, room));
        }
        Ok(rooms)
    }

    /// Give inode `fid` project id `projid`, and a directory the passing
    /// on of it (root only, as Lustre's `lfs project`): the inode's
    /// usage moves to the new project in the same commit.
    pub(super) async fn set_project(
        self: &Arc<Self>,
        ctx: &super::Rq<'_>,
        fid: loom_proto::Fid,
        projid: u32,
        inherit: bool,
    ) -> Handled {
        if ctx.ctx.uid != 0 {
            return Err(ServerError::refused(
                Errno::EPERM,
                "only root may set project ids (loom project)",
            ));
        }
        let (mut t, g) = self.begin().await.into_parts();
        let r = t.inode(fid)?;
        if inherit && r.attr.kind != loom_proto::msg::FileKind::Dir {
            return Err(ServerError::refused(
                Errno::ENOTDIR,
                format!("{fid} is not a directory: only a directory passes a project id on"),
            ));
        }
        let moved = r.attr.projid != projid;
        r.attr.projid = projid;
        r.proj_inherit = inherit && r.attr.kind == loom_proto::msg::FileKind::Dir;
        r.attr.ctime = loom_proto::msg::Time::now();
        let owner = super::owners::file_owner(&r.attr);
        let layout = r.layout.clone().filter(|_| moved);
        let reply = Reply::Project {
            projid,
            inherit: r.proj_inherit,
        };
        let told = self.note_owner(&mut t, fid, layout.as_ref(), owner)?;
        let ticket = self.apply(ctx, t, &reply)?;
        drop(g);
        self.settle(ctx, ticket).await?;
        self.tell_owner(told);
        Ok(reply)
    }

    /// Inode `fid`'s project id and whether it passes it on.
    pub(super) fn get_project(&self, fid: loom_proto::Fid) -> Handled {
        let r = super::tx::read_inode(&*self.names.store, fid)?;
        Ok(Reply::Project {
            projid: r.attr.projid,
            inherit: r.proj_inherit,
        })
    }

    /// Recount what this MDT holds and compare it with its counts (root
    /// only). Changes wait for the scan: it and the counts it is compared
    /// with see the same inodes.
    pub(super) async fn quota_check(&self, ctx: &ReqCtx) -> Handled {
        if ctx.uid != 0 {
            return Err(ServerError::refused(
                Errno::EPERM,
                "only root may check the quota counts",
            ));
        }
        let (_, _g) = self.begin().await.into_parts();
        let scanned = Counts::of(recount(&*self.names.store)?).by_id;
        Ok(crate::quota::drift(&self.commit.quotas.all(), &scanned))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triple_keys_name_their_ids_and_nothing_else_parses() {
        for t in [(0, 0, 0), (65534, 100, 7), (u32::MAX, 1, u32::MAX)] {
            assert_eq!(parse_triple_key(triple_key(t).as_bytes()), Some(t));
        }
        assert_eq!(parse_triple_key(b"quota/t/0000000100000002"), None);
        assert_eq!(parse_triple_key(b"quota/counted"), None);
        assert_eq!(parse_id("p/0000002a"), Some(QuotaId::project(42)));
        assert_eq!(parse_id("x/0000002a"), None);
    }

    #[test]
    fn per_id_counts_are_the_sums_of_their_triples() {
        let h = |inodes| Held {
            inodes,
            bytes: inodes * 100,
        };
        let mut c = Counts::of(HashMap::from([
            ((1, 10, 0), h(3)),
            ((1, 20, 0), h(2)),
            ((2, 10, 5), h(4)),
        ]));
        let n = |c: &Counts, who| c.by_id.get(&who).map_or(0, |u: &QuotaUsage| u.inodes);
        let bytes = |c: &Counts, who| c.by_id.get(&who).map_or(0, |u: &QuotaUsage| u.bytes);
        assert_eq!(n(&c, QuotaId::user(1)), 5);
        assert_eq!(n(&c, QuotaId::group(10)), 7);
        assert_eq!(n(&c, QuotaId::project(0)), 5);
        assert_eq!(bytes(&c, QuotaId::group(10)), 700);
        c.set((1, 10, 0), h(1));
        c.set((2, 10, 5), h(0));
        assert_eq!(n(&c, QuotaId::user(1)), 3);
        assert_eq!(n(&c, QuotaId::group(10)), 1);
        assert_eq!(bytes(&c, QuotaId::user(1)), 300);
        assert!(
            !c.by_id.contains_key(&QuotaId::user(2)),
            "counted down to nothing"
        );
        assert!(!c.by_triple.contains_key(&(2, 10, 5)));
    }
}
