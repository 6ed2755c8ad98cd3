//! The size round of the v-variants: ranks publish what they will give each
//! rank and take from each rank, so that every rank walks the same number
//! of rounds (the longest block decides) and a count that two ranks
//! disagree on is an error on both sides, not a truncated copy.

use ferrocoll_core::{CollType, Error, Result};

use super::rounds::max_len;
use crate::shm::epoch::Flag;
use crate::shm::team::ShmTeam;

/// Bytes of one table entry.
const ENTRY: usize = 8;

fn write_table(team: &ShmTeam, e: u64, give: &[usize], take: &[usize]) -> Result<()> {
    let p = team.size;
    let half = team.seg.data(team.rank, e)?;
    let mut bytes = Vec::with_capacity(2 * p * ENTRY);
    for v in give.iter().chain(take) {
        bytes.extend_from_slice(&(*v as u64).to_le_bytes());
    }
    let table = half.range(0, bytes.len())?;
    // SAFETY: `table` is this rank's own half, which no one reads before our
    // `arrive` for this epoch (published after this write), and `bytes` is a
    // separate allocation of the same length.
    unsafe { table.as_mut_slice().copy_from_slice(&bytes) };
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

/// Publish `give[j]` / `take[j]` (bytes this rank gives rank j / takes from
/// rank j; 0 when none), check them against the ranks we deal with, and
/// return the longest block any rank gives.
pub(crate) async fn exchange_sizes(team: &ShmTeam, coll: CollType, give: &[usize], take: &[usize]) -> Result<usize> {
    let (p, me) = (team.size, team.rank);
    let e = team.begin().await?;
    write_table(team, e, give, take)?;
    team.publish(Flag::Arrive, e)?;
    team.wait(Flag::Arrive, &team.all, e).await?;
    let mut longest = 0u64;
    let mut mismatch = None;
    for r in 0..p {
        for j in 0..p {
            longest = longest.max(read_entry(team, r, e, j)?);
        }
        // What r gives me against what I take from r, and the other way round.
        let (r_gives, r_takes) = (read_entry(team, r, e, me)?, read_entry(team, r, e, p + me)?);
        let (i_take, i_give) = (take.get(r).copied().unwrap_or(0) as u64, give.get(r).copied().unwrap_or(0) as u64);
        if mismatch.is_none() && r_gives != i_take {
            mismatch = Some(format!("rank {r} gives {r_gives} bytes to rank {me}, which takes {i_take}"));
        }
        if mismatch.is_none() && r_takes != i_give {
            mismatch = Some(format!("rank {me} gives {i_give} bytes to rank {r}, which takes {r_takes}"));
        }
    }
    team.publish(Flag::Done, e)?;
    match mismatch {
        Some(m) => Err(Error::io(format!("{coll}: {m}: do the ranks' counts agree?"))),
        None => max_len([longest]),
    }
}
