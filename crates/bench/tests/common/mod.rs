//! Helpers shared by the integration tests: targets on temporary
//! directories, a walk of what a workload left on disk, and a recording
//! wrapper around a real `PosixFs` that says which process touched what.

#![allow(dead_code)] // each test binary uses a different subset

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use loom_bench::runner::Target;
use loom_bench::{BenchFile, BenchFs, DirEntry, FileStat, OpenMode, PosixFs};

/// A POSIX target on `dir`.
pub fn target(name: &str, dir: &Path) -> Target {
    let fs = PosixFs::new(dir).expect("temp dir is a usable target");
    Target {
        name: name.into(),
        location: dir.display().to_string(),
        fs_type: fs.fs_type().into(),
        fs: Box::new(fs),
    }
}

/// What is on disk below `root`: relative path -> None for a directory,
/// Some(size) for a file.
pub fn walk(root: &Path) -> BTreeMap<String, Option<u64>> {
    let mut out = BTreeMap::new();
    fn rec(root: &Path, dir: &Path, out: &mut BTreeMap<String, Option<u64>>) {
        for e in std::fs::read_dir(dir).expect("readdir") {
            let e = e.expect("entry");
            let p = e.path();
            let rel = p
                .strip_prefix(root)
                .expect("below root")
                .to_string_lossy()
                .into_owned();
            let m = e.metadata().expect("metadata");
            if m.is_dir() {
                out.insert(rel, None);
                rec(root, &p, out);
            } else {
                out.insert(rel, Some(m.len()));
            }
        }
    }
    rec(root, root, &mut out);
    out
}

/// One call a [`RecordingFs`] saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// `mkdir`, `rmdir`, `create_file`, `read_file`, `stat`, `unlink`,
    /// `readdir`, `open`, `write_at`, `read_at`.
    pub op: &'static str,
    /// The benchmark process that made it (`None` outside a phase).
    pub rank: Option<u32>,
    /// The path (of the file, for `write_at` and `read_at`).
    pub path: PathBuf,
    /// Offset and length of `write_at` / `read_at`.
    pub offset: u64,
    /// Bytes asked for or given.
    pub len: usize,
}

/// The calls of a [`RecordingFs`], shared with the test.
pub type Calls = Arc<Mutex<Vec<Call>>>;

/// A real `PosixFs` that records which process made which call, and can
/// slow each file create down (to make a stonewall cut a create phase).
/// It wraps a real file system; it stands in for nothing.
pub struct RecordingFs {
    inner: PosixFs,
    calls: Calls,
    create_delay: Option<Duration>,
}

impl RecordingFs {
    /// Records every call on `inner`.
    pub fn new(inner: PosixFs) -> Self {
        RecordingFs {
            inner,
            calls: Calls::default(),
            create_delay: None,
        }
    }

    /// Also takes `delay` longer for every create (files and directories).
    pub fn with_create_delay(mut self, delay: Duration) -> Self {
        self.create_delay = Some(delay);
        self
    }

    /// The calls, shared.
    pub fn calls(&self) -> Calls {
        self.calls.clone()
    }

    fn note(&self, op: &'static str, path: &Path, offset: u64, len: usize) {
        note(&self.calls, op, path, offset, len);
    }

    fn slow(&self) {
        if let Some(d) = self.create_delay {
            // A delay that makes each create cost more, not a wait for an event.
            std::thread::sleep(d);
        }
    }
}

fn note(calls: &Calls, op: &'static str, path: &Path, offset: u64, len: usize) {
    calls.lock().expect("calls").push(Call {
        op,
        rank: loom_bench::runner::current_rank(),
        path: path.to_path_buf(),
        offset,
        len,
    });
}

