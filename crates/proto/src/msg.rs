//! Request and reply bodies.
//!
//! A request body is a postcard-encoded [`Envelope`]; a reply body is a
//! postcard-encoded [`Reply`] or, when the header's ERROR flag is set, a
//! [`crate::WireError`]. The header's opcode is [`Request::opcode`], an
//! explicit number checked against the decoded variant. Variants and opcodes
//! are append-only: never renumber, never reuse, only retire.

use crate::error::{Errno, WireError};
use crate::fid::Fid;
use crate::layout::{Layout, ObjRef, StripeSpec};
use crate::name::Name;
use serde::{Deserialize, Serialize};

pub use crate::requests::{
    ClientRequest, Effect, KvCopy, MdtRequest, MgsRequest, Op, OstRequest, PeerRequest, Request,
    Senders,
};

/// The role of a target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Role {
    /// Management service.
    Mgs,
    /// Metadata target.
    Mdt,
    /// Object storage target.
    Ost,
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Role::Mgs => "MGS",
            Role::Mdt => "MDT",
            Role::Ost => "OST",
        })
    }
}

/// Names one target within a file system.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TargetId {
    /// What it is.
    pub role: Role,
    /// Its index among targets of that role.
    pub index: u32,
}

impl TargetId {
    /// The MGS (there is one).
    pub const MGS: TargetId = TargetId {
        role: Role::Mgs,
        index: 0,
    };
    /// MDT number `i`.
    pub fn mdt(i: u32) -> TargetId {
        TargetId {
            role: Role::Mdt,
            index: i,
        }
    }
    /// OST number `i`.
    pub fn ost(i: u32) -> TargetId {
        TargetId {
            role: Role::Ost,
            index: i,
        }
    }
}

impl std::fmt::Display for TargetId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{:04x}", self.role, self.index)
    }
}

/// Who is asking, carried in every request so that later work (resend
/// detection, per-job statistics, permission checks, nodemaps) needs no
/// format change.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReqCtx {
    /// Random per client instance.
    pub client_id: u64,
    /// Per-client request sequence, for recognising resends: a resend
    /// carries the sequence of its first sending. 0: not resendable (a
    /// server's own requests), never cached.
    pub seq: u64,
    /// Every request of this client with a lower sequence has had its
    /// reply: servers may forget their cached replies below it.
    pub acked_below: u64,
    /// The job this request belongs to (SLURM_JOB_ID by default).
    pub jobid: String,
    /// Caller's uid.
    pub uid: u32,
    /// Caller's gid.
    pub gid: u32,
    /// Caller's supplementary groups.
    pub groups: Vec<u32>,
    /// Set by an MDT on the steps it asks of other MDTs for a client's
    /// change (the rest of the context is that client's): what the
    /// change records in the changelog, so that each MDT it touches
    /// records its part.
    pub step_of: Option<crate::changelog::ChangeKind>,
    /// The caller's umask, from a client that leaves it to the MDT (a
    /// mount with POSIX ACLs): a create's mode is then the one asked for,
    /// and the MDT cuts it by the umask, or instead by the directory's
    /// default ACL if it has one. `None`: the mode is already cut.
    pub umask: Option<u32>,
    /// The subtree the caller is confined to, set by the server process
    /// from the client's nodemap (`loom_proto::nodemap::Fileset`); never
    /// sent, so no client can set it.
    #[serde(skip)]
    pub fileset: Option<Fid>,
}

/// A request body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    /// The target on the receiving server that must handle it.
    pub target: TargetId,
    /// The caller.
    pub ctx: ReqCtx,
    /// The operation.
    pub req: Request,
    /// The capability of the object a client's OST request touches
    /// (`loom_proto::capa`); `None` otherwise.
    pub capa: Option<crate::capa::Capa>,
    /// The snapshot whose image of the target is asked (read-only; see
    /// `crate::snapshot`); `None`: the target itself.
    pub snapshot: Option<u32>,
}

/// File types, as the kernel knows them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum FileKind {
    /// Regular file.
    File,
    /// Directory.
    Dir,
    /// Symbolic link.
    Symlink,
    /// Named pipe.
    Fifo,
    /// Character device.
    CharDev,
    /// Block device.
    BlockDev,
    /// Unix socket.
    Socket,
}

impl FileKind {
    /// The S_IFMT bits of this kind.
    pub fn mode_bits(self) -> u32 {
        match self {
            FileKind::File => 0o100000,
            FileKind::Dir => 0o040000,
            FileKind::Symlink => 0o120000,
            FileKind::Fifo => 0o010000,
            FileKind::CharDev => 0o020000,
            FileKind::BlockDev => 0o060000,
            FileKind::Socket => 0o140000,
        }
    }

    /// The kind named by the S_IFMT bits of `mode`.
    pub fn from_mode(mode: u32) -> Option<FileKind> {
        Some(match mode & 0o170000 {
            0o100000 => FileKind::File,
            0o040000 => FileKind::Dir,
            0o120000 => FileKind::Symlink,
            0o010000 => FileKind::Fifo,
            0o020000 => FileKind::CharDev,
            0o060000 => FileKind::BlockDev,
            0o140000 => FileKind::Socket,
            _ => return None,
        })
    }
}

