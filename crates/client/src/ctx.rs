//! Who is asking: [`Caller`], and the request context built from it.
//!
//! Every request carries a [`ReqCtx`]: the client's random id and a
//! per-client sequence number (set by the router as the request leaves,
//! so a server can recognise a resend), the
//! caller's credentials (for permission checks) and the caller's job id (for
//! per-job statistics). The job id is read from the calling process's
//! environment, `/proc/PID/environ`: the variable named by
//! [`ClientOptions::jobid_var`](crate::ClientOptions::jobid_var)
//! (SLURM_JOB_ID by default), else the other schedulers' ([`JOB_VARS`]),
//! else `PROCNAME.UID` (Lustre's `%e.%u`), e.g. `dd.1000`. It is cached
//! per pid, because a process's environment is fixed at exec, for
//! [`JOBID_TTL`], because pids are reused.

use loom_proto::msg::ReqCtx;
use std::collections::HashMap;
use std::sync::Mutex;

/// The process on whose behalf an operation runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Caller {
    /// User id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
    /// Supplementary groups.
    pub groups: Vec<u32>,
    /// Process id (0 = none: no job id is looked up).
    pub pid: u32,
    /// The process's umask, when the caller leaves it to the MDT (see
    /// [`ReqCtx::umask`]); `None`: modes given are already cut by it.
    pub umask: Option<u32>,
}

impl Caller {
    /// The current process, with its real uid/gid and groups: what tools
    /// that use the library directly act as.
    pub fn current() -> Caller {
        Caller {
            uid: nix::unistd::getuid().as_raw(),
            gid: nix::unistd::getgid().as_raw(),
            groups: nix::unistd::getgroups()
                .map(|g| g.into_iter().map(|g| g.as_raw()).collect())
                .unwrap_or_default(),
            pid: std::process::id(),
            umask: None,
        }
    }
}

impl Caller {
    /// A caller the kernel named by uid, gid and pid (a FUSE request), with
    /// the process's supplementary groups read from `/proc/PID/status`
    /// (see [`GroupsCache`]); root needs none.
    pub fn of_process(uid: u32, gid: u32, pid: u32, groups: &GroupsCache) -> Caller {
        let groups = if uid == 0 {
            Vec::new()
        } else {
            groups.groups(pid, uid, gid)
        };
        Caller {
            uid,
            gid,
            groups,
            pid,
            umask: None,
        }
    }
}

