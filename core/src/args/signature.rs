//! What every rank must agree on for one collective, so that ranks whose
//! calls differ fail, naming each other, instead of exchanging data that
//! does not fit (wrong results returned as success, or a hang).
//!
//! A [`Signature`] packs the collective, its reduction (datatype and
//! operation; data movement compares bytes, not types), its root, and its
//! size: elements for reductions, bytes for data movement, "unknown" for the
//! v-variants where a rank does not know the others' sizes (gatherv,
//! scatterv, alltoallv: their size rounds check those). Allgatherv and
//! reduce_scatterv, whose every rank holds every count, carry a 32-bit
//! hash of the blocks' lengths where a rooted collective has its root:
//! counts that differ between ranks while their totals agree are caught
//! like any other difference (but for a hash collision, one in 2^32). Two
//! words, cheap to carry: the shm TL writes it into a control line at every step, p2p
//! messages carry it, and the call board (see `backend::board`) shows it.

use super::{Blocks, CollInit, Operands};
use crate::types::{CollType, DataType, ReduceOp};

/// Where the root (or an allgatherv's or reduce_scatterv's layout hash) sits in the word.
const ROOT_SHIFT: u32 = 32;
/// A size that one rank cannot know for the others.
const UNKNOWN: u64 = u64::MAX;
/// The datatype and op bytes of a collective without a reduction.
const NONE: u64 = 0xff;

/// One collective's signature (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Signature {
    /// collective index | datatype << 8 | op << 16 | root << 32 (bits 24..32
    /// are zero: free for a tag, see [`Signature::TAG_BITS`]).
    pub word: u64,
    /// Elements (reductions) or bytes (data movement), or `u64::MAX` when unknown.
    pub size: u64,
}

impl Signature {
    /// The bits of [`Signature::word`] that are always zero, free for a user
    /// to tag the word with (the shm TL puts an epoch's low byte there).
    pub const TAG_BITS: u64 = 0xff << 24;

    /// The signature of `init`.
    pub fn of(init: &CollInit) -> Signature {
        use CollType::*;
        let coll = init.coll;
        let reduction = coll.is_reduction().then_some((init.dtype, init.op));
        let size = match coll {
            Gatherv | Scatterv | Alltoallv => UNKNOWN,
            _ if coll.is_reduction() => init.count as u64,
            _ => (init.count as u64).saturating_mul(init.elem_size as u64),
        };
        let root_or_layout = match &init.ops {
            _ if coll.is_rooted() => init.root as u64,
            Operands::Allgather(o) if coll == Allgatherv => layout_hash(&o.dst.blocks),
            Operands::ReduceScatter(o) if coll == ReduceScatterv => layout_hash(&o.src.blocks),
            _ => 0,
        };
        let mut sig = Signature::new(coll, reduction, 0, size);
        sig.word |= root_or_layout << ROOT_SHIFT;
        sig
    }

    /// A signature from its parts, for callers that have no `CollInit` (a
    /// TL's own handshake, tests): `reduction` is the datatype and operation
    /// of a reduction (`None` for data movement), `root` 0 for a collective
    /// without one, `size` as [`Signature::size`] says (`u64::MAX`: unknown).
    /// [`Signature::of`] a barrier is `Signature::new(CollType::Barrier, None, 0, 0)`.
    pub fn new(coll: CollType, reduction: Option<(DataType, ReduceOp)>, root: usize, size: u64) -> Signature {
        let (dtype, op) = reduction.map_or((NONE, NONE), |(d, o)| (d as u64, o as u64));
        let word = coll.index() as u64 | dtype << 8 | op << 16 | (root as u64 & 0xffff_ffff) << ROOT_SHIFT;
        Signature { word, size }
    }

    /// Whether two ranks' signatures fit together.
    pub fn agrees(&self, other: &Signature) -> bool {
        self.word == other.word && (self.size == other.size || self.size == UNKNOWN || other.size == UNKNOWN)
    }

