//! [`Blocks`]: how a buffer is cut into one block per rank — UCC's even
//! split of a count, or the counts and displacements of a v-variant.

use std::sync::Arc;

use crate::buffer::MemRef;
use crate::error::{Error, Result};

/// Elements in block `r` when `total` elements are split over `size` ranks:
/// the first `total % size` blocks hold one more (UCC's distribution).
pub fn block_count(total: usize, size: usize, r: usize) -> usize {
    if size == 0 {
        return 0;
    }
    total / size + usize::from(r < total % size)
}

/// First element of block `r` (see [`block_count`]).
pub fn block_offset(total: usize, size: usize, r: usize) -> usize {
    if size == 0 {
        return 0;
    }
    let (q, rem) = (total / size, total % size);
    r * q + r.min(rem)
}

/// One `(byte offset, byte length)` per rank.
///
/// Cheap to clone: an even split is three numbers, a listed layout is shared.
/// Offsets and lengths come from validated arguments (whose extents were
/// checked against the address space) or from an algorithm's own arithmetic
/// over such a layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blocks(Repr);

#[derive(Clone, Debug, PartialEq, Eq)]
enum Repr {
    /// UCC's even split of some total of elements of `elem_size` bytes
    /// over `parts`: `each` elements in every block, one more in the first
    /// `longer` (the total's quotient and remainder, worked out once: a
    /// block's look-up is on every small collective's path, where two
    /// divisions took longer than the rest of it).
    Even { parts: usize, elem_size: usize, each: usize, longer: usize },
    /// Explicit ranges.
    Listed(Arc<[(usize, usize)]>),
}

impl Blocks {
    /// `total` elements of `elem_size` bytes cut into `parts` blocks with
    /// UCC's distribution (the first `total % parts` blocks get one more).
    pub fn even(total: usize, parts: usize, elem_size: usize) -> Blocks {
        let (each, longer) = total.checked_div(parts).zip(total.checked_rem(parts)).unwrap_or((0, 0));
        Blocks(Repr::Even { parts, elem_size, each, longer })
    }

    /// Blocks of `counts[i]` elements at `displs[i]` elements. An empty
    /// block's displacement means nothing (UCC lets it be anything, and
    /// validation does not bound it), so its byte offset saturates rather
    /// than overflow; a non-empty block's was checked by validation.
    pub fn from_counts(counts: &[usize], displs: &[usize], elem_size: usize) -> Blocks {
        let ranges = counts.iter().zip(displs).map(|(&c, &d)| (d.saturating_mul(elem_size), c * elem_size));
        Blocks(Repr::Listed(ranges.collect()))
    }

    /// Blocks of `counts[i]` elements placed one after the other from offset 0
    /// (reduce_scatterv's vector).
    pub fn back_to_back(counts: &[usize], elem_size: usize) -> Blocks {
        let mut at = 0;
        let displs: Vec<usize> = counts
            .iter()
            .map(|&c| {
                let d = at;
                at += c;
                d
            })
            .collect();
        Blocks::from_counts(counts, &displs, elem_size)
    }

    /// Number of blocks.
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Even { parts, .. } => *parts,
            Repr::Listed(r) => r.len(),
        }
    }

    /// True when there are no blocks.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `(byte offset, byte length)` of block `i`.
    pub fn get(&self, i: usize) -> Result<(usize, usize)> {
        match &self.0 {
            // As `block_offset` and `block_count`.
            Repr::Even { parts, elem_size, each, longer } if i < *parts => {
                Ok(((i * each + i.min(*longer)) * elem_size, (each + usize::from(i < *longer)) * elem_size))
            }
            Repr::Listed(r) if i < r.len() => Ok(r[i]),
            _ => Err(Error::internal(format!("block {i} of a layout of {} blocks", self.len()))),
        }
    }

    /// Block `i` of `buf`.
    pub fn of(&self, buf: MemRef, i: usize) -> Result<MemRef> {
        let (off, len) = self.get(i)?;
        buf.range(off, len)
    }

    /// Byte length of block `i` (0 when out of range).
    pub fn bytes(&self, i: usize) -> usize {
        self.get(i).map_or(0, |r| r.1)
    }

    /// The byte length of every block when all are equal and block `i`
    /// starts at `i` times it (a plain array of blocks); `None` otherwise.
    pub fn uniform(&self) -> Option<usize> {
        match &self.0 {
            Repr::Even { parts, elem_size, each, longer } => (*parts > 0 && *longer == 0).then(|| each * elem_size),
            Repr::Listed(r) => {
                let n = r.first().map_or(0, |b| b.1);
                r.iter().enumerate().all(|(i, &(off, len))| len == n && off == i * n).then_some(n)
            }
        }
    }
}

