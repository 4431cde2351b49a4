//! What a target holds of each limited id: its share of the limit, as
//! the quota master (on MDT0) granted it. MDTs hold shares of inode
//! limits (`mdt::quota`), OSTs of block limits (`ost::quota`).

use crate::error::ServerError;
use loom_proto::msg::{Reply, ReqCtx};
use loom_proto::quota::{QuotaDrift, QuotaId, QuotaKind, QuotaUsage};
use loom_proto::Errno;
use std::collections::BTreeMap;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a target trusts that an id has no limits before it asks the
/// master again (a limit set while the target could not be told holds
/// on it after this at most).
pub const UNLIMITED_FOR: Duration = Duration::from_secs(30);

/// How long a change of a limited id whose share is spent waits for a
/// master that does not answer (restarting, say) before it gives up.
pub const MASTER_WAIT: Duration = Duration::from_secs(30);

/// What a share counts: inodes (MDTs), or bytes (OSTs, and MDTs for
/// their Data-on-MDT bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Res {
    /// Inodes.
    Inodes,
    /// Bytes.
    Bytes,
}

impl Res {
    /// The resource `bytes` names on the wire.
    pub fn of(bytes: bool) -> Res {
        if bytes {
            Res::Bytes
        } else {
            Res::Inodes
        }
    }

    /// Its name in messages.
    pub fn unit(self) -> &'static str {
        match self {
            Res::Inodes => "inodes",
            Res::Bytes => "bytes",
        }
    }

    /// Of `u`, what this resource counts.
    pub fn of_usage(self, u: &QuotaUsage) -> u64 {
        match self {
            Res::Inodes => u.inodes,
            Res::Bytes => u.bytes,
        }
    }
}

/// What the master last said of one id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grant {
    /// No limits, as the master said at this time.
    Unlimited(Instant),
    /// Limited: the target may hold this much of the id.
    Up(u64),
}

/// A target's shares, by id.
#[derive(Debug, Default)]
pub struct Shares {
    map: Mutex<HashMap<QuotaId, Grant>>,
}

impl Shares {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<QuotaId, Grant>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What is known of `who`: `None` if the master must be asked (never
    /// asked, or its "unlimited" is too old to trust).
    pub fn get(&self, who: QuotaId) -> Option<Grant> {
        match self.lock().get(&who) {
            Some(Grant::Unlimited(at)) if at.elapsed() >= UNLIMITED_FOR => None,
            g => g.copied(),
        }
    }

    /// Whether the master last said `who` has limits.
    pub fn known_limited(&self, who: QuotaId) -> bool {
        matches!(self.lock().get(&who), Some(Grant::Up(_)))
    }

    /// The master's answer for `who`.
    pub fn granted(&self, who: QuotaId, limited: bool, granted: u64) {
        let g = if limited {
            Grant::Up(granted)
        } else {
            Grant::Unlimited(Instant::now())
        };
        self.lock().insert(who, g);
    }

    /// Whether any id is known to be limited (else no change can pass a
    /// share).
    pub fn any_limited(&self) -> bool {
        self.lock().values().any(|g| matches!(g, Grant::Up(_)))
    }

    /// Every id known to be limited, with its share (what a target keeps
    /// across a restart).
    pub fn limited(&self) -> Vec<(QuotaId, u64)> {
        let mut v: Vec<(QuotaId, u64)> = self
            .lock()
            .iter()
            .filter_map(|(w, g)| match g {
                Grant::Up(n) => Some((*w, *n)),
                Grant::Unlimited(_) => None,
            })
            .collect();
        v.sort();
        v
    }

    /// The master takes back what is granted of `who` beyond `used`:
    /// `used` is the share from now on, or, with `forget` (its limits
    /// changed), nothing is known of `who` any more.
    pub fn release(&self, who: QuotaId, used: u64, forget: bool) {
        if forget {
            self.lock().remove(&who);
        } else {
            self.lock().insert(who, Grant::Up(used));
        }
    }
}

/// Whether the caller may see `who`'s usage: root anyone's, a user their
/// own, their groups' and any project's (a project is a directory tree,
/// whose cap its users need to see).
pub fn may_see(ctx: &ReqCtx, who: QuotaId) -> Result<(), ServerError> {
    let ok = ctx.uid == 0
        || match who.kind {
            QuotaKind::User => who.id == ctx.uid,
            QuotaKind::Group => who.id == ctx.gid || ctx.groups.contains(&who.id),
            QuotaKind::Project => true,
        };
    if ok {
        Ok(())
    } else {
        Err(ServerError::refused(
            Errno::EPERM,
            format!("only root may see the usage of another {}", who.kind.name()),
        ))
    }
}

/// `loom quota --check`'s answer: every id counted or found by a scan,
/// and those whose count and scan differ.
pub fn drift(
    counted: &HashMap<QuotaId, QuotaUsage>,
    scanned: &HashMap<QuotaId, QuotaUsage>,
) -> Reply {
    let mut ids: BTreeMap<QuotaId, (QuotaUsage, QuotaUsage)> = BTreeMap::new();
    for (who, u) in counted {
        ids.entry(*who).or_default().0 = *u;
    }
    for (who, u) in scanned {
        ids.entry(*who).or_default().1 = *u;
    }
    // An id counted down to nothing is no drift.
    ids.retain(|_, (c, s)| *c != QuotaUsage::default() || *s != QuotaUsage::default());
    let drift = ids
        .iter()
        .filter(|(_, (c, s))| c != s)
        .map(|(who, (c, s))| QuotaDrift {
            who: *who,
            counted: *c,
            scanned: *s,
        })
        .collect();
    Reply::QuotaCheck {
        ids: ids.len() as u64,
        drift,
    }
}
