//! `loom fsck`: Lustre's LFSCK, online, in two parts.
//!
//! - **Namespace.** Every MDT's inodes and entries are read, and checked
//!   together: entries that name no inode (dangling), inodes that no
//!   entry names (orphans; open-unlinked files are kept on purpose),
//!   link counts that differ from the names (a directory's: 2 and one per
//!   subdirectory), striped directories whose shards are missing, and
//!   entries in a shard their name does not hash to (which lookups, going
//!   to the right shard, never find), and directories whose inode names
//!   another parent than the directory holding their entry (a wrong `..`,
//!   which a crash between the steps of a cross-MDT operation could
//!   leave). With `--repair`, a dangling entry is removed, a link count
//!   and a parent set, an orphan given a name in
//!   `/lost+found/MDTxxxx` (on its own MDT), and a misplaced entry moved
//!   to its shard (added there, then removed from where it was: a repair
//!   cut between the two leaves a duplicate the next run removes).
//! - **Objects.** OST objects that no file refers to (left by a crash
//!   between a file's create and its commit, or by a destroy that never
//!   reached its OST) are reported with their sizes and, with `--repair`,
//!   reclaimed.
//!
//! Safe against changes meanwhile: the namespace is read twice and only
//! what both readings show is a problem; the MDTs' object references are
//! read before and after the OSTs are listed (an object either names is
//! kept), and an object written in the last `--min-age` seconds is never
//! a candidate (a create whose MDT is still waiting for its client's
//! replay refers to it only once replayed).

use crate::registry;
use crate::tools::{connect, errno, Session};
use clap::Args;
use loom_proto::fid::name_hash;
use loom_proto::msg::{DirStripe, FileKind, FsckFix, FsckItem, FsckScan, ObjInfo, Role};
use loom_proto::{Errno, Fid, Name, ObjRef};
use std::collections::{HashMap, HashSet};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

/// Options of `loom fsck`.
#[derive(Args)]
#[command(
    after_help = "Checks the namespace of every MDT (entries that name no inode, inodes \
that no entry names, link counts, striped directories' shards and entries in the wrong shard) and \
every OST object against the layouts of the files (objects no file refers to), online, as Lustre's \
LFSCK. --repair removes dangling entries, sets link counts, gives orphan inodes a name in \
/lost+found/MDTxxxx, moves entries to their shard and reclaims orphan objects. Exit status, as e2fsck: 0 nothing found, 1 found and repaired, 4 found \
and left (run again with --repair), 8 the check itself failed."
)]
pub struct FsckArgs {
    /// A path on the loomfs mount (its mount point or anything under it).
    pub path: PathBuf,
    /// Repair what is found (root only).
    #[arg(long)]
    pub repair: bool,
    /// Leave alone objects written in the last SECS seconds: a file being
    /// made, or one whose create an MDT is still replaying after a crash,
    /// may refer to them soon. Longer than the MDTs' recovery window.
    #[arg(long, value_name = "SECS", default_value_t = 600)]
    pub min_age: u64,
}

/// Exit codes, as e2fsck's.
const FOUND_REPAIRED: u8 = 1;
const FOUND_LEFT: u8 = 4;
const CHECK_FAILED: u8 = 8;

pub fn fsck(a: FsckArgs) -> ExitCode {
    check(&a).unwrap_or_else(|e| {
        eprintln!("loom fsck: {e:#}");
        ExitCode::from(CHECK_FAILED)
    })
}

/// What was found and what became of it.
#[derive(Default)]
struct Outcome {
    found: usize,
    left: usize,
}

fn check(a: &FsckArgs) -> anyhow::Result<ExitCode> {
    let (entry, _) = registry::find(&a.path)?;
    let s = connect(entry)?;
    let mut o = Outcome::default();
    namespace(&s, a, &mut o)?;
    objects(&s, a, &mut o)?;
    Ok(match (o.found, o.left) {
        (0, _) => {
            println!("fsck: no problems found");
            ExitCode::SUCCESS
        }
        (_, 0) => ExitCode::from(FOUND_REPAIRED),
        _ => {
            if !a.repair {
                println!("fsck: run again with --repair to repair them");
            }
            ExitCode::from(FOUND_LEFT)
        }
    })
}