/// A buffer and its blocks, one per rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blocked {
    /// The whole buffer.
    pub mem: MemRef,
    /// Its blocks.
    pub blocks: Blocks,
}

impl Blocked {
    /// Rank `i`'s block of the buffer.
    pub fn block(&self, i: usize) -> Result<MemRef> {
        self.blocks.of(self.mem, i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::MemType;

    #[test]
    fn blocks_cover_the_total() {
        for total in [0usize, 1, 7, 16, 101] {
            for size in 1..9 {
                let mut at = 0;
                for r in 0..size {
                    assert_eq!(block_offset(total, size, r), at);
                    at += block_count(total, size, r);
                }
                assert_eq!(at, total);
            }
        }
        assert_eq!(block_count(10, 4, 0), 3);
        assert_eq!(block_count(10, 4, 3), 2);
    }

    #[test]
    fn even_and_listed_layouts() {
        let b = Blocks::even(10, 4, 8);
        assert_eq!(b.len(), 4);
        assert_eq!(b.get(0).unwrap(), (0, 24));
        assert_eq!(b.get(3).unwrap(), (64, 16));
        assert!(b.get(4).is_err());
        assert_eq!(b.uniform(), None);
        assert_eq!(Blocks::even(12, 4, 2).uniform(), Some(6));
        let v = Blocks::from_counts(&[2, 0, 3], &[5, usize::MAX, 0], 4);
        assert_eq!((v.get(0).unwrap(), v.get(1).unwrap(), v.bytes(9)), ((20, 8), (usize::MAX, 0), 0));
        assert_eq!(v.uniform(), None);
        assert_eq!(Blocks::from_counts(&[2, 2], &[0, 2], 4).uniform(), Some(8));
        let btb = Blocks::back_to_back(&[2, 0, 3], 2);
        assert_eq!((btb.get(1).unwrap(), btb.get(2).unwrap()), ((4, 0), (4, 6)));
    }

    /// Whether the split divides or not, every block is UCC's.
    #[test]
    fn even_blocks_are_ucc_distribution() {
        for total in [0usize, 1, 7, 12, 16, 101, 240] {
            for parts in 1..9 {
                for elem in [1usize, 2, 4, 8, 16] {
                    let b = Blocks::even(total, parts, elem);
                    assert_eq!(b.len(), parts);
                    for i in 0..parts {
                        let want = (block_offset(total, parts, i) * elem, block_count(total, parts, i) * elem);
                        assert_eq!(b.get(i).unwrap(), want, "total {total}, parts {parts}, elem {elem}, block {i}");
                    }
                    assert!(b.get(parts).is_err());
                    let even = total.is_multiple_of(parts);
                    assert_eq!(b.uniform(), even.then_some(total / parts * elem));
                }
            }
        }
        assert!(Blocks::even(8, 0, 4).is_empty() && Blocks::even(8, 0, 4).get(0).is_err());
    }

    #[test]
    fn empty_blocks_may_point_anywhere() {
        let mut v = vec![0u8; 8];
        // SAFETY: v outlives m and is not touched while m is used.
        let m = unsafe { MemRef::from_mut_slice(&mut v) };
        let b = Blocked { mem: m, blocks: Blocks::from_counts(&[2, 0, 3], &[0, 100, 4], 1) };
        assert_eq!(b.block(1).unwrap(), MemRef::empty(MemType::Host));
        assert_eq!(b.block(2).unwrap(), m.range(4, 3).unwrap());
        assert!(b.block(3).is_err());
    }
}
