//! File layouts: how a file's bytes map to objects.
//!
//! A layout is a list of components, each covering an extent of the file
//! ([start, end), `end == u64::MAX` meaning to EOF). Today every file has one
//! RAID-0 component over whole file; the list leaves room for progressive
//! layouts (PFL) and Data-on-MDT components without a format change.
//!
//! RAID-0 maths, with stripe size `S` and stripe count `C`: file offset `o`
//! lies in stripe unit `u = o / S`, on stripe `u % C`, at object offset
//! `(u / C) * S + o % S`.
//!
//! A striped directory's layout is one [`Pattern::DirShards`] component:
//! the same record describes file data and directory shards, as Lustre's
//! LOV and LMV extended attributes do.

use crate::compress::Compress;
use crate::fid::{name_hash, Fid};
use serde::{Deserialize, Serialize};

/// Default stripe size: 1 MiB, as Lustre.
pub const DEFAULT_STRIPE_SIZE: u32 = 1 << 20;
/// Stripe sizes must be multiples of this (the OST block size).
pub const STRIPE_ALIGN: u32 = 64 << 10;
/// Most stripes one file can have.
pub const MAX_STRIPE_COUNT: u32 = 2000;

/// One object on one OST.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ObjRef {
    /// OST index.
    pub ost: u32,
    /// Object id, unique within that OST.
    pub oid: u64,
}

/// How a component stores its bytes. Variants are append-only.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Pattern {
    /// RAID-0 over OST objects.
    Raid0 {
        /// Bytes per stripe unit.
        stripe_size: u32,
        /// One object per stripe, in stripe order.
        objects: Vec<ObjRef>,
    },
    /// Data on the MDT with the inode (reserved for Data-on-MDT).
    Mdt,
    /// A striped directory (Lustre's LMV EA): its names are spread over
    /// shards, each a directory object on one MDT; shard 0 is the master
    /// inode itself, so a name that hashes there lives beside the master.
    DirShards {
        /// How a name picks its shard.
        hash: DirHash,
        /// The shards' FIDs, in shard order (the MDT of each follows from
        /// its sequence).
        shards: Vec<Fid>,
    },
}

/// How a striped directory maps a name to a shard. Variants are
/// append-only: a later hash (or a directory being split) needs a new one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DirHash {
    /// `name_hash(name) % shard count`: the dentry key's hash, so a shard
    /// holds exactly the names whose readdir cookies fall to it.
    NameHashMod,
}

/// One extent of a file and how it is stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Component {
    /// First byte covered.
    pub start: u64,
    /// One past the last byte covered; `u64::MAX` for EOF.
    pub end: u64,
    /// Storage of the extent.
    pub pattern: Pattern,
    /// OST pool the objects were chosen from, if any.
    pub pool: Option<String>,
}

/// A file's layout (Lustre's LOV EA).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Layout {
    /// Bumped when the layout changes (migration, mirror resync).
    pub generation: u32,
    /// Components sorted by extent, covering [0, EOF) without gaps.
    pub components: Vec<Component>,
    /// How the OSTs compress the file's objects (`None`: they do not).
    /// Set at create from the directory default; a Data-on-MDT
    /// component's bytes are not compressed.
    pub compress: Option<Compress>,
}

/// A layout as stored before compression (inode records of versions 1 to
/// 3): decoded as such, then read as a [`Layout`] without compression.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayoutV1 {
    /// As [`Layout::generation`].
    pub generation: u32,
    /// As [`Layout::components`].
    pub components: Vec<Component>,
}

impl From<LayoutV1> for Layout {
    fn from(l: LayoutV1) -> Layout {
        Layout {
            generation: l.generation,
            components: l.components,
            compress: None,
        }
    }
}

/// What a user asks for with `setstripe`; zero or negative fields mean
/// "inherit or use the default".
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StripeSpec {
    /// Stripe count; 0 = default, -1 = all OSTs.
    pub count: i32,
    /// Stripe size in bytes; 0 = default.
    pub size: u32,
    /// First OST index; -1 = the MDT chooses.
    pub start_ost: i32,
    /// OST pool name.
    pub pool: Option<String>,
}

/// Everything unset: inherit, or the MDT's choice (not "OST 0").
impl Default for StripeSpec {
    fn default() -> Self {
        StripeSpec {
            count: 0,
            size: 0,
            start_ost: -1,
            pool: None,
        }
    }
}

