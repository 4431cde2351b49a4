//! Recovery after a restart: the clients replay what the MDT acknowledged
//! but had not committed, in transaction order, before anything else is
//! served (Lustre's recovery window).
//!
//! - A client is *registered* on the MDT by its first change, whose reply
//!   waits for the commit: from then on the MDT knows to wait for it after
//!   a restart. `Disconnect` (unmount, end of a tool) commits and removes
//!   the registration.
//! - After a restart, client requests other than `CommitState` and `Replay` wait
//!   while the registered clients send their replays. When every one of
//!   them has sent its last, or the window ends, the changes are applied
//!   in transaction order, each with the results its first execution
//!   returned (FIDs, layouts, times), and committed; then the MDT opens.
//! - A client that did not finish within the window is evicted: its
//!   registration is dropped and its replays, if any came, are not applied
//!   (a later change of another client may depend on the state without
//!   them). When it comes back it learns so (its `Replay` is refused) and
//!   drops what it kept, with an error in its log.
//! - A replayed change that fails (its parent went with an evicted
//!   client's changes) is logged and counted, and the others go on.

use super::tx::{read_meta, store_err};
use crate::error::ServerError;
use loom_proto::msg::{Replayed, Time};
use loom_proto::Errno;
use loom_store::kv::{Batch, KvStore, Space};
use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

/// Meta key prefix of client registrations: `client/<id hex>` -> time.
pub const CLIENT_PREFIX: &str = "client/";
/// Meta key of the last transaction number applied: `u64`.
pub const LAST_TRANSNO: &str = "last_transno";
/// Meta key written by a clean stop: the last transaction number then.
/// Equal to [`LAST_TRANSNO`] at start, it means nothing was lost.
pub const CLEAN_STOP: &str = "clean_stop";

/// The meta key of client `id`'s registration.
pub fn client_key(id: u64) -> Vec<u8> {
    format!("{CLIENT_PREFIX}{id:016x}").into_bytes()
}

/// How long a restarted MDT waits for its clients by default.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(60);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The clients this MDT would wait for after a restart.
#[derive(Debug, Default)]
pub struct Registered {
    ids: Mutex<HashSet<u64>>,
}

impl Registered {
    /// The registrations in `store`.
    pub fn load(store: &dyn KvStore) -> Result<Registered, ServerError> {
        let mut ids = HashSet::new();
        let mut after: Option<Vec<u8>> = None;
        loop {
            let page = store
                .scan(
                    Space::Meta,
                    CLIENT_PREFIX.as_bytes(),
                    after.as_deref(),
                    4096,
                )
                .map_err(store_err)?;
            for (k, _) in &page {
                let id = std::str::from_utf8(&k[CLIENT_PREFIX.len()..])
                    .ok()
                    .and_then(|h| u64::from_str_radix(h, 16).ok());
                match id {
                    Some(id) => {
                        ids.insert(id);
                    }
                    None => tracing::warn!("ignoring a malformed client registration"),
                }
            }
            if page.len() < 4096 {
                break;
            }
            after = page.last().map(|(k, _)| k.clone());
        }
        Ok(Registered {
            ids: Mutex::new(ids),
        })
    }

    /// Whether `id` is registered.
    pub fn contains(&self, id: u64) -> bool {
        lock(&self.ids).contains(&id)
    }

    /// Add the registration of `id` to `batch`; true if it is new (the
    /// change must then be committed before its reply).
    pub fn register(&self, batch: &mut Batch, id: u64) -> Result<bool, ServerError> {
        if self.contains(id) {
            return Ok(false);
        }
        batch.put(
            Space::Meta,
            client_key(id),
            super::tx::encode_record(&Time::now())?,
        );
        Ok(true)
    }

    /// The batch registering `id` is applied.
    pub fn registered(&self, id: u64) {
        lock(&self.ids).insert(id);
    }

    /// `id` left or was evicted (its record is deleted by the caller).
    pub fn forget(&self, id: u64) {
        lock(&self.ids).remove(&id);
    }

    /// All registered clients.
    pub fn all(&self) -> HashSet<u64> {
        lock(&self.ids).clone()
    }
}

