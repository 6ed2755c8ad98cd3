//! The size round of the v-variants: ranks publish what they will give each
//! rank and take from each rank (all but a scatterv's other ranks, whose
//! tables nobody reads), so that every rank walks the same number
//! of rounds (the longest block that moves between ranks decides) and a
//! count that two ranks disagree on is an error naming both, not a
//! truncated copy: on both sides, but for scatterv's root, which waits for
//! nobody's table (as a scatter's root waits for nobody) and learns of it
//! at its first later collective that waits for that rank (a barrier, or
//! any that reads what it gives; more scatters from the root run ahead
//! first, as a bcast's root does, at most a few epochs), and for a
//! gatherv's other rank on two ranks when its block is short enough to
//! carry: it waits for nobody either (as a gather's), the root fails alone.
//!
//! The round carries the data too when every block is short: each rank
//! writes its blocks after its table, if they fit, before it publishes;
//! once the tables are read, every rank knows the longest block of all
//! (the same on every rank), and when that fits, every rank wrote its
//! blocks and each copies what it takes straight out: one epoch for the
//! whole collective instead of a size round and then the data's.
//!
//! Or the round finishes by single copy (`single_copy.rs`): each rank also
//! writes where each of its blocks lies in its own memory, and when the
//! longest block puts the collective in single copy's range, every rank
//! reads what it takes straight from the givers' buffers in the same epoch
//! (then agrees with every rank on how that went). Blocks that single copy
//! will move are not carried.
//!
//! Where it lies: a team's tables (3 × 8 bytes a rank) go in the ranks'
//! inline regions on teams of up to 174 ranks ([`INLINE_TABLE_MOST`]), and a
//! rank's carried blocks after its table when they fit too: the round is
//! then one line's trip, as an inline collective's (`inline.rs`), and the
//! epoch writes no half (`Depth::Inline`). Blocks too long for that go in
//! the rank's data half, which its epoch then writes (`Depth::Halves`).
//! Each rank decides by its own longest block, which its table says, so
//! every reader finds them. A larger team's tables lie at the start of the
//! data halves, the blocks after them.
//!
//! A post runs the round as a state machine (`one_epoch.rs`, [`Epoch`]):
//! a v-call repeated with short blocks allocates nothing and runs no
//! nested future. What follows a round that did not finish the collective
//! (single copy's agreement, the data rounds) is a future made then.

use std::cell::Cell;
use std::sync::Arc;

use ferrocoll_core::CollType::{self, Alltoallv, Gatherv, Scatterv};
use ferrocoll_core::args::{self, Blocked, Blocks};
use ferrocoll_core::{Error, MemRef, Result};

use super::exchange::{gather_rounds, scatter_rounds};
use super::rounds::max_len;
use super::single_copy::{self, Outcome, Status};
use crate::base::AlgFuture;
use crate::shm::epoch::{Depth, Flag};
use crate::shm::layout::LINE;
use crate::shm::one_epoch::{Epoch, Then};
use crate::shm::team::ShmTeam;

/// Bytes of one table entry.
const ENTRY: usize = 8;

/// Entries of a table per rank: what this rank gives it, what it takes
/// from it, and where its block for it lies in this rank's memory.
const COLUMNS: usize = 3;

/// The longest table that lies in the inline regions: 4 192 bytes, teams
/// of up to 174 ranks, the regions' whole payload while they held 4 KiB.
/// Kept when they grew to 8 KiB (`layout.rs`): what that gained was
/// measured on the payloads of 2–4 ranks, and a larger team's tables stay
/// where the test of a 175-rank team (`tests/tests/shm_size_round.rs`)
/// reaches them; a team past 8 KiB of tables (346 ranks) would take that
/// test minutes on two cores.
const INLINE_TABLE_MOST: usize = 4192;

/// Carried blocks in an inline region start on this many bytes.
const INLINE_ALIGN: usize = 8;

/// A v-collective's call.
#[derive(Clone)]
pub(crate) enum VCall {
    /// Gatherv.
    Gather(args::Gather),
    /// Scatterv, and where this rank's block comes from: `(root, dst)`,
    /// or nothing at the root in place (its block stays in src).
    Scatter { o: args::Scatter, take: Vec<(usize, MemRef)> },
    /// Alltoallv, and `(g, block g of dst)` for every rank g. Carried, a
    /// rank's blocks for the others are in the segment before any lands in
    /// dst, and its own lies where it lands: in place needs no copy then
    /// (the data rounds make one).
    Alltoall { o: args::Alltoall, take: Vec<(usize, MemRef)> },
}

