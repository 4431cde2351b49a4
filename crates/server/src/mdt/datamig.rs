//! `loom migrate` of a file's data (Lustre's `lfs migrate -c/-S/-p`):
//! its bytes are copied onto new objects of another layout and the
//! layout is swapped, the FID kept. The migrating client copies; this
//! MDT keeps the file still while it does, and swaps or undoes.
//!
//! 1. `MigrateData`: no lease on the file is granted any more, those held
//!    are recalled (a writer reports its size first), and the file must
//!    then be open nowhere (EBUSY otherwise: the tool tries again later).
//!    The new objects are taken and recorded durably (`datamig/FID`)
//!    before the answer, which gives the old and the new layout, the size,
//!    and a capability for both sets of objects.
//! 2. The client copies the bytes and makes them durable on the OSTs.
//! 3. `MigrateDataEnd`: if anyone else opened, truncated, wrote or asked
//!    for the file's objects meanwhile (they could not do so under a
//!    lease), the migration is undone (EBUSY) and tried again, as
//!    Lustre's restarts when its lease is broken. Otherwise one batch sets
//!    the new layout (generation + 1), deletes the record, and records the
//!    old objects (and any Data-on-MDT bytes) for destruction, committed
//!    before the answer.
//!
//! A crash leaves the old layout or the new, never a mix: the record and
//! the swap are in one batch. A record found at start names objects no
//! layout took: they are destroyed. A migrating client that goes away
//! (its connection closed, or dead past the lock sweeper's timeout)
//! has its migration undone.

use super::records::InodeRec;
use super::request::Rq;
use super::tx::{read_inode, read_meta, store_err, Tx};
use super::MdtService;
use crate::error::{Handled, ServerError};
use loom_proto::layout::{Layout, LayoutSpec};
use loom_proto::msg::{FileKind, MdtRequest, Reply};
use loom_proto::{Errno, Fid};
use loom_store::kv::Space;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// Prefix of the durable records of migrations in progress.
const RECORD: &str = "datamig/";

/// What a migration in progress took, durably.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct MigRecord {
    /// The file.
    fid: Fid,
    /// The layout being written, whose objects no file holds yet.
    new: Layout,
}

/// One migration in progress.
struct Active {
    /// The migrating client.
    client: u64,
    /// The layout being written.
    new: Layout,
    /// The old layout's generation: another change of it undoes this.
    old_gen: u32,
    /// Someone else opened, changed or reached the file meanwhile.
    broken: bool,
    /// No lease on the file while it lives.
    _frozen: super::leases::Frozen,
}

/// The migrations this MDT has in progress.
#[derive(Default)]
pub struct DataMigs {
    active: Mutex<HashMap<Fid, Active>>,
    /// Files whose migration is being begun (between the first check
    /// and its record): a second begin of one is refused.
    starting: Mutex<HashSet<Fid>>,
}

/// A file claimed for a migration being begun; let go when dropped.
struct Claim<'a> {
    migs: &'a DataMigs,
    fid: Fid,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.migs
            .starting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.fid);
    }
}

impl DataMigs {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Fid, Active>> {
        self.active.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Claim `fid` for a migration being begun, unless one is begun or
    /// in progress already.
    fn claim(&self, fid: Fid) -> Option<Claim<'_>> {
        let mut starting = self.starting.lock().unwrap_or_else(|p| p.into_inner());
        if self.lock().contains_key(&fid) || !starting.insert(fid) {
            return None;
        }
        Some(Claim { migs: self, fid })
    }

    /// `req` from `client` reached the MDT: a migration of the file it
    /// opens, changes or whose objects it asks for is broken, unless it is
    /// the migrating client's own.
    pub fn touched(&self, client: u64, req: &MdtRequest) {
        use MdtRequest as R;
        let fid = match req {
            R::Open { fid, .. }
            | R::SetAttr { fid, .. }
            | R::UpdateSize { fid, .. }
            | R::AppendReserve { fid, .. }
            | R::GetCapa { fid, .. }
            | R::GetLayout { fid }
            | R::DomWrite { fid, .. }
            | R::DomRead { fid, .. }
            | R::DomPunch { fid, .. }
            | R::Lock { fid, .. } => *fid,
            _ => return,
        };
        let mut a = self.lock();
        if a.is_empty() {
            return;
        }
        if let Some(m) = a.get_mut(&fid).filter(|m| m.client != client) {
            m.broken = true;
        }
    }
}

/// Root may migrate any file's data; a user, the files they may write
/// (as `lfs migrate`: moving the bytes is a rewrite of them).
fn may_migrate(ctx: &Rq<'_>, r: &InodeRec) -> Result<(), ServerError> {
    if ctx.ctx.uid == 0 {
        return Ok(());
    }
    super::perm::may(
        &super::perm::Cred::of(ctx.ctx),
        r,
        loom_proto::msg::access::WRITE,
    )
}

fn record_key(fid: Fid) -> String {
    format!("{RECORD}{}", loom_store::kv::hex(&fid.to_key()))
}

