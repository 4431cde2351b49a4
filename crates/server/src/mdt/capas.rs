//! Capabilities handed to clients (`loom_proto::capa`): with the answer
//! to a create or an open of a regular file, and on request (`GetCapa`),
//! after the same permission check as an open. OSTs' server processes
//! check them (`crate::node`).

use super::perm::{self, Cred};
use super::request::Rq;
use super::tx::read_inode;
use super::MdtService;
use crate::error::{Handled, ServerError};
use loom_proto::capa::Capa;
use loom_proto::layout::Layout;
use loom_proto::msg::{access, FileKind, MdtRequest, Reply};
use loom_proto::{Errno, Fid};

impl MdtService {
    /// A capability for `layout`'s objects of `fid`.
    fn capa_of(&self, fid: Fid, layout: &Layout, write: bool) -> Capa {
        Capa::sign(&self.peers.capa_key(), fid, layout.objects(), write)
    }

    /// `GetCapa`: for a caller who may open `fid` for reading (and
    /// writing, with `write`).
    pub(super) fn get_capa(&self, rq: &Rq<'_>, fid: Fid, write: bool) -> Handled {
        let r = read_inode(&*self.names.store, fid)?;
        if r.attr.kind != FileKind::File {
            return Err(ServerError::refused(
                Errno::EINVAL,
                format!("{fid} is not a regular file"),
            ));
        }
        let want = if write {
            access::READ | access::WRITE
        } else {
            access::READ
        };
        // A writer need not be a reader: a write-only open's capability.
        let want = match perm::may(&Cred::of(rq), &r, want) {
            Err(_) if write => {
                perm::may(&Cred::of(rq), &r, access::WRITE)?;
                access::WRITE
            }
            other => other.map(|_| want)?,
        };
        let layout = r
            .layout
            .ok_or_else(|| ServerError::refused(Errno::ENODATA, format!("{fid} has no layout")))?;
        Ok(Reply::Capa(self.capa_of(
            fid,
            &layout,
            want & access::WRITE != 0,
        )))
    }

    /// `reply` to `req`, with the file's capability if it created or
    /// opened a regular file with objects: the client needs it for its
    /// first I/O, and gets it without another round trip.
    pub(super) fn with_capa(&self, req: &MdtRequest, reply: Reply) -> Reply {
        let write = match req {
            // A written-back file's first bytes go to its objects right
            // after its `MakeAt`.
            MdtRequest::Create { .. } | MdtRequest::MakeAt { .. } => true,
            MdtRequest::Open { access: a, .. } => a & access::WRITE != 0,
            _ => return reply,
        };
        let entry = match &reply {
            Reply::Changed { reply, .. } => reply.as_ref(),
            r => r,
        };
        let Reply::Entry {
            attr,
            layout: Some(layout),
        } = entry
        else {
            return reply;
        };
        if attr.kind != FileKind::File || layout.objects().is_empty() {
            return reply;
        }
        let capa = self.capa_of(attr.fid, layout, write);
        Reply::WithCapa {
            reply: Box::new(reply),
            capa,
        }
    }
}
