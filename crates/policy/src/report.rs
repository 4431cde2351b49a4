//! Reports from the catalog alone (no server is asked): usage per user,
//! group and project, size and age histograms of regular files, and the
//! largest directories. The same [`Report`] is printed, given as JSON
//! (`--json`) and published for the dashboard.

use crate::catalog::Catalog;
use crate::db::Val;
use serde::{Deserialize, Serialize};

/// Directories listed among the largest.
const TOP_DIRS: i64 = 10;

/// Upper bounds of the size histogram's buckets (the last is open).
pub const SIZE_BOUNDS: [(i64, &str); 8] = [
    (1, "0"),
    (4 << 10, "< 4K"),
    (64 << 10, "< 64K"),
    (1 << 20, "< 1M"),
    (16 << 20, "< 16M"),
    (256 << 20, "< 256M"),
    (4 << 30, "< 4G"),
    (i64::MAX, ">= 4G"),
];

/// Upper bounds, in days, of the age histogram's buckets.
pub const AGE_BOUNDS: [(i64, &str); 6] = [
    (1, "< 1 day"),
    (7, "< 1 week"),
    (30, "< 30 days"),
    (90, "< 90 days"),
    (365, "< 1 year"),
    (i64::MAX, ">= 1 year"),
];

/// What one user, group or project holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Its id.
    pub id: i64,
    /// Inodes.
    pub inodes: i64,
    /// Regular files.
    pub files: i64,
    /// Bytes of its regular files.
    pub bytes: i64,
}

/// One bucket of a histogram.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bucket {
    /// Its label.
    pub label: String,
    /// Files in it.
    pub files: i64,
    /// Their bytes.
    pub bytes: i64,
}

/// One of the largest directories.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dir {
    /// Its path from the root.
    pub path: String,
    /// Entries in it.
    pub entries: i64,
    /// Bytes of the regular files right in it.
    pub bytes: i64,
}

/// A whole report.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// When it was made (seconds since the epoch).
    pub at: i64,
    /// Inodes in the catalog.
    pub inodes: i64,
    /// Regular files, and their bytes.
    pub files: i64,
    /// Bytes of regular files.
    pub bytes: i64,
    /// By owner, most bytes first.
    pub users: Vec<Usage>,
    /// By group.
    pub groups: Vec<Usage>,
    /// By project.
    pub projects: Vec<Usage>,
    /// Regular files by size.
    pub sizes: Vec<Bucket>,
    /// Regular files by time since their last data change.
    pub ages: Vec<Bucket>,
    /// Directories with the most entries.
    pub largest_dirs: Vec<Dir>,
}

/// Now, in seconds since the epoch.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