/// The key a migration's old (or undone new) objects are recorded under
/// for destruction: not the file's own, which its unlink may take.
fn destroy_key(fid: Fid, generation: u32) -> Vec<u8> {
    let mut k = fid.to_key().to_vec();
    k.extend_from_slice(b"mig");
    k.extend_from_slice(&generation.to_be_bytes());
    k
}

impl MdtService {
    /// `MigrateData`: step 1 (see the module's documentation).
    pub(super) async fn migrate_data(
        self: &Arc<Self>,
        ctx: &Rq<'_>,
        fid: Fid,
        spec: LayoutSpec,
    ) -> Handled {
        spec.validate()
            .map_err(|m| ServerError::refused(Errno::EINVAL, m))?;
        if spec.components.iter().any(|c| c.on_mdt) {
            return Err(ServerError::refused(
                Errno::EOPNOTSUPP,
                "file data migrates onto OSTs only, not into a Data-on-MDT component",
            ));
        }
        let stripes: Vec<&loom_proto::StripeSpec> =
            spec.components.iter().map(|c| &c.stripe).collect();
        self.check_pools(&stripes).await?;
        let client = ctx.ctx.client_id;
        let r = self.migrating_file(fid)?;
        may_migrate(ctx, &r)?;
        if let Some(m) = self.names.datamigs.lock().get(&fid) {
            if m.client != client {
                return Err(ServerError::refused(
                    Errno::EBUSY,
                    format!("{fid} is being migrated by another client"),
                ));
            }
            // A resend: the same answer.
            let new = m.new.clone();
            return self.migrating_reply(fid, &r, new);
        }
        // One begin at a time per file: two would take two sets of new
        // objects under one record.
        let Some(_claim) = self.names.datamigs.claim(fid) else {
            return Err(ServerError::refused(
                Errno::EBUSY,
                format!("{fid} is being migrated by another client"),
            ));
        };
        // No lease from now on; those held are taken back, and a writer
        // under one reports its size before it answers.
        let frozen = self.names.leases.freeze(vec![fid]);
        let held = self.names.leases.held_on(&[fid]);
        drop(self.names.leases.recall(client, held).await);
        if self.names.leases.holds.held_by_other(fid, Some(client)) {
            return Err(ServerError::refused(
                Errno::EBUSY,
                format!("{fid} is open on another client"),
            ));
        }
        let old = self.migrating_file(fid)?;
        let Some(old_layout) = old.layout.clone() else {
            return Err(ServerError::refused(
                Errno::ENODATA,
                format!("{fid} has no layout"),
            ));
        };
        let mut new = match spec.as_plain() {
            Some(p) => self.make_layout(p).await?,
            None => self.make_component_layout(&spec).await?,
        };
        new.generation = old_layout.generation.wrapping_add(1);
        new.compress = old_layout.compress;
        let mut t = Tx::new(&*self.names.store);
        t.put_meta(
            &record_key(fid),
            &MigRecord {
                fid,
                new: new.clone(),
            },
        )?;
        let ticket = self.apply_step(t)?;
        self.commit_through(ticket).await?;
        crate::fail::point("datamig:begun");
        self.names.datamigs.lock().insert(
            fid,
            Active {
                client,
                new: new.clone(),
                old_gen: old_layout.generation,
                broken: false,
                _frozen: frozen,
            },
        );
        self.migrating_reply(fid, &old, new)
    }

    /// A regular file of this MDT that may be migrated.
    fn migrating_file(&self, fid: Fid) -> Result<InodeRec, ServerError> {
        let r = read_inode(&*self.names.store, fid)?;
        if r.attr.kind != FileKind::File {
            return Err(ServerError::refused(
                Errno::EINVAL,
                format!("{fid} is not a regular file"),
            ));
        }
        Ok(r)
    }

    /// The answer to `MigrateData`, with a capability for the old and the
    /// new objects (the copy reads the one and writes the other).
    fn migrating_reply(&self, fid: Fid, r: &InodeRec, new: Layout) -> Handled {
        let old = r.layout.clone().unwrap_or_default();
        let mut both = old.objects();
        both.extend(new.objects());
        let capa = loom_proto::capa::Capa::sign(&self.peers.capa_key(), fid, both, true);
        Ok(Reply::WithCapa {
            reply: Box::new(Reply::DataMigrating {
                old,
                new,
                size: r.attr.size,
            }),
            capa,
        })
    }

