//! `loom find` for users who hold no cluster key, through the mount:
//! `getxattr(DIR, "loom.find.HEX")`, HEX the postcard bytes of a
//! [`FindAsked`] in hexadecimal, runs the find as the calling process
//! (the MDTs show it only what it may list) at its first call and keeps
//! the answer for that process; each call with the same name hands it
//! the next page, an empty one at the end. A getxattr needs only read
//! permission on DIR, as a find does (a setxattr would need write). A
//! page is records of a tag byte (`m`: a match, `d`: a directory it may
//! not list), a path relative to DIR, and a NUL.

use loom_client::find::FindResult;
use loom_proto::find::FindQuery;
use loom_proto::Errno;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The prefix of the name the tool uses.
pub const PREFIX: &[u8] = b"loom.find.";
/// Largest page: under the 64 KiB a getxattr can return.
const PAGE: usize = 60 << 10;
/// An answer not read for this long is dropped.
const IDLE: Duration = Duration::from_secs(600);

/// What the tool asks.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct FindAsked {
    /// The tests.
    pub query: FindQuery,
    /// The start directory's own name (find tests the start too).
    pub start_name: Vec<u8>,
}

/// Whose answer: process, directory, name asked.
type Key = (u32, u64, Vec<u8>);

/// The name that asks `a` (at most 255 bytes: the tool says so if its
/// tests do not fit).
pub fn name_of(a: &FindAsked) -> Result<Vec<u8>, String> {
    let b = loom_proto::msg::encode(a).map_err(|e| e.msg)?;
    let mut n = PREFIX.to_vec();
    for x in b {
        n.extend_from_slice(format!("{x:02x}").as_bytes());
    }
    if n.len() > 255 {
        return Err(format!(
            "the tests take {} bytes, more than the mount can be asked (255): \
             shorten them, or run loom find as root",
            n.len()
        ));
    }
    Ok(n)
}

/// The question a name asks.
pub fn asked(name: &[u8]) -> Result<FindAsked, Errno> {
    let hex = name.strip_prefix(PREFIX).ok_or(Errno::EINVAL)?;
    let b: Option<Vec<u8>> = hex
        .chunks(2)
        .map(|p| {
            std::str::from_utf8(p)
                .ok()
                .and_then(|s| u8::from_str_radix(s, 16).ok())
        })
        .collect();
    loom_proto::msg::decode(&b.ok_or(Errno::EINVAL)?).map_err(|_| Errno::EINVAL)
}

/// One process's answer, in pages.
#[derive(Debug)]
struct Answer {
    uid: u32,
    pages: VecDeque<Vec<u8>>,
    at: Instant,
}

/// The answers kept, by (process, directory, name asked).
#[derive(Debug, Default)]
pub struct Finds {
    answers: Mutex<HashMap<Key, Answer>>,
}

impl Finds {
    /// Whether process `pid` (of user `uid`) has an answer to `name` on
    /// `ino` still to read.
    pub fn has(&self, pid: u32, uid: u32, ino: u64, name: &[u8]) -> bool {
        self.lock()
            .get(&(pid, ino, name.to_vec()))
            .is_some_and(|a| a.uid == uid)
    }

    /// Keep `r` for process `pid` (of user `uid`) on inode `ino`, asked
    /// by `name`.
    pub fn keep(&self, pid: u32, uid: u32, ino: u64, name: &[u8], r: &FindResult) {
        let mut pages = VecDeque::new();
        let mut page = Vec::new();
        let tagged = r
            .matches
            .iter()
            .map(|p| (b'm', p))
            .chain(r.denied.iter().map(|p| (b'd', p)));
        for (tag, path) in tagged {
            if !page.is_empty() && page.len() + path.len() + 2 > PAGE {
                pages.push_back(std::mem::take(&mut page));
            }
            page.push(tag);
            page.extend_from_slice(path);
            page.push(0);
        }
        if !page.is_empty() {
            pages.push_back(page);
        }
        // The end: an empty page.
        pages.push_back(Vec::new());
        let mut all = self.lock();
        all.retain(|_, a| a.at.elapsed() < IDLE);
        all.insert(
            (pid, ino, name.to_vec()),
            Answer {
                uid,
                pages,
                at: Instant::now(),
            },
        );
    }

    /// The next page for process `pid` on `ino`; `size` 0 asks only its
    /// length (the page stays), a page larger than `size` stays too (the
    /// kernel answers ERANGE). ENODATA: no find was asked.
    pub fn page(
        &self,
        pid: u32,
        uid: u32,
        ino: u64,
        name: &[u8],
        size: u32,
    ) -> Result<Vec<u8>, Errno> {
        let key = (pid, ino, name.to_vec());
        let mut all = self.lock();
        let Some(a) = all.get_mut(&key).filter(|a| a.uid == uid) else {
            return Err(Errno::ENODATA);
        };
        let next = a.pages.front().cloned().unwrap_or_default();
        if size == 0 || next.len() > size as usize {
            return Ok(next);
        }
        a.pages.pop_front();
        a.at = Instant::now();
        if a.pages.is_empty() {
            all.remove(&key);
        }
        Ok(next)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Answer>> {
        self.answers.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Read the records of a page into `r` (the tool's side).
pub fn read_page(page: &[u8], r: &mut FindResult) {
    for rec in page.split(|&b| b == 0).filter(|x| !x.is_empty()) {
        match rec[0] {
            b'm' => r.matches.push(rec[1..].to_vec()),
            b'd' => r.denied.push(rec[1..].to_vec()),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_read_back_whole_in_pages() {
        let r = FindResult {
            matches: (0..5000)
                .map(|i| format!("dir/file-{i:05}").into_bytes())
                .collect(),
            denied: vec![b"secret".to_vec()],
            fids: Vec::new(),
        };
        let f = Finds::default();
        let asked = FindAsked {
            query: FindQuery::default(),
            start_name: b"dir".to_vec(),
        };
        let n = name_of(&asked).expect("a name");
        assert_eq!(super::asked(&n).map(|a| a.start_name), Ok(b"dir".to_vec()));
        f.keep(7, 1000, 1, &n, &r);
        assert!(f.has(7, 1000, 1, &n) && !f.has(7, 0, 1, &n));
        assert_eq!(
            f.page(7, 0, 1, &n, 65536),
            Err(Errno::ENODATA),
            "another user"
        );
        assert_eq!(
            f.page(8, 1000, 1, &n, 65536),
            Err(Errno::ENODATA),
            "another process"
        );
        let mut back = FindResult::default();
        let mut pages = 0;
        loop {
            let len = f.page(7, 1000, 1, &n, 0).expect("size").len();
            let p = f.page(7, 1000, 1, &n, 65536).expect("page");
            assert_eq!(p.len(), len, "the size asked first is the page's");
            if p.is_empty() {
                break;
            }
            pages += 1;
            read_page(&p, &mut back);
        }
        assert!(pages > 1, "several pages");
        assert_eq!(back, r);
        assert_eq!(
            f.page(7, 1000, 1, &n, 65536),
            Err(Errno::ENODATA),
            "dropped at its end"
        );
    }
}
