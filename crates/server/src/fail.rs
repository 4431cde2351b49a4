//! Crash points for tests, as Lustre's `fail_loc`: a server started with
//! `LOOM_FAIL_AT=NAME` kills itself with SIGKILL when it reaches the point
//! named NAME, so a test can crash it between two steps of an operation
//! and check what the restart recovers. Unset (always, outside tests),
//! a point costs one comparison.

use std::sync::OnceLock;

/// The environment variable that arms a point.
pub const ENV: &str = "LOOM_FAIL_AT";

/// Die here, as `kill -9` would, if this point is armed.
pub fn point(name: &str) {
    static ARMED: OnceLock<Option<String>> = OnceLock::new();
    let armed = ARMED.get_or_init(|| std::env::var(ENV).ok().filter(|v| !v.is_empty()));
    if armed.as_deref() == Some(name) {
        tracing::warn!("{ENV}={name}: killing this server");
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
    }
}
