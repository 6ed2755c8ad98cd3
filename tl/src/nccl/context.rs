//! TL/NCCL's per-context state: the probed driver and library, and the p2p
//! service context that carries each team's unique id.

use std::sync::Arc;

use ferrocoll_core::args::Signature;
use ferrocoll_core::backend::{TlContext, TlContextParams, TlPeer, TlTeam, TlTeamFuture, TlTeamParams};
use ferrocoll_core::topo::Layout;
use ferrocoll_core::{CollType, Error, MemRef, Result};
use ferrocoll_cuda::Driver;
use ferrocoll_cuda::nccl::{Nccl, UniqueId, sys::UNIQUE_ID_BYTES};

use super::team::NcclTeam;
use crate::p2p::Comm;
use crate::p2p::context::P2pContext;
use crate::p2p::team::TeamShared;

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
        let shared = TeamShared::of(params, self.service.router(), Default::default(), Default::default())
            .map_err(|e| e.prefixed("TL/NCCL's service team (its unique-id exchange)"))?;
        let shared = Arc::new(shared);
        // The device whose context is current on the creating thread, as NCCL's own users choose it.
        let device = self.driver.current_ordinal();
        let nccl = self.nccl;
        let diag = params.diag.clone();
        Ok(Box::pin(async move {
            let sig = Signature::new(CollType::Bcast, None, 0, UNIQUE_ID_BYTES as u64);
            let comm = Comm::new(shared.clone(), ID_SEQ, sig, diag);
            let id = exchange_id(&comm, nccl, device, &shared.layout).await?;
            let team = NcclTeam::new(nccl, device, id, shared.rank, shared.size)?;
            Ok(Arc::new(team) as Arc<dyn TlTeam>)
        }))
    }

    fn close(&self) {
        self.service.close();
    }
}

/// What rank 0 sends to every other rank: the unique id, then the
/// verdict on devices (0, or the two ranks + 1 that share a device, and the device).
const REPLY: usize = UNIQUE_ID_BYTES + 24;

/// Every rank tells rank 0 its device; rank 0 checks that no two ranks of
/// one node share a device (NCCL refuses that: "Duplicate GPU detected"),
/// makes the unique id and sends both to every rank. All ranks then agree:
/// `NotSupported` naming the ranks and the device (TL/NCCL is left out of
/// the team, and selection falls back to the other TLs), or the id.
async fn exchange_id(comm: &Comm, nccl: &'static Nccl, device: usize, layout: &Layout) -> Result<UniqueId> {
    let mut reply = vec![0u8; REPLY];
    if comm.rank() == 0 {
        let mut devices = vec![device as u64; comm.size()];
        for (peer, slot) in devices.iter_mut().enumerate().skip(1) {
            let mut word = [0u8; 8];
            // SAFETY: `word` lives on this future's stack across the awaited receive, which alone writes it.
            let mem = unsafe { MemRef::from_mut_slice(&mut word) };
            comm.recv(peer, 1, mem).await.map_err(|e| e.prefixed("receiving a rank's CUDA device for TL/NCCL"))?;
            *slot = u64::from_le_bytes(word);
        }
        let id = nccl.unique_id()?;
        reply[..UNIQUE_ID_BYTES].copy_from_slice(&id.0);
        if let Some((a, b)) = shared_device(&devices, layout) {
            reply[UNIQUE_ID_BYTES..UNIQUE_ID_BYTES + 8].copy_from_slice(&(a as u64 + 1).to_le_bytes());
            reply[UNIQUE_ID_BYTES + 8..UNIQUE_ID_BYTES + 16].copy_from_slice(&(b as u64).to_le_bytes());
            reply[UNIQUE_ID_BYTES + 16..].copy_from_slice(&devices[a].to_le_bytes());
        }
        // SAFETY: `reply` is owned by this future and outlives every awaited send; nothing writes it meanwhile.
        let mem = unsafe { MemRef::from_slice(&reply) };
        for peer in 1..comm.size() {
            comm.send(peer, 0, mem).await.map_err(|e| e.prefixed("sending TL/NCCL's unique id"))?;
        }
    } else {
        let word = (device as u64).to_le_bytes();
        // SAFETY: `word` outlives the awaited send; nothing writes it.
        let mem = unsafe { MemRef::from_slice(&word) };
        comm.send(0, 1, mem).await.map_err(|e| e.prefixed("sending this rank's CUDA device to rank 0 for TL/NCCL"))?;
        // SAFETY: owned by this future, written only by this awaited receive.
        let mem = unsafe { MemRef::from_mut_slice(&mut reply) };
        comm.recv(0, 0, mem).await.map_err(|e| e.prefixed("receiving TL/NCCL's unique id from rank 0"))?;
    }
    let word = |at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&reply[at..at + 8]);
        u64::from_le_bytes(w)
    };
    let (a, b, dev) = (word(UNIQUE_ID_BYTES), word(UNIQUE_ID_BYTES + 8), word(UNIQUE_ID_BYTES + 16));
    if a != 0 {
        return Err(Error::not_supported(format!(
            "TL/NCCL: team ranks {} and {b} use the same CUDA device {dev} on one node, and NCCL refuses two ranks \
             of a communicator on one GPU; the team's CUDA collectives go to the other TLs",
            a - 1
        )));
    }
    let mut id = [0u8; UNIQUE_ID_BYTES];
    id.copy_from_slice(&reply[..UNIQUE_ID_BYTES]);
    Ok(UniqueId(id))
}

/// The first two ranks of one node with the same device, if any.
fn shared_device(devices: &[u64], layout: &Layout) -> Option<(usize, usize)> {
    for node in layout.nodes() {
        for (i, &a) in node.iter().enumerate() {
            if let Some(&b) = node[i + 1..].iter().find(|&&b| devices.get(b) == devices.get(a)) {
                return Some((a.min(b), a.max(b)));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_ranks_of_one_node_on_one_device_are_found() {
        let layout = Layout::new(&[("sw", "a"), ("sw", "a"), ("sw", "b"), ("sw", "b")]);
        assert_eq!(shared_device(&[0, 1, 0, 1], &layout), None, "same ordinals on different hosts are fine");
        assert_eq!(shared_device(&[0, 1, 1, 1], &layout), Some((2, 3)));
        assert_eq!(shared_device(&[3, 3, 0, 1], &layout), Some((0, 1)));
    }
}
