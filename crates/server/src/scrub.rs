//! A target's scrub, and its record of what failed a checksum.
//!
//! A pass walks what a target stores, bucket by bucket in a fixed order
//! (an OST's object directories, an MDT's keyspaces; see [`Walk`]), and
//! verifies every block or record against its checksum, at most at its
//! rate limit. Its cursor, counts and findings are saved in
//! `DIR/scrub.toml` about once a second and at each finding, so a pass
//! cut by a restart resumes where it was. A client's read that met a bad
//! block or record is reported here too: `loom scrub` lists it before any
//! pass ran, and a later pass drops it once it reads good (rewritten or
//! removed).

use loom_proto::msg::{Finding, ScrubCmd, ScrubStatus};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

/// Most findings remembered (the oldest go first).
const MAX_FINDINGS: usize = 1000;
/// How often a running pass saves its cursor.
const SAVE_EVERY: Duration = Duration::from_secs(1);

/// What a pass verified in one step.
#[derive(Debug, Default)]
pub struct Step {
    /// Where the next step of this bucket starts; `None`: the bucket is
    /// done.
    pub next: Option<Vec<u8>>,
    /// Objects or records checked.
    pub units: u64,
    /// Bytes read.
    pub bytes: u64,
    /// What failed.
    pub bad: Vec<Finding>,
}

/// What a target's scrub walks. Its methods block (disk I/O): the scrub
/// calls them on tokio's blocking pool.
pub trait Walk: Send + Sync + 'static {
    /// How many buckets a pass walks.
    fn buckets(&self) -> u32;
    /// Verify the next few units of `bucket` after `after` (from the
    /// bucket's start when empty).
    fn step(&self, bucket: u32, after: &[u8]) -> Result<Step, String>;
    /// Bytes a pass will read, for its progress.
    fn total_bytes(&self) -> u64;
    /// Whether `f` still fails (a finished pass drops those that do not).
    fn still_bad(&self, f: &Finding) -> bool;
    /// Damage that clients' reads met and the walk's store counted itself
    /// (an MDT's), as (reads, findings); the scrub adds them to its own.
    fn seen(&self) -> (u64, Vec<Finding>) {
        (0, Vec::new())
    }
}

/// What `scrub.toml` holds.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Saved {
    status: ScrubStatus,
    /// The bucket the pass is in.
    bucket: u32,
    /// Where its next step starts in that bucket.
    after: Vec<u8>,
}

/// One target's scrub.
pub struct Scrub {
    /// "OST0001", "MDT0000": for logs.
    name: String,
    walk: Arc<dyn Walk>,
    path: PathBuf,
    saved: Mutex<Saved>,
    read_errors: AtomicU64,
    /// Set to stop the running pass.
    stop: AtomicBool,
    /// A pass task is running.
    active: AtomicBool,
}

impl std::fmt::Debug for Scrub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Scrub({})", self.name)
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A finding as logs and tools name it.
pub fn describe(f: &Finding) -> String {
    if f.record.is_empty() {
        format!("object {} offset {}", f.oid, f.offset)
    } else {
        format!("record {}", f.record)
    }
}

