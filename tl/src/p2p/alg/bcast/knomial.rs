//! Knomial-tree bcast: receive from the parent, forward to the children
//! (largest subtree first). Honours UCC's active set: the tree is built over
//! the set's members only.

use ferrocoll_core::args::Bcast;
use ferrocoll_core::engine::try_join_all;
use ferrocoll_core::{Error, Result};

use crate::p2p::Comm;
use crate::p2p::pattern::knomial_tree;

pub(crate) async fn run(comm: Comm, o: Bcast) -> Result<()> {
    let members = o.members(comm.size());
    let position = |r: usize, what: &str| {
        members.iter().position(|&m| m == r).ok_or_else(|| Error::internal(format!("bcast {what} outside its set")))
    };
    let (me, root) = (position(comm.rank(), "rank")?, position(o.root, "root")?);
    let tree = knomial_tree(me, root, members.len(), comm.config().bcast_kn_radix);
    if let Some(parent) = tree.parent {
        comm.recv(members[parent], 0, o.buf).await?;
    }
    let sends = tree.children.iter().map(|&(c, _)| comm.isend(members[c], 0, o.buf)).collect::<Result<Vec<_>>>()?;
    try_join_all(sends).await
}