/// A v-collective's call as its size round runs it, with what its posts
/// write and check each time worked out once: the same task posts the
/// same call on the same team each time.
pub(crate) struct SizeRound {
    call: VCall,
    layout: Layout,
    /// This rank's table, as it publishes it (little-endian): what it
    /// gives each rank, what it takes from each, where its block for each
    /// lies.
    table: Box<[u8]>,
    /// What it gives and takes, for checking the others' tables.
    gives: Box<[u64]>,
    takes: Box<[u64]>,
    /// This rank's longest block.
    longest: u64,
    /// The longest block this rank gives or takes: what its own table
    /// adds to the longest of all.
    own_longest: u64,
    /// The sizes at which the collective goes by single copy while the
    /// team may (`ShmTeam::single_copy_range`).
    copy_once: (u64, u64),
    /// The blocks of the call, found once (every post moves the same):
    /// see [`Moves`].
    moves: Moves,
    /// Where this rank carries its blocks while the team may not, and
    /// may, go by single copy (`my_carry`): worked out once, not at every
    /// post's begin and write.
    carry_when: [Option<Place>; 2],
    /// Whom its epoch waits for while the team may not, and may, go by
    /// single copy (`Epoch::waits_for`, asked at every poll).
    waits_when: [Waits; 2],
    /// The longest block each rank gives and the epoch whose table said
    /// so: `finish` notes it while it checks the tables, for the copy
    /// after (where the rank carries its blocks, and in slots how long).
    giver_longest: Box<[Cell<(u64, u64)>]>,
}

/// What a v-collective's size round copies, block by block.
struct Moves {
    /// What this rank gives itself: `(where it lands, where it lies)`.
    own: Option<(MemRef, MemRef)>,
    /// What it carries for the others: `(slot, block)`, its slot in its
    /// carried area (`slot_of`; a gather's one block: 0).
    carried: Box<[(usize, MemRef)]>,
    /// What it takes from the others: `(giver, where the block lands)`.
    taken: Box<[(usize, MemRef)]>,
    /// Gatherv: every giver carries one block, at the start of its area.
    one_each: bool,
}

/// Whom a size round's epoch waits for (see `Epoch::waits_for`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Waits {
    /// Nobody: a scatterv's root, and a gatherv's other rank on two ranks
    /// when it carries its block (see [`SizeRound::new`]).
    Nobody,
    /// The root: a gatherv's or scatterv's other ranks.
    Root(usize),
    /// Every rank: a gatherv's root, alltoallv's ranks.
    Everyone,
}

/// What a v-collective's size round may carry: its call's blocks.
enum Carry<'a> {
    /// Gatherv: this rank's block, and (at the root) where each rank's lands.
    Gather { mine: MemRef, dst: Option<&'a Blocked> },
    /// Scatterv, alltoallv: this rank's buffer and its block for each rank
    /// (`None`: it gives nothing), and `(giver, where its block for this
    /// rank lands)` for each rank it takes from. `in_place`: the blocks
    /// taken land where the blocks given lie (alltoallv in place), which
    /// single copy cannot do.
    Scatter { give: Option<(MemRef, &'a Blocks)>, take: &'a [(usize, MemRef)], in_place: bool },
}

/// Where a rank's carried blocks lie in an epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// After its table, in its inline region.
    Inline,
    /// In its data half (after its table, if that lies there).
    Half,
}

/// Where tables and carried blocks lie on a team: the same on every rank
/// (it depends on the team's size and configuration only).
struct Layout {
    /// Bytes of a table.
    table: usize,
    /// Whether tables lie in the inline regions (else in the halves).
    table_inline: bool,
    /// Where carried blocks start in a data half.
    half_start: usize,
    /// The longest block carried in a data half (a scatter's slot).
    half_room: usize,
    /// The longest block carried in an inline region, if tables lie there.
    inline_room: Option<usize>,
}

