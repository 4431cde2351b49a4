//! OST pools: named sets of OSTs that a layout may draw its objects
//! from (`loom setstripe -p POOL`), kept by the MGS in the cluster
//! configuration, as Lustre's `lctl pool_*`.
//!
//! An OST may be in several pools. A pool's name is recorded in the
//! layouts made from it, so a pool that is later changed or destroyed
//! leaves its files as they were.

use serde::{Deserialize, Serialize};

/// Longest pool name (Lustre's `LOV_MAXPOOLNAME`).
pub const MAX_POOL_NAME: usize = 15;

/// One pool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OstPool {
    /// Its name.
    pub name: String,
    /// Its OSTs, sorted, each once.
    pub osts: Vec<u32>,
}

/// A change to the pools (`loom pool new|add|remove|destroy`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PoolOp {
    /// Make an empty pool.
    New,
    /// Add these OSTs to it.
    Add(Vec<u32>),
    /// Take these OSTs out of it.
    Remove(Vec<u32>),
    /// Destroy it; it must be empty.
    Destroy,
}

/// Why a change to the pools was refused: the errno's name and the
/// reason, for the caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PoolRefusal {
    /// A bad name, an unknown OST, a pool not empty (EINVAL).
    Invalid(String),
    /// The pool exists already, or an OST is in it already (EEXIST).
    Exists(String),
    /// No such pool, or an OST not in it (ENOENT).
    Missing(String),
}

/// Check a pool name: 1 to 15 letters, digits, `_`, `-` or `.`.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_POOL_NAME {
        return Err(format!(
            "pool name {name:?}: give 1 to {MAX_POOL_NAME} characters"
        ));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
    {
        return Err(format!(
            "pool name {name:?}: use letters, digits, '_', '-' and '.' only"
        ));
    }
    Ok(())
}

/// The pool named `name` in `pools`.
pub fn find<'a>(pools: &'a [OstPool], name: &str) -> Option<&'a OstPool> {
    pools.iter().find(|p| p.name == name)
}

/// Apply `op` on pool `name` to `pools` (kept sorted by name), with
/// `osts` the registered OSTs. Nothing changes when it is refused.
pub fn apply(
    pools: &mut Vec<OstPool>,
    name: &str,
    op: &PoolOp,
    osts: &[u32],
) -> Result<(), PoolRefusal> {
    check_name(name).map_err(PoolRefusal::Invalid)?;
    let at = pools.binary_search_by(|p| p.name.as_str().cmp(name));
    let known = |list: &[u32]| -> Result<(), PoolRefusal> {
        if list.is_empty() {
            return Err(PoolRefusal::Invalid("name at least one OST".into()));
        }
        match list.iter().find(|o| !osts.contains(o)) {
            Some(o) => Err(PoolRefusal::Invalid(format!(
                "OST{o:04x} ({o}) is not registered; the OSTs are {}",
                list_osts(osts)
            ))),
            None => Ok(()),
        }
    };
    match (op, at) {
        (PoolOp::New, Ok(_)) => Err(PoolRefusal::Exists(format!("pool {name} exists already"))),
        (PoolOp::New, Err(i)) => {
            pools.insert(
                i,
                OstPool {
                    name: name.to_string(),
                    osts: Vec::new(),
                },
            );
            Ok(())
        }
        (_, Err(_)) => Err(PoolRefusal::Missing(format!("no pool {name}"))),
        (PoolOp::Add(list), Ok(i)) => {
            known(list)?;
            let p = &mut pools[i];
            if let Some(o) = list.iter().find(|o| p.osts.contains(o)) {
                return Err(PoolRefusal::Exists(format!(
                    "OST{o:04x} is in pool {name} already"
                )));
            }
            p.osts.extend(list);
            p.osts.sort_unstable();
            p.osts.dedup();
            Ok(())
        }
        (PoolOp::Remove(list), Ok(i)) => {
            if list.is_empty() {
                return Err(PoolRefusal::Invalid("name at least one OST".into()));
            }
            let p = &mut pools[i];
            if let Some(o) = list.iter().find(|o| !p.osts.contains(o)) {
                return Err(PoolRefusal::Missing(format!(
                    "OST{o:04x} is not in pool {name}"
                )));
            }
            p.osts.retain(|o| !list.contains(o));
            Ok(())
        }
        (PoolOp::Destroy, Ok(i)) => {
            if !pools[i].osts.is_empty() {
                return Err(PoolRefusal::Invalid(format!(
                    "pool {name} still holds {}: remove them first",
                    list_osts(&pools[i].osts)
                )));
            }
            pools.remove(i);
            Ok(())
        }
    }
}

/// OST indices as `loom df` names them.
pub fn list_osts(osts: &[u32]) -> String {
    if osts.is_empty() {
        return "none".into();
    }
    osts.iter()
        .map(|o| format!("OST{o:04x}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_is_made_filled_emptied_and_destroyed() {
        let mut p = Vec::new();
        let osts = [0, 1, 2, 3];
        apply(&mut p, "fast", &PoolOp::New, &osts).expect("new");
        apply(&mut p, "archive", &PoolOp::New, &osts).expect("new");
        assert_eq!(p[0].name, "archive", "kept sorted");
        apply(&mut p, "fast", &PoolOp::Add(vec![3, 1]), &osts).expect("add");
        assert_eq!(find(&p, "fast").map(|x| x.osts.clone()), Some(vec![1, 3]));
        assert!(matches!(
            apply(&mut p, "fast", &PoolOp::Destroy, &osts),
            Err(PoolRefusal::Invalid(_))
        ));
        apply(&mut p, "fast", &PoolOp::Remove(vec![1, 3]), &osts).expect("remove");
        apply(&mut p, "fast", &PoolOp::Destroy, &osts).expect("destroy");
        assert!(find(&p, "fast").is_none());
    }

    #[test]
    fn bad_changes_are_refused_and_change_nothing() {
        let mut p = Vec::new();
        let osts = [0, 1];
        apply(&mut p, "a", &PoolOp::New, &osts).expect("new");
        apply(&mut p, "a", &PoolOp::Add(vec![0]), &osts).expect("add");
        let before = p.clone();
        let refused = [
            ("a", PoolOp::New, "exists"),
            ("b", PoolOp::Add(vec![0]), "no pool"),
            ("a", PoolOp::Add(vec![7]), "not registered"),
            ("a", PoolOp::Add(vec![1, 0]), "already"),
            ("a", PoolOp::Add(vec![]), "at least one"),
            ("a", PoolOp::Remove(vec![1]), "not in pool"),
            ("a", PoolOp::Destroy, "remove them first"),
            ("", PoolOp::New, "1 to 15"),
            ("a/b", PoolOp::New, "letters"),
            ("sixteen_chars_xx", PoolOp::New, "1 to 15"),
        ];
        for (name, op, why) in refused {
            let e = apply(&mut p, name, &op, &osts).expect_err(why);
            let m = match e {
                PoolRefusal::Invalid(m) | PoolRefusal::Exists(m) | PoolRefusal::Missing(m) => m,
            };
            assert!(m.contains(why), "{name} {op:?}: {m}");
            assert_eq!(p, before, "{name} {op:?} changed nothing");
        }
    }
}
