//! The catalog's database: an embedded SQLite file by default, or a
//! PostgreSQL server for large sites, behind one small interface so that
//! every statement of the catalog is the same text on both. Parameters
//! are written `$1`, `$2`, ... in the order they first appear (SQLite
//! reads them as named parameters, numbered in that order); aggregates
//! are cast to `BIGINT`, since PostgreSQL's `SUM` of one is `NUMERIC`.

use anyhow::{bail, Context};
use std::sync::Mutex;

/// A value passed to or read from a statement.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Val {
    /// `BIGINT`.
    I(i64),
    /// `TEXT`.
    T(String),
    /// `BLOB` (SQLite), `BYTEA` (PostgreSQL).
    B(Vec<u8>),
    /// `NULL` (read only: statements are given no NULL).
    Null,
}

impl Val {
    /// As an integer (NULL: 0).
    pub fn i(&self) -> i64 {
        match self {
            Val::I(v) => *v,
            _ => 0,
        }
    }

    /// As text (bytes read lossily, NULL: empty).
    pub fn t(&self) -> String {
        match self {
            Val::T(s) => s.clone(),
            Val::B(b) => String::from_utf8_lossy(b).into_owned(),
            Val::I(v) => v.to_string(),
            Val::Null => String::new(),
        }
    }

    /// As bytes.
    pub fn b(&self) -> Vec<u8> {
        match self {
            Val::B(b) => b.clone(),
            Val::T(s) => s.as_bytes().to_vec(),
            _ => Vec::new(),
        }
    }
}

/// PostgreSQL statements prepared so far, by text.
pub type Prepared = std::collections::HashMap<String, tokio_postgres::Statement>;

/// One statement and its parameters.
pub type Stmt = (String, Vec<Val>);

/// A connection to the catalog's database.
pub enum Db {
    /// An SQLite file.
    Sqlite(Mutex<rusqlite::Connection>),
    /// A PostgreSQL server: one connection, its transactions one at a
    /// time (the engine's tasks share it), with its prepared statements.
    Postgres(tokio_postgres::Client, tokio::sync::Mutex<Prepared>),
}

