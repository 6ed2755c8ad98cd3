//! The size round of the v-variants: ranks publish what they will give each
//! rank and take from each rank, so that every rank walks the same number
//! of rounds (the longest block decides) and a count that two ranks
//! disagree on is an error on both sides, not a truncated copy.
//!
//! The round carries the data too when every block is short ([`Carry`]):
//! each rank writes its blocks after its table, if they fit, before it
//! publishes; once the tables are read, every rank knows the longest block
//! of all (the same on every rank), and when that fits, every rank wrote
//! its blocks and each copies what it takes straight out: one epoch for the
//! whole collective instead of a size round and then the data's.
//!
//! Or the round finishes by single copy (`single_copy.rs`): each rank also
//! writes where each of its blocks lies in its own memory, and when the
//! longest block puts the collective in single copy's range, every rank
//! reads what it takes straight from the givers' buffers in the same epoch
//! (then agrees with every rank on how that went). Blocks that single copy
//! will move are not carried.

use ferrocoll_core::args::{Blocked, Blocks};
use ferrocoll_core::{CollType, Error, MemRef, Result};

use super::rounds::max_len;
use super::single_copy::{self, Outcome, Status};
use crate::shm::epoch::Flag;
use crate::shm::layout::LINE;
use crate::shm::team::ShmTeam;

/// Bytes of one table entry.
const ENTRY: usize = 8;

/// Write this rank's table: what it gives each rank, what it takes from
/// each, and where its block for each rank lies in its memory.
fn write_table(
    team: &ShmTeam,
    e: u64,
    give: &impl Fn(usize) -> usize,
    take: &impl Fn(usize) -> usize,
    carry: &Carry<'_>,
) -> Result<()> {
    let (p, half) = (team.size, team.seg.data(team.rank, e)?);
    for i in 0..3 * p {
        let v = match i / p {
            0 => give(i) as u64,
            1 => take(i - p) as u64,
            _ => carry.address(i - 2 * p)?,
        };
        let cell = half.range(i * ENTRY, ENTRY)?;
        // SAFETY: `cell` is in this rank's own half, which no one reads
        // before our `arrive` for this epoch (published after this write).
        unsafe { cell.as_mut_slice().copy_from_slice(&v.to_le_bytes()) };
    }
    Ok(())
}

fn read_entry(team: &ShmTeam, r: usize, e: u64, index: usize) -> Result<u64> {
    let cell = team.seg.data(r, e)?.range(index * ENTRY, ENTRY)?;
    // SAFETY: rank r wrote its table before publishing `arrive` for epoch e,
    // which we waited for (Acquire), and does not write its half again before
    // we publish `done` for e.
    let b = unsafe { cell.as_slice() };
    let mut w = [0u8; ENTRY];
    w.copy_from_slice(b);
    Ok(u64::from_le_bytes(w))
}

