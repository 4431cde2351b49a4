//! Crash points for tests, as Lustre's `fail_loc`: a server started with
//! `LOOM_FAIL_AT=NAME` kills itself with SIGKILL when it reaches the point
//! named NAME, so a test can crash it between two steps of an operation
//! and check what the restart recovers. Points that may also fail (a
//! step's error, to test the paths that undo) do so with
//! `LOOM_FAIL_AT=NAME:error`; points that may hold their task up, to
//! open a race's window, do so with `NAME:delay`. Unset (always, outside tests),
//! a point costs one comparison.

use std::sync::OnceLock;

/// The environment variable that arms a point.
pub const ENV: &str = "LOOM_FAIL_AT";

fn armed() -> Option<&'static str> {
    static ARMED: OnceLock<Option<String>> = OnceLock::new();
    ARMED
        .get_or_init(|| std::env::var(ENV).ok().filter(|v| !v.is_empty()))
        .as_deref()
}

fn die(name: &str) {
    tracing::warn!("{ENV}={name}: killing this server");
    let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
}

/// Die here, as `kill -9` would, if this point is armed.
pub fn point(name: &str) {
    if armed() == Some(name) {
        die(name);
    }
}

/// Die when a client's request for operation `op` (its declared name,
/// e.g. "rmdir") arrives, before anything of it is done, if
/// `request:OP` is armed: what the MDT applied before and had not
/// committed is lost as in a power cut (the store keeps its latest
/// changes in the process until a commit), and its clients must replay
/// it.
pub fn request(op: &str) {
    if let Some(armed) = armed() {
        if armed.strip_prefix("request:") == Some(op) {
            die(armed);
        }
    }
}

/// Die here as [`point`] does; or, if `NAME:error` is armed, fail as a
/// step that went wrong would (EIO), for tests of what undoes it.
pub fn point_or_error(name: &str) -> Result<(), crate::error::ServerError> {
    point(name);
    match armed().and_then(|a| a.strip_suffix(":error")) {
        Some(n) if n == name => Err(crate::error::ServerError::internal(format!(
            "{ENV}={name}:error: a failure injected for a test"
        ))),
        _ => Ok(()),
    }
}

/// How long a point armed with `NAME:delay` holds up its task.
pub const DELAY: std::time::Duration = std::time::Duration::from_secs(3);

/// If `NAME:delay` is armed, hold this task up for [`DELAY`] here: it
/// opens the window of a race for a test that shows it cannot happen
/// (what the test checks must hold whatever the order).
pub async fn delay(name: &str) {
    if armed().and_then(|a| a.strip_suffix(":delay")) == Some(name) {
        tracing::warn!("{ENV}={name}:delay: holding this task up for {DELAY:?}");
        tokio::time::sleep(DELAY).await;
    }
}
