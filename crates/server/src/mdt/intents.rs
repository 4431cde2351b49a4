//! Cross-MDT operations this MDT coordinates, made crash-safe by an
//! intent log.
//!
//! The MDT that holds a directory entry coordinates any change that also
//! touches objects on other MDTs: making a remote or striped directory
//! (`MkdirStriped`) and removing one (`Rmdir` of an entry whose directory
//! lives elsewhere or is striped). Before the first step on another MDT it
//! makes an intent record durable (keyspace `intents`); the last step, the
//! entry itself, is applied in one batch with the intent's deletion and
//! the client's reply. The parts done on other MDTs are repeatable and
//! undoable by their [`IntentRef`] (see [`super::remote`]).
//!
//! An intent found after a crash (or left by a step that failed) is
//! resolved by [`MdtService::resolve_intents`]:
//!
//! - a mkdir is rolled forward (parts made where missing, the entry put
//!   in, the reply recorded for the client's resend): its entry may have
//!   been seen, and used, before a crash took back its unsynced batch; a
//!   mkdir already answered with an error is marked aborted and undone;
//! - an rmdir still sealing is rolled back (its shards unsealed); one
//!   that began destroying shards is rolled forward, and its reply is
//!   recorded for the client's resend.
//!
//! Client changes wait until the intents found at start are resolved, so a
//! resend never races its own recovery; reads and other MDTs' steps are
//! served meanwhile (MDTs recovering at once need each other).
//! Distributed operations of one coordinator run one at a time.

use super::moves::{LinkIntent, RenameIntent, UnlinkIntent};
use super::perm::Cred;
use super::records::DentryRec;
use super::replies::ReplyKey;
use super::request::{Current, Rq};
use super::tx::{read_dentry, read_inode, read_meta, store_err, Tx};
use super::MdtService;
use crate::error::{Handled, ServerError};
use crate::fail;
use loom_proto::msg::{
    Attr, DirObject, DirStripe, FileKind, IntentRef, MdtRequest, PeerRequest, Reply, ReqCtx, Role,
    Time,
};
use loom_proto::{Errno, Fid, Layout, Name};
use loom_store::kv::Space;
use serde::{Deserialize, Serialize};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Version of the intent record (2: `DirObject` carries the default
/// compression; 3: the record keeps its caller; 4: `DirObject` carries
/// the project id; 5: `DirObject` carries the ACLs and the caller its
/// umask; versions 1 to 4 are still read).
const INTENT_REC_VERSION: u8 = 5;
/// Meta key of the next intent id: ids are never reused, since the parts
/// done for an intent are found again by its id.
pub const NEXT_INTENT: &str = "next_intent";
/// Longest pause between two attempts to resolve intents.
const RESOLVE_BACKOFF_MAX: Duration = Duration::from_secs(10);

/// One cross-MDT operation in progress.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IntentRec {
    /// Record format version.
    pub version: u8,
    /// The client request it answers (client, sequence, acked_below), so
    /// that a roll-forward records the reply its resend must get.
    pub reply_to: Option<(u64, u64, u64)>,
    /// What is being done.
    pub op: IntentOp,
    /// The client's context when the operation is a client's change, so
    /// that a roll-forward after a crash records it in the changelog as
    /// that client's.
    pub caller: Option<ReqCtx>,
}

/// The operations that have intents, as this version stores them.
pub type IntentOp = IntentOpOf<DirObject>;

/// The operations that have intents, over the form of a directory's
/// objects (`D`: older versions stored `DirObject` with fewer fields).
/// Variants are append-only.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum IntentOpOf<D> {
    /// Make directory `name` in `parent` from one object per MDT of `mdts`
    /// (part `k` on `mdts[k]`; part 0 is the master).
    Mkdir {
        /// Name, in `dir.parent` (on this MDT).
        name: Name,
        /// What each part makes (`others` unset).
        dir: D,
        /// MDT of each part.
        mdts: Vec<u32>,
        /// The request was answered with an error: undo, never finish.
        aborted: bool,
    },
    /// Remove directory `name` of `parent`, whose objects are `shards`
    /// (MDT, FID), the first being the one the entry names.
    Rmdir {
        /// Parent (on this MDT).
        parent: Fid,
        /// Name.
        name: Name,
        /// Objects of the directory.
        shards: Vec<(u32, Fid)>,
        /// Every shard is sealed and destruction began: roll forward.
        destroying: bool,
    },
    /// Rename across MDTs (see [`super::moves`]).
    Rename(Box<RenameIntent>),
    /// Hard link to an inode on another MDT.
    Link(LinkIntent),
    /// Unlink of an entry whose inode is on another MDT.
    Unlink(UnlinkIntent),
    /// A directory moved to another MDT (see [`super::migrate`]).
    Migrate(super::migrate::MigrateIntent),
    /// A plain directory striped (see [`super::restripe`]).
    Restripe(super::restripe::RestripeIntent),
}

impl IntentRec {
    /// A record of the current version.
    pub(super) fn new(reply_to: Option<(u64, u64, u64)>, op: IntentOp) -> IntentRec {
        IntentRec {
            version: INTENT_REC_VERSION,
            reply_to,
            op,
            caller: None,
        }
    }

    /// Decode a stored intent of any version. It comes back in the
    /// current form and version, as it will be written back (a resolver
    /// that records a step rewrites it).
    pub(super) fn decode(b: &[u8]) -> Result<IntentRec, ServerError> {
        match b.first() {
            Some(&1) => super::tx::decode_record::<v1::IntentRec>(b).map(IntentRec::from),
            Some(&2) => super::tx::decode_record::<V2>(b).map(|r| IntentRec {
                version: INTENT_REC_VERSION,
                reply_to: r.reply_to,
                op: r.op.current(),
                caller: None,
            }),
            Some(&3) => super::tx::decode_record::<V3>(b).map(|r| IntentRec {
                version: INTENT_REC_VERSION,
                reply_to: r.reply_to,
                op: r.op.current(),
                caller: r.caller.map(ReqCtx::from),
            }),
            Some(&4) => super::tx::decode_record::<V4>(b).map(|r| IntentRec {
                version: INTENT_REC_VERSION,
                reply_to: r.reply_to,
                op: r.op.current(),
                caller: r.caller.map(ReqCtx::from),
            }),
            _ => super::tx::decode_record(b),
        }
    }

