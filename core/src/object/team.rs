//! [`Team`]: a group of context endpoints that run collectives together
//! (`ucc_team_create_post` / `_test`), and its score map.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::task::Poll;
use std::time::Instant;

use super::agreement;
use super::context::{Context, ContextInner};
use super::plan_cache::PlanCache;
use super::selection::SelectionTable;
use crate::backend::{NO_TL, PostedVia, TlComponent, TlTeam, TlTeamFuture, TlTeamParams};
use crate::config::Config;
use crate::engine::{CallBoard, FlightRecorder, Posted, TaskDiag, TeamIdentity};
use crate::error::{Error, Result, Status};
use crate::score::{AlgId, AlgSpec, ScoreMap, TuneTarget, apply_tune, parse_tune};
use crate::topo::{Layout, Subgroups};
use crate::types::CollType;

/// Collectives a team's flight recorder keeps when `UCC_FLIGHT_RECORDER_SIZE` is unset.
const DEFAULT_RECORDER_SIZE: usize = 32;

/// Which context endpoints form the team, in team-rank order (`ucc_ep_map_t`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum EpMap {
    /// Every endpoint of the context's OOB group; team rank = endpoint.
    #[default]
    Full,
    /// Team rank r is endpoint `start + r * stride`.
    Strided {
        /// Endpoint of team rank 0.
        start: u64,
        /// Step between team ranks (may be negative).
        stride: i64,
        /// Team size.
        size: u64,
    },
    /// Team rank r is endpoint `map[r]`.
    Array(Vec<u64>),
}

/// Parameters of [`Team`] creation.
#[derive(Clone, Debug, Default)]
pub struct TeamParams {
    /// The members.
    pub ep_map: EpMap,
    /// Overrides for this team only, laid over the context's configuration
    /// (a ferrocoll extension: e.g. `TL_P2P_TUNE` to pin an algorithm on one team).
    pub config: Config,
}

impl TeamParams {
    /// A team over the given endpoints.
    pub fn with_ep_map(ep_map: EpMap) -> TeamParams {
        TeamParams { ep_map, config: Config::new() }
    }

    /// Add a configuration override for this team (`UCC_` prefix optional).
    pub fn set(mut self, name: &str, value: impl Into<String>) -> TeamParams {
        self.config.set(name, value);
        self
    }
}

pub(crate) struct TeamTl {
    pub(crate) component: Arc<dyn TlComponent>,
    pub(crate) team: Arc<dyn TlTeam>,
    /// Its posts' tag in the team's `PostedVia`.
    pub(crate) via_tag: u8,
}

pub(crate) struct ActiveTeam {
    pub(crate) tls: Vec<TeamTl>,
    pub(crate) score_map: ScoreMap,
    /// "tl/algorithm" of every algorithm of every TL, made once (requests share them).
    names: Vec<(usize, CollType, AlgId, AlgName)>,
    /// Where the ranks show their posts (of the TL first by name that offers one; see
    /// `engine/board.rs`), so that ranks whose calls differ fail instead of
    /// waiting for each other in different TLs.
    pub(crate) board: Option<Arc<dyn CallBoard>>,
    /// The score map's candidates and names per (collective, memory type, size piece).
    pub(crate) selection: SelectionTable,
}

impl ActiveTeam {
    pub(crate) fn alg_name(&self, tl: usize, coll: CollType, alg: AlgId) -> AlgName {
        match self.names.iter().find(|(t, c, a, _)| *t == tl && *c == coll && *a == alg) {
            Some((.., name)) => name.clone(),
            None => AlgName::new(format!("tl{tl}/@{alg}")),
        }
    }
}

/// An algorithm's "tl/algorithm" name, and the words the call board shows
/// for it (made once per team, not per request).
#[derive(Clone)]
pub(crate) struct AlgName {
    pub(crate) name: Arc<str>,
    pub(crate) via: [u64; 4],
}

impl AlgName {
    pub(crate) fn new(name: String) -> AlgName {
        AlgName { via: Posted::via_words(&name), name: name.into() }
    }
}

enum TeamState {
    Creating {
        pending: Vec<(Arc<dyn TlComponent>, u8, TlTeamFuture)>,
        done: Vec<TeamTl>,
        started: Instant,
        diag: Arc<TaskDiag>,
    },
    /// Created: the team is in `TeamInner::ready`.
    Active,
    Failed(Error),
}