    /// The call in words: "allreduce sum float32 of 1024 elements", "bcast root 0 of 4096 bytes".
    pub fn describe(&self) -> String {
        let field = |shift: u32| (self.word >> shift) & 0xff;
        // (TAG_BITS are not part of the call)
        let coll = CollType::ALL.into_iter().find(|c| c.index() as u64 == field(0));
        let mut s = coll.map_or_else(|| format!("collective #{}", field(0)), |c| c.name().to_string());
        if field(16) != NONE {
            let op = ReduceOp::ALL.into_iter().find(|o| *o as u64 == field(16));
            let dtype = DataType::ALL.into_iter().find(|d| *d as u64 == field(8));
            s += &format!(" {} {}", op.map_or("?", |o| o.name()), dtype.map_or("?", |d| d.name()));
        }
        if coll.is_some_and(CollType::is_rooted) {
            s += &format!(" root {}", self.word >> ROOT_SHIFT);
        }

        let unit = if field(16) != NONE { "elements" } else { "bytes" };
        if self.size != UNKNOWN {
            s += &format!(" of {} {unit}", self.size);
        }
        if matches!(coll, Some(CollType::Allgatherv | CollType::ReduceScatterv)) {
            s += &format!(" in blocks #{:08x}", self.word >> ROOT_SHIFT);
        }
        s
    }
}

/// A 32-bit hash of the blocks' byte lengths, in rank order (FNV-1a over
/// the lengths' bytes: an error check against counts that differ, not a
/// defence against chosen collisions).
fn layout_hash(blocks: &Blocks) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for i in 0..blocks.len() {
        for b in (blocks.bytes(i) as u64).to_le_bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    (h ^ h >> 32) & 0xffff_ffff
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sig(coll: CollType, dtype: DataType, op: ReduceOp, root: usize, size: u64) -> Signature {
        Signature::new(coll, coll.is_reduction().then_some((dtype, op)), root, size)
    }

    #[test]
    fn fields_that_differ_disagree_and_describe_themselves() {
        use CollType::*;
        let a = sig(Allreduce, DataType::Float32, ReduceOp::Sum, 0, 1024);
        assert!(a.agrees(&a));
        assert!(!a.agrees(&sig(Allreduce, DataType::Float64, ReduceOp::Sum, 0, 1024)));
        assert!(!a.agrees(&sig(Allreduce, DataType::Float32, ReduceOp::Max, 0, 1024)));
        assert!(!a.agrees(&sig(Allreduce, DataType::Float32, ReduceOp::Sum, 0, 512)));
        assert!(!a.agrees(&sig(Bcast, DataType::Float32, ReduceOp::Sum, 0, 4096)));
        assert_eq!(a.describe(), "allreduce sum float32 of 1024 elements");
        let b = sig(Bcast, DataType::Uint8, ReduceOp::Sum, 3, 4096);
        assert_eq!(b.describe(), "bcast root 3 of 4096 bytes");
        assert!(!b.agrees(&sig(Bcast, DataType::Uint8, ReduceOp::Sum, 2, 4096)));
        let v = sig(Gatherv, DataType::Uint8, ReduceOp::Sum, 1, UNKNOWN);
        assert!(v.agrees(&sig(Gatherv, DataType::Uint8, ReduceOp::Sum, 1, 80)));
        assert_eq!(v.describe(), "gatherv root 1");
    }

    #[test]
    fn layouts_that_differ_hash_apart() {
        let h = |counts: &[usize]| layout_hash(&Blocks::back_to_back(counts, 4));
        assert_eq!(h(&[1, 3]), layout_hash(&Blocks::from_counts(&[1, 3], &[7, 0], 4)), "displacements are local");
        assert_ne!(h(&[1, 3]), h(&[2, 2]));
        assert_ne!(h(&[1, 3]), h(&[3, 1]));
        assert_ne!(h(&[4]), h(&[4, 0]));
        assert!(h(&[5, 6, 7]) <= 0xffff_ffff);
    }
}
