//! Leases: what a client may keep knowing until its MDT recalls it.
//!
//! Which leases an answer grants is decided here, once, for both sides:
//! the MDT records them against the client, and the client trusts what
//! the answer said for as long as it holds them. An answer grants them
//! only when its commit state says `leased` (the MDT may refuse, when a
//! change crossed the read or a recall is under way).
//!
//! Attributes are granted only for inodes on the answering MDT (`local`):
//! a change to an inode is made, and recalled, by the MDT that holds it.

use crate::fid::Fid;
use crate::msg::{Effects, MdtRequest, Reply};
use crate::name::Name;
use crate::requests::Shows;
use crate::Errno;
use serde::{Deserialize, Serialize};

/// One thing a client may keep knowing while its MDT holds it to tell
/// the client before anyone else changes it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Lease {
    /// An inode's attributes (mode, owner, size, times, links).
    Attr(Fid),
    /// What a name in a directory leads to, or that it is absent.
    Name(Fid, Name),
    /// Every name of a directory: it has no names but those known.
    List(Fid),
    /// A regular file's size and mtime: the holder (the client that made
    /// the file) may have written past what the MDT knows, and reports it
    /// when recalled. Any other client's read of the file's attributes,
    /// or change to it, recalls it first.
    Size(Fid),
    /// An empty directory that one client writes back (issue #32): it
    /// answers changes in it itself and sends them later, in batches.
    /// Taken with `TakeWriteBack`, held by one client. Any other client's
    /// request on the directory or a name in it recalls it, and the
    /// holder sends what it has not sent yet before it answers.
    WriteBack(Fid),
}

/// The leases an answer to read `req` grants: a lookup the name (also
/// when absent) and the inode's attributes, a stat or an open the
/// attributes, a listing its names and their inodes' attributes, and the
/// whole list when one page held it all.
pub fn granted_by_read(
    req: &MdtRequest,
    result: Result<&Reply, Errno>,
    local: impl Fn(Fid) -> bool,
) -> Vec<Lease> {
    let attr = |fid: Fid| local(fid).then_some(Lease::Attr(fid));
    // What the answer shows is declared with each operation (`Op::shows`);
    // the names and the inode are the request's declared ones.
    match req.op().shows {
        Shows::Nothing | Shows::Attrs => Vec::new(),
        Shows::Entry => {
            let names = req.dir_names().into_iter();
            let mut v: Vec<Lease> = names
                .filter_map(|(dir, name)| Some(Lease::Name(dir, name?.clone())))
                .collect();
            match result {
                Ok(Reply::Entry { attr: a, .. }) => v.extend(attr(a.fid)),
                Err(Errno::ENOENT) => {}
                _ => v.clear(),
            }
            v
        }
        Shows::Attr => match (req.routed_by(), result) {
            (Some(fid), Ok(Reply::Attr(_) | Reply::Entry { .. })) => {
                attr(fid).into_iter().collect()
            }
            _ => Vec::new(),
        },
        Shows::List => {
            let Ok(Reply::Dir { entries, eof }) = result else {
                return Vec::new();
            };
            let Some((fid, from)) = req.listing() else {
                return Vec::new();
            };
            let mut v = Vec::with_capacity(entries.len() * 2 + 1);
            for e in entries {
                v.push(Lease::Name(fid, e.name.clone()));
                v.extend(attr(e.attr.fid));
            }
            // The whole list: one page from the start held it all.
            if *eof && from == 0 {
                v.push(Lease::List(fid));
            }
            v
        }
    }
}

/// The leases a change grants its maker: the attributes and names it
/// reported, the whole (empty) list of a plain directory it made on the
/// answering MDT, and the size of a regular file it made there.
pub fn granted_by_change(reply: &Reply, e: &Effects) -> Vec<Lease> {
    let mut v: Vec<Lease> = e.attrs.iter().map(|a| Lease::Attr(a.fid)).collect();
    for (dir, name, _) in &e.names {
        v.push(Lease::Name(*dir, name.clone()));
    }
    if let Reply::Entry { attr, layout } = reply {
        // Made here: named by the change and among the inodes it touched
        // on this MDT (a remote directory lives on another).
        let made = e.names.iter().any(|(_, _, f)| *f == Some(attr.fid))
            && e.attrs.iter().any(|a| a.fid == attr.fid);
        match (attr.kind, layout) {
            (crate::msg::FileKind::Dir, None) if made => v.push(Lease::List(attr.fid)),
            // A new file (a link's reply, of a file with more names, is not).
            (crate::msg::FileKind::File, Some(_)) if made && attr.nlink == 1 => {
                v.push(Lease::Size(attr.fid))
            }
            _ => {}
        }
    }
    v
}

/// The leases to recall from other clients before answering a read of
/// `req` with `result`: of the inodes whose attributes it returns (`local`
/// as in [`granted_by_read`]), the size leases (their holders wrote past
/// the size the MDT knows) and the write-back leases (their holders
/// changed the directory, its times and links, and did not send it yet).
pub fn recalled_by_read(
    req: &MdtRequest,
    result: Result<&Reply, Errno>,
    local: impl Fn(Fid) -> bool,
) -> Vec<Lease> {
    granted_by_read(req, result, local)
        .into_iter()
        .flat_map(|l| match l {
            Lease::Attr(f) => vec![Lease::Size(f), Lease::WriteBack(f)],
            _ => Vec::new(),
        })
        .collect()
}

/// The leases a change must recall from everyone but its maker: every
/// inode it touched or removed (its attributes and size, and a directory
/// written back: what its holder did there goes first), every name it
/// set or removed, and those names' directory lists.
pub fn touched_by_change(e: &Effects) -> Vec<Lease> {
    let inodes = e
        .attrs
        .iter()
        .map(|a| a.fid)
        .chain(e.removed.iter().copied());
    let mut v: Vec<Lease> = inodes
        .flat_map(|f| [Lease::Attr(f), Lease::Size(f), Lease::WriteBack(f)])
        .collect();
    for (dir, name, _) in &e.names {
        v.push(Lease::Name(*dir, name.clone()));
        let list = Lease::List(*dir);
        if !v.contains(&list) {
            v.push(list);
        }
    }
    v
}
