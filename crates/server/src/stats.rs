//! Statistics of every target a server hosts, gathered where every
//! request passes ([`crate::node::Node`]): per operation, its count,
//! errors, bytes in and out and a latency histogram; per job (the job id
//! each request carries, Lustre's jobstats) and per client, their
//! operations and bytes. Read by the metrics endpoint ([`crate::metrics`])
//! and by `loom jobstats`.
//!
//! Memory stays bounded: a job or client idle for longer than the expiry
//! is forgotten, and past [`MAX_ENTRIES`] of either the least recently
//! seen goes first.

use loom_proto::msg::{JobUsage, TargetId};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Upper bounds of the latency histogram's buckets, in seconds.
pub const BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];
/// The histogram bucket of a request or commit that took `secs`.
pub fn bucket_of(secs: f64) -> usize {
    BUCKETS
        .iter()
        .position(|b| secs <= *b)
        .unwrap_or(BUCKETS.len())
}

/// Most jobs (and, apart, most clients) kept per target.
pub const MAX_ENTRIES: usize = 4096;
/// How long an idle job or client is kept, by default.
pub const DEFAULT_EXPIRY: Duration = Duration::from_secs(600);

/// One operation's figures on one target.
#[derive(Clone, Debug, Default)]
pub struct OpFigures {
    /// Requests served.
    pub count: u64,
    /// Of which answered with an error.
    pub errors: u64,
    /// Bulk bytes received (written data).
    pub bytes_in: u64,
    /// Bulk bytes sent (read data).
    pub bytes_out: u64,
    /// Requests per latency bucket (the last: above every bound).
    pub buckets: [u64; BUCKETS.len() + 1],
    /// Total seconds spent.
    pub seconds: f64,
}

/// What one job or client did on one target.
#[derive(Clone, Debug)]
struct Usage {
    /// Per operation: requests, and microseconds they took.
    ops: HashMap<&'static str, (u64, u64)>,
    read_bytes: u64,
    write_bytes: u64,
    last: Instant,
}

impl Usage {
    fn new(now: Instant) -> Usage {
        Usage {
            ops: HashMap::new(),
            read_bytes: 0,
            write_bytes: 0,
            last: now,
        }
    }
}

/// Jobs or clients, bounded.
#[derive(Debug, Default)]
struct Users<K> {
    map: HashMap<K, Usage>,
}

impl<K: std::hash::Hash + Eq + Clone> Users<K> {
    /// Count `r` for `k`; the key is copied only for an id not seen yet,
    /// not on every request.
    fn record<Q>(&mut self, k: &Q, r: &Served<'_>, now: Instant, expiry: Duration)
    where
        K: std::borrow::Borrow<Q>,
        Q: std::hash::Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        if !self.map.contains_key(k) && self.map.len() >= MAX_ENTRIES {
            self.map.retain(|_, u| now.duration_since(u.last) < expiry);
            if self.map.len() >= MAX_ENTRIES {
                if let Some(oldest) = self
                    .map
                    .iter()
                    .min_by_key(|(_, u)| u.last)
                    .map(|(k, _)| k.clone())
                {
                    self.map.remove::<K>(&oldest);
                }
            }
        }
        if !self.map.contains_key(k) {
            self.map.insert(k.to_owned(), Usage::new(now));
        }
        let Some(u) = self.map.get_mut(k) else {
            return;
        };
        let e = u.ops.entry(r.op).or_insert((0, 0));
        e.0 += 1;
        e.1 += r.took.as_micros() as u64;
        u.write_bytes += r.bytes_in;
        u.read_bytes += r.bytes_out;
        u.last = now;
    }

    fn live(&self, now: Instant, expiry: Duration) -> impl Iterator<Item = (&K, &Usage)> {
        self.map
            .iter()
            .filter(move |(_, u)| now.duration_since(u.last) < expiry)
    }
}

#[derive(Debug, Default)]
struct Inner {
    ops: HashMap<&'static str, OpFigures>,
    jobs: Users<String>,
    clients: Users<u64>,
}

/// One target's statistics.
#[derive(Debug)]
pub struct TargetStats {
    /// The target.
    pub target: TargetId,
    expiry: Duration,
    inner: Mutex<Inner>,
    /// Requests being served now.
    in_flight: std::sync::atomic::AtomicU64,
}

/// Counts a request as in flight until dropped.
pub struct InFlight<'a>(&'a TargetStats);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0
            .in_flight
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A request as the statistics see it.
#[derive(Clone, Copy, Debug)]
pub struct Served<'a> {
    /// Its declared operation name.
    pub op: &'static str,
    /// Its job id ("" when it has none).
    pub job: &'a str,
    /// Its client.
    pub client: u64,
    /// Bulk bytes it brought.
    pub bytes_in: u64,
    /// Bulk bytes its reply took back.
    pub bytes_out: u64,
    /// Whether it was answered with an error.
    pub failed: bool,
    /// How long it took.
    pub took: Duration,
}