/// Seconds and nanoseconds since the epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Time {
    /// Seconds.
    pub sec: i64,
    /// Nanoseconds, < 1e9.
    pub nsec: u32,
}

impl Time {
    /// The current time.
    pub fn now() -> Time {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Time {
            sec: d.as_secs() as i64,
            nsec: d.subsec_nanos(),
        }
    }
}

/// Inode attributes as the MDT holds them. Size and mtime live here (the
/// writer updates them), so a stat never asks the OSTs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attr {
    /// Identity.
    pub fid: Fid,
    /// Type.
    pub kind: FileKind,
    /// Permission bits (07777), without the type bits.
    pub perm: u32,
    /// Hard links.
    pub nlink: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Size in bytes.
    pub size: u64,
    /// Last access.
    pub atime: Time,
    /// Last data change.
    pub mtime: Time,
    /// Last inode change.
    pub ctime: Time,
    /// Device number for device files.
    pub rdev: u32,
    /// Project id for project quotas.
    pub projid: u32,
}

/// A time a setattr sets: the server's clock now, or a given time. POSIX
/// lets a writer set times to now (`touch`), but only the owner set them
/// to a given time (`touch -d`, `cp -p`), so the two must stay apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SetTime {
    /// The MDT's current time.
    Now,
    /// This time.
    At(Time),
}

/// Which attributes a setattr changes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetAttr {
    /// New permission bits.
    pub perm: Option<u32>,
    /// New owner.
    pub uid: Option<u32>,
    /// New group.
    pub gid: Option<u32>,
    /// New size (truncate); the client has already resized the objects.
    pub size: Option<u64>,
    /// New access time.
    pub atime: Option<SetTime>,
    /// New modification time.
    pub mtime: Option<SetTime>,
    /// A write by this caller is about to change the file: clear its
    /// set-user-ID bit, and set-group-ID when group-executable, unless the
    /// caller is root (POSIX: a write by a non-privileged user).
    pub kill_suid: bool,
    /// The size change goes through a handle the caller opened for writing
    /// (ftruncate, open with O_TRUNC): permission was checked at the open,
    /// as POSIX has it, so it is not checked again against the mode now.
    pub by_write_handle: bool,
    /// End of data the caller wrote through its open handles and has not
    /// reported yet: the size first grows to at least this, as by
    /// `UpdateSize` (regular files only). Sent with explicit times, which
    /// would otherwise need that report as a round trip of its own before
    /// them (`tar` and `cp -p` set the times of a file they just wrote).
    pub written: Option<u64>,
}

/// One directory entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirEntry {
    /// Name within the directory.
    pub name: Name,
    /// Its inode's attributes (readdirplus).
    pub attr: Attr,
    /// Cookie to resume listing after this entry.
    pub cookie: u64,
}

/// Registration record of one target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetInfo {
    /// Role and index.
    pub id: TargetId,
    /// Set by `loom format`; a different uuid for the same index is refused.
    pub uuid: String,
    /// Address of the server that hosts it (of a replicated target: its
    /// primary's).
    pub addr: String,
    /// A replicated target: bumped each time another replica becomes its
    /// primary (0: not replicated).
    #[serde(default)]
    pub term: u64,
    /// A replicated target: which replica is its primary.
    #[serde(default)]
    pub primary: u32,
    /// A replicated target's copies, by number (empty: not replicated).
    #[serde(default)]
    pub replicas: Vec<crate::replica::Replica>,
}

impl TargetInfo {
    /// An unreplicated target at `addr`.
    pub fn single(id: TargetId, uuid: &str, addr: &str) -> TargetInfo {
        TargetInfo {
            id,
            uuid: uuid.to_string(),
            addr: addr.to_string(),
            term: 0,
            primary: 0,
            replicas: Vec::new(),
        }
    }
}

/// One FLDB entry: sequences [start, end) belong to an MDT.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeqRange {
    /// First sequence.
    pub start: u64,
    /// One past the last.
    pub end: u64,
    /// Owning MDT index.
    pub mdt: u32,
}

/// What a client or server learns from the MGS.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterConfig {
    /// File system name.
    pub fsname: String,
    /// Bumped on every change.
    pub generation: u64,
    /// Every registered target.
    pub targets: Vec<TargetInfo>,
    /// The FID location database.
    pub fldb: Vec<SeqRange>,
    /// What the site set (`loom set-param`).
    pub params: SiteParams,
    /// What the servers make of each client network's requests (`loom
    /// nodemap`).
    pub nodemaps: Vec<crate::nodemap::Nodemap>,
    /// The OST pools, by name (`loom pool`).
    pub pools: Vec<crate::pool::OstPool>,
}

/// Settings of a site, kept by the MGS and read by every target with the
/// configuration (so a change reaches them within seconds, live).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SiteParams {
    /// Who besides root may make remote and striped directories (`loom
    /// mkdir -i/-c`, `setdirstripe`), as Lustre's
    /// `enable_remote_dir_gid`: `None` every user (the default), `Some(g)`
    /// the members of group `g` (0: root only).
    #[serde(default)]
    pub remote_dir_gid: Option<u32>,
}