impl Layout {
    fn of(team: &ShmTeam, gather: bool) -> Result<Layout> {
        let p = team.size;
        let table =
            p.checked_mul(COLUMNS * ENTRY).ok_or_else(|| Error::internal(format!("a size table for {p} ranks")))?;
        let table_inline = table <= INLINE_TABLE_MOST && team.fits_inline(table);
        let half_start = if table_inline { 0 } else { table.next_multiple_of(LINE) };
        // A gather carries one block; a scatter one per rank, a P-th of
        // the area each (whole lines in a half).
        let area = team.pipeline_round().saturating_sub(half_start);
        let half_room = if gather { area } else { area / p / LINE * LINE };
        let inline_room = table_inline.then(|| {
            let area = team.seg.inline_capacity() - table;
            if gather { area } else { area / p / INLINE_ALIGN * INLINE_ALIGN }
        });
        Ok(Layout { table, table_inline, half_start, half_room, inline_room })
    }

    /// Where a rank whose longest block is `longest` carries its blocks.
    fn place(&self, longest: u64) -> Place {
        match self.inline_room {
            Some(room) if longest <= room as u64 => Place::Inline,
            _ => Place::Half,
        }
    }

    /// Whether a rank whose longest block is `longest` can carry its blocks.
    fn fits(&self, longest: u64) -> bool {
        longest <= self.half_room.max(self.inline_room.unwrap_or(0)) as u64
    }

    /// Where rank `r`'s table of epoch `e` lies.
    fn table_at(&self, team: &ShmTeam, r: usize, e: u64) -> Result<MemRef> {
        if self.table_inline { team.inline_part(r, e, self.table) } else { team.seg.data(r, e)?.range(0, self.table) }
    }

    /// Rank `r`'s table of epoch `e`, once `r` published the epoch.
    fn table<'t>(&self, team: &'t ShmTeam, r: usize, e: u64) -> Result<Table<'t>> {
        let at = self.table_at(team, r, e)?;
        // SAFETY: rank r wrote its table before publishing its flag for
        // epoch e, which this rank waited for (Acquire), and does not write
        // it again before this rank publishes `done` for e (`epoch.rs`);
        // the segment outlives the team.
        Ok(Table(unsafe { at.as_slice() }))
    }

    /// Where rank `r` carries its blocks in epoch `e`, at `place`, and the
    /// bytes of a scatter's slot there for a rank whose longest block is
    /// `longest` (it fits).
    fn area(&self, team: &ShmTeam, r: usize, e: u64, place: Place, longest: u64) -> Result<(MemRef, usize)> {
        match place {
            Place::Inline => {
                let payload = team.seg.inline_payload(r, e)?;
                let slot = usize::try_from(longest)
                    .ok()
                    .and_then(|l| l.checked_next_multiple_of(INLINE_ALIGN))
                    .ok_or_else(|| Error::internal(format!("a {longest}-byte block inline")))?;
                Ok((payload.range(self.table, payload.len().saturating_sub(self.table))?, slot))
            }
            Place::Half => {
                let half = team.seg.data(r, e)?;
                Ok((half.range(self.half_start, half.len().saturating_sub(self.half_start))?, self.half_room))
            }
        }
    }
}

/// A rank's table as another reads it: `COLUMNS` × P entries, little-endian.
#[derive(Clone, Copy)]
struct Table<'t>(&'t [u8]);

impl Table<'_> {
    /// The largest of entries `from..to`.
    fn max_of(self, from: usize, to: usize) -> Result<u64> {
        let bytes = from.checked_mul(ENTRY).zip(to.checked_mul(ENTRY)).and_then(|(a, b)| self.0.get(a..b));
        let bytes = bytes.ok_or_else(|| Error::internal(format!("entries {from}..{to} of a size table")))?;
        let entries = bytes.chunks_exact(ENTRY).map(|e| <[u8; ENTRY]>::try_from(e).map_or(0, u64::from_le_bytes));
        Ok(entries.max().unwrap_or(0))
    }

    fn entry(self, index: usize) -> Result<u64> {
        let at = index.checked_mul(ENTRY).and_then(|from| self.0.get(from..from.checked_add(ENTRY)?));
        let bytes = at.and_then(|b| <[u8; ENTRY]>::try_from(b).ok());
        bytes.map(u64::from_le_bytes).ok_or_else(|| Error::internal(format!("entry {index} of a size table")))
    }
}

