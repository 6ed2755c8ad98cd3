//! # TL/SELF: teams of one rank
//!
//! A collective among one rank is a local copy (or nothing, in place). This
//! TL serves every collective for teams of size 1 with a high score, so a
//! team of one never pays for a transport. Its one algorithm, `copy`, runs at
//! post: the request is complete before `post` returns.

use std::sync::{Arc, LazyLock};

use ferrocoll_core::args::CollInit;
use ferrocoll_core::backend::{
    AlgInfo, CollTask, McSet, PostInfo, TlComponent, TlContext, TlContextParams, TlPeer, TlTeamFuture, TlTeamParams,
};
use ferrocoll_core::config::ConfigField;
use ferrocoll_core::engine::{TaskFuture, downcast_spent};
use ferrocoll_core::score::{MsgRange, Score};
use ferrocoll_core::{CollType, Error, MemRef, MemType, Result};

use crate::base::local::team_of_one;
use crate::base::{Alg, AlgFuture, AlgTeam, DefaultAlg, Registry, Run, TeamOf};

/// The self TL component.
#[derive(Debug, Default)]
pub struct SelfTl;

/// Every collective's `copy`, one entry each.
static REGISTRY: LazyLock<Registry<Arc<SelfTeam>>> = LazyLock::new(|| {
    let algs: Vec<Alg<Arc<SelfTeam>>> = CollType::ALL
        .iter()
        .map(|&coll| Alg::new(coll, 0, "copy", "local copy of this rank's data (team of one)", Run::Any(copy)))
        .collect();
    Registry::new(&[&algs])
});

const SCORE: Score = Score(50);

const FIELDS: &[ConfigField] =
    &[ConfigField { name: "UCC_TL_SELF_TUNE", default: "", doc: "Score-map overrides for the self TL." }];

/// The collective of a team of one, run at post: its future is ready.
fn copy(team: Arc<SelfTeam>, init: Arc<CollInit>) -> AlgFuture {
    Box::pin(std::future::ready(run(&team, &init)))
}

/// The collective of a team of one, through the library's memory components.
fn run(team: &SelfTeam, init: &CollInit) -> Result<()> {
    let mcs = &team.mcs;
    let copy = |d: MemRef, s: MemRef| if d.is_empty() || d == s { Ok(()) } else { mcs.get(d.mem_type())?.copy(d, s) };
    team_of_one(&init.ops, &copy)
}

/// What [`copy`] returns, boxed: a post again reuses the box.
type Done = std::future::Ready<Result<()>>;

impl TlComponent for SelfTl {
    fn name(&self) -> &'static str {
        "self"
    }

    fn description(&self) -> &'static str {
        "collectives of a team of one rank: local copies"
    }

    fn default_score(&self) -> Score {
        SCORE
    }

    fn config_fields(&self) -> Vec<ConfigField> {
        FIELDS.to_vec()
    }

    fn algorithms(&self) -> &'static [AlgInfo] {
        REGISTRY.infos()
    }

    fn agreed_fields(&self) -> Vec<&'static str> {
        FIELDS.iter().map(|f| f.name).collect()
    }

    fn context_create(&self, params: &TlContextParams<'_>) -> Result<Arc<dyn TlContext>> {
        Ok(Arc::new(SelfContext { mcs: params.mcs.clone() }))
    }
}

struct SelfContext {
    mcs: McSet,
}

impl TlContext for SelfContext {
    fn address(&self) -> Vec<u8> {
        Vec::new()
    }

    fn connect(&self, _peers: &[TlPeer]) -> Result<()> {
        Ok(())
    }

    fn progress(&self) -> Result<()> {
        Ok(())
    }

    fn team_create(&self, params: &TlTeamParams) -> Result<TlTeamFuture> {
        if params.size != 1 {
            return Err(Error::not_supported(format!("self serves teams of one rank, not {}", params.size)));
        }
        let team: Arc<dyn ferrocoll_core::backend::TlTeam> =
            Arc::new(TeamOf(Arc::new(SelfTeam { mcs: self.mcs.clone() })));
        Ok(Box::pin(std::future::ready(Ok(team))))
    }

    fn close(&self) {}
}

struct SelfTeam {
    mcs: McSet,
}

impl AlgTeam for SelfTeam {
    type Exec = Arc<SelfTeam>;
    const TL: &'static str = "self";

    fn registry(&self) -> &'static Registry<Arc<SelfTeam>> {
        &REGISTRY
    }

    fn mem_types(&self) -> &[MemType] {
        &[MemType::Host]
    }

    fn score(&self) -> Score {
        SCORE
    }

    fn defaults(&self) -> Vec<DefaultAlg> {
        CollType::ALL.iter().map(|&coll| DefaultAlg { coll, range: MsgRange::ALL, alg: 0 }).collect()
    }

    /// Every algorithm of this TL is [`copy`].
    fn task(self: &Arc<Self>, _: &'static Alg<Arc<SelfTeam>>, init: &Arc<CollInit>) -> Result<Arc<dyn CollTask>> {
        Ok(Arc::new(SelfTask { team: self.clone(), init: init.clone() }))
    }
}

struct SelfTask {
    team: Arc<SelfTeam>,
    init: Arc<CollInit>,
}

impl CollTask for SelfTask {
    /// Copies by its memory component: nothing moves through the context.
    fn progresses_itself(&self) -> bool {
        true
    }

    /// It holds the operands' addresses only, never anything bound to the memory.
    fn reusable(&self) -> bool {
        true
    }

    fn start(&self, _post: &PostInfo) -> Result<TaskFuture> {
        Ok(Box::pin(std::future::ready(run(&self.team, &self.init))))
    }

    /// Its futures are [`Done`]s, which [`CollTask::restart`] reuses.
    fn recycles_futures(&self) -> bool {
        true
    }

    /// A post again writes its outcome into the last post's box instead
    /// of allocating one (and freeing the old one): a loop of collectives
    /// on a team of one (a trainer run with one rank) allocates nothing.
    fn restart(&self, post: &PostInfo<'_>, spent: Option<TaskFuture>) -> Result<TaskFuture> {
        let mut again = match spent.map(downcast_spent::<Done>) {
            Some(Ok(again)) => again,
            _ => return self.start(post),
        };
        *again = std::future::ready(run(&self.team, &self.init));
        Ok(Box::into_pin(again))
    }
}
