//! The inodes this MDT holds, counted per user, group and project.
//!
//! The count moves in the commit step ([`MdtService::apply_batch`]) from
//! each transaction's before- and after-images of the inodes it touches,
//! and is written in the same batch as the change: it is exact whenever
//! the change is kept, across kill -9, replays, cross-MDT steps finished
//! by the resolver and `loom migrate` (an inode that leaves is counted
//! out of one MDT in the batch that removes it, into the other in the one
//! that adopts it). A chown moves the inode between two users' counts.
//!
//! Stored in the meta keyspace: `quota/usage/<u|g|p>/<id, 8 hex digits>`
//! holds a [`QuotaUsage`]; `quota/counted` marks a store whose counts are
//! complete. A store from before quotas is counted once, by a scan, when
//! it is first opened.

use super::records::InodeRec;
use super::tx::{decode_record, encode_record, read_meta, store_err, Tx};
use super::MdtService;
use crate::error::{Handled, ServerError};
use loom_proto::msg::{Reply, ReqCtx};
use loom_proto::quota::{QuotaDrift, QuotaId, QuotaKind, QuotaUsage};
use loom_proto::Errno;
use loom_store::kv::{Batch, KvStore, Space};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

/// Marks a store whose counts are complete: `u8`, the counting's version.
const COUNTED: &str = "quota/counted";
const COUNTED_VERSION: u8 = 1;
const USAGE_PREFIX: &str = "quota/usage/";
/// This MDT's share of a limited id, as the master last granted it or
/// took it back: `quota/share/<u|g|p>/<id>` (u64).
const SHARE_PREFIX: &str = "quota/share/";

fn usage_key(who: QuotaId) -> String {
    format!("{USAGE_PREFIX}{}/{:08x}", who.kind.letter(), who.id)
}

/// Key of this MDT's share of `who`.
pub fn share_key(who: QuotaId) -> String {
    format!("{SHARE_PREFIX}{}/{:08x}", who.kind.letter(), who.id)
}