    /// What a roll-forward of this intent records in the changelog, and
    /// as whose change: the client request it stands for, as the
    /// request's own declaration says (see `changelog::Planned::of`).
    pub(super) fn planned(&self) -> Option<super::changelog::Planned> {
        self.caller.as_ref()?;
        let req = match &self.op {
            IntentOp::Mkdir { name, dir, .. } => MdtRequest::Mkdir {
                parent: dir.parent,
                name: name.clone(),
                perm: dir.perm,
            },
            IntentOp::Rmdir { parent, name, .. } => MdtRequest::Rmdir {
                parent: *parent,
                name: name.clone(),
            },
            IntentOp::Rename(p) => MdtRequest::Rename {
                parent: p.from.dir,
                name: p.from.name.clone(),
                new_parent: p.to.dir,
                new_name: p.to.name.clone(),
                flags: if p.exchange {
                    loom_proto::msg::rename_flags::EXCHANGE
                } else {
                    0
                },
                keep_orphan: p.keep_for.is_some(),
            },
            IntentOp::Link(l) => MdtRequest::Link {
                fid: l.fid,
                parent: l.parent,
                name: l.name.clone(),
            },
            IntentOp::Unlink(u) => MdtRequest::Unlink {
                parent: u.parent,
                name: u.name.clone(),
                keep_orphan: u.keep_for.is_some(),
            },
            IntentOp::Migrate(_) | IntentOp::Restripe(_) => return None,
        };
        super::changelog::Planned::of(&req)
    }
}

/// Intent records of version 2, before they kept their caller.
#[derive(Deserialize)]
struct V2 {
    // Each old form's version is read past, not kept: the record comes
    // back as the current version (see `IntentRec::decode`).
    _version: u8,
    reply_to: Option<(u64, u64, u64)>,
    op: IntentOpOf<DirObjectV3>,
}

/// Intent records of version 3, before `DirObject` had the project id.
#[derive(Deserialize)]
struct V3 {
    _version: u8,
    reply_to: Option<(u64, u64, u64)>,
    op: IntentOpOf<DirObjectV3>,
    caller: Option<ReqCtxV4>,
}

/// Intent records of version 4, before `DirObject` had the ACLs and the
/// caller its umask.
#[derive(Deserialize)]
struct V4 {
    _version: u8,
    reply_to: Option<(u64, u64, u64)>,
    op: IntentOpOf<DirObjectV4>,
    caller: Option<ReqCtxV4>,
}

/// `ReqCtx` as intent versions 3 and 4 stored it, before the umask.
#[derive(Deserialize)]
struct ReqCtxV4 {
    client_id: u64,
    seq: u64,
    acked_below: u64,
    jobid: String,
    uid: u32,
    gid: u32,
    groups: Vec<u32>,
    step_of: Option<loom_proto::changelog::ChangeKind>,
}

impl From<ReqCtxV4> for ReqCtx {
    fn from(c: ReqCtxV4) -> ReqCtx {
        ReqCtx {
            client_id: c.client_id,
            seq: c.seq,
            acked_below: c.acked_below,
            jobid: c.jobid,
            uid: c.uid,
            gid: c.gid,
            groups: c.groups,
            step_of: c.step_of,
            umask: None,
            fileset: None,
        }
    }
}

/// `DirObject` as intent version 4 stored it, before the ACLs.
#[derive(Deserialize)]
struct DirObjectV4 {
    parent: Fid,
    perm: u32,
    uid: u32,
    gid: u32,
    time: Time,
    default_stripe: Option<loom_proto::StripeSpec>,
    others: Option<Vec<Fid>>,
    default_dir: Option<loom_proto::msg::DirDefault>,
    default_compress: Option<loom_proto::Compress>,
    projid: u32,
    proj_inherit: bool,
}

impl From<DirObjectV4> for DirObject {
    /// Directories made before ACLs have none.
    fn from(d: DirObjectV4) -> DirObject {
        DirObject {
            parent: d.parent,
            perm: d.perm,
            uid: d.uid,
            gid: d.gid,
            time: d.time,
            default_stripe: d.default_stripe,
            others: d.others,
            default_dir: d.default_dir,
            default_compress: d.default_compress,
            projid: d.projid,
            proj_inherit: d.proj_inherit,
            acl: None,
            default_acl: None,
        }
    }
}

/// `DirObject` as intent versions 2 and 3 stored it.
#[derive(Deserialize)]
struct DirObjectV3 {
    parent: Fid,
    perm: u32,
    uid: u32,
    gid: u32,
    time: Time,
    default_stripe: Option<loom_proto::StripeSpec>,
    others: Option<Vec<Fid>>,
    default_dir: Option<loom_proto::msg::DirDefault>,
    default_compress: Option<loom_proto::Compress>,
}

impl From<DirObjectV3> for DirObject {
    /// Directories made before project ids have none.
    fn from(d: DirObjectV3) -> DirObject {
        DirObject {
            parent: d.parent,
            perm: d.perm,
            uid: d.uid,
            gid: d.gid,
            time: d.time,
            default_stripe: d.default_stripe,
            others: d.others,
            default_dir: d.default_dir,
            default_compress: d.default_compress,
            projid: 0,
            proj_inherit: false,
            acl: None,
            default_acl: None,
        }
    }
}

impl<D: Into<DirObject>> IntentOpOf<D> {
    /// The operation in the current form: directories made by older
    /// versions have none of what their `DirObject` lacked.
    fn current(self) -> IntentOp {
        match self {
            IntentOpOf::Mkdir {
                name,
                dir: d,
                mdts,
                aborted,
            } => IntentOp::Mkdir {
                name,
                dir: d.into(),
                mdts,
                aborted,
            },
            IntentOpOf::Rmdir {
                parent,
                name,
                shards,
                destroying,
            } => IntentOp::Rmdir {
                parent,
                name,
                shards,
                destroying,
            },
            IntentOpOf::Rename(r) => IntentOp::Rename(r),
            IntentOpOf::Link(l) => IntentOp::Link(l),
            IntentOpOf::Unlink(u) => IntentOp::Unlink(u),
            IntentOpOf::Migrate(m) => IntentOp::Migrate(m),
            IntentOpOf::Restripe(r) => IntentOp::Restripe(r),
        }
    }
}

/// Intent records as version 1 wrote them, before `DirObject` had
/// `default_compress`: an MDT that crashed mid-operation under an older
/// build resolves them after an upgrade.
mod v1 {
    use loom_proto::msg::{DirDefault, Time};
    use loom_proto::{Fid, Name, StripeSpec};
    use serde::Deserialize;

    #[derive(Deserialize)]
    pub(super) struct IntentRec {
        _version: u8,
        reply_to: Option<(u64, u64, u64)>,
        op: IntentOp,
    }

