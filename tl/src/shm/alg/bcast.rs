//! Bcast: the root publishes a half's worth of the buffer per round; the
//! others copy it out. A buffer that fits an inline region goes in one
//! epoch through the root's (`inline.rs`).

use ferrocoll_core::CollType::Bcast;
use ferrocoll_core::Result;
use ferrocoll_core::args;

use super::rounds::{piece_of, rounds};
use super::{Exec, STAGED, ShmPost};
use crate::base::{Alg, Run};
use crate::shm::cache::copy_out;
use crate::shm::epoch::Flag;
use crate::shm::one_epoch::OneEpoch;

pub(crate) const ALGS: &[Alg<ShmPost>] = &[Alg::new(
    Bcast,
    0,
    "staged",
    STAGED,
    Run::Bcast(|p, o| p.one_epoch_or(o.buf.len(), o, |o| OneEpoch::Bcast { buf: o.buf, root: o.root }, staged)),
)];

async fn staged(team: Exec, o: args::Bcast) -> Result<()> {
    if team.fits_inline(o.buf.len()) {
        return team.one_epoch(&OneEpoch::Bcast { buf: o.buf, root: o.root }).await;
    }
    let cap = team.pipeline_round();
    for k in 0..rounds(o.buf.len(), cap) {
        let e = team.begin().await?;
        let part = piece_of(o.buf, cap, k)?;
        if team.rank == o.root {
            team.copy(team.seg.data(team.rank, e)?.range(0, part.len())?, part)?;
            team.publish(Flag::Arrive, e)?;
        } else {
            team.wait(Flag::Arrive, &[o.root], e).await?;
            copy_out(&team, part, team.seg.data(o.root, e)?.range(0, part.len())?, o.buf.len())?;
        }
        team.publish(Flag::Done, e)?;
    }
    Ok(())
}