pub(crate) struct TeamInner {
    pub(crate) ctx: Arc<ContextInner>,
    pub(crate) id: u64,
    pub(crate) rank: usize,
    pub(crate) size: usize,
    pub(crate) config: Config,
    /// "team 0x… (rank r of n)", for messages.
    pub(crate) desc: Arc<str>,
    /// Its last collectives, for hang diagnosis (`UCC_FLIGHT_RECORDER_SIZE`).
    pub(crate) recorder: Arc<FlightRecorder>,
    /// Whether posts are shown on the call board (`UCC_CALL_BOARD`).
    call_board: bool,
    /// Nodes and switch groups of the members, from the context's exchange (built once).
    layout: Arc<Layout>,
    /// This rank's subgroups in `layout`, without a root.
    subgroups: Subgroups,
    state: Mutex<TeamState>,
    /// The active team once creation succeeded (it never changes after):
    /// what every `collective_init` reads, without the state's lock.
    ready: OnceLock<ActiveTeam>,
    seq: AtomicU64,
    /// Which TL each of its latest posts went to (see `PostedVia`).
    pub(crate) posted_via: Arc<PostedVia>,
    pub(super) alive: AtomicBool,
    /// The prepared parts of the last one-shot request, for the next with the same call.
    pub(crate) plans: PlanCache,
}

impl TeamInner {
    fn state(&self) -> MutexGuard<'_, TeamState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The active team, or why there is none.
    pub(crate) fn active(&self) -> Result<&ActiveTeam> {
        self.ctx.check_alive()?;
        // Relaxed: the flag only turns false, and turning it false needs no ordering with other data.
        if !self.alive.load(Ordering::Relaxed) {
            return Err(Error::invalid_param(format!("team {:#x} was destroyed", self.id)));
        }
        if let Some(a) = self.ready.get() {
            return Ok(a);
        }
        match &*self.state() {
            TeamState::Active => {
                Err(Error::internal(format!("team {:#x} is active but its state was not published", self.id)))
            }
            TeamState::Creating { .. } => Err(Error::invalid_param(format!(
                "team {:#x} is still being created: call create_test until it returns Ok",
                self.id
            ))),
            TeamState::Failed(e) => Err(e.duplicate().prefixed(format!("team {:#x} creation failed", self.id))),
        }
    }

    /// Whether collectives may still be posted (context and team alive); a
    /// team that has a request was active when the request was made.
    pub(crate) fn check_usable(&self) -> Result<()> {
        self.ctx.check_alive()?;
        // Relaxed: see `active`.
        if self.alive.load(Ordering::Relaxed) {
            Ok(())
        } else {
            Err(Error::invalid_param(format!("team {:#x} was destroyed", self.id)))
        }
    }

    /// The active team, for a request (which exists only once the team was active).
    pub(crate) fn ready(&self) -> Option<&ActiveTeam> {
        self.ready.get()
    }