impl SiteParams {
    /// The parameters `set` knows, with what each takes.
    pub const KNOWN: &'static [(&'static str, &'static str)] = &[(
        "remote_dir_gid",
        "who besides root makes remote and striped directories: all (-1), or a group id (0: root only)",
    )];

    /// Set `name` to `value`, as `loom set-param NAME=VALUE` gives them.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        match name {
            "remote_dir_gid" => {
                self.remote_dir_gid = match value.trim() {
                    "all" | "-1" => None,
                    v => Some(v.parse().map_err(|_| {
                        format!("remote_dir_gid: {v:?} is neither -1 (all) nor a group id")
                    })?),
                };
                Ok(())
            }
            other => Err(format!(
                "no parameter {other:?}; known: {}",
                Self::KNOWN
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }

    /// Each parameter and its value, as `loom get-param` shows them.
    pub fn show(&self) -> Vec<(&'static str, String)> {
        vec![(
            "remote_dir_gid",
            self.remote_dir_gid
                .map_or_else(|| "-1".to_string(), |g| g.to_string()),
        )]
    }
}

impl ClusterConfig {
    /// The registration of `id`.
    pub fn target(&self, id: TargetId) -> Option<&TargetInfo> {
        self.targets.iter().find(|t| t.id == id)
    }

    /// Indices of targets of `role`, sorted.
    pub fn indices(&self, role: Role) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .targets
            .iter()
            .filter(|t| t.id.role == role)
            .map(|t| t.id.index)
            .collect();
        v.sort_unstable();
        v
    }

    /// The MDT that owns `fid`.
    pub fn mdt_of(&self, fid: Fid) -> Option<u32> {
        if fid.seq == 0 {
            return Some(0);
        }
        self.fldb
            .iter()
            .find(|r| r.start <= fid.seq && fid.seq < r.end)
            .map(|r| r.mdt)
    }
}

/// What one job (or client) did on one target, as `loom jobstats` shows
/// it (Lustre's `job_stats`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobUsage {
    /// The job id (or, for a client, its id in hex).
    pub job: String,
    /// Requests by operation name, sorted.
    pub ops: Vec<(String, u64)>,
    /// Microseconds those requests took, in all, by operation, in the
    /// same order (Lustre's job_stats `sum`).
    pub usecs: Vec<(String, u64)>,
    /// Bytes read (sent back in replies' bulk).
    pub read_bytes: u64,
    /// Bytes written (received as requests' bulk).
    pub write_bytes: u64,
}

/// One operation's figures on one target since it started (`loom stats`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpUsage {
    /// The operation's declared name.
    pub op: String,
    /// Requests served.
    pub count: u64,
    /// Of which answered with an error.
    pub errors: u64,
    /// Bulk bytes received (written).
    pub bytes_in: u64,
    /// Bulk bytes sent (read).
    pub bytes_out: u64,
    /// Microseconds spent serving them, in all.
    pub micros: u64,
}

/// What `loom fsck` reads of an MDT's namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FsckScan {
    /// Its inode records.
    Inodes,
    /// Its directory entries.
    Entries,
    /// Its open-unlinked files (kept with no name while a client has them
    /// open).
    Orphans,
}

/// One record of an MDT's namespace, as `loom fsck` reads it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FsckItem {
    /// An inode.
    Inode {
        /// Its FID.
        fid: Fid,
        /// Its type.
        kind: FileKind,
        /// Its link count.
        nlink: u32,
        /// Its size.
        size: u64,
        /// Its parent (directories).
        parent: Fid,
        /// Its shards, for a striped directory (shard 0 is itself).
        shards: Vec<Fid>,
    },
    /// A directory entry.
    Entry {
        /// The directory (or shard) holding it.
        parent: Fid,
        /// Its name.
        name: Name,
        /// The inode it names.
        fid: Fid,
        /// That inode's type, as the entry records it.
        kind: FileKind,
    },
    /// An open-unlinked file.
    Orphan {
        /// Its FID.
        fid: Fid,
    },
}

/// A repair `loom fsck --repair` asks of an MDT.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FsckFix {
    /// Remove entry `name` of `parent`: the inode it names does not exist,
    /// or the entry is in the wrong shard (a directory's removal takes
    /// one link of `parent`).
    DropEntry {
        /// The directory (or shard) on this MDT.
        parent: Fid,
        /// The entry.
        name: Name,
    },
    /// Set the link count of `fid` (on this MDT).
    SetNlink {
        /// The inode.
        fid: Fid,
        /// Its link count.
        nlink: u32,
    },
    /// Give inode `fid`, which no entry names, the entry `name` in `dir`
    /// (both on this MDT): Lustre's lost+found.
    Adopt {
        /// The inode.
        fid: Fid,
        /// The directory.
        dir: Fid,
        /// The new entry.
        name: Name,
    },
    /// Add entry `name`, naming `fid` of type `kind` (anywhere), to
    /// `parent` on this MDT: the shard of a striped directory that its
    /// name hashes to, for an entry found in another shard (whose entry
    /// `DropEntry` then removes).
    PutEntry {
        /// The directory or shard on this MDT.
        parent: Fid,
        /// The entry.
        name: Name,
        /// The inode it names.
        fid: Fid,
        /// That inode's type.
        kind: FileKind,
    },
    /// Set directory `fid`'s parent (its `..`, on this MDT) to `parent`,
    /// the directory whose entry names it.
    SetParent {
        /// The directory.
        fid: Fid,
        /// Its parent.
        parent: Fid,
    },
}