impl VCall {
    fn coll(&self) -> CollType {
        match self {
            VCall::Gather(_) => Gatherv,
            VCall::Scatter { .. } => Scatterv,
            VCall::Alltoall { .. } => Alltoallv,
        }
    }

    /// The root, for gatherv and scatterv: every block goes to or comes
    /// from it, so its table alone says every block's length.
    fn root(&self) -> Option<usize> {
        match self {
            VCall::Gather(o) => Some(o.root),
            VCall::Scatter { o, .. } => Some(o.root),
            VCall::Alltoall { .. } => None,
        }
    }

    /// Bytes this rank gives rank `j`.
    fn give(&self, j: usize) -> usize {
        match self {
            VCall::Gather(o) if j == o.root => o.src.len(),
            VCall::Gather(_) => 0,
            VCall::Scatter { o, .. } => o.src.as_ref().map_or(0, |s| s.blocks.bytes(j)),
            VCall::Alltoall { o, .. } => o.src.blocks.bytes(j),
        }
    }

    /// Bytes this rank (`me`) takes from rank `r`.
    fn take(&self, me: usize, r: usize) -> usize {
        match self {
            VCall::Gather(o) => match &o.dst {
                Some(_) if r == me => o.src.len(),
                Some(d) => d.blocks.bytes(r),
                None => 0,
            },
            VCall::Scatter { o, .. } if r == o.root => o.dst.len(),
            VCall::Scatter { .. } => 0,
            VCall::Alltoall { o, .. } => o.dst.blocks.bytes(r),
        }
    }

    fn carry(&self) -> Carry<'_> {
        match self {
            VCall::Gather(o) => Carry::Gather { mine: o.src, dst: o.dst.as_ref() },
            VCall::Scatter { o, take } => {
                Carry::Scatter { give: o.src.as_ref().map(|s| (s.mem, &s.blocks)), take, in_place: false }
            }
            VCall::Alltoall { o, take } => {
                Carry::Scatter { give: Some((o.src.mem, &o.src.blocks)), take, in_place: o.in_place }
            }
        }
    }

    /// The data rounds after a size round that did not move the blocks.
    async fn rounds(&self, team: &ShmTeam, longest: usize) -> Result<()> {
        match self {
            VCall::Gather(o) => gather_rounds(team, o.src, o.dst.as_ref(), longest, o.dst.is_none()).await,
            VCall::Scatter { o, take } => {
                scatter_rounds(team, o.src.as_ref().map(|s| (s.mem, &s.blocks)), take, longest).await
            }
            VCall::Alltoall { o, take } => super::alltoall::exchange(team, o, take, longest).await,
        }
    }
}