impl BenchFs for RecordingFs {
    fn describe(&self) -> String {
        format!("recording {}", self.inner.describe())
    }
    fn mkdir(&self, p: &Path) -> io::Result<()> {
        self.note("mkdir", p, 0, 0);
        self.slow();
        self.inner.mkdir(p)
    }
    fn rmdir(&self, p: &Path) -> io::Result<()> {
        self.note("rmdir", p, 0, 0);
        self.inner.rmdir(p)
    }
    fn create_file(&self, p: &Path, data: &[u8], fsync: bool) -> io::Result<()> {
        self.note("create_file", p, 0, data.len());
        self.slow();
        self.inner.create_file(p, data, fsync)
    }
    fn read_file(&self, p: &Path, buf: &mut [u8]) -> io::Result<usize> {
        self.note("read_file", p, 0, buf.len());
        self.inner.read_file(p, buf)
    }
    fn stat(&self, p: &Path) -> io::Result<FileStat> {
        self.note("stat", p, 0, 0);
        self.inner.stat(p)
    }
    fn unlink(&self, p: &Path) -> io::Result<()> {
        self.note("unlink", p, 0, 0);
        self.inner.unlink(p)
    }
    fn readdir(&self, p: &Path) -> io::Result<Vec<DirEntry>> {
        self.note("readdir", p, 0, 0);
        self.inner.readdir(p)
    }
    fn open(&self, p: &Path, mode: OpenMode) -> io::Result<Box<dyn BenchFile>> {
        self.note("open", p, 0, 0);
        Ok(Box::new(RecordingFile {
            inner: self.inner.open(p, mode)?,
            path: p.to_path_buf(),
            calls: self.calls.clone(),
        }))
    }
}

struct RecordingFile {
    inner: Box<dyn BenchFile>,
    path: PathBuf,
    calls: Calls,
}

impl BenchFile for RecordingFile {
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        note(&self.calls, "write_at", &self.path, offset, buf.len());
        self.inner.write_at(buf, offset)
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        note(&self.calls, "read_at", &self.path, offset, buf.len());
        self.inner.read_at(buf, offset)
    }
    fn fsync(&self) -> io::Result<()> {
        self.inner.fsync()
    }
    fn close(self: Box<Self>) -> io::Result<()> {
        self.inner.close()
    }
}

/// A target named `name` on `fs`.
pub fn target_on(name: &str, dir: &Path, fs: impl BenchFs + 'static) -> Target {
    Target {
        name: name.into(),
        location: dir.display().to_string(),
        fs_type: "recording".into(),
        fs: Box::new(fs),
    }
}

/// The attributes of every `<tag …>` element of an SVG document, in order.
pub fn svg_elements(svg: &str, tag: &str) -> Vec<BTreeMap<String, String>> {
    let open = format!("<{tag} ");
    svg.match_indices(&open)
        .map(|(at, _)| {
            let rest = &svg[at + open.len()..];
            let body = &rest[..rest.find('>').expect("element ends")];
            let mut attrs = BTreeMap::new();
            let mut s = body;
            while let Some(eq) = s.find("=\"") {
                let key = s[..eq].trim().to_string();
                let after = &s[eq + 2..];
                let end = after.find('"').expect("attribute ends");
                attrs.insert(key, after[..end].to_string());
                s = &after[end + 1..];
            }
            attrs
        })
        .collect()
}

/// A numeric attribute.
pub fn num(attrs: &BTreeMap<String, String>, key: &str) -> f64 {
    attrs
        .get(key)
        .unwrap_or_else(|| panic!("no {key} in {attrs:?}"))
        .parse()
        .unwrap_or_else(|_| panic!("{key} is not a number in {attrs:?}"))
}

/// The panel (0-based, row-major) of a chart that a point lies in: panels
/// are 380 x 300 pixels, three per row, under a 50-pixel title.
pub fn panel_of(x: f64, y: f64, panels: usize) -> usize {
    let cols = panels.clamp(1, 3);
    let (col, row) = ((x / 380.0) as usize, ((y - 50.0) / 300.0) as usize);
    row * cols + col
}

/// The points of a `points="x,y x,y "` attribute.
pub fn points(attrs: &BTreeMap<String, String>) -> Vec<(f64, f64)> {
    attrs["points"]
        .split_whitespace()
        .map(|p| {
            let (x, y) = p.split_once(',').expect("x,y");
            (x.parse().expect("x"), y.parse().expect("y"))
        })
        .collect()
}

/// The text of every `<text>` element of an SVG document, trimmed.
pub fn svg_texts(svg: &str) -> Vec<String> {
    svg.match_indices("<text ")
        .filter_map(|(at, _)| {
            let rest = &svg[at..];
            let start = rest.find('>')? + 1;
            let end = rest.find("</text>")?;
            Some(rest[start..end].trim().to_string())
        })
        .collect()
}