/// An object on an OST's disk, as `loom fsck` lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjInfo {
    /// Its id.
    pub oid: u64,
    /// Its size in bytes.
    pub size: u64,
    /// Seconds since it was last written (its file's mtime).
    pub idle_secs: u64,
}

/// What `loom scrub` asks of a target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScrubCmd {
    /// Start a pass, or resume the one under way, reading at most
    /// `rate_mib` MiB/s (0: as fast as the disk goes); a pass already
    /// running takes the new rate.
    Start {
        /// MiB/s.
        rate_mib: u32,
    },
    /// Only report.
    Status,
    /// Stop the pass under way (a later start resumes it).
    Stop,
}

/// A block or record that failed its checksum.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// The object (OST; 0 on an MDT).
    pub oid: u64,
    /// Offset of the block in the object.
    pub offset: u64,
    /// The record, as `keyspace/key in hex` (MDT; empty on an OST).
    pub record: String,
    /// Found by scrub (else by a client's read).
    pub by_scrub: bool,
    /// When, in seconds since the Unix epoch.
    pub when: u64,
}

/// A target's scrub: the pass under way or the last one, and every bad
/// block or record known (from scrub and from reads), until a pass finds
/// it good.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScrubStatus {
    /// A pass is running.
    pub running: bool,
    /// Its rate limit, MiB/s (0: none).
    pub rate_mib: u32,
    /// Objects (OST) or records (MDT) checked by the current (or last)
    /// pass.
    pub checked_objects: u64,
    /// Bytes checked by it.
    pub checked_bytes: u64,
    /// Bytes the target held when the pass started.
    pub total_bytes: u64,
    /// Passes finished since the target was formatted.
    pub passes: u64,
    /// When the current (or last) pass started, Unix seconds (0: never).
    pub started: u64,
    /// When the last pass finished, Unix seconds (0: never).
    pub finished: u64,
    /// Bad blocks known, oldest first (the list is bounded).
    pub findings: Vec<Finding>,
    /// Reads answered EIO for a bad block or record since the target
    /// started.
    pub read_errors: u64,
}

/// Space and inode usage of one target.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatFs {
    /// Target.
    pub target: Option<TargetId>,
    /// Total bytes.
    pub bytes_total: u64,
    /// Free bytes.
    pub bytes_free: u64,
    /// Bytes available to users.
    pub bytes_avail: u64,
    /// Total inodes (or objects).
    pub files_total: u64,
    /// Free inodes.
    pub files_free: u64,
    /// Bytes of compressed objects' data as written (an OST's; 0
    /// elsewhere).
    pub packed_logical: u64,
    /// Bytes those take on the target's disk (in 4 KiB blocks).
    pub packed_stored: u64,
    /// Whether the OST has finished counting the compressed objects it
    /// found at start (the two figures above are partial until then).
    pub packed_counted: bool,
}

/// How often a client renews the leases of the orphans it holds (see
/// `MdtRequest::RenewOrphans`).
pub const ORPHAN_RENEW: std::time::Duration = std::time::Duration::from_secs(60);
/// How long an MDT keeps an orphan whose lease is not renewed.
pub const ORPHAN_LEASE: std::time::Duration = std::time::Duration::from_secs(600);

/// rename(2) flags, as Linux numbers them.
pub mod rename_flags {
    /// Fail if the destination exists.
    pub const NOREPLACE: u32 = 1;
    /// Swap source and destination.
    pub const EXCHANGE: u32 = 2;
}

/// Access bits of an open or a permission check, as access(2) numbers
/// them.
pub mod access {
    /// Read (R_OK).
    pub const READ: u32 = 4;
    /// Write (W_OK).
    pub const WRITE: u32 = 2;
    /// Execute or search (X_OK).
    pub const EXEC: u32 = 1;
}

/// setxattr(2) flags.
pub mod xattr_flags {
    /// Fail if the attribute exists.
    pub const CREATE: u32 = 1;
    /// Fail if it does not.
    pub const REPLACE: u32 = 2;
}

/// Where a directory's new subdirectories go, and theirs in turn
/// (`loom setdirstripe -D`, Lustre's default LMV): copied into each new
/// subdirectory, so it holds down the tree until set again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirDefault {
    /// Shards of each new directory (1: not striped).
    pub count: u32,
    /// MDTs to use: empty, each new directory goes to the MDT chosen
    /// round robin, weighted by free inodes and space (`-i -1`); one, the
    /// first shard goes there and the others on the next MDTs (`-i N`);
    /// several, new directories take them round robin (`-i 0,4,8`).
    pub mdts: Vec<u32>,
    /// How a striped directory maps names to shards.
    pub hash: crate::layout::DirHash,
}

impl DirDefault {
    /// Check a user-supplied default against the file system's MDTs.
    pub fn validate(&self, mdts: &[u32]) -> Result<(), String> {
        if self.count == 0 || self.count as usize > mdts.len() {
            return Err(format!(
                "directory stripe count {} is invalid: the file system has {} MDTs",
                self.count,
                mdts.len()
            ));
        }
        if let Some(m) = self.mdts.iter().find(|m| !mdts.contains(m)) {
            return Err(format!(
                "MDT index {m} is not in the file system (MDTs: {mdts:?})"
            ));
        }
        if self.mdts.len() > 1 && (self.count as usize) > self.mdts.len() {
            return Err(format!(
                "{} shards cannot be placed on the {} MDTs listed",
                self.count,
                self.mdts.len()
            ));
        }
        Ok(())
    }
}

