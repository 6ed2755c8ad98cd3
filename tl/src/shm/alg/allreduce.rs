//! Allreduce through the segment: `onestep` for small messages, `rsag`
//! (reduce-scatter + allgather of slices) for large ones; see [`reduction`](super::reduction).

use ferrocoll_core::CollType::Allreduce;
use ferrocoll_core::Result;
use ferrocoll_core::args;

use super::single_copy::Outcome;
use super::{Exec, ShmPost, reduction};
use crate::base::{Alg, Run};
use crate::shm::one_epoch::{OneEpoch, Reduction};

pub(crate) const ALGS: &[Alg<ShmPost>] = &[
    Alg::new(
        Allreduce,
        0,
        "onestep",
        "every rank publishes its input and reduces all of them: one synchronisation",
        Run::Allreduce(|p, o| {
            p.one_epoch_or(
                o.src.len(),
                o,
                |o| OneEpoch::Reduce {
                    src: o.src,
                    out: Some(o.dst),
                    reduction: Reduction::new(&o.reducer, o.src.len()),
                },
                onestep,
            )
        }),
    ),
    Alg::new(
        Allreduce,
        1,
        "rsag",
        "reduce-scatter + allgather of slices through the segment, chunked",
        Run::Allreduce(|p, o| p.run(move |t| rsag(t, o))),
    ),
    Alg::new(
        Allreduce,
        2,
        "cma",
        "every rank reads the others' inputs straight from their buffers by cross-memory attach and reduces them; rsag where the kernel refuses it",
        Run::Allreduce(|p, o| p.run(move |t| cma(t, o))),
    ),
];

async fn cma(team: Exec, o: args::Allreduce) -> Result<()> {
    if team.reach.on()
        && reduction::single_copy(&team, Allreduce, o.src, Some(o.dst), &o.reducer).await? == Outcome::Done
    {
        return Ok(());
    }
    rsag(team, o).await
}

async fn onestep(team: Exec, o: args::Allreduce) -> Result<()> {
    reduction::onestep(&team, o.src, Some(o.dst), &o.reducer, true).await
}

async fn rsag(team: Exec, o: args::Allreduce) -> Result<()> {
    reduction::rsag(&team, o.src, Some(o.dst), &o.reducer).await
}
