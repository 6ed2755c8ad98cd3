//! Allreduce through the segment: `onestep` for small messages, `rsag`
//! (reduce-scatter + allgather of slices) for large ones; see [`reduction`](super::reduction).

use ferrocoll_core::CollType::Allreduce;
use ferrocoll_core::Result;
use ferrocoll_core::args;

use super::{Exec, ShmPost, reduction};
use crate::base::{Alg, Run};
use crate::shm::one_epoch::OneEpoch;

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
                |o| OneEpoch::Reduce { src: o.src, out: Some(o.dst), reducer: o.reducer },
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
];

async fn onestep(team: Exec, o: args::Allreduce) -> Result<()> {
    reduction::onestep(&team, o.src, Some(o.dst), &o.reducer).await
}

async fn rsag(team: Exec, o: args::Allreduce) -> Result<()> {
    reduction::rsag(&team, o.src, Some(o.dst), &o.reducer).await
}
