//! Grouped commits: one thread makes the store durable for every request
//! waiting at that moment.
//!
//! A change is applied (visible) under the namespace lock, then its request
//! waits here until the store is synced through its ticket; only then does
//! the reply leave. The syncer thread takes every waiter queued, syncs once
//! (which covers everything applied so far) and wakes them all, so N
//! concurrent changes cost one fsync, and waiting costs an async task, not
//! a blocking thread each (which made the MDT spend its time switching
//! between threads contending for the store's sync lock).

use loom_store::kv::{KvStore, Ticket};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use tokio::sync::oneshot;

type Waiter = (Ticket, oneshot::Sender<Result<(), String>>);

/// The syncer of one store. Dropping it stops its thread (after the syncs
/// already asked for), so the store can be reopened at once.
pub struct Syncer {
    tx: Option<mpsc::Sender<Waiter>>,
    thread: Option<JoinHandle<()>>,
}

impl Syncer {
    /// Start the syncer thread of `store`, named after `name`.
    pub fn start(store: Arc<dyn KvStore>, name: &str) -> std::io::Result<Syncer> {
        let (tx, rx) = mpsc::channel::<Waiter>();
        let thread = std::thread::Builder::new()
            .name(format!("{name}-sync"))
            .spawn(move || {
                while let Ok(first) = rx.recv() {
                    let mut waiters = vec![first];
                    waiters.extend(rx.try_iter());
                    let upto = waiters.iter().map(|w| w.0).max().unwrap_or(0);
                    // fsync: every change applied before this point, and
                    // so every waiter's, is on stable storage after it.
                    let r = store.sync_through(upto).map_err(|e| e.to_string());
                    if let Err(e) = &r {
                        tracing::error!("{e}");
                    }
                    for (_, w) in waiters {
                        let _ = w.send(r.clone());
                    }
                }
            })?;
        Ok(Syncer {
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    /// Wait until the store is durable through `ticket`.
    pub async fn sync(&self, ticket: Ticket) -> Result<(), String> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .as_ref()
            .ok_or("the syncer is stopped")?
            .send((ticket, tx))
            .map_err(|_| "the syncer thread is gone".to_string())?;
        rx.await
            .map_err(|_| "the syncer thread is gone".to_string())?
    }
}

impl Drop for Syncer {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
