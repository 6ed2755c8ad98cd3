//! Allgather(v): every rank publishes its block piece by piece and copies
//! everyone else's into place ([`gather_rounds`]); every rank knows every
//! block's size, so no size round is needed.

use ferrocoll_core::CollType::{Allgather, Allgatherv};
use ferrocoll_core::Result;
use ferrocoll_core::args;

use super::exchange::gather_rounds;
use super::{Exec, STAGED, ShmPost};
use crate::base::{Alg, Run};

pub(crate) const ALGS: &[Alg<ShmPost>] = &[
    Alg::new(Allgather, 0, "staged", STAGED, Run::Allgather(|p, o| p.run(move |t| staged(t, o)))),
    Alg::new(Allgatherv, 0, "staged", STAGED, Run::Allgather(|p, o| p.run(move |t| staged(t, o)))),
];

async fn staged(team: Exec, o: args::Allgather) -> Result<()> {
    let longest = (0..team.size).map(|r| o.dst.blocks.bytes(r)).max().unwrap_or(0);
    gather_rounds(&team, o.src, Some(&o.dst), longest).await
}
