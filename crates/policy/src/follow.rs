//! Keeping the catalog current from each MDT's changelog (see
//! `loom_proto::changelog`). The catalog is a registered consumer of
//! every MDT; a batch of records is applied in one transaction with the
//! number of its last record, and acknowledged to the MDT only after
//! that transaction committed. A crash of the engine re-reads what it
//! had not committed; a restarted MDT keeps its records until they are
//! acknowledged. Nothing is missed either way.
//!
//! How a record is applied: the names it makes, removes or moves are
//! changed as it says, but only by the MDT that keeps the directory
//! object they are in (its log alone orders them; a change spanning
//! MDTs is recorded by each). Every inode a record touches, and the
//! directories it names, are then read as they are now and written
//! whole (or removed if gone): reading the present is right whatever
//! later records say, since they are applied after. A directory whose
//! layout changed (restriped, split, migrated) is listed again, shard
//! by shard.

use crate::catalog::{drop_inode, drop_name, put_name, put_shards, set, Catalog};
use crate::db::{Stmt, Val};
use crate::scan::{errno, join_all, root_caller, stat};
use anyhow::bail;
use loom_client::Client;
use loom_proto::changelog::{ns, ChangeKind, ChangeRec};
use loom_proto::msg::FileKind;
use loom_proto::Fid;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

/// Most records applied in one transaction.
pub const BATCH: u32 = 4096;
/// Inodes read at once while applying.
const AT_ONCE: usize = 32;

fn user_key(mdt: u32) -> String {
    format!("user.mdt{mdt}")
}

fn cursor_key(mdt: u32) -> String {
    format!("cursor.mdt{mdt}")
}

/// Make sure the catalog is a changelog consumer of every MDT. With
/// `reset` (before a scan) its cursors start at each log's end; without,
/// a catalog never scanned, or whose consumer is gone, is refused.
pub async fn attach(client: &Arc<Client>, cat: &Catalog, reset: bool) -> anyhow::Result<()> {
    for mdt in client.mdts() {
        let st = client
            .changelog_state(mdt)
            .await
            .map_err(|e| errno(e, &format!("the changelog of MDT{mdt}")))?;
        let user = cat.get(&user_key(mdt)).await?;
        let registered = user
            .as_deref()
            .and_then(|u| u.parse::<u32>().ok())
            .filter(|u| st.users.iter().any(|x| x.id == *u));
        if !reset {
            let (Some(_), Some(_)) = (registered, cat.get(&cursor_key(mdt)).await?) else {
                match user {
                    None => bail!("the catalog was never filled: run `loom policy scan` first"),
                    Some(u) => bail!(
                        "the catalog's changelog consumer cl{u} on MDT{mdt} is gone, so changes may have been missed: run `loom policy scan` again"
                    ),
                }
            };
            continue;
        }
        let id = match registered {
            Some(id) => id,
            None => client
                .changelog_register(mdt)
                .await
                .map_err(|e| errno(e, &format!("registering a changelog consumer on MDT{mdt}")))?,
        };
        // Read after registering: records start with the consumer.
        let st = client
            .changelog_state(mdt)
            .await
            .map_err(|e| errno(e, &format!("the changelog of MDT{mdt}")))?;
        cat.db
            .batch(&[
                set(&user_key(mdt), &id.to_string()),
                set(&cursor_key(mdt), &st.next.saturating_sub(1).to_string()),
            ])
            .await?;
    }
    Ok(())
}

/// Forget the catalog's consumers (records are then purged for it).
pub async fn detach(client: &Arc<Client>, cat: &Catalog) -> anyhow::Result<()> {
    for mdt in client.mdts() {
        if let Some(u) = cat.get(&user_key(mdt)).await?.and_then(|u| u.parse().ok()) {
            match client.changelog_deregister(mdt, u).await {
                Ok(()) | Err(loom_proto::Errno::ENOENT) => {}
                Err(e) => return Err(errno(e, &format!("deregistering cl{u} on MDT{mdt}"))),
            }
        }
    }
    Ok(())
}

/// What one step applied.
#[derive(Clone, Copy, Debug, Default)]
pub struct Applied {
    /// Records applied.
    pub records: u64,
    /// The last record applied (0: none yet).
    pub last: u64,
    /// The log's next record number when read.
    pub next: u64,
}