    #[derive(Deserialize)]
    enum IntentOp {
        Mkdir {
            name: Name,
            dir: DirObjectV1,
            mdts: Vec<u32>,
            aborted: bool,
        },
        Rmdir {
            parent: Fid,
            name: Name,
            shards: Vec<(u32, Fid)>,
            destroying: bool,
        },
    }

    #[derive(Deserialize)]
    struct DirObjectV1 {
        parent: Fid,
        perm: u32,
        uid: u32,
        gid: u32,
        time: Time,
        default_stripe: Option<StripeSpec>,
        others: Option<Vec<Fid>>,
        default_dir: Option<DirDefault>,
    }

    impl From<IntentRec> for super::IntentRec {
        fn from(r: IntentRec) -> super::IntentRec {
            let op = match r.op {
                IntentOp::Mkdir {
                    name,
                    dir: d,
                    mdts,
                    aborted,
                } => super::IntentOp::Mkdir {
                    name,
                    // Version 1 had no compression either.
                    dir: super::DirObjectV3 {
                        parent: d.parent,
                        perm: d.perm,
                        uid: d.uid,
                        gid: d.gid,
                        time: d.time,
                        default_stripe: d.default_stripe,
                        others: d.others,
                        default_dir: d.default_dir,
                        default_compress: None,
                    }
                    .into(),
                    mdts,
                    aborted,
                },
                IntentOp::Rmdir {
                    parent,
                    name,
                    shards,
                    destroying,
                } => super::IntentOp::Rmdir {
                    parent,
                    name,
                    shards,
                    destroying,
                },
            };
            super::IntentRec {
                version: super::INTENT_REC_VERSION,
                reply_to: r.reply_to,
                op,
                caller: None,
            }
        }
    }
}

pub(super) fn intent_key(id: u64) -> Vec<u8> {
    id.to_be_bytes().to_vec()
}

/// The request an interrupted operation finishes for: its reply is
/// recorded under the original (client, sequence) for the resend, and
/// its changelog records are the caller's (who asked, under what job).
pub(super) fn answering(
    reply_to: Option<(u64, u64, u64)>,
    caller: Option<&ReqCtx>,
) -> (ReqCtx, Option<Current>) {
    let who = caller.cloned().unwrap_or_default();
    match reply_to {
        Some((client, seq, acked_below)) => {
            let key = ReplyKey {
                client,
                seq,
                acked_below,
            };
            let ctx = ReqCtx {
                client_id: client,
                seq,
                acked_below,
                ..who
            };
            (ctx, Some(Current::new(key)))
        }
        None => (who, None),
    }
}

/// The request a roll-forward answers, built from [`answering`]'s parts.
pub(super) fn answer<'a>(
    ctx: &'a ReqCtx,
    cur: &'a Option<Current>,
    log: Option<&'a super::changelog::Planned>,
) -> Rq<'a> {
    Rq {
        ctx,
        cur: cur.as_ref(),
        tok: None,
        log,
        // A roll-forward's commit step is a resolver step.
        op: None,
    }
}

/// The context of a roll-forward's steps on other MDTs: the caller's,
/// with what the change records (see `MdtService::step_ctx`).
pub(super) fn step_for(
    caller: Option<&ReqCtx>,
    log: Option<&super::changelog::Planned>,
) -> Option<ReqCtx> {
    Some(ReqCtx {
        seq: 0,
        acked_below: 0,
        step_of: Some(log?.change_kind()),
        ..caller?.clone()
    })
}

/// The context of a rollback's steps on other MDTs: as [`step_for`],
/// but what a step undoes is recorded as a removal, so that a part that
/// recorded what it made records it going back.
pub(super) fn undo_for(
    caller: Option<&ReqCtx>,
    log: Option<&super::changelog::Planned>,
) -> Option<ReqCtx> {
    let mut c = step_for(caller, log)?;
    c.step_of = Some(loom_proto::changelog::ChangeKind::Rmdir);
    Some(c)
}

impl MdtService {
    /// Whether the cross-MDT operations a crash left were resolved
    /// (client changes wait until they are).
    pub(super) fn intents_resolved(&self) -> bool {
        *self.dne.recovered.borrow()
    }

    /// The MDTs of a new directory's parts, master first: `count` MDTs in
    /// index order starting at `start_mdt` (this MDT if -1), wrapping.
    async fn placement(&self, s: DirStripe) -> Result<Vec<u32>, ServerError> {
        let enough =
            |c: &loom_proto::msg::ClusterConfig| c.indices(Role::Mdt).len() >= s.count as usize;
        let all = self.peers.config_where(enough).await?.indices(Role::Mdt);
        if s.count == 0 || s.count as usize > all.len() {
            return Err(ServerError::refused(
                Errno::EINVAL,
                format!(
                    "directory stripe count {} is invalid: the file system has {} MDTs",
                    s.count,
                    all.len()
                ),
            ));
        }
        let start = if s.start_mdt < 0 {
            self.index
        } else {
            s.start_mdt as u32
        };
        let Some(pos) = all.iter().position(|i| *i == start) else {
            return Err(ServerError::refused(
                Errno::EINVAL,
                format!("MDT index {start} is not in the file system (MDTs: {all:?})"),
            ));
        };
        Ok((0..s.count as usize)
            .map(|k| all[(pos + k) % all.len()])
            .collect())
    }

    /// Add intent `op` to `t`: its id.
    pub(super) fn log_intent(
        &self,
        rq: &Rq<'_>,
        t: &mut Tx<'_>,
        op: IntentOp,
    ) -> Result<u64, ServerError> {
        let id = self.dne.next_intent.fetch_add(1, Ordering::AcqRel);
        t.put_meta(NEXT_INTENT, &(id + 1))?;
        let reply_to = rq.cur.map(|c| (c.key.client, c.key.seq, c.key.acked_below));
        let rec = IntentRec {
            version: INTENT_REC_VERSION,
            reply_to,
            op,
            // Kept for a change the changelog records.
            caller: rq.log.map(|_| rq.ctx.clone()),
        };
        t.batch.put(
            Space::Intents,
            intent_key(id),
            super::tx::encode_record(&rec)?,
        );
        Ok(id)
    }

