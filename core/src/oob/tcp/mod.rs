//! OOB over TCP: a store at rank 0 (being written).

use std::time::Duration;

use super::{Oob, OobRequest};
use crate::error::{Error, Result};

/// Where a rank finds the store and who it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpOobParams {
    /// This rank.
    pub rank: usize,
    /// Number of ranks.
    pub size: usize,
    /// Rank 0's address (host name or IP).
    pub master_addr: String,
    /// Rank 0's port.
    pub master_port: u16,
    /// The job's secret: a process that presents another one is refused.
    pub token: String,
    /// How long to keep trying to reach the store (or to wait for every rank, at rank 0).
    pub connect_timeout: Duration,
}

/// The TCP-store OOB.
pub struct TcpOob {
    params: TcpOobParams,
}

impl TcpOob {
    /// From the launchers' environment variables.
    pub fn from_env() -> Result<TcpOob> {
        Err(Error::not_implemented("TcpOob::from_env is not written yet"))
    }

    /// From explicit parameters.
    pub fn new(params: TcpOobParams) -> Result<TcpOob> {
        Err(Error::not_implemented(format!("TcpOob::new({params:?}) is not written yet")))
    }
}

impl Oob for TcpOob {
    fn rank(&self) -> usize {
        self.params.rank
    }
    fn size(&self) -> usize {
        self.params.size
    }
    fn allgather(&self, _data: &[u8]) -> Result<Box<dyn OobRequest>> {
        Err(Error::not_implemented("TcpOob::allgather is not written yet"))
    }
}
