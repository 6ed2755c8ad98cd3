//! Hierarchical reduce: a knomial reduce at each level of the hierarchy
//! (`pattern::hier`), bottom up: within each node to its leader, among each
//! switch group's node leaders to the group's leader, among the group
//! leaders to the root. The root leads its node, its group and the top (no
//! extra hop), so its partial results are already where the final one goes;
//! every other node's vector crosses its group's switch once, and every
//! other group's the top switch once. With one switch group this is two
//! levels (node, node leaders).
//!
//! Partial results are finished (avg's division) only at the root's last
//! combine. A leader accumulates in dst at the root and in one scratch
//! elsewhere, which is also its input at the next level. Chosen by name
//! (`reduce:@hier`).

use ferrocoll_core::args::Reduce;
use ferrocoll_core::{MemRef, Result};

use super::knomial::{Members, over};
use crate::p2p::Comm;
use crate::p2p::pattern::hier::levels;

pub(crate) async fn run(comm: Comm, o: Reduce) -> Result<()> {
    let rank = comm.rank();
    let levels = levels(comm.layout(), rank, Some(o.root))?;
    let active: Vec<_> = levels.iter().enumerate().filter(|(_, l)| !l.trivial()).collect();
    if active.is_empty() {
        // Alone: the rank's own vector, finished.
        let one = Members { n: 1, me: 0, root: 0, tag: 0 };
        return over(&comm, one, |_| rank, o.src, o.dst, o.count, o.reducer, true).await;
    }
    let scratch;
    // Where a leader accumulates: dst at the root, scratch elsewhere.
    let partial: MemRef = match o.dst.filter(|_| rank == o.root) {
        Some(dst) => dst,
        None => {
            scratch = comm.scratch(o.src.len())?;
            scratch.mem()
        }
    };
    let mut input = o.src;
    for (k, &(i, level)) in active.iter().enumerate() {
        let m = Members { n: level.members.len(), me: level.me, root: level.leader, tag: 0 };
        let out = level.leads().then_some(partial);
        let finish = k + 1 == active.len() && rank == o.root;
        over(&comm.phase(i as u32), m, |x| level.members[x], input, out, o.count, o.reducer, finish).await?;
        if !level.leads() {
            return Ok(());
        }
        input = partial;
    }
    Ok(())
}
