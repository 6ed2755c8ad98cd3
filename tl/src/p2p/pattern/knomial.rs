//! Knomial patterns: the tree used by rooted collectives (bcast, reduce,
//! gather, scatter, fanin, fanout) and the recursive k-ing exchange used by
//! allreduce, barrier, reduce-scatter and allgather.

/// A rank's place in a knomial tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KnomialTree {
    /// Parent rank (`None` at the root).
    pub parent: Option<usize>,
    /// Children with the size of their subtrees, largest subtree first (send order for bcast).
    pub children: Vec<(usize, usize)>,
    /// Size of this rank's own subtree, itself included.
    pub subtree: usize,
}

/// The knomial tree of radix `radix` over `size` ranks rooted at `root`.
///
/// In virtual ranks `v = rank - root (mod size)`: the parent of v clears
/// v's lowest non-zero base-`radix` digit; v's children are `v + i·radix^l`
/// (for i in 1..radix) at every level l below that digit. The subtree of the
/// child at level l spans virtual ranks `[c, c + radix^l)`.
pub fn knomial_tree(rank: usize, root: usize, size: usize, radix: usize) -> KnomialTree {
    let radix = radix.max(2);
    let v = (rank + size - root) % size;
    let real = |vr: usize| (vr + root) % size;
    // The level of v's lowest non-zero digit (where its parent link is), or
    // the number of levels for the root.
    let mut dist = 1usize;
    let mut parent = None;
    while dist < size {
        let digit = (v / dist) % radix;
        if digit != 0 {
            parent = Some(real(v - digit * dist));
            break;
        }
        match dist.checked_mul(radix) {
            Some(d) => dist = d,
            None => break,
        }
    }
    // Children: every level below `dist`, largest level first.
    let mut children = Vec::new();
    let mut level = dist;
    while level > 1 {
        level /= radix;
        for i in 1..radix {
            let c = v + i * level;
            if c >= size {
                break;
            }
            children.push((real(c), level.min(size - c)));
        }
    }
    let subtree = 1 + children.iter().map(|(_, s)| s).sum::<usize>();
    KnomialTree { parent, children, subtree }
}

/// A rank's role in a recursive k-ing exchange.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// Takes part in every step.
    Core,
    /// Takes part, and stands in for these extra ranks (folds their data in
    /// before the steps, sends them the result after).
    Proxy(Vec<usize>),
    /// Beyond the largest power of the radix: hands its data to its proxy and waits.
    Extra(usize),
}

/// Recursive k-ing over `size` ranks: the first `full` ranks (the largest
/// power of `radix` not above `size`) exchange in `steps` steps; each extra
/// rank `r >= full` is represented by proxy `r % full`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KnomialExchange {
    /// Radix (≥ 2).
    pub radix: usize,
    /// Number of ranks.
    pub size: usize,
    /// Ranks taking part in the steps.
    pub full: usize,
    /// Number of steps.
    pub steps: usize,
}

impl KnomialExchange {
    /// The pattern for `size` ranks (≥ 1) and radix `radix` (values below 2 mean 2).
    pub fn new(size: usize, radix: usize) -> KnomialExchange {
        let radix = radix.max(2);
        let (mut full, mut steps) = (1usize, 0usize);
        while let Some(next) = full.checked_mul(radix).filter(|&n| n <= size) {
            full = next;
            steps += 1;
        }
        KnomialExchange { radix, size, full, steps }
    }

    /// The role of `rank`.
    pub fn role(&self, rank: usize) -> Role {
        if rank >= self.full {
            return Role::Extra(rank % self.full);
        }
        let extras: Vec<usize> = (1..).map(|i| rank + i * self.full).take_while(|&r| r < self.size).collect();
        if extras.is_empty() { Role::Core } else { Role::Proxy(extras) }
    }

    /// Distance between group members at `step`: `radix^step`.
    pub fn distance(&self, step: usize) -> usize {
        self.radix.pow(step as u32)
    }

