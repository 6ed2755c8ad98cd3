//! Barrier, fanin and fanout: one epoch of flags, no data.

use std::sync::Arc;

use ferrocoll_core::args::CollInit;
use ferrocoll_core::{CollType, Result};

use crate::shm::epoch::Flag;
use crate::shm::team::ShmTeam;

pub(crate) async fn flags(team: Arc<ShmTeam>, args: Arc<CollInit>) -> Result<()> {
    let e = team.begin().await?;
    let root = args.root;
    match args.coll {
        CollType::Fanout => {
            if team.rank == root {
                team.publish(Flag::Arrive, e)?;
            } else {
                team.wait(Flag::Arrive, &[root], e).await?;
            }
        }
        CollType::Fanin => {
            team.publish(Flag::Arrive, e)?;
            if team.rank == root {
                team.wait(Flag::Arrive, &team.all, e).await?;
            }
        }
        _ => {
            team.publish(Flag::Arrive, e)?;
            team.wait(Flag::Arrive, &team.all, e).await?;
        }
    }
    team.publish(Flag::Done, e)
}
