//! The SHARP TL's per-context state: the loaded library and a p2p context
//! of its own (the OOB collectives, node phases and fallbacks run over it).

use std::sync::Arc;

use ferrocoll_core::Result;
use ferrocoll_core::backend::{TlContext, TlContextParams, TlPeer, TlTeamFuture, TlTeamParams};

use super::team::SharpTeam;
use super::{SCORE, SharpConfig, sys};
use crate::p2p::context::P2pContext;

pub(crate) struct SharpContext {
    p2p: P2pContext,
    api: Arc<sys::Api>,
}

impl SharpContext {
    pub(crate) fn new(params: &TlContextParams<'_>, api: Arc<sys::Api>) -> Result<SharpContext> {
        Ok(SharpContext { p2p: P2pContext::new(params, SCORE)?, api })
    }
}

impl TlContext for SharpContext {
    fn address(&self) -> Vec<u8> {
        self.p2p.address()
    }

    fn connect(&self, peers: &[TlPeer]) -> Result<()> {
        self.p2p.connect(peers)
    }

    fn connected(&self) -> Result<()> {
        self.p2p.connected()
    }

    fn progress(&self) -> Result<()> {
        self.p2p.progress()
    }

    fn team_create(&self, params: &TlTeamParams) -> Result<TlTeamFuture> {
        let shared = self.p2p.team_shared(params)?;
        // The team's settings may differ from the context's (team overrides).
        let config = SharpConfig::from_config(&params.config)?;
        let (api, diag) = (self.api.clone(), params.diag.clone());
        let trace = params.config.get("COLL_TRACE").is_some_and(|v| !matches!(v.trim(), "n" | "no" | "0"));
        Ok(Box::pin(async move {
            crate::p2p::team::handshake(&shared, diag).await?;
            SharpTeam::create(api, shared, config, trace)
        }))
    }

    fn close(&self) {
        self.p2p.close();
    }
}