    /// Make the intent's new state durable (`None`: it is finished).
    pub(super) async fn set_intent(
        &self,
        id: u64,
        rec: Option<&IntentRec>,
    ) -> Result<(), ServerError> {
        let mut t = Tx::new(&*self.names.store);
        match rec {
            Some(r) => t
                .batch
                .put(Space::Intents, intent_key(id), super::tx::encode_record(r)?),
            None => t.batch.delete(Space::Intents, intent_key(id)),
        }
        let ticket = self.apply_step(t)?;
        self.commit_through(ticket).await
    }

    /// `mkdir` with a placement: a remote directory or a striped one.
    pub(super) async fn mkdir_striped(
        self: &Arc<Self>,
        ctx: &Rq<'_>,
        parent: Fid,
        name: &Name,
        perm: u32,
        stripe: DirStripe,
    ) -> Handled {
        super::namespace::check_name(name)?;
        let mdts = self.placement(stripe).await?;
        if mdts == [self.index] {
            return self.mkdir_here(ctx, parent, name, perm).await;
        }
        self.mkdir_placed(ctx, parent, name, perm, mdts).await
    }

    /// A new directory whose shards go on `mdts` (the first holds its
    /// master inode), not on this MDT alone.
    pub(super) async fn mkdir_placed(
        self: &Arc<Self>,
        ctx: &Rq<'_>,
        parent: Fid,
        name: &Name,
        perm: u32,
        mdts: Vec<u32>,
    ) -> Handled {
        let _one_at_a_time = self.dne.dist.lock().await;
        let mut c = self.begin().await;
        let p = c.new_name(&Cred::of(ctx), parent, name)?;
        let (mut t, g) = c.into_parts();
        let super::namespace::NewOwner {
            uid,
            gid,
            perm,
            acl,
            default_acl,
        } = Self::owner(ctx, &p, FileKind::Dir, perm);
        let op = IntentOp::Mkdir {
            name: name.clone(),
            dir: DirObject {
                parent,
                perm,
                uid,
                gid,
                time: Time::now(),
                default_stripe: self.default_stripe(parent)?,
                others: None,
                default_dir: self.default_dir(parent)?,
                default_compress: self.default_compress(parent)?,
                // As a local mkdir: the parent's project when it passes
                // it on.
                projid: if p.proj_inherit { p.attr.projid } else { 0 },
                proj_inherit: p.proj_inherit,
                acl,
                default_acl,
            },
            mdts: mdts.clone(),
            aborted: false,
        };
        let id = self.log_intent(ctx, &mut t, op.clone())?;
        let ticket = self.apply_step(t)?;
        drop(g);
        self.resolve_on_error(self.commit_through(ticket).await)?;
        fail::point("mkdir_striped:logged");
        let made = match self.make_parts(id, &op, Self::step_ctx(ctx), true).await {
            Ok(m) => m,
            Err(e) => {
                self.give_up_mkdir(ctx, id, &op).await;
                return Err(e);
            }
        };
        if let Err(e) = fail::point_or_error("mkdir_striped:parts_made") {
            self.give_up_mkdir(ctx, id, &op).await;
            return Err(e);
        }
        let Reply::Entry { attr, layout } = made else {
            self.give_up_mkdir(ctx, id, &op).await;
            return Err(ServerError::peer(
                Errno::EPROTO,
                "MakeDirObject answered no entry",
            ));
        };
        match self.enter_mkdir(ctx, id, &op, attr, layout).await {
            Ok(Some(reply)) => {
                self.stats.count("dne_mkdir");
                self.forget_later(id, mdts);
                Ok(reply)
            }
            Ok(None) => {
                // Taken (or the parent removed) by a local change meanwhile.
                self.give_up_mkdir(ctx, id, &op).await;
                Err(super::namespace::exists(name))
            }
            Err(e) => {
                self.give_up_mkdir(ctx, id, &op).await;
                Err(e)
            }
        }
    }

    /// The last step of mkdir intent `id` whose master is `attr`: its
    /// entry, with the parent's link count and the intent's deletion, and
    /// the reply recorded for the request being answered. `None` if the
    /// name is taken or the parent gone (nothing changed); an entry that
    /// names the master already counts as done.
    async fn enter_mkdir(
        &self,
        rq: &Rq<'_>,
        id: u64,
        op: &IntentOp,
        attr: Attr,
        layout: Option<Layout>,
    ) -> Result<Option<Reply>, ServerError> {
        let IntentOp::Mkdir { name, dir, .. } = op else {
            return Err(ServerError::refused(Errno::EINVAL, "not a mkdir intent"));
        };
        let parent = dir.parent;
        let fid = attr.fid;
        let (mut t, g) = self.begin().await.into_parts();
        match t.dentry(parent, name)? {
            Some(d) if d.fid == fid => {}
            Some(_) => return Ok(None),
            None => {
                if t.dir(parent).is_err() || self.dne.sealed.contains(parent) {
                    return Ok(None);
                }
                let entry = DentryRec {
                    fid,
                    kind: FileKind::Dir,
                };
                t.put_dentry(parent, name, &entry)?;
                let now = Time::now();
                let pr = t.inode(parent)?;
                pr.attr.nlink += 1;
                pr.attr.mtime = now;
                pr.attr.ctime = now;
            }
        }
        let reply = Reply::Entry { attr, layout };
        self.finish_intent(rq, t, g, id, &reply).await?;
        Ok(Some(reply))
    }

    /// Make every part of mkdir intent `id`: the shards, then the master
    /// that lists them. The master's entry.
    /// `quota`: a client's first try, held to its caller's quota on each
    /// MDT (a resolver's roll-forward is not: it may finish a mkdir that
    /// was seen).
    async fn make_parts(
        self: &Arc<Self>,
        id: u64,
        op: &IntentOp,
        step: Option<ReqCtx>,
        quota: bool,
    ) -> Handled {
        let IntentOp::Mkdir { dir, mdts, .. } = op else {
            return Err(ServerError::refused(Errno::EINVAL, "not a mkdir intent"));
        };
        let part = |index: usize, others: Option<Vec<Fid>>| PeerRequest::MakeDirObject {
            intent: IntentRef {
                coord: self.index,
                id,
                index: index as u32,
            },
            dir: DirObject {
                others,
                ..dir.clone()
            },
            quota,
        };
        let mut set = tokio::task::JoinSet::new();
        for (k, mdt) in mdts.iter().enumerate().skip(1) {
            let (me, mdt, req) = (self.clone(), *mdt, part(k, None));
            set.spawn(async move { (k, me.mdt_call(mdt, req).await) });
        }
        // Every answer is awaited, failures too: a part still on its way
        // could land after an undo.
        let mut others = vec![Fid::default(); mdts.len().saturating_sub(1)];
        let mut failed = None;
        while let Some(r) = set.join_next().await {
            let e = match r {
                Ok((k, Ok(Reply::Entry { attr, .. }))) => {
                    others[k - 1] = attr.fid;
                    continue;
                }
                Ok((_, Ok(other))) => {
                    ServerError::peer(Errno::EPROTO, format!("MakeDirObject answered {other:?}"))
                }
                Ok((_, Err(e))) => e,
                Err(e) => ServerError::internal(format!("shard step: {e}")),
            };
            failed.get_or_insert(e);
        }
        if let Some(e) = failed {
            return Err(e);
        }
        let others = (mdts.len() > 1).then_some(others);
        let master = mdts.first().copied().unwrap_or(self.index);
        // The master (or the remote directory) is the directory itself:
        // its MDT records the mkdir's part.
        self.mdt_call_as(master, part(0, others), step).await
    }