impl Report {
    /// The report of `cat` as it is now.
    pub async fn of(cat: &Catalog) -> anyhow::Result<Report> {
        let now = now();
        let mut r = Report {
            at: now,
            ..Report::default()
        };
        let t = cat
            .db
            .query(
                "SELECT COUNT(*), CAST(COALESCE(SUM(CASE WHEN kind = 'f' THEN 1 ELSE 0 END), 0) AS BIGINT), CAST(COALESCE(SUM(CASE WHEN kind = 'f' THEN size ELSE 0 END), 0) AS BIGINT) FROM inodes",
                &[],
            )
            .await?;
        if let Some(row) = t.first() {
            (r.inodes, r.files, r.bytes) = (row[0].i(), row[1].i(), row[2].i());
        }
        for (col, out) in [
            ("uid", &mut r.users),
            ("gid", &mut r.groups),
            ("projid", &mut r.projects),
        ] {
            let rows = cat
                .db
                .query(
                    &format!(
                        "SELECT {col}, COUNT(*), CAST(SUM(CASE WHEN kind = 'f' THEN 1 ELSE 0 END) AS BIGINT), CAST(SUM(CASE WHEN kind = 'f' THEN size ELSE 0 END) AS BIGINT) AS b FROM inodes GROUP BY {col} ORDER BY b DESC, {col}"
                    ),
                    &[],
                )
                .await?;
            *out = rows
                .iter()
                .map(|x| Usage {
                    id: x[0].i(),
                    inodes: x[1].i(),
                    files: x[2].i(),
                    bytes: x[3].i(),
                })
                .collect();
        }
        let mut lo = 0i64;
        for (hi, label) in SIZE_BOUNDS {
            r.sizes.push(bucket(cat, "size", lo, hi, label).await?);
            lo = hi;
        }
        let mut lo = 0i64;
        for (hi, label) in AGE_BOUNDS {
            // Age in days: now - mtime in [lo, hi) days.
            let b = cat
                .db
                .query(
                    "SELECT COUNT(*), CAST(COALESCE(SUM(size), 0) AS BIGINT) FROM inodes WHERE kind = 'f' AND $1 - mtime >= $2 AND $1 - mtime < $3",
                    &[
                        Val::I(now),
                        Val::I(lo.saturating_mul(86400)),
                        Val::I(hi.saturating_mul(86400)),
                    ],
                )
                .await?;
            r.ages.push(Bucket {
                label: label.into(),
                files: b.first().map_or(0, |x| x[0].i()),
                bytes: b.first().map_or(0, |x| x[1].i()),
            });
            lo = hi;
        }
        let rows = cat
            .db
            .query(
                "SELECT COALESCE(s.dir, n.parent) AS d, COUNT(*) AS e, CAST(COALESCE(SUM(CASE WHEN i.kind = 'f' THEN i.size ELSE 0 END), 0) AS BIGINT) FROM names n LEFT JOIN shards s ON s.shard = n.parent LEFT JOIN inodes i ON i.ino = n.ino GROUP BY COALESCE(s.dir, n.parent) ORDER BY e DESC, d LIMIT $1",
                &[Val::I(TOP_DIRS)],
            )
            .await?;
        for x in rows {
            let path = cat
                .path(x[0].i())
                .await?
                .map(|p| String::from_utf8_lossy(&p).into_owned())
                .unwrap_or_else(|| format!("(inode {})", x[0].i()));
            r.largest_dirs.push(Dir {
                path,
                entries: x[1].i(),
                bytes: x[2].i(),
            });
        }
        Ok(r)
    }

    /// The report as text, for a terminal.
    pub fn text(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{} inodes, {} regular files, {} in them",
            self.inodes,
            self.files,
            human(self.bytes)
        );
        for (what, rows) in [
            ("user (uid)", &self.users),
            ("group (gid)", &self.groups),
            ("project", &self.projects),
        ] {
            let _ = writeln!(
                s,
                "\nUsage by {what}:\n{:>10} {:>10} {:>10} {:>10}",
                "id", "inodes", "files", "bytes"
            );
            for u in rows {
                let _ = writeln!(
                    s,
                    "{:>10} {:>10} {:>10} {:>10}",
                    u.id,
                    u.inodes,
                    u.files,
                    human(u.bytes)
                );
            }
        }
        for (what, rows) in [
            ("Regular files by size", &self.sizes),
            ("Regular files by time since their last change", &self.ages),
        ] {
            let _ = writeln!(s, "\n{what}:\n{:>10} {:>10} {:>10}", "", "files", "bytes");
            for b in rows {
                let _ = writeln!(s, "{:>10} {:>10} {:>10}", b.label, b.files, human(b.bytes));
            }
        }
        let _ = writeln!(
            s,
            "\nLargest directories (by entries):\n{:>10} {:>10}  path",
            "entries", "bytes"
        );
        for d in &self.largest_dirs {
            let _ = writeln!(s, "{:>10} {:>10}  {}", d.entries, human(d.bytes), d.path);
        }
        s
    }
}

async fn bucket(cat: &Catalog, col: &str, lo: i64, hi: i64, label: &str) -> anyhow::Result<Bucket> {
    let b = cat
        .db
        .query(
            &format!("SELECT COUNT(*), CAST(COALESCE(SUM(size), 0) AS BIGINT) FROM inodes WHERE kind = 'f' AND {col} >= $1 AND {col} < $2"),
            &[Val::I(lo), Val::I(hi)],
        )
        .await?;
    Ok(Bucket {
        label: label.into(),
        files: b.first().map_or(0, |x| x[0].i()),
        bytes: b.first().map_or(0, |x| x[1].i()),
    })
}

/// Bytes in binary units, as `df -h`.
pub fn human(b: i64) -> String {
    let mut v = b as f64;
    for u in ["B", "K", "M", "G", "T", "P"] {
        if v < 1024.0 || u == "P" {
            return if u == "B" {
                format!("{b}B")
            } else {
                format!("{v:.1}{u}")
            };
        }
        v /= 1024.0;
    }
    format!("{b}B")
}