fn parse_usage_key(k: &[u8]) -> Option<QuotaId> {
    parse_id(std::str::from_utf8(k).ok()?.strip_prefix(USAGE_PREFIX)?)
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

/// The ids an inode counts against.
fn ids_of(r: &InodeRec) -> [QuotaId; 3] {
    [
        QuotaId::user(r.attr.uid),
        QuotaId::group(r.attr.gid),
        QuotaId::project(r.attr.projid),
    ]
}

/// What one transaction changes in the counts.
#[derive(Default)]
pub struct Deltas(Vec<(QuotaId, i64)>);

impl Deltas {
    /// The changes `t` makes: -1 for each id an inode counted against
    /// before it, +1 for each after it.
    pub fn of(t: &Tx<'_>) -> Deltas {
        let mut d: Vec<(QuotaId, i64)> = Vec::new();
        let mut add = |who: QuotaId, n: i64| match d.iter_mut().find(|(w, _)| *w == who) {
            Some((_, v)) => *v += n,
            None => d.push((who, n)),
        };
        for (before, after) in t.images() {
            let (b, a) = (before.map(ids_of), after.map(ids_of));
            if b == a {
                continue;
            }
            for who in b.into_iter().flatten() {
                add(who, -1);
            }
            for who in a.into_iter().flatten() {
                add(who, 1);
            }
        }
        d.retain(|(_, n)| *n != 0);
        Deltas(d)
    }

    /// What a new inode of these ids adds.
    pub fn new_inode(uid: u32, gid: u32, projid: u32) -> Deltas {
        Deltas(vec![
            (QuotaId::user(uid), 1),
            (QuotaId::group(gid), 1),
            (QuotaId::project(projid), 1),
        ])
    }

    /// No change.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// How long an MDT trusts that an id has no limits before it asks the
/// master again (a limit set while the MDT could not be told holds on it
/// after this at most).
const UNLIMITED_FOR: std::time::Duration = std::time::Duration::from_secs(30);

/// What the quota master granted this MDT of one id.
#[derive(Clone, Copy)]
enum Grant {
    /// No limits, as the master said at this time.
    Unlimited(std::time::Instant),
    /// Limited: this MDT may hold this many inodes of the id.
    Up(u64),
}

/// The counts, as committed batches left them, and the grants.
pub struct Quotas {
    usage: Mutex<HashMap<QuotaId, QuotaUsage>>,
    grants: Mutex<HashMap<QuotaId, Grant>>,
}

impl Quotas {
    /// Load the counts of `store`; a store that has none yet (made before
    /// quotas) is counted by a scan first.
    pub fn load(store: &dyn KvStore, index: u32) -> Result<Quotas, ServerError> {
        if read_meta::<u8>(store, COUNTED)?.is_none() {
            let usage = recount(store)?;
            let mut b = Batch::new();
            for (who, u) in &usage {
                b.put(Space::Meta, usage_key(*who).into_bytes(), encode_record(u)?);
            }
            b.put(
                Space::Meta,
                COUNTED.as_bytes().to_vec(),
                encode_record(&COUNTED_VERSION)?,
            );
            let t = store.apply(b).map_err(store_err)?;
            store.sync_through(t).map_err(store_err)?;
            tracing::info!(
                "MDT{index:04x}: counted the inodes of {} users, groups and projects",
                usage.len()
            );
            let q = Quotas {
                usage: Mutex::new(usage),
                grants: Mutex::default(),
            };
            q.load_shares(store)?;
            return Ok(q);
        }
        let mut usage = HashMap::new();
        let mut after: Option<Vec<u8>> = None;
        loop {
            let page = store
                .scan(Space::Meta, USAGE_PREFIX.as_bytes(), after.as_deref(), 1024)
                .map_err(store_err)?;
            for (k, v) in &page {
                let who = parse_usage_key(k).ok_or_else(|| {
                    store_err(format!("a quota key {:?}", String::from_utf8_lossy(k)))
                })?;
                usage.insert(who, decode_record::<QuotaUsage>(v)?);
            }
            if page.len() < 1024 {
                break;
            }
            after = page.last().map(|(k, _)| k.clone());
        }
        let q = Quotas {
            usage: Mutex::new(usage),
            grants: Mutex::default(),
        };
        q.load_shares(store)?;
        Ok(q)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<QuotaId, QuotaUsage>> {
        self.usage.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Put the counts `d` leads to in `batch`, returning them for
    /// [`Quotas::published`] once the batch is applied. Called where
    /// batches are applied one at a time.
    pub fn stage(
        &self,
        batch: &mut Batch,
        d: &Deltas,
    ) -> Result<Vec<(QuotaId, QuotaUsage)>, ServerError> {
        let usage = self.lock();
        let mut out = Vec::with_capacity(d.0.len());
        for (who, n) in &d.0 {
            let mut u = usage.get(who).copied().unwrap_or_default();
            u.inodes = u.inodes.saturating_add_signed(*n);
            batch.put(
                Space::Meta,
                usage_key(*who).into_bytes(),
                encode_record(&u)?,
            );
            out.push((*who, u));
        }
        Ok(out)
    }

    /// The counts a staged batch set are applied.
    pub fn published(&self, counts: Vec<(QuotaId, QuotaUsage)>) {
        let mut usage = self.lock();
        for (who, u) in counts {
            usage.insert(who, u);
        }
    }

    /// What is counted for `who`.
    pub fn usage(&self, who: QuotaId) -> QuotaUsage {
        self.lock().get(&who).copied().unwrap_or_default()
    }

    fn grants(&self) -> std::sync::MutexGuard<'_, HashMap<QuotaId, Grant>> {
        self.grants.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a client's change that moves the counts by `d` stays within
    /// what this MDT was granted: `ServerError::QuotaShort` for the first
    /// id it does not (or that the master has not been asked about).
    pub fn admit(&self, d: &Deltas) -> Result<(), ServerError> {
        let usage = self.lock();
        let grants = self.grants();
        for (who, n) in &d.0 {
            let Ok(n) = u64::try_from(*n) else { continue };
            if n == 0 {
                continue;
            }
            let used = usage.get(who).map_or(0, |u| u.inodes);
            match grants.get(who) {
                Some(Grant::Unlimited(at)) if at.elapsed() < UNLIMITED_FOR => {}
                Some(Grant::Up(g)) if used + n <= *g => {}
                Some(Grant::Up(g)) => {
                    return Err(ServerError::QuotaShort {
                        who: *who,
                        need: used + n - g,
                    })
                }
                _ => return Err(ServerError::QuotaShort { who: *who, need: n }),
            }
        }
        Ok(())
    }

    /// Whether the master last said `who` has limits.
    pub fn known_limited(&self, who: QuotaId) -> bool {
        matches!(self.grants().get(&who), Some(Grant::Up(_)))
    }

    /// The master's answer for `who`.
    pub fn granted(&self, who: QuotaId, limited: bool, granted: u64) {
        let g = if limited {
            Grant::Up(granted)
        } else {
            Grant::Unlimited(std::time::Instant::now())
        };
        self.grants().insert(who, g);
    }

    /// Give back what is granted of `who` beyond its usage: the usage,
    /// now all this MDT holds. With `forget`, also whether `who` is
    /// limited (its limits changed).
    pub fn release(&self, who: QuotaId, forget: bool) -> u64 {
        let used = self.usage(who).inodes;
        if forget {
            self.grants().remove(&who);
        } else {
            self.grants().insert(who, Grant::Up(used));
        }
        used
    }

    /// The shares this MDT holds of limited ids, as stored (see
    /// [`share_key`]): known limited after a restart, also while the
    /// master cannot be asked.
    fn load_shares(&self, store: &dyn KvStore) -> Result<(), ServerError> {
        let mut after: Option<Vec<u8>> = None;
        let mut grants = self.grants();
        loop {
            let page = store
                .scan(Space::Meta, SHARE_PREFIX.as_bytes(), after.as_deref(), 1024)
                .map_err(store_err)?;
            for (k, v) in &page {
                let who = std::str::from_utf8(k)
                    .ok()
                    .and_then(|k| k.strip_prefix(SHARE_PREFIX))
                    .and_then(parse_id)
                    .ok_or_else(|| {
                        store_err(format!("a quota key {:?}", String::from_utf8_lossy(k)))
                    })?;
                grants.insert(who, Grant::Up(decode_record(v)?));
            }
            if page.len() < 1024 {
                return Ok(());
            }
            after = page.last().map(|(k, _)| k.clone());
        }
    }

    fn all(&self) -> HashMap<QuotaId, QuotaUsage> {
        self.lock().clone()
    }
}

/// Count every inode of `store` by its ids.
fn recount(store: &dyn KvStore) -> Result<HashMap<QuotaId, QuotaUsage>, ServerError> {
    let mut usage: HashMap<QuotaId, QuotaUsage> = HashMap::new();
    let mut after: Option<Vec<u8>> = None;
    loop {
        let page = store
            .scan(Space::Inodes, &[], after.as_deref(), 1024)
            .map_err(store_err)?;
        for (k, v) in &page {
            let r = InodeRec::decode(v)
                .map_err(|e| store_err(format!("inode {}: {}", hex(k), e.msg)))?;
            for who in ids_of(&r) {
                usage.entry(who).or_default().inodes += 1;
            }
        }
        if page.len() < 1024 {
            return Ok(usage);
        }
        after = page.last().map(|(k, _)| k.clone());
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Whether the caller may see `who`'s usage: root anyone's, a user their
/// own, their groups' and any project's (a project is a directory tree,
/// whose cap its users need to see).
pub(super) fn may_see(ctx: &ReqCtx, who: QuotaId) -> Result<(), ServerError> {
    let ok = ctx.uid == 0
        || match who.kind {
            QuotaKind::User => who.id == ctx.uid,
            QuotaKind::Group => who.id == ctx.gid || ctx.groups.contains(&who.id),
            QuotaKind::Project => true,
        };
    if ok {
        Ok(())
    } else {
        Err(ServerError::refused(
            Errno::EPERM,
            format!("only root may see the usage of another {}", who.kind.name()),
        ))
    }
}

impl MdtService {
    /// What this MDT counts for `who`.
    pub(super) fn quota_usage(&self, ctx: &ReqCtx, who: QuotaId) -> Handled {
        may_see(ctx, who)?;
        Ok(Reply::QuotaUsage(self.quotas.usage(who)))
    }

    /// Give inode `fid` project id `projid`, and a directory the passing
    /// on of it (root only, as Lustre's `lfs project`): the inode's
    /// usage moves to the new project in the same commit.
    pub(super) async fn set_project(
        &self,
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
        let g = self.ns.lock().await;
        let mut t = Tx::new(&*self.store);
        let r = t.inode(fid)?;
        if inherit && r.attr.kind != loom_proto::msg::FileKind::Dir {
            return Err(ServerError::refused(
                Errno::ENOTDIR,
                format!("{fid} is not a directory: only a directory passes a project id on"),
            ));
        }
        r.attr.projid = projid;
        r.proj_inherit = inherit && r.attr.kind == loom_proto::msg::FileKind::Dir;
        r.attr.ctime = loom_proto::msg::Time::now();
        let reply = Reply::Project {
            projid,
            inherit: r.proj_inherit,
        };
        let ticket = self.apply(ctx, t, &reply)?;
        drop(g);
        self.settle(ctx, ticket).await?;
        Ok(reply)
    }

    /// Inode `fid`'s project id and whether it passes it on.
    pub(super) fn get_project(&self, fid: loom_proto::Fid) -> Handled {
        let r = super::tx::read_inode(&*self.store, fid)?;
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
        let _g = self.ns.lock().await;
        let scanned = recount(&*self.store)?;
        let counted = self.quotas.all();
        let mut ids: BTreeMap<QuotaId, (QuotaUsage, QuotaUsage)> = BTreeMap::new();
        for (who, u) in &counted {
            ids.entry(*who).or_default().0 = *u;
        }
        for (who, u) in &scanned {
            ids.entry(*who).or_default().1 = *u;
        }
        // An id counted down to nothing is no drift.
        ids.retain(|_, (c, s)| *c != QuotaUsage::default() || *s != QuotaUsage::default());
        let drift = ids
            .iter()
            .filter(|(_, (c, s))| c.inodes != s.inodes)
            .map(|(who, (c, s))| QuotaDrift {
                who: *who,
                counted: *c,
                scanned: *s,
            })
            .collect();
        Ok(Reply::QuotaCheck {
            ids: ids.len() as u64,
            drift,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_keys_name_their_id_and_nothing_else_parses() {
        for who in [
            QuotaId::user(0),
            QuotaId::group(65534),
            QuotaId::project(u32::MAX),
        ] {
            assert_eq!(parse_usage_key(usage_key(who).as_bytes()), Some(who));
        }
        assert_eq!(parse_usage_key(b"quota/usage/x/00000001"), None);
        assert_eq!(parse_usage_key(b"quota/usage/u/1"), None);
        assert_eq!(parse_usage_key(b"quota/counted"), None);
    }
}
