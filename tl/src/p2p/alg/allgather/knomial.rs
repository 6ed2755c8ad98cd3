//! allgather knomial: not written yet.

use std::sync::Arc;

use ferrocoll_core::args::CollInit;
use ferrocoll_core::{Error, Result};

use crate::p2p::Comm;

/// Arguments this algorithm cannot handle.
pub(crate) fn check(_args: &CollInit) -> Result<()> {
    Err(Error::not_implemented("allgather/knomial is not written yet"))
}

pub(crate) async fn run(_comm: Comm, _args: Arc<CollInit>) -> Result<()> {
    Err(Error::not_implemented("allgather/knomial is not written yet"))
}

/// Knomial (recursive k-ing) allgather over an arbitrary block layout, same
/// contract as `ring::allgather_blocks`.
pub(crate) async fn allgather_blocks(
    _comm: &Comm,
    _buf: ferrocoll_core::MemRef,
    _blocks: &crate::p2p::alg::blocks::Blocks,
    _radix: usize,
) -> Result<()> {
    Err(Error::not_implemented("allgather knomial blocks are not written yet"))
}
