//! The team's selection table: for each (collective, memory type), the score
//! map cut into the size pieces where its candidates do not change, each
//! piece with its candidates best first and their "tl/algorithm" names.
//!
//! Made per (collective, memory type) on the first collective that needs it,
//! then read without a lock: selecting for a small collective was a filter,
//! a sort and an allocation of the candidate list, and a linear search of
//! the names, at every `collective_init`. The table is exact (each piece's
//! candidates are the score map's for every size in it), so a tune string
//! or a TL that refuses a call (`NotSupported`) behaves as before: the
//! request still asks each candidate in turn.

use std::borrow::Cow;
use std::sync::OnceLock;

use super::team::{ActiveTeam, AlgName};
use crate::score::Candidate;
use crate::types::{CollType, MemType};

/// A candidate and its name.
#[derive(Clone)]
pub(crate) struct Choice {
    pub(crate) cand: Candidate,
    pub(crate) name: AlgName,
}

/// Sizes `[start, end)` and their choices, best first.
struct Piece {
    start: u64,
    end: u64,
    choices: Box<[Choice]>,
}

const COLLS: usize = CollType::ALL.len();
const MEMS: usize = MemType::CONCRETE.len();

/// One lazily made list of pieces per (collective, memory type).
pub(crate) struct SelectionTable {
    pieces: [[OnceLock<Box<[Piece]>>; MEMS]; COLLS],
}

impl Default for SelectionTable {
    fn default() -> Self {
        SelectionTable { pieces: std::array::from_fn(|_| std::array::from_fn(|_| OnceLock::new())) }
    }
}

impl SelectionTable {
    /// The choices for a collective of `msgsize` bytes, best first: borrowed
    /// from the table, or (a memory type outside the table, a size past the
    /// last cut) computed as before.
    pub(crate) fn choices<'t>(
        &'t self,
        team: &ActiveTeam,
        coll: CollType,
        mem: MemType,
        msgsize: u64,
    ) -> Cow<'t, [Choice]> {
        let Some(m) = MemType::CONCRETE.iter().position(|&x| x == mem) else {
            return Cow::Owned(compute(team, coll, mem, msgsize));
        };
        let Some(cell) = self.pieces.get(coll.index()).and_then(|row| row.get(m)) else {
            return Cow::Owned(compute(team, coll, mem, msgsize));
        };
        let pieces = cell.get_or_init(|| build(team, coll, mem));
        match pieces.iter().find(|p| p.start <= msgsize && msgsize < p.end) {
            Some(p) => Cow::Borrowed(&p.choices),
            None => Cow::Owned(compute(team, coll, mem, msgsize)),
        }
    }
}

fn compute(team: &ActiveTeam, coll: CollType, mem: MemType, msgsize: u64) -> Vec<Choice> {
    team.score_map
        .candidates(coll, mem, msgsize)
        .into_iter()
        .map(|cand| Choice { name: team.alg_name(cand.tl, coll, cand.alg), cand })
        .collect()
}

fn build(team: &ActiveTeam, coll: CollType, mem: MemType) -> Box<[Piece]> {
    team.score_map
        .cuts(coll, mem)
        .windows(2)
        .map(|w| Piece { start: w[0], end: w[1], choices: compute(team, coll, mem, w[0]).into() })
        .collect()
}
