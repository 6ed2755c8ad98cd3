//! Barrier, fanin and fanout: one epoch of flags, no data.

use ferrocoll_core::CollType::{Barrier, Fanin, Fanout};
use ferrocoll_core::Result;

use super::{Exec, ShmPost};
use crate::base::{Alg, Run};
use crate::shm::epoch::Flag;

const FLAGS: &str = "one epoch of flags in the control lines";

pub(crate) const ALGS: &[Alg<ShmPost>] = &[
    Alg::new(Barrier, 0, "flags", FLAGS, Run::Barrier(|p| p.run(barrier))),
    Alg::new(Fanin, 0, "flags", FLAGS, Run::Fanin(|p, root| p.run(move |t| fanin(t, root)))),
    Alg::new(Fanout, 0, "flags", FLAGS, Run::Fanout(|p, root| p.run(move |t| fanout(t, root)))),
];

/// Everyone arrives, everyone waits for everyone.
async fn barrier(team: Exec) -> Result<()> {
    let e = team.begin().await?;
    team.publish(Flag::Arrive, e)?;
    team.wait(Flag::Arrive, &team.all, e).await?;
    team.publish(Flag::Done, e)
}

/// Everyone arrives; the root waits for everyone.
async fn fanin(team: Exec, root: usize) -> Result<()> {
    let e = team.begin().await?;
    team.publish(Flag::Arrive, e)?;
    if team.rank == root {
        team.wait(Flag::Arrive, &team.all, e).await?;
    }
    team.publish(Flag::Done, e)
}

/// The root arrives; everyone waits for it.
async fn fanout(team: Exec, root: usize) -> Result<()> {
    let e = team.begin().await?;
    if team.rank == root {
        team.publish(Flag::Arrive, e)?;
    } else {
        team.wait(Flag::Arrive, &[root], e).await?;
    }
    team.publish(Flag::Done, e)
}