    /// The group of core rank `rank` at `step`, in increasing rank order
    /// (itself included): ranks that differ from it only in base-radix digit `step`.
    pub fn group(&self, rank: usize, step: usize) -> Vec<usize> {
        let d = self.distance(step);
        let base = rank - ((rank / d) % self.radix) * d;
        (0..self.radix).map(|i| base + i * d).collect()
    }

    /// This rank's position (its digit) within its group at `step`.
    pub fn digit(&self, rank: usize, step: usize) -> usize {
        (rank / self.distance(step)) % self.radix
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn binomial_tree_of_eight() {
        let t = knomial_tree(0, 0, 8, 2);
        assert_eq!(t.parent, None);
        assert_eq!(t.children, vec![(4, 4), (2, 2), (1, 1)]);
        assert_eq!(knomial_tree(6, 0, 8, 2).parent, Some(4));
        assert_eq!(knomial_tree(6, 0, 8, 2).children, vec![(7, 1)]);
        // Rooted at 3: virtual rank 1 is real rank 4.
        assert_eq!(knomial_tree(4, 3, 8, 2).parent, Some(3));
    }

    #[test]
    fn exchange_roles() {
        let p = KnomialExchange::new(15, 4);
        assert_eq!((p.full, p.steps), (4, 1));
        assert_eq!(p.role(1), Role::Proxy(vec![5, 9, 13]));
        assert_eq!(p.role(13), Role::Extra(1));
        assert_eq!(p.group(2, 0), vec![0, 1, 2, 3]);
        let p = KnomialExchange::new(8, 2);
        assert_eq!((p.full, p.steps, p.role(3)), (8, 3, Role::Core));
        assert_eq!(p.group(5, 1), vec![5, 7]);
        assert_eq!(KnomialExchange::new(1, 4).steps, 0);
    }

    proptest! {
        /// Every non-root rank has exactly one parent, whose child list names it,
        /// and the root's subtree is the whole team.
        #[test]
        fn tree_is_a_spanning_tree(size in 1usize..70, root_seed in 0usize..1000, radix in 2usize..6) {
            let root = root_seed % size;
            let trees: Vec<_> = (0..size).map(|r| knomial_tree(r, root, size, radix)).collect();
            prop_assert_eq!(trees[root].subtree, size);
            for (r, t) in trees.iter().enumerate() {
                match t.parent {
                    None => prop_assert_eq!(r, root),
                    Some(p) => {
                        let entry = trees[p].children.iter().find(|(c, _)| *c == r);
                        prop_assert!(entry.is_some(), "rank {} not a child of its parent {}", r, p);
                        prop_assert_eq!(entry.map(|e| e.1), Some(t.subtree));
                    }
                }
            }
        }

        /// Groups partition the core ranks at every step, and extras map to core proxies.
        #[test]
        fn exchange_groups_partition(size in 1usize..200, radix in 2usize..9) {
            let p = KnomialExchange::new(size, radix);
            prop_assert!(p.full <= size && p.full * p.radix > size);
            for step in 0..p.steps {
                for r in 0..p.full {
                    let g = p.group(r, step);
                    prop_assert!(g.contains(&r));
                    prop_assert_eq!(g[p.digit(r, step)], r);
                    for &m in &g {
                        prop_assert!(m < p.full);
                        prop_assert_eq!(p.group(m, step), g.clone());
                    }
                }
            }
            let mut covered = vec![0usize; size];
            for r in 0..size {
                match p.role(r) {
                    Role::Core => covered[r] += 1,
                    Role::Proxy(ex) => { covered[r] += 1; for e in ex { covered[e] += 1; prop_assert_eq!(p.role(e), Role::Extra(r)); } }
                    Role::Extra(_) => {}
                }
            }
            prop_assert!(covered.iter().all(|&c| c == 1));
        }
    }
}
