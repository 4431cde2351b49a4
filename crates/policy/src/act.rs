//! Applying the rules: the catalog names the candidates, then each is
//! checked again against the file as it is now (the catalog may lag the
//! changelog by a moment) and found by its path again before anything is
//! done to it. Actions run at most `rate` a second, and each is logged
//! with its outcome; `dry_run` logs what would be done and does nothing.

use crate::catalog::Catalog;
use crate::db::Val;
use crate::report::{human, now};
use crate::rules::{Alert, Migrate, Purge, Rules};
use crate::scan::{errno, root_caller};
use loom_client::Client;
use loom_proto::layout::LayoutSpec;
use loom_proto::msg::FileKind;
use loom_proto::{Errno, Fid, StripeSpec};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How actions run.
pub struct Actor<'a> {
    /// The file system.
    pub client: &'a Arc<Client>,
    /// The catalog.
    pub cat: &'a Catalog,
    /// Only say what would be done.
    pub dry_run: bool,
    /// Most actions a second (0: no limit).
    pub rate: f64,
    /// Hears each logged line.
    pub log: &'a (dyn Fn(&str) + Sync),
    /// When the last action ran (for the rate).
    pub last: Option<Instant>,
}

/// What a pass of the rules did.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Pass {
    /// Files acted on (or that would be, in a dry run).
    pub done: u64,
    /// Candidates left as they were (changed since, in use, gone).
    pub skipped: u64,
    /// Actions that failed.
    pub failed: u64,
    /// Alerts raised.
    pub alerts: u64,
}

/// The descendants of `root` (itself included), through the names.
const SUBTREE: &str = "WITH RECURSIVE links(parent, ino) AS (SELECT COALESCE(s.dir, n.parent), n.ino FROM names n LEFT JOIN shards s ON s.shard = n.parent), sub(ino) AS (SELECT CAST($1 AS BIGINT) UNION SELECT l.ino FROM links l JOIN sub ON l.parent = sub.ino)";

