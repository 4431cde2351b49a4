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
}

/// File types, as the kernel knows them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
    /// Address of the server that hosts it.
    pub addr: String,
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
}

/// How often a client renews the leases of the orphans it holds (see
/// `Request::RenewOrphans`).
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
}

/// Every request. Each variant's opcode is given by [`Request::opcode`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Liveness check, any target. Opcode 1.
    Ping,
    /// A server announces a target it hosts. Opcode 10.
    Register {
        /// File system the target was formatted for.
        fsname: String,
        /// The target.
        target: TargetInfo,
    },
    /// Fetch the cluster configuration. Opcode 11.
    GetConfig,
    /// An MDT asks for a new FID sequence. Opcode 12.
    AllocSeq {
        /// The asking MDT.
        mdt: u32,
    },
    /// Find `name` in `parent`. Opcode 20.
    Lookup {
        /// Directory.
        parent: Fid,
        /// Name.
        name: Name,
    },
    /// Attributes of `fid`. Opcode 21.
    GetAttr {
        /// Inode.
        fid: Fid,
    },
    /// Change attributes. Opcode 22.
    SetAttr {
        /// Inode.
        fid: Fid,
        /// What to change.
        set: SetAttr,
    },
    /// Create a non-directory: regular file (with layout), FIFO, device,
    /// socket. Opcode 23.
    Create {
        /// Directory.
        parent: Fid,
        /// Name.
        name: Name,
        /// Type.
        kind: FileKind,
        /// Permission bits after umask.
        perm: u32,
        /// Device number.
        rdev: u32,
        /// Explicit striping (setstripe on a new file), else inherited.
        stripe: Option<StripeSpec>,
    },
    /// Make a directory. Opcode 24.
    Mkdir {
        /// Parent.
        parent: Fid,
        /// Name.
        name: Name,
        /// Permission bits after umask.
        perm: u32,
    },
    /// Remove a non-directory name. Opcode 25.
    Unlink {
        /// Directory.
        parent: Fid,
        /// Name.
        name: Name,
        /// The caller has files open: if this drops the last link of a
        /// file, keep it as an orphan (answer `Orphaned`) until the caller
        /// sends `ReleaseOrphan`.
        keep_orphan: bool,
    },
    /// Remove an empty directory. Opcode 26.
    Rmdir {
        /// Parent.
        parent: Fid,
        /// Name.
        name: Name,
    },
    /// Rename, with `rename_flags`. Opcode 27.
    Rename {
        /// Source directory.
        parent: Fid,
        /// Source name.
        name: Name,
        /// Destination directory.
        new_parent: Fid,
        /// Destination name.
        new_name: Name,
        /// NOREPLACE / EXCHANGE.
        flags: u32,
        /// As `Unlink::keep_orphan`, for a file the rename replaces.
        keep_orphan: bool,
    },
    /// New hard link to `fid`. Opcode 28.
    Link {
        /// Existing inode.
        fid: Fid,
        /// Directory of the new name.
        parent: Fid,
        /// New name.
        name: Name,
    },
    /// Make a symbolic link. Opcode 29.
    Symlink {
        /// Directory.
        parent: Fid,
        /// Name.
        name: Name,
        /// Link target.
        target: Name,
    },
    /// Read a symbolic link. Opcode 30.
    Readlink {
        /// Link inode.
        fid: Fid,
    },
    /// List a directory from `cookie` (0 = start). Opcode 31.
    Readdir {
        /// Directory.
        fid: Fid,
        /// Resume after the entry with this cookie.
        cookie: u64,
        /// Most entries to return.
        max: u32,
    },
    /// A file's layout. Opcode 32.
    GetLayout {
        /// File.
        fid: Fid,
    },
    /// Set a directory's default striping (`setstripe` on a directory). Opcode 33.
    SetDefaultStripe {
        /// Directory.
        fid: Fid,
        /// New default; `None` removes it.
        spec: Option<StripeSpec>,
    },
    /// A directory's default striping, explicit or inherited. Opcode 34.
    GetDefaultStripe {
        /// Directory.
        fid: Fid,
    },
    /// Set an extended attribute. Opcode 35.
    SetXattr {
        /// Inode.
        fid: Fid,
        /// Name.
        name: Name,
        /// Value.
        value: Vec<u8>,
        /// `xattr_flags`.
        flags: u32,
    },
    /// Get an extended attribute. Opcode 36.
    GetXattr {
        /// Inode.
        fid: Fid,
        /// Name.
        name: Name,
    },
    /// List extended attribute names. Opcode 37.
    ListXattr {
        /// Inode.
        fid: Fid,
    },
    /// Remove an extended attribute. Opcode 38.
    RemoveXattr {
        /// Inode.
        fid: Fid,
        /// Name.
        name: Name,
    },
    /// Space and inode usage of a target (MDT or OST). Opcode 39.
    StatFs,
    /// The writer reports data it wrote: size grows to at least `size`,
    /// mtime to at least `mtime` (reports may arrive out of order).
    /// Opcode 40.
    UpdateSize {
        /// File.
        fid: Fid,
        /// End of the data written.
        size: u64,
        /// Time of the last write.
        mtime: Time,
        /// Make the record durable (and everything the MDT applied before
        /// it) before answering: an fsync. Otherwise (a close) it survives
        /// a crash of the MDT's process but not of its machine, as the data
        /// written does until an fsync.
        durable: bool,
    },
    /// Write the bulk data at `offset` of an object. Opcode 50.
    ObjWrite {
        /// Object.
        obj: ObjRef,
        /// Object offset.
        offset: u64,
    },
    /// Read up to `len` bytes; the reply's bulk holds them (short at the
    /// object's end; holes read as zeros). Opcode 51.
    ObjRead {
        /// Object.
        obj: ObjRef,
        /// Object offset.
        offset: u64,
        /// Bytes wanted.
        len: u32,
    },
    /// Set an object's size. Opcode 52.
    ObjTruncate {
        /// Object.
        obj: ObjRef,
        /// New size.
        size: u64,
    },
    /// Deallocate a byte range, keeping the size. Opcode 53.
    ObjPunch {
        /// Object.
        obj: ObjRef,
        /// Start.
        offset: u64,
        /// Length.
        len: u64,
    },
    /// Make an object's data durable. Opcode 54.
    ObjSync {
        /// Object.
        obj: ObjRef,
    },
    /// Reserve `count` new object ids on the OST (for an MDT's pool). Opcode 55.
    Precreate {
        /// How many.
        count: u32,
    },
    /// Destroy objects (after unlink). Opcode 56.
    Destroy {
        /// Objects, all on the receiving OST.
        objs: Vec<ObjRef>,
    },
    /// Size of an object (for tools and checks). Opcode 57.
    ObjGetSize {
        /// Object.
        obj: ObjRef,
    },
    /// The last handle of an orphan (an unlinked file kept for a client
    /// that had it open) closed: destroy it. Opcode 41.
    ReleaseOrphan {
        /// The orphan.
        fid: Fid,
    },
    /// The client still has these orphans open: renew their lease.
    /// Opcode 42.
    RenewOrphans {
        /// Orphans on the receiving MDT.
        fids: Vec<Fid>,
    },
    /// Attributes and layout of `fid`, fresh, for an open: one round trip
    /// where GetAttr and GetLayout would take two. Opcode 43.
    Open {
        /// The inode being opened.
        fid: Fid,
        /// What the opener asks for, checked against the mode bits:
        /// `access::READ | access::WRITE` (0 for a peer that only wants
        /// the attributes).
        access: u32,
    },
    /// Reserve space for a byte range, keeping the size (fallocate with
    /// KEEP_SIZE: later writes there cannot fail for lack of space).
    /// Opcode 58.
    ObjAllocate {
        /// Object.
        obj: ObjRef,
        /// Start.
        offset: u64,
        /// Length.
        len: u64,
    },
    /// Make a directory placed on chosen MDTs: a remote directory
    /// (`count` 1 on another MDT) or a striped one. Sent to the parent's
    /// MDT, which coordinates. Opcode 44.
    MkdirStriped {
        /// Parent.
        parent: Fid,
        /// Name.
        name: Name,
        /// Permission bits after umask.
        perm: u32,
        /// Placement.
        stripe: DirStripe,
    },
    /// MDT to MDT: make a directory object (a remote directory, a shard,
    /// or with `others` the master of a striped directory whose other
    /// shards are `others`) as part `intent`. Done once per part: sent
    /// again, it answers the object made the first time. Opcode 45.
    MakeDirObject {
        /// The part of the coordinator's operation.
        intent: IntentRef,
        /// What to make.
        dir: DirObject,
    },
    /// MDT to MDT: remove what part `intent` made, if anything (an
    /// operation rolled back). Opcode 46.
    UndoDirObject {
        /// The part.
        intent: IntentRef,
    },
    /// MDT to MDT: if directory `fid` is empty, mark it as being removed:
    /// it takes no new entries until unsealed or destroyed; ENOTEMPTY
    /// otherwise. Opcode 47.
    SealDir {
        /// Directory object on the receiving MDT.
        fid: Fid,
    },
    /// MDT to MDT: a removal was given up; `fid` takes entries again.
    /// Opcode 48.
    UnsealDir {
        /// Directory object.
        fid: Fid,
    },
    /// MDT to MDT: destroy sealed directory object `fid` (done if it is
    /// already gone). Opcode 49.
    DestroyDir {
        /// Directory object.
        fid: Fid,
    },
    /// MDT to MDT: the coordinator's intent `id` is finished; forget the
    /// records kept to make its steps repeatable. Opcode 59.
    ForgetIntent {
        /// Coordinating MDT.
        coord: u32,
        /// Its intent.
        id: u64,
    },
    /// Client to a restarted MDT, during its recovery window: changes the
    /// MDT acknowledged under boot `boot` but had not committed, in
    /// transaction order. `last` ends the client's replay. Opcode 60.
    Replay {
        /// The MDT instance that acknowledged them.
        boot: u64,
        /// The changes, ascending by transaction number.
        entries: Vec<Replayed>,
        /// No more entries follow from this client.
        last: bool,
    },
    /// Client to MDT: make every change applied so far durable before
    /// answering (fsync, syncfs, O_SYNC). Opcode 61.
    Sync,
    /// Client to MDT: the client leaves (unmount, end of a tool): commit,
    /// and stop waiting for it in recovery. Opcode 62.
    Disconnect,
    /// Client to MDT: nothing but the commit state in the answer (the
    /// MDT's instance and last committed number), also during recovery:
    /// how a client learns that its changes are committed, or that the
    /// MDT restarted. (`Ping` is answered by the transport.) Opcode 63.
    CommitState,
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
    pub req: Request,
    /// The reply it got.
    pub reply: Reply,
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
}

