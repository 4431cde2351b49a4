//! What `loom find` asks (as `lfs find` and GNU find): tests on a name,
//! an inode's attributes and its layout, all of which must hold, each
//! possibly negated. The MDTs evaluate them where the inodes are
//! (`MdtRequest::Find`) and the client on the few inodes kept on another
//! MDT than their name, with the same code.
//!
//! The numeric tests read as GNU find's: `+N` more than N, `-N` less, `N`
//! exactly; `-size` counts in units rounded up (512-byte blocks unless a
//! suffix says otherwise), the times in whole days (or minutes) before
//! the query's `now`, fractions dropped.

use crate::layout::{Layout, Pattern};
use crate::msg::{Attr, FileKind};
use serde::{Deserialize, Serialize};

/// A comparison with a number: `+N`, `-N` or `N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Cmp {
    /// Less than.
    Less(u64),
    /// Exactly.
    Equal(u64),
    /// More than.
    More(u64),
}

impl Cmp {
    /// Whether `v` holds.
    pub fn holds(self, v: u64) -> bool {
        match self {
            Cmp::Less(n) => v < n,
            Cmp::Equal(n) => v == n,
            Cmp::More(n) => v > n,
        }
    }

    /// `+N`, `-N` or `N`, with `unit` reading the number (`N` and its
    /// suffix, if any).
    pub fn parse(s: &str, unit: impl Fn(&str) -> Option<u64>) -> Option<Cmp> {
        let (make, rest): (fn(u64) -> Cmp, &str) = match s.as_bytes().first()? {
            b'+' => (Cmp::More, &s[1..]),
            b'-' => (Cmp::Less, &s[1..]),
            _ => (Cmp::Equal, s),
        };
        unit(rest).map(make)
    }
}

/// Which timestamp a time test reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Stamp {
    /// Last modification of the data.
    M,
    /// Last access.
    A,
    /// Last change of the inode.
    C,
}

/// What kind of layout `-layout` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LayoutKind {
    /// A component on the MDT (Data-on-MDT).
    Dom,
    /// More than one component (a progressive layout).
    Pfl,
    /// A component striped over OSTs.
    Raid0,
}

/// One test.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Test {
    /// The name matches a shell pattern (`*`, `?`, `[...]`), as fnmatch
    /// without flags; `true`: letters of either case match.
    Name(Vec<u8>, bool),
    /// One of these kinds.
    Type(Vec<FileKind>),
    /// Size in units of the given bytes, rounded up.
    Size(Cmp, u64),
    /// Whole periods of the given seconds between a timestamp and `now`.
    Time(Stamp, Cmp, u64),
    /// Owner.
    Uid(Cmp),
    /// Group.
    Gid(Cmp),
    /// Project id.
    Projid(u32),
    /// A component drawn from this OST pool.
    Pool(String),
    /// A component striped over this many OSTs.
    StripeCount(Cmp),
    /// A component with this stripe size, in bytes.
    StripeSize(Cmp),
    /// Its layout is of this kind.
    Layout(LayoutKind),
    /// Kept by one of these MDTs.
    Mdt(Vec<u32>),
    /// An object on one of these OSTs.
    Ost(Vec<u32>),
}

/// One test, possibly negated (`!`, `-not`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pred {
    /// Negated.
    pub not: bool,
    /// The test.
    pub test: Test,
}

/// A whole query: every predicate must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FindQuery {
    /// The predicates.
    pub preds: Vec<Pred>,
    /// The time the times are counted back from (seconds since the epoch).
    pub now: i64,
}

/// What a query is evaluated on: an entry's name and the inode it names.
pub struct Candidate<'a> {
    /// The entry's name.
    pub name: &'a [u8],
    /// The inode's kind.
    pub kind: FileKind,
    /// The inode's attributes: needed only if [`FindQuery::needs_inode`]
    /// (a test that needs them fails without).
    pub attr: Option<&'a Attr>,
    /// Its layout, for a regular file.
    pub layout: Option<&'a Layout>,
    /// The MDT that keeps it.
    pub mdt: u32,
}

impl FindQuery {
    /// Whether every predicate holds for `c`.
    pub fn matches(&self, c: &Candidate<'_>) -> bool {
        self.preds
            .iter()
            .all(|p| p.not != test(&p.test, c, self.now))
    }

