//! Bcast: the root publishes a half's worth of the buffer per round; the
//! others copy it out. A buffer that fits an inline region goes in one
//! epoch through the root's (`inline.rs`).

use ferrocoll_core::CollType::Bcast;
use ferrocoll_core::Result;
use ferrocoll_core::args;

use super::rounds::{piece_of, rounds};
use super::single_copy::{Offer, Outcome, single_copy};
use super::{Exec, SINGLE_COPY, STAGED, ShmPost};
use crate::base::{Alg, Run};
use crate::shm::cache::copy_out;
use crate::shm::epoch::Flag;
use crate::shm::one_epoch::OneEpoch;

pub(crate) const ALGS: &[Alg<ShmPost>] = &[
    Alg::new(
        Bcast,
        0,
        "staged",
        STAGED,
        Run::Bcast(|p, o| p.one_epoch_or(o.buf.len(), o, |o| OneEpoch::Bcast { buf: o.buf, root: o.root }, staged)),
    ),
    Alg::new(Bcast, 1, "cma", SINGLE_COPY, Run::Bcast(|p, o| p.run(move |t| cma(t, o)))),
];

/// The others read the root's buffer ([`single_copy`]); staged where they cannot.
async fn cma(team: Exec, o: args::Bcast) -> Result<()> {
    if team.reach.on() {
        let (give, take) =
            if team.rank == o.root { (Some(Offer::One(o.buf)), None) } else { (None, Some((o.root, o.buf))) };
        if single_copy(&team, Bcast, give, take.as_slice(), false, None).await? == Outcome::Done {
            return Ok(());
        }
    }
    staged(team, o).await
}

async fn staged(team: Exec, o: args::Bcast) -> Result<()> {
    if team.fits_inline(o.buf.len()) {
        return team.one_epoch(&OneEpoch::Bcast { buf: o.buf, root: o.root }).await;
    }
    let cap = team.pipeline_round();
    for k in 0..rounds(o.buf.len(), cap) {
        let e = team.begin().await?;
        let part = piece_of(o.buf, cap, k)?;
        if team.rank == o.root {
            team.copy_in(team.seg.data(team.rank, e)?.range(0, part.len())?, part)?;
            team.publish(Flag::Arrive, e)?;
        } else {
            team.wait(Flag::Arrive, &[o.root], e).await?;
            copy_out(&team, part, team.seg.data(o.root, e)?.range(0, part.len())?, o.buf.len())?;
        }
        team.publish(Flag::Done, e)?;
    }
    Ok(())
}