impl Request {
    /// The explicit opcode of this request, carried in the frame header.
    pub const fn opcode(&self) -> u16 {
        match self {
            Request::Ping => 1,
            Request::Register { .. } => 10,
            Request::GetConfig => 11,
            Request::AllocSeq { .. } => 12,
            Request::Lookup { .. } => 20,
            Request::GetAttr { .. } => 21,
            Request::SetAttr { .. } => 22,
            Request::Create { .. } => 23,
            Request::Mkdir { .. } => 24,
            Request::Unlink { .. } => 25,
            Request::Rmdir { .. } => 26,
            Request::Rename { .. } => 27,
            Request::Link { .. } => 28,
            Request::Symlink { .. } => 29,
            Request::Readlink { .. } => 30,
            Request::Readdir { .. } => 31,
            Request::GetLayout { .. } => 32,
            Request::SetDefaultStripe { .. } => 33,
            Request::GetDefaultStripe { .. } => 34,
            Request::SetXattr { .. } => 35,
            Request::GetXattr { .. } => 36,
            Request::ListXattr { .. } => 37,
            Request::RemoveXattr { .. } => 38,
            Request::StatFs => 39,
            Request::UpdateSize { .. } => 40,
            Request::ObjWrite { .. } => 50,
            Request::ObjRead { .. } => 51,
            Request::ObjTruncate { .. } => 52,
            Request::ObjPunch { .. } => 53,
            Request::ObjSync { .. } => 54,
            Request::Precreate { .. } => 55,
            Request::Destroy { .. } => 56,
            Request::ObjGetSize { .. } => 57,
            Request::ReleaseOrphan { .. } => 41,
            Request::RenewOrphans { .. } => 42,
            Request::Open { .. } => 43,
            Request::ObjAllocate { .. } => 58,
            Request::MkdirStriped { .. } => 44,
            Request::MakeDirObject { .. } => 45,
            Request::UndoDirObject { .. } => 46,
            Request::SealDir { .. } => 47,
            Request::UnsealDir { .. } => 48,
            Request::DestroyDir { .. } => 49,
            Request::ForgetIntent { .. } => 59,
            Request::Replay { .. } => 60,
            Request::Sync => 61,
            Request::Disconnect => 62,
            Request::CommitState => 63,
        }
    }