    /// Undo mkdir intent `id`, whose request is answered with an error:
    /// marked aborted first, so that a resolver taking over undoes it too
    /// rather than finish it. If an MDT cannot be reached, it is left to
    /// [`Self::resolve_intents`].
    async fn give_up_mkdir(self: &Arc<Self>, rq: &Rq<'_>, id: u64, op: &IntentOp) {
        let IntentOp::Mkdir {
            name, dir, mdts, ..
        } = op
        else {
            return;
        };
        let mut aborted = IntentRec::new(
            None,
            IntentOp::Mkdir {
                name: name.clone(),
                dir: dir.clone(),
                mdts: mdts.clone(),
                aborted: true,
            },
        );
        // Kept, so that a resolver finishing the rollback records it as
        // the caller's too.
        aborted.caller = rq.log.map(|_| rq.ctx.clone());
        let undo = undo_for(Some(rq.ctx), rq.log);
        let undone = match self.set_intent(id, Some(&aborted)).await {
            Ok(()) => self.undo_mkdir(id, mdts, undo).await,
            Err(e) => Err(e),
        };
        if let Err(e) = undone {
            tracing::warn!(id, "rolling back a cross-MDT mkdir: {e}; will retry");
            self.spawn_resolver();
        }
    }

    /// Remove what mkdir intent `id`'s parts made, under `undo` (see
    /// [`undo_for`]), then the intent.
    async fn undo_mkdir(
        self: &Arc<Self>,
        id: u64,
        mdts: &[u32],
        undo: Option<ReqCtx>,
    ) -> Result<(), ServerError> {
        for (k, mdt) in mdts.iter().enumerate() {
            let intent = IntentRef {
                coord: self.index,
                id,
                index: k as u32,
            };
            self.mdt_call_as(*mdt, PeerRequest::UndoDirObject { intent }, undo.clone())
                .await?;
        }
        self.set_intent(id, None).await?;
        self.forget_later(id, mdts.to_vec());
        Ok(())
    }

    /// Tell the participants, in the background, that they may drop what
    /// they kept to repeat intent `id`'s parts.
    pub(super) fn forget_later(self: &Arc<Self>, id: u64, mut mdts: Vec<u32>) {
        mdts.sort_unstable();
        mdts.dedup();
        let me = self.clone();
        tokio::spawn(async move {
            for mdt in mdts {
                let req = PeerRequest::ForgetIntent {
                    coord: me.index,
                    id,
                };
                if let Err(e) = me.mdt_call(mdt, req).await {
                    // Left behind, the records cost a few bytes each.
                    tracing::debug!(mdt, id, "ForgetIntent: {e}");
                }
            }
        });
    }

    /// The objects of directory `fid` named in this MDT: its shards if it
    /// is striped, else itself, each with its MDT.
    pub(super) async fn dir_objects(
        self: &Arc<Self>,
        fid: Fid,
    ) -> Result<Vec<(u32, Fid)>, ServerError> {
        let layout = match read_inode(&*self.names.store, fid) {
            Ok(r) => r.layout,
            Err(e) if e.errno() == Errno::ENOENT => match self.remote_entry(fid).await? {
                Reply::Entry { layout, .. } => layout,
                _ => None,
            },
            Err(e) => return Err(e),
        };
        let fids = match layout.as_ref().and_then(|l| l.dir_shards()) {
            Some(s) => s.to_vec(),
            None => vec![fid],
        };
        let mut out = Vec::with_capacity(fids.len());
        for f in fids {
            out.push((self.owner_of(f).await?, f));
        }
        Ok(out)
    }

    /// rmdir of an entry whose directory lives on other MDTs or is
    /// striped: seal every shard (each must be empty), then destroy them,
    /// then remove the entry.
    pub(super) async fn rmdir_distributed(
        self: &Arc<Self>,
        rq: &Rq<'_>,
        parent: Fid,
        name: &Name,
    ) -> Handled {
        let _one_at_a_time = self.dne.dist.lock().await;
        let d = read_dentry(&*self.names.store, parent, name)?
            .ok_or_else(|| super::namespace::not_found(name))?;
        if d.kind != FileKind::Dir {
            return Err(ServerError::refused(
                Errno::ENOTDIR,
                format!("{name} is not a directory"),
            ));
        }
        let shards = self.dir_objects(d.fid).await?;
        let op = IntentOp::Rmdir {
            parent,
            name: name.clone(),
            shards: shards.clone(),
            destroying: false,
        };
        // Logged under the namespace lock, with the entry checked again: a
        // rename sees either the entry as it was or the intent (and then
        // leaves the entry alone, see `removal_in_progress`).
        let (_, g) = self.begin().await.into_parts();
        if read_dentry(&*self.names.store, parent, name)?.is_none_or(|now| now.fid != d.fid) {
            return Err(super::namespace::not_found(name));
        }
        if self.removal_in_progress(parent, name)? {
            // An earlier removal waits for an MDT: it finishes, or undoes
            // its seals, first.
            return Err(ServerError::refused(
                Errno::EBUSY,
                format!("{name} is being removed"),
            ));
        }
        let mut t = Tx::new(&*self.names.store);
        let id = self.log_intent(rq, &mut t, op)?;
        let ticket = self.apply_step(t)?;
        drop(g);
        self.resolve_on_error(self.commit_through(ticket).await)?;
        fail::point("rmdir_distributed:logged");
        let mut refused = None;
        for (k, (mdt, fid)) in shards.iter().enumerate() {
            match self
                .mdt_call(*mdt, PeerRequest::SealDir { fid: *fid })
                .await
            {
                Ok(_) => {
                    if k + 1 < shards.len() {
                        fail::point("rmdir_distributed:sealing");
                    }
                }
                Err(e) => {
                    refused = Some(e);
                    break;
                }
            }
        }
        if let Some(e) = refused {
            // Every shard, not only those that answered: a seal whose
            // answer was lost may have been made (unsealing is a no-op on
            // a shard that is not sealed).
            if let Err(u) = self.unseal_all(id, &shards).await {
                tracing::warn!(id, "unsealing after a refused rmdir: {u}; will retry");
                self.spawn_resolver();
            }
            return Err(e);
        }
        let mut rec: IntentRec = self.resolve_on_error(self.read_intent(id))?;
        if let IntentOp::Rmdir { destroying, .. } = &mut rec.op {
            *destroying = true;
        }
        self.resolve_on_error(self.set_intent(id, Some(&rec)).await)?;
        fail::point("rmdir_distributed:sealed");
        if let Err(e) = self.destroy_all(&shards, Self::step_ctx(rq)).await {
            tracing::warn!(
                id,
                "destroying a removed directory's shards: {e}; will retry"
            );
            self.spawn_resolver();
            return Err(e);
        }
        fail::point("rmdir_distributed:destroyed");
        self.resolve_on_error(self.finish_rmdir(rq, id, parent, name, d.fid).await)?;
        self.stats.count("dne_rmdir");
        Ok(Reply::Ok)
    }

