//! Scatter-reduce-gather reduce (srg_knomial): knomial reduce-scatter,
//! then a gather of the reduced ranges to the root.
//!
//! The knomial reduce-scatter ([`knomial_reduce_scatter`], radix
//! `reduce_srg_kn_radix`) leaves on each core rank c (below `full`, the largest
//! power of the radix) the final values of its range of the vector, at its
//! offset in a work buffer: `dst` at the root, scratch elsewhere (non-roots
//! have no `dst`, and `src` is never written). Ranks beyond `full` fold
//! their vector into a proxy and own an empty range. The gather
//! ([`gather_blocks`]) then brings every range to its place in the root's
//! `dst`; the root's own range is already there. In place, the root's `dst`
//! is its input. Moves about 2(P-1)/P of the vector, so it suits large
//! messages better than the tree.

use ferrocoll_core::Result;
use ferrocoll_core::args::{Blocks, Reduce};

use crate::p2p::Comm;
use crate::p2p::alg::gather::linear::gather_blocks;
use crate::p2p::alg::reduce_scatter::knomial::{knomial_reduce_scatter, span};
use crate::p2p::pattern::{KnomialExchange, Role};

pub(crate) async fn run(comm: Comm, o: Reduce) -> Result<()> {
    let (rank, size, count, es) = (comm.rank(), comm.size(), o.count, o.reducer.elem_size);
    let pat = KnomialExchange::new(size, comm.config().reduce_srg_kn_radix);
    let scratch;
    let work = match o.dst {
        Some(dst) => dst,
        None => {
            let extra = matches!(pat.role(rank), Role::Extra(_));
            scratch = comm.scratch(if extra { 0 } else { count * es })?;
            scratch.mem()
        }
    };
    knomial_reduce_scatter(&comm, &o.reducer, &pat, o.src, work, count).await?;
    let blocks = ranges(count, &pat, size, es);
    gather_blocks(&comm.phase(1), work, &blocks, o.root).await
}

/// One block per rank: a core rank's reduce-scatter range, empty for the others.
fn ranges(count: usize, pat: &KnomialExchange, size: usize, es: usize) -> Blocks {
    let (counts, displs): (Vec<usize>, Vec<usize>) = (0..size)
        .map(|r| if r < pat.full { span(count, pat.full, r, r + 1) } else { (0, 0) })
        .map(|(off, len)| (len, off))
        .unzip();
    Blocks::from_counts(&counts, &displs, es)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ranges tile the whole vector, in rank order, with extras empty.
    #[test]
    fn ranges_tile_the_vector() {
        for size in 1..40 {
            for radix in 2..5 {
                let pat = KnomialExchange::new(size, radix);
                for count in [0, 1, 7, 100] {
                    let b = ranges(count, &pat, size, 4);
                    assert_eq!(b.len(), size);
                    let mut at = 0;
                    for r in 0..size {
                        let (off, len) = b.get(r).unwrap();
                        if r >= pat.full {
                            assert_eq!(len, 0);
                            continue;
                        }
                        assert_eq!(off, at);
                        at += len;
                    }
                    assert_eq!(at, count * 4);
                }
            }
        }
    }
}