impl SizeRound {
    pub(crate) fn new(team: &ShmTeam, call: VCall) -> Result<SizeRound> {
        let (p, me) = (team.size, team.rank);
        if let Some(root) = call.root().filter(|&r| r >= p) {
            return Err(Error::invalid_param(format!("{}: root {root} in a team of {p}", call.coll())));
        }
        let layout = Layout::of(team, matches!(call, VCall::Gather(_)))?;
        let carry = call.carry();
        let gives: Box<[u64]> = (0..p).map(|j| call.give(j) as u64).collect();
        let takes: Box<[u64]> = (0..p).map(|r| call.take(me, r) as u64).collect();
        let addresses = (0..p).map(|j| carry.address(j)).collect::<Result<Vec<u64>>>()?;
        let table = gives.iter().chain(&takes[..]).chain(&addresses).flat_map(|v| v.to_le_bytes()).collect();
        let longest = gives.iter().copied().max().unwrap_or(0);
        let own_longest = match &call {
            // A gatherv's root gives only itself its block, copied straight
            // from its input: what decides the rounds is the longest block
            // that moves between ranks (on every rank alike, see `finish`).
            VCall::Gather(_) => {
                let others = |v: &[u64]| v.iter().enumerate().filter(|&(r, _)| r != me).map(|(_, &b)| b).max();
                others(&takes).max(others(&gives)).unwrap_or(0)
            }
            _ => takes.iter().copied().max().unwrap_or(0).max(longest),
        };
        let copy_once =
            if carry.single_copy_can() { team.single_copy_range(call.coll()) } else { (u64::MAX, u64::MAX) };
        let moves = carry.moves(team)?;
        let giver_longest = (0..p).map(|_| Cell::new((0, 0))).collect();
        let carry_when = [false, true].map(|reach| {
            let range = if reach { copy_once } else { (u64::MAX, u64::MAX) };
            carried_at(&call, &layout, me, longest, p, range)
        });
        let waits_when = [0, 1].map(|reach| match (&call, call.root()) {
            (VCall::Scatter { o, .. }, _) if o.root == me => Waits::Nobody,
            // On two ranks the other rank's block is the only one that
            // moves: when it carries it, the round ends in this epoch on
            // both ranks whatever the root's table says, so it leaves as a
            // gather's other ranks do — not a round trip through the root
            // at every post. A count the root disagrees with fails the
            // root, naming both (as a scatterv's root learns nothing).
            (VCall::Gather(_), Some(root)) if root != me && p == 2 && carry_when[reach].is_some() => Waits::Nobody,
            (_, Some(root)) if root != me => Waits::Root(root),
            _ => Waits::Everyone,
        });
        Ok(SizeRound {
            call,
            layout,
            table,
            gives,
            takes,
            longest,
            own_longest,
            copy_once,
            carry_when,
            waits_when,
            moves,
            giver_longest,
        })
    }

    /// The sizes of the whole collective (its longest block times the
    /// ranks) at which it goes by single copy on this team now.
    fn single_copy_range(&self, team: &ShmTeam) -> (u64, u64) {
        if team.reach.on() { self.copy_once } else { (u64::MAX, u64::MAX) }
    }

    /// Whether a collective whose longest block is `longest` lies below
    /// single copy's range (blocks that single copy will move are not
    /// carried: a collective whose longest block puts it in single copy's
    /// range is not, and no rank's own blocks are longer than the longest).
    fn below_single_copy(&self, team: &ShmTeam, longest: u64) -> bool {
        below(longest, team.size, self.single_copy_range(team))
    }

    /// Where this rank carries its blocks (`None`: it carries none).
    fn my_carry(&self, team: &ShmTeam) -> Option<Place> {
        self.carry_when[usize::from(team.reach.on())]
    }

    /// Whom this rank's epoch waits for.
    fn waits(&self, team: &ShmTeam) -> Waits {
        self.waits_when[usize::from(team.reach.on())]
    }

    /// Write this rank's table of epoch `e`, and its blocks when it carries them.
    fn write(&self, team: &ShmTeam, e: u64) -> Result<()> {
        let me = team.rank;
        let table = self.layout.table_at(team, me, e)?;
        if table.len() != self.table.len() {
            return Err(Error::internal(format!("a {}-byte size table", self.table.len())));
        }
        // SAFETY: this rank's own table, which no one reads before this
        // rank publishes the epoch (after this write), and whose readers
        // of its last epoch have finished (`begin`).
        unsafe { table.as_mut_slice().copy_from_slice(&self.table) };
        if let Some(place) = self.my_carry(team) {
            let (area, slot) = self.layout.area(team, me, e, place, self.longest)?;
            for &(at, block) in &self.moves.carried {
                let at = at.checked_mul(slot).ok_or_else(|| Error::internal("a slot past the area"))?;
                team.copy_in(area.range(at, block.len())?, block)?;
            }
        }
        Ok(())
    }

    /// What is left after a round whose longest block was `longest` and
    /// which did not carry the blocks: agreeing on single copy's reads
    /// (when `read` says how this rank's went), then publishing `done`;
    /// the data rounds if the blocks are still to move.
    fn rest(&self, team: &Arc<ShmTeam>, e: u64, longest: u64, read: Option<(Vec<usize>, Status)>) -> AlgFuture {
        let (call, team, own) = (self.call.clone(), team.clone(), self.moves.own);
        Box::pin(async move {
            if let Some((givers, status)) = read {
                let copy_own = || own.map_or(Ok(()), |(into, from)| team.copy(into, from));
                let (outcome, copied) = single_copy::agree(&team, call.coll(), e, givers, status, copy_own).await;
                team.publish(Flag::Done, e)?;
                copied?;
                if outcome? == Outcome::Done {
                    return Ok(());
                }
            }
            call.rounds(&team, max_len([longest])?).await
        })
    }

