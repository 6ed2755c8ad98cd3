//! The p2p TL's team: its shared state, the creation handshake, and
//! turning validated arguments into tasks.

use std::sync::Arc;

use ferrocoll_core::args::CollInit;
use ferrocoll_core::backend::{CollTask, McSet, PostInfo, TlTeam};
use ferrocoll_core::engine::{TaskDiag, TaskFuture};
use ferrocoll_core::score::{AlgId, Score, ScoreEntry};
use ferrocoll_core::{CollType, CollTypeSet, Error, MemType, Result};
use ferrocoll_transport::Router;

use super::alg::{self, RunFn};
use super::staging::{self, Staging};
use super::{Comm, P2pConfig};

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
        Ok(Arc::new(P2pTeam { shared, score, mems }))
    }
}

/// A barrier among the members: creation completes only once every member
/// has created the team (UCC's team creation is collective). A member that
/// never arrives is named by the creation timeout, through `diag`.
async fn handshake(shared: &Arc<TeamShared>, diag: Arc<TaskDiag>) -> Result<()> {
    let comm = Comm::new(shared.clone(), HANDSHAKE_SEQ, diag);
    alg::barrier::knomial::knomial_sync(&comm, shared.config.barrier_kn_radix).await
}

impl TlTeam for P2pTeam {
    fn colls(&self) -> CollTypeSet {
        alg::infos().iter().map(|a| a.coll).collect()
    }

    fn mem_types(&self) -> &[MemType] {
        &self.mems
    }

    /// The same entries for every memory type: CUDA memory runs the host
    /// algorithms on staged copies (see [`staging`]).
    fn default_scores(&self) -> Vec<ScoreEntry> {
        self.mems
            .iter()
            .flat_map(|&mem| {
                alg::defaults().filter(|d| alg::find(d.coll, 0).is_some()).flat_map(move |d| {
                    d.ranges.iter().map(move |&(range, alg)| ScoreEntry {
                        coll: d.coll,
                        mem,
                        range,
                        score: self.score,
                        alg,
                    })
                })
            })
            .collect()
    }

    fn coll_init(&self, alg: AlgId, init: &Arc<CollInit>) -> Result<Box<dyn CollTask>> {
        let a = alg::find(init.coll, alg)
            .ok_or_else(|| Error::not_supported(format!("p2p has no {} algorithm {alg}", init.coll)))?;
        let staging = match init.mem_type {
            MemType::Host => None,
            mt if staging::stages(mt, &self.shared.mcs) => Some(Arc::new(Staging::new(init, &self.shared.mcs)?)),
            mt => {
                return Err(Error::not_supported(format!(
                    "p2p moves host memory, and cuda or cuda_managed memory when the library has the CUDA \
                     memory component (it has: {}); not {mt}",
                    self.shared.mcs.names().join(", ")
                )));
            }
        };
        let run_init = staging.as_ref().map_or(init, |s| s.host_init());
        (a.check)(run_init)?;
        Ok(Box::new(AlgTask {
            team: self.shared.clone(),
            init: run_init.clone(),
            run: a.run,
            coll: init.coll,
            staging,
        }))
    }
}

/// A prepared algorithm: each post runs it with a fresh [`Comm`].
struct AlgTask {
    team: Arc<TeamShared>,
    /// The arguments the algorithm runs on (host copies when staged).
    init: Arc<CollInit>,
    run: RunFn,
    coll: CollType,
    /// Host copies of CUDA buffers, copied in at post and out at completion.
    staging: Option<Arc<Staging>>,
}

impl CollTask for AlgTask {
    fn start(&self, post: &PostInfo) -> Result<TaskFuture> {
        debug_assert_eq!(self.coll, self.init.coll);
        let comm = Comm::new(self.team.clone(), post.seq, post.diag.clone());
        if let Some(s) = &self.staging {
            s.copy_in()?;
        }
        let run = if self.team.size == 1 {
            // Every algorithm reduces to the local part for one rank.
            let init = self.init.clone();
            let result =
                alg::local::team_of_one(&init, &|d, s| comm.copy(d, s), &|d, s, n| comm.reduce(&init, d, s, n, true));
            Box::pin(std::future::ready(result))
        } else {
            (self.run)(comm, self.init.clone())
        };
        match self.staging.clone() {
            None => Ok(run),
            Some(s) => Ok(Box::pin(async move {
                run.await?;
                s.copy_out()
            })),
        }
    }
}
