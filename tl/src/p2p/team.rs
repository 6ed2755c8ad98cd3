//! The p2p TL's team: its shared state, the creation handshake, and
//! turning validated arguments into tasks.

use std::sync::Arc;

use ferrocoll_core::args::{CollInit, Signature};
use ferrocoll_core::backend::{CollTask, EngineCopies, McSet, PostInfo, TlTeam};
use ferrocoll_core::engine::{TaskDiag, TaskFuture};
use ferrocoll_core::score::Score;
use ferrocoll_core::topo::subgroups::Layout;
use ferrocoll_core::{CollType, Error, MemType, Result};
use ferrocoll_transport::Router;

use super::staging::{self, Staging};
use super::{Comm, P2pConfig, alg};
use crate::base::local::team_of_one;
use crate::base::{Alg, AlgTeam, DefaultAlg, Registry, Run, TeamOf};

/// What every task of a team shares.
pub(crate) struct TeamShared {
    pub id: u64,
    pub rank: usize,
    pub size: usize,
    /// Context endpoint of each team rank.
    pub eps: Arc<[usize]>,
    pub transport: Arc<Router>,
    pub mcs: McSet,
    pub config: P2pConfig,
    /// The members' nodes and switch groups (hierarchical algorithms).
    pub layout: Arc<Layout>,
}

/// The p2p TL's team.
pub(crate) struct P2pTeam {
    shared: Arc<TeamShared>,
    score: Score,
    /// Host, plus the CUDA memory types it stages when the library has their component.
    mems: Vec<MemType>,
}

/// Sequence number reserved for the creation handshake (collectives count from 0).
const HANDSHAKE_SEQ: u64 = u64::MAX;

impl P2pTeam {
    /// Wait until every member has created the team, then hand it out.
    pub(crate) async fn create(shared: Arc<TeamShared>, score: Score, diag: Arc<TaskDiag>) -> Result<Arc<dyn TlTeam>> {
        handshake(&shared, diag).await?;
        let staged = staging::STAGED.into_iter().filter(|&m| staging::stages(m, &shared.mcs));
        let mems = std::iter::once(MemType::Host).chain(staged).collect();
        Ok(Arc::new(TeamOf(Arc::new(P2pTeam { shared, score, mems }))))
    }
}

/// A barrier among the members: creation completes only once every member
/// has created the team (UCC's team creation is collective). A member that
/// never arrives is named by the creation timeout, through `diag`.
pub(crate) async fn handshake(shared: &Arc<TeamShared>, diag: Arc<TaskDiag>) -> Result<()> {
    let sig = Signature::new(CollType::Barrier, None, 0, 0);
    let comm = Comm::new(shared.clone(), HANDSHAKE_SEQ, sig, diag);
    alg::barrier::knomial::knomial_sync(&comm, shared.config.barrier_kn_radix).await
}

impl AlgTeam for P2pTeam {
    type Exec = Comm;
    const TL: &'static str = "p2p";

    fn registry(&self) -> &'static Registry<Comm> {
        alg::registry()
    }

    fn mem_types(&self) -> &[MemType] {
        &self.mems
    }

    fn score(&self) -> Score {
        self.score
    }

    /// The same entries for every memory type: CUDA memory runs the host
    /// algorithms on staged copies (see [`staging`]).
    fn defaults(&self) -> Vec<DefaultAlg> {
        alg::defaults()
    }

    fn accepts(&self, init: &CollInit) -> Result<()> {
        if self.mems.contains(&init.mem_type) {
            return Ok(());
        }
        Err(Error::not_supported(format!(
            "p2p moves host memory, and cuda or cuda_managed memory when the library has the CUDA \
             memory component (it has: {}); not {}",
            self.shared.mcs.names().join(", "),
            init.mem_type
        )))
    }

    fn task(self: &Arc<Self>, alg: &'static Alg<Comm>, init: &Arc<CollInit>) -> Result<Arc<dyn CollTask>> {
        let staging = match init.mem_type {
            MemType::Host => None,
            _ => Some(Arc::new(Staging::new(init, &self.shared.mcs)?)),
        };
        let init = staging.as_ref().map_or(init, |s| s.host_init()).clone();
        let sig = Signature::of(&init);
        Ok(Arc::new(AlgTask { team: self.shared.clone(), init, sig, run: alg.run, staging }))
    }
}

/// A prepared algorithm: each post runs it with a fresh [`Comm`].
struct AlgTask {
    team: Arc<TeamShared>,
    /// The arguments the algorithm runs on (host copies when staged).
    init: Arc<CollInit>,
    /// The call, as every message of every post carries it (see [`Comm`]).
    sig: Signature,
    run: Run<Comm>,
    /// Host copies of CUDA buffers, copied in at post and out at completion.
    staging: Option<Arc<Staging>>,
}

impl CollTask for AlgTask {
    /// The future of one execution. It touches no buffer before it is first
    /// polled: a triggered post makes it when posted (to take its place in
    /// the team's order) but polls it only once the trigger fired, which is
    /// when the inputs are ready (on a CUDA stream, once the stream work
    /// writing them has run).
    fn start(&self, post: &PostInfo) -> Result<TaskFuture> {
        let comm = Comm::new(self.team.clone(), post.seq, self.sig, post.diag.clone());
        let run: TaskFuture = if self.team.size == 1 {
            // Every algorithm reduces to the local part for one rank.
            let init = self.init.clone();
            Box::pin(
                async move { team_of_one(&init.ops, &|d, s| comm.copy(d, s), &|d, s, spec| comm.reduce(d, s, spec)) },
            )
        } else {
            self.run.start(comm, &self.init)?
        };
        match self.staging.clone() {
            None => Ok(run),
            Some(_) if post.engine_copies => Ok(run),
            Some(s) => {
                let diag = post.diag.clone();
                Ok(Box::pin(async move {
                    s.copy_in(&diag).await?;
                    run.await?;
                    s.copy_out(&diag).await
                }))
            }
        }
    }

    fn engine_copies(&self) -> Option<EngineCopies> {
        self.staging.as_ref().and_then(|s| s.engine_copies())
    }
}
