//! The shm TL's per-context state: who runs where, to know which teams share a host.

use std::sync::OnceLock;

use ferrocoll_core::backend::{McSet, TlContext, TlContextParams, TlPeer, TlTeamFuture, TlTeamParams};
use ferrocoll_core::{Error, ProcInfo, Result};
use ferrocoll_transport::shmem::{self, SHM_DIR};

use super::ShmConfig;
use super::segment::Segment;
use super::team::ShmTeam;

pub(crate) struct ShmContext {
    job: String,
    ep: usize,
    mcs: McSet,
    /// This endpoint's nonce: in the names of the team segments it creates,
    /// and in their headers (see `segment.rs`).
    nonce: u64,
    /// Every endpoint's process and nonce (`None`: it has no shm TL).
    peers: OnceLock<Vec<(ProcInfo, Option<u64>)>>,
}

impl ShmContext {
    pub(crate) fn new(params: &TlContextParams<'_>) -> Result<ShmContext> {
        ShmConfig::from_config(params.config)?;
        if !std::path::Path::new(SHM_DIR).is_dir() {
            return Err(Error::not_supported(format!("{SHM_DIR} is not available")));
        }
        let nonce = shmem::nonce().map_err(|e| Error::not_supported(e.context().to_string()))?;
        Ok(ShmContext {
            job: params.job.to_string(),
            ep: params.ep,
            mcs: params.mcs.clone(),
            nonce,
            peers: OnceLock::new(),
        })
    }
}

impl TlContext for ShmContext {
    fn address(&self) -> Vec<u8> {
        self.nonce.to_le_bytes().to_vec()
    }

    fn connect(&self, peers: &[TlPeer]) -> Result<()> {
        // Only peers that have this TL (an 8-byte address) can share a segment with us.
        let peers = peers
            .iter()
            .map(|p| (p.proc.clone(), <[u8; 8]>::try_from(p.addr.as_slice()).ok().map(u64::from_le_bytes)))
            .collect();
        let _ = self.peers.set(peers);
        Ok(())
    }

    fn progress(&self) -> Result<()> {
        Ok(())
    }

    fn team_create(&self, params: &TlTeamParams) -> Result<TlTeamFuture> {
        let peers = self.peers.get().ok_or_else(|| Error::internal("shm team before connect"))?;
        let (me, _) = peers.get(self.ep).ok_or_else(|| Error::internal("own endpoint missing"))?;
        if let Some(&ep) = params.eps.iter().find(|&&ep| peers.get(ep).is_none_or(|(p, _)| !p.same_host(me))) {
            return Err(Error::not_supported(format!("endpoint {ep} is on another host")));
        }
        // The team's first rank creates the segment, under its nonce.
        let first = params.eps.first().copied().ok_or_else(|| Error::internal("a team without members"))?;
        let nonce = peers
            .get(first)
            .and_then(|(_, n)| *n)
            .ok_or_else(|| Error::not_supported(format!("endpoint {first} has no shm TL")))?;
        let config = ShmConfig::from_config(&params.config)?;
        let name = Segment::name(&self.job, params.team_id, nonce);
        Ok(Box::pin(ShmTeam::create((name, nonce), params.rank, params.size, self.mcs.clone(), config)))
    }

    fn close(&self) {}
}
