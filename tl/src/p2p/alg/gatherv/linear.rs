//! gatherv linear: not written yet.

use std::sync::Arc;

use ferrocoll_core::args::CollInit;
use ferrocoll_core::{Error, Result};

use crate::p2p::Comm;

/// Arguments this algorithm cannot handle.
pub(crate) fn check(_args: &CollInit) -> Result<()> {
    Err(Error::not_implemented("gatherv/linear is not written yet"))
}

pub(crate) async fn run(_comm: Comm, _args: Arc<CollInit>) -> Result<()> {
    Err(Error::not_implemented("gatherv/linear is not written yet"))
}