/// Apply MDT `mdt`'s records after the catalog's cursor, at most
/// [`BATCH`], waiting up to `wait` for one.
pub async fn step(
    client: &Arc<Client>,
    cat: &Catalog,
    mdt: u32,
    wait: Duration,
) -> anyhow::Result<Applied> {
    let (Some(user), Some(cursor)) = (
        cat.get(&user_key(mdt))
            .await?
            .and_then(|u| u.parse::<u32>().ok()),
        cat.get(&cursor_key(mdt))
            .await?
            .and_then(|c| c.parse::<u64>().ok()),
    ) else {
        bail!("the catalog does not follow MDT{mdt}: run `loom policy scan` first");
    };
    let (recs, st) = client
        .changelog_read(mdt, cursor + 1, BATCH, wait)
        .await
        .map_err(|e| errno(e, &format!("reading the changelog of MDT{mdt}")))?;
    if !st.users.iter().any(|u| u.id == user) {
        bail!(
            "the catalog's changelog consumer cl{user} on MDT{mdt} is gone, so changes may have been missed: run `loom policy scan` again"
        );
    }
    if let Some(r) = recs.first() {
        if r.index != cursor + 1 {
            bail!(
                "MDT{mdt}'s changelog went from record {} on, the catalog had {cursor}: records were purged before it read them; run `loom policy scan` again",
                r.index
            );
        }
    }
    let Some(last) = recs.last().map(|r| r.index) else {
        return Ok(Applied {
            records: 0,
            last: cursor,
            next: st.next,
        });
    };
    let mut stmts = apply(client, cat, mdt, &recs).await?;
    stmts.push(set(&cursor_key(mdt), &last.to_string()));
    cat.db.batch(&stmts).await?;
    // Acknowledged once committed; a failure here only keeps records
    // that the next step skips by the cursor.
    if let Err(e) = client.changelog_clear(mdt, user, last).await {
        tracing::warn!("acknowledging MDT{mdt}'s records up to {last}: {e}");
    }
    Ok(Applied {
        records: recs.len() as u64,
        last,
        next: st.next,
    })
}

/// The statements that apply `recs` of MDT `mdt` (see the module's
/// documentation).
async fn apply(
    client: &Arc<Client>,
    cat: &Catalog,
    mdt: u32,
    recs: &[ChangeRec],
) -> anyhow::Result<Vec<Stmt>> {
    let local = |d: Fid| client.mdt_index_of(d) == Some(mdt);
    let ino = |f: Fid| f.ino() as i64;
    let mut stmts = Vec::new();
    let mut touched: BTreeSet<Fid> = BTreeSet::new();
    let mut relist: BTreeSet<Fid> = BTreeSet::new();
    for r in recs {
        let name = r.name.as_ref().map(|n| n.as_bytes().to_vec());
        match r.kind {
            ChangeKind::Create
            | ChangeKind::Mkdir
            | ChangeKind::Link
            | ChangeKind::Symlink
            | ChangeKind::Mknod => {
                if let (true, Some(n)) = (local(r.parent), &name) {
                    stmts.push(put_name(ino(r.parent), n, ino(r.fid)));
                }
                touched.extend([r.fid, r.parent]);
            }
            ChangeKind::Unlink | ChangeKind::Rmdir => {
                if let (true, Some(n)) = (local(r.parent), &name) {
                    stmts.push(drop_name(ino(r.parent), n));
                }
                touched.extend([r.fid, r.parent]);
            }
            ChangeKind::Rename => {
                if let Some((sp, sn)) = &r.source {
                    if local(*sp) {
                        stmts.push(drop_name(ino(*sp), sn.as_bytes()));
                        if let (true, Some(x)) = (r.flags & ns::EXCHANGE != 0, r.replaced) {
                            stmts.push(put_name(ino(*sp), sn.as_bytes(), ino(x)));
                        }
                    }
                    touched.insert(*sp);
                }
                if let (true, Some(n)) = (local(r.parent), &name) {
                    stmts.push(put_name(ino(r.parent), n, ino(r.fid)));
                }
                touched.extend([r.fid, r.parent]);
                touched.extend(r.replaced);
            }
            ChangeKind::Layout | ChangeKind::Migrate => {
                touched.insert(r.fid);
                relist.insert(r.fid);
            }
            ChangeKind::SetAttr
            | ChangeKind::Truncate
            | ChangeKind::Xattr
            | ChangeKind::Close
            | ChangeKind::Mtime => {
                touched.insert(r.fid);
            }
        }
    }
    touched.remove(&Fid::new(0, 0));
    // A shard stands for its directory, whose attributes it changed.
    for f in touched.clone() {
        let m = cat
            .db
            .query("SELECT dir FROM shards WHERE shard = $1", &[Val::I(ino(f))])
            .await?;
        if let Some(row) = m.first() {
            touched.remove(&f);
            touched.insert(Fid::from_ino(row[0].i() as u64));
        }
    }
    let c = root_caller();
    let touched: Vec<Fid> = touched.into_iter().collect();
    let mut dirs = BTreeSet::new();
    for chunk in touched.chunks(AT_ONCE) {
        let got = join_all(chunk.iter().map(|f| stat(client, &c, *f))).await;
        for (f, r) in chunk.iter().zip(got) {
            match r? {
                Some((kind, rows)) => {
                    if relist.contains(f) && kind == FileKind::Dir {
                        dirs.insert(*f);
                    }
                    stmts.extend(rows);
                }
                None => {
                    stmts.push(drop_inode(ino(*f)));
                    stmts.extend(put_shards(ino(*f), &[]));
                }
            }
        }
    }
    for d in dirs {
        stmts.extend(relist_dir(client, cat, d).await?);
    }
    Ok(stmts)
}