    /// Copy what this rank gives itself, and what it takes out of the
    /// givers' carried areas of epoch `e` (the tables agreed on every
    /// length it takes; `finish` noted each giver's longest block).
    fn read_carried(&self, team: &ShmTeam, e: u64) -> Result<()> {
        // Its own block first, from its input: in place it lies where it
        // lands already, and the others' land around it.
        if let Some((into, from)) = self.moves.own {
            team.copy(into, from)?;
        }
        let (me, layout) = (team.rank, &self.layout);
        for &(g, into) in &self.moves.taken {
            let theirs = match self.giver_longest.get(g).map(Cell::get) {
                Some((at, longest)) if at == e => longest,
                _ => return Err(Error::internal(format!("rank {g}'s table of epoch {e} was not read"))),
            };
            let (area, slot) = layout.area(team, g, e, layout.place(theirs), theirs)?;
            let at = if self.moves.one_each { 0 } else { slot_of(me, g) };
            let at = at.checked_mul(slot).ok_or_else(|| Error::internal("a slot past the area"))?;
            team.copy(into, area.range(at, into.len())?)?;
        }
        Ok(())
    }
}

/// Where a rank (`me`) whose longest block is `longest` carries its blocks
/// of `call` on a team of `p` ranks whose single-copy range is `range`
/// (`None`: it carries none — a gatherv's root, which gives only to
/// itself and copies that straight from its input, or blocks too long to
/// carry, or that single copy moves).
fn carried_at(call: &VCall, layout: &Layout, me: usize, longest: u64, p: usize, range: (u64, u64)) -> Option<Place> {
    if matches!(call, VCall::Gather(o) if o.root == me) {
        return None;
    }
    (layout.fits(longest) && below(longest, p, range)).then(|| layout.place(longest))
}

/// Whether a collective of `p` ranks whose longest block is `longest` lies
/// below the single-copy `range` (see `SizeRound::below_single_copy`).
fn below(longest: u64, p: usize, range: (u64, u64)) -> bool {
    longest.saturating_mul(p as u64) < range.0
}

impl Carry<'_> {
    /// Where this rank's block for rank `j` lies in its memory (0: none).
    fn address(&self, j: usize) -> Result<u64> {
        Ok(match self {
            Carry::Gather { mine, .. } => mine.addr() as u64,
            Carry::Scatter { give: Some((from, blocks)), .. } => blocks.of(*from, j)?.addr() as u64,
            Carry::Scatter { give: None, .. } => 0,
        })
    }

    /// Whether single copy can move these blocks.
    fn single_copy_can(&self) -> bool {
        !matches!(self, Carry::Scatter { in_place: true, .. })
    }

    /// The blocks this rank moves at every post (see [`Moves`]).
    fn moves(&self, team: &ShmTeam) -> Result<Moves> {
        let me = team.rank;
        Ok(match self {
            Carry::Gather { mine, dst } => Moves {
                own: dst.map(|d| d.block(me)).transpose()?.map(|into| (into, *mine)),
                // The root gives only to itself (`carried_at`).
                carried: if dst.is_some() { Box::default() } else { Box::new([(0, *mine)]) },
                taken: match dst {
                    Some(d) => team.others(|r| d.block(r))?.into(),
                    None => Box::default(),
                },
                one_each: true,
            },
            Carry::Scatter { give, take, .. } => {
                let mine = |j| give.map(|(from, blocks)| blocks.of(from, j)).transpose();
                let own = match (mine(me)?, take.iter().find(|&&(g, _)| g == me)) {
                    (Some(from), Some(&(_, into))) => Some((into, from)),
                    _ => None,
                };
                let mut carried = Vec::new();
                for j in (0..team.size).filter(|&j| j != me) {
                    if let Some(block) = mine(j)? {
                        carried.push((slot_of(j, me), block));
                    }
                }
                let taken = take.iter().copied().filter(|&(g, _)| g != me).collect();
                Moves { own, carried: carried.into(), taken, one_each: false }
            }
        })
    }
}