fn indices(s: &Session, role: Role) -> Vec<u32> {
    let mut v: Vec<u32> = s
        .client
        .router()
        .config()
        .targets
        .iter()
        .filter(|t| t.id.role == role)
        .map(|t| t.id.index)
        .collect();
    v.sort();
    v
}

/// An inode as the check needs it.
struct Inode {
    mdt: u32,
    kind: FileKind,
    nlink: u32,
    size: u64,
    /// A directory's parent, as its inode records it (its `..`).
    parent: Fid,
    shards: Vec<Fid>,
}

/// Every MDT's namespace, read once.
#[derive(Default)]
struct Namespace {
    inodes: HashMap<Fid, Inode>,
    /// (MDT holding the entry, directory, name, inode named, its type).
    entries: Vec<(u32, Fid, Name, Fid, FileKind)>,
    /// Open-unlinked files: no name is right for them.
    kept: HashSet<Fid>,
}

/// An inconsistency of the namespace.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Problem {
    /// An entry whose inode does not exist.
    Dangling {
        mdt: u32,
        parent: Fid,
        name: Name,
        fid: Fid,
    },
    /// An inode no entry names.
    Orphan {
        mdt: u32,
        fid: Fid,
        kind: String,
        size: u64,
    },
    /// An inode whose link count is not what its names say.
    Links {
        mdt: u32,
        fid: Fid,
        has: u32,
        should: u32,
    },
    /// A striped directory whose shard does not exist.
    Shard { master: Fid, shard: Fid },
    /// A directory whose inode names another parent than the directory
    /// whose entry names it (its `..` is wrong).
    Parent {
        mdt: u32,
        fid: Fid,
        has: Fid,
        should: Fid,
    },
    /// An entry of striped directory `master` in a shard its name does
    /// not hash to.
    WrongShard {
        mdt: u32,
        master: Fid,
        shard: Fid,
        name: Name,
        fid: Fid,
        kind: FileKind,
        /// The shard it belongs in, and that shard's MDT.
        right: Fid,
        right_mdt: u32,
        /// What the right shard holds under the name.
        there: Held,
    },
}

/// What the right shard of a misplaced entry holds under its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Held {
    /// Nothing: the entry moves there.
    Nothing,
    /// The same inode (a move cut short): the misplaced entry goes.
    Same,
    /// Another inode: two files of one name; left for an administrator.
    Other(Fid),
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Problem::Dangling { mdt, parent, name, fid } => write!(
                f,
                "dangling entry: {name:?} in directory {parent} (MDT{mdt:04x}) names {fid}, which does not exist"
            ),
            Problem::Orphan { mdt, fid, kind, size } => write!(
                f,
                "orphan inode: {fid} on MDT{mdt:04x}, a {kind} of {size} bytes, has no name"
            ),
            Problem::Links { mdt, fid, has, should } => write!(
                f,
                "wrong link count: {fid} on MDT{mdt:04x} has nlink {has}, its names say {should}"
            ),
            Problem::Shard { master, shard } => write!(
                f,
                "inconsistent striped directory: {master} lists shard {shard}, which does not exist"
            ),
            Problem::Parent { mdt, fid, has, should } => write!(
                f,
                "wrong parent: directory {fid} on MDT{mdt:04x} says its parent is {has}, its entry is in {should}"
            ),
            Problem::WrongShard { mdt, master, shard, name, fid, right, right_mdt, there, .. } => {
                write!(
                    f,
                    "entry in the wrong shard: {name:?} (naming {fid}) of striped directory {master} is in shard {shard} (MDT{mdt:04x}), its name hashes to shard {right} (MDT{right_mdt:04x})"
                )?;
                match there {
                    Held::Nothing => Ok(()),
                    Held::Same => write!(f, ", which names it too"),
                    Held::Other(o) => write!(f, ", where the name is {o}'s"),
                }
            }
        }
    }
}