    pub(crate) fn next_seq(&self) -> u64 {
        // Relaxed: each post needs a distinct number; posts are ordered by the caller.
        self.seq.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn describe(&self) -> &str {
        &self.desc
    }
}

/// A team: create it on every member with the same endpoint map, then run collectives on it.
pub struct Team {
    pub(crate) inner: Arc<TeamInner>,
}

impl Team {
    /// Start creating a team (`ucc_team_create_post`); finish with [`Team::create_test`].
    ///
    /// Every member must create its teams over the same endpoint list in the same order.
    pub fn create_post(ctx: &Context, params: TeamParams) -> Result<Team> {
        let c = &ctx.inner;
        c.check_alive()?;
        let eps = resolve_ep_map(&params.ep_map, c.n_eps)?;
        let rank = eps.iter().position(|&e| e == c.ep).ok_or_else(|| {
            Error::not_found(format!("this context (endpoint {}) is not in the team's endpoint map {eps:?}", c.ep))
        })?;
        let key = fnv1a(eps.iter().map(|&e| e as u64));
        let id = fnv1a([key, c.next_team_index(key)]);
        let config = c.config.merged(&params.config);
        let diag = Arc::new(TaskDiag::default());
        let places: Vec<(&str, &str)> =
            eps.iter().map(|e| c.procs.get(*e).map_or(("", ""), |p| (p.host.as_str(), p.switch.as_str()))).collect();
        let layout = Arc::new(Layout::new(&places));
        let subgroups = layout.subgroups(rank, None)?;
        let mut tl_params = TlTeamParams {
            team_id: id,
            rank,
            size: eps.len(),
            eps: eps.into(),
            config: config.clone(),
            diag: diag.clone(),
            layout: layout.clone(),
            agreed: Arc::new([]),
            oversubscribed: !c.dedicated,
            posted_via: Arc::new(PostedVia::new()),
            via_tag: 0,
        };
        let common = agreement::common_tls(c, &tl_params.eps);
        agreement::check_settings(c, &tl_params.eps, &common).map_err(|e| e.prefixed(format!("team {id:#x}")))?;
        tl_params.agreed = agreement::team_settings(c, &common, &config);
        let mut pending = Vec::new();
        for (tl, i) in common.iter().filter_map(|&i| Some((c.tls.get(i)?, i))) {
            // The TL's place in the context (a handful of TLs; were there
            // hundreds, tags shared by two TLs would only leave some late
            // probes to be judged later).
            let tag = u8::try_from(i).unwrap_or(NO_TL - 1);
            tl_params.via_tag = tag;
            match tl.context.team_create(&tl_params) {
                Ok(f) => pending.push((tl.component.clone(), tag, f)),
                Err(e) if e.status() == Status::NotSupported => {
                    crate::log_debug!("TL {} is off for team {id:#x}: {}", tl.component.name(), e.context());
                }
                Err(e) => return Err(e.prefixed(format!("TL {} team creation", tl.component.name()))),
            }
        }
        if pending.is_empty() {
            return Err(Error::not_supported(format!(
                "no transport layer can serve team {id:#x} of {} ranks that every member has ({})",
                tl_params.size,
                agreement::describe_tls(c, &tl_params.eps)
            )));
        }
        let state = TeamState::Creating { pending, done: Vec::new(), started: Instant::now(), diag };
        let recorder = FlightRecorder::new(
            TeamIdentity {
                id,
                rank,
                size: tl_params.size,
                ep: c.ep,
                host: c.procs.get(c.ep).map(|p| p.host.clone()).unwrap_or_default(),
            },
            config.parse_or("FLIGHT_RECORDER_SIZE", DEFAULT_RECORDER_SIZE)?,
        );
        let call_board = config.bool_or("CALL_BOARD", true)?;
        Ok(Team {
            inner: Arc::new(TeamInner {
                ctx: c.clone(),
                id,
                rank,
                size: tl_params.size,
                desc: format!("team {id:#x} (rank {rank} of {})", tl_params.size).into(),
                config,
                state: Mutex::new(state),
                ready: OnceLock::new(),
                seq: AtomicU64::new(0),
                posted_via: tl_params.posted_via.clone(),
                alive: AtomicBool::new(true),
                plans: PlanCache::default(),
                recorder,
                call_board,
                layout,
                subgroups,
            }),
        })
    }

    /// Progress team creation (`ucc_team_create_test`): `Ok(InProgress)` until
    /// it is done, then `Ok(Ok)`; an error if it failed or timed out
    /// (`UCC_TEAM_CREATE_TIMEOUT`).
    pub fn create_test(&self) -> Result<Status> {
        let inner = &self.inner;
        inner.ctx.progress_all()?;
        let mut state = inner.state();
        let TeamState::Creating { pending, done, started, diag } = &mut *state else {
            return match &*state {
                TeamState::Active => Ok(Status::Ok),
                TeamState::Failed(e) => Err(e.duplicate()),
                TeamState::Creating { .. } => Ok(Status::InProgress),
            };
        };
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let mut failure = None;
        let mut i = 0;
        while i < pending.len() {
            match pending[i].2.as_mut().poll(&mut cx) {
                Poll::Pending => i += 1,
                Poll::Ready(result) => {
                    let (component, via_tag, _) = pending.swap_remove(i);
                    match result {
                        Ok(team) => done.push(TeamTl { component, team, via_tag }),
                        Err(e) if e.status() == Status::NotSupported => {
                            crate::log_debug!(
                                "TL {} is off for team {:#x}: {}",
                                component.name(),
                                inner.id,
                                e.context()
                            );
                        }
                        Err(e) => failure = Some(e.prefixed(format!("TL {} team creation", component.name()))),
                    }
                }
            }
        }
        if failure.is_none() && !pending.is_empty() {
            if let Some(t) = inner.ctx.settings.team_create_timeout {
                if started.elapsed() > t {
                    failure = Some(Error::timed_out(format!(
                        "{} not created after {:.1} s: some members have not created it{}",
                        inner.describe(),
                        t.as_secs_f64(),
                        diag.describe()
                    )));
                }
            }
        }
        if failure.is_none() && pending.is_empty() {
            let tls = std::mem::take(done);
            match build_active(inner, tls) {
                Ok(active) => {
                    // Under the state's lock: one creator publishes it, once.
                    let _ = inner.ready.set(active);
                    *state = TeamState::Active;
                    return Ok(Status::Ok);
                }
                Err(e) => failure = Some(e),
            }
        }
        match failure {
            Some(e) => {
                let out = e.duplicate();
                *state = TeamState::Failed(e);
                Err(out)
            }
            None => Ok(Status::InProgress),
        }
    }