/// Where a new directory's shards go (`loom mkdir -i`, `loom setdirstripe`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirStripe {
    /// Number of shards; 1 is a plain directory (a remote one when
    /// `start_mdt` names an MDT other than the parent's).
    pub count: u32,
    /// MDT of the master inode (shard 0); the other shards follow on the
    /// next MDTs in index order. -1: the parent's MDT.
    pub start_mdt: i32,
}

/// Names one participant's part of a cross-MDT operation: the
/// coordinating MDT, its intent record, and the part's index (a shard).
/// A participant keeps what it did under this name, so a step that is
/// sent again is not done twice and can be undone after a crash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct IntentRef {
    /// Index of the coordinating MDT.
    pub coord: u32,
    /// Its intent record.
    pub id: u64,
    /// Which part.
    pub index: u32,
}

/// A directory object one MDT makes for another: a remote directory, a
/// shard of a striped directory, or (with `others`) its master.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirObject {
    /// The directory it is named in (its "..").
    pub parent: Fid,
    /// Permission bits.
    pub perm: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Creation time, the same for every shard.
    pub time: Time,
    /// The parent's effective default file striping.
    pub default_stripe: Option<StripeSpec>,
    /// For a master: shards 1.. of the directory.
    pub others: Option<Vec<Fid>>,
    /// The parent's default placement of subdirectories, inherited.
    pub default_dir: Option<DirDefault>,
    /// The parent's effective default compression of new files' data.
    pub default_compress: Option<crate::compress::Compress>,
    /// Project id (the parent's, when it passes it on; a shard's
    /// directory's own).
    pub projid: u32,
    /// Whether new entries take the project id (as the parent's flag).
    pub proj_inherit: bool,
    /// Access ACL, inherited from the parent's default ACL.
    pub acl: Option<crate::acl::Acl>,
    /// Default ACL, the parent's.
    pub default_acl: Option<crate::acl::Acl>,
}

/// An inode one MDT hands to another (`PeerRequest::AdoptInodes`): its
/// record as the sender stores it (the receiver checks and decodes it) and
/// its extended attributes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MovedInode {
    /// Its FID, which it keeps.
    pub fid: Fid,
    /// The MDT's inode record, encoded.
    pub record: Vec<u8>,
    /// Extended attributes: name, value.
    pub xattrs: Vec<(Name, Vec<u8>)>,
}

/// An acknowledged change, as a client keeps it until it is committed and
/// replays it to a restarted MDT: the request as first sent, and the reply
/// whose results (new FIDs, layouts, times) the replay must reproduce.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replayed {
    /// Its transaction number on the MDT.
    pub transno: u64,
    /// The context it was sent with (client, sequence, credentials).
    pub ctx: ReqCtx,
    /// The request.
    pub req: MdtRequest,
    /// The reply it got.
    pub reply: Reply,
}

/// One change of a batch (`MdtRequest::Batch`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Batched {
    /// Its own sequence number: the key of its reply in the reply cache,
    /// and of its replay.
    pub seq: u64,
    /// The change.
    pub req: MdtRequest,
}

/// The answer to one change of a batch (`Reply::Batch`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchResult {
    /// Its answer, as if it had been sent alone.
    pub result: Result<Reply, crate::WireError>,
    /// Its commit state (its transaction number).
    pub commit: Option<Commit>,
}

/// The commit state an MDT's reply to a client carries (Lustre's transno
/// and last_committed): the frame's COMMIT flag puts it before the body.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Commit {
    /// The MDT's instance: random at each start, so a client sees a restart.
    pub boot: u64,
    /// The change's transaction number (0: the request changed nothing).
    pub transno: u64,
    /// Every change up to this number is on stable storage.
    pub last_committed: u64,
    /// The last number committed when this instance started: a change an
    /// earlier instance acknowledged is committed if its number is at most
    /// this, and was lost in a crash (unless replayed) if above.
    pub started_at: u64,
    /// The answer grants the client the leases it implies
    /// (`lease::granted_by_read`, `lease::granted_by_change`).
    pub leased: bool,
}

/// One entry a `loom find` scan returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Found {
    /// The directory object it is in (a directory, or a shard of a
    /// striped one).
    pub dir: Fid,
    /// Its name.
    pub name: crate::Name,
    /// The inode it names.
    pub fid: Fid,
    /// That inode's kind.
    pub kind: FileKind,
    /// Whether the query holds; `None`: the inode is on another MDT, for
    /// the client to test.
    pub matched: Option<bool>,
    /// For a striped directory kept here: its shards, in order.
    pub shards: Vec<Fid>,
}

/// Largest policy report the MGS keeps (`MgsRequest::PolicyPublish`).
pub const MAX_POLICY_REPORT: usize = 1 << 20;

/// One entry of the policy engine's scan (`MdtRequest::CatalogScan`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scanned {
    /// The directory object it is in (a directory, or a shard of a
    /// striped one).
    pub dir: Fid,
    /// Its name.
    pub name: crate::Name,
    /// The inode it names.
    pub fid: Fid,
    /// That inode's kind.
    pub kind: FileKind,
    /// The inode's attributes and layout, if the scanning MDT keeps it
    /// (else the client asks the MDT that does).
    pub inode: Option<(Attr, Option<Layout>)>,
}

