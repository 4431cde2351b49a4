//! The OST's scrub, and its record of bad blocks.
//!
//! A pass walks the object buckets in order and verifies every block of
//! every object against its checksum (`ObjectStore::verify`), at most at
//! its rate limit. Its cursor, counts and findings are saved in
//! `DIR/scrub.toml` about once a second and at each finding, so a pass
//! cut by a restart resumes where it was. A client read that meets a bad
//! block reports it here too: `loom scrub` lists it before any pass ran,
//! and a later pass drops it once the block reads good (rewritten).

use loom_proto::msg::{Finding, ScrubCmd, ScrubStatus};
use loom_store::object::{ObjectError, ObjectStore};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

/// Most bad blocks remembered (the oldest go first).
const MAX_FINDINGS: usize = 1000;
/// How often a running pass saves its cursor.
const SAVE_EVERY: Duration = Duration::from_secs(1);
/// Object buckets (`objects/XX`).
const BUCKETS: u32 = 256;

/// What `scrub.toml` holds.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Saved {
    status: ScrubStatus,
    /// The bucket the pass is in.
    bucket: u32,
    /// The last object it finished in that bucket (0: none yet).
    after: u64,
}

/// One OST's scrub.
#[derive(Debug)]
pub(super) struct Scrub {
    index: u32,
    store: Arc<ObjectStore>,
    path: PathBuf,
    saved: Mutex<Saved>,
    read_errors: AtomicU64,
    /// Set to stop the running pass.
    stop: AtomicBool,
    /// A pass task is running.
    active: AtomicBool,
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Scrub {
    /// The scrub of OST `index` over `store`, as its state file left it; a
    /// pass that was running resumes (when a tokio runtime runs).
    pub(super) fn open(index: u32, store: Arc<ObjectStore>) -> Arc<Scrub> {
        let path = store.dir().join("scrub.toml");
        let saved = match std::fs::read_to_string(&path) {
            Ok(s) => toml::from_str(&s).unwrap_or_else(|e| {
                tracing::warn!(path = %path.display(), "scrub state unreadable ({e}); starting afresh");
                Saved::default()
            }),
            Err(_) => Saved::default(),
        };
        let resume = saved.status.running;
        let s = Arc::new(Scrub {
            index,
            store,
            path,
            saved: Mutex::new(saved),
            read_errors: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            active: AtomicBool::new(false),
        });
        if resume {
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                tracing::info!(ost = index, "resuming the scrub pass cut by a restart");
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
                tracing::warn!(ost = self.index, "scrub state not encoded: {e}");
                return;
            }
        };
        if let Err(e) = loom_store::durable::write_atomic(&self.path, text.as_bytes()) {
            tracing::warn!(ost = self.index, path = %self.path.display(), "scrub state not saved: {e}");
        }
    }

    /// Note an error a request met: a bad block is logged, counted and
    /// kept for `loom scrub`.
    pub(super) fn noticed(&self, e: &ObjectError) {
        let (oid, offset) = match e {
            ObjectError::Corrupt { oid, offset, .. } => (*oid, *offset),
            ObjectError::BadSums { oid, .. } => (*oid, 0),
            _ => return,
        };
        self.read_errors.fetch_add(1, Ordering::Relaxed);
        tracing::error!(ost = %format!("OST{:04x}", self.index), oid, offset, "{e}; answered EIO and reported to scrub");
        if self.add(oid, offset, false) {
            self.save();
        }
    }

    /// Record a bad block; false if it was known.
    fn add(&self, oid: u64, offset: u64, by_scrub: bool) -> bool {
        let mut s = self.lock();
        let f = &mut s.status.findings;
        if f.iter().any(|x| x.oid == oid && x.offset == offset) {
            return false;
        }
        if f.len() >= MAX_FINDINGS {
            f.remove(0);
        }
        f.push(Finding {
            oid,
            offset,
            by_scrub,
            when: now(),
        });
        true
    }

    /// The state as `loom scrub` shows it.
    pub(super) fn status(&self) -> ScrubStatus {
        let mut st = self.lock().status.clone();
        st.running = self.active.load(Ordering::Relaxed);
        st.read_errors = self.read_errors.load(Ordering::Relaxed);
        st
    }

    /// Counters for metrics.
    pub(super) fn counters(&self) -> Vec<(String, u64)> {
        let st = self.status();
        vec![
            ("checksum_errors.count".into(), st.read_errors),
            ("scrub.checked_bytes".into(), st.checked_bytes),
            ("scrub.checked_objects".into(), st.checked_objects),
            ("scrub.bad_blocks".into(), st.findings.len() as u64),
            ("scrub.passes".into(), st.passes),
        ]
    }

