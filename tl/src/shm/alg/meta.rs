//! A meta round: ranks publish a size, so that every rank walks the same
//! number of rounds even when only some ranks know the sizes (v-variants).

use ferrocoll_core::Result;

use super::common::max_len;
use crate::shm::epoch::Flag;
use crate::shm::team::ShmTeam;

/// Every rank publishes `mine`; returns the largest value published by `from`.
pub(crate) async fn agree_max(team: &ShmTeam, mine: usize, from: &[usize]) -> Result<usize> {
    let e = team.begin().await?;
    team.set_meta(0, mine as u64)?;
    team.publish(Flag::Arrive, e)?;
    team.wait(Flag::Arrive, from, e).await?;
    let m = max_len(from.iter().map(|&r| team.meta(r, 0)).collect::<Result<Vec<_>>>()?);
    team.publish(Flag::Done, e)?;
    m
}