fn read_namespace(s: &Session) -> anyhow::Result<Namespace> {
    let mut ns = Namespace::default();
    for mdt in indices(s, Role::Mdt) {
        for what in [FsckScan::Inodes, FsckScan::Entries, FsckScan::Orphans] {
            let mut after = Vec::new();
            loop {
                let (items, next) =
                    s.rt.block_on(s.client.fsck_scan(mdt, what, after))
                        .map_err(|e| errno(e, &format!("reading MDT{mdt:04x}")))?;
                for it in items {
                    match it {
                        FsckItem::Inode {
                            fid,
                            kind,
                            nlink,
                            size,
                            parent,
                            shards,
                        } => {
                            ns.inodes.insert(
                                fid,
                                Inode {
                                    mdt,
                                    kind,
                                    nlink,
                                    size,
                                    parent,
                                    shards,
                                },
                            );
                        }
                        FsckItem::Entry {
                            parent,
                            name,
                            fid,
                            kind,
                        } => ns.entries.push((mdt, parent, name, fid, kind)),
                        FsckItem::Orphan { fid } => {
                            ns.kept.insert(fid);
                        }
                    }
                }
                match next {
                    Some(n) => after = n,
                    None => break,
                }
            }
        }
    }
    Ok(ns)
}

/// What is wrong with `ns`, in a stable order.
fn problems(ns: &Namespace) -> Vec<Problem> {
    let mut out = Vec::new();
    // Shards other than shard 0 (the master) are named by their master's
    // layout, not by an entry.
    let shards: HashSet<Fid> = ns
        .inodes
        .values()
        .flat_map(|i| i.shards.iter().skip(1).copied())
        .collect();
    // Each shard: its striped directory's layout, as (master, shards).
    let striped: HashMap<Fid, (Fid, &[Fid])> = ns
        .inodes
        .iter()
        .filter(|(_, i)| i.shards.len() > 1)
        .flat_map(|(m, i)| {
            i.shards
                .iter()
                .map(move |s| (*s, (*m, i.shards.as_slice())))
        })
        .collect();
    // Names in shards, to see what a misplaced entry's right shard holds.
    let named: HashMap<(Fid, &Name), Fid> = ns
        .entries
        .iter()
        .filter(|(_, parent, ..)| striped.contains_key(parent))
        .map(|(_, parent, name, fid, _)| ((*parent, name), *fid))
        .collect();
    let mut names: HashMap<Fid, u32> = HashMap::new();
    let mut subdirs: HashMap<Fid, u32> = HashMap::new();
    // The directory holding each directory's entry (a directory has one).
    let mut holder: HashMap<Fid, Fid> = HashMap::new();
    for (mdt, parent, name, fid, kind) in &ns.entries {
        // Where the entry is, or will be once repaired.
        let mut home = *parent;
        if let Some((master, shards)) = striped.get(parent) {
            let right = shards[(name_hash(name.as_bytes()) % shards.len() as u64) as usize];
            if right != *parent {
                let there = match named.get(&(right, name)) {
                    None => Held::Nothing,
                    Some(f) if f == fid => Held::Same,
                    Some(f) => Held::Other(*f),
                };
                if let Some(r) = ns.inodes.get(&right) {
                    out.push(Problem::WrongShard {
                        mdt: *mdt,
                        master: *master,
                        shard: *parent,
                        name: name.clone(),
                        fid: *fid,
                        kind: *kind,
                        right,
                        right_mdt: r.mdt,
                        there,
                    });
                }
                match there {
                    // A second entry for one name: not a second link.
                    Held::Same => continue,
                    Held::Nothing => home = right,
                    Held::Other(_) => {}
                }
            }
        }
        *names.entry(*fid).or_default() += 1;
        if *kind == FileKind::Dir {
            *subdirs.entry(*parent).or_default() += 1;
            holder.insert(*fid, home);
        }
        if !ns.inodes.contains_key(fid) {
            out.push(Problem::Dangling {
                mdt: *mdt,
                parent: *parent,
                name: name.clone(),
                fid: *fid,
            });
        }
    }
    for (fid, i) in &ns.inodes {
        if shards.contains(fid) {
            continue;
        }
        let n = names.get(fid).copied().unwrap_or(0);
        if n == 0 && *fid != Fid::ROOT {
            if !ns.kept.contains(fid) {
                out.push(Problem::Orphan {
                    mdt: i.mdt,
                    fid: *fid,
                    kind: format!("{:?}", i.kind).to_lowercase(),
                    size: i.size,
                });
            }
            continue;
        }
        if i.kind == FileKind::Dir && n == 1 {
            if let Some(h) = holder.get(fid).filter(|h| **h != i.parent) {
                out.push(Problem::Parent {
                    mdt: i.mdt,
                    fid: *fid,
                    has: i.parent,
                    should: *h,
                });
            }
        }
        // A striped directory's subdirectories are counted in its shards.
        let should = match i.kind {
            FileKind::Dir if i.shards.is_empty() => 2 + subdirs.get(fid).copied().unwrap_or(0),
            FileKind::Dir => continue,
            _ => n,
        };
        if i.nlink != should {
            out.push(Problem::Links {
                mdt: i.mdt,
                fid: *fid,
                has: i.nlink,
                should,
            });
        }
        for s in i.shards.iter().skip(1) {
            if !ns.inodes.contains_key(s) {
                out.push(Problem::Shard {
                    master: *fid,
                    shard: *s,
                });
            }
        }
    }
    out.sort();
    out
}