/// List directory `dir` again, shard by shard, after its shards changed:
/// the names of its old and new shards are replaced by what they hold.
async fn relist_dir(client: &Arc<Client>, cat: &Catalog, dir: Fid) -> anyhow::Result<Vec<Stmt>> {
    let c = root_caller();
    let layout = client.get_layout_as(&c, dir).await.ok();
    let mut objects: Vec<Fid> = vec![dir];
    if let Some(s) = layout.as_ref().and_then(|l| l.dir_shards()) {
        objects.extend(s.iter().copied().filter(|s| *s != dir));
    }
    let mut stmts = Vec::new();
    let old = cat
        .db
        .query(
            "SELECT shard FROM shards WHERE dir = $1",
            &[Val::I(dir.ino() as i64)],
        )
        .await?;
    for o in old.iter().map(|r| r[0].i()).chain([dir.ino() as i64]) {
        stmts.push((
            "DELETE FROM names WHERE parent = $1".to_string(),
            vec![Val::I(o)],
        ));
    }
    for o in objects {
        let entries = match client.list_dir_object(&c, o).await {
            Ok(e) => e,
            Err(loom_proto::Errno::ENOENT | loom_proto::Errno::ESTALE) => continue,
            Err(e) => return Err(errno(e, &format!("listing {o}"))),
        };
        for e in entries {
            stmts.push(put_name(
                o.ino() as i64,
                e.name.as_bytes(),
                e.attr.fid.ino() as i64,
            ));
        }
    }
    Ok(stmts)
}

/// Follow every MDT until none has records left (`until_idle`), or for
/// ever: each MDT by its own task, a step at a time. `applied` hears of
/// each step.
pub async fn follow(
    client: &Arc<Client>,
    cat: &Catalog,
    until_idle: bool,
    applied: &(dyn Fn(u32, Applied) + Sync),
) -> anyhow::Result<u64> {
    attach(client, cat, false).await?;
    let one = |mdt: u32| async move {
        let mut total = 0u64;
        loop {
            let wait = if until_idle {
                Duration::ZERO
            } else {
                Duration::from_secs(1)
            };
            let a = step(client, cat, mdt, wait).await?;
            total += a.records;
            applied(mdt, a);
            if until_idle && a.records == 0 {
                return anyhow::Ok(total);
            }
        }
    };
    // One MDT failing stops them all: following for ever, the others
    // would hide the failure.
    Ok(
        crate::scan::try_join_all(client.mdts().into_iter().map(one))
            .await?
            .into_iter()
            .sum(),
    )
}
