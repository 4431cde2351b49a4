//! Issue #31, point 5: the policy engine's catalog, in SQLite (the
//! default), filled by a scan and kept by the changelog, equals a fresh
//! scan after every kind of change and after kill -9 of an MDT and of
//! the engine itself. The same body runs against PostgreSQL in
//! `the_policy_catalog_follows_every_change_in_postgresql`.
mod common;

#[test]
fn the_policy_catalog_follows_every_change() {
    let dir = tempfile::tempdir().expect("tmp");
    let a = dir.path().join("followed.sqlite");
    let b = dir.path().join("scanned.sqlite");
    common::policy::catalog_follows_every_change(
        a.to_str().expect("utf8"),
        b.to_str().expect("utf8"),
    );
}