impl StripeSpec {
    /// Fill unset fields of `self` from `parent`.
    pub fn inherit(&self, parent: &StripeSpec) -> StripeSpec {
        StripeSpec {
            count: if self.count != 0 {
                self.count
            } else {
                parent.count
            },
            size: if self.size != 0 {
                self.size
            } else {
                parent.size
            },
            start_ost: if self.start_ost >= 0 {
                self.start_ost
            } else {
                parent.start_ost
            },
            pool: self.pool.clone().or_else(|| parent.pool.clone()),
        }
    }

    /// Check a user-supplied spec, with a reason for the user.
    pub fn validate(&self) -> Result<(), String> {
        if self.count < -1 {
            return Err(format!(
                "stripe count {} is invalid: use -1 (all OSTs), 0 (default) or a positive count",
                self.count
            ));
        }
        if self.count > MAX_STRIPE_COUNT as i32 {
            return Err(format!(
                "stripe count {} exceeds the maximum of {MAX_STRIPE_COUNT}",
                self.count
            ));
        }
        if self.size != 0 && !self.size.is_multiple_of(STRIPE_ALIGN) {
            return Err(format!(
                "stripe size {} is not a multiple of {} (64 KiB)",
                self.size, STRIPE_ALIGN
            ));
        }
        if self.start_ost < -1 {
            return Err(format!("OST index {} is invalid", self.start_ost));
        }
        Ok(())
    }
}

/// Largest Data-on-MDT component: small files only (as Lustre's default
/// `dom_stripesize` limit of 1 MiB).
pub const MAX_DOM_SIZE: u64 = 1 << 20;

/// A directory's default layout for new files, by extent (Lustre's
/// progressive file layouts): `setstripe -E 64K -L mdt -E 1G -c 1 -E -1
/// -c -1` is three components. The first may keep its bytes on the MDT
/// with the inode (Data-on-MDT).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct LayoutSpec {
    /// Components by extent; each starts where the previous ends, the
    /// first at 0, the last at EOF (`u64::MAX`).
    pub components: Vec<ComponentSpec>,
}

/// One component of a [`LayoutSpec`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComponentSpec {
    /// One past its last byte; `u64::MAX` for EOF.
    pub end: u64,
    /// Its bytes live on the MDT (Data-on-MDT); `stripe` is unused then.
    pub on_mdt: bool,
    /// Striping over OSTs, unset fields inherited as for a plain layout.
    pub stripe: StripeSpec,
}

impl LayoutSpec {
    /// The first `end` bytes of a file on its MDT (Data-on-MDT), the rest
    /// striped by default.
    pub fn dom_first(end: u64) -> LayoutSpec {
        LayoutSpec {
            components: vec![
                ComponentSpec {
                    end,
                    on_mdt: true,
                    stripe: StripeSpec::default(),
                },
                ComponentSpec {
                    end: u64::MAX,
                    on_mdt: false,
                    stripe: StripeSpec::default(),
                },
            ],
        }
    }

    /// One RAID-0 component over the whole file.
    pub fn plain(stripe: StripeSpec) -> LayoutSpec {
        LayoutSpec {
            components: vec![ComponentSpec {
                end: u64::MAX,
                on_mdt: false,
                stripe,
            }],
        }
    }

    /// A single-component spec's striping (what `StripeSpec` alone says).
    pub fn as_plain(&self) -> Option<&StripeSpec> {
        match self.components.as_slice() {
            [c] if !c.on_mdt => Some(&c.stripe),
            _ => None,
        }
    }

    /// Check a user-supplied spec, with a reason for the user.
    pub fn validate(&self) -> Result<(), String> {
        let Some(last) = self.components.last() else {
            return Err("a layout needs at least one component".into());
        };
        if last.end != u64::MAX {
            return Err("the last component must extend to EOF (-E -1)".into());
        }
        let mut start = 0u64;
        for (i, c) in self.components.iter().enumerate() {
            if c.end <= start {
                return Err(format!(
                    "component {} ends at {} but starts at {start}: ends must increase",
                    i + 1,
                    c.end
                ));
            }
            if c.end != u64::MAX && !c.end.is_multiple_of(u64::from(STRIPE_ALIGN)) {
                return Err(format!(
                    "component {} ends at {}, not a multiple of 64 KiB",
                    i + 1,
                    c.end
                ));
            }
            if c.on_mdt {
                if i != 0 {
                    return Err("only the first component can be on the MDT (-L mdt)".into());
                }
                if c.end > MAX_DOM_SIZE {
                    return Err(format!(
                        "a Data-on-MDT component ends at {} bytes at most ({} asked)",
                        MAX_DOM_SIZE, c.end
                    ));
                }
            } else {
                c.stripe
                    .validate()
                    .map_err(|e| format!("component {}: {e}", i + 1))?;
            }
            start = c.end;
        }
        Ok(())
    }
}

