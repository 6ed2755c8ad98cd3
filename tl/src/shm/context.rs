//! The shm TL's per-context state: who runs where, to know which teams share a host.

use std::sync::OnceLock;

use ferrocoll_core::backend::{McSet, TlContext, TlContextParams, TlPeer, TlTeamFuture, TlTeamParams};
use ferrocoll_core::{Error, ProcInfo, Result};
use ferrocoll_transport::shmem::SHM_DIR;

use super::ShmConfig;
use super::segment::Segment;
use super::team::ShmTeam;

pub(crate) struct ShmContext {
    job: String,
    ep: usize,
    mcs: McSet,
    procs: OnceLock<Vec<ProcInfo>>,
}

impl ShmContext {
    pub(crate) fn new(params: &TlContextParams<'_>) -> Result<ShmContext> {
        ShmConfig::from_config(params.config)?;
        if !std::path::Path::new(SHM_DIR).is_dir() {
            return Err(Error::not_supported(format!("{SHM_DIR} is not available")));
        }
        Ok(ShmContext { job: params.job.to_string(), ep: params.ep, mcs: params.mcs.clone(), procs: OnceLock::new() })
    }
}

impl TlContext for ShmContext {
    fn address(&self) -> Vec<u8> {
        vec![1]
    }

    fn connect(&self, peers: &[TlPeer]) -> Result<()> {
        // Only peers that have this TL can share a segment with us.
        let procs = peers.iter().map(|p| p.proc.clone()).collect();
        let _ = self.procs.set(procs);
        Ok(())
    }

    fn progress(&self) -> Result<()> {
        Ok(())
    }

    fn team_create(&self, params: &TlTeamParams) -> Result<TlTeamFuture> {
        let procs = self.procs.get().ok_or_else(|| Error::internal("shm team before connect"))?;
        let me = procs.get(self.ep).ok_or_else(|| Error::internal("own endpoint missing"))?;
        if let Some(&ep) = params.eps.iter().find(|&&ep| procs.get(ep).is_none_or(|p| !p.same_host(me))) {
            return Err(Error::not_supported(format!("endpoint {ep} is on another host")));
        }
        let config = ShmConfig::from_config(&params.config)?;
        let name = Segment::name(&self.job, params.team_id);
        Ok(Box::pin(ShmTeam::create(name, params.rank, params.size, self.mcs.clone(), config)))
    }

    fn close(&self) {}
}
