//! Bcast: the root publishes a half's worth of the buffer per round; the
//! others copy it out.

use std::sync::Arc;

use ferrocoll_core::args::CollInit;
use ferrocoll_core::{Error, Result};

use super::common::{piece_of, rounds};
use crate::shm::epoch::Flag;
use crate::shm::team::ShmTeam;

pub(crate) async fn staged(team: Arc<ShmTeam>, args: Arc<CollInit>) -> Result<()> {
    let buf = args.src.as_ref().ok_or_else(|| Error::internal("bcast without a buffer"))?.mem;
    let cap = team.seg.layout().data;
    for k in 0..rounds(buf.len(), cap) {
        let e = team.begin().await?;
        let part = piece_of(buf, cap, k)?;
        if team.rank == args.root {
            team.copy(team.seg.data(team.rank, e)?.range(0, part.len())?, part)?;
            team.publish(Flag::Arrive, e)?;
        } else {
            team.wait(Flag::Arrive, &[args.root], e).await?;
            team.copy(part, team.seg.data(args.root, e)?.range(0, part.len())?)?;
        }
        team.publish(Flag::Done, e)?;
    }
    Ok(())
}
