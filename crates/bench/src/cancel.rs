//! Stopping a run: a shared flag that Ctrl-C sets and every worker checks
//! between operations. Workloads stop at the next check, then remove their
//! files from the target before reporting [`crate::BenchError::Interrupted`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

/// A cancellation flag shared by the threads of one run.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    /// A flag that is not set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks every worker to stop.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// True once [`Cancel::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// The process's Ctrl-C flag: installs a SIGINT/SIGTERM handler the first
/// time it is called and returns the same flag afterwards. If a handler
/// cannot be installed (another library owns it), the run still works but
/// Ctrl-C kills it without cleaning up; a warning says so.
pub fn ctrlc_flag() -> Cancel {
    static FLAG: OnceLock<Cancel> = OnceLock::new();
    FLAG.get_or_init(|| {
        let flag = Cancel::new();
        let handler_flag = flag.clone();
        let installed = ctrlc::set_handler(move || {
            if handler_flag.is_cancelled() {
                // Second Ctrl-C: the user does not want to wait for cleanup.
                std::process::exit(130);
            }
            eprintln!("\nloom bench: stopping; removing benchmark files (Ctrl-C again to abort)");
            handler_flag.cancel();
        });
        if let Err(e) = installed {
            tracing::warn!("cannot install Ctrl-C handler: {e}; Ctrl-C will not clean up");
        }
        flag
    })
    .clone()
}
