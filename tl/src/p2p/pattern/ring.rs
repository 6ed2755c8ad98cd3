//! Ring neighbours.

/// A rank's neighbours on the ring 0 → 1 → … → size-1 → 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ring {
    /// This rank.
    pub rank: usize,
    /// Ranks on the ring.
    pub size: usize,
}

impl Ring {
    /// The ring position of `rank` among `size` ranks.
    pub fn new(rank: usize, size: usize) -> Ring {
        Ring { rank, size }
    }

    /// The rank we send to.
    pub fn right(&self) -> usize {
        (self.rank + 1) % self.size
    }

    /// The rank we receive from.
    pub fn left(&self) -> usize {
        (self.rank + self.size - 1) % self.size
    }

    /// `(rank - k) mod size`, for block indices that walk backwards around the ring.
    pub fn back(&self, k: usize) -> usize {
        (self.rank + self.size - k % self.size) % self.size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neighbours() {
        let r = Ring::new(0, 5);
        assert_eq!((r.left(), r.right(), r.back(2), r.back(7)), (4, 1, 3, 3));
        let one = Ring::new(0, 1);
        assert_eq!((one.left(), one.right()), (0, 0));
    }
}
