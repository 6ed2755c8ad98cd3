//! Shared-memory transport between processes of one host (being written).

use ferrocoll_core::config::{Config, ConfigField};
use ferrocoll_core::{Error, Result};

/// Configuration variables of this transport.
pub const CONFIG_FIELDS: &[ConfigField] = &[];

/// Shared-memory transport (not available yet).
pub struct ShmTransport;

impl ShmTransport {
    /// A transport for endpoint `ep` of `n_eps` in job `job`.
    pub fn new(_job: &str, _ep: usize, _n_eps: usize, _config: &Config) -> Result<ShmTransport> {
        Err(Error::not_supported("the shared-memory transport is not written yet"))
    }
}

impl super::Transport for ShmTransport {
    fn name(&self) -> &'static str {
        "shm"
    }
    fn reaches(&self, _me: &ferrocoll_core::ProcInfo, _peer: &ferrocoll_core::ProcInfo) -> bool {
        false
    }
    fn address(&self) -> Vec<u8> {
        Vec::new()
    }
    fn connect(&self, _n_eps: usize, _peers: &[super::TransportPeer]) -> Result<()> {
        Err(Error::not_supported("not written yet"))
    }
    fn send(
        &self,
        _dst_ep: usize,
        _key: super::MsgKey,
        _data: ferrocoll_core::MemRef,
    ) -> Result<Box<dyn super::SendHandle>> {
        Err(Error::not_supported("not written yet"))
    }
    fn try_recv(
        &self,
        _src_ep: usize,
        _key: &super::MsgKey,
        _buf: ferrocoll_core::MemRef,
    ) -> std::task::Poll<Result<()>> {
        std::task::Poll::Ready(Err(Error::not_supported("not written yet")))
    }
    fn progress(&self) -> Result<()> {
        Ok(())
    }
    fn failed(&self, _ep: usize) -> Option<Error> {
        None
    }
    fn close(&self) {}
}
