//! TL/NCCL's per-context state: the probed driver and library, and the p2p
//! service context that carries each team's unique id.

use std::sync::Arc;

use ferrocoll_core::args::Signature;
use ferrocoll_core::backend::{TlContext, TlContextParams, TlPeer, TlTeam, TlTeamFuture, TlTeamParams};
use ferrocoll_core::{CollType, Error, MemRef, Result};
use ferrocoll_cuda::Driver;
use ferrocoll_cuda::nccl::{Nccl, UniqueId, sys::UNIQUE_ID_BYTES};

use super::team::NcclTeam;
use crate::p2p::context::P2pContext;
use crate::p2p::team::TeamShared;
use crate::p2p::{Comm, P2pConfig};

/// The sequence number of the unique id's messages on the service
/// transports (the p2p handshake uses `u64::MAX`; collectives count from 0).
const ID_SEQ: u64 = u64::MAX - 1;

pub(crate) struct NcclContext {
    service: P2pContext,
    driver: &'static Driver,
    nccl: &'static Nccl,
}

impl NcclContext {
    pub(crate) fn new(
        params: &TlContextParams<'_>,
        driver: &'static Driver,
        nccl: &'static Nccl,
    ) -> Result<NcclContext> {
        let service = P2pContext::new(params, super::SCORE).map_err(|e| e.prefixed("TL/NCCL's service transports"))?;
        Ok(NcclContext { service, driver, nccl })
    }
}

impl TlContext for NcclContext {
    fn address(&self) -> Vec<u8> {
        self.service.address()
    }

    fn connect(&self, peers: &[TlPeer]) -> Result<()> {
        self.service.connect(peers)
    }

    fn connected(&self) -> Result<()> {
        self.service.connected()
    }

    fn progress(&self) -> Result<()> {
        self.service.progress()
    }

    fn team_create(&self, params: &TlTeamParams) -> Result<TlTeamFuture> {
        let router = self.service.router();
        if let Some(ep) = params.eps.iter().find(|&&ep| !router.reaches_ep(ep)) {
            return Err(Error::not_supported(format!("TL/NCCL's service transports do not reach endpoint {ep}")));
        }
        let shared = Arc::new(TeamShared {
            id: params.team_id,
            rank: params.rank,
            size: params.size,
            eps: params.eps.clone(),
            transport: router.clone(),
            mcs: ferrocoll_core::backend::McSet::default(),
            config: P2pConfig::from_config(&params.config)?,
            layout: params.layout.clone(),
        });
        // The device whose context is current on the creating thread, as NCCL's own users choose it.
        let device = self.driver.current_ordinal();
        let nccl = self.nccl;
        let diag = params.diag.clone();
        Ok(Box::pin(async move {
            let sig = Signature::new(CollType::Bcast, None, 0, UNIQUE_ID_BYTES as u64);
            let comm = Comm::new(shared.clone(), ID_SEQ, sig, diag);
            let id = exchange_id(&comm, nccl).await?;
            let team = NcclTeam::new(nccl, device, id, shared.rank, shared.size)?;
            Ok(Arc::new(team) as Arc<dyn TlTeam>)
        }))
    }

    fn close(&self) {
        self.service.close();
    }
}

/// Rank 0 makes the unique id and sends it to every other rank.
async fn exchange_id(comm: &Comm, nccl: &'static Nccl) -> Result<UniqueId> {
    let mut bytes = vec![0u8; UNIQUE_ID_BYTES];
    if comm.rank() == 0 {
        let id = nccl.unique_id()?;
        bytes.copy_from_slice(&id.0);
        // SAFETY: `bytes` is owned by this future and outlives every send
        // below (each is awaited), and nothing else touches it meanwhile.
        let mem = unsafe { MemRef::from_slice(&bytes) };
        for peer in 1..comm.size() {
            comm.send(peer, 0, mem).await.map_err(|e| e.prefixed("sending TL/NCCL's unique id"))?;
        }
        return Ok(id);
    }
    // SAFETY: as above: owned by this future, written only by this receive, which is awaited.
    let mem = unsafe { MemRef::from_mut_slice(&mut bytes) };
    comm.recv(0, 0, mem).await.map_err(|e| e.prefixed("receiving TL/NCCL's unique id from rank 0"))?;
    let mut id = [0u8; UNIQUE_ID_BYTES];
    id.copy_from_slice(&bytes);
    Ok(UniqueId(id))
}