fn namespace(s: &Session, a: &FsckArgs, o: &mut Outcome) -> anyhow::Result<()> {
    let first = problems(&read_namespace(s)?);
    let ns = read_namespace(s)?;
    // What changed between the two readings is a change under way, not a
    // problem.
    let second: HashSet<Problem> = problems(&ns).into_iter().collect();
    let found: Vec<Problem> = first.into_iter().filter(|p| second.contains(p)).collect();
    println!(
        "fsck: namespace: {} inodes, {} entries on {} MDTs checked",
        ns.inodes.len(),
        ns.entries.len(),
        indices(s, Role::Mdt).len()
    );
    for p in &found {
        println!("{p}");
    }
    o.found += found.len();
    if !a.repair {
        o.left += found.len();
        return Ok(());
    }
    for p in &found {
        match repair(s, p) {
            Ok(Some(what)) => println!("repaired: {what}"),
            Ok(None) => {
                println!("not repaired: {p}");
                o.left += 1;
            }
            Err(e) => {
                println!("not repaired: {p}: {e:#}");
                o.left += 1;
            }
        }
    }
    Ok(())
}

/// Repair `p`; what was done, or `None` when fsck cannot repair it.
fn repair(s: &Session, p: &Problem) -> anyhow::Result<Option<String>> {
    let fix = |mdt: u32, fix: FsckFix| {
        s.rt.block_on(s.client.fsck_repair(mdt, fix))
            .map_err(|e| errno(e, "repairing"))
    };
    match p {
        Problem::Dangling {
            mdt, parent, name, ..
        } => {
            fix(
                *mdt,
                FsckFix::DropEntry {
                    parent: *parent,
                    name: name.clone(),
                },
            )?;
            Ok(Some(format!("removed entry {name:?} of {parent}")))
        }
        Problem::Links {
            mdt, fid, should, ..
        } => {
            fix(
                *mdt,
                FsckFix::SetNlink {
                    fid: *fid,
                    nlink: *should,
                },
            )?;
            Ok(Some(format!("set the link count of {fid} to {should}")))
        }
        Problem::Orphan { mdt, fid, .. } => {
            let dir = lost_and_found(s, *mdt)?;
            let name = Name::from(fid.to_string().as_bytes());
            fix(
                *mdt,
                FsckFix::Adopt {
                    fid: *fid,
                    dir,
                    name,
                },
            )?;
            Ok(Some(format!(
                "linked {fid} as /lost+found/MDT{mdt:04x}/{fid}"
            )))
        }
        Problem::Shard { .. } => Ok(None),
        Problem::Parent {
            mdt, fid, should, ..
        } => {
            fix(
                *mdt,
                FsckFix::SetParent {
                    fid: *fid,
                    parent: *should,
                },
            )?;
            Ok(Some(format!("set the parent of {fid} to {should}")))
        }
        Problem::WrongShard {
            mdt,
            shard,
            name,
            fid,
            kind,
            right,
            right_mdt,
            there,
            ..
        } => {
            let moved = match there {
                Held::Other(_) => return Ok(None),
                Held::Same => false,
                Held::Nothing => {
                    fix(
                        *right_mdt,
                        FsckFix::PutEntry {
                            parent: *right,
                            name: name.clone(),
                            fid: *fid,
                            kind: *kind,
                        },
                    )?;
                    true
                }
            };
            fix(
                *mdt,
                FsckFix::DropEntry {
                    parent: *shard,
                    name: name.clone(),
                },
            )?;
            Ok(Some(if moved {
                format!("moved entry {name:?} from shard {shard} to shard {right}")
            } else {
                format!("removed entry {name:?} of shard {shard}, a duplicate of shard {right}'s")
            }))
        }
    }
}