    /// Whether a test needs the inode (not only the name and kind): an
    /// entry whose inode is elsewhere is then looked up.
    pub fn needs_inode(&self) -> bool {
        self.preds
            .iter()
            .any(|p| !matches!(p.test, Test::Name(..) | Test::Type(_)))
    }
}

fn test(t: &Test, c: &Candidate<'_>, now: i64) -> bool {
    match t {
        Test::Name(p, fold) => return glob(p, c.name, *fold),
        Test::Type(kinds) => return kinds.contains(&c.kind),
        _ => {}
    }
    let Some(a) = c.attr else {
        return false;
    };
    match t {
        Test::Name(..) | Test::Type(_) => false,
        Test::Size(cmp, unit) => cmp.holds(a.size.div_ceil((*unit).max(1))),
        Test::Time(stamp, cmp, period) => {
            let t = match stamp {
                Stamp::M => a.mtime,
                Stamp::A => a.atime,
                Stamp::C => a.ctime,
            };
            // GNU find: the age in whole periods, fractions dropped; a
            // time in the future is age 0 for `-N`, never `+N`.
            let age = now.saturating_sub(t.sec);
            let age = if age < 0 || (age == 0 && t.nsec > 0) {
                0
            } else if t.nsec > 0 {
                (age - 1) as u64 / period.max(&1)
            } else {
                age as u64 / period.max(&1)
            };
            cmp.holds(age)
        }
        Test::Uid(cmp) => cmp.holds(u64::from(a.uid)),
        Test::Gid(cmp) => cmp.holds(u64::from(a.gid)),
        Test::Projid(p) => a.projid == *p,
        Test::Pool(p) => c.layout.is_some_and(|l| {
            l.components
                .iter()
                .any(|x| x.pool.as_deref() == Some(p.as_str()))
        }),
        Test::StripeCount(cmp) => raid0(c.layout).any(|(_, objs)| cmp.holds(objs.len() as u64)),
        Test::StripeSize(cmp) => raid0(c.layout).any(|(size, _)| cmp.holds(u64::from(size))),
        Test::Layout(k) => c.layout.is_some_and(|l| match k {
            LayoutKind::Dom => l.components.iter().any(|x| x.pattern == Pattern::Mdt),
            LayoutKind::Pfl => l.components.len() > 1,
            LayoutKind::Raid0 => raid0(Some(l)).next().is_some(),
        }),
        Test::Mdt(list) => list.contains(&c.mdt),
        Test::Ost(list) => {
            raid0(c.layout).any(|(_, objs)| objs.iter().any(|o| list.contains(&o.ost)))
        }
    }
}

/// The RAID-0 components of a layout: stripe size and objects.
fn raid0(l: Option<&Layout>) -> impl Iterator<Item = (u32, &[crate::ObjRef])> {
    l.into_iter().flat_map(|l| {
        l.components.iter().filter_map(|c| match &c.pattern {
            Pattern::Raid0 {
                stripe_size,
                objects,
            } => Some((*stripe_size, objects.as_slice())),
            _ => None,
        })
    })
}

