//! The p2p TL's per-context state: its transport.

use std::sync::Arc;

use ferrocoll_core::backend::{McSet, TlContext, TlTeamFuture, TlTeamParams};
use ferrocoll_core::score::Score;
use ferrocoll_core::{Error, Result};

use super::P2pConfig;
use super::team::{P2pTeam, TeamShared};
use super::transport::{InProcTransport, Transport};

pub(crate) struct P2pContext {
    transport: Arc<InProcTransport>,
    mcs: McSet,
    score: Score,
}

impl P2pContext {
    pub(crate) fn new(mcs: McSet, score: Score) -> P2pContext {
        P2pContext { transport: Arc::new(InProcTransport::new()), mcs, score }
    }
}

impl TlContext for P2pContext {
    fn address(&self) -> Vec<u8> {
        self.transport.address()
    }

    fn connect(&self, addresses: &[Vec<u8>]) -> Result<()> {
        self.transport.connect(addresses)
    }

    fn progress(&self) -> Result<()> {
        self.transport.progress()
    }

    fn team_create(&self, params: &TlTeamParams) -> Result<TlTeamFuture> {
        if let Some(ep) = params.eps.iter().find(|&&ep| !self.transport.reaches(ep)) {
            return Err(Error::not_supported(format!(
                "endpoint {ep} is not reachable: only ranks of this process are (in-process transport)"
            )));
        }
        let config = P2pConfig::from_config(&params.config)?;
        let transport: Arc<dyn Transport> = self.transport.clone();
        let shared = Arc::new(TeamShared {
            id: params.team_id,
            rank: params.rank,
            size: params.size,
            eps: params.eps.clone(),
            transport,
            mcs: self.mcs.clone(),
            config,
        });
        Ok(Box::pin(P2pTeam::create(shared, self.score, params.diag.clone())))
    }

    fn close(&self) {
        self.transport.close();
    }
}