/// Every reply body (the success half).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reply {
    /// Done; nothing to return.
    Ok,
    /// Configuration.
    Config(ClusterConfig),
    /// A new sequence range for the asking MDT.
    Seq(SeqRange),
    /// Attributes of an inode.
    Attr(Attr),
    /// A new or found inode, with its layout if it is a regular file.
    Entry {
        /// Attributes.
        attr: Attr,
        /// Layout for regular files.
        layout: Option<Layout>,
    },
    /// Symlink target.
    Link(Name),
    /// A page of a directory listing.
    Dir {
        /// Entries after the cookie.
        entries: Vec<DirEntry>,
        /// No entries follow.
        eof: bool,
    },
    /// A layout.
    Layout(Layout),
    /// A striping spec (None = none set anywhere up the tree).
    Stripe(Option<StripeSpec>),
    /// An xattr value.
    Xattr(Vec<u8>),
    /// Xattr names.
    XattrNames(Vec<Name>),
    /// Usage.
    StatFs(StatFs),
    /// Object ids [start, start + count) now belong to the asker.
    Precreated {
        /// First id.
        start: u64,
        /// How many.
        count: u32,
    },
    /// Bytes (the data itself is the frame's bulk).
    Data,
    /// A size.
    Size(u64),
    /// Done, and the last link of `fid` is gone while the caller may have
    /// it open: it is kept as an orphan until `ReleaseOrphan` (or until
    /// its lease runs out).
    Orphaned {
        /// The orphan.
        fid: Fid,
    },
    /// The answer to a client's change (`reply`), with what the change
    /// did. Only the answer itself is recorded for resends and kept for
    /// replay; a resend gets it without the effects.
    Changed {
        /// The answer.
        reply: Box<Reply>,
        /// What the change did.
        effects: Effects,
    },
    /// A directory's default layout (None = none set anywhere up the tree).
    LayoutSpec(Option<crate::layout::LayoutSpec>),
    /// Bytes of a Data-on-MDT read, inline.
    Bytes(Vec<u8>),
    /// A directory's default placement of subdirectories (None: none set
    /// on it or above).
    DirDefault(Option<DirDefault>),
    /// Operation counters by name, sorted by name.
    OpStats(Vec<(String, u64)>),
    /// A target's scrub.
    Scrub(ScrubStatus),
    /// OST objects a page of an MDT's records refers to, and where the
    /// next page starts (`None`: this was the last).
    ObjectRefs {
        /// The objects.
        objs: Vec<ObjRef>,
        /// Cursor of the next page.
        next: Option<Vec<u8>>,
    },
    /// The objects of one bucket of an OST.
    Objects(Vec<ObjInfo>),
    /// What a target served: per operation since it started, and per job
    /// and per client recently.
    JobStats {
        /// Per operation.
        ops: Vec<OpUsage>,
        /// Per job.
        jobs: Vec<JobUsage>,
        /// Per client.
        clients: Vec<JobUsage>,
    },
    /// A page of an MDT's namespace, and where the next page starts
    /// (`None`: this was the last).
    FsckPage {
        /// The records.
        items: Vec<FsckItem>,
        /// Cursor of the next page.
        next: Option<Vec<u8>>,
    },
    /// The compression new files in a directory get (`None`: none set on
    /// it or above; `Some(off)`: switched off there).
    Compress(Option<crate::compress::Compress>),
    /// An OST stored a write, and grants the client `grant` more bytes
    /// (see [`crate::grant`]).
    Written {
        /// The OST's instance, random at each start: a grant of an earlier
        /// instance is void (the OST forgot it).
        boot: u64,
        /// Bytes added to the client's grant on this OST.
        grant: u64,
        /// The object's owner is near a block limit on this OST: the
        /// client sends its next writes for that owner here synchronously
        /// (not behind), so that EDQUOT is the write's error.
        quota_near: bool,
    },
    /// An inode as its MDT stores it (`PeerRequest::ReadInode`).
    Inode {
        /// Attributes, as a stat shows them.
        attr: Attr,
        /// Layout (a file's, or a striped directory's shards).
        layout: Option<Layout>,
        /// Parent (a directory's `..`).
        parent: Fid,
        /// Access ACL, for permission checks.
        acl: Option<crate::acl::Acl>,
    },
    /// A directory and one of its entries (`PeerRequest::ReadEntry`).
    EntryOf {
        /// The directory's attributes.
        dir: Attr,
        /// The directory's access ACL, for permission checks.
        dir_acl: Option<crate::acl::Acl>,
        /// The inode the entry names, and its type (`None`: no entry).
        entry: Option<(Fid, FileKind)>,
        /// The directory is being removed: it takes no new entries.
        sealed: bool,
    },
    /// Inode `fid` is no longer on the MDT asked: `loom migrate` moved it
    /// to MDT `mdt`. Ask there (a client remembers it).
    Moved {
        /// The inode the request was routed by.
        fid: Fid,
        /// Where it is now (or the next MDT that knows).
        mdt: u32,
    },
    /// Directory `dir` was restriped: its names now live in the shards
    /// of `layout` (by name hash). The request went to the master for a
    /// name of another shard, or listed the master as if plain; nothing
    /// was done. Send it to the right shard (a listing: every shard).
    Restriped {
        /// The directory (its master).
        dir: Fid,
        /// Its layout now.
        layout: Layout,
    },
    /// What a `Migrate` of one directory did.
    Migrated {
        /// Inodes moved (the directory's own included).
        moved: u64,
        /// Inodes named in it that stayed where they were: on another
        /// MDT, with several links, with Data-on-MDT bytes, or in use
        /// under a lease that could not be taken back. A later run
        /// moves the ones in use.
        stayed: u64,
    },
    /// Changelog records, and the log's state after them.
    Changelog {
        /// Records in order.
        records: Vec<crate::changelog::ChangeRec>,
        /// The log's state when they were read.
        state: crate::changelog::ChangelogState,
    },
    /// The id of a changelog consumer just registered.
    ChangelogUser(u32),
    /// A changelog's state.
    ChangelogState(crate::changelog::ChangelogState),
    /// What a target counts for one id.
    QuotaUsage(crate::quota::QuotaUsage),
    /// A recount of a target: the ids it holds anything of, and where
    /// its counts differ from what it holds (empty: none).
    QuotaCheck {
        /// Ids found by the scan or counted.
        ids: u64,
        /// The differences.
        drift: Vec<crate::quota::QuotaDrift>,
    },
    /// An id's limits (all zero: none), and since when it is over its
    /// soft limits.
    QuotaLimits {
        /// The limits.
        limits: crate::quota::QuotaLimits,
        /// When usage went over the soft inode limit (its grace runs from
        /// then), if it is over it.
        soft_since: Option<Time>,
        /// The same for the soft block limit.
        block_soft_since: Option<Time>,
    },
    /// What the quota master lets an MDT or OST hold of one id.
    QuotaGrant {
        /// Whether the id has limits (else nothing is enforced for it).
        limited: bool,
        /// Inodes (an MDT) or bytes (an OST) the target may hold.
        granted: u64,
    },
    /// An inode's project id, and whether a directory passes it on.
    Project {
        /// The project id.
        projid: u32,
        /// Whether new entries take it.
        inherit: bool,
    },
    /// The answer to a lock request or test.
    Lock(crate::lock::LockAnswer),
    /// Where an append's bytes go: from `offset`, the file's end before.
    Reserved {
        /// First byte of the range.
        offset: u64,
    },
    /// A client's answer to a recall: it has these of the recalled
    /// files open, and holds them at the MDT until its last close there
    /// (`ReleaseOrphan`): removed meanwhile, they are kept as orphans.
    Held {
        /// The files.
        fids: Vec<Fid>,
    },
    /// A capability (`GetCapa`).
    Capa(crate::capa::Capa),
    /// The file system's snapshots (`SnapshotList`), or the one made
    /// (`SnapshotCreate`, alone).
    Snapshots(Vec<crate::snapshot::SnapshotInfo>),
    /// Bytes a snapshot holds on a target (`SnapStep::Usage`).
    Taken(u64),
    /// A migration of a file's data has begun (`MdtRequest::MigrateData`):
    /// what to copy from and to, and how many bytes.
    DataMigrating {
        /// The layout the bytes are in.
        old: Layout,
        /// The layout to copy them to.
        new: Layout,
        /// The file's size.
        size: u64,
    },
    /// A page of an MDT's scan for `loom find` (`MdtRequest::Find`).
    Found {
        /// Matches, directories and entries to test elsewhere, in key
        /// order.
        items: Vec<Found>,
        /// Directories (or shards) whose entries the caller may not
        /// list, withheld.
        denied: Vec<Fid>,
        /// Cursor of the next page (`None`: this was the last).
        next: Option<Vec<u8>>,
    },
    /// `reply`, with the capability for the file it created or opened
    /// (the MDT's answer to `Create` and `Open` of a regular file).
    WithCapa {
        /// The answer.
        reply: Box<Reply>,
        /// The file's capability.
        capa: crate::capa::Capa,
    },
    /// FIDs reserved for the caller (`MdtRequest::GrantFids`): `count`
    /// from `first` on, in its sequence.
    Fids {
        /// The first.
        first: Fid,
        /// How many.
        count: u32,
    },
    /// Per id asked about, how many more inodes it may own on the MDT;
    /// `None` where it has no inode limit (`MdtRequest::QuotaRoom`).
    QuotaRoom {
        /// In the order asked.
        rooms: Vec<(crate::quota::QuotaId, Option<u64>)>,
    },
    /// The answers to a batch's changes, in order, up to the first that
    /// failed or was answered elsewhere (`MdtRequest::Batch`).
    Batch {
        /// One per change done (or the one that ended the batch).
        results: Vec<BatchResult>,
    },
    /// A page of an MDT's scan for the policy engine's catalog
    /// (`MdtRequest::CatalogScan`).
    Scanned {
        /// Entries, in key order.
        items: Vec<Scanned>,
        /// Cursor of the next page (`None`: this was the last).
        next: Option<Vec<u8>>,
    },
    /// The policy engine's latest report, JSON (`MgsRequest::PolicyReport`;
    /// empty: none).
    PolicyReport(String),
    /// Room for Data-on-MDT bytes on an MDT (`MdtRequest::DomRoom`).
    DomRoom {
        /// Bytes free on the MDT above its reserve.
        space: u64,
        /// Per id asked about, in the order asked, how many more bytes of
        /// Data-on-MDT it may own there (`None`: no block limit).
        rooms: Vec<(crate::quota::QuotaId, Option<u64>)>,
    },
    /// Replicated targets as the MGS has them (`MgsRequest::Heartbeat`,
    /// `SetReplica`).
    Members(Vec<TargetInfo>),
    /// The crc32c of each `chunk` bytes of an object's range, and its
    /// size (`OstRequest::ObjDigest`).
    Digest {
        /// The object's size.
        size: u64,
        /// One per chunk, up to the object's end.
        sums: Vec<u32>,
    },
    /// Per range asked, the crc32c of its records (each key's and value's
    /// length and bytes, in key order) and their count
    /// (`KvCopy::Digest`).
    KvSums(Vec<(u32, u64)>),
}

