//! Snapshot barriers a target holds (see `loom_proto::snapshot`): each is
//! a task that takes a lock (the changes' gate, the namespace lock) and
//! keeps it until the barrier is lifted or its time is up, so that a
//! coordinator that dies part way never leaves a target frozen.

use crate::error::ServerError;
use loom_proto::Errno;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::oneshot;

/// The barriers held, by snapshot and kind.
#[derive(Debug, Default)]
pub struct Barriers {
    held: Mutex<Vec<(u32, &'static str, oneshot::Sender<()>)>>,
}

/// What a barrier's task does once it holds its lock: say so, then wait
/// to be released (or for its time to end).
pub struct Hold {
    ready: oneshot::Sender<()>,
    release: oneshot::Receiver<()>,
    time: Duration,
}

impl Hold {
    /// Keep whatever the caller holds until the barrier is lifted.
    pub async fn keep(self) {
        let _ = self.ready.send(());
        let _ = tokio::time::timeout(self.time, self.release).await;
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Barriers {
    /// Raise barrier `kind` of snapshot `id` for at most `ms`: `task`
    /// takes its lock, then calls [`Hold::keep`]. Answers once the lock is
    /// held; ETIMEDOUT if it could not be taken within the time.
    pub async fn raise<F, Fut>(
        &self,
        id: u32,
        kind: &'static str,
        ms: u32,
        task: F,
    ) -> Result<(), ServerError>
    where
        F: FnOnce(Hold) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let time = Duration::from_millis(u64::from(ms));
        let (ready, ready_rx) = oneshot::channel();
        let (release_tx, release) = oneshot::channel();
        tokio::spawn(task(Hold {
            ready,
            release,
            time,
        }));
        match tokio::time::timeout(time, ready_rx).await {
            Ok(Ok(())) => {
                lock(&self.held).push((id, kind, release_tx));
                Ok(())
            }
            // The task lets go as soon as it gets the lock: its release
            // is dropped with `release_tx`.
            _ => Err(ServerError::refused(
                Errno::ETIMEDOUT,
                format!("snapshot {id}: the {kind} barrier was not reached within {ms} ms"),
            )),
        }
    }

    /// Whether barrier `kind` of snapshot `id` still holds (its time may
    /// have ended).
    pub fn holds(&self, id: u32, kind: &'static str) -> bool {
        lock(&self.held)
            .iter()
            .any(|(i, k, tx)| *i == id && *k == kind && !tx.is_closed())
    }

    /// Lift every barrier of snapshot `id`.
    pub fn lift(&self, id: u32) {
        lock(&self.held).retain(|(i, _, _)| *i != id);
    }
}
