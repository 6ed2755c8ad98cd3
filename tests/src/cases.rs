//! The conformance matrix: which cases run for a (collective, algorithm, team size).
//!
//! Sampling (the full product is far too large for CI): for each
//! (collective, algorithm, team size) the cases are
//! 1. every datatype (data movement) or every meaningful (datatype, op) pair
//!    (reductions) once, with count, in-place, persistent, root and count
//!    width rotating through their values at co-prime strides; and
//! 2. the full product of count × in-place × persistent × root × count width,
//!    with the datatype (and op) rotating.
//!
//! So every value of every axis is covered for every algorithm and team
//! size, every pair among the small axes is covered, and every (datatype,
//! op) pair meets several counts and both in-place settings across the team sizes.

use std::fmt;

use ferrocoll::{CollType, DataType, ReduceOp};

use crate::dtypes::reduction_pairs;

/// Element counts: zero, one, small odd, and large (> 16 KiB for wide types: the rendezvous path).
pub const COUNTS: [usize; 5] = [0, 1, 7, 131, 4099];

/// One conformance case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Case {
    /// Collective.
    pub coll: CollType,
    /// Datatype.
    pub dtype: DataType,
    /// Reduction (sum for collectives without one).
    pub op: ReduceOp,
    /// N: per-rank count (the block size for allgather, alltoall, gather, scatter, reduce_scatter).
    pub count: usize,
    /// In place.
    pub in_place: bool,
    /// Persistent: posted three times.
    pub persistent: bool,
    /// Root (rooted collectives).
    pub root: usize,
    /// v-variant counts/displacements as u64 (else u32).
    pub wide_counts: bool,
    /// Seed of the inputs.
    pub seed: u64,
}

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.coll, self.dtype)?;
        if self.coll.is_reduction() {
            write!(f, " {}", self.op)?;
        }
        write!(f, " count {}", self.count)?;
        if self.in_place {
            f.write_str(" in-place")?;
        }
        if self.persistent {
            f.write_str(" persistent")?;
        }
        if self.coll.is_rooted() {
            write!(f, " root {}", self.root)?;
        }
        if self.coll.is_vector() {
            f.write_str(if self.wide_counts { " u64-counts" } else { " u32-counts" })?;
        }
        write!(f, " seed {}", self.seed)
    }
}

/// Whether `coll` accepts the in-place flag.
pub fn in_place_allowed(coll: CollType) -> bool {
    !matches!(coll, CollType::Bcast | CollType::Barrier | CollType::Fanin | CollType::Fanout)
}

/// Roots worth testing in a team of `size`: first, middle, last.
pub fn roots(size: usize) -> Vec<usize> {
    let mut r = vec![0, size / 2, size - 1];
    r.dedup();
    r
}

/// The cases for one collective and team size (see the module docs).
pub fn matrix(coll: CollType, size: usize, seed: u64) -> Vec<Case> {
    let types: Vec<(DataType, ReduceOp)> = if coll.is_reduction() {
        reduction_pairs()
    } else if coll.is_synchronisation() {
        vec![(DataType::Uint8, ReduceOp::Sum)]
    } else {
        DataType::ALL.iter().map(|&d| (d, ReduceOp::Sum)).collect()
    };
    let counts: &[usize] = if coll.is_synchronisation() { &[0] } else { &COUNTS };
    let in_places: &[bool] = if in_place_allowed(coll) { &[false, true] } else { &[false] };
    let roots = if coll.is_rooted() { roots(size) } else { vec![0] };
    let widths: &[bool] = if coll.is_vector() { &[false, true] } else { &[true] };
    let mut cases = Vec::new();
    let mut push = |(dtype, op): (DataType, ReduceOp), count, in_place, persistent, root, wide_counts| {
        let seed = seed.wrapping_mul(1_000_003).wrapping_add(cases.len() as u64);
        cases.push(Case { coll, dtype, op, count, in_place, persistent, root, wide_counts, seed });
    };
    // 1. Every type once, other axes rotating at co-prime strides.
    for (i, &t) in types.iter().enumerate() {
        push(
            t,
            counts[i % counts.len()],
            in_places[(i / 3) % in_places.len()],
            (i / 2) % 2 == 1,
            roots[(i / 5) % roots.len()],
            widths[(i / 7) % widths.len()],
        );
    }
    // 2. The full product of the small axes, types rotating.
    let mut k = 0;
    for &count in counts {
        for &in_place in in_places {
            for persistent in [false, true] {
                for &root in &roots {
                    for &wide in widths {
                        push(types[(k * 7 + 3) % types.len()], count, in_place, persistent, root, wide);
                        k += 1;
                    }
                }
            }
        }
    }
    cases
}

/// [`matrix`] without the reductions device memory has none of (float128).
pub fn device_matrix(coll: CollType, size: usize, seed: u64) -> Vec<Case> {
    let reduces = |c: &Case| !coll.is_reduction() || c.op.check_device_dtype(c.dtype).is_ok();
    matrix(coll, size, seed).into_iter().filter(reduces).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_axis_value_appears() {
        let m = matrix(CollType::Allreduce, 5, 1);
        for c in COUNTS {
            assert!(m.iter().any(|x| x.count == c));
        }
        assert!(m.iter().any(|x| x.in_place) && m.iter().any(|x| x.persistent));
        for (dt, op) in reduction_pairs() {
            assert!(m.iter().any(|x| x.dtype == dt && x.op == op), "{dt} {op}");
        }
        let g = matrix(CollType::Gatherv, 7, 1);
        for r in [0, 3, 6] {
            assert!(g.iter().any(|x| x.root == r));
        }
        assert!(g.iter().any(|x| !x.wide_counts) && g.iter().any(|x| x.wide_counts));
        assert!(matrix(CollType::Bcast, 4, 1).iter().all(|x| !x.in_place));
    }
}