impl Reply {
    /// The answer, and the effects it came with (if any); a capability
    /// that came with it is dropped (a client keeps it before this).
    pub fn split(self) -> (Reply, Option<Effects>) {
        match self {
            Reply::WithCapa { reply, .. } => reply.split(),
            Reply::Changed { reply, effects } => (*reply, Some(effects)),
            r => (r, None),
        }
    }
}

/// What a client's change did on the MDT that answered it, sent with the
/// reply ([`Reply::Changed`]) so that the client can answer a stat or a
/// lookup of what it has just made or changed without asking again, for
/// as long as its kernel would cache the same (see the client's `fresh`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Effects {
    /// Attributes, after the change, of every inode it touched on this
    /// MDT (as a stat shows them).
    pub attrs: Vec<Attr>,
    /// Inodes it removed.
    pub removed: Vec<Fid>,
    /// Names it set (to an inode) or removed (`None`), by directory.
    pub names: Vec<(Fid, Name, Option<Fid>)>,
    /// Those of the touched inodes that have a POSIX ACL (access or
    /// default) after it: what a client cannot know of an inode it made
    /// in a directory with a default ACL.
    pub with_acls: Vec<Fid>,
}

pub use crate::lease::Lease;

/// The result a handler returns.
pub type ReplyResult = Result<Reply, WireError>;

