//! [`Blocks`]: how a buffer is cut into one block per rank, shared by the
//! building blocks that several algorithms compose (ring allgather inside
//! ring allreduce, gather inside srg reduce, ...).

use ferrocoll_core::args::{Buf, block_count, block_offset};
use ferrocoll_core::{Error, MemRef, Result};

/// One `(byte offset, byte length)` per rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Blocks {
    ranges: Vec<(usize, usize)>,
}

impl Blocks {
    /// `total` elements of `elem_size` bytes cut into `parts` blocks with
    /// UCC's distribution (the first `total % parts` blocks get one more).
    pub(crate) fn even(total: usize, parts: usize, elem_size: usize) -> Blocks {
        let ranges = (0..parts)
            .map(|i| (block_offset(total, parts, i) * elem_size, block_count(total, parts, i) * elem_size))
            .collect();
        Blocks { ranges }
    }

    /// Blocks of `counts[i]` elements at `displs[i]` elements.
    pub(crate) fn from_counts(counts: &[usize], displs: &[usize], elem_size: usize) -> Blocks {
        Blocks { ranges: counts.iter().zip(displs).map(|(&c, &d)| (d * elem_size, c * elem_size)).collect() }
    }

    /// The blocks of a validated buffer: its v-layout, or an even split over `parts`.
    pub(crate) fn of_buf(buf: &Buf, parts: usize) -> Blocks {
        match &buf.v {
            Some(v) => Blocks::from_counts(&v.counts, &v.displs, buf.elem_size),
            None => Blocks::even(buf.count, parts, buf.elem_size),
        }
    }

    /// Number of blocks.
    pub(crate) fn len(&self) -> usize {
        self.ranges.len()
    }

    /// `(byte offset, byte length)` of block `i`.
    pub(crate) fn get(&self, i: usize) -> Result<(usize, usize)> {
        self.ranges
            .get(i)
            .copied()
            .ok_or_else(|| Error::internal(format!("block {i} of a layout of {} blocks", self.ranges.len())))
    }

    /// Block `i` of `buf`.
    pub(crate) fn of(&self, buf: MemRef, i: usize) -> Result<MemRef> {
        let (off, len) = self.get(i)?;
        buf.range(off, len)
    }

    /// Byte length of block `i` (0 when out of range).
    pub(crate) fn bytes(&self, i: usize) -> usize {
        self.ranges.get(i).map_or(0, |r| r.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn even_split_covers_everything() {
        let b = Blocks::even(10, 4, 8);
        assert_eq!(b.len(), 4);
        assert_eq!(b.get(0).unwrap(), (0, 24));
        assert_eq!(b.get(3).unwrap(), (64, 16));
        assert!(b.get(4).is_err());
        let v = Blocks::from_counts(&[2, 0, 3], &[5, 0, 0], 4);
        assert_eq!((v.get(0).unwrap(), v.bytes(1), v.bytes(9)), ((20, 8), 0, 0));
    }
}
