//! Knomial-tree bcast: receive from the parent, forward to the children
//! (largest subtree first). Honours UCC's active set: the tree is built over
//! the set's members only.

use ferrocoll_core::args::Bcast;
use ferrocoll_core::engine::try_join_all;
use ferrocoll_core::{Error, MemRef, Result};

use crate::p2p::Comm;
use crate::p2p::pattern::knomial_tree;

pub(crate) async fn run(comm: Comm, o: Bcast) -> Result<()> {
    let members = o.members(comm.size());
    over(&comm, &members, o.root, o.buf, 0).await
}

/// The knomial-tree bcast of `buf` from `root` over `members` (team ranks,
/// this rank among them), with message tag `tag`. Also each level of the
/// hierarchical bcast (`hier.rs`).
pub(crate) async fn over(comm: &Comm, members: &[usize], root: usize, buf: MemRef, tag: u32) -> Result<()> {
    let position = |r: usize, what: &str| {
        members.iter().position(|&m| m == r).ok_or_else(|| Error::internal(format!("bcast {what} outside its set")))
    };
    let (me, root) = (position(comm.rank(), "rank")?, position(root, "root")?);
    let tree = knomial_tree(me, root, members.len(), comm.config().bcast_kn_radix);
    if let Some(parent) = tree.parent {
        comm.recv(members[parent], tag, buf).await?;
    }
    let sends = tree.children.iter().map(|&(c, _)| comm.isend(members[c], tag, buf)).collect::<Result<Vec<_>>>()?;
    try_join_all(sends).await
}
