//! Reduce through the segment: `onestep` (the root reduces every input)
//! for small messages, `rsag` (every rank reduces a slice, the root gathers
//! the slices) for large ones; see [`reduction`](super::reduction).

use ferrocoll_core::CollType::Reduce;
use ferrocoll_core::Result;
use ferrocoll_core::args;

use super::single_copy::Outcome;
use super::{Exec, ShmPost, reduction};
use crate::base::{Alg, Run};
use crate::shm::one_epoch::{OneEpoch, Reduction};

pub(crate) const ALGS: &[Alg<ShmPost>] = &[
    Alg::new(
        Reduce,
        0,
        "onestep",
        "every rank publishes its input; the root reduces all of them",
        Run::Reduce(|p, o| {
            p.one_epoch_or(
                o.src.len(),
                o,
                |o| OneEpoch::Reduce { src: o.src, out: o.dst, reduction: Reduction::new(&o.reducer, o.src.len()) },
                onestep,
            )
        }),
    ),
    Alg::new(
        Reduce,
        1,
        "rsag",
        "every rank reduces a slice; the root gathers the slices",
        Run::Reduce(|p, o| p.run(move |t| rsag(t, o))),
    ),
    Alg::new(
        Reduce,
        2,
        "cma",
        "the root reads the others' inputs straight from their buffers by cross-memory attach and reduces them; rsag where the kernel refuses it",
        Run::Reduce(|p, o| p.run(move |t| cma(t, o))),
    ),
];

async fn cma(team: Exec, o: args::Reduce) -> Result<()> {
    if team.reach.on() && reduction::single_copy(&team, Reduce, o.src, o.dst, &o.reducer).await? == Outcome::Done {
        return Ok(());
    }
    rsag(team, o).await
}

async fn onestep(team: Exec, o: args::Reduce) -> Result<()> {
    reduction::onestep(&team, o.src, o.dst, &o.reducer, team.rank != o.root).await
}

async fn rsag(team: Exec, o: args::Reduce) -> Result<()> {
    reduction::rsag(&team, o.src, o.dst, &o.reducer).await
}
