//! Knomial-tree reduce.
//!
//! On the knomial tree of radix `reduce_kn_radix` rooted at the root
//! ([`knomial_tree`]), every rank combines its own vector with the partial
//! results of its children and sends that to its parent; the root's final
//! combine (the only reduce with `last`) writes the result to `dst`.
//!
//! Children are taken in batches of `radix - 1`, smallest subtrees first
//! (those finish first, and it bounds scratch to `radix - 1` vectors): each
//! batch is received side by side and reduced into the accumulator in one
//! go. The accumulator is `dst` at the root (in place, `dst` is also the
//! input) and scratch elsewhere, since non-roots have no `dst` and `src` is
//! never written; leaves send `src` as it is.

use ferrocoll_core::args::{Reduce, Reducer};
use ferrocoll_core::engine::try_join_all;
use ferrocoll_core::{Error, MemRef, Result};

use crate::p2p::Comm;
use crate::p2p::pattern::knomial_tree;

/// A partial result from a child to its parent.
const TAG_UP: u32 = 0;

pub(crate) async fn run(comm: Comm, o: Reduce) -> Result<()> {
    let (rank, size) = (comm.rank(), comm.size());
    let tree = Members { n: size, me: rank, root: o.root, tag: TAG_UP };
    over(&comm, tree, |m| m, o.src, o.dst, o.count, o.reducer, true).await
}

/// Who takes part in one knomial reduce: `n` members, this rank member
/// `me`, the root member `root`; messages carry `tag`.
#[derive(Clone, Copy)]
pub(crate) struct Members {
    pub n: usize,
    pub me: usize,
    pub root: usize,
    pub tag: u32,
}

/// The knomial-tree reduce of every member's `input` to the root member,
/// `peer(m)` being member m's team rank. The root gets the result in `out`
/// (None elsewhere), finished (`last`: avg's division) only when `finish`;
/// an unfinished result is a partial sum for a later level (the
/// hierarchical reduce, `hier.rs`).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn over(
    comm: &Comm,
    m: Members,
    peer: impl Fn(usize) -> usize,
    input: MemRef,
    out: Option<MemRef>,
    count: usize,
    reducer: Reducer,
    finish: bool,
) -> Result<()> {
    let radix = comm.config().reduce_kn_radix.max(2);
    let tree = knomial_tree(m.me, m.root, m.n, radix);
    let children: Vec<usize> = tree.children.iter().map(|&(c, _)| peer(c)).collect();
    if children.is_empty() {
        return match (tree.parent, out) {
            (Some(parent), _) => comm.send(peer(parent), m.tag, input).await,
            // One member: its contribution, finished by a `last` reduce (or kept as a partial).
            (None, Some(dst)) if finish => comm.reduce(dst, &[input], reducer.last(count)),
            (None, Some(dst)) => comm.copy(dst, input),
            (None, None) => Err(Error::internal(format!("reduce: member {} has neither parent nor dst", m.me))),
        };
    }
    let bytes = input.len();
    let own_scratch;
    // The root accumulates in its output (in place, the output is also the input).
    let acc = match out {
        Some(dst) => dst,
        None => {
            own_scratch = comm.scratch(bytes)?;
            own_scratch.mem()
        }
    };
    let batches = batches(&children, radix - 1);
    let slots = comm.scratch(bytes * batches.iter().map(Vec::len).max().unwrap_or(0))?;
    for (i, batch) in batches.iter().enumerate() {
        let bufs = (0..batch.len()).map(|j| slots.mem().range(j * bytes, bytes)).collect::<Result<Vec<_>>>()?;
        try_join_all(batch.iter().zip(&bufs).map(|(&c, &b)| comm.recv(c, m.tag, b))).await?;
        let mut srcs = vec![if i == 0 { input } else { acc }];
        srcs.extend(bufs);
        let last = finish && m.me == m.root && i + 1 == batches.len();
        comm.reduce(acc, &srcs, reducer.step(count, last))?;
    }
    match tree.parent {
        Some(parent) => comm.send(peer(parent), m.tag, acc).await,
        None => Ok(()),
    }
}

/// `children` (largest subtree first) in batches of at most `per`, smallest
/// subtrees first.
fn batches(children: &[usize], per: usize) -> Vec<Vec<usize>> {
    let rev: Vec<usize> = children.iter().rev().copied().collect();
    rev.chunks(per.max(1)).map(<[usize]>::to_vec).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_take_small_subtrees_first() {
        assert_eq!(batches(&[8, 4, 2, 1], 1), vec![vec![1], vec![2], vec![4], vec![8]]);
        assert_eq!(batches(&[12, 8, 4, 3, 2, 1], 3), vec![vec![1, 2, 3], vec![4, 8, 12]]);
        assert_eq!(batches(&[5, 1], 3), vec![vec![1, 5]]);
        assert!(batches(&[], 3).is_empty());
    }

    /// Every non-root rank sends to its parent exactly once and the parent
    /// takes it in exactly one batch.
    #[test]
    fn every_child_is_received_once() {
        for size in 1..40 {
            for root in [0, size / 2, size - 1] {
                for radix in 2..6 {
                    let mut got = vec![0; size];
                    for r in 0..size {
                        let t = knomial_tree(r, root, size, radix);
                        let kids: Vec<usize> = t.children.iter().map(|c| c.0).collect();
                        for c in batches(&kids, radix - 1).concat() {
                            got[c] += 1;
                            assert_eq!(knomial_tree(c, root, size, radix).parent, Some(r));
                        }
                    }
                    for (r, n) in got.iter().enumerate() {
                        assert_eq!(*n, usize::from(r != root), "size {size} root {root} radix {radix} rank {r}");
                    }
                }
            }
        }
    }
}
