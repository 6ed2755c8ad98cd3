//! Knomial-tree bcast: receive from the parent, forward to the children
//! (largest subtree first). Honours UCC's active set: the tree is built over
//! the set's members only.

use std::sync::Arc;

use ferrocoll_core::args::CollInit;
use ferrocoll_core::engine::try_join_all;
use ferrocoll_core::{Error, Result};

use crate::p2p::Comm;
use crate::p2p::pattern::knomial_tree;

/// Every valid argument set is supported.
pub(crate) fn check(_args: &CollInit) -> Result<()> {
    Ok(())
}

pub(crate) async fn run(comm: Comm, args: Arc<CollInit>) -> Result<()> {
    let buf = args.src.as_ref().ok_or_else(|| Error::internal("bcast without a buffer"))?.mem;
    let members = members(&args);
    let me =
        members.iter().position(|&r| r == comm.rank()).ok_or_else(|| Error::internal("bcast rank outside its set"))?;
    let root =
        members.iter().position(|&r| r == args.root).ok_or_else(|| Error::internal("bcast root outside its set"))?;
    let tree = knomial_tree(me, root, members.len(), comm.config().bcast_kn_radix);
    if let Some(parent) = tree.parent {
        comm.recv(members[parent], 0, buf).await?;
    }
    let sends = tree.children.iter().map(|&(c, _)| comm.isend(members[c], 0, buf)).collect::<Result<Vec<_>>>()?;
    try_join_all(sends).await
}

/// Team ranks taking part, in tree order: the active set, or the whole team.
pub(crate) fn members(args: &CollInit) -> Vec<usize> {
    match &args.active_set {
        Some(s) => (0..s.size).map(|i| (s.start as i64 + i as i64 * s.stride) as usize).collect(),
        None => (0..args.size).collect(),
    }
}