/// What a v-collective's size round may carry (see the module docs).
pub(crate) enum Carry<'a> {
    /// Gatherv: this rank's block, and (at the root) where each rank's lands.
    Gather { mine: MemRef, dst: Option<&'a Blocked> },
    /// Scatterv, alltoallv: this rank's buffer and its block for each rank
    /// (`None`: it gives nothing), and `(giver, where its block for this
    /// rank lands)` for each rank it takes from. `in_place`: the blocks
    /// taken land where the blocks given lie (alltoallv in place), which
    /// single copy cannot do.
    Scatter { give: Option<(MemRef, &'a Blocks)>, take: &'a [(usize, MemRef)], in_place: bool },
}

/// Where the carried data starts in a rank's half: after its table, on a line of its own.
fn area_start(p: usize) -> Result<usize> {
    p.checked_mul(3 * ENTRY)
        .and_then(|t| t.checked_next_multiple_of(LINE))
        .ok_or_else(|| Error::internal(format!("a size table for {p} ranks")))
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

    /// Copy what this rank gives itself (once the others no longer wait
    /// for it: their buffers are theirs again meanwhile).
    fn copy_own(&self, team: &ShmTeam) -> Result<()> {
        let me = team.rank;
        match self {
            Carry::Gather { mine, dst: Some(d) } => team.copy(d.block(me)?, *mine),
            Carry::Gather { dst: None, .. } => Ok(()),
            Carry::Scatter { give, take, .. } => match (give, take.iter().find(|&&(g, _)| g == me)) {
                (Some((from, blocks)), Some(&(_, into))) => team.copy(into, blocks.of(*from, me)?),
                _ => Ok(()),
            },
        }
    }

    /// The ranks this rank reads from by single copy, and what lands from each.
    fn givers(&self, team: &ShmTeam) -> Result<Vec<(usize, MemRef)>> {
        match self {
            Carry::Gather { dst: Some(d), .. } => team.others(|r| d.block(r)),
            Carry::Gather { dst: None, .. } => Ok(Vec::new()),
            Carry::Scatter { take, .. } => Ok(take.iter().copied().filter(|&(g, _)| g != team.rank).collect()),
        }
    }

    /// Bytes of the longest block it carries, when its blocks are laid out
    /// in an area of `area` bytes: a gather's one block, or a scatter's
    /// slot per rank (a P-th of it, whole lines).
    fn room(&self, area: usize, p: usize) -> usize {
        match self {
            Carry::Gather { .. } => area,
            Carry::Scatter { .. } => area / p / LINE * LINE,
        }
    }

    /// Write this rank's blocks into `area` (they fit: `room`).
    fn write(&self, team: &ShmTeam, area: MemRef, room: usize) -> Result<()> {
        match self {
            Carry::Gather { mine, .. } => team.copy(area.range(0, mine.len())?, *mine),
            Carry::Scatter { give: Some((from, blocks)), .. } => {
                for j in 0..team.size {
                    let block = blocks.of(*from, j)?;
                    team.copy(area.range(j * room, block.len())?, block)?;
                }
                Ok(())
            }
            Carry::Scatter { give: None, .. } => Ok(()),
        }
    }

    /// Copy what this rank takes out of the givers' areas of epoch `e`
    /// (the tables agreed on every length this rank takes).
    fn read(&self, team: &ShmTeam, e: u64, start: usize, room: usize) -> Result<()> {
        let me = team.rank;
        match self {
            Carry::Gather { mine, dst: Some(d) } => {
                for r in (0..team.size).filter(|&r| r != me) {
                    let theirs = d.block(r)?;
                    team.copy(theirs, team.seg.data(r, e)?.range(start, theirs.len())?)?;
                }
                team.copy(d.block(me)?, *mine)
            }
            Carry::Gather { dst: None, .. } => Ok(()),
            Carry::Scatter { take, .. } => {
                // Slot `me` of each giver's area; `room * me` fits: it was laid out.
                let at = start + me * room;
                for &(g, into) in take.iter() {
                    team.copy(into, team.seg.data(g, e)?.range(at, into.len())?)?;
                }
                Ok(())
            }
        }
    }
}

/// Read what this rank takes from `givers` straight from their memory
/// (their addresses in their tables of epoch `e`; the lengths are this
/// rank's, which the tables agreed with).
fn read_once(team: &ShmTeam, e: u64, givers: &[(usize, MemRef)]) -> Result<Status> {
    for &(g, into) in givers {
        let addr = read_entry(team, g, e, 2 * team.size + team.rank)?;
        let status = single_copy::read_block(team, g, addr, into);
        if status != Status::Read {
            return Ok(status);
        }
    }
    Ok(Status::Read)
}

/// Publish `give(j)` / `take(j)` (bytes this rank gives rank j / takes from
/// rank j; 0 when none), check them against the ranks we deal with, and
/// return the longest block any rank gives — or `None` when the round
/// carried the whole collective or finished it by single copy (`carry`,
/// see the module docs).
///
/// With a `root` (gatherv, scatterv: every block goes to or comes from
/// it), the root's table alone says every block's length: the other ranks
/// wait for the root only, as a gather's or scatter's do, and every rank
/// takes the longest block from the root's table, so that all agree.
pub(crate) async fn exchange_sizes(
    team: &ShmTeam,
    coll: CollType,
    root: Option<usize>,
    give: impl Fn(usize) -> usize,
    take: impl Fn(usize) -> usize,
    carry: Carry<'_>,
) -> Result<Option<usize>> {
    let (p, me) = (team.size, team.rank);
    let (waits_for, longest_in) = match root.as_ref() {
        Some(r) if *r == me => (&team.all[..], std::slice::from_ref(r)),
        Some(r) => (std::slice::from_ref(r), std::slice::from_ref(r)),
        None => (&team.all[..], &team.all[..]),
    };
    let e = team.begin().await?;
    write_table(team, e, &give, &take, &carry)?;
    let start = area_start(p)?;
    let room = carry.room(team.pipeline_round().saturating_sub(start), p);
    let half = team.seg.data(me, e)?;
    // Blocks that single copy will move are not carried: a collective
    // whose longest block puts it in single copy's range is not, and no
    // rank's own blocks are longer than the longest.
    let (copy_once_from, copy_once_to) =
        if carry.single_copy_can() { team.single_copy_range(coll) } else { (u64::MAX, u64::MAX) };
    let below_single_copy = |longest: u64| longest.saturating_mul(p as u64) < copy_once_from;
    let my_longest = (0..p).map(|j| give(j) as u64).max().unwrap_or(0);
    if (0..p).all(|j| give(j) <= room) && below_single_copy(my_longest) {
        carry.write(team, half.range(start, half.len().saturating_sub(start))?, room)?;
    }
    team.publish(Flag::Arrive, e)?;
    team.wait(Flag::Arrive, waits_for, e).await?;
    let mut longest = 0u64;
    for &r in longest_in {
        for j in 0..2 * p {
            longest = longest.max(read_entry(team, r, e, j)?);
        }
    }
    let mut mismatch = None;
    for &r in waits_for {
        // What r gives me against what I take from r, and the other way round.
        let (r_gives, r_takes) = (read_entry(team, r, e, me)?, read_entry(team, r, e, p + me)?);
        let (i_take, i_give) = (take(r) as u64, give(r) as u64);
        if mismatch.is_none() && r_gives != i_take {
            mismatch = Some(format!("rank {r} gives {r_gives} bytes to rank {me}, which takes {i_take}"));
        }
        if mismatch.is_none() && r_takes != i_give {
            mismatch = Some(format!("rank {me} gives {i_give} bytes to rank {r}, which takes {r_takes}"));
        }
    }
    // Every rank read the same tables for it: the same longest, the same
    // choice. Single copy needs one more wait, for every rank's status,
    // which all ranks make or skip alike.
    if let Some(m) = mismatch {
        team.publish(Flag::Done, e)?;
        return Err(Error::io(format!("{coll}: {m}: do the ranks' counts agree?")));
    }
    if (copy_once_from..copy_once_to).contains(&longest.saturating_mul(p as u64)) {
        let givers = carry.givers(team)?;
        let status = read_once(team, e, &givers)?;
        let outcome = single_copy::agree(team, coll, e, givers.iter().map(|&(g, _)| g), status).await;
        team.publish(Flag::Done, e)?;
        return match outcome? {
            Outcome::Done => carry.copy_own(team).map(|()| None),
            Outcome::Staged => max_len([longest]).map(Some),
        };
    }
    let carried = longest <= room as u64 && below_single_copy(longest);
    let copied = if carried { carry.read(team, e, start, room) } else { Ok(()) };
    team.publish(Flag::Done, e)?;
    copied.and_then(|()| if carried { Ok(None) } else { max_len([longest]).map(Some) })
}