/// Whether `name` matches shell pattern `p` as fnmatch(3) without flags:
/// `*` any bytes, `?` one byte, `[...]` one of a set (ranges, `!` or `^`
/// negating), `\` quoting the next byte. A leading dot is not special,
/// as in find's `-name`. `fold`: ASCII letters of either case match.
pub fn glob(p: &[u8], name: &[u8], fold: bool) -> bool {
    let eq = |a: u8, b: u8| {
        if fold {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    };
    // Iterative match with one star to fall back to.
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < name.len() {
        let step = match p.get(pi) {
            Some(b'*') => {
                star = Some((pi, ni));
                pi += 1;
                continue;
            }
            Some(b'?') => Some(pi + 1),
            Some(b'[') => class(p, pi, name[ni], fold),
            Some(b'\\') if pi + 1 < p.len() => eq(p[pi + 1], name[ni]).then_some(pi + 2),
            Some(&c) => eq(c, name[ni]).then_some(pi + 1),
            None => None,
        };
        match (step, star) {
            (Some(next), _) => {
                pi = next;
                ni += 1;
            }
            (None, Some((sp, sn))) => {
                pi = sp + 1;
                ni = sn + 1;
                star = Some((sp, sn + 1));
            }
            (None, None) => return false,
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// A bracket expression at `p[at]` against byte `b`: the index after it
/// if `b` is in it; `None` if not. An unclosed `[` is a plain byte.
fn class(p: &[u8], at: usize, b: u8, fold: bool) -> Option<usize> {
    let mut i = at + 1;
    let negate = matches!(p.get(i), Some(b'!' | b'^'));
    if negate {
        i += 1;
    }
    let start = i;
    let mut hit = false;
    let low = |x: u8| if fold { x.to_ascii_lowercase() } else { x };
    loop {
        let Some(&c) = p.get(i) else {
            // No closing bracket: `[` stands for itself.
            return (b == b'[').then_some(at + 1);
        };
        if c == b']' && i > start {
            break;
        }
        let (lo, next) = match c {
            b'\\' if i + 1 < p.len() => (p[i + 1], i + 2),
            _ => (c, i + 1),
        };
        if p.get(next) == Some(&b'-') && p.get(next + 1).is_some_and(|&e| e != b']') {
            let hi = p[next + 1];
            if (low(lo)..=low(hi)).contains(&low(b)) || (lo..=hi).contains(&b) {
                hit = true;
            }
            i = next + 2;
        } else {
            if low(lo) == low(b) {
                hit = true;
            }
            i = next;
        }
    }
    (hit != negate).then_some(i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::Time;
    use crate::Fid;

    #[test]
    fn patterns_match_as_fnmatch() {
        let yes = [
            ("*.c", "main.c"),
            ("*", ".hidden"),
            ("a?c", "abc"),
            ("[a-c]x", "bx"),
            ("[!a-c]x", "dx"),
            ("[^a]x", "bx"),
            ("\\*", "*"),
            ("*a*b*", "xxaxxbxx"),
            ("[]]", "]"),
            ("f[", "f["),
            ("", ""),
        ];
        for (p, n) in yes {
            assert!(glob(p.as_bytes(), n.as_bytes(), false), "{p} {n}");
        }
        let no = [
            ("*.c", "main.h"),
            ("a?c", "ac"),
            ("[a-c]x", "dx"),
            ("[!a-c]x", "ax"),
            ("\\*", "a"),
            ("*a*b", "xxaxxbxx"),
            ("", "a"),
        ];
        for (p, n) in no {
            assert!(!glob(p.as_bytes(), n.as_bytes(), false), "{p} {n}");
        }
        assert!(glob(b"*.C", b"x.c", true));
        assert!(!glob(b"*.C", b"x.c", false));
    }

    fn attr(size: u64, mtime: i64) -> Attr {
        let t = Time {
            sec: mtime,
            nsec: 0,
        };
        Attr {
            fid: Fid::new(1, 1),
            kind: FileKind::File,
            perm: 0o644,
            nlink: 1,
            uid: 5,
            gid: 6,
            size,
            atime: t,
            mtime: t,
            ctime: t,
            rdev: 0,
            projid: 7,
        }
    }

    #[test]
    fn sizes_and_times_read_as_gnu_find() {
        let q = |t: Test| FindQuery {
            preds: vec![Pred {
                not: false,
                test: t,
            }],
            now: 10 * 86400,
        };
        let hit = |q: &FindQuery, a: &Attr| {
            q.matches(&Candidate {
                name: b"f",
                kind: a.kind,
                attr: Some(a),
                layout: None,
                mdt: 0,
            })
        };
        // -size -1M: only empty files (rounded up to whole MiB).
        let m = q(Test::Size(Cmp::Less(1), 1 << 20));
        assert!(hit(&m, &attr(0, 0)) && !hit(&m, &attr(1, 0)));
        // -size 2k: 1025..=2048 bytes.
        let k = q(Test::Size(Cmp::Equal(2), 1024));
        assert!(hit(&k, &attr(1025, 0)) && hit(&k, &attr(2048, 0)) && !hit(&k, &attr(1024, 0)));
        // -mtime +1: at least two whole days old.
        let old = q(Test::Time(Stamp::M, Cmp::More(1), 86400));
        assert!(hit(&old, &attr(0, 8 * 86400)) && !hit(&old, &attr(0, 8 * 86400 + 1)));
        // -mtime 0: less than a day.
        let today = q(Test::Time(Stamp::M, Cmp::Equal(0), 86400));
        assert!(hit(&today, &attr(0, 9 * 86400 + 1)) && !hit(&today, &attr(0, 9 * 86400)));
        let not = FindQuery {
            preds: vec![Pred {
                not: true,
                test: Test::Projid(7),
            }],
            now: 0,
        };
        assert!(!hit(&not, &attr(0, 0)));
    }
}