/// A piece of a file I/O that falls on one stripe object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StripeChunk {
    /// Index into the component's object list.
    pub stripe: usize,
    /// Offset within the object.
    pub obj_offset: u64,
    /// Offset of the chunk within the caller's buffer.
    pub buf_offset: usize,
    /// Length of the chunk.
    pub len: usize,
}

impl Layout {
    /// A single RAID-0 component over the whole file.
    pub fn raid0(stripe_size: u32, objects: Vec<ObjRef>) -> Layout {
        Layout {
            generation: 0,
            components: vec![Component {
                start: 0,
                end: u64::MAX,
                pattern: Pattern::Raid0 {
                    stripe_size,
                    objects,
                },
                pool: None,
            }],
            compress: None,
        }
    }

    /// The RAID-0 parameters of the first component, if it is one.
    pub fn raid0_params(&self) -> Option<(u32, &[ObjRef])> {
        match &self.components.first()?.pattern {
            Pattern::Raid0 {
                stripe_size,
                objects,
            } => Some((*stripe_size, objects)),
            Pattern::Mdt | Pattern::DirShards { .. } => None,
        }
    }

    /// The layout of a directory striped over `shards` (shard 0 = master).
    pub fn dir_striped(shards: Vec<Fid>) -> Layout {
        Layout {
            generation: 0,
            components: vec![Component {
                start: 0,
                end: u64::MAX,
                pattern: Pattern::DirShards {
                    hash: DirHash::NameHashMod,
                    shards,
                },
                pool: None,
            }],
            compress: None,
        }
    }

    /// The shards of a striped directory's layout.
    pub fn dir_shards(&self) -> Option<&[Fid]> {
        match &self.components.first()?.pattern {
            Pattern::DirShards { shards, .. } => Some(shards),
            _ => None,
        }
    }

    /// The shard of a striped directory that holds `name`.
    pub fn shard_for(&self, name: &[u8]) -> Option<Fid> {
        match &self.components.first()?.pattern {
            Pattern::DirShards {
                hash: DirHash::NameHashMod,
                shards,
            } if !shards.is_empty() => {
                Some(shards[(name_hash(name) % shards.len() as u64) as usize])
            }
            _ => None,
        }
    }

    /// Where the file's Data-on-MDT component ends (0: it has none).
    pub fn dom_end(&self) -> u64 {
        match self.components.first() {
            Some(Component {
                pattern: Pattern::Mdt,
                end,
                ..
            }) => *end,
            _ => 0,
        }
    }

    /// Whether the layout holds file data in RAID-0 components or on the
    /// MDT only (not a directory's shards).
    pub fn is_file(&self) -> bool {
        !self.components.is_empty()
            && self
                .components
                .iter()
                .all(|c| !matches!(c.pattern, Pattern::DirShards { .. }))
    }

    /// Every OST object of the layout.
    pub fn objects(&self) -> Vec<ObjRef> {
        self.components
            .iter()
            .flat_map(|c| match &c.pattern {
                Pattern::Raid0 { objects, .. } => objects.clone(),
                Pattern::Mdt | Pattern::DirShards { .. } => Vec::new(),
            })
            .collect()
    }
}

/// Split the file range [offset, offset + len) into per-stripe chunks of a
/// RAID-0 component, in file order.
pub fn split_raid0(
    stripe_size: u32,
    stripe_count: usize,
    offset: u64,
    len: usize,
) -> Vec<StripeChunk> {
    let s = u64::from(stripe_size.max(1));
    let c = stripe_count.max(1) as u64;
    let mut out = Vec::new();
    let mut done = 0usize;
    while done < len {
        let o = offset + done as u64;
        let unit = o / s;
        let within = o % s;
        let n = ((s - within) as usize).min(len - done);
        out.push(StripeChunk {
            stripe: (unit % c) as usize,
            obj_offset: (unit / c) * s + within,
            buf_offset: done,
            len: n,
        });
        done += n;
    }
    out
}

/// The size an object must have for the file to have `file_size` bytes:
/// what truncate sends to each stripe.
pub fn object_size_for(
    stripe_size: u32,
    stripe_count: usize,
    stripe: usize,
    file_size: u64,
) -> u64 {
    let s = u64::from(stripe_size.max(1));
    let c = stripe_count.max(1) as u64;
    let full_rows = file_size / (s * c);
    let rem = file_size % (s * c);
    let base = full_rows * s;
    let start_of_stripe = stripe as u64 * s;
    if rem <= start_of_stripe {
        base
    } else {
        base + (rem - start_of_stripe).min(s)
    }
}

