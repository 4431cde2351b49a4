//! Every request, declared once per service.
//!
//! Each service has its own request type: [`MgsRequest`], [`MdtRequest`]
//! (from clients), [`PeerRequest`] (MDT to MDT) and [`OstRequest`]. A
//! caller builds the type of the service it calls, so it can only send what
//! that service serves; a service's handler matches its own type, with no
//! catch-all arm, so an operation added without a handler does not compile.
//! [`Request`] is what travels in an [`Envelope`](crate::msg::Envelope): one
//! of them, or the transport's `Ping`.
//!
//! Each operation is declared in one place ([`declare_requests!`]) with:
//! - its opcode, carried in the frame header and checked against the body;
//! - its name, for logs and statistics;
//! - its [`Effect`]: whether it changes state, and whether a resend must be
//!   answered from the reply cache instead of being done again;
//! - who may send it ([`Senders`]): anyone holding a key of the cluster, or
//!   only its servers (a client's connection is refused those).
//!
//! Opcodes are append-only: never renumbered, never reused, only retired.
//! One opcode means one operation in every service that serves it
//! (`StatFs` is 39 on the MGS, MDTs and OSTs).

use crate::compress::Compress;
use crate::fid::Fid;
use crate::layout::{LayoutSpec, ObjRef, StripeSpec};
use crate::lock::FileLock;
use crate::msg::{
    DirDefault, DirObject, DirStripe, FileKind, FsckFix, FsckScan, IntentRef, MovedInode, Replayed,
    Role, ScrubCmd, SetAttr, TargetId, TargetInfo, Time,
};
use crate::name::Name;
use crate::quota::{Owner, QuotaId, QuotaLimits};
use serde::{Deserialize, Serialize};

/// What an operation does to the state of the service that serves it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Nothing: it only reads.
    Reads,
    /// It changes state, and doing it again is harmless (a resend writes
    /// the same bytes, or the service recognises the repeat itself).
    Changes,
    /// It changes state and must happen once: a resend is answered with the
    /// first execution's reply (the MDT's reply cache) and the change is
    /// kept by the client for replay until it is committed.
    Once,
}

/// Who may send an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Senders {
    /// Clients and servers.
    Any,
    /// Servers only (the cluster key's holders); refused on a connection
    /// that proved only the client key.
    Peers,
}

/// What a read's answer shows, so what the leases it grants cover.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shows {
    /// Nothing leased: no inode's attributes, or not a read.
    Nothing,
    /// The inode a name leads to (or that the name is absent): the name
    /// and the inode's attributes.
    Entry,
    /// The attributes of the inode the request is routed by.
    Attr,
    /// A directory's names and their inodes' attributes; the whole list
    /// when one page held it all.
    List,
    /// Inodes' attributes without names that may be leased (a shard of a
    /// striped directory).
    Attrs,
}

/// One declared operation, for tables and checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Op {
    /// Frame opcode.
    pub opcode: u16,
    /// Name in logs and statistics.
    pub name: &'static str,
    /// What it does.
    pub effect: Effect,
    /// Who may send it.
    pub senders: Senders,
    /// What its answer shows of inodes (reads).
    pub shows: Shows,
    /// It makes an inode whose attributes its answer carries.
    pub makes: bool,
    /// It changes only the sender's session (commits, leases, locks, its
    /// open files): a read-only client may send it.
    pub session: bool,
    /// The server process answers it for every target it hosts (per-job
    /// statistics), before any target sees it.
    pub by_process: bool,
}

/// A declared fact with a default: the value given, or the default.
macro_rules! fact {
    ($default:expr $(,)?) => {
        $default
    };
    ($default:expr, $given:expr) => {
        $given
    };
}

/// One operation's declaration, from its line's facts (see
/// [`declare_requests!`]).
macro_rules! op_of {
    ($op:literal, $name:literal, $effect:ident, $senders:ident,
     [$($shows:ident)?], [$($makes:literal)?], [$($by_process:literal)?], [$($session:literal)?]) => {
        Op {
            opcode: $op,
            name: $name,
            effect: Effect::$effect,
            senders: Senders::$senders,
            shows: fact!(Shows::Nothing $(, Shows::$shows)?),
            makes: fact!(false $(, $makes)?),
            by_process: fact!(false $(, $by_process)?),
            session: fact!(false $(, $session)?),
        }
    };
}