/// Which slot of giver `g`'s carried blocks holds its block for rank `j`
/// (not `g`: a giver carries no block for itself, and no caller asks for
/// it): the others in rank order, so that on two ranks a short block lies
/// right after the table, on the line pair the reader fetches with the
/// table's.
fn slot_of(j: usize, g: usize) -> usize {
    if j < g { j } else { j.saturating_sub(1) }
}

/// Read what this rank takes from `givers` straight from their memory
/// (their addresses in their tables; the lengths are this rank's, which the
/// tables agreed with).
fn read_once<'t>(
    team: &ShmTeam,
    tables: impl Fn(usize) -> Result<Table<'t>>,
    givers: &[(usize, MemRef)],
) -> Result<Status> {
    for &(g, into) in givers {
        let addr = tables(g)?.entry(2 * team.size + team.rank)?;
        let status = single_copy::read_block(team, g, addr, into);
        if status != Status::Read {
            return Ok(status);
        }
    }
    Ok(Status::Read)
}

impl Epoch for SizeRound {
    /// An epoch that writes a half when the tables lie there, or when this
    /// rank carries blocks too long for its inline region.
    fn depth(&self, team: &ShmTeam) -> Depth {
        if self.layout.table_inline && self.my_carry(team) != Some(Place::Half) { Depth::Inline } else { Depth::Halves }
    }

    /// A scatterv's other ranks publish nothing, as a bcast's: nobody waits
    /// for them (the root waits for nobody, the others for the root), and
    /// what their tables say — what they take, and that they give
    /// nothing — no rank reads; each checks the root's table itself.
    fn publish(&self, team: &ShmTeam, e: u64) -> Result<()> {
        if matches!(&self.call, VCall::Scatter { o, .. } if o.root != team.rank) {
            return Ok(());
        }
        self.write(team, e)?;
        if self.layout.table_inline { team.publish_inline_written(e) } else { team.publish(Flag::Arrive, e) }
    }

