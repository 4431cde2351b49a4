//! Issue #31, points 5 and 6: each rule with --dry-run and for real
//! (purge, migrate to a pool, alert), the report against GNU find, and
//! malformed rules, unknown pools and an unreachable catalog refused with
//! nothing deleted or moved; with the default SQLite catalog.
mod common;

#[test]
fn policy_rules_purge_migrate_and_alert() {
    let dir = tempfile::tempdir().expect("tmp");
    let cat = dir.path().join("cat.sqlite");
    common::policy::rules_act(cat.to_str().expect("utf8"));
}