/// Declares one service's request enum and, from the same lines, its
/// opcodes, names, effects and senders, and the facts the MDT and clients
/// route, guard and lease by. After the senders, in this order, each
/// optional:
/// - `route = FIELD`: the inode the request is routed by (`routed_by`);
/// - `object = FIELD`: the OST object it touches (`object`), which a
///   client's request must hold a capability for;
/// - `names = [DIR / NAME, ...]`: the directory entries it addresses
///   (`dir_names`, `reroute_names`), a rename's source first;
/// - `lists = FIELD at COOKIE`: the directory it lists from where
///   (`listing`; `dir_names` with no name);
/// - `shows = KIND`: what its answer shows ([`Shows`]);
/// - `makes = true`: it makes an inode;
/// - `by_process = true`: the server process answers it;
/// - `session = true`: it changes only the sender's session, so a
///   read-only client may send it.
///
/// Each fact is declared on the operation's own line and every table is
/// generated from them, so an operation cannot be left out of one.
macro_rules! declare_requests {
    (
        $(#[$em:meta])*
        pub enum $E:ident {
            $(
                $(#[$vm:meta])*
                $V:ident $({ $($(#[$fm:meta])* $f:ident : $t:ty),* $(,)? })?
                    => $op:literal, $name:literal, $effect:ident, $senders:ident
                    $(, route = $route:ident)?
                    $(, object = $object:ident)?
                    $(, names = [$($dir:ident / $dname:ident),+])?
                    $(, lists = $lists:ident at $cookie:ident)?
                    $(, shows = $shows:ident)?
                    $(, makes = $makes:literal)?
                    $(, by_process = $by_process:literal)?
                    $(, session = $session:literal)?;
            )*
        }
    ) => {
        $(#[$em])*
        #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
        pub enum $E {
            $(
                $(#[$vm])*
                $V $({ $($(#[$fm])* $f: $t),* })?,
            )*
        }

        impl $E {
            /// Every operation of this service, in declaration order.
            pub const OPS: &'static [Op] = &[
                $(op_of!($op, $name, $effect, $senders,
                    [$($shows)?], [$($makes)?], [$($by_process)?], [$($session)?]),)*
            ];

            /// This request's declaration.
            pub const fn op(&self) -> Op {
                match self {
                    $($E::$V { .. } => op_of!($op, $name, $effect, $senders,
                        [$($shows)?], [$($makes)?], [$($by_process)?], [$($session)?]),)*
                }
            }

            /// The inode the request is routed by: the one whose MDT
            /// answers it, and that answers `Moved` if it left.
            #[allow(unused_variables)]
            pub fn routed_by(&self) -> Option<Fid> {
                match self {
                    $($E::$V { .. } => {
                        $(if let $E::$V { $route, .. } = self {
                            return Some(*$route);
                        })?
                        None
                    })*
                }
            }

            /// The OST object the request touches.
            #[allow(unused_variables)]
            pub fn object(&self) -> Option<crate::layout::ObjRef> {
                match self {
                    $($E::$V { .. } => {
                        $(if let $E::$V { $object, .. } = self {
                            return Some(*$object);
                        })?
                        None
                    })*
                }
            }

            /// The names the request addresses, each with its directory
            /// (for a striped one, the shard it was routed to), in the
            /// order the client routes by (a rename's source first); a
            /// listing is its directory with no name.
            #[allow(unused_mut)]
            pub fn dir_names(&self) -> Vec<(Fid, Option<&Name>)> {
                let mut v: Vec<(Fid, Option<&Name>)> = Vec::new();
                match self {
                    $($E::$V { .. } => {
                        $(if let $E::$V { $($dir, $dname,)+ .. } = self {
                            $(v.push((*$dir, Some($dname)));)+
                        })?
                        $(if let $E::$V { $lists, .. } = self {
                            v.push((*$lists, None));
                        })?
                    })*
                }
                v
            }

            /// The directory the request lists, and from where (0: the
            /// start).
            #[allow(unused_variables)]
            pub fn listing(&self) -> Option<(Fid, u64)> {
                match self {
                    $($E::$V { .. } => {
                        $(if let $E::$V { $lists, $cookie, .. } = self {
                            return Some((*$lists, *$cookie));
                        })?
                        None
                    })*
                }
            }

            /// Point every name of the request at the directory `shard`
            /// picks for it (a directory striped since the client learned
            /// its layout).
            #[allow(unused_mut, unused_variables)]
            pub fn reroute_names(&mut self, mut shard: impl FnMut(Fid, &Name) -> Fid) {
                match self {
                    $($E::$V { .. } => {
                        $(if let $E::$V { $($dir, $dname,)+ .. } = self {
                            $(*$dir = shard(*$dir, $dname);)+
                        })?
                    })*
                }
            }
        }
    };
}

declare_requests! {
    /// The management service (MGS).
    pub enum MgsRequest {
        /// A server announces a target it hosts.
        Register {
            /// File system the target was formatted for.
            fsname: String,
            /// The target.
            target: TargetInfo,
            /// Which replica of the target this is, if it is replicated.
            replica: Option<crate::replica::ReplicaOf>,
        } => 10, "register", Changes, Peers;
        /// Fetch the cluster configuration.
        GetConfig => 11, "get_config", Reads, Any;
        /// An MDT asks for a new FID sequence.
        AllocSeq {
            /// The asking MDT.
            mdt: u32,
        } => 12, "alloc_seq", Changes, Peers;
        /// Space and inode usage of a target (MDT or OST).
        StatFs => 39, "statfs", Reads, Any;
        /// Set a site parameter (`SiteParams::set`): root only (EPERM),
        /// EINVAL for an unknown name or a bad value. Every target reads
        /// it with the configuration.
        SetParam {
            /// The parameter.
            name: String,
            /// Its new value.
            value: String,
        } => 112, "set_param", Changes, Any;
        /// Set nodemap `name` (`None`: remove it): root only (EPERM),
        /// EINVAL for one that cannot work. Every server reads it with
        /// the configuration.
        SetNodemap {
            /// Its name.
            name: String,
            /// What it is now.
            nodemap: Option<crate::nodemap::Nodemap>,
        } => 113, "set_nodemap", Changes, Any;
        /// Take snapshot `name` of the whole file system (root): every
        /// target at once, under a barrier that holds at most
        /// `barrier_ms`. Answered `Reply::Snapshots` with it.
        SnapshotCreate {
            /// Its name.
            name: String,
            /// How long the barrier may hold, in milliseconds.
            barrier_ms: u32,
        } => 116, "snapshot_create", Changes, Any;
        /// Destroy snapshot `name` (root).
        SnapshotDestroy {
            /// Its name.
            name: String,
        } => 118, "snapshot_destroy", Changes, Any;
        /// The snapshots, oldest first, with the bytes each holds
        /// (`Reply::Snapshots`).
        SnapshotList => 119, "snapshot_list", Reads, Any;
        /// Change OST pool `name` (root): EINVAL for a bad name, an
        /// unknown OST or a pool not empty at its destroy, EEXIST for a
        /// pool or member that exists, ENOENT for one that does not.
        /// Every MDT reads the pools with the configuration.
        PoolEdit {
            /// The pool.
            name: String,
            /// What to do.
            op: crate::pool::PoolOp,
        } => 120, "pool_edit", Changes, Any;
        /// Keep `report`, the policy engine's latest report (JSON, at
        /// most [`crate::msg::MAX_POLICY_REPORT`] bytes), for the
        /// dashboard (root).
        PolicyPublish {
            /// The report.
            report: String,
        } => 125, "policy_publish", Changes, Any;
        /// The policy engine's latest report (`Reply::PolicyReport`,
        /// empty if none was published).
        PolicyReport => 126, "policy_report", Reads, Any;
        /// A server renews its hold on the roles of the replicas it hosts
        /// (see [`crate::replica`]); answered `Reply::Members` with
        /// their targets.
        Heartbeat {
            /// The server's address.
            addr: String,
            /// Its replicas.
            hosted: Vec<crate::replica::Hosted>,
        } => 133, "heartbeat", Changes, Peers;
        /// A primary says where one of its replicas stands: one that
        /// failed to take a change is no longer in sync, one brought up
        /// to date is. Refused (EREMCHG) unless `term` is the target's
        /// and the sender its primary. Answered `Reply::Members`.
        SetReplica {
            /// The target.
            target: TargetId,
            /// The term the primary serves under.
            term: u64,
            /// The replica.
            replica: u32,
            /// Where it stands now.
            state: crate::replica::ReplicaState,
        } => 134, "set_replica", Changes, Peers;
    }
}

declare_requests! {
    /// A metadata target, from a client (or from another MDT acting for one).
    pub enum MdtRequest {
        /// Find `name` in `parent`.
        Lookup {
            /// Directory.
            parent: Fid,
            /// Name.
            name: Name,
        } => 20, "lookup", Reads, Any, route = parent, names = [parent / name], shows = Entry;
        /// Attributes of `fid`.
        GetAttr {
            /// Inode.
            fid: Fid,
        } => 21, "getattr", Reads, Any, route = fid, shows = Attr;
        /// Change attributes.
        SetAttr {
            /// Inode.
            fid: Fid,
            /// What to change.
            set: SetAttr,
        } => 22, "setattr", Once, Any, route = fid;
        /// Create a non-directory: regular file (with layout), FIFO, device,
        /// socket.
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
        } => 23, "create", Once, Any, route = parent, names = [parent / name], makes = true;
        /// Make a directory.
        Mkdir {
            /// Parent.
            parent: Fid,
            /// Name.
            name: Name,
            /// Permission bits after umask.
            perm: u32,
        } => 24, "mkdir", Once, Any, route = parent, names = [parent / name], makes = true;
        /// Remove a non-directory name.
        Unlink {
            /// Directory.
            parent: Fid,
            /// Name.
            name: Name,
            /// The caller has files open: if this drops the last link of a
            /// file, keep it as an orphan (answer `Orphaned`) until the caller
            /// sends `ReleaseOrphan`.
            keep_orphan: bool,
        } => 25, "unlink", Once, Any, route = parent, names = [parent / name];
        /// Remove an empty directory.
        Rmdir {
            /// Parent.
            parent: Fid,
            /// Name.
            name: Name,
        } => 26, "rmdir", Once, Any, route = parent, names = [parent / name];
        /// Rename, with `rename_flags`.
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
            /// As `MdtRequest::Unlink::keep_orphan`, for a file the rename replaces.
            keep_orphan: bool,
        } => 27, "rename", Once, Any, route = parent, names = [parent / name, new_parent / new_name];
        /// New hard link to `fid`.
        Link {
            /// Existing inode.
            fid: Fid,
            /// Directory of the new name.
            parent: Fid,
            /// New name.
            name: Name,
        } => 28, "link", Once, Any, route = parent, names = [parent / name];
        /// Make a symbolic link.
        Symlink {
            /// Directory.
            parent: Fid,
            /// Name.
            name: Name,
            /// Link target.
            target: Name,
        } => 29, "symlink", Once, Any, route = parent, names = [parent / name], makes = true;
        /// Read a symbolic link.
        Readlink {
            /// Link inode.
            fid: Fid,
        } => 30, "readlink", Reads, Any, route = fid;
        /// List a directory from `cookie` (0 = start).
        Readdir {
            /// Directory.
            fid: Fid,
            /// Resume after the entry with this cookie.
            cookie: u64,
            /// Most entries to return.
            max: u32,
        } => 31, "readdir", Reads, Any, route = fid, lists = fid at cookie, shows = List;
        /// A file's layout.
        GetLayout {
            /// File.
            fid: Fid,
        } => 32, "getlayout", Reads, Any, route = fid;
        /// Set a directory's default striping (`setstripe` on a directory).
        SetDefaultStripe {
            /// Directory.
            fid: Fid,
            /// New default; `None` removes it.
            spec: Option<StripeSpec>,
        } => 33, "set_default_stripe", Once, Any, route = fid;
        /// A directory's default striping, explicit or inherited.
        GetDefaultStripe {
            /// Directory.
            fid: Fid,
        } => 34, "get_default_stripe", Reads, Any, route = fid;
        /// Set an extended attribute.
        SetXattr {
            /// Inode.
            fid: Fid,
            /// Name.
            name: Name,
            /// Value.
            value: Vec<u8>,
            /// `xattr_flags`.
            flags: u32,
        } => 35, "setxattr", Once, Any, route = fid;
        /// Get an extended attribute.
        GetXattr {
            /// Inode.
            fid: Fid,
            /// Name.
            name: Name,
        } => 36, "getxattr", Reads, Any, route = fid;
        /// List extended attribute names.
        ListXattr {
            /// Inode.
            fid: Fid,
        } => 37, "listxattr", Reads, Any, route = fid;
        /// Remove an extended attribute.
        RemoveXattr {
            /// Inode.
            fid: Fid,
            /// Name.
            name: Name,
        } => 38, "removexattr", Once, Any, route = fid;
        /// Space and inode usage of a target (MDT or OST).
        StatFs => 39, "statfs", Reads, Any;
        /// The writer reports data it wrote: size grows to at least `size`,
        /// mtime to at least `mtime` (reports may arrive out of order).
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
        } => 40, "update_size", Once, Any, route = fid;
        /// The last handle of an orphan (an unlinked file kept for a client
        /// that had it open) closed: destroy it.
        ReleaseOrphan {
            /// The orphan.
            fid: Fid,
        } => 41, "release_orphan", Once, Any, route = fid, session = true;
        /// The client still has these orphans open: renew their lease.
        RenewOrphans {
            /// Orphans on the receiving MDT.
            fids: Vec<Fid>,
        } => 42, "renew_orphans", Changes, Any, session = true;
        /// Attributes and layout of `fid`, fresh, for an open: one round trip
        /// where GetAttr and GetLayout would take two.
        Open {
            /// The inode being opened.
            fid: Fid,
            /// What the opener asks for, checked against the mode bits:
            /// `access::READ | access::WRITE` (0 for a peer that only wants
            /// the attributes).
            access: u32,
            /// From a client that takes no leases (no recall asks it what
            /// it has open): the MDT counts it among the file's holders
            /// until its `ReleaseOrphan` (see `Reply::Held`).
            hold: bool,
        } => 43, "open", Reads, Any, route = fid, shows = Attr;
        /// Make a directory placed on chosen MDTs: a remote directory
        /// (`count` 1 on another MDT) or a striped one. Sent to the parent's
        /// MDT, which coordinates.
        MkdirStriped {
            /// Parent.
            parent: Fid,
            /// Name.
            name: Name,
            /// Permission bits after umask.
            perm: u32,
            /// Placement.
            stripe: DirStripe,
        } => 44, "mkdir_striped", Once, Any, route = parent, names = [parent / name], makes = true;
        /// Client to a restarted MDT, during its recovery window: changes the
        /// MDT acknowledged under boot `boot` but had not committed, in
        /// transaction order. `last` ends the client's replay.
        Replay {
            /// The MDT instance that acknowledged them.
            boot: u64,
            /// The changes, ascending by transaction number.
            entries: Vec<Replayed>,
            /// No more entries follow from this client.
            last: bool,
        } => 60, "replay", Changes, Any, session = true;
        /// Client to MDT: make every change applied so far durable before
        /// answering (fsync, syncfs, O_SYNC).
        Sync => 61, "sync", Changes, Any, session = true;
        /// Client to MDT: the client leaves (unmount, end of a tool): commit,
        /// and stop waiting for it in recovery.
        Disconnect => 62, "disconnect", Changes, Any, session = true;
        /// Client to MDT: nothing but the commit state in the answer (the
        /// MDT's instance and last committed number), also during recovery:
        /// how a client learns that its changes are committed, or that the
        /// MDT restarted. (`Ping` is answered by the transport.)
        CommitState => 63, "commit_state", Reads, Any;
        /// Client to MDT: take leases. The MDT grants this client a lease
        /// on what it answers it from now on, and recalls them on the
        /// connection this came on (`ClientRequest::Recall`). Leases of an
        /// earlier connection are void: the client dropped what they
        /// covered when that connection died.
        Subscribe => 64, "subscribe", Reads, Any;
        /// Set a directory's default component layout (`setstripe -E`):
        /// progressive layouts and Data-on-MDT for its new files.
        SetDefaultLayout {
            /// Directory.
            fid: Fid,
            /// New default; `None` removes it (and any default striping).
            spec: Option<LayoutSpec>,
        } => 65, "set_default_layout", Once, Any, route = fid;
        /// A directory's default layout, explicit or inherited (a plain
        /// default striping shows as one component).
        GetDefaultLayout {
            /// Directory.
            fid: Fid,
        } => 66, "get_default_layout", Reads, Any, route = fid;
        /// Write bytes of a file's Data-on-MDT component: the size grows
        /// to cover them and the mtime is set, in the same change (kept
        /// by the client for replay until committed, as any change).
        DomWrite {
            /// File.
            fid: Fid,
            /// File offset (within the component).
            offset: u64,
            /// The bytes.
            data: Vec<u8>,
        } => 67, "dom_write", Once, Any, route = fid;
        /// Read bytes of a file's Data-on-MDT component (short at EOF;
        /// holes read as zeros).
        DomRead {
            /// File.
            fid: Fid,
            /// File offset.
            offset: u64,
            /// Bytes wanted.
            len: u32,
        } => 68, "dom_read", Reads, Any, route = fid;
        /// Deallocate bytes of a file's Data-on-MDT component (they read
        /// as zeros; the size stays).
        DomPunch {
            /// File.
            fid: Fid,
            /// File offset.
            offset: u64,
            /// Length.
            len: u64,
        } => 69, "dom_punch", Once, Any, route = fid;
        /// Set a directory's default placement of new subdirectories
        /// (`setdirstripe -D`), inherited down the tree.
        SetDirDefault {
            /// Directory.
            fid: Fid,
            /// New default; `None` removes it.
            spec: Option<DirDefault>,
        } => 71, "set_dir_default", Once, Any, route = fid;
        /// A directory's default placement of subdirectories, explicit or
        /// inherited.
        GetDirDefault {
            /// Directory.
            fid: Fid,
        } => 72, "get_dir_default", Reads, Any, route = fid;
        /// The MDT's operation counters since it started (by operation
        /// name, as declared), as `loom df -i` shows them.
        OpStats => 73, "op_stats", Reads, Any;
        /// Start, stop or report the MDT's scrub of its records (`loom
        /// scrub`); it changes no namespace state.
        Scrub {
            /// What to do.
            cmd: ScrubCmd,
        } => 74, "scrub", Reads, Any;
        /// The OST objects this MDT's files (and its destroys still to
        /// send) refer to, a page of inode records at a time from `after`
        /// (empty: from the start), for `loom fsck`.
        ListObjects {
            /// Cursor from the previous page.
            after: Vec<u8>,
        } => 76, "list_objects", Reads, Any;
        /// Destroy OST objects that `loom fsck` found no file refers to
        /// (root only; the MDT sends the destroys as a peer).
        ReclaimObjects {
            /// The objects.
            objs: Vec<ObjRef>,
        } => 77, "reclaim_objects", Changes, Any;
        /// A page of the MDT's inodes, entries or open-unlinked files
        /// after `after` (empty: from the start), for `loom fsck`.
        FsckScan {
            /// Which.
            what: FsckScan,
            /// Cursor from the previous page.
            after: Vec<u8>,
        } => 78, "fsck_scan", Reads, Any;
        /// Repair the namespace as `loom fsck --repair` found it must
        /// (root only).
        FsckRepair {
            /// The repair.
            fix: FsckFix,
        } => 79, "fsck_repair", Changes, Any;
        /// `loom find`: a page of this MDT's directory entries after
        /// `after` (empty: from the start), scanning at most `max`, with
        /// those `query` holds for, every directory (to build paths),
        /// and every entry whose inode is on another MDT (for the client
        /// to test). Entries of a directory the caller may not read and
        /// search are withheld, the directory named instead. Answered
        /// `Reply::Found`.
        Find {
            /// What must hold.
            query: crate::find::FindQuery,
            /// Cursor from the previous page.
            after: Vec<u8>,
            /// Most entries to scan.
            max: u32,
        } => 121, "find", Reads, Any;
        /// Begin moving regular file `fid`'s data onto new objects laid
        /// out as `layout` (`loom migrate`; root, or a caller who may
        /// write the file): see
        /// `server/src/mdt/datamig.rs`. EBUSY while another client has it
        /// open; EOPNOTSUPP for a Data-on-MDT component. Answered
        /// `Reply::DataMigrating`, with a capability for both sets of
        /// objects; a resend gets the same answer.
        MigrateData {
            /// The file.
            fid: Fid,
            /// Its new layout.
            layout: LayoutSpec,
        } => 122, "migrate_data", Changes, Any, route = fid;
        /// End the migration of `fid`'s data: swap its layout for the
        /// new one, durably, with `commit` (EBUSY if another client
        /// reached the file meanwhile, ESTALE if its layout changed: the
        /// migration is undone either way), or undo it. The old (or the
        /// unused new) objects are destroyed.
        MigrateDataEnd {
            /// The file.
            fid: Fid,
            /// Swap (else undo).
            commit: bool,
        } => 123, "migrate_data_end", Changes, Any, route = fid;
        /// The policy engine's scan (`loom policy scan`; root only): a
        /// page of this MDT's directory entries after `after` (empty:
        /// from the start), at most `max`, each with its inode's
        /// attributes and layout where this MDT keeps the inode.
        /// Answered `Reply::Scanned`.
        CatalogScan {
            /// Cursor from the previous page.
            after: Vec<u8>,
            /// Most entries to return.
            max: u32,
        } => 124, "catalog_scan", Reads, Any;
        /// Changes sent together in one request (a client's write-back
        /// batch): each as if sent alone with its own sequence number (its
        /// reply cached, its transaction kept by the client for replay), in
        /// order. The first that fails, or that is answered where its
        /// inode went (`Moved`, `Restriped`), ends the batch: those after
        /// it are not done. Only changes that happen once (creates,
        /// setattrs, Data-on-MDT writes, unlinks, ...) may be batched.
        /// Answered `Reply::Batch`.
        Batch {
            /// The changes, in the order they are applied.
            items: Vec<crate::msg::Batched>,
        } => 127, "batch", Changes, Any;
        /// Reserve `count` FIDs of this MDT (at most 4096, in one
        /// sequence) for the calling client, which names the inodes it
        /// makes ahead of the MDT with them (`MakeAt`, its write-back).
        /// Committed before the answer: the MDT never gives them to
        /// anyone else, and takes them only from this client. Answered
        /// `Reply::Fids`.
        GrantFids {
            /// How many.
            count: u32,
        } => 128, "grant_fids", Once, Any;
        /// Make a whole inode in one change under a FID granted to the
        /// caller (`GrantFids`): a file (with its first bytes, which its
        /// layout must keep on the MDT), a directory or a symlink, with
        /// its final mode, owner and times. What a client that answered
        /// the create itself sends in place of a create, its setattrs and
        /// its first write. Answered as `Create`.
        MakeAt {
            /// Directory.
            parent: Fid,
            /// Name.
            name: Name,
            /// The new inode's FID, from the caller's grant.
            fid: Fid,
            /// Type.
            kind: FileKind,
            /// Permission bits after umask.
            perm: u32,
            /// Device number.
            rdev: u32,
            /// Owner (the caller's, unless root).
            uid: u32,
            /// Group (one of the caller's, or the directory's when it is
            /// setgid, unless root).
            gid: u32,
            /// Access time.
            atime: Time,
            /// Modification time.
            mtime: Time,
            /// Status change time: when the client made the inode, or
            /// last changed its mode, owner or times.
            ctime: Time,
            /// When the client made it: the directory's new mtime and
            /// ctime, as the client showed them (its clock, as Lustre's
            /// clients give the times of their metadata changes).
            made: Time,
            /// A symlink's target.
            target: Option<Name>,
            /// A file's first bytes (kept on the MDT by its layout).
            data: Vec<u8>,
        } => 129, "make_at", Once, Any, route = parent, names = [parent / name], makes = true;
        /// Write back empty directory `dir` (`Lease::WriteBack`): the
        /// caller, which takes leases and may write `dir`, answers the
        /// changes in it itself and sends them later; any other client's
        /// request on it recalls the lease first. EBUSY while another
        /// client holds it, ENOTEMPTY for a directory with names,
        /// EOPNOTSUPP for a striped one.
        TakeWriteBack {
            /// The directory.
            dir: Fid,
        } => 130, "take_write_back", Reads, Any, route = dir;
        /// How many more inodes each of `ids` may own on this MDT: what
        /// its share of their limits leaves, after asking the quota master
        /// for `want` more where it is short, as a create would. A client
        /// that writes back checks the creates it answers against it
        /// (issue #32); the MDT checks each again when it is sent. Not a
        /// reservation: other clients' creates may take the room first.
        /// Who may ask about which id is as for `QuotaUsage`. Answered
        /// `Reply::QuotaRoom`.
        QuotaRoom {
            /// The owner, group and project a new inode would count against.
            ids: Vec<crate::quota::QuotaId>,
            /// How many the client would make.
            want: u32,
        } => 131, "quota_room", Reads, Any;
        /// How many more bytes of Data-on-MDT a client's written-back new
        /// files may take here: this MDT's free space above its reserve,
        /// and per id of `ids` what its share of their block limits
        /// leaves, after asking the quota master for `want` more bytes
        /// where it is short, as a write would. A client that writes
        /// back keeps new files' first bytes only within it (issue #32);
        /// the MDT checks each again when they are sent. Not a
        /// reservation. Who may ask about which id is as for
        /// `QuotaUsage`. Answered `Reply::DomRoom`.
        DomRoom {
            /// The owner, group and project of the files.
            ids: Vec<crate::quota::QuotaId>,
            /// Bytes the client would write.
            want: u64,
        } => 132, "dom_room", Reads, Any;
        /// The jobs and clients this target served recently, with their
        /// operations and bytes (`loom jobstats`); answered by the server
        /// process, which counts every request it serves.
        JobStats => 80, "job_stats", Reads, Any, by_process = true;
        /// Set a directory's default compression of new files' data
        /// (`setstripe --compress`), inherited down the tree; on the root,
        /// the file system's. `Some(off)` stops a default from above;
        /// `None` removes the directory's own.
        SetDefaultCompress {
            /// Directory.
            fid: Fid,
            /// New default.
            compress: Option<Compress>,
        } => 81, "set_default_compress", Once, Any, route = fid;
        /// The compression new files in a directory get: its own default
        /// or the nearest ancestor's (`Reply::Compress`).
        GetDefaultCompress {
            /// Directory.
            fid: Fid,
        } => 82, "get_default_compress", Reads, Any, route = fid;
        /// Move plain directory `fid`, its entries and the inodes of the
        /// files named only in it (one link, on its MDT) to MDT `mdt`
        /// (`loom migrate`; root only). Inodes keep their FIDs; the MDT
        /// they left answers `Reply::Moved` for them from then on. Sent
        /// to the directory's MDT, which coordinates; answered
        /// `Reply::Migrated`.
        Migrate {
            /// The directory.
            fid: Fid,
            /// Where it goes.
            mdt: u32,
        } => 89, "migrate", Changes, Any, route = fid;
        /// Stripe plain directory `fid` over `mdts` (the first its own
        /// MDT, which keeps the master and coordinates): its entries go to
        /// the shards their names hash to, online (`loom migrate -c`, and
        /// the MDT's own auto-split; root only). Inodes stay where they
        /// are. Answered `Reply::Migrated` (entries moved).
        Restripe {
            /// The directory.
            fid: Fid,
            /// Its shards' MDTs, shard 0 (the master) first.
            mdts: Vec<u32>,
        } => 90, "restripe", Changes, Any, route = fid;
        /// List one object of a striped directory from `cookie`: a shard,
        /// or the master's own entries (where `Readdir` of a master that
        /// was restriped answers `Reply::Restriped`).
        ReaddirShard {
            /// The shard (or master).
            fid: Fid,
            /// Resume after the entry with this cookie.
            cookie: u64,
            /// Most entries to return.
            max: u32,
        } => 91, "readdir_shard", Reads, Any, route = fid, shows = Attrs;
        /// This MDT's changelog records from `since` on (from the oldest
        /// kept when that is later), at most `max`; when there are none
        /// yet, the MDT waits up to `wait_ms` for one (`loom changelog
        /// --follow`). Root only. Answered `Reply::Changelog`.
        ChangelogRead {
            /// The first record wanted.
            since: u64,
            /// Most records to return.
            max: u32,
            /// How long to wait for a first record, in milliseconds.
            wait_ms: u32,
        } => 93, "changelog_read", Reads, Any;
        /// Register a changelog consumer (root only); the MDT records
        /// changes while one is registered. Answered
        /// `Reply::ChangelogUser` with its id.
        ChangelogRegister => 94, "changelog_register", Once, Any;
        /// Consumer `user` has read every record up to `upto` (0: every
        /// record so far). Records every consumer has read are purged.
        /// Root only.
        ChangelogClear {
            /// The consumer.
            user: u32,
            /// The last record it read.
            upto: u64,
        } => 95, "changelog_clear", Once, Any;
        /// Forget consumer `user` (root only); what only it kept is purged.
        ChangelogDeregister {
            /// The consumer.
            user: u32,
        } => 96, "changelog_deregister", Once, Any;
        /// The changelog's oldest and next record and its consumers.
        /// Answered `Reply::ChangelogState`.
        ChangelogState => 97, "changelog_state", Reads, Any;
        /// What this MDT counts for one user, group or project. Root asks
        /// for anyone; a user for their own uid, their groups (as the
        /// request's caller carries them) and any project. Answered
        /// `Reply::QuotaUsage`.
        QuotaUsage {
            /// Whose.
            who: QuotaId,
        } => 98, "quota_usage", Reads, Any;
        /// Recount what this MDT holds per id and compare it with what it
        /// counted (`loom quota --check`; root only). Answered
        /// `Reply::QuotaCheck`.
        QuotaCheck => 99, "quota_check", Reads, Any;
        /// Give inode `fid` project id `projid` (root only); a directory
        /// with `inherit` passes both to the files and directories made in
        /// it from then on (`loom project -p ID -s DIR`). ENOTDIR for
        /// `inherit` on a non-directory. Answered `Reply::Project`.
        SetProject {
            /// The inode.
            fid: Fid,
            /// Its project id.
            projid: u32,
            /// Whether a directory's new entries take it.
            inherit: bool,
        } => 100, "set_project", Once, Any, route = fid;
        /// An inode's project id and whether it passes it on (`loom
        /// project DIR`). Answered `Reply::Project`.
        GetProject {
            /// The inode.
            fid: Fid,
        } => 101, "get_project", Reads, Any, route = fid;
        /// Set the limits of `who` (root only; sent to MDT0, which keeps
        /// every limit and grants the MDTs their shares of it). All zero
        /// removes them. Answered `Reply::Ok` once committed.
        SetQuota {
            /// Whose.
            who: QuotaId,
            /// The limits.
            limits: QuotaLimits,
        } => 102, "set_quota", Once, Any;
        /// The limits of `who` and since when it is over its soft inode
        /// limit (MDT0; who may ask as for `QuotaUsage`). Answered
        /// `Reply::QuotaLimits`.
        GetQuota {
            /// Whose.
            who: QuotaId,
        } => 103, "get_quota", Reads, Any;
        /// Take `lock` on `fid` (the MDT of its inode keeps its locks; the
        /// MDT sets `lock.owner.client` from the context). Without `wait`
        /// a lock in the way answers `Conflict` at once; with it (F_SETLKW)
        /// the MDT holds the answer until the lock is granted, for a
        /// while, then answers `Blocked` and the client asks again; a wait
        /// that would close a cycle of waiting owners answers EDEADLK.
        /// Answered `Reply::Lock`. Not from the reply cache: a repeat of a
        /// granted lock grants it again.
        Lock {
            /// The file.
            fid: Fid,
            /// What is asked for.
            lock: FileLock,
            /// Wait for it (F_SETLKW, flock without LOCK_NB).
            wait: bool,
        } => 107, "lock", Changes, Any, route = fid, session = true;
        /// Drop what the caller's `owner` holds on `fid` from `start` to
        /// `end` (inclusive; a held lock across either end is split).
        /// Answered `Reply::Ok`.
        Unlock {
            /// The file.
            fid: Fid,
            /// The owner on the calling client.
            owner: u64,
            /// First byte.
            start: u64,
            /// Last byte.
            end: u64,
        } => 108, "unlock", Changes, Any, route = fid, session = true;
        /// F_GETLK: the first lock of another owner in the way of `lock`,
        /// or `Granted` if none is. Answered `Reply::Lock`.
        TestLock {
            /// The file.
            fid: Fid,
            /// What would be asked for.
            lock: FileLock,
        } => 109, "test_lock", Reads, Any, route = fid;
        /// The locks the calling client holds on files of this MDT, and
        /// the files it has open there, held again after its connection
        /// was lost (the MDT restarted, or the network). Taken also while
        /// the MDT recovers; until its grace period ends no new lock is
        /// granted, so none can take a reclaimed one's place, and no file
        /// losing its last name is destroyed, so none open anywhere is.
        /// Answered `Reply::Ok`, or `Reply::Lock` with the first lock that
        /// could not be held again.
        ReclaimLocks {
            /// (file, lock) pairs.
            locks: Vec<(Fid, FileLock)>,
            /// Files the client has open here (see `Reply::Held`).
            held: Vec<Fid>,
        } => 110, "reclaim_locks", Changes, Any, session = true;
        /// An append of `len` bytes (O_APPEND): the file's size grows by
        /// `len` at once, and the range it covered is the appender's to
        /// write. Appenders on any client get ranges that do not overlap,
        /// each at the end as it was. Answered `Reply::Reserved`.
        AppendReserve {
            /// The file.
            fid: Fid,
            /// Bytes appended.
            len: u64,
        } => 111, "append_reserve", Once, Any, route = fid;
        /// A capability for the objects of regular file `fid`
        /// (`Reply::Capa`), for reading, or writing with `write`; the MDT
        /// checks the caller may open it so (EACCES).
        GetCapa {
            /// The file.
            fid: Fid,
            /// For writing too.
            write: bool,
        } => 114, "get_capa", Reads, Any, route = fid;
        /// The directory the caller mounts as its root: the file system's
        /// root, or the fileset its nodemap confines it to. Sent to the
        /// root's MDT; answered `Reply::Entry`.
        GetRoot => 115, "get_root", Reads, Any;
    }
}

declare_requests! {
    /// A client, from a server: callbacks on the client's own connection.
    pub enum ClientRequest {
        /// MDT to client: another client is about to change what these
        /// leases cover. The client stops trusting and drops what it (and
        /// its kernel) cached under them, then answers; the change waits
        /// for the answer, for a bounded time.
        Recall {
            /// The leases recalled.
            leases: Vec<crate::msg::Lease>,
        } => 70, "recall", Changes, Peers;
    }
}

declare_requests! {
    /// A metadata target, from another MDT: the steps of cross-MDT operations. Refused on a client's connection.
    pub enum PeerRequest {
        /// MDT to MDT: make a directory object (a remote directory, a shard,
        /// or with `others` the master of a striped directory whose other
        /// shards are `others`) as part `intent`. Done once per part: sent
        /// again, it answers the object made the first time.
        MakeDirObject {
            /// The part of the coordinator's operation.
            intent: IntentRef,
            /// What to make.
            dir: DirObject,
            /// A client's mkdir tried the first time: held to the
            /// caller's quota on this MDT (EDQUOT). A resolver finishing
            /// an intent after a crash is not.
            quota: bool,
        } => 45, "make_dir_object", Changes, Peers;
        /// MDT to MDT: remove what part `intent` made, if anything (an
        /// operation rolled back).
        UndoDirObject {
            /// The part.
            intent: IntentRef,
        } => 46, "undo_dir_object", Changes, Peers;
        /// MDT to MDT: if directory `fid` is empty, mark it as being removed:
        /// it takes no new entries until unsealed or destroyed; ENOTEMPTY
        /// otherwise.
        SealDir {
            /// Directory object on the receiving MDT.
            fid: Fid,
        } => 47, "seal_dir", Changes, Peers, route = fid;
        /// MDT to MDT: a removal was given up; `fid` takes entries again.
        UnsealDir {
            /// Directory object.
            fid: Fid,
        } => 48, "unseal_dir", Changes, Peers, route = fid;
        /// MDT to MDT: destroy sealed directory object `fid` (done if it is
        /// already gone).
        DestroyDir {
            /// Directory object.
            fid: Fid,
        } => 49, "destroy_dir", Changes, Peers, route = fid;
        /// MDT to MDT: the coordinator's intent `id` is finished; forget the
        /// records kept to make its steps repeatable.
        ForgetIntent {
            /// Coordinating MDT.
            coord: u32,
            /// Its intent.
            id: u64,
        } => 59, "forget_intent", Changes, Peers;
        /// MGS to a target: a step of taking or destroying snapshot `id`
        /// (`crate::snapshot`).
        Snapshot {
            /// The snapshot.
            id: u32,
            /// The step.
            step: crate::snapshot::SnapStep,
        } => 117, "snapshot", Changes, Peers;
        /// MDT to MDT: inode `fid` of the receiving MDT as it is stored
        /// (`Reply::Inode`): a coordinator's checks before a cross-MDT
        /// rename or link, and its walk up the tree.
        ReadInode {
            /// The inode.
            fid: Fid,
        } => 83, "read_inode", Reads, Peers, route = fid;
        /// MDT to MDT: directory `dir` of the receiving MDT and its entry
        /// `name` (`Reply::EntryOf`).
        ReadEntry {
            /// The directory (or shard).
            dir: Fid,
            /// The name.
            name: Name,
        } => 84, "read_entry", Reads, Peers, route = dir;
        /// MDT to MDT: set entry `name` of `dir` to `to` (`None`: remove
        /// it) if it names `expect` now (`None`: absent), adding `nlink`
        /// to the directory's link count, as part `intent`. Done once:
        /// sent again, it answers as the first time. EAGAIN if the entry
        /// changed since the coordinator read it.
        SetEntry {
            /// The part of the coordinator's operation.
            intent: IntentRef,
            /// The directory (or shard) on the receiving MDT.
            dir: Fid,
            /// The name.
            name: Name,
            /// What it must name now.
            expect: Option<Fid>,
            /// What it names after.
            to: Option<(Fid, FileKind)>,
            /// Change of the directory's link count.
            nlink: i32,
            /// The client whose change this is: not recalled from.
            maker: u64,
        } => 85, "set_entry", Changes, Peers, route = dir;
        /// MDT to MDT: add `nlink` (+1: a new hard link; -1: a name gone,
        /// the inode freed or kept as an orphan of `keep_for` at zero) to
        /// inode `fid`'s link count, set its parent (a moved directory's
        /// `..`) and its ctime, as part `intent`. Done once: sent again,
        /// it answers as the first time (`Reply::Entry` for a new link,
        /// `Reply::Ok` or `Reply::Orphaned` otherwise).
        Relink {
            /// The part of the coordinator's operation.
            intent: IntentRef,
            /// The inode.
            fid: Fid,
            /// Change of its link count (-1, 0 or +1).
            nlink: i32,
            /// Its new parent (directories that move).
            parent: Option<Fid>,
            /// A client that may have it open (see `Unlink.keep_orphan`).
            keep_for: Option<u64>,
            /// The client whose change this is: not recalled from.
            maker: u64,
        } => 86, "relink", Changes, Peers, route = fid;
        /// MDT to MDT0: take (`lock`) or give back the file system's tree
        /// lock for intent `id` of MDT `coord`. Every rename that moves a
        /// directory to another parent holds it, so that two cannot make a
        /// loop. Durable; EBUSY while another intent holds it.
        TreeLock {
            /// Coordinating MDT.
            coord: u32,
            /// Its intent.
            id: u64,
            /// Take (true) or give back.
            lock: bool,
        } => 87, "tree_lock", Changes, Peers;
        /// MDT to MDT: take directory `dir` (with its entries) and the
        /// inodes in `inodes` from the sending MDT, which moves them here
        /// (`loom migrate`), as part `intent`. Each keeps its FID. Done
        /// once, durable before the answer: sent again, it answers Ok and
        /// changes nothing (what was taken may have changed here since).
        AdoptInodes {
            /// The part of the coordinator's operation.
            intent: IntentRef,
            /// The directory whose entries come with it.
            dir: Fid,
            /// The inodes, the directory first.
            inodes: Vec<MovedInode>,
            /// The directory's entries: name, inode, type.
            entries: Vec<(Name, Fid, FileKind)>,
        } => 88, "adopt_inodes", Changes, Peers;
        /// MDT to MDT: put `entries` (name, inode, type) into directory
        /// object `dir` (a shard a restripe made), as part `intent`, the
        /// shard's link count raised for each new subdirectory entry.
        /// Sent again, the same: what is there already stays.
        PutEntries {
            /// The part of the coordinator's operation.
            intent: IntentRef,
            /// The shard.
            dir: Fid,
            /// The entries.
            entries: Vec<(Name, Fid, FileKind)>,
        } => 92, "put_entries", Changes, Peers;
        /// MDT or OST to MDT0 (the quota master): `target` counts `usage`
        /// inodes or bytes of `who` and needs `need`
        /// more than it was granted. Answered `Reply::QuotaGrant`:
        /// whether `who` has limits and what the target may hold (at
        /// least `usage + need`, unless that is over the limit: `EDQUOT`).
        QuotaAcquire {
            /// Whose.
            who: QuotaId,
            /// The asking target: an MDT for inodes, an OST for bytes.
            target: TargetId,
            /// What it counts now.
            usage: u64,
            /// How many more it needs.
            need: u64,
            /// Bytes (an OST's, or an MDT's Data-on-MDT bytes), else
            /// inodes.
            bytes: bool,
        } => 104, "quota_acquire", Changes, Peers;
        /// MDT0 to an MDT: give back what it holds of `who`'s inode grant beyond
        /// its usage (another MDT needs the rest, or its limits changed).
        /// Answered
        /// `Reply::QuotaGrant` with the usage, now its grant.
        QuotaRelease {
            /// Whose.
            who: QuotaId,
            /// Its limits changed: forget whether it is limited, and ask
            /// again (else the MDT keeps knowing it is, with its usage as
            /// its share, also while the master cannot be asked).
            forget: bool,
            /// Its share of a block limit (Data-on-MDT bytes), else of an
            /// inode limit.
            bytes: bool,
        } => 105, "quota_release", Changes, Peers;
    }
}

declare_requests! {
    /// An object storage target.
    pub enum OstRequest {
        /// Write the bulk data at `offset` of an object.
        ObjWrite {
            /// Object.
            obj: ObjRef,
            /// Object offset.
            offset: u64,
            /// The file's compression (its layout's): applied if this
            /// write makes the object; an object keeps what it was made
            /// with.
            pack: Option<Compress>,
            /// Bytes of the client's space grant this write spends (its
            /// `grant::cost`, or 0: the client waits for this write, and
            /// it may only use space not granted to others).
            grant_used: u64,
            /// Whom the object's bytes count against (the file's owner,
            /// group and project), if the client knows: an object made or
            /// found with another owner takes this one.
            owner: Option<Owner>,
        } => 50, "obj_write", Changes, Any, object = obj;
        /// Read up to `len` bytes; the reply's bulk holds them (short at the
        /// object's end; holes read as zeros).
        ObjRead {
            /// Object.
            obj: ObjRef,
            /// Object offset.
            offset: u64,
            /// Bytes wanted.
            len: u32,
        } => 51, "obj_read", Reads, Any, object = obj;
        /// Set an object's size.
        ObjTruncate {
            /// Object.
            obj: ObjRef,
            /// New size.
            size: u64,
            /// As for `ObjWrite`: the object is made compressed if this
            /// truncate makes it.
            pack: Option<Compress>,
            /// As for `ObjWrite`.
            owner: Option<Owner>,
        } => 52, "obj_truncate", Changes, Any, object = obj;
        /// Deallocate a byte range, keeping the size.
        ObjPunch {
            /// Object.
            obj: ObjRef,
            /// Start.
            offset: u64,
            /// Length.
            len: u64,
        } => 53, "obj_punch", Changes, Any, object = obj;
        /// Make an object's data durable.
        ObjSync {
            /// Object.
            obj: ObjRef,
        } => 54, "obj_sync", Changes, Any, object = obj, session = true;
        /// Reserve `count` new object ids on the OST (for an MDT's pool).
        Precreate {
            /// How many.
            count: u32,
        } => 55, "precreate", Changes, Peers;
        /// Destroy objects (after unlink).
        Destroy {
            /// Objects, all on the receiving OST.
            objs: Vec<ObjRef>,
        } => 56, "destroy", Changes, Peers;
        /// Size of an object (for tools and checks).
        ObjGetSize {
            /// Object.
            obj: ObjRef,
        } => 57, "obj_getsize", Reads, Any, object = obj;
        /// Reserve space for a byte range, keeping the size (fallocate with
        /// KEEP_SIZE: later writes there cannot fail for lack of space).
        ObjAllocate {
            /// Object.
            obj: ObjRef,
            /// Start.
            offset: u64,
            /// Length.
            len: u64,
            /// As for `ObjWrite`.
            owner: Option<Owner>,
        } => 58, "obj_allocate", Changes, Any, object = obj;
        /// Space and inode usage of a target (MDT or OST).
        StatFs => 39, "statfs", Reads, Any;
        /// Start, stop or report the target's scrub (`loom scrub`).
        Scrub {
            /// What to do.
            cmd: ScrubCmd,
        } => 74, "scrub", Reads, Any;
        /// The objects in bucket `bucket` (`objects/XX`) of the OST, with
        /// their sizes and idle times, for `loom fsck`.
        ListObjects {
            /// The bucket, 0..=255.
            bucket: u8,
        } => 76, "list_objects", Reads, Any;
        /// As the MDT's: the jobs and clients this OST served recently.
        JobStats => 80, "job_stats", Reads, Any, by_process = true;
        /// The bytes this OST holds for `who` (who may ask as for the
        /// MDT's). Answered `Reply::QuotaUsage`.
        QuotaUsage {
            /// Whose.
            who: QuotaId,
        } => 98, "quota_usage", Reads, Any;
        /// Recount the bytes this OST holds per id from its objects and
        /// compare (root only). Answered `Reply::QuotaCheck`.
        QuotaCheck => 99, "quota_check", Reads, Any;
        /// MDT0 to an OST: give back what it holds of `who`'s block grant
        /// beyond its usage. Answered `Reply::QuotaGrant` with the usage.
        QuotaRelease {
            /// Whose.
            who: QuotaId,
            /// Its limits changed: forget whether it is limited.
            forget: bool,
        } => 105, "quota_release", Changes, Peers;
        /// MDT to an OST: the file these objects belong to changed owner,
        /// group or project; their bytes count against `owner` from now.
        /// Objects not made yet are skipped (their first write carries
        /// the owner).
        ObjSetOwner {
            /// Objects, all on the receiving OST.
            objs: Vec<ObjRef>,
            /// The new owner.
            owner: Owner,
        } => 106, "obj_set_owner", Changes, Peers;
        /// MGS to an OST: as the MDTs' `Snapshot`.
        Snapshot {
            /// The snapshot.
            id: u32,
            /// The step.
            step: crate::snapshot::SnapStep,
        } => 117, "snapshot", Changes, Peers;
        /// A primary asks a replica what its copy of an object's range
        /// holds: the crc32c of each `chunk` bytes and the object's size
        /// (`Reply::Digest`), to send only what differs.
        ObjDigest {
            /// Object.
            obj: ObjRef,
            /// Start, a multiple of `chunk`.
            offset: u64,
            /// Bytes to cover, at most [`crate::frame::MAX_BULK`] times
            /// 64.
            len: u64,
            /// Bytes per sum, 4 KiB to 4 MiB.
            chunk: u32,
        } => 135, "obj_digest", Reads, Peers, object = obj;
        /// A primary raises a replica's object id watermark to its own:
        /// ids it handed out are never handed out again after a failover.
        RaiseWatermark {
            /// The watermark: ids below it are taken.
            to: u64,
        } => 136, "raise_watermark", Changes, Peers;
    }
}

declare_requests! {
    /// A replica of an MDT, from its primary (see [`crate::replica`]):
    /// the key-value batches the primary applied, in its order, or a step
    /// of bringing the replica up to date. Servers only, each under the
    /// primary's term.
    pub enum KvCopy {
        /// The batches in the bulk ([`crate::replica::kv_wire`]), the
        /// first of them number `from` in the primary's order since it
        /// set the replica's base; with `sync`, answered once they are on
        /// the replica's disk.
        Ship {
            /// The number of the first batch.
            from: u64,
            /// Make them durable before answering.
            sync: bool,
        } => 137, "kv_ship", Changes, Peers;
        /// The crc32c and count of the records in each range
        /// (`Reply::KvSums`), to send only what differs.
        Digest {
            /// The ranges, each in one keyspace.
            ranges: Vec<crate::replica::KvRange>,
        } => 138, "kv_digest", Reads, Peers;
        /// Make `range` hold the records in the bulk (one batch of puts,
        /// [`crate::replica::kv_wire`]) and nothing else.
        Fill {
            /// The range.
            range: crate::replica::KvRange,
        } => 139, "kv_fill", Changes, Peers;
        /// The replica now holds the primary's records as of batch `seq`:
        /// it takes `Ship`s from `seq + 1` on, once this is durable.
        Base {
            /// The last batch the replica's records include.
            seq: u64,
        } => 140, "kv_base", Changes, Peers;
    }
}

/// A request as it travels: for one service, or the transport's liveness
/// check.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Liveness check, any target; answered by the transport. Opcode 1.
    Ping,
    /// To the MGS.
    Mgs(MgsRequest),
    /// To an MDT, from a client.
    Mdt(MdtRequest),
    /// To an MDT, from another MDT.
    Peer(PeerRequest),
    /// To an OST.
    Ost(OstRequest),
    /// To a client, from a server (on the client's connection).
    Client(ClientRequest),
    /// To a replica of an OST, from its primary: a change the primary
    /// made, or a step of bringing the replica up to date. Servers only.
    Replica {
        /// The term the primary serves under; refused under any other.
        term: u64,
        /// The request, as the primary did it.
        req: OstRequest,
    },
    /// To a replica of an MDT, from its primary: its key-value batches,
    /// or a step of bringing the replica up to date. Servers only.
    KvReplica {
        /// The term the primary serves under; refused under any other.
        term: u64,
        /// The request.
        req: KvCopy,
    },
}

/// `Ping`'s declaration.
pub const PING: Op = Op {
    opcode: 1,
    name: "ping",
    effect: Effect::Reads,
    senders: Senders::Any,
    shows: Shows::Nothing,
    makes: false,
    by_process: false,
    session: true,
};

impl Request {
    /// This request's declaration.
    pub const fn op(&self) -> Op {
        match self {
            Request::Ping => PING,
            Request::Mgs(r) => r.op(),
            Request::Mdt(r) => r.op(),
            Request::Peer(r) => r.op(),
            Request::Ost(r) => r.op(),
            Request::Client(r) => r.op(),
            Request::Replica { req, .. } => req.op(),
            Request::KvReplica { req, .. } => req.op(),
        }
    }

    /// The opcode carried in the frame header.
    pub const fn opcode(&self) -> u16 {
        self.op().opcode
    }

    /// Where the 4 KiB pieces of this request's bulk start, carried in the
    /// frame header (see [`crate::chunk_sums`]): a write to an object at
    /// an offset off its block boundaries has its pieces line up with the
    /// object's blocks, so the OST takes every whole block's sum from the
    /// check of the frame. 0 for every other request.
    pub const fn bulk_phase(&self) -> u16 {
        match self {
            Request::Ost(OstRequest::ObjWrite { offset, .. })
            | Request::Replica {
                req: OstRequest::ObjWrite { offset, .. },
                ..
            } => crate::chunk_sums::phase_for(*offset),
            _ => 0,
        }
    }

    /// A short name for logs and statistics.
    pub const fn name(&self) -> &'static str {
        self.op().name
    }

    /// The space and inode usage question, for a target of `role` (every
    /// service answers it).
    pub const fn statfs(role: Role) -> Request {
        match role {
            Role::Mgs => Request::Mgs(MgsRequest::StatFs),
            Role::Mdt => Request::Mdt(MdtRequest::StatFs),
            Role::Ost => Request::Ost(OstRequest::StatFs),
        }
    }

    /// Only servers may send it.
    pub const fn peers_only(&self) -> bool {
        matches!(self, Request::Replica { .. } | Request::KvReplica { .. })
            || matches!(self.op().senders, Senders::Peers)
    }
}

impl From<MgsRequest> for Request {
    fn from(r: MgsRequest) -> Request {
        Request::Mgs(r)
    }
}

impl From<MdtRequest> for Request {
    fn from(r: MdtRequest) -> Request {
        Request::Mdt(r)
    }
}

impl From<PeerRequest> for Request {
    fn from(r: PeerRequest) -> Request {
        Request::Peer(r)
    }
}

impl From<ClientRequest> for Request {
    fn from(r: ClientRequest) -> Request {
        Request::Client(r)
    }
}

impl From<OstRequest> for Request {
    fn from(r: OstRequest) -> Request {
        Request::Ost(r)
    }
}

/// Every declared operation of every service, `Ping` first.
pub fn all_ops() -> impl Iterator<Item = Op> {
    std::iter::once(PING)
        .chain(MgsRequest::OPS.iter().copied())
        .chain(MdtRequest::OPS.iter().copied())
        .chain(PeerRequest::OPS.iter().copied())
        .chain(OstRequest::OPS.iter().copied())
        .chain(ClientRequest::OPS.iter().copied())
        .chain(KvCopy::OPS.iter().copied())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn declared_facts_agree_with_each_other() {
        for op in MdtRequest::OPS {
            // Only reads show what a lease may cover; an operation that
            // makes an inode is kept for replay.
            if op.shows != Shows::Nothing {
                assert_eq!(op.effect, Effect::Reads, "{} shows inodes", op.name);
            }
            if op.makes {
                assert_eq!(op.effect, Effect::Once, "{} makes an inode", op.name);
            }
        }
        let (a, b) = (Fid::new(1, 1), Fid::new(1, 2));
        let name = |s: &str| Name::from(s);
        let mut rename = MdtRequest::Rename {
            parent: a,
            name: name("x"),
            new_parent: b,
            new_name: name("y"),
            flags: 0,
            keep_orphan: false,
        };
        assert_eq!(rename.routed_by(), Some(a));
        let (x, y) = (name("x"), name("y"));
        assert_eq!(rename.dir_names(), vec![(a, Some(&x)), (b, Some(&y))]);
        rename.reroute_names(|d, n| if n == "y" { a } else { d });
        assert_eq!(rename.dir_names(), vec![(a, Some(&x)), (a, Some(&y))]);
        let list = MdtRequest::Readdir {
            fid: b,
            cookie: 7,
            max: 10,
        };
        assert_eq!(list.listing(), Some((b, 7)));
        assert_eq!(list.dir_names(), vec![(b, None)]);
        assert_eq!(list.op().shows, Shows::List);
        // Only per-job statistics are the process's to answer.
        for ops in [MdtRequest::OPS, OstRequest::OPS] {
            let by_process: Vec<_> = ops
                .iter()
                .filter(|o| o.by_process)
                .map(|o| o.name)
                .collect();
            assert_eq!(by_process, ["job_stats"]);
        }
        assert_eq!(MdtRequest::StatFs.routed_by(), None);
        assert!(MdtRequest::StatFs.dir_names().is_empty());
        let set = PeerRequest::SetEntry {
            intent: IntentRef {
                coord: 0,
                id: 1,
                index: 0,
            },
            dir: b,
            name: x.clone(),
            expect: None,
            to: None,
            nlink: 0,
            maker: 0,
        };
        assert_eq!(set.routed_by(), Some(b));
    }

    #[test]
    fn one_opcode_means_one_operation_everywhere() {
        let mut seen: HashMap<u16, Op> = HashMap::new();
        let mut names: HashMap<&str, u16> = HashMap::new();
        for op in all_ops() {
            if let Some(prev) = seen.insert(op.opcode, op) {
                assert_eq!(prev, op, "opcode {} declared twice, differently", op.opcode);
            }
            if let Some(prev) = names.insert(op.name, op.opcode) {
                assert_eq!(prev, op.opcode, "name {} has two opcodes", op.name);
            }
        }
        // Inside one service an opcode appears once.
        for ops in [
            MgsRequest::OPS,
            MdtRequest::OPS,
            PeerRequest::OPS,
            OstRequest::OPS,
            ClientRequest::OPS,
            KvCopy::OPS,
        ] {
            let mut codes: Vec<u16> = ops.iter().map(|o| o.opcode).collect();
            codes.sort_unstable();
            let n = codes.len();
            codes.dedup();
            assert_eq!(codes.len(), n, "an opcode repeats inside one service");
        }
    }

    #[test]
    fn a_request_reports_its_own_declaration() {
        let r = Request::from(MdtRequest::Create {
            parent: Fid::ROOT,
            name: "a".into(),
            kind: FileKind::File,
            perm: 0o644,
            rdev: 0,
            stripe: None,
        });
        assert_eq!((r.opcode(), r.name()), (23, "create"));
        assert_eq!(r.op().effect, Effect::Once);
        assert!(!r.peers_only());
        let p = Request::from(PeerRequest::SealDir { fid: Fid::ROOT });
        assert!(p.peers_only());
        let d = Request::from(OstRequest::Destroy { objs: vec![] });
        assert!(d.peers_only());
        assert!(!Request::from(OstRequest::StatFs).peers_only());
    }

    #[test]
    fn every_peer_to_peer_step_is_for_peers_only() {
        assert!(PeerRequest::OPS.iter().all(|o| o.senders == Senders::Peers));
    }
}
