//! Knomial fanout: empty messages flow down a knomial tree (radix
//! `fanout_kn_radix`) from the root. A rank waits for the empty message from
//! its parent, then sends one to each of its children (all at once); so no
//! rank leaves before the root has entered.
//!
//! Any team size works: the knomial tree spans every rank, and a rank at the
//! edge of a non-power-of-radix team just has fewer children.

use ferrocoll_core::engine::try_join_all;
use ferrocoll_core::{MemRef, MemType, Result};

use crate::p2p::Comm;
use crate::p2p::pattern::knomial_tree;

const TAG: u32 = 0;

pub(crate) async fn run(comm: Comm, root: usize) -> Result<()> {
    let none = MemRef::empty(MemType::Host);
    let tree = knomial_tree(comm.rank(), root, comm.size(), comm.config().fanout_kn_radix);
    if let Some(parent) = tree.parent {
        comm.recv(parent, TAG, none).await?;
    }
    let sends = tree.children.iter().map(|&(c, _)| comm.isend(c, TAG, none)).collect::<Result<Vec<_>>>()?;
    try_join_all(sends).await
}
