//! The team shape every TL shares: a TL's team says what it runs with
//! ([`AlgTeam`]), and [`TeamOf`] turns that into the engine's
//! [`TlTeam`]: the collectives and memory types it serves, its default
//! score-map entries, and the checks before a task is made.

use std::sync::Arc;

use ferrocoll_core::args::{CollInit, Signature};
use ferrocoll_core::backend::{CollTask, TlTeam};
use ferrocoll_core::engine::CallBoard;
use ferrocoll_core::score::{AlgId, MsgRange, Score, ScoreEntry};
use ferrocoll_core::{CollType, CollTypeSet, Error, MemType, Result};

use super::registry::{Alg, Registry};

/// One default of a TL's score map: for `coll` messages in `range`, algorithm `alg`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DefaultAlg {
    /// Collective.
    pub coll: CollType,
    /// Message sizes, in bytes.
    pub range: MsgRange,
    /// Algorithm id.
    pub alg: AlgId,
}

/// What a TL's team tells the shared team shape.
pub(crate) trait AlgTeam: Send + Sync + Sized + 'static {
    /// What an algorithm runs with, made at each post (a p2p `Comm`, the shm team, …).
    type Exec: 'static;
    /// The TL's name, for messages.
    const TL: &'static str;
    /// The TL's algorithms.
    fn registry(&self) -> &'static Registry<Self::Exec>;
    /// The memory types it runs collectives on.
    fn mem_types(&self) -> &[MemType];
    /// The score of its default entries.
    fn score(&self) -> Score;
    /// Its default selection, the same for every memory type it serves.
    fn defaults(&self) -> Vec<DefaultAlg>;
    /// Refuse, with `NotSupported`, collectives this team cannot run
    /// (besides memory types outside [`AlgTeam::mem_types`], refused for it).
    fn accepts(&self, _init: &CollInit) -> Result<()> {
        Ok(())
    }
    /// The task of algorithm `alg` for `init`, checked by everything above.
    fn task(self: &Arc<Self>, alg: &'static Alg<Self::Exec>, init: &Arc<CollInit>) -> Result<Arc<dyn CollTask>>;
    /// The team's call board, if this TL has one (see [`TlTeam::call_board`]).
    fn call_board(self: &Arc<Self>) -> Option<Arc<dyn CallBoard>> {
        None
    }
    /// See [`TlTeam::posted_without_task`].
    fn posted_without_task(&self, _seq: u64, _sig: Signature) {}
    /// The team was destroyed on this rank (the engine let go of it; see
    /// [`TeamOf`]'s `Drop`): tell the peers now if this TL's peers learn it
    /// from something of this rank's, even if finished tasks, queue slots
    /// or their call board entries still hold the team a while.
    fn leave(&self) {}
}

/// The engine's view of a TL team built on [`AlgTeam`].
pub(crate) struct TeamOf<T: AlgTeam>(pub Arc<T>);

impl<T: AlgTeam> Drop for TeamOf<T> {
    /// The engine holds a TL team through this only: dropped when the
    /// team is destroyed (no request of it left).
    fn drop(&mut self) {
        self.0.leave();
    }
}

impl<T: AlgTeam> TlTeam for TeamOf<T> {
    fn colls(&self) -> CollTypeSet {
        self.0.registry().colls()
    }

    fn mem_types(&self) -> &[MemType] {
        self.0.mem_types()
    }

    fn default_scores(&self) -> Vec<ScoreEntry> {
        let (defaults, score) = (self.0.defaults(), self.0.score());
        self.0
            .mem_types()
            .iter()
            .flat_map(|&mem| {
                defaults.iter().map(move |d| ScoreEntry { coll: d.coll, mem, range: d.range, score, alg: d.alg })
            })
            .collect()
    }

    fn coll_init(&self, alg: AlgId, init: &Arc<CollInit>) -> Result<Arc<dyn CollTask>> {
        let team = &self.0;
        let a = team
            .registry()
            .find(init.coll, alg)
            .ok_or_else(|| Error::not_supported(format!("{} has no {} algorithm {alg}", T::TL, init.coll)))?;
        team.accepts(init)?;
        if !team.mem_types().contains(&init.mem_type) {
            let served: Vec<String> = team.mem_types().iter().map(ToString::to_string).collect();
            return Err(Error::not_supported(format!(
                "{} handles {} memory, not {}",
                T::TL,
                served.join(" and "),
                init.mem_type
            )));
        }
        a.supports(init)?;
        team.task(a, init)
    }

    fn call_board(&self) -> Option<Arc<dyn CallBoard>> {
        self.0.call_board()
    }

    fn posted_without_task(&self, seq: u64, sig: Signature) {
        self.0.posted_without_task(seq, sig)
    }
}

/// Every default entry of a table: for each collective, its algorithm per
/// message range (`ranges` must cover all sizes, in order).
pub(crate) fn defaults_of(table: &[(CollType, &[(MsgRange, AlgId)])]) -> Vec<DefaultAlg> {
    table
        .iter()
        .flat_map(|&(coll, ranges)| ranges.iter().map(move |&(range, alg)| DefaultAlg { coll, range, alg }))
        .collect()
}