    /// Create a team and wait until it is ready (post, then test until done).
    pub fn create(ctx: &Context, params: TeamParams) -> Result<Team> {
        let team = Team::create_post(ctx, params)?;
        let mut backoff = ctx.inner.backoff();
        while team.create_test()? == Status::InProgress {
            backoff.snooze();
        }
        Ok(team)
    }

    /// Where the members run: their nodes and switch groups (see `topo::subgroups`).
    pub fn layout(&self) -> &Layout {
        &self.inner.layout
    }

    /// This rank's node, the node leaders of its switch group and the group
    /// leaders (lowest team rank leads; [`Layout::subgroups`] for a rooted view).
    pub fn subgroups(&self) -> &Subgroups {
        &self.inner.subgroups
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.inner.rank
    }

    /// Number of ranks.
    pub fn size(&self) -> usize {
        self.inner.size
    }

    /// The team id (equal on every member).
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// Progress the team's context (a convenience for `Context::progress`).
    pub fn progress(&self) -> Result<()> {
        self.inner.ctx.user_progress()
    }

    /// The score map as text (like `ucc_info -s` for this team).
    pub fn score_map(&self) -> Result<String> {
        let active = self.inner.active()?;
        Ok(active.score_map.describe(&|tl, coll, alg| active.alg_name(tl, coll, alg).name.to_string()))
    }

    /// The team's flight record on this rank: its last collectives (see
    /// [`FlightRecorder`]) as one JSON document.
    pub fn flight_record(&self) -> String {
        self.inner.recorder.to_json("requested by the application")
    }

    /// Names of the TLs serving this team.
    pub fn tl_names(&self) -> Result<Vec<&'static str>> {
        Ok(self.inner.active()?.tls.iter().map(|t| t.component.name()).collect())
    }

    /// Destroy the team (same as dropping it); requests still alive fail to post.
    pub fn destroy(self) {}
}

impl Drop for Team {
    fn drop(&mut self) {
        // Relaxed: see TeamInner::active.
        self.inner.alive.store(false, Ordering::Relaxed);
        self.inner.plans.clear();
        super::spare_team::release(&self.inner);
    }
}

fn build_active(inner: &TeamInner, tls: Vec<TeamTl>) -> Result<ActiveTeam> {
    if tls.is_empty() {
        return Err(Error::not_supported(format!("no transport layer can serve {}", inner.describe())));
    }
    let mut score_map = ScoreMap::default();
    for (i, t) in tls.iter().enumerate() {
        let name = t.component.name();
        let mut entries = t.team.default_scores();
        if let Some((tune, var, foreign)) = tune_string(&inner.config, name) {
            let tokens = match parse_tune(tune) {
                Ok(tokens) => tokens,
                // UCC goes on past a tune string it cannot read; so does a
                // variable that UCC reads too.
                Err(e) if foreign => {
                    crate::log_warn!("{var} ignored: {} (TL {name} goes on without it)", e.context());
                    Vec::new()
                }
                Err(e) => return Err(e.prefixed(var)),
            };
            let algs = t.component.algorithms();
            let resolve = |coll: CollType, spec: &AlgSpec| {
                algs.iter()
                    .find(|a| {
                        a.coll == coll
                            && match spec {
                                AlgSpec::Id(id) => a.id == *id,
                                AlgSpec::Name(n) => a.name.eq_ignore_ascii_case(n),
                            }
                    })
                    .map(|a| a.id)
            };
            let target = TuneTarget {
                tl: name,
                team_size: inner.size,
                default_score: t.component.default_score(),
                colls: t.team.colls(),
                mems: t.team.mem_types(),
                resolve: &resolve,
                foreign,
            };
            entries = apply_tune(entries, &tokens, &target).map_err(|e| e.prefixed(var))?;
        }
        score_map.add(i, entries);
    }
    let names = tls
        .iter()
        .enumerate()
        .flat_map(|(i, t)| {
            let tl = t.component.name();
            t.component.algorithms().iter().map(move |a| (i, a.coll, a.id, AlgName::new(format!("{tl}/{}", a.name))))
        })
        .collect();
    // The TLs finished creation in any order: pick by name, alike on every rank.
    let board = inner
        .call_board
        .then_some(&tls)
        .into_iter()
        .flatten()
        .filter_map(|t| Some((t.component.name(), t.team.call_board()?)))
        .min_by_key(|(name, _)| *name)
        .map(|(_, board)| board);
    Ok(ActiveTeam { tls, score_map, names, board, selection: SelectionTable::default() })
}