    /// Run `cmd`; the state after it.
    pub(super) fn command(self: &Arc<Self>, cmd: ScrubCmd) -> ScrubStatus {
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
                        s.after = 0;
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
        f: impl FnOnce(&ObjectStore) -> Result<T, ObjectError> + Send + 'static,
    ) -> Result<T, ObjectError> {
        let store = self.store.clone();
        match tokio::task::spawn_blocking(move || f(&store)).await {
            Ok(r) => r,
            Err(e) => Err(ObjectError::Io {
                op: "scrub task",
                oid: None,
                path: self.path.clone(),
                source: std::io::Error::other(e.to_string()),
            }),
        }
    }

    async fn run(&self) {
        let (mut bucket, mut after, fresh) = {
            let s = self.lock();
            (s.bucket, s.after, s.status.total_bytes == 0)
        };
        if fresh {
            let total = self.blocking(total_bytes).await.unwrap_or(0);
            self.lock().status.total_bytes = total.max(1);
        }
        tracing::info!(ost = self.index, bucket, "scrub pass running");
        let t0 = Instant::now();
        let mut read_here = 0u64;
        let mut saved_at = Instant::now();
        while bucket < BUCKETS {
            let b = bucket as u8;
            let oids = match self.blocking(move |s| s.objects_in(b)).await {
                Ok(v) => v,
                Err(e) => {
                    tracing::warn!(
                        ost = self.index,
                        bucket,
                        "scrub skips a bucket it cannot list: {e}"
                    );
                    Vec::new()
                }
            };
            let start_after = after;
            for oid in oids.into_iter().filter(|&o| o > start_after) {
                if self.stop.load(Ordering::Relaxed) {
                    self.save();
                    tracing::info!(ost = self.index, "scrub pass stopped");
                    return;
                }
                let bytes = self.check(oid).await;
                read_here += bytes;
                {
                    let mut s = self.lock();
                    s.status.checked_objects += 1;
                    s.status.checked_bytes += bytes;
                    s.after = oid;
                }
                let rate = self.lock().status.rate_mib;
                if rate > 0 {
                    // Sleep off what this pass read ahead of its rate.
                    let due =
                        Duration::from_secs_f64(read_here as f64 / (f64::from(rate) * 1048576.0));
                    if let Some(ahead) = due.checked_sub(t0.elapsed()) {
                        tokio::time::sleep(ahead).await;
                    }
                }
                if saved_at.elapsed() >= SAVE_EVERY {
                    self.save();
                    saved_at = Instant::now();
                }
            }
            bucket += 1;
            after = 0;
            let mut s = self.lock();
            s.bucket = bucket;
            s.after = 0;
        }
        // Findings about objects destroyed since (their file deleted) are
        // void.
        let store = self.store.clone();
        {
            let mut s = self.lock();
            s.status
                .findings
                .retain(|f| store.object_path(f.oid).exists());
        }
        let summary = {
            let mut s = self.lock();
            s.status.running = false;
            s.status.passes += 1;
            s.status.finished = now();
            s.bucket = 0;
            s.after = 0;
            (
                s.status.checked_objects,
                s.status.checked_bytes,
                s.status.findings.len(),
            )
        };
        self.save();
        tracing::info!(
            ost = self.index,
            objects = summary.0,
            bytes = summary.1,
            bad_blocks = summary.2,
            "scrub pass finished"
        );
    }

    /// Verify one object: its bad blocks become findings, and blocks found
    /// before that now read good are dropped. The bytes read.
    async fn check(&self, oid: u64) -> u64 {
        match self.blocking(move |s| s.verify(oid)).await {
            Ok((bytes, bad)) => {
                let mut new = false;
                {
                    let mut s = self.lock();
                    s.status
                        .findings
                        .retain(|f| f.oid != oid || bad.iter().any(|b| b.offset == f.offset));
                }
                for b in &bad {
                    tracing::error!(ost = %format!("OST{:04x}", self.index), oid, offset = b.offset,
                        "scrub: block fails its checksum (stored {:#010x}, read {:#010x})", b.stored, b.computed);
                    new |= self.add(oid, b.offset, true);
                }
                if new {
                    self.save();
                }
                bytes
            }
            Err(e @ ObjectError::BadSums { .. }) => {
                tracing::error!(ost = %format!("OST{:04x}", self.index), oid, "scrub: {e}");
                if self.add(oid, 0, true) {
                    self.save();
                }
                0
            }
            Err(e) => {
                // Gone meanwhile, or an I/O error: not a checksum finding.
                tracing::warn!(
                    ost = self.index,
                    oid,
                    "scrub could not check an object: {e}"
                );
                0
            }
        }
    }
}

/// Bytes of all objects of the store, for a pass's progress.
fn total_bytes(s: &ObjectStore) -> Result<u64, ObjectError> {
    let mut total = 0;
    for b in 0..BUCKETS {
        for oid in s.objects_in(b as u8)? {
            total += s.size(oid)?;
        }
    }
    Ok(total)
}