/// The supplementary groups in a `/proc/PID/status` image: the numbers
/// on its `Groups:` line.
pub fn parse_status_groups(status: &str) -> Vec<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .map(|g| {
            g.split_whitespace()
                .filter_map(|n| n.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// How long a process's groups are trusted once read: a process rarely
/// changes its groups (a login daemon's setgroups before exec), and a
/// read of /proc per request would cost more than the request.
const GROUPS_TTL: std::time::Duration = std::time::Duration::from_secs(1);

/// Supplementary groups of the processes that make FUSE requests (the
/// kernel sends only uid, gid and pid), cached per (pid, uid, gid) for
/// [`GROUPS_TTL`]: a reused pid with other ids is read afresh.
#[derive(Debug, Default)]
pub struct GroupsCache {
    map: Mutex<HashMap<ProcessIds, (std::time::Instant, Vec<u32>)>>,
}

/// (pid, uid, gid) of a calling process.
type ProcessIds = (u32, u32, u32);

impl GroupsCache {
    /// The groups of process `pid` (empty if it is gone or unreadable).
    pub fn groups(&self, pid: u32, uid: u32, gid: u32) -> Vec<u32> {
        let now = std::time::Instant::now();
        {
            let m = self.map.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((at, g)) = m.get(&(pid, uid, gid)) {
                if now.duration_since(*at) < GROUPS_TTL {
                    return g.clone();
                }
            }
        }
        let g = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .map(|s| parse_status_groups(&s))
            .unwrap_or_default();
        let mut m = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if m.len() >= JOBID_CACHE_MAX {
            m.retain(|_, (at, _)| now.duration_since(*at) < GROUPS_TTL);
            if m.len() >= JOBID_CACHE_MAX {
                m.clear();
            }
        }
        m.insert((pid, uid, gid), (now, g.clone()));
        g
    }
}

/// The value of `var` in a `/proc/PID/environ` image (NUL-separated
/// `NAME=value` strings); `None` if it is not set.
pub fn parse_environ(environ: &[u8], var: &str) -> Option<String> {
    environ
        .split(|b| *b == 0)
        .filter_map(|kv| kv.strip_prefix(var.as_bytes()))
        .find_map(|rest| rest.strip_prefix(b"="))
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

/// Cached pids past this many are forgotten at once: pids are reused, and a
/// long-running mount sees many short processes.
const JOBID_CACHE_MAX: usize = 4096;

/// The variables of the common batch schedulers, tried after the one
/// configured: Slurm, PBS/Torque, LSF, Grid Engine.
pub const JOB_VARS: [&str; 4] = ["SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "JOB_ID"];

/// How long a process's job id is trusted once read: a pid reused by
/// another process gets its own after this.
pub const JOBID_TTL: std::time::Duration = std::time::Duration::from_secs(30);

/// Builds the [`ReqCtx`] of each request.
#[derive(Debug)]
pub struct CtxFactory {
    client_id: u64,
    jobid_var: String,
    jobids: Mutex<HashMap<u32, (std::time::Instant, String)>>,
}

impl CtxFactory {
    /// A factory with a random client id.
    pub fn new(jobid_var: &str) -> CtxFactory {
        CtxFactory {
            client_id: rand::random(),
            jobid_var: jobid_var.to_string(),
            jobids: Mutex::new(HashMap::new()),
        }
    }

    /// This client's id.
    pub fn client_id(&self) -> u64 {
        self.client_id
    }

    /// A context for one new request by `c` (the router gives each call a new sequence
    /// number; a resend reuses the context it was first sent with).
    pub fn ctx(&self, c: &Caller) -> ReqCtx {
        ReqCtx {
            client_id: self.client_id,
            // Set by the router when the request is sent.
            seq: 0,
            acked_below: 0,
            jobid: self.jobid(c.pid, c.uid),
            uid: c.uid,
            gid: c.gid,
            groups: c.groups.clone(),
            step_of: None,
            umask: c.umask,
            fileset: None,
        }
    }

    /// The job id of process `pid` run by `uid`: its scheduler's job id,
    /// else `PROCNAME.UID`; empty when job ids are off (an empty
    /// `jobid_var`), for pid 0, or for a process that is gone.
    pub fn jobid(&self, pid: u32, uid: u32) -> String {
        if pid == 0 || self.jobid_var.is_empty() {
            return String::new();
        }
        let now = std::time::Instant::now();
        {
            let cache = self.jobids.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((at, j)) = cache.get(&pid) {
                if now.duration_since(*at) < JOBID_TTL {
                    return j.clone();
                }
            }
        }
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let vars = std::iter::once(self.jobid_var.as_str()).chain(JOB_VARS);
        let j = vars
            .filter_map(|v| parse_environ(&env, v))
            .find(|j| !j.is_empty())
            .or_else(|| {
                let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
                Some(format!("{}.{uid}", comm.trim_end()))
            })
            .unwrap_or_default();
        let mut cache = self.jobids.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= JOBID_CACHE_MAX {
            cache.retain(|_, (at, _)| now.duration_since(*at) < JOBID_TTL);
            if cache.len() >= JOBID_CACHE_MAX {
                cache.clear();
            }
        }
        cache.insert(pid, (now, j.clone()));
        j
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobid_is_found_among_other_variables() {
        let env = b"PATH=/bin\0SLURM_JOB_ID=4242\0HOME=/root\0";
        assert_eq!(parse_environ(env, "SLURM_JOB_ID").as_deref(), Some("4242"));
    }

    #[test]
    fn a_variable_whose_name_only_starts_alike_does_not_match() {
        let env = b"SLURM_JOB_ID_X=1\0SLURM_JOB=2\0";
        assert_eq!(parse_environ(env, "SLURM_JOB_ID"), None);
        assert_eq!(parse_environ(env, "SLURM_JOB").as_deref(), Some("2"));
    }

    #[test]
    fn empty_value_and_missing_trailing_nul_are_handled() {
        assert_eq!(parse_environ(b"A=\0B=x", "A").as_deref(), Some(""));
        assert_eq!(parse_environ(b"A=\0B=x", "B").as_deref(), Some("x"));
        assert_eq!(parse_environ(b"", "A"), None);
    }

    #[test]
    fn contexts_carry_the_caller_and_the_client_id() {
        let f = CtxFactory::new("SLURM_JOB_ID");
        let c = Caller {
            uid: 1000,
            gid: 100,
            groups: vec![4, 24],
            pid: 0,
            umask: None,
        };
        let a = f.ctx(&c);
        let b = f.ctx(&c);
        assert_eq!(a.client_id, f.client_id());
        assert_eq!(b.client_id, a.client_id);
        assert_eq!((a.uid, a.gid, a.groups.clone()), (1000, 100, vec![4, 24]));
        assert_eq!(a.jobid, "");
    }

    #[test]
    fn jobid_of_this_process_comes_from_its_environment() {
        // Read our own environ with a variable that is surely set.
        let f = CtxFactory::new("PATH");
        let want = std::env::var("PATH").unwrap_or_default();
        assert_eq!(f.jobid(std::process::id(), 0), want);
    }

    #[test]
    fn without_a_job_variable_the_jobid_is_procname_dot_uid() {
        let unset = "LOOM_SURELY_UNSET_VARIABLE_X";
        let f = CtxFactory::new(unset);
        let scheduler = JOB_VARS.iter().find_map(|v| std::env::var(v).ok());
        let comm = std::fs::read_to_string("/proc/self/comm").expect("comm");
        let want = scheduler.unwrap_or_else(|| format!("{}.1234", comm.trim_end()));
        assert_eq!(f.jobid(std::process::id(), 1234), want);
        let off = CtxFactory::new("");
        assert_eq!(off.jobid(std::process::id(), 1234), "", "job ids off");
    }

    #[test]
    fn supplementary_groups_come_from_the_status_groups_line() {
        let st = "Name:\tbash\nUid:\t1000\t1000\t1000\t1000\nGroups:\t4 24 1000 \nNgid:\t0\n";
        assert_eq!(parse_status_groups(st), vec![4, 24, 1000]);
        assert_eq!(parse_status_groups("Groups:\t\n"), Vec::<u32>::new());
        let cache = GroupsCache::default();
        let me = std::process::id();
        let mine = nix::unistd::getgroups()
            .map(|g| g.into_iter().map(|g| g.as_raw()).collect::<Vec<_>>())
            .unwrap_or_default();
        let mut got = cache.groups(me, 1, 1);
        got.sort_unstable();
        let mut want = mine;
        want.sort_unstable();
        want.dedup();
        assert_eq!(got, want);
    }

    #[test]
    fn unreadable_process_gives_an_empty_jobid() {
        let f = CtxFactory::new("PATH");
        assert_eq!(f.jobid(u32::MAX - 1, 0), "");
    }
}
