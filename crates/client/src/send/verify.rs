//! Checksums of a tree, to compare a replica with what was sent
//! (`loom replicate --verify`): every name's kind, owner, mode,
//! modification time and size, a file's contents' crc32c, a symbolic
//! link's target.

use super::image::Image;
use crate::ctx::Caller;
use crate::Client;
use loom_proto::msg::FileKind;
use loom_proto::Errno;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Path to what it holds, as a line.
pub type Sums = BTreeMap<Vec<u8>, String>;

/// The checksums of the tree at `tree` (a path) as `client` reads it.
pub async fn checksums(client: &Arc<Client>, c: &Caller, tree: &[u8]) -> Result<Sums, Errno> {
    let root = client.resolve_path_as(c, tree).await?;
    let img = Image::walk(client, c, root.fid, |_| {}).await?;
    let mut out = Sums::new();
    for (fid, node) in &img.nodes {
        let a = &node.attr;
        let what = match a.kind {
            FileKind::File => {
                let layout = client.get_layout_as(c, *fid).await?;
                let f = client.open_as(c, *fid, layout, a.size);
                let mut sum = 0u32;
                let mut off = 0u64;
                while off < a.size {
                    let want = (a.size - off).min(1 << 20) as usize;
                    let b = f.read(off, want).await?;
                    if b.is_empty() {
                        break;
                    }
                    sum = crc32c::crc32c_append(sum, &b);
                    off += b.len() as u64;
                }
                format!("file size={} crc32c={sum:08x}", a.size)
            }
            FileKind::Symlink => format!(
                "symlink -> {}",
                String::from_utf8_lossy(client.readlink(c, *fid).await?.as_bytes())
            ),
            k => format!("{k:?}"),
        };
        let line = format!(
            "{what} mode={:o} uid={} gid={} mtime={}.{:09}",
            a.perm, a.uid, a.gid, a.mtime.sec, a.mtime.nsec
        );
        let paths: Vec<Vec<u8>> = if *fid == img.root {
            vec![Vec::new()]
        } else {
            node.names.iter().map(|(d, n)| img.path(*d, n)).collect()
        };
        for p in paths {
            out.insert(p, line.clone());
        }
    }
    Ok(out)
}
