//! Block bookkeeping of the knomial trees of rooted collectives that move one
//! block per rank (gather and scatter knomial, the scatter of sag bcast).
//!
//! In virtual ranks `v = rank - root (mod size)` every knomial subtree is a
//! contiguous range `[v, v + len)` (see [`knomial_tree`]), so a rank keeps its
//! subtree's blocks in virtual-rank order and a child's blocks are one
//! contiguous slice of them. Only the root has to map virtual ranks back to
//! real ones, where a range may wrap past rank `size - 1` to rank 0
//! ([`real_runs`]). Pure functions, no I/O.

use super::knomial_tree;

/// A child in a [`Subtree`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Child {
    /// Real team rank.
    pub rank: usize,
    /// Its first block, counted from the parent's first block (its own).
    pub first: usize,
    /// Blocks in its subtree.
    pub len: usize,
}

/// One rank's place in a knomial tree, in blocks of virtual-rank order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Subtree {
    /// This rank's virtual rank: the first block of its subtree.
    pub vrank: usize,
    /// Blocks in this rank's subtree (itself included).
    pub len: usize,
    /// Parent (real rank), `None` at the root.
    pub parent: Option<usize>,
    /// Children, largest subtree first.
    pub children: Vec<Child>,
}

/// Virtual rank of `rank` in a tree rooted at `root` over `size` ranks.
pub(crate) fn vrank(rank: usize, root: usize, size: usize) -> usize {
    (rank + size - root) % size
}

/// The subtree of `rank` in the knomial tree of `radix` over `size` ranks rooted at `root`.
pub(crate) fn subtree(rank: usize, root: usize, size: usize, radix: usize) -> Subtree {
    let tree = knomial_tree(rank, root, size, radix);
    let v = vrank(rank, root, size);
    let children =
        tree.children.iter().map(|&(c, len)| Child { rank: c, first: vrank(c, root, size) - v, len }).collect();
    Subtree { vrank: v, len: tree.subtree, parent: tree.parent, children }
}

/// A run of consecutive real ranks: `(first rank, number of ranks)`.
pub(crate) type Run = (usize, usize);

/// The real ranks that virtual ranks `[v, v + n)` stand for (`v + n <= size`):
/// one run, or two when the range wraps past rank `size - 1` to rank 0.
pub(crate) fn real_runs(v: usize, n: usize, root: usize, size: usize) -> (Run, Option<Run>) {
    let first = (v + root) % size;
    let head = n.min(size - first);
    if head == n { ((first, n), None) } else { ((first, head), Some((0, n - head))) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn children_are_slices_of_the_parent() {
        // Binomial tree of 8 rooted at 3: real rank 3 is virtual 0.
        let t = subtree(3, 3, 8, 2);
        assert_eq!((t.vrank, t.len, t.parent), (0, 8, None));
        let firsts: Vec<_> = t.children.iter().map(|c| (c.rank, c.first, c.len)).collect();
        assert_eq!(firsts, vec![(7, 4, 4), (5, 2, 2), (4, 1, 1)]);
        // Real 7 is virtual 4: children virtual 6 (real 1) and 5 (real 0).
        let t = subtree(7, 3, 8, 2);
        assert_eq!((t.vrank, t.len, t.parent), (4, 4, Some(3)));
        assert_eq!(t.children, vec![Child { rank: 1, first: 2, len: 2 }, Child { rank: 0, first: 1, len: 1 }]);
        assert_eq!(subtree(0, 0, 1, 4), Subtree { vrank: 0, len: 1, parent: None, children: vec![] });
    }

    #[test]
    fn runs_wrap_at_the_end_of_the_team() {
        assert_eq!(real_runs(0, 5, 0, 5), ((0, 5), None));
        assert_eq!(real_runs(1, 3, 1, 5), ((2, 3), None));
        assert_eq!(real_runs(2, 3, 1, 5), ((3, 2), Some((0, 1))));
        assert_eq!(real_runs(1, 3, 3, 5), ((4, 1), Some((0, 2))));
        assert_eq!(real_runs(0, 5, 3, 5), ((3, 2), Some((0, 3))));
        assert_eq!(real_runs(2, 0, 3, 5), ((0, 0), None));
    }

    proptest! {
        /// Children's slices tile the parent's subtree after its own block,
        /// and each child's slice is the child's own subtree.
        #[test]
        fn children_tile_the_subtree(size in 1usize..80, root_seed in 0usize..1000, radix in 2usize..6) {
            let root = root_seed % size;
            for r in 0..size {
                let t = subtree(r, root, size, radix);
                let mut covered = vec![false; t.len];
                covered[0] = true;
                for c in &t.children {
                    let ct = subtree(c.rank, root, size, radix);
                    prop_assert_eq!(ct.vrank, t.vrank + c.first);
                    prop_assert_eq!(ct.len, c.len);
                    prop_assert_eq!(ct.parent, Some(r));
                    for slot in &mut covered[c.first..c.first + c.len] {
                        prop_assert!(!*slot);
                        *slot = true;
                    }
                }
                prop_assert!(covered.iter().all(|&c| c));
            }
        }

        /// The runs name exactly the real ranks of the virtual range, in order.
        #[test]
        fn runs_cover_the_range(size in 1usize..80, root_seed in 0usize..1000, v_seed in 0usize..1000, n_seed in 0usize..1000) {
            let root = root_seed % size;
            let v = v_seed % size;
            let n = n_seed % (size - v + 1);
            let (a, b) = real_runs(v, n, root, size);
            let mut ranks: Vec<usize> = (a.0..a.0 + a.1).collect();
            if let Some(b) = b {
                prop_assert!(b.1 > 0 && a.0 + a.1 == size && b.0 == 0);
                ranks.extend(b.0..b.0 + b.1);
            }
            let expect: Vec<usize> = (v..v + n).map(|u| (u + root) % size).collect();
            prop_assert_eq!(ranks, expect);
        }
    }
}
