//! `loom find PATH... [TESTS]`: files and directories by name, type,
//! size, times, owner, project and placement, as `lfs find` and GNU find
//! read them. The MDTs scan their own entries at once and test them
//! where the inodes are (`loom_client::find`); nothing walks the tree
//! through the mount. Root (who can read the mount's key) asks through
//! the library; any other user through the mount (`loom.find.*`, see
//! `loom_fuse::finds`), which asks as that user: they see what they may
//! list, and "Permission denied" for the directories they may not.

use crate::registry;
use crate::tools::{caller, connect, errno};
use anyhow::{bail, Context};
use clap::Args;
use loom_client::find::FindResult;
use loom_proto::find::{Cmp, FindQuery, LayoutKind, Pred, Stamp, Test};
use loom_proto::msg::FileKind;
use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

/// Options of `loom find`.
#[derive(Args)]
#[command(
    after_help = "Tests (each may be preceded by ! or -not; all must hold; one or two dashes):
  -name PATTERN, -iname PATTERN   the name matches a shell pattern (*, ?, [...])
  -type f|d|l|p|s|b|c[,...]       the kind (regular file, directory, symlink, ...)
  -size [+-]N[c|w|b|k|M|G|T]      size in units rounded up (b: 512 bytes, the default)
  -mtime|-atime|-ctime [+-]N      modified, accessed, changed N whole days ago
  -mmin|-amin|-cmin [+-]N         the same in minutes
  -user NAME|UID, -uid [+-]N      owner
  -group NAME|GID, -gid [+-]N     group
  -projid N                       project id
  -pool NAME                      drawn from this OST pool (any component)
  -stripe-count [+-]N (-c)        striped over N OSTs (any component)
  -stripe-size [+-]N[K|M|G] (-S)  with that stripe size (any component)
  -layout dom|pfl|raid0 (-L)      Data-on-MDT, progressive (several components), striped
  -mdt N[,N] (-m)                 kept by one of these MDTs
  -ost N[,N] (-O)                 with an object on one of these OSTs (3, OST0003)
  -print0                         end each path with a NUL, not a newline
+N is more than N, -N less than N, N exactly. The MDTs scan their entries in parallel, \
testing each where its inode is; a user sees what they may list."
)]
pub struct FindArgs {
    /// Where to start, then the tests (see below).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "PATH... [TESTS]",
        required = true
    )]
    pub args: Vec<OsString>,
}

pub fn find(a: FindArgs) -> anyhow::Result<()> {
    let split = a
        .args
        .iter()
        .position(|x| {
            let b = x.as_bytes();
            b == b"!" || (b.starts_with(b"-") && b.len() > 1)
        })
        .unwrap_or(a.args.len());
    let (starts, tests) = a.args.split_at(split);
    if starts.is_empty() {
        bail!("name a directory to start from: loom find PATH [TESTS]");
    }
    let (query, print0) = parse(tests)?;
    let mut failed = false;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for start in starts {
        let start = Path::new(start);
        let r = match run(start, &query) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("loom find: {}: {e:#}", start.display());
                failed = true;
                continue;
            }
        };
        let shown = trimmed(start);
        for m in &r.matches {
            out.write_all(&joined(shown, m))?;
            out.write_all(if print0 { b"\0" } else { b"\n" })?;
        }
        out.flush()?;
        for d in &r.denied {
            eprintln!(
                "loom find: '{}': Permission denied",
                String::from_utf8_lossy(&joined(shown, d))
            );
            failed = true;
        }
    }
    if failed {
        bail!("some of the tree could not be read (see above)");
    }
    Ok(())
}

/// The start as given, without trailing slashes (but `/` itself).
fn trimmed(p: &Path) -> &[u8] {
    let b = p.as_os_str().as_bytes();
    let t = b.len() - b.iter().rev().take_while(|&&c| c == b'/').count();
    if t == 0 && !b.is_empty() {
        &b[..1]
    } else {
        &b[..t]
    }
}

fn joined(start: &[u8], rel: &[u8]) -> Vec<u8> {
    let mut v = start.to_vec();
    if !rel.is_empty() {
        if v.last() != Some(&b'/') {
            v.push(b'/');
        }
        v.extend_from_slice(rel);
    }
    v
}

/// The find from `start`: through the library with the key, through the
/// mount without.
fn run(start: &Path, q: &FindQuery) -> anyhow::Result<FindResult> {
    let (entry, rel) = registry::find(start)?;
    let name = std::fs::canonicalize(start)
        .with_context(|| format!("{}", start.display()))?
        .file_name()
        .map(|n| n.as_bytes().to_vec())
        .unwrap_or_else(|| b"/".to_vec());
    if !crate::via_mount::key_readable(&entry) {
        return through_mount(start, q, name);
    }
    let s = connect(entry)?;
    let c = caller();
    s.rt.block_on(async {
        let at = s
            .client
            .resolve_path_as(&c, rel.as_os_str().as_bytes())
            .await
            .map_err(|e| errno(e, &start.display().to_string()))?;
        s.client
            .find_as(&c, at.fid, &name, q)
            .await
            .map_err(|e| errno(e, &start.display().to_string()))
    })
}

