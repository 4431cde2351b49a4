//! The catalog: a row per inode (its attributes and a summary of its
//! layout) and a row per name, keyed by inode number (a FID's
//! [`Fid::ino`], as `ls -i` shows it through the mount). Names are kept
//! by the directory object they are in (a shard of a striped directory
//! is mapped to its directory through `shards`), so that a change
//! recorded by one MDT touches only rows that MDT's log orders.
//!
//! `state` keeps, per MDT, the changelog consumer the catalog follows
//! and the last record applied, in the same transaction as the rows
//! that record changed: a catalog is always at a record boundary of each
//! MDT, so a restart goes on from there and misses nothing.
//!
//! Schema changes are additive (ROADMAP: HSM states and replicas will
//! add columns); `meta.version` names the schema.

use crate::db::{Db, Stmt, Val};
use loom_proto::layout::{Layout, Pattern};
use loom_proto::msg::{Attr, FileKind};
use loom_proto::Fid;

/// The schema's version, kept in `state` as `schema`.
pub const SCHEMA: i64 = 1;

/// One inode as the catalog keeps it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct InodeRow {
    /// Inode number ([`Fid::ino`]).
    pub ino: i64,
    /// `f`, `d`, `l`, `p`, `s`, `c` or `b` (as find's `-type`).
    pub kind: String,
    /// Permission bits.
    pub perm: i64,
    /// Hard links.
    pub nlink: i64,
    /// Owner.
    pub uid: i64,
    /// Group.
    pub gid: i64,
    /// Project.
    pub projid: i64,
    /// Size in bytes.
    pub size: i64,
    /// Last access, seconds since the epoch.
    pub atime: i64,
    /// Last data change.
    pub mtime: i64,
    /// Last inode change.
    pub ctime: i64,
    /// The MDT that keeps it.
    pub mdt: i64,
    /// OST pools its components were drawn from, comma-separated.
    pub pools: String,
    /// Most stripes of a component.
    pub stripe_count: i64,
    /// Stripe size of its first striped component.
    pub stripe_size: i64,
    /// `raid0`, `dom`, `pfl` (several components), `dir` or empty.
    pub layout: String,
    /// OSTs holding its objects, comma-separated, ascending.
    pub osts: String,
}

/// One name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct NameRow {
    /// The directory (not the shard) it is in.
    pub parent: i64,
    /// The name.
    pub name: Vec<u8>,
    /// The inode it names.
    pub ino: i64,
}

/// `find -type`'s letter of a kind.
pub fn kind_letter(k: FileKind) -> &'static str {
    match k {
        FileKind::File => "f",
        FileKind::Dir => "d",
        FileKind::Symlink => "l",
        FileKind::Fifo => "p",
        FileKind::Socket => "s",
        FileKind::CharDev => "c",
        FileKind::BlockDev => "b",
    }
}