impl Actor<'_> {
    fn say(&self, line: String) {
        (self.log)(&line);
    }

    /// Log how action `what` ended, and count it: a file in use is left
    /// for the next pass.
    fn outcome(&self, what: &str, r: Result<(), Errno>, p: &mut Pass) {
        match r {
            Ok(()) => {
                self.say(format!("{what}: done"));
                p.done += 1;
            }
            Err(Errno::EBUSY | Errno::EAGAIN) => {
                self.say(format!("{what}: in use, left for the next pass"));
                p.skipped += 1;
            }
            Err(e) => {
                self.say(format!(
                    "{what}: failed: {}",
                    std::io::Error::from_raw_os_error(e.raw())
                ));
                p.failed += 1;
            }
        }
    }

    async fn pace(&mut self) {
        if self.rate > 0.0 {
            if let Some(t) = self.last {
                let gap = Duration::from_secs_f64(1.0 / self.rate);
                let since = t.elapsed();
                if since < gap {
                    tokio::time::sleep(gap - since).await;
                }
            }
        }
        self.last = Some(Instant::now());
    }

    /// Run every rule once.
    pub async fn pass(&mut self, rules: &Rules) -> anyhow::Result<Pass> {
        let mut p = Pass::default();
        for r in &rules.purge {
            self.purge(r, &mut p).await?;
        }
        for r in &rules.migrate {
            self.migrate(r, &mut p).await?;
        }
        for r in &rules.alert {
            self.alert(r, &mut p).await?;
        }
        Ok(p)
    }

    /// The tree's inode, or `None` (logged) if it does not exist.
    async fn tree(&self, rule: &str, tree: &str) -> anyhow::Result<Option<i64>> {
        match self
            .client
            .resolve_path_as(&root_caller(), tree.trim_start_matches('/'))
            .await
        {
            Ok(a) => Ok(Some(a.fid.ino() as i64)),
            Err(Errno::ENOENT) => {
                self.say(format!("{rule}: tree {tree} does not exist; nothing to do"));
                Ok(None)
            }
            Err(e) => Err(errno(e, &format!("{rule}: tree {tree}"))),
        }
    }

    /// The names of `ino` (directory inode, name), with the path of the
    /// first, checked to lead to it now.
    async fn names(&self, ino: i64) -> anyhow::Result<Option<(Vec<(i64, Vec<u8>)>, String)>> {
        let rows = self
            .cat
            .db
            .query(
                "SELECT COALESCE(s.dir, n.parent), n.name FROM names n LEFT JOIN shards s ON s.shard = n.parent WHERE n.ino = $1 ORDER BY 1, 2",
                &[Val::I(ino)],
            )
            .await?;
        let names: Vec<(i64, Vec<u8>)> = rows.iter().map(|r| (r[0].i(), r[1].b())).collect();
        let Some(path) = self.cat.path(ino).await? else {
            return Ok(None);
        };
        let now = self
            .client
            .resolve_path_as(&root_caller(), &path[1..])
            .await;
        match now {
            Ok(a) if a.fid.ino() as i64 == ino => {
                Ok(Some((names, String::from_utf8_lossy(&path).into_owned())))
            }
            _ => Ok(None),
        }
    }

    async fn purge(&mut self, r: &Purge, p: &mut Pass) -> anyhow::Result<()> {
        let Some(root) = self.tree(&r.name, &r.tree).await? else {
            return Ok(());
        };
        let cutoff = now() - i64::from(r.unused_days) * 86400;
        let rows = self
            .cat
            .db
            .query(
                // A file with a name outside the tree is not the tree's
                // to remove.
                &format!("{SUBTREE} SELECT i.ino FROM inodes i WHERE i.ino IN (SELECT ino FROM sub) AND i.kind = 'f' AND i.atime < $2 AND i.mtime < $2 AND NOT EXISTS (SELECT 1 FROM links l WHERE l.ino = i.ino AND l.parent NOT IN (SELECT ino FROM sub)) ORDER BY i.ino"),
                &[Val::I(root), Val::I(cutoff)],
            )
            .await?;
        let c = root_caller();
        for row in rows {
            let ino = row[0].i();
            let fid = Fid::from_ino(ino as u64);
            // As it is now: still a file, still unused.
            let attr = match self.client.getattr(&c, fid).await {
                Ok(a) => a,
                Err(_) => {
                    p.skipped += 1;
                    continue;
                }
            };
            if attr.kind != FileKind::File || attr.atime.sec >= cutoff || attr.mtime.sec >= cutoff {
                p.skipped += 1;
                continue;
            }
            let Some((names, path)) = self.names(ino).await? else {
                p.skipped += 1;
                continue;
            };
            let unused = (now() - attr.atime.sec.max(attr.mtime.sec)) / 86400;
            let what = format!(
                "purge {path} ({}, unused {unused} days, rule {})",
                human(attr.size as i64),
                r.name
            );
            if self.dry_run {
                self.say(format!("would {what}"));
                p.done += 1;
                continue;
            }
            self.pace().await;
            let mut failed = None;
            for (dir, name) in &names {
                match self
                    .client
                    .unlink(&c, Fid::from_ino(*dir as u64), name)
                    .await
                {
                    Ok(()) | Err(Errno::ENOENT) => {}
                    Err(e) => failed = Some(e),
                }
            }
            self.outcome(&what, failed.map_or(Ok(()), Err), p);
        }
        Ok(())
    }

    async fn migrate(&mut self, r: &Migrate, p: &mut Pass) -> anyhow::Result<()> {
        let Some(root) = self.tree(&r.name, &r.tree).await? else {
            return Ok(());
        };
        let cutoff = now() - i64::from(r.older_than_days) * 86400;
        let rows = self
            .cat
            .db
            .query(
                &format!("{SUBTREE} SELECT i.ino FROM inodes i WHERE i.ino IN (SELECT ino FROM sub) AND i.kind = 'f' AND i.mtime < $2 AND i.pools <> $3 ORDER BY i.ino"),
                &[Val::I(root), Val::I(cutoff), Val::T(r.pool.clone())],
            )
            .await?;
        let c = root_caller();
        let spec = LayoutSpec::plain(StripeSpec {
            count: r.stripe_count.unwrap_or(0),
            pool: Some(r.pool.clone()),
            ..StripeSpec::default()
        });
        for row in rows {
            let ino = row[0].i();
            let fid = Fid::from_ino(ino as u64);
            let attr = match self.client.getattr(&c, fid).await {
                Ok(a) if a.kind == FileKind::File && a.mtime.sec < cutoff => a,
                _ => {
                    p.skipped += 1;
                    continue;
                }
            };
            let Some((_, path)) = self.names(ino).await? else {
                p.skipped += 1;
                continue;
            };
            let age = (now() - attr.mtime.sec) / 86400;
            let what = format!(
                "migrate {path} ({}, unchanged for {age} days) to pool {}, rule {}",
                human(attr.size as i64),
                r.pool,
                r.name
            );
            if self.dry_run {
                self.say(format!("would {what}"));
                p.done += 1;
                continue;
            }
            self.pace().await;
            let r = self
                .client
                .migrate_data(&c, fid, spec.clone(), &|_| {})
                .await;
            self.outcome(&what, r.map(|_| ()), p);
        }
        Ok(())
    }

    async fn alert(&mut self, r: &Alert, p: &mut Pass) -> anyhow::Result<()> {
        let col = r.per.column();
        let rows = self
            .cat
            .db
            .query(
                &format!("SELECT {col}, COUNT(*), CAST(SUM(CASE WHEN kind = 'f' THEN size ELSE 0 END) AS BIGINT) FROM inodes GROUP BY {col} ORDER BY {col}"),
                &[],
            )
            .await?;
        let raised: std::collections::BTreeSet<String> = self
            .cat
            .db
            .query(
                "SELECT who FROM alerts WHERE rule = $1",
                &[Val::T(r.name.clone())],
            )
            .await?
            .iter()
            .map(|x| x[0].t())
            .collect();
        let mut over = std::collections::BTreeSet::new();
        for row in rows {
            let (id, inodes, bytes) = (row[0].i(), row[1].i(), row[2].i());
            let mut why = Vec::new();
            if let Some(b) = r.bytes.filter(|b| bytes as u64 > b.0) {
                why.push(format!(
                    "{} of files, over {}",
                    human(bytes),
                    human(b.0 as i64)
                ));
            }
            if let Some(n) = r.inodes.filter(|n| inodes as u64 > *n) {
                why.push(format!("{inodes} inodes, over {n}"));
            }
            if why.is_empty() {
                continue;
            }
            let who = format!("{} {id}", r.per.name());
            over.insert(who.clone());
            if raised.contains(&who) {
                continue;
            }
            self.say(format!("ALERT {who}: {}, rule {}", why.join("; "), r.name));
            p.alerts += 1;
            if !self.dry_run {
                self.cat
                    .db
                    .exec(
                        "INSERT INTO alerts (rule, who) VALUES ($1, $2) ON CONFLICT (rule, who) DO NOTHING",
                        vec![Val::T(r.name.clone()), Val::T(who)],
                    )
                    .await?;
            }
        }
        // Those back under it may be alerted again if they pass it again.
        for who in raised.difference(&over) {
            if !self.dry_run {
                self.say(format!("{who} is back under rule {}", r.name));
                self.cat
                    .db
                    .exec(
                        "DELETE FROM alerts WHERE rule = $1 AND who = $2",
                        vec![Val::T(r.name.clone()), Val::T(who.clone())],
                    )
                    .await?;
            }
        }
        Ok(())
    }
}
