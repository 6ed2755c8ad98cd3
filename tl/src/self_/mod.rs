//! # TL/SELF: teams of one rank
//!
//! A collective among one rank is a local copy (or nothing, in place). This
//! TL serves every collective for teams of size 1 with a high score, so a
//! team of one never pays for a transport. Its one algorithm, `copy`, runs at
//! post: the request is complete before `post` returns.

use std::sync::{Arc, LazyLock};

use ferrocoll_core::args::CollInit;
use ferrocoll_core::backend::{
    AlgInfo, CollTask, McSet, PostInfo, ReduceSpec, TlComponent, TlContext, TlContextParams, TlTeam, TlTeamFuture,
    TlTeamParams,
};
use ferrocoll_core::config::ConfigField;
use ferrocoll_core::engine::TaskFuture;
use ferrocoll_core::score::{AlgId, MsgRange, Score, ScoreEntry};
use ferrocoll_core::{CollType, CollTypeSet, Error, MemType, Result};

use crate::p2p::alg::local;

/// The self TL component.
#[derive(Debug, Default)]
pub struct SelfTl;

static ALGS: LazyLock<Vec<AlgInfo>> = LazyLock::new(|| {
    CollType::ALL
        .iter()
        .map(|&coll| AlgInfo { coll, id: 0, name: "copy", description: "local copy of this rank's data (team of one)" })
        .collect()
});

const SCORE: Score = Score(50);

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
        vec![ConfigField { name: "UCC_TL_SELF_TUNE", default: "", doc: "Score-map overrides for the self TL." }]
    }

    fn algorithms(&self) -> &'static [AlgInfo] {
        &ALGS
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

    fn connect(&self, _peers: &[ferrocoll_core::backend::TlPeer]) -> Result<()> {
        Ok(())
    }

    fn progress(&self) -> Result<()> {
        Ok(())
    }

    fn team_create(&self, params: &TlTeamParams) -> Result<TlTeamFuture> {
        if params.size != 1 {
            return Err(Error::not_supported(format!("self serves teams of one rank, not {}", params.size)));
        }
        let team: Arc<dyn TlTeam> = Arc::new(SelfTeam { mcs: self.mcs.clone() });
        Ok(Box::pin(std::future::ready(Ok(team))))
    }

    fn close(&self) {}
}

struct SelfTeam {
    mcs: McSet,
}

impl TlTeam for SelfTeam {
    fn colls(&self) -> CollTypeSet {
        CollTypeSet::ALL
    }

    fn mem_types(&self) -> &[MemType] {
        &[MemType::Host]
    }

    fn default_scores(&self) -> Vec<ScoreEntry> {
        CollType::ALL
            .iter()
            .map(|&coll| ScoreEntry { coll, mem: MemType::Host, range: MsgRange::ALL, score: SCORE, alg: 0 })
            .collect()
    }

    fn coll_init(&self, alg: AlgId, init: &Arc<CollInit>) -> Result<Box<dyn CollTask>> {
        if alg != 0 {
            return Err(Error::not_supported(format!("self has no {} algorithm {alg}", init.coll)));
        }
        Ok(Box::new(SelfTask { mcs: self.mcs.clone(), init: init.clone() }))
    }
}

struct SelfTask {
    mcs: McSet,
    init: Arc<CollInit>,
}

impl CollTask for SelfTask {
    fn start(&self, _post: &PostInfo) -> Result<TaskFuture> {
        let copy = |d: ferrocoll_core::MemRef, s: ferrocoll_core::MemRef| {
            if d.is_empty() || d == s { Ok(()) } else { self.mcs.get(d.mem_type())?.copy(d, s) }
        };
        let reduce = |dst: ferrocoll_core::MemRef, srcs: &[ferrocoll_core::MemRef], count: usize| {
            let spec = ReduceSpec { dtype: self.init.dtype, op: self.init.op, count, avg_divisor: Some(1) };
            self.mcs.get(dst.mem_type())?.reduce(dst, srcs, &spec)
        };
        let result = local::team_of_one(&self.init, &copy, &reduce);
        Ok(Box::pin(std::future::ready(result)))
    }
}
