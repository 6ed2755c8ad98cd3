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
use ferrocoll_core::engine::TaskFuture;
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

/// The collective of a team of one, through the library's memory components.
fn copy(team: Arc<SelfTeam>, init: Arc<CollInit>) -> AlgFuture {
    let mcs = &team.mcs;
    let copy = |d: MemRef, s: MemRef| if d.is_empty() || d == s { Ok(()) } else { mcs.get(d.mem_type())?.copy(d, s) };
    let reduce = |dst: MemRef, srcs: &[MemRef], spec| mcs.get(dst.mem_type())?.reduce(dst, srcs, &spec);
    Box::pin(std::future::ready(team_of_one(&init.ops, &copy, &reduce)))
}

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

    fn task(self: &Arc<Self>, alg: &'static Alg<Arc<SelfTeam>>, init: &Arc<CollInit>) -> Result<Arc<dyn CollTask>> {
        Ok(Arc::new(SelfTask { team: self.clone(), init: init.clone(), run: alg.run }))
    }
}

struct SelfTask {
    team: Arc<SelfTeam>,
    init: Arc<CollInit>,
    run: Run<Arc<SelfTeam>>,
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
        self.run.start(self.team.clone(), &self.init)
    }
}
