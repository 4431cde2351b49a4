//! Issue #31, point 5: the catalog tests against a real PostgreSQL
//! server, through the same code and the same test body as SQLite's.
mod common;
use common::policy::Pg;

#[test]
fn the_policy_catalog_follows_every_change_in_postgresql() {
    let (a, b) = (Pg::new(), Pg::new());
    common::policy::catalog_follows_every_change(&a.url, &b.url);
}

#[test]
fn policy_rules_act_with_a_postgresql_catalog() {
    let cat = Pg::new();
    common::policy::rules_act(&cat.url);
}
