//! The p2p TL's per-context state: its transports, behind a router that
//! picks one per peer.

use std::sync::Arc;

use ferrocoll_core::Result;
use ferrocoll_core::backend::{McSet, TlContext, TlContextParams, TlPeer, TlTeamFuture, TlTeamParams};
use ferrocoll_core::score::Score;
use ferrocoll_transport::shm::ShmTransport;
use ferrocoll_transport::tcp::TcpTransport;
use ferrocoll_transport::{InProcTransport, Router, Transport};

use super::comm::Teams;
use super::team::{P2pTeam, TeamShared};

pub(crate) struct P2pContext {
    router: Arc<Router>,
    /// Its teams, for judging a peer's probe of any of them (`comm/past.rs`).
    teams: Arc<Teams>,
    mcs: McSet,
    score: Score,
    ep: usize,
}

impl P2pContext {
    pub(crate) fn new(params: &TlContextParams<'_>, score: Score) -> Result<P2pContext> {
        let mut transports: Vec<Box<dyn Transport>> = vec![Box::new(InProcTransport::new())];
        let (job, ep, n) = (params.job, params.ep, params.n_eps);
        // Transports that cannot work here (no /dev/shm, no network) are left out, saying why.
        let optional: [(&str, Result<Box<dyn Transport>>); 2] = [
            ("shm", ShmTransport::new(job, ep, n, params.config).map(|t| Box::new(t) as Box<dyn Transport>)),
            ("tcp", TcpTransport::new(job, ep, n, params.config).map(|t| Box::new(t) as Box<dyn Transport>)),
        ];
        for (name, t) in optional {
            match t {
                Ok(t) => transports.push(t),
                Err(e) if e.status() == ferrocoll_core::Status::NotSupported => {
                    ferrocoll_core::log_debug!("p2p: the {name} transport is off: {}", e.context());
                }
                Err(e) => return Err(e.prefixed(format!("p2p {name} transport"))),
            }
        }
        let router = Arc::new(Router::new(transports));
        Ok(P2pContext { router, teams: Arc::default(), mcs: params.mcs.clone(), score, ep: params.ep })
    }
}

impl P2pContext {
    /// The router, for another TL's service messages (TL/NCCL's unique id).
    pub(crate) fn router(&self) -> &Arc<Router> {
        &self.router
    }
}

impl TlContext for P2pContext {
    fn address(&self) -> Vec<u8> {
        self.router.address()
    }

    fn connect(&self, peers: &[TlPeer]) -> Result<()> {
        let table: Vec<_> = peers.iter().map(|p| (p.proc.clone(), p.addr.clone())).collect();
        self.router.connect(self.ep, &table)
    }

    fn connected(&self) -> Result<()> {
        self.router.connected()
    }

    fn progress(&self) -> Result<()> {
        self.router.progress()?;
        self.teams.progressed(&self.router);
        Ok(())
    }

    fn team_create(&self, params: &TlTeamParams) -> Result<TlTeamFuture> {
        let shared = self.team_shared(params)?;
        Ok(Box::pin(P2pTeam::create(shared, self.score, params.diag.clone(), params.agreed.clone())))
    }

    fn close(&self) {
        self.router.close();
    }
}

impl P2pContext {
    /// What every task of a p2p team over this context shares (also the
    /// SHARP TL's, which runs p2p algorithms over a p2p context of its own).
    pub(crate) fn team_shared(&self, params: &TlTeamParams) -> Result<Arc<TeamShared>> {
        let shared = Arc::new(TeamShared::of(params, &self.router, self.mcs.clone(), self.teams.clone())?);
        self.teams.add(&shared);
        Ok(shared)
    }
}