impl Db {
    /// Open the catalog at `url`: `postgres://...` or `postgresql://...`
    /// (key=value connection strings too, with `host=`), else the path
    /// of an SQLite file, made if missing.
    pub async fn open(url: &str) -> anyhow::Result<Db> {
        if url.starts_with("postgres://")
            || url.starts_with("postgresql://")
            || url.starts_with("host=")
        {
            let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
                .await
                .with_context(|| format!("cannot reach the PostgreSQL catalog {}", redact(url)))?;
            tokio::spawn(async move {
                if let Err(e) = conn.await {
                    tracing::warn!("PostgreSQL catalog connection: {e}");
                }
            });
            return Ok(Db::Postgres(client, Default::default()));
        }
        if url.is_empty() {
            bail!("no catalog given");
        }
        let path = std::path::Path::new(url);
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| {
                format!("cannot make the catalog's directory {}", dir.display())
            })?;
        }
        let c = rusqlite::Connection::open(path)
            .with_context(|| format!("cannot open the SQLite catalog {url}"))?;
        // WAL: reports read while the service writes; a crash loses at
        // most the last transaction, whose changelog records were not
        // acknowledged yet and are read again.
        c.execute_batch(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=10000;",
        )
        .with_context(|| format!("cannot use the SQLite catalog {url}"))?;
        Ok(Db::Sqlite(Mutex::new(c)))
    }

    /// Which kind of database, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Db::Sqlite(_) => "SQLite",
            Db::Postgres(..) => "PostgreSQL",
        }
    }

    /// The type of a bytes column.
    pub fn blob(&self) -> &'static str {
        match self {
            Db::Sqlite(_) => "BLOB",
            Db::Postgres(..) => "BYTEA",
        }
    }

    fn sqlite(&self) -> Option<std::sync::MutexGuard<'_, rusqlite::Connection>> {
        match self {
            Db::Sqlite(c) => Some(c.lock().unwrap_or_else(|p| p.into_inner())),
            Db::Postgres(..) => None,
        }
    }

    /// Run `stmts` in one transaction: all or none.
    pub async fn batch(&self, stmts: &[Stmt]) -> anyhow::Result<()> {
        if let Some(mut c) = self.sqlite() {
            let t = c.transaction()?;
            for (sql, params) in stmts {
                let mut st = t.prepare_cached(sql).with_context(|| sql.clone())?;
                st.execute(rusqlite::params_from_iter(params.iter().map(to_sqlite)))
                    .with_context(|| sql.clone())?;
            }
            t.commit()?;
            return Ok(());
        }
        let Db::Postgres(c, one) = self else {
            bail!("no database");
        };
        let mut prepared = one.lock().await;
        // Every statement prepared first (once per connection), then all
        // sent at once: the connection pipelines them, and the server runs
        // them in the order sent.
        let mut sts = Vec::with_capacity(stmts.len());
        for (sql, _) in stmts {
            let st = match prepared.get(sql) {
                Some(st) => st.clone(),
                None => {
                    let st = c.prepare(sql).await.with_context(|| sql.clone())?;
                    prepared.insert(sql.clone(), st.clone());
                    st
                }
            };
            sts.push(st);
        }
        let boxed: Vec<Vec<Box<dyn tokio_postgres::types::ToSql + Sync>>> =
            stmts.iter().map(|(_, p)| pg_params(p)).collect();
        let refs: Vec<Vec<&(dyn tokio_postgres::types::ToSql + Sync)>> = boxed
            .iter()
            .map(|b| b.iter().map(|x| x.as_ref()).collect())
            .collect();
        c.batch_execute("BEGIN").await.context("BEGIN")?;
        let done = crate::scan::join_all(
            sts.iter()
                .zip(&refs)
                .map(|(st, r)| c.execute(st, r.as_slice())),
        )
        .await;
        for (r, (sql, _)) in done.into_iter().zip(stmts) {
            if let Err(e) = r {
                let _ = c.batch_execute("ROLLBACK").await;
                return Err(anyhow::Error::new(e).context(sql.clone()));
            }
        }
        c.batch_execute("COMMIT").await.context("COMMIT")?;
        Ok(())
    }

    /// Run one statement by itself.
    pub async fn exec(&self, sql: &str, params: Vec<Val>) -> anyhow::Result<()> {
        self.batch(&[(sql.to_string(), params)]).await
    }

    /// Rows of a query, each a value per column.
    pub async fn query(&self, sql: &str, params: &[Val]) -> anyhow::Result<Vec<Vec<Val>>> {
        if let Some(c) = self.sqlite() {
            let mut st = c.prepare_cached(sql).with_context(|| sql.to_string())?;
            let n = st.column_count();
            let rows = st
                .query_map(
                    rusqlite::params_from_iter(params.iter().map(to_sqlite)),
                    |r| {
                        (0..n)
                            .map(|i| {
                                Ok(match r.get_ref(i)? {
                                    rusqlite::types::ValueRef::Integer(v) => Val::I(v),
                                    rusqlite::types::ValueRef::Real(v) => Val::I(v as i64),
                                    rusqlite::types::ValueRef::Text(t) => {
                                        Val::T(String::from_utf8_lossy(t).into_owned())
                                    }
                                    rusqlite::types::ValueRef::Blob(b) => Val::B(b.to_vec()),
                                    rusqlite::types::ValueRef::Null => Val::Null,
                                })
                            })
                            .collect::<Result<Vec<Val>, rusqlite::Error>>()
                    },
                )
                .with_context(|| sql.to_string())?;
            let mut out = Vec::new();
            for r in rows {
                out.push(r.with_context(|| sql.to_string())?);
            }
            return Ok(out);
        }
        let Db::Postgres(c, _) = self else {
            bail!("no database");
        };
        let refs = pg_params(params);
        let refs: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> =
            refs.iter().map(|b| b.as_ref()).collect();
        let rows = c.query(sql, &refs).await.with_context(|| sql.to_string())?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            let mut row = Vec::with_capacity(r.len());
            for (i, col) in r.columns().iter().enumerate() {
                use tokio_postgres::types::Type;
                let t = col.type_();
                row.push(if *t == Type::INT8 {
                    r.get::<_, Option<i64>>(i).map_or(Val::Null, Val::I)
                } else if *t == Type::INT4 {
                    r.get::<_, Option<i32>>(i)
                        .map_or(Val::Null, |v| Val::I(i64::from(v)))
                } else if *t == Type::BYTEA {
                    r.get::<_, Option<Vec<u8>>>(i).map_or(Val::Null, Val::B)
                } else if *t == Type::TEXT || *t == Type::VARCHAR {
                    r.get::<_, Option<String>>(i).map_or(Val::Null, Val::T)
                } else if *t == Type::BOOL {
                    r.get::<_, Option<bool>>(i)
                        .map_or(Val::Null, |v| Val::I(i64::from(v)))
                } else {
                    bail!(
                        "{sql}: column {} is of type {t}, which the catalog does not read",
                        col.name()
                    );
                });
            }
            out.push(row);
        }
        Ok(out)
    }
}

fn to_sqlite(v: &Val) -> rusqlite::types::Value {
    match v {
        Val::I(i) => rusqlite::types::Value::Integer(*i),
        Val::T(s) => rusqlite::types::Value::Text(s.clone()),
        Val::B(b) => rusqlite::types::Value::Blob(b.clone()),
        Val::Null => rusqlite::types::Value::Null,
    }
}

fn pg_params(params: &[Val]) -> Vec<Box<dyn tokio_postgres::types::ToSql + Sync>> {
    params
        .iter()
        .map(|v| -> Box<dyn tokio_postgres::types::ToSql + Sync> {
            match v {
                Val::I(i) => Box::new(*i),
                Val::T(s) => Box::new(s.clone()),
                Val::B(b) => Box::new(b.clone()),
                Val::Null => Box::new(Option::<i64>::None),
            }
        })
        .collect()
}

/// A connection string without its password, for messages.
pub fn redact(url: &str) -> String {
    // postgres://user:secret@host/db -> postgres://user:***@host/db
    if let Some((scheme, rest)) = url.split_once("://") {
        if let Some((cred, host)) = rest.split_once('@') {
            if let Some((user, _)) = cred.split_once(':') {
                return format!("{scheme}://{user}:***@{host}");
            }
        }
        return url.to_string();
    }
    url.split_whitespace()
        .map(|kv| match kv.split_once('=') {
            Some(("password", _)) => "password=***".to_string(),
            _ => kv.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_not_shown() {
        assert_eq!(
            redact("postgres://loom:s3cret@localhost/cat"),
            "postgres://loom:***@localhost/cat"
        );
        assert_eq!(
            redact("host=/run/postgresql user=loom password=x dbname=c"),
            "host=/run/postgresql user=loom password=*** dbname=c"
        );
    }
}
