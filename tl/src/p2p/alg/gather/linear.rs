//! gather linear: not written yet.

use std::sync::Arc;

use ferrocoll_core::args::CollInit;
use ferrocoll_core::{Error, Result};

use crate::p2p::Comm;

/// Arguments this algorithm cannot handle.
pub(crate) fn check(_args: &CollInit) -> Result<()> {
    Err(Error::not_implemented("gather/linear is not written yet"))
}

pub(crate) async fn run(_comm: Comm, _args: Arc<CollInit>) -> Result<()> {
    Err(Error::not_implemented("gather/linear is not written yet"))
}

/// Linear gather over an arbitrary block layout: every rank's own block
/// (`blocks` entry `comm.rank()`) of its `buf` goes to the same block of the
/// root's `buf`. Building block of srg reduce.
pub(crate) async fn gather_blocks(
    _comm: &Comm,
    _buf: ferrocoll_core::MemRef,
    _blocks: &crate::p2p::alg::blocks::Blocks,
    _root: usize,
) -> Result<()> {
    Err(Error::not_implemented("gather blocks are not written yet"))
}