/// TL `tl`'s tune string, the variable it came from, and whether it may
/// have been written for another library (see `TuneTarget::foreign`):
/// `UCC_TL_<NAME>_TUNE`, which UCC reads too for its TLs of the same names
/// ([`UCC_SHARES_TUNE_OF`]), or for p2p, when that is unset, UCC's
/// `UCC_TL_UCP_TUNE` (UCC's own programs set it with UCC's algorithm names).
/// Only `UCC_TL_P2P_TUNE` is ferrocoll's alone, and strict.
fn tune_string<'a>(config: &'a Config, tl: &str) -> Option<(&'a str, String, bool)> {
    let var = format!("TL_{}_TUNE", tl.to_ascii_uppercase());
    match config.get(&var) {
        Some(own) => Some((own, format!("UCC_{var}"), UCC_SHARES_TUNE_OF.contains(&tl))),
        None if tl == "p2p" => config.get("TL_UCP_TUNE").map(|ucp| (ucp, "UCC_TL_UCP_TUNE".to_string(), true)),
        None => None,
    }
}

/// The TLs whose tune variable UCC reads too, for its TL/SELF, TL/SHM,
/// TL/NCCL and TL/SHARP, whose algorithms have UCC's names: a program set
/// up for UCC may set it, and UCC goes on past tune input that its TL
/// cannot use (every TL's `get_scores`: INVALID_PARAM and NOT_SUPPORTED
/// from the score update are ignored), so ferrocoll does too, with a
/// warning.
const UCC_SHARES_TUNE_OF: [&str; 4] = ["self", "shm", "nccl", "sharp"];

fn resolve_ep_map(map: &EpMap, n_eps: usize) -> Result<Vec<usize>> {
    let eps: Vec<i128> = match map {
        EpMap::Full => (0..n_eps as i128).collect(),
        EpMap::Strided { start, stride, size } => {
            if *size > n_eps as u64 {
                return Err(Error::invalid_param(format!("ep map size {size} exceeds the {n_eps} context endpoints")));
            }
            (0..*size).map(|r| i128::from(*start) + i128::from(r) * i128::from(*stride)).collect()
        }
        EpMap::Array(v) => v.iter().map(|&e| i128::from(e)).collect(),
    };
    if eps.is_empty() {
        return Err(Error::invalid_param("the team's endpoint map is empty"));
    }
    let mut seen = vec![false; n_eps];
    eps.iter()
        .enumerate()
        .map(|(r, &e)| {
            let ok = usize::try_from(e).ok().filter(|&e| e < n_eps);
            let e = ok.ok_or_else(|| {
                Error::invalid_param(format!(
                    "team rank {r} maps to endpoint {e}, outside the {n_eps} context endpoints"
                ))
            })?;
            if std::mem::replace(&mut seen[e], true) {
                return Err(Error::invalid_param(format!("endpoint {e} appears twice in the team's endpoint map")));
            }
            Ok(e)
        })
        .collect()
}

/// A stable hash of u64 words that every rank computes alike.
fn fnv1a(words: impl IntoIterator<Item = u64>) -> u64 {
    let bytes: Vec<u8> = words.into_iter().flat_map(u64::to_le_bytes).collect();
    crate::hash::fnv1a(&[&bytes])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ep_maps() {
        assert_eq!(resolve_ep_map(&EpMap::Full, 3).unwrap(), vec![0, 1, 2]);
        assert_eq!(resolve_ep_map(&EpMap::Strided { start: 3, stride: -1, size: 3 }, 4).unwrap(), vec![3, 2, 1]);
        assert!(
            resolve_ep_map(&EpMap::Strided { start: 3, stride: 1, size: 3 }, 4)
                .unwrap_err()
                .to_string()
                .contains("endpoint 4")
        );
        assert!(resolve_ep_map(&EpMap::Array(vec![1, 1]), 4).unwrap_err().to_string().contains("twice"));
        assert!(resolve_ep_map(&EpMap::Array(vec![]), 4).is_err());
    }
}