    /// A short name for logs and statistics.
    pub fn name(&self) -> &'static str {
        match self {
            Request::Ping => "ping",
            Request::Register { .. } => "register",
            Request::GetConfig => "get_config",
            Request::AllocSeq { .. } => "alloc_seq",
            Request::Lookup { .. } => "lookup",
            Request::GetAttr { .. } => "getattr",
            Request::SetAttr { .. } => "setattr",
            Request::Create { .. } => "create",
            Request::Mkdir { .. } => "mkdir",
            Request::Unlink { .. } => "unlink",
            Request::Rmdir { .. } => "rmdir",
            Request::Rename { .. } => "rename",
            Request::Link { .. } => "link",
            Request::Symlink { .. } => "symlink",
            Request::Readlink { .. } => "readlink",
            Request::Readdir { .. } => "readdir",
            Request::GetLayout { .. } => "getlayout",
            Request::SetDefaultStripe { .. } => "set_default_stripe",
            Request::GetDefaultStripe { .. } => "get_default_stripe",
            Request::SetXattr { .. } => "setxattr",
            Request::GetXattr { .. } => "getxattr",
            Request::ListXattr { .. } => "listxattr",
            Request::RemoveXattr { .. } => "removexattr",
            Request::StatFs => "statfs",
            Request::UpdateSize { .. } => "update_size",
            Request::ObjWrite { .. } => "obj_write",
            Request::ObjRead { .. } => "obj_read",
            Request::ObjTruncate { .. } => "obj_truncate",
            Request::ObjPunch { .. } => "obj_punch",
            Request::ObjSync { .. } => "obj_sync",
            Request::Precreate { .. } => "precreate",
            Request::Destroy { .. } => "destroy",
            Request::ObjGetSize { .. } => "obj_getsize",
            Request::ReleaseOrphan { .. } => "release_orphan",
            Request::RenewOrphans { .. } => "renew_orphans",
            Request::Open { .. } => "open",
            Request::ObjAllocate { .. } => "obj_allocate",
            Request::MkdirStriped { .. } => "mkdir_striped",
            Request::MakeDirObject { .. } => "make_dir_object",
            Request::UndoDirObject { .. } => "undo_dir_object",
            Request::SealDir { .. } => "seal_dir",
            Request::UnsealDir { .. } => "unseal_dir",
            Request::DestroyDir { .. } => "destroy_dir",
            Request::ForgetIntent { .. } => "forget_intent",
            Request::Replay { .. } => "replay",
            Request::Sync => "sync",
            Request::Disconnect => "disconnect",
            Request::CommitState => "commit_state",
        }
    }
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
}

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
            },
            req: Request::Rename {
                parent: Fid::ROOT,
                name: "a".into(),
                new_parent: Fid::new(5, 6),
                new_name: "b".into(),
                flags: rename_flags::NOREPLACE,
                keep_orphan: false,
            },
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