/// Encode a value with postcard.
pub fn encode<T: Serialize>(v: &T) -> Result<Vec<u8>, WireError> {
    postcard::to_stdvec(v).map_err(|e| WireError::new(Errno::EPROTO, format!("encode: {e}")))
}

/// Decode a value from the start of `b`; returns it and the bytes after it.
pub fn decode_prefix<'a, T: Deserialize<'a>>(b: &'a [u8]) -> Result<(T, &'a [u8]), WireError> {
    postcard::take_from_bytes(b).map_err(|e| WireError::new(Errno::EPROTO, format!("decode: {e}")))
}

/// Decode a value with postcard; trailing bytes are an error.
pub fn decode<'a, T: Deserialize<'a>>(b: &'a [u8]) -> Result<T, WireError> {
    let (v, rest) = postcard::take_from_bytes(b)
        .map_err(|e| WireError::new(Errno::EPROTO, format!("decode: {e}")))?;
    if !rest.is_empty() {
        return Err(WireError::new(
            Errno::EPROTO,
            format!("decode: {} trailing bytes", rest.len()),
        ));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_fileset_is_never_on_the_wire() {
        let ctx = ReqCtx {
            uid: 5,
            fileset: Some(Fid::new(9, 9)),
            ..ReqCtx::default()
        };
        let bytes = postcard::to_allocvec(&ctx).expect("encode");
        let back: ReqCtx = postcard::from_bytes(&bytes).expect("decode");
        assert_eq!((back.uid, back.fileset), (5, None));
        assert_eq!(
            bytes,
            postcard::to_allocvec(&ReqCtx {
                fileset: None,
                ..ctx
            })
            .expect("encode"),
            "the same bytes as without one"
        );
    }

    #[test]
    fn envelope_round_trips() {
        let e = Envelope {
            target: TargetId::mdt(3),
            ctx: ReqCtx {
                client_id: 7,
                seq: 9,
                acked_below: 3,
                jobid: "job42".into(),
                uid: 1000,
                gid: 100,
                groups: vec![4, 5],
                step_of: None,
                umask: Some(0o022),
                fileset: None,
            },
            req: Request::Mdt(MdtRequest::Rename {
                parent: Fid::ROOT,
                name: "a".into(),
                new_parent: Fid::new(5, 6),
                new_name: "b".into(),
                flags: rename_flags::NOREPLACE,
                keep_orphan: false,
            }),
            capa: None,
            snapshot: None,
        };
        let b = encode(&e).expect("encode");
        assert_eq!(decode::<Envelope>(&b).expect("decode"), e);
    }

    #[test]
    fn trailing_bytes_are_refused() {
        let mut b = encode(&Reply::Ok).expect("encode");
        b.push(0);
        assert!(decode::<Reply>(&b).is_err());
    }

    proptest! {
        #[test]
        fn decoding_random_bytes_never_panics(b in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode::<Envelope>(&b);
            let _ = decode::<Reply>(&b);
        }
    }
}
