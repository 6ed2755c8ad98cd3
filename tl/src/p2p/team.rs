//! The p2p TL's team: its shared state, the creation handshake, and
//! turning validated arguments into tasks.

use std::sync::Arc;

use ferrocoll_core::args::{CollInit, Signature};
use ferrocoll_core::backend::{CollTask, EngineCopies, McSet, PostInfo, PostedVia, TlTeam, TlTeamParams};
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
    /// The notices this rank sent about its collectives that failed because
    /// the ranks' calls differ (see [`Comm`]).
    pub notices: std::sync::Mutex<super::comm::Notices>,
    /// The calls of its latest collectives, for probes of peers that still
    /// wait in one of them (see `comm/past.rs`).
    pub posted: std::sync::Mutex<super::comm::PostLog>,
    /// The p2p teams of its context, itself among them (`comm/past.rs`).
    pub teams: Arc<super::comm::Teams>,
    /// Which TL each of the team's latest posts went to (noted by the
    /// core), and this TL's tag there: a post of another TL is a call that
    /// differs from a p2p one, even this rank's newest (`comm/past.rs`).
    pub posted_via: Arc<PostedVia>,
    pub via_tag: u8,
}

impl TeamShared {
    /// A team's shared state for `params` over `transport` (which must
    /// reach every member: `NotSupported` naming the first it does not),
    /// with the memory components `mcs` and the context's team registry.
    pub(crate) fn of(
        params: &TlTeamParams,
        transport: &Arc<Router>,
        mcs: McSet,
        teams: Arc<super::comm::Teams>,
    ) -> Result<TeamShared> {
        if let Some(ep) = params.eps.iter().find(|&&ep| !transport.reaches_ep(ep)) {
            return Err(Error::not_supported(format!("no p2p transport reaches endpoint {ep}")));
        }
        Ok(TeamShared {
            id: params.team_id,
            rank: params.rank,
            size: params.size,
            eps: params.eps.clone(),
            transport: transport.clone(),
            mcs,
            config: P2pConfig::from_config(&params.config)?,
            layout: params.layout.clone(),
            notices: Default::default(),
            posted: Default::default(),
            teams,
            posted_via: params.posted_via.clone(),
            via_tag: params.via_tag,
        })
    }

    /// Collective `seq` of the team was posted as the call `sig` (kept for
    /// judging late probes, `comm/past.rs`).
    pub(crate) fn note_post(&self, seq: u64, sig: Signature) {
        self.posted.lock().unwrap_or_else(std::sync::PoisonError::into_inner).record(seq, sig);
    }

    /// Whether this rank posted collective `seq` to another TL (or as a
    /// zero-size call, which no TL runs), as far as the core's note goes.
    pub(crate) fn posted_elsewhere(&self, seq: u64) -> bool {
        self.posted_via.tag(seq).is_some_and(|tag| tag != self.via_tag)
    }
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
    pub(crate) async fn create(
        shared: Arc<TeamShared>,
        score: Score,
        diag: Arc<TaskDiag>,
        agreed: Arc<[(String, String)]>,
    ) -> Result<Arc<dyn TlTeam>> {
        handshake(&shared, diag.clone()).await?;
        compare_settings(&shared, diag, &agreed).await?;
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
    alg::barrier::knomial::knomial_sync(&comm, CREATE_RADIX).await
}

/// The radix of the creation handshake and of the comparison of settings:
/// fixed, not the configured barrier radix, which is among the settings
/// the members may (wrongly) set differently per team.
const CREATE_RADIX: usize = 4;

/// Sequence number of the comparison of the members' settings (after the handshake).
const SETTINGS_SEQ: u64 = HANDSHAKE_SEQ - 1;

/// Compare every member's values of the variables the team's members must
/// set alike (`agreed`, from `TlTeamParams::agreed`): the context's were
/// compared at team creation, but the team's overrides (`TeamParams::config`)
/// are each member's own. A knomial allgather (log steps) of one hash per
/// variable; every member compares all of them, so every member refuses the
/// team alike, naming the first variable and the first member that differ.
async fn compare_settings(shared: &Arc<TeamShared>, diag: Arc<TaskDiag>, agreed: &[(String, String)]) -> Result<()> {
    let (rank, size, n) = (shared.rank, shared.size, agreed.len());
    if n == 0 || size < 2 {
        return Ok(());
    }
    let total = n.checked_mul(size).ok_or_else(|| Error::internal("too many settings to compare"))?;
    let bytes = total.checked_mul(8).ok_or_else(|| Error::internal("too many settings to compare"))?;
    let mut all = vec![0u64; total];
    let hash = |v: &str| ferrocoll_core::hash::fnv1a(&[v.as_bytes()]);
    for (slot, (_, value)) in all[rank * n..].iter_mut().zip(agreed) {
        *slot = hash(value);
    }
    let sig = Signature::new(CollType::Allgather, None, 0, bytes as u64);
    let comm = Comm::new(shared.clone(), SETTINGS_SEQ, sig, diag);
    // SAFETY: `all` lives in this future until the allgather, the only user
    // of the view, has completed or been dropped with it.
    let mem = unsafe { ferrocoll_core::MemRef::new(all.as_mut_ptr().cast(), bytes, MemType::Host) };
    let blocks = ferrocoll_core::args::Blocks::even(total, size, 8);
    alg::allgather::knomial::allgather_blocks(&comm, mem, &blocks, CREATE_RADIX).await?;
    let (mine, others) = (&all[rank * n..(rank + 1) * n], all.chunks(n).enumerate());
    for (r, theirs) in others.filter(|&(r, _)| r != rank) {
        if let Some(i) = (0..n).find(|&i| theirs.get(i) != mine.get(i)) {
            let (var, value) = &agreed[i];
            let show = if value.is_empty() { "unset".to_string() } else { format!("{value:?}") };
            return Err(Error::invalid_param(format!(
                "{var} differs between the team's members: {show} on rank {rank} (this one), another value on \
                 rank {r}; every member must set it alike, per-team overrides (TeamParams::config) included, or \
                 they would run different algorithms for one collective"
            )));
        }
    }
    Ok(())
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
    /// algorithms on staged copies (see [`staging`]); some depend on the
    /// team's layout (`alg::defaults_for`).
    fn defaults(&self) -> Vec<DefaultAlg> {
        alg::defaults_for(&self.shared.layout)
    }

    /// Kept with the calls it ran, so that a late probe names the call.
    fn posted_without_task(&self, seq: u64, sig: Signature) {
        self.shared.note_post(seq, sig);
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
        self.team.note_post(post.seq, self.sig);
        let comm = Comm::new(self.team.clone(), post.seq, self.sig, post.diag.clone());
        let run: TaskFuture = if self.team.size == 1 {
            // Every algorithm reduces to the local part for one rank.
            let init = self.init.clone();
            Box::pin(async move { team_of_one(&init.ops, &|d, s| comm.copy(d, s)) })
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

    /// Messages carry the operands' bytes; the transports take addresses
    /// at each post (CMA reads them then), and register nothing.
    fn reusable(&self) -> bool {
        true
    }
}