/// The part of object `stripe` that the file range [offset, offset + len)
/// covers, as an object range `(start, end)`; empty (`start == end`) when
/// the range touches no byte of that object. A contiguous file range
/// covers a contiguous range of each object, so one request per object
/// punches or allocates it, however long.
pub fn object_range_for(
    stripe_size: u32,
    stripe_count: usize,
    stripe: usize,
    offset: u64,
    len: u64,
) -> (u64, u64) {
    let end = offset.saturating_add(len);
    (
        object_size_for(stripe_size, stripe_count, stripe, offset),
        object_size_for(stripe_size, stripe_count, stripe, end),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_striped_directory_sends_each_name_to_its_hash_shard() {
        let shards: Vec<Fid> = (0..3).map(|i| Fid::new(100 + i, 1)).collect();
        let l = Layout::dir_striped(shards.clone());
        assert_eq!(l.dir_shards(), Some(&shards[..]));
        let mut seen = [0usize; 3];
        for i in 0..300 {
            let name = format!("f{i}");
            let s = l.shard_for(name.as_bytes()).expect("striped");
            let k = (name_hash(name.as_bytes()) % 3) as usize;
            assert_eq!(s, shards[k]);
            seen[k] += 1;
        }
        // Every shard gets a share of 300 names.
        assert!(seen.iter().all(|n| *n > 50), "{seen:?}");
        assert!(l.raid0_params().is_none() && l.objects().is_empty());
        assert!(Layout::raid0(1 << 20, vec![]).shard_for(b"x").is_none());
    }

    #[test]
    fn second_stripe_unit_lands_on_second_object() {
        let ch = split_raid0(1 << 20, 4, 1 << 20, 10);
        assert_eq!(
            ch,
            vec![StripeChunk {
                stripe: 1,
                obj_offset: 0,
                buf_offset: 0,
                len: 10
            }]
        );
        let ch = split_raid0(1 << 20, 4, 5 << 20, 1);
        assert_eq!(ch[0].stripe, 1);
        assert_eq!(ch[0].obj_offset, 1 << 20);
    }

    proptest! {
        #[test]
        fn chunks_tile_the_range_and_map_back(ss in 1u32..64, sc in 1usize..8, off in 0u64..4096, len in 0usize..4096) {
            let ch = split_raid0(ss, sc, off, len);
            let mut pos = 0usize;
            for c in &ch {
                prop_assert_eq!(c.buf_offset, pos);
                prop_assert!(c.len > 0 && c.len <= ss as usize);
                // Map the object offset back to the file offset.
                let unit_in_obj = c.obj_offset / u64::from(ss);
                let file_unit = unit_in_obj * sc as u64 + c.stripe as u64;
                let file_off = file_unit * u64::from(ss) + c.obj_offset % u64::from(ss);
                prop_assert_eq!(file_off, off + pos as u64);
                pos += c.len;
            }
            prop_assert_eq!(pos, len);
        }

        #[test]
        fn object_ranges_are_exactly_the_bytes_the_chunks_touch(ss in 1u32..64, sc in 1usize..8, off in 0u64..4096, len in 0usize..4096) {
            let ch = split_raid0(ss, sc, off, len);
            for stripe in 0..sc {
                let mine: Vec<_> = ch.iter().filter(|c| c.stripe == stripe).collect();
                let want = match (mine.first(), mine.last()) {
                    (Some(a), Some(b)) => (a.obj_offset, b.obj_offset + b.len as u64),
                    _ => {
                        let (s, e) = object_range_for(ss, sc, stripe, off, len as u64);
                        prop_assert_eq!(s, e);
                        continue;
                    }
                };
                // Contiguous: each chunk starts where the previous ended.
                for w in mine.windows(2) {
                    prop_assert_eq!(w[0].obj_offset + w[0].len as u64, w[1].obj_offset);
                }
                prop_assert_eq!(object_range_for(ss, sc, stripe, off, len as u64), want);
            }
        }

        #[test]
        fn object_sizes_add_up_to_file_size(ss in 1u32..64, sc in 1usize..8, size in 0u64..10_000) {
            let total: u64 = (0..sc).map(|i| object_size_for(ss, sc, i, size)).sum();
            prop_assert_eq!(total, size);
        }
    }
}