impl InodeRow {
    /// The row of `attr`, laid out as `layout`, kept by MDT `mdt`.
    pub fn of(attr: &Attr, layout: Option<&Layout>, mdt: u32) -> InodeRow {
        let mut r = InodeRow {
            ino: attr.fid.ino() as i64,
            kind: kind_letter(attr.kind).to_string(),
            perm: i64::from(attr.perm),
            nlink: i64::from(attr.nlink),
            uid: i64::from(attr.uid),
            gid: i64::from(attr.gid),
            projid: i64::from(attr.projid),
            size: attr.size as i64,
            atime: attr.atime.sec,
            mtime: attr.mtime.sec,
            ctime: attr.ctime.sec,
            mdt: i64::from(mdt),
            pools: String::new(),
            stripe_count: 0,
            stripe_size: 0,
            layout: String::new(),
            osts: String::new(),
        };
        let Some(l) = layout.filter(|_| attr.kind == FileKind::File) else {
            if attr.kind == FileKind::Dir {
                r.layout = "dir".into();
            }
            return r;
        };
        let mut pools: Vec<&str> = l
            .components
            .iter()
            .filter_map(|c| c.pool.as_deref())
            .collect();
        pools.sort_unstable();
        pools.dedup();
        r.pools = pools.join(",");
        let mut osts: Vec<u32> = Vec::new();
        for c in &l.components {
            if let Pattern::Raid0 {
                stripe_size,
                objects,
            } = &c.pattern
            {
                r.stripe_count = r.stripe_count.max(objects.len() as i64);
                if r.stripe_size == 0 {
                    r.stripe_size = i64::from(*stripe_size);
                }
                osts.extend(objects.iter().map(|o| o.ost));
            }
        }
        osts.sort_unstable();
        osts.dedup();
        r.osts = osts
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",");
        r.layout = if l.components.len() > 1 {
            "pfl"
        } else if l.components.iter().any(|c| c.pattern == Pattern::Mdt) {
            "dom"
        } else {
            "raid0"
        }
        .into();
        r
    }

    fn params(&self) -> Vec<Val> {
        vec![
            Val::I(self.ino),
            Val::T(self.kind.clone()),
            Val::I(self.perm),
            Val::I(self.nlink),
            Val::I(self.uid),
            Val::I(self.gid),
            Val::I(self.projid),
            Val::I(self.size),
            Val::I(self.atime),
            Val::I(self.mtime),
            Val::I(self.ctime),
            Val::I(self.mdt),
            Val::T(self.pools.clone()),
            Val::I(self.stripe_count),
            Val::I(self.stripe_size),
            Val::T(self.layout.clone()),
            Val::T(self.osts.clone()),
        ]
    }

    fn from_vals(v: &[Val]) -> InodeRow {
        InodeRow {
            ino: v[0].i(),
            kind: v[1].t(),
            perm: v[2].i(),
            nlink: v[3].i(),
            uid: v[4].i(),
            gid: v[5].i(),
            projid: v[6].i(),
            size: v[7].i(),
            atime: v[8].i(),
            mtime: v[9].i(),
            ctime: v[10].i(),
            mdt: v[11].i(),
            pools: v[12].t(),
            stripe_count: v[13].i(),
            stripe_size: v[14].i(),
            layout: v[15].t(),
            osts: v[16].t(),
        }
    }
}

/// The inode columns, in [`InodeRow`]'s order.
pub const INODE_COLS: &str = "ino, kind, perm, nlink, uid, gid, projid, size, atime, mtime, ctime, mdt, pools, stripe_count, stripe_size, layout, osts";

/// The catalog over its database.
pub struct Catalog {
    /// The database.
    pub db: Db,
}

impl Catalog {
    /// Open (and make, if new) the catalog at `url` (see [`Db::open`]).
    pub async fn open(url: &str) -> anyhow::Result<Catalog> {
        let db = Db::open(url).await?;
        let blob = db.blob();
        let ddl = [
            "CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, value TEXT NOT NULL)".to_string(),
            "CREATE TABLE IF NOT EXISTS inodes (ino BIGINT PRIMARY KEY, kind TEXT NOT NULL, perm BIGINT NOT NULL, nlink BIGINT NOT NULL, uid BIGINT NOT NULL, gid BIGINT NOT NULL, projid BIGINT NOT NULL, size BIGINT NOT NULL, atime BIGINT NOT NULL, mtime BIGINT NOT NULL, ctime BIGINT NOT NULL, mdt BIGINT NOT NULL, pools TEXT NOT NULL, stripe_count BIGINT NOT NULL, stripe_size BIGINT NOT NULL, layout TEXT NOT NULL, osts TEXT NOT NULL)".to_string(),
            format!("CREATE TABLE IF NOT EXISTS names (parent BIGINT NOT NULL, name {blob} NOT NULL, ino BIGINT NOT NULL, PRIMARY KEY (parent, name))"),
            "CREATE INDEX IF NOT EXISTS names_ino ON names (ino)".to_string(),
            "CREATE TABLE IF NOT EXISTS shards (shard BIGINT PRIMARY KEY, dir BIGINT NOT NULL)".to_string(),
            "CREATE INDEX IF NOT EXISTS shards_dir ON shards (dir)".to_string(),
            "CREATE TABLE IF NOT EXISTS alerts (rule TEXT NOT NULL, who TEXT NOT NULL, PRIMARY KEY (rule, who))".to_string(),
        ];
        let stmts: Vec<Stmt> = ddl.into_iter().map(|s| (s, Vec::new())).collect();
        db.batch(&stmts)
            .await
            .map_err(|e| anyhow::anyhow!("cannot set up the {} catalog: {e:#}", db.kind()))?;
        let c = Catalog { db };
        match c.get("schema").await? {
            None => c.set_now("schema", &SCHEMA.to_string()).await?,
            Some(v) if v == SCHEMA.to_string() => {}
            Some(v) => anyhow::bail!(
                "the catalog's schema is version {v}, this loom knows {SCHEMA}: use a newer loom, or a new catalog"
            ),
        }
        Ok(c)
    }