impl Scrub {
    /// The scrub of target `name` whose directory is `dir`, as its state
    /// file left it; a pass that was running resumes (when a tokio runtime
    /// runs).
    pub fn open(name: String, dir: &Path, walk: Arc<dyn Walk>) -> Arc<Scrub> {
        let path = dir.join("scrub.toml");
        let saved = match std::fs::read_to_string(&path) {
            Ok(s) => toml::from_str(&s).unwrap_or_else(|e| {
                tracing::warn!(path = %path.display(), "scrub state unreadable ({e}); starting afresh");
                Saved::default()
            }),
            Err(_) => Saved::default(),
        };
        let resume = saved.status.running;
        let s = Arc::new(Scrub {
            name,
            walk,
            path,
            saved: Mutex::new(saved),
            read_errors: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            active: AtomicBool::new(false),
        });
        if resume {
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                tracing::info!(target_name = %s.name, "resuming the scrub pass cut by a restart");
                s.spawn(&rt);
            }
        }
        s
    }

    fn lock(&self) -> MutexGuard<'_, Saved> {
        self.saved.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Save the state; a failure is logged (the pass goes on, and resumes
    /// from an older cursor after a restart).
    fn save(&self) {
        let text = match toml::to_string(&*self.lock()) {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(target_name = %self.name, "scrub state not encoded: {e}");
                return;
            }
        };
        if let Err(e) = loom_store::durable::write_atomic(&self.path, text.as_bytes()) {
            tracing::warn!(target_name = %self.name, path = %self.path.display(), "scrub state not saved: {e}");
        }
    }

    /// A request met `f` (and was answered EIO): counted and kept for
    /// `loom scrub`. The caller has logged it.
    pub fn noticed(&self, f: Finding) {
        self.read_errors.fetch_add(1, Ordering::Relaxed);
        if self.add(f) {
            self.save();
        }
    }

    /// Record a finding; false if it was known.
    fn add(&self, f: Finding) -> bool {
        let mut s = self.lock();
        let list = &mut s.status.findings;
        if list
            .iter()
            .any(|x| x.oid == f.oid && x.offset == f.offset && x.record == f.record)
        {
            return false;
        }
        if list.len() >= MAX_FINDINGS {
            list.remove(0);
        }
        list.push(f);
        true
    }

    /// The state as `loom scrub` shows it.
    pub fn status(&self) -> ScrubStatus {
        let (reads, seen) = self.walk.seen();
        let mut added = false;
        for f in seen {
            added |= self.add(f);
        }
        if added {
            self.save();
        }
        let mut st = self.lock().status.clone();
        st.running = self.active.load(Ordering::Relaxed);
        st.read_errors = self.read_errors.load(Ordering::Relaxed) + reads;
        st
    }

    /// Counters for metrics: `checksum_errors.count`, `scrub.*`.
    pub fn counters(&self) -> Vec<(String, u64)> {
        let st = self.status();
        vec![
            ("checksum_errors.count".into(), st.read_errors),
            ("scrub.checked_bytes".into(), st.checked_bytes),
            ("scrub.checked_units".into(), st.checked_objects),
            ("scrub.bad".into(), st.findings.len() as u64),
            ("scrub.passes".into(), st.passes),
        ]
    }

    /// Run `cmd`; the state after it.
    pub fn command(self: &Arc<Self>, cmd: ScrubCmd) -> ScrubStatus {
        match cmd {
            ScrubCmd::Status => {}
            ScrubCmd::Stop => self.stop.store(true, Ordering::Relaxed),
            ScrubCmd::Start { rate_mib } => {
                {
                    let mut s = self.lock();
                    s.status.rate_mib = rate_mib;
                    if !s.status.running {
                        // A new pass (not one a restart or a stop cut).
                        s.status.running = true;
                        s.status.checked_objects = 0;
                        s.status.checked_bytes = 0;
                        s.status.total_bytes = 0;
                        s.status.started = now();
                        s.bucket = 0;
                        s.after.clear();
                    }
                }
                self.stop.store(false, Ordering::Relaxed);
                if let Ok(rt) = tokio::runtime::Handle::try_current() {
                    self.spawn(&rt);
                }
            }
        }
        self.status()
    }

    fn spawn(self: &Arc<Self>, rt: &tokio::runtime::Handle) {
        if self.active.swap(true, Ordering::AcqRel) {
            return;
        }
        let me = self.clone();
        rt.spawn(async move {
            me.run().await;
            me.active.store(false, Ordering::Release);
        });
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&dyn Walk) -> T + Send + 'static,
    ) -> Result<T, String> {
        let walk = self.walk.clone();
        tokio::task::spawn_blocking(move || f(&*walk))
            .await
            .map_err(|e| format!("scrub task: {e}"))
    }

    async fn run(&self) {
        let fresh = self.lock().status.total_bytes == 0;
        if fresh {
            let total = self.blocking(|w| w.total_bytes()).await.unwrap_or(0);
            self.lock().status.total_bytes = total.max(1);
        }
        // Saved at once: a restart from now on resumes the pass.
        self.save();
        let buckets = self.walk.buckets();
        tracing::info!(target_name = %self.name, "scrub pass running");
        let t0 = Instant::now();
        let (mut read_here, mut saved_at) = (0u64, Instant::now());
        loop {
            if self.stop.load(Ordering::Relaxed) {
                self.save();
                tracing::info!(target_name = %self.name, "scrub pass stopped");
                return;
            }
            let (bucket, after) = {
                let s = self.lock();
                (s.bucket, s.after.clone())
            };
            if bucket >= buckets {
                break;
            }
            let step = match self.blocking(move |w| w.step(bucket, &after)).await {
                Ok(Ok(step)) => step,
                Ok(Err(e)) | Err(e) => {
                    tracing::warn!(target_name = %self.name, bucket, "scrub skips the rest of a bucket: {e}");
                    Step::default()
                }
            };
            let mut new = false;
            for f in step.bad {
                tracing::error!(target_name = %self.name, "scrub: {} fails its checksum", describe(&f));
                new |= self.add(f);
            }
            {
                let mut s = self.lock();
                s.status.checked_objects += step.units;
                s.status.checked_bytes += step.bytes;
                match step.next {
                    Some(next) => s.after = next,
                    None => {
                        s.bucket += 1;
                        s.after.clear();
                    }
                }
            }
            read_here += step.bytes;
            let rate = self.lock().status.rate_mib;
            if rate > 0 {
                // Sleep off what this pass read ahead of its rate.
                let due = Duration::from_secs_f64(read_here as f64 / (f64::from(rate) * 1048576.0));
                if let Some(ahead) = due.checked_sub(t0.elapsed()) {
                    tokio::time::sleep(ahead).await;
                }
            }
            if new || saved_at.elapsed() >= SAVE_EVERY {
                self.save();
                saved_at = Instant::now();
            }
        }
        // What a pass found before, or reads met, and is good now
        // (rewritten, removed) is dropped.
        let known = self.lock().status.findings.clone();
        let still = self
            .blocking(move |w| {
                known
                    .into_iter()
                    .filter(|f| w.still_bad(f))
                    .collect::<Vec<_>>()
            })
            .await
            .unwrap_or_default();
        let summary = {
            let mut s = self.lock();
            s.status.findings = still;
            s.status.running = false;
            s.status.passes += 1;
            s.status.finished = now();
            s.bucket = 0;
            s.after.clear();
            (
                s.status.checked_objects,
                s.status.checked_bytes,
                s.status.findings.len(),
            )
        };
        self.save();
        tracing::info!(target_name = %self.name, checked = summary.0, bytes = summary.1, bad = summary.2, "scrub pass finished");
    }
}
