//! Crash-safe replacement of small files.

use std::fs;
use std::io::Write;
use std::path::Path;

/// Replace `path` with `data` so that after a crash either the old or the
/// new contents are there, never a mix: write a temporary file, fsync it,
/// rename it over `path`, fsync the directory.
pub fn write_atomic(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = path.with_extension("tmp");
    {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(data)?;
        // fsync the file: its contents must be on disk before the rename.
        f.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    // fsync the directory: the new name must survive a crash.
    fs::File::open(dir)?.sync_all()?;
    Ok(())
}

/// fsync every file and directory under `dir`, and `dir` itself: a tree
/// just made (a snapshot's image) survives a crash whole.
pub fn sync_tree(dir: &Path) -> std::io::Result<()> {
    for ent in fs::read_dir(dir)? {
        let ent = ent?;
        if ent.file_type()?.is_dir() {
            sync_tree(&ent.path())?;
        } else {
            fs::File::open(ent.path())?.sync_all()?;
        }
    }
    fs::File::open(dir)?.sync_all()
}