    /// With a root, the other ranks wait for the root only, as a gather's
    /// or scatter's do; gatherv's root and alltoallv's ranks, which read
    /// everyone's blocks, wait for everyone. Scatterv's root waits for
    /// nobody, as a scatter's: its own table says every block's length,
    /// and a rank that takes another length than the root gives it fails,
    /// naming both (the root learns of it at its first later collective
    /// that waits for that rank). Waiting for everyone's table made a small
    /// scatterv a round trip: 1.8 µs against a scatter's 0.4 on 4 ranks
    /// sharing 2 cores.
    fn waits_for<'a>(&'a self, team: &'a ShmTeam) -> Option<(Flag, &'a [usize])> {
        let flag = if self.layout.table_inline { Flag::Inline } else { Flag::Arrive };
        match self.waits(team) {
            Waits::Nobody => None,
            // The root is a rank of the team (`SizeRound::new`), and not
            // this one: a root waits for nobody or for everyone.
            Waits::Root(root) => Some((flag, std::slice::from_ref(&team.all[root]))),
            // Its own table is its own fields (`finish` checks them).
            Waits::Everyone => Some((flag, &team.others[..])),
        }
    }

    /// The lines of the waited-for ranks' tables and of the blocks this
    /// rank takes from them, when those lie inline: where a block lies
    /// follows from the giver's table, so without this its line is fetched
    /// only after the table's (`prefetch.rs`). A giver's slot is guessed
    /// from what this rank takes from it (exact when the giver's longest
    /// block is that long); a wrong guess fetches lines nobody reads. A
    /// block longer than the inline region holds lies elsewhere (the
    /// giver's half, or its own buffer): its guess would ask for up to 4 KiB
    /// of a region nobody wrote this epoch, so only the table is asked for.
    fn prefetch(&self, team: &ShmTeam, e: u64) {
        let Some((_, ranks)) = self.waits_for(team).filter(|_| self.layout.table_inline) else { return };
        let me = team.rank;
        for &r in ranks.iter().filter(|&&r| r != me) {
            let take = usize::try_from(self.takes[r]).unwrap_or(usize::MAX);
            let before = match self.call {
                VCall::Gather(_) => 0,
                _ => slot_of(me, r).saturating_mul(take.checked_next_multiple_of(INLINE_ALIGN).unwrap_or(usize::MAX)),
            };
            // A block too long for the inline region lies in the giver's
            // half (or is not carried): then the table only.
            let block_inline = self.layout.inline_room.is_some_and(|room| take <= room);
            let upto = if block_inline { self.layout.table.saturating_add(before).saturating_add(take) } else { 0 };
            team.prefetch_inline(r, e, 0, upto.max(self.layout.table));
        }
    }

    /// Check the tables against this rank's counts; copy the carried
    /// blocks out, or read by single copy, or leave the data to rounds.
    fn finish(&self, team: &Arc<ShmTeam>, e: u64) -> Result<Then> {
        let (p, me) = (team.size, team.rank);
        let layout = &self.layout;
        let table = |r| layout.table(team, r, e);
        // Every rank takes the longest block from the same tables (the
        // root's, or everyone's), so that all agree on what follows; every
        // rank waited for those (and gatherv's root for everyone's).
        let root = self.call.root();
        // A root's own table is the one the others take the longest block
        // from (a scatterv's root reads no other); without a root, every
        // rank's, this rank's included. This rank's own entries are its
        // own fields: it reads only the others' tables.
        // A gatherv's other rank that waits for nobody (on two ranks) has
        // the only block that moves.
        let waits = self.waits(team);
        let mut longest =
            if root.is_none_or(|root| root == me) || waits == Waits::Nobody { self.own_longest } else { 0 };
        // The ranks waited for, and this rank itself with everyone.
        let checked = match waits {
            Waits::Nobody => &[][..],
            Waits::Root(root) => std::slice::from_ref(&team.all[root]),
            Waits::Everyone => &team.all[..],
        };
        for &r in checked {
            // What r gives me against what I take from r, and the other way round.
            let (r_gives, r_takes) = if r == me {
                (self.gives[me], self.takes[me])
            } else {
                let t = table(r)?;
                let (r_gives, r_takes) = (t.entry(me)?, t.entry(p + me)?);
                // Where r carries its blocks, for the copy below: by its
                // longest, which is a gatherv's one block (given to the root).
                let r_longest = if self.moves.one_each { r_gives } else { t.max_of(0, p)? };
                if let Some(slot) = self.giver_longest.get(r) {
                    slot.set((e, r_longest));
                }
                if root.is_none_or(|root| root == r) {
                    longest = longest.max(if self.moves.one_each {
                        // A gatherv's root: what it takes from the others
                        // (its own block moves from its input, see `new`).
                        t.max_of(p, p + r)?.max(t.max_of(p + r + 1, 2 * p)?)
                    } else {
                        // Everything r gives and takes.
                        r_longest.max(t.max_of(p, 2 * p)?)
                    });
                }
                (r_gives, r_takes)
            };
            let (i_take, i_give) = (self.takes[r], self.gives[r]);
            let mismatch = if r_gives != i_take {
                format!("rank {r} gives {r_gives} bytes to rank {me}, which takes {i_take}")
            } else if r_takes != i_give {
                format!("rank {me} gives {i_give} bytes to rank {r}, which takes {r_takes}")
            } else {
                continue;
            };
            team.publish(Flag::Done, e)?;
            return Err(Error::io(format!("{}: {mismatch}: do the ranks' counts agree?", self.call.coll())));
        }
        // Every rank read the same tables for it: the same longest, the
        // same choice. Single copy needs one more wait, for every rank's
        // status, which all ranks make or skip alike.
        let (from, to) = self.single_copy_range(team);
        if (from..to).contains(&longest.saturating_mul(p as u64)) {
            let status = read_once(team, table, &self.moves.taken)?;
            // The agreement reads this epoch's control-line slots.
            team.slots_read_at(e)?;
            let givers = self.moves.taken.iter().map(|&(g, _)| g).collect();
            return Ok(Then::Continue(self.rest(team, e, longest, Some((givers, status)))));
        }
        let carried = layout.fits(longest) && self.below_single_copy(team, longest);
        let copied = if carried { self.read_carried(team, e) } else { Ok(()) };
        team.publish(Flag::Done, e)?;
        copied?;
        Ok(if carried { Then::Over } else { Then::Continue(self.rest(team, e, longest, None)) })
    }
}