    /// A `state` value.
    pub async fn get(&self, key: &str) -> anyhow::Result<Option<String>> {
        let r = self
            .db
            .query(
                "SELECT value FROM state WHERE key = $1",
                &[Val::T(key.into())],
            )
            .await?;
        Ok(r.first().map(|row| row[0].t()))
    }

    /// Set a `state` value at once.
    pub async fn set_now(&self, key: &str, value: &str) -> anyhow::Result<()> {
        self.db.batch(&[set(key, value)]).await
    }

    /// Every row removed (before a fresh scan); `state` is kept.
    pub async fn clear_rows(&self) -> anyhow::Result<()> {
        let s = |q: &str| (q.to_string(), Vec::new());
        self.db
            .batch(&[
                s("DELETE FROM inodes"),
                s("DELETE FROM names"),
                s("DELETE FROM shards"),
                s("DELETE FROM alerts"),
            ])
            .await
    }

    /// Every inode, by number (to compare catalogs).
    pub async fn inodes(&self) -> anyhow::Result<Vec<InodeRow>> {
        let rows = self
            .db
            .query(
                &format!("SELECT {INODE_COLS} FROM inodes ORDER BY ino"),
                &[],
            )
            .await?;
        Ok(rows.iter().map(|r| InodeRow::from_vals(r)).collect())
    }

    /// Every name, with shards mapped to their directories.
    pub async fn names(&self) -> anyhow::Result<Vec<NameRow>> {
        let rows = self
            .db
            .query(
                "SELECT COALESCE(s.dir, n.parent), n.name, n.ino FROM names n LEFT JOIN shards s ON s.shard = n.parent",
                &[],
            )
            .await?;
        let mut v: Vec<NameRow> = rows
            .iter()
            .map(|r| NameRow {
                parent: r[0].i(),
                name: r[1].b(),
                ino: r[2].i(),
            })
            .collect();
        v.sort();
        Ok(v)
    }

    /// Inode `ino`, if kept.
    pub async fn inode(&self, ino: i64) -> anyhow::Result<Option<InodeRow>> {
        let rows = self
            .db
            .query(
                &format!("SELECT {INODE_COLS} FROM inodes WHERE ino = $1"),
                &[Val::I(ino)],
            )
            .await?;
        Ok(rows.first().map(|r| InodeRow::from_vals(r)))
    }

