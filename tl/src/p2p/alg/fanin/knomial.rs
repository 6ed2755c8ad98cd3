//! Knomial fanin: empty messages flow up a knomial tree (radix
//! `fanin_kn_radix`) towards the root. A rank waits for an empty message
//! from each of its children (all receives posted at once), then sends one
//! to its parent; so when the root has heard from all its children, every
//! rank of the team has entered. Non-root ranks leave as soon as their
//! message is sent (empty messages are eager, so that is at once).
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
    let tree = knomial_tree(comm.rank(), root, comm.size(), comm.config().fanin_kn_radix);
    try_join_all(tree.children.iter().map(|&(c, _)| comm.recv(c, TAG, none))).await?;
    match tree.parent {
        Some(parent) => comm.send(parent, TAG, none).await,
        None => Ok(()),
    }
}
