//! Progress bars (indicatif) for long runs: one bar per run counting
//! operations, hidden when stderr is not a terminal so that logs and CI
//! output stay clean.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress bar shared by the threads of a run (cheap to clone).
#[derive(Debug, Clone)]
pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A bar counting to `total` operations, shown only when stderr is a
    /// terminal and `enabled` is true.
    pub fn new(total: u64, enabled: bool) -> Self {
        if !enabled || !std::io::stderr().is_terminal() {
            return Self::hidden();
        }
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} ops ({per_sec}, eta {eta}) {msg}",
        ) {
            bar.set_style(style);
        }
        Progress { bar: Some(bar) }
    }

    /// A bar that draws nothing (tests, pipes).
    pub fn hidden() -> Self {
        Progress { bar: None }
    }

    /// Counts `n` operations done.
    pub fn inc(&self, n: u64) {
        if let Some(b) = &self.bar {
            b.inc(n);
        }
    }

    /// Says what runs now, e.g. `tmpfs iter 2 File creation`.
    pub fn set_message(&self, msg: String) {
        if let Some(b) = &self.bar {
            b.set_message(msg);
        }
    }

    /// Removes the bar from the terminal.
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