    /// A path of inode `ino` (through its first name at each step), from
    /// the root, or `None` if a step is missing.
    pub async fn path(&self, ino: i64) -> anyhow::Result<Option<Vec<u8>>> {
        let root = Fid::ROOT.ino() as i64;
        let mut parts: Vec<Vec<u8>> = Vec::new();
        let mut at = ino;
        while at != root {
            if parts.len() > 4096 {
                return Ok(None);
            }
            let r = self
                .db
                .query(
                    "SELECT COALESCE(s.dir, n.parent), n.name FROM names n LEFT JOIN shards s ON s.shard = n.parent WHERE n.ino = $1 ORDER BY n.parent, n.name LIMIT 1",
                    &[Val::I(at)],
                )
                .await?;
            let Some(row) = r.first() else {
                return Ok(None);
            };
            parts.push(row[1].b());
            at = row[0].i();
        }
        parts.reverse();
        let mut p = Vec::new();
        for x in parts {
            p.push(b'/');
            p.extend(x);
        }
        if p.is_empty() {
            p.push(b'/');
        }
        Ok(Some(p))
    }
}

/// Set a `state` value (in a batch).
pub fn set(key: &str, value: &str) -> Stmt {
    (
        "INSERT INTO state (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value".into(),
        vec![Val::T(key.into()), Val::T(value.into())],
    )
}

/// Insert or replace an inode's row (in a batch).
pub fn put_inode(r: &InodeRow) -> Stmt {
    static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let sql = SQL.get_or_init(|| {
        let cols: Vec<&str> = INODE_COLS.split(", ").collect();
        let marks: Vec<String> = (1..=cols.len()).map(|i| format!("${i}")).collect();
        let upd: Vec<String> = cols[1..]
            .iter()
            .map(|c| format!("{c} = excluded.{c}"))
            .collect();
        format!(
            "INSERT INTO inodes ({INODE_COLS}) VALUES ({}) ON CONFLICT (ino) DO UPDATE SET {}",
            marks.join(", "),
            upd.join(", ")
        )
    });
    (sql.clone(), r.params())
}

/// A directory object's row is dropped again if it is a known shard.
pub fn unless_shard(ino: i64) -> Stmt {
    (
        "DELETE FROM inodes WHERE ino = $1 AND EXISTS (SELECT 1 FROM shards WHERE shard = $1)"
            .into(),
        vec![Val::I(ino)],
    )
}

/// Remove an inode's row (its names are removed by their own records).
pub fn drop_inode(ino: i64) -> Stmt {
    (
        "DELETE FROM inodes WHERE ino = $1".into(),
        vec![Val::I(ino)],
    )
}

/// Name `name` in directory object `parent` is `ino`.
pub fn put_name(parent: i64, name: &[u8], ino: i64) -> Stmt {
    (
        "INSERT INTO names (parent, name, ino) VALUES ($1, $2, $3) ON CONFLICT (parent, name) DO UPDATE SET ino = excluded.ino".into(),
        vec![Val::I(parent), Val::B(name.to_vec()), Val::I(ino)],
    )
}

/// Name `name` in directory object `parent` is gone.
pub fn drop_name(parent: i64, name: &[u8]) -> Stmt {
    (
        "DELETE FROM names WHERE parent = $1 AND name = $2".into(),
        vec![Val::I(parent), Val::B(name.to_vec())],
    )
}

/// Directory `dir`'s shards are `shards` (none: not striped).
pub fn put_shards(dir: i64, shards: &[i64]) -> Vec<Stmt> {
    let mut v = vec![(
        "DELETE FROM shards WHERE dir = $1".to_string(),
        vec![Val::I(dir)],
    )];
    for s in shards.iter().filter(|s| **s != dir) {
        // A shard is no inode of its own (its entries are its
        // directory's), should a record have named it first.
        v.push((
            "DELETE FROM inodes WHERE ino = $1".to_string(),
            vec![Val::I(*s)],
        ));
        v.push((
            "INSERT INTO shards (shard, dir) VALUES ($1, $2) ON CONFLICT (shard) DO UPDATE SET dir = excluded.dir".into(),
            vec![Val::I(*s), Val::I(dir)],
        ));
    }
    v
}

/// The shards of a directory's layout, as inode numbers.
pub fn shards_of(layout: Option<&Layout>) -> Vec<i64> {
    layout
        .and_then(|l| l.dir_shards())
        .map(|s| s.iter().map(|f| f.ino() as i64).collect())
        .unwrap_or_default()
}