    /// `MigrateDataEnd`: step 3, or (`commit` false) the undoing of step 1.
    pub(super) async fn migrate_data_end(
        self: &Arc<Self>,
        ctx: &Rq<'_>,
        fid: Fid,
        commit: bool,
    ) -> Handled {
        // Only the client that began it ends it (checked below), and it
        // was allowed to begin.
        let (_, g) = self.begin().await.into_parts();
        let active = {
            let mut a = self.names.datamigs.lock();
            match a.get(&fid) {
                Some(m) if m.client == ctx.ctx.client_id => a.remove(&fid),
                _ => None,
            }
        };
        let Some(m) = active else {
            // Done already (a resend of the answer lost), or never begun.
            return match read_meta::<MigRecord>(&*self.names.store, &record_key(fid))? {
                None => Ok(Reply::Ok),
                Some(_) => Err(ServerError::refused(
                    Errno::ENOENT,
                    format!("no migration of {fid} by this client is in progress"),
                )),
            };
        };
        let refused = if !commit {
            None
        } else if m.broken || self.names.leases.holds.held_by_other(fid, Some(m.client)) {
            Some(ServerError::refused(
                Errno::EBUSY,
                format!("{fid} was opened or changed elsewhere while it was copied"),
            ))
        } else {
            match read_inode(&*self.names.store, fid) {
                Ok(r) if r.layout.as_ref().map(|l| l.generation) == Some(m.old_gen) => None,
                Ok(_) => Some(ServerError::refused(
                    Errno::ESTALE,
                    format!("the layout of {fid} changed while it was copied"),
                )),
                Err(e) => Some(e),
            }
        };
        let mut t = Tx::new(&*self.names.store);
        t.batch.delete(Space::Meta, record_key(fid).into_bytes());
        let (gone, generation) = if refused.is_some() || !commit {
            // Undone: the new objects go.
            (m.new.clone(), m.new.generation)
        } else {
            let rec = t.inode(fid)?;
            let old = rec.layout.replace(m.new.clone()).unwrap_or_default();
            let generation = old.generation;
            self.dom_drop(&mut t, fid, &old);
            (old, generation)
        };
        let objs = gone.objects();
        let key = destroy_key(fid, generation);
        if !objs.is_empty() {
            t.batch.put(
                Space::Destroy,
                key.clone(),
                super::tx::encode_record(&objs)?,
            );
        }
        // A swapped layout is recorded (LYOUT) in the swap's batch.
        let planned = match refused.is_none() && commit {
            true => super::changelog::Planned::of(&MdtRequest::MigrateDataEnd { fid, commit }),
            false => None,
        };
        let log = match planned {
            Some(p) if self.changelog_recording() => p.records(&t, ctx.ctx)?,
            _ => Vec::new(),
        };
        let ticket = self.apply_batch(None, t, false, log)?;
        drop(g);
        self.commit_through(ticket).await?;
        if refused.is_none() && commit {
            crate::fail::point("datamig:swapped");
        }
        self.queue_destroy(key, objs, 0, ticket);
        self.stats.count(match (&refused, commit) {
            (None, true) => "datamig_done",
            _ => "datamig_undone",
        });
        match refused {
            Some(e) => Err(e),
            None => Ok(Reply::Ok),
        }
    }

    /// Undo the migrations of `client`, which went away.
    pub(super) async fn undo_datamigs_of(self: &Arc<Self>, client: u64) {
        let fids: Vec<Fid> = self
            .names
            .datamigs
            .lock()
            .iter()
            .filter(|(_, m)| m.client == client)
            .map(|(f, _)| *f)
            .collect();
        for fid in fids {
            let ctx = loom_proto::msg::ReqCtx {
                client_id: client,
                ..Default::default()
            };
            if let Err(e) = self.migrate_data_end(&Rq::plain(&ctx), fid, false).await {
                tracing::warn!("MDT{:04x}: undoing the migration of {fid}: {e}", self.index);
            }
        }
    }

    /// Destroy the objects of migrations a crash or a stop cut short:
    /// no layout took them. Run at start, before any request.
    pub(super) fn undo_datamigs_at_start(self: &Arc<Self>) {
        let recs = match self
            .names
            .store
            .scan(Space::Meta, RECORD.as_bytes(), None, usize::MAX)
            .map_err(store_err)
        {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!("MDT{:04x}: reading migration records: {e}", self.index);
                return;
            }
        };
        for (k, v) in recs {
            let Ok(rec) = super::tx::decode_record::<MigRecord>(&v) else {
                tracing::warn!("MDT{:04x}: unreadable migration record", self.index);
                continue;
            };
            let fid = rec.fid;
            let objs = rec.new.objects();
            let key = destroy_key(fid, rec.new.generation);
            let mut t = Tx::new(&*self.names.store);
            t.batch.delete(Space::Meta, k.clone());
            match super::tx::encode_record(&objs) {
                Ok(v) if !objs.is_empty() => t.batch.put(Space::Destroy, key.clone(), v),
                _ => {}
            }
            let ticket = match self.apply_step(t) {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!("MDT{:04x}: undoing the migration of {fid}: {e}", self.index);
                    continue;
                }
            };
            tracing::info!(
                "MDT{:04x}: a migration of {fid} was cut short: its {} new objects go",
                self.index,
                objs.len()
            );
            self.queue_destroy(key, objs, 0, ticket);
        }
    }

    /// The objects of migrations in progress (no layout holds them yet),
    /// for `loom fsck`.
    pub(super) fn migrating_objects(&self) -> Result<Vec<loom_proto::ObjRef>, ServerError> {
        let mut out = Vec::new();
        for (_, v) in self
            .names
            .store
            .scan(Space::Meta, RECORD.as_bytes(), None, usize::MAX)
            .map_err(store_err)?
        {
            out.extend(super::tx::decode_record::<MigRecord>(&v)?.new.objects());
        }
        Ok(out)
    }
}