/// A consistent copy of a target's statistics.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// Per operation, by name.
    pub ops: Vec<(&'static str, OpFigures)>,
    /// Per job: its id, then per operation its count, and its bytes.
    pub jobs: Vec<JobUsage>,
    /// Per client, the same (the job field holds the client id in hex).
    pub clients: Vec<JobUsage>,
}

fn usage(id: String, u: &Usage) -> JobUsage {
    let mut both: Vec<(&str, (u64, u64))> = u.ops.iter().map(|(k, v)| (*k, *v)).collect();
    both.sort();
    JobUsage {
        job: id,
        ops: both.iter().map(|(k, v)| (k.to_string(), v.0)).collect(),
        usecs: both.iter().map(|(k, v)| (k.to_string(), v.1)).collect(),
        read_bytes: u.read_bytes,
        write_bytes: u.write_bytes,
    }
}

impl TargetStats {
    /// Empty statistics of `target`, forgetting jobs and clients idle for
    /// `expiry`.
    pub fn new(target: TargetId, expiry: Duration) -> TargetStats {
        TargetStats {
            target,
            expiry,
            inner: Mutex::new(Inner::default()),
            in_flight: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// A request starts; it counts as in flight until the guard goes.
    pub fn enter(&self) -> InFlight<'_> {
        self.in_flight
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        InFlight(self)
    }

    /// Requests being served now.
    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Count one request.
    pub fn record(&self, r: Served<'_>) {
        let now = Instant::now();
        let secs = r.took.as_secs_f64();
        let bucket = bucket_of(secs);
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let f = g.ops.entry(r.op).or_default();
        f.count += 1;
        f.errors += u64::from(r.failed);
        f.bytes_in += r.bytes_in;
        f.bytes_out += r.bytes_out;
        f.buckets[bucket] += 1;
        f.seconds += secs;
        // Servers' own requests to each other carry no job.
        if !r.job.is_empty() {
            g.jobs.record(r.job, &r, now, self.expiry);
        }
        g.clients.record(&r.client, &r, now, self.expiry);
    }

    /// A copy of everything, jobs and clients idle past the expiry left
    /// out.
    pub fn snapshot(&self) -> Snapshot {
        let now = Instant::now();
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let mut ops: Vec<(&'static str, OpFigures)> =
            g.ops.iter().map(|(k, v)| (*k, v.clone())).collect();
        ops.sort_by_key(|(k, _)| *k);
        let mut jobs: Vec<JobUsage> = g
            .jobs
            .live(now, self.expiry)
            .map(|(k, u)| usage(k.clone(), u))
            .collect();
        jobs.sort_by(|a, b| a.job.cmp(&b.job));
        let mut clients: Vec<JobUsage> = g
            .clients
            .live(now, self.expiry)
            .map(|(k, u)| usage(format!("{k:016x}"), u))
            .collect();
        clients.sort_by(|a, b| a.job.cmp(&b.job));
        Snapshot { ops, jobs, clients }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(op: &'static str, job: &'static str, client: u64) -> Served<'static> {
        Served {
            op,
            job,
            client,
            bytes_in: 10,
            bytes_out: 0,
            failed: false,
            took: Duration::from_micros(300),
        }
    }

    #[test]
    fn requests_are_counted_per_operation_job_and_client() {
        let s = TargetStats::new(TargetId::mdt(0), DEFAULT_EXPIRY);
        for _ in 0..3 {
            s.record(served("create", "4242", 1));
        }
        s.record(served("unlink", "7", 2));
        let snap = s.snapshot();
        let create = &snap
            .ops
            .iter()
            .find(|(k, _)| *k == "create")
            .expect("create")
            .1;
        assert_eq!((create.count, create.bytes_in), (3, 30));
        assert_eq!(create.buckets[2], 3, "300 µs lies in the 0.5 ms bucket");
        let job = snap
            .jobs
            .iter()
            .find(|j| j.job == "4242")
            .expect("job 4242");
        assert_eq!(job.ops, vec![("create".to_string(), 3)]);
        assert_eq!(job.write_bytes, 30);
        assert_eq!(snap.clients.len(), 2);
    }

    #[test]
    fn jobs_stay_bounded_and_idle_ones_expire() {
        let s = TargetStats::new(TargetId::ost(0), Duration::from_secs(3600));
        for i in 0..(MAX_ENTRIES + 100) {
            let job = format!("job{i}");
            s.record(Served {
                job: &job,
                ..served("obj_write", "", 1)
            });
        }
        let snap = s.snapshot();
        assert_eq!(snap.jobs.len(), MAX_ENTRIES);
        assert!(
            snap.jobs
                .iter()
                .any(|j| j.job == format!("job{}", MAX_ENTRIES + 99)),
            "the newest is kept"
        );
        let quick = TargetStats::new(TargetId::ost(0), Duration::ZERO);
        quick.record(served("obj_read", "x", 1));
        assert!(quick.snapshot().jobs.is_empty(), "idle past a zero expiry");
    }
}