/// The find asked of the mount, a page at a time.
fn through_mount(start: &Path, q: &FindQuery, name: Vec<u8>) -> anyhow::Result<FindResult> {
    let asked = loom_fuse::finds::FindAsked {
        query: q.clone(),
        start_name: name,
    };
    let xname = loom_fuse::finds::name_of(&asked).map_err(anyhow::Error::msg)?;
    let xname = std::ffi::OsString::from_vec(xname);
    let mut r = FindResult::default();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = rustix::fs::getxattr(start, xname.as_os_str(), &mut buf[..])
            .map_err(std::io::Error::from)
            .context("asking the mount")?;
        if n == 0 {
            return Ok(r);
        }
        loom_fuse::finds::read_page(&buf[..n], &mut r);
    }
}

/// The tests and whether to end paths with NUL.
fn parse(args: &[OsString]) -> anyhow::Result<(FindQuery, bool)> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let mut q = FindQuery {
        preds: Vec::new(),
        now,
    };
    let mut print0 = false;
    let mut it = args.iter();
    let mut not = false;
    while let Some(a) = it.next() {
        let word = a.to_string_lossy();
        let opt = word.trim_start_matches('-');
        if word == "!" || opt == "not" {
            not = !not;
            continue;
        }
        if !word.starts_with('-') {
            bail!("{word:?}: a test starts with '-' (paths come first)");
        }
        match opt {
            "print" => continue,
            "print0" => {
                print0 = true;
                continue;
            }
            _ => {}
        }
        let mut value = || it.next().with_context(|| format!("{word} needs a value"));
        let test = match opt {
            "name" | "n" => Test::Name(value()?.as_bytes().to_vec(), false),
            "iname" => Test::Name(value()?.as_bytes().to_vec(), true),
            "type" | "t" => Test::Type(kinds(&value()?.to_string_lossy())?),
            "size" | "s" => {
                let v = value()?.to_string_lossy().to_string();
                let (num, unit) = split_unit(&v);
                let unit = match unit {
                    "" | "b" => 512,
                    "c" => 1,
                    "w" => 2,
                    "k" | "K" => 1 << 10,
                    "M" => 1 << 20,
                    "G" => 1 << 30,
                    "T" => 1 << 40,
                    u => bail!("-size {v}: unknown unit {u:?} (c, w, b, k, M, G, T)"),
                };
                Test::Size(cmp(&word, num)?, unit)
            }
            "mtime" | "atime" | "ctime" | "mmin" | "amin" | "cmin" => {
                let stamp = match &opt[..1] {
                    "m" => Stamp::M,
                    "a" => Stamp::A,
                    _ => Stamp::C,
                };
                let period = if opt.ends_with("min") { 60 } else { 86400 };
                Test::Time(stamp, cmp(&word, &value()?.to_string_lossy())?, period)
            }
            "user" | "u" => Test::Uid(Cmp::Equal(u64::from(user(&value()?.to_string_lossy())?))),
            "group" | "g" => Test::Gid(Cmp::Equal(u64::from(group(&value()?.to_string_lossy())?))),
            "uid" => Test::Uid(cmp(&word, &value()?.to_string_lossy())?),
            "gid" => Test::Gid(cmp(&word, &value()?.to_string_lossy())?),
            "projid" => {
                let v = value()?.to_string_lossy().to_string();
                Test::Projid(
                    v.parse()
                        .with_context(|| format!("-projid {v:?}: not a number"))?,
                )
            }
            "pool" => {
                let p = value()?.to_string_lossy().to_string();
                loom_proto::pool::check_name(&p).map_err(anyhow::Error::msg)?;
                Test::Pool(p)
            }
            "stripe-count" | "stripe_count" | "c" => {
                Test::StripeCount(cmp(&word, &value()?.to_string_lossy())?)
            }
            "stripe-size" | "stripe_size" | "S" => {
                let v = value()?.to_string_lossy().to_string();
                let (num, unit) = split_unit(&v);
                let mult: u64 = match unit {
                    "" => 1,
                    "k" | "K" => 1 << 10,
                    "m" | "M" => 1 << 20,
                    "g" | "G" => 1 << 30,
                    u => bail!("-stripe-size {v}: unknown unit {u:?} (K, M, G)"),
                };
                let c = cmp(&word, num)?;
                Test::StripeSize(match c {
                    Cmp::Less(n) => Cmp::Less(n * mult),
                    Cmp::Equal(n) => Cmp::Equal(n * mult),
                    Cmp::More(n) => Cmp::More(n * mult),
                })
            }
            "layout" | "L" => Test::Layout(match &*value()?.to_string_lossy() {
                "dom" | "mdt" => LayoutKind::Dom,
                "pfl" => LayoutKind::Pfl,
                "raid0" => LayoutKind::Raid0,
                l => bail!("-layout {l:?}: give dom (or mdt), pfl or raid0"),
            }),
            "mdt" | "mdt-index" | "m" => Test::Mdt(numbers(&word, &value()?.to_string_lossy())?),
            "ost" | "obd" | "O" => {
                let v = value()?.to_string_lossy().to_string();
                Test::Ost(crate::pool::parse_osts(&[v])?)
            }
            _ => bail!("unknown test {word:?}; see `loom help find`"),
        };
        q.preds.push(Pred { not, test });
        not = false;
    }
    if not {
        bail!("'!' at the end: it negates the test after it");
    }
    Ok((q, print0))
}