    /// Whether entry `name` of `parent` is a directory this MDT is
    /// removing across MDTs: it must keep its name until that is done.
    pub(super) fn removal_in_progress(
        &self,
        parent: Fid,
        name: &Name,
    ) -> Result<bool, ServerError> {
        self.name_in_intent(parent, name)
    }

    /// Whether entry `name` of `dir` (on this MDT) is part of a cross-MDT
    /// operation this MDT coordinates and has not finished.
    pub(super) fn name_in_intent(&self, dir: Fid, name: &Name) -> Result<bool, ServerError> {
        for (_, v) in self
            .names
            .store
            .scan(Space::Intents, &[], None, usize::MAX)
            .map_err(store_err)?
        {
            let rec = IntentRec::decode(&v)?;
            let hit = |d: &Fid, n: &Name| *d == dir && n == name;
            let held = match &rec.op {
                IntentOp::Rmdir {
                    parent: p, name: n, ..
                } => hit(p, n),
                IntentOp::Rename(r) => {
                    hit(&r.from.dir, &r.from.name)
                        || (r.to.mdt == self.index && hit(&r.to.dir, &r.to.name))
                }
                IntentOp::Link(l) => hit(&l.parent, &l.name),
                IntentOp::Unlink(u) => hit(&u.parent, &u.name),
                IntentOp::Mkdir { .. } | IntentOp::Migrate(_) | IntentOp::Restripe(_) => false,
            };
            if held {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn read_intent(&self, id: u64) -> Result<IntentRec, ServerError> {
        let v = self
            .names
            .store
            .get(Space::Intents, &intent_key(id))
            .map_err(store_err)?
            .ok_or_else(|| super::tx::store_err(format!("intent {id} vanished")))?;
        IntentRec::decode(&v)
    }

    async fn unseal_all(
        self: &Arc<Self>,
        id: u64,
        shards: &[(u32, Fid)],
    ) -> Result<(), ServerError> {
        for (mdt, fid) in shards {
            self.mdt_call(*mdt, PeerRequest::UnsealDir { fid: *fid })
                .await?;
        }
        self.set_intent(id, None).await
    }

    pub(super) async fn destroy_all(
        self: &Arc<Self>,
        shards: &[(u32, Fid)],
        step: Option<ReqCtx>,
    ) -> Result<(), ServerError> {
        // The first object is the directory itself (or a striped one's
        // master): its MDT records the removal's part; shards are not
        // recorded.
        for (i, (mdt, fid)) in shards.iter().enumerate() {
            let step = step.clone().filter(|_| i == 0);
            self.mdt_call_as(*mdt, PeerRequest::DestroyDir { fid: *fid }, step)
                .await?;
        }
        Ok(())
    }

    /// The last step of an rmdir: the entry goes with the intent, and the
    /// reply is recorded for the request being answered.
    async fn finish_rmdir(
        &self,
        rq: &Rq<'_>,
        id: u64,
        parent: Fid,
        name: &Name,
        fid: Fid,
    ) -> Result<(), ServerError> {
        let (mut t, g) = self.begin().await.into_parts();
        if t.dentry(parent, name)?.is_some_and(|d| d.fid == fid) {
            t.delete_dentry(parent, name)?;
            let now = Time::now();
            let p = t.inode(parent)?;
            p.attr.nlink = p.attr.nlink.saturating_sub(1);
            p.attr.mtime = now;
            p.attr.ctime = now;
        }
        self.finish_intent(rq, t, g, id, &Reply::Ok).await
    }

    /// The last step of intent `id`: `t`, with the intent's deletion,
    /// applied as the answer `reply` to `rq` (recorded for its resend),
    /// the namespace lock `g` released, then committed.
    pub(super) async fn finish_intent(
        &self,
        rq: &Rq<'_>,
        mut t: Tx<'_>,
        g: tokio::sync::MutexGuard<'_, ()>,
        id: u64,
        reply: &Reply,
    ) -> Result<(), ServerError> {
        t.batch.delete(Space::Intents, intent_key(id));
        let ticket = self.apply_final(rq, t, reply)?;
        drop(g);
        self.commit_through(ticket).await
    }

    /// Resolve every intent in the log (see the module notes), retrying
    /// with growing pauses while other MDTs cannot be reached. Client
    /// changes are let in once the log is empty.
    pub(super) async fn resolve_intents(self: Arc<Self>) {
        crate::fail::delay("resolve").await;
        let mut pause = Duration::from_millis(200);
        loop {
            match self.resolve_pass().await {
                Ok(0) => break,
                Ok(n) => tracing::info!(
                    "MDT{:04x}: {n} cross-MDT operations still to resolve",
                    self.index
                ),
                Err(e) => tracing::warn!("MDT{:04x}: resolving intents: {e}", self.index),
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(RESOLVE_BACKOFF_MAX);
        }
        self.dne.resolving.store(false, Ordering::Release);
        self.dne.recovered.send_replace(true);
        // An intent left while this pass was ending found the flag still
        // set: look again.
        if self.has_intents().unwrap_or(false) {
            self.spawn_resolver();
        }
    }

    /// `r`, starting the resolver if it failed: a step that failed after
    /// an intent was logged leaves that intent for it.
    pub(super) fn resolve_on_error<T>(
        self: &Arc<Self>,
        r: Result<T, ServerError>,
    ) -> Result<T, ServerError> {
        if let Err(e) = &r {
            tracing::warn!(
                "MDT{:04x}: cross-MDT step failed: {e}; will resolve",
                self.index
            );
            self.spawn_resolver();
        }
        r
    }

    /// Start [`Self::resolve_intents`] unless it runs already.
    pub(super) fn spawn_resolver(self: &Arc<Self>) {
        if !self.dne.resolving.swap(true, Ordering::AcqRel) {
            tokio::spawn(self.clone().resolve_intents());
        }
    }

    /// One attempt at every intent: how many remain.
    async fn resolve_pass(self: &Arc<Self>) -> Result<usize, ServerError> {
        let _one_at_a_time = self.dne.dist.lock().await;
        let intents = self
            .names
            .store
            .scan(Space::Intents, &[], None, usize::MAX)
            .map_err(store_err)?;
        let mut left = 0;
        for (k, v) in intents {
            let Ok(id) = <[u8; 8]>::try_from(k.as_slice()).map(u64::from_be_bytes) else {
                tracing::error!("MDT{:04x}: malformed intent key {k:?}", self.index);
                continue;
            };
            let rec = IntentRec::decode(&v)?;
            if let Err(e) = self.resolve_one(id, rec).await {
                tracing::warn!(
                    id,
                    "MDT{:04x}: cross-MDT operation not resolved yet: {e}",
                    self.index
                );
                left += 1;
            }
        }
        Ok(left)
    }

    async fn resolve_one(self: &Arc<Self>, id: u64, rec: IntentRec) -> Result<(), ServerError> {
        // A client's change is recorded as it would have been had the
        // crash not cut it: as the caller's, once on each MDT.
        let planned = rec.planned();
        let caller = rec.caller.clone();
        let log = planned.as_ref();
        match rec.op {
            IntentOp::Mkdir {
                ref mdts,
                aborted: true,
                ..
            } => {
                self.undo_mkdir(id, mdts, undo_for(caller.as_ref(), log))
                    .await?;
                tracing::info!(
                    id,
                    "MDT{:04x}: rolled back a failed cross-MDT mkdir",
                    self.index
                );
            }
            IntentOp::Mkdir { ref mdts, .. } => {
                // Finished, not undone: its entry may have been seen (and
                // used) before the crash took it back; parts are made again
                // only where missing.
                let Reply::Entry { attr, layout } = self
                    .make_parts(id, &rec.op, step_for(caller.as_ref(), log), false)
                    .await?
                else {
                    return Err(ServerError::peer(
                        Errno::EPROTO,
                        "MakeDirObject answered no entry",
                    ));
                };
                let (ctx, cur) = answering(rec.reply_to, caller.as_ref());
                let rq = Rq {
                    ctx: &ctx,
                    cur: cur.as_ref(),
                    tok: None,
                    log,
                    op: None,
                };
                let entered = self.enter_mkdir(&rq, id, &rec.op, attr, layout).await?;
                if entered.is_some() {
                    self.forget_later(id, mdts.clone());
                    tracing::info!(
                        id,
                        "MDT{:04x}: completed an interrupted cross-MDT mkdir",
                        self.index
                    );
                } else {
                    // The name went to something else meanwhile.
                    self.undo_mkdir(id, mdts, undo_for(caller.as_ref(), log))
                        .await?;
                    tracing::info!(
                        id,
                        "MDT{:04x}: undid a cross-MDT mkdir whose name was taken",
                        self.index
                    );
                }
            }
            IntentOp::Rmdir {
                shards,
                destroying: false,
                ..
            } => {
                self.unseal_all(id, &shards).await?;
                tracing::info!(
                    id,
                    "MDT{:04x}: rolled back an unfinished cross-MDT rmdir",
                    self.index
                );
            }
            IntentOp::Rmdir {
                parent,
                name,
                shards,
                destroying: true,
            } => {
                self.destroy_all(&shards, step_for(caller.as_ref(), log))
                    .await?;
                let fid = shards.first().map(|s| s.1).unwrap_or_default();
                let (ctx, cur) = answering(rec.reply_to, caller.as_ref());
                let rq = Rq {
                    ctx: &ctx,
                    cur: cur.as_ref(),
                    tok: None,
                    log,
                    op: None,
                };
                self.finish_rmdir(&rq, id, parent, &name, fid).await?;
                tracing::info!(
                    id,
                    "MDT{:04x}: completed an interrupted cross-MDT rmdir",
                    self.index
                );
            }
            IntentOp::Rename(ref p) => {
                let (ctx, cur) = answering(rec.reply_to, caller.as_ref());
                self.resolve_rename(id, answer(&ctx, &cur, log), p).await?
            }
            IntentOp::Link(ref l) => {
                let (ctx, cur) = answering(rec.reply_to, caller.as_ref());
                self.resolve_link(id, answer(&ctx, &cur, log), l).await?
            }
            IntentOp::Unlink(ref u) => {
                let (ctx, cur) = answering(rec.reply_to, caller.as_ref());
                self.resolve_unlink(id, answer(&ctx, &cur, log), u).await?
            }
            IntentOp::Migrate(ref m) => self.resolve_migrate(id, m, caller.as_ref()).await?,
            IntentOp::Restripe(ref m) => {
                self.run_restripe(id, m.clone(), caller.clone()).await?;
            }
        }
        Ok(())
    }

    /// Finish every migrate or restripe intent logged for directory
    /// `dir`; how many there were. Called with `dist` held, before a new
    /// one is logged: a request resent after a step failed would
    /// otherwise start over beside the one the resolver is to finish
    /// (and a second restripe would make a second set of shards).
    pub(super) async fn finish_intents_on(
        self: &Arc<Self>,
        dir: Fid,
    ) -> Result<usize, ServerError> {
        let mut done = 0;
        for (k, v) in self
            .names
            .store
            .scan(Space::Intents, &[], None, usize::MAX)
            .map_err(store_err)?
        {
            let Ok(id) = <[u8; 8]>::try_from(k.as_slice()).map(u64::from_be_bytes) else {
                continue;
            };
            let rec = IntentRec::decode(&v)?;
            let on = match &rec.op {
                IntentOp::Migrate(m) => m.dir == dir,
                IntentOp::Restripe(m) => m.dir == dir,
                IntentOp::Mkdir { .. }
                | IntentOp::Rmdir { .. }
                | IntentOp::Rename(_)
                | IntentOp::Link(_)
                | IntentOp::Unlink(_) => false,
            };
            if on {
                self.resolve_one(id, rec).await?;
                done += 1;
            }
        }
        Ok(done)
    }

    /// Whether the log holds intents (at start: recovery is needed).
    pub(super) fn has_intents(&self) -> Result<bool, ServerError> {
        Ok(!self
            .names
            .store
            .scan(Space::Intents, &[], None, 1)
            .map_err(store_err)?
            .is_empty())
    }

    /// The next intent id recorded in the store.
    pub(super) fn stored_next_intent(
        store: &dyn loom_store::kv::KvStore,
    ) -> Result<u64, ServerError> {
        Ok(read_meta::<u64>(store, NEXT_INTENT)?.unwrap_or(1))
    }
}

#[cfg(test)]
mod tests {
    use super::super::moves::LinkIntent;
    use super::*;

    fn link() -> IntentOp {
        IntentOp::Link(LinkIntent {
            fid: Fid::new(1, 2),
            kind: FileKind::File,
            mdt: 1,
            parent: Fid::new(0, 7),
            name: "n".into(),
            maker: 9,
            aborted: false,
        })
    }

    /// What version 2 wrote: the record without its caller.
    #[derive(Serialize)]
    struct V2Out {
        version: u8,
        reply_to: Option<(u64, u64, u64)>,
        op: IntentOp,
    }

    #[test]
    fn version_2_records_decode_without_a_caller_record_nothing_and_are_rewritten_as_current() {
        let b = loom_proto::msg::encode(&V2Out {
            version: 2,
            reply_to: Some((5, 6, 1)),
            op: link(),
        })
        .expect("encode");
        let r = IntentRec::decode(&b).expect("a version 2 record decodes");
        assert_eq!(
            (r.version, r.reply_to, r.caller.clone()),
            (INTENT_REC_VERSION, Some((5, 6, 1)), None)
        );
        assert!(r.planned().is_none(), "no caller: nothing to record as");
        // Rewritten as a resolver's step does, it reads back as it was
        // (found by the mdt_record fuzz target: the old version number
        // kept on a record of the new form).
        let again = super::super::tx::encode_record(&r).expect("encode");
        let back = IntentRec::decode(&again).expect("a rewritten version 2 record decodes");
        assert_eq!((back.reply_to, back.caller), (Some((5, 6, 1)), None));
        assert!(matches!(back.op, IntentOp::Link(_)));
    }

    #[test]
    fn version_3_records_keep_their_caller_and_what_it_records() {
        let caller = ReqCtx {
            uid: 65534,
            gid: 65534,
            jobid: "job".into(),
            ..ReqCtx::default()
        };
        let rec = IntentRec {
            caller: Some(caller.clone()),
            ..IntentRec::new(None, link())
        };
        let b = super::super::tx::encode_record(&rec).expect("encode");
        let r = IntentRec::decode(&b).expect("decode");
        assert_eq!(r.caller, Some(caller));
        let p = r.planned().expect("a link records");
        assert_eq!(p.change_kind(), loom_proto::changelog::ChangeKind::Link);
    }

    /// `DirObject` as version 3 wrote it.
    #[derive(Serialize)]
    struct DirObjectV3Out {
        parent: Fid,
        perm: u32,
        uid: u32,
        gid: u32,
        time: Time,
        default_stripe: Option<loom_proto::StripeSpec>,
        others: Option<Vec<Fid>>,
        default_dir: Option<loom_proto::msg::DirDefault>,
        default_compress: Option<loom_proto::Compress>,
    }

    /// `ReqCtx` as versions 3 and 4 wrote it, before the umask.
    #[derive(Serialize)]
    struct ReqCtxV4Out {
        client_id: u64,
        seq: u64,
        acked_below: u64,
        jobid: String,
        uid: u32,
        gid: u32,
        groups: Vec<u32>,
        step_of: Option<loom_proto::changelog::ChangeKind>,
    }

    #[derive(Serialize)]
    struct V3Out {
        version: u8,
        reply_to: Option<(u64, u64, u64)>,
        op: IntentOpOf<DirObjectV3Out>,
        caller: Option<ReqCtxV4Out>,
    }

    #[test]
    fn a_version_3_mkdir_decodes_without_a_project_and_the_current_version_keeps_it() {
        let dir = DirObjectV3Out {
            parent: Fid::new(0, 7),
            perm: 0o750,
            uid: 65534,
            gid: 65534,
            time: Time::default(),
            default_stripe: None,
            others: None,
            default_dir: None,
            default_compress: Some(loom_proto::Compress::LZ4),
        };
        let op = IntentOpOf::Mkdir {
            name: "d".into(),
            dir,
            mdts: vec![0, 1],
            aborted: false,
        };
        let b = loom_proto::msg::encode(&V3Out {
            version: 3,
            reply_to: None,
            op,
            caller: Some(ReqCtxV4Out {
                client_id: 7,
                seq: 8,
                acked_below: 1,
                jobid: "j".into(),
                uid: 65534,
                gid: 65534,
                groups: vec![5],
                step_of: None,
            }),
        })
        .expect("encode");
        let r = IntentRec::decode(&b).expect("a version 3 mkdir decodes");
        let caller = r.caller.as_ref().expect("its caller");
        assert_eq!((caller.seq, caller.uid, caller.umask), (8, 65534, None));
        let IntentOp::Mkdir { dir, mdts, .. } = &r.op else {
            panic!("a mkdir: {:?}", r.op);
        };
        assert_eq!((dir.perm, dir.projid, dir.proj_inherit), (0o750, 0, false));
        assert_eq!(dir.default_compress, Some(loom_proto::Compress::LZ4));
        assert_eq!(mdts, &vec![0, 1]);
        let mut now = IntentRec::new(None, r.op.clone());
        if let IntentOp::Mkdir { dir, .. } = &mut now.op {
            (dir.projid, dir.proj_inherit) = (42, true);
            dir.acl = Some(loom_proto::acl::Acl::from_mode(0o750));
        }
        let b = super::super::tx::encode_record(&now).expect("encode");
        let back = IntentRec::decode(&b).expect("a version 4 record");
        let IntentOp::Mkdir { dir, .. } = &back.op else {
            panic!("a mkdir");
        };
        assert_eq!((back.version, dir.projid, dir.proj_inherit), (5, 42, true));
        assert_eq!(dir.acl, Some(loom_proto::acl::Acl::from_mode(0o750)));
    }
}
