//! allgather ring: not written yet.

use std::sync::Arc;

use ferrocoll_core::args::CollInit;
use ferrocoll_core::{Error, Result};

use crate::p2p::Comm;

/// Arguments this algorithm cannot handle.
pub(crate) fn check(_args: &CollInit) -> Result<()> {
    Err(Error::not_implemented("allgather/ring is not written yet"))
}

pub(crate) async fn run(_comm: Comm, _args: Arc<CollInit>) -> Result<()> {
    Err(Error::not_implemented("allgather/ring is not written yet"))
}

/// Ring allgather over an arbitrary block layout: on entry every rank's own
/// block (`blocks` entry `comm.rank()`) of `buf` holds its data; on return
/// every block holds its owner's data. Building block of ring allreduce and
/// sag bcast.
pub(crate) async fn allgather_blocks(
    _comm: &Comm,
    _buf: ferrocoll_core::MemRef,
    _blocks: &crate::p2p::alg::blocks::Blocks,
) -> Result<()> {
    Err(Error::not_implemented("allgather ring blocks are not written yet"))
}