/// `+N`, `-N` or `N`.
fn cmp(word: &str, v: &str) -> anyhow::Result<Cmp> {
    Cmp::parse(v, |n| n.parse().ok())
        .with_context(|| format!("{word} {v:?}: give N, +N (more than N) or -N (less than N)"))
}

/// The number and the unit letters after it.
fn split_unit(v: &str) -> (&str, &str) {
    let at = v
        .char_indices()
        .skip_while(|&(i, c)| (i == 0 && (c == '+' || c == '-')) || c.is_ascii_digit())
        .map(|(i, _)| i)
        .next()
        .unwrap_or(v.len());
    v.split_at(at)
}

fn kinds(v: &str) -> anyhow::Result<Vec<FileKind>> {
    v.split(',')
        .map(|k| {
            Ok(match k {
                "f" => FileKind::File,
                "d" => FileKind::Dir,
                "l" => FileKind::Symlink,
                "p" => FileKind::Fifo,
                "s" => FileKind::Socket,
                "b" => FileKind::BlockDev,
                "c" => FileKind::CharDev,
                _ => bail!("-type {k:?}: give f, d, l, p, s, b or c"),
            })
        })
        .collect()
}

fn numbers(word: &str, v: &str) -> anyhow::Result<Vec<u32>> {
    v.split(',')
        .map(|n| {
            n.parse()
                .with_context(|| format!("{word} {v:?}: give indices, such as 0 or 0,2"))
        })
        .collect()
}

fn user(v: &str) -> anyhow::Result<u32> {
    if let Ok(n) = v.parse() {
        return Ok(n);
    }
    match nix::unistd::User::from_name(v) {
        Ok(Some(u)) => Ok(u.uid.as_raw()),
        _ => bail!("-user {v:?}: no such user"),
    }
}

fn group(v: &str) -> anyhow::Result<u32> {
    if let Ok(n) = v.parse() {
        return Ok(n);
    }
    match nix::unistd::Group::from_name(v) {
        Ok(Some(g)) => Ok(g.gid.as_raw()),
        _ => bail!("-group {v:?}: no such group"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(args: &[&str]) -> anyhow::Result<FindQuery> {
        let v: Vec<OsString> = args.iter().map(OsString::from).collect();
        parse(&v).map(|(q, _)| q)
    }

    #[test]
    fn tests_read_as_find_and_lfs_find_give_them() {
        let got = q(&[
            "-name", "*.c", "!", "--type", "d", "-size", "+2k", "-c", "2",
        ])
        .expect("parse");
        let tests: Vec<(bool, Test)> = got.preds.into_iter().map(|p| (p.not, p.test)).collect();
        assert_eq!(
            tests,
            vec![
                (false, Test::Name(b"*.c".to_vec(), false)),
                (true, Test::Type(vec![FileKind::Dir])),
                (false, Test::Size(Cmp::More(2), 1024)),
                (false, Test::StripeCount(Cmp::Equal(2))),
            ]
        );
        assert_eq!(
            q(&["-stripe-size", "-4M"]).expect("parse").preds[0].test,
            Test::StripeSize(Cmp::Less(4 << 20))
        );
        assert_eq!(
            q(&["-ost", "OST0002,1"]).expect("parse").preds[0].test,
            Test::Ost(vec![1, 2])
        );
        for bad in [
            &["-bogus"][..],
            &["-size", "3q"],
            &["-type", "x"],
            &["-mtime", "soon"],
            &["-layout", "mirror"],
            &["-name"],
            &["!"],
            &["-user", "no-such-user-here"],
            &["-pool", "much_too_long_a_pool"],
        ] {
            assert!(q(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn paths_are_shown_as_given() {
        assert_eq!(joined(trimmed(Path::new("/mnt/x/")), b"a/b"), b"/mnt/x/a/b");
        assert_eq!(joined(trimmed(Path::new("/")), b"a"), b"/a");
        assert_eq!(joined(trimmed(Path::new("d")), b""), b"d");
    }
}