/// `/lost+found/MDTxxxx`, on MDT `mdt`, made if missing.
fn lost_and_found(s: &Session, mdt: u32) -> anyhow::Result<Fid> {
    let c = loom_client::Caller::current();
    let rt = &s.rt;
    let client = &s.client;
    let get = |parent: Fid, name: &str| -> anyhow::Result<Option<Fid>> {
        match rt.block_on(client.lookup(&c, parent, name)) {
            Ok((a, _)) => Ok(Some(a.fid)),
            Err(Errno::ENOENT) => Ok(None),
            Err(e) => Err(errno(e, &format!("looking up {name}"))),
        }
    };
    let top = match get(Fid::ROOT, "lost+found")? {
        Some(f) => f,
        None => {
            rt.block_on(client.mkdir(&c, Fid::ROOT, "lost+found", 0o700))
                .map_err(|e| errno(e, "making /lost+found"))?
                .fid
        }
    };
    let name = format!("MDT{mdt:04x}");
    if let Some(f) = get(top, &name)? {
        return Ok(f);
    }
    let stripe = DirStripe {
        count: 1,
        start_mdt: mdt as i32,
    };
    Ok(rt
        .block_on(client.mkdir_striped(&c, top, &name, 0o700, stripe))
        .map_err(|e| errno(e, &format!("making /lost+found/{name}")))?
        .fid)
}

fn objects(s: &Session, a: &FsckArgs, o: &mut Outcome) -> anyhow::Result<()> {
    let before = referenced(s)?;
    let osts = indices(s, Role::Ost);
    let tty = std::io::stderr().is_terminal();
    let mut candidates: Vec<(ObjRef, ObjInfo)> = Vec::new();
    let mut listed = 0u64;
    for (k, &ost) in osts.iter().enumerate() {
        for bucket in 0..=255u8 {
            let objs =
                s.rt.block_on(s.client.ost_objects(ost, bucket))
                    .map_err(|e| errno(e, &format!("listing OST{ost:04x}")))?;
            listed += objs.len() as u64;
            for obj in objs {
                let r = ObjRef { ost, oid: obj.oid };
                if !before.contains(&r) && obj.idle_secs >= a.min_age {
                    candidates.push((r, obj));
                }
            }
            if tty {
                eprint!(
                    "\rfsck: objects: OST {} of {}, {:.0}%   ",
                    k + 1,
                    osts.len(),
                    100.0 * f64::from(bucket) / 255.0
                );
                let _ = std::io::stderr().flush();
            }
        }
    }
    if tty {
        eprintln!();
    }
    // Files made while the OSTs were listed refer to their objects now.
    let after = referenced(s)?;
    candidates.retain(|(r, _)| !after.contains(r));
    let fs = &s.entry.fsname;
    println!(
        "fsck: objects: {} MDT references, {listed} objects on {} OSTs checked",
        before.len(),
        osts.len()
    );
    for (r, info) in &candidates {
        println!(
            "orphan object: {fs}-OST{:04x} object {}, {} bytes, last written {} s ago",
            r.ost, r.oid, info.size, info.idle_secs
        );
    }
    if candidates.is_empty() {
        return Ok(());
    }
    let bytes: u64 = candidates.iter().map(|(_, i)| i.size).sum();
    println!(
        "fsck: {} objects no file refers to, {bytes} bytes",
        candidates.len()
    );
    o.found += candidates.len();
    if !a.repair {
        o.left += candidates.len();
        return Ok(());
    }
    let objs: Vec<ObjRef> = candidates.iter().map(|(r, _)| *r).collect();
    for chunk in objs.chunks(4096) {
        s.rt.block_on(s.client.reclaim_objects(chunk.to_vec()))
            .map_err(|e| errno(e, "reclaiming objects"))?;
    }
    println!("repaired: reclaimed {} objects, {bytes} bytes", objs.len());
    Ok(())
}