/// The last transaction number in `store` (0 on a new MDT).
pub fn stored_transno(store: &dyn KvStore) -> Result<u64, ServerError> {
    Ok(read_meta::<u64>(store, LAST_TRANSNO)?.unwrap_or(0))
}

/// The recovery window's state.
#[derive(Debug)]
pub struct Recovery {
    state: Mutex<Window>,
    /// True once replays are done: client requests wait for it.
    open: tokio::sync::watch::Sender<bool>,
    /// Woken when the last expected client finished its replay.
    all_in: tokio::sync::Notify,
    /// How long to wait for the clients.
    pub window: Duration,
}

#[derive(Debug, Default)]
struct Window {
    /// Clients registered before the restart that have not finished.
    waiting: HashSet<u64>,
    /// Clients that sent their last replay.
    finished: HashSet<u64>,
    /// Replays received so far.
    queue: Vec<Replayed>,
    /// The window is over (replays applied or being applied).
    closed: bool,
}

/// What a client's `Replay` gets.
pub enum Accepted {
    /// Queued; more may follow.
    Queued,
    /// The client's replay is complete: wait for the MDT to open.
    Complete,
}

impl Recovery {
    /// A window waiting for `clients` (none: open at once).
    pub fn new(clients: HashSet<u64>, window: Duration) -> Recovery {
        let none = clients.is_empty();
        Recovery {
            state: Mutex::new(Window {
                waiting: clients,
                closed: none,
                ..Window::default()
            }),
            open: tokio::sync::watch::channel(none).0,
            all_in: tokio::sync::Notify::new(),
            window,
        }
    }

    /// Whether client requests are served.
    pub fn is_open(&self) -> bool {
        *self.open.borrow()
    }

    /// Wait until client requests are served.
    pub async fn wait_open(&self) {
        let mut rx = self.open.subscribe();
        let _ = rx.wait_for(|open| *open).await;
    }

    /// How many clients the window waits for now.
    pub fn waiting(&self) -> usize {
        lock(&self.state).waiting.len()
    }

    /// Take replays of `client`; refused once the window is closed or for a
    /// client that was not registered (it has nothing the MDT lost).
    pub fn accept(
        &self,
        client: u64,
        entries: Vec<Replayed>,
        last: bool,
    ) -> Result<Accepted, ServerError> {
        let mut w = lock(&self.state);
        if w.closed {
            return Err(ServerError::refused(
                Errno::ESTALE,
                "the recovery window is closed: this client was evicted and its replays are refused",
            ));
        }
        if !w.waiting.contains(&client) && !w.finished.contains(&client) {
            return Err(ServerError::refused(
                Errno::ESTALE,
                format!("client {client:#x} is not registered on this MDT"),
            ));
        }
        if entries.iter().any(|e| e.ctx.client_id != client) {
            return Err(ServerError::refused(
                Errno::EPROTO,
                "a replay carries another client's change",
            ));
        }
        w.queue.extend(entries);
        if !last {
            return Ok(Accepted::Queued);
        }
        w.waiting.remove(&client);
        w.finished.insert(client);
        if w.waiting.is_empty() {
            self.all_in.notify_one();
        }
        Ok(Accepted::Complete)
    }

    /// Wait until every expected client finished or the window ends; then
    /// close it. Returns the replays in transaction order and the clients
    /// evicted.
    pub async fn close_when_ready(&self) -> (Vec<Replayed>, Vec<u64>) {
        let all_in = self.all_in.notified();
        tokio::pin!(all_in);
        all_in.as_mut().enable();
        if !lock(&self.state).waiting.is_empty() {
            let _ = tokio::time::timeout(self.window, all_in).await;
        }
        let mut w = lock(&self.state);
        w.closed = true;
        let evicted: Vec<u64> = w.waiting.drain().collect();
        let mut queue = std::mem::take(&mut w.queue);
        // An evicted client's replays are not applied: only its whole
        // sequence would be consistent.
        queue.retain(|e| !evicted.contains(&e.ctx.client_id));
        queue.sort_by_key(|e| e.transno);
        (queue, evicted)
    }

    /// Replays are applied and committed: serve everyone.
    pub fn open(&self) {
        self.open.send_replace(true);
    }
}