fn referenced(s: &Session) -> anyhow::Result<HashSet<ObjRef>> {
    let v =
        s.rt.block_on(s.client.referenced_objects())
            .map_err(|e| errno(e, "reading the MDTs' layouts"))?;
    Ok(v.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inode(mdt: u32, kind: FileKind, nlink: u32, parent: Fid, shards: Vec<Fid>) -> Inode {
        Inode {
            mdt,
            kind,
            nlink,
            size: 0,
            parent,
            shards,
        }
    }

    /// A striped directory over two shards and one file in it, named
    /// `name` in the shards listed in `held_in`.
    fn striped_with(name: &str, held_in: &[usize]) -> (Namespace, [Fid; 2], Fid) {
        let (master, shard1, file) = (
            Fid::new(0x200000400, 2),
            Fid::new(0x240000400, 1),
            Fid::new(0x200000400, 3),
        );
        let shards = [master, shard1];
        let mut ns = Namespace::default();
        ns.inodes
            .insert(Fid::ROOT, inode(0, FileKind::Dir, 3, Fid::ROOT, vec![]));
        ns.inodes.insert(
            master,
            inode(0, FileKind::Dir, 2, Fid::ROOT, shards.to_vec()),
        );
        ns.inodes
            .insert(shard1, inode(1, FileKind::Dir, 2, master, vec![]));
        ns.inodes
            .insert(file, inode(0, FileKind::File, 1, Fid::ROOT, vec![]));
        ns.entries
            .push((0, Fid::ROOT, Name::from("d"), master, FileKind::Dir));
        for &k in held_in {
            ns.entries
                .push((k as u32, shards[k], Name::from(name), file, FileKind::File));
        }
        (ns, shards, file)
    }

    /// A name and the index of the shard it hashes to over two shards.
    fn name_in(shard: usize) -> String {
        (0..)
            .map(|i| format!("n{i}"))
            .find(|n| (name_hash(n.as_bytes()) % 2) as usize == shard)
            .unwrap_or_default()
    }

    #[test]
    fn an_entry_in_the_wrong_shard_is_found_and_a_cut_move_is_a_duplicate() {
        let name = name_in(0);
        // Where it belongs: nothing to say.
        let (ns, ..) = striped_with(&name, &[0]);
        assert_eq!(problems(&ns), vec![]);
        // In the other shard: to be moved.
        let (ns, shards, file) = striped_with(&name, &[1]);
        match problems(&ns).as_slice() {
            [Problem::WrongShard {
                shard,
                right,
                there: Held::Nothing,
                fid,
                right_mdt: 0,
                ..
            }] => {
                assert_eq!((*shard, *right, *fid), (shards[1], shards[0], file));
            }
            other => panic!("{other:?}"),
        }
        // A move cut after its first step: in both. One name, one link:
        // the entry in the wrong shard is a duplicate, the count is right.
        let (ns, ..) = striped_with(&name, &[0, 1]);
        match problems(&ns).as_slice() {
            [Problem::WrongShard {
                there: Held::Same, ..
            }] => {}
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_directory_whose_parent_is_not_where_its_entry_is_is_found() {
        let (mut ns, shards, _) = striped_with(&name_in(0), &[0]);
        let sub = Fid::new(0x240000400, 9);
        let sub_name = name_in(1);
        // Made in shard 1, where its name belongs: its parent is shard 1.
        ns.inodes
            .insert(sub, inode(1, FileKind::Dir, 2, shards[1], vec![]));
        ns.entries.push((
            1,
            shards[1],
            Name::from(sub_name.as_str()),
            sub,
            FileKind::Dir,
        ));
        if let Some(i) = ns.inodes.get_mut(&shards[1]) {
            i.nlink = 3;
        }
        assert_eq!(problems(&ns), vec![]);
        if let Some(i) = ns.inodes.get_mut(&sub) {
            i.parent = Fid::ROOT;
        }
        assert_eq!(
            problems(&ns),
            vec![Problem::Parent {
                mdt: 1,
                fid: sub,
                has: Fid::ROOT,
                should: shards[1]
            }]
        );
    }
}
