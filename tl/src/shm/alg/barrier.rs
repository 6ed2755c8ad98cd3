//! Barrier, fanin and fanout: one epoch of flags, no data.
//!
//! Two barriers. `flags`: every rank waits for every rank's arrival — one
//! flag's trip, but every rank reads P control lines, and the rank that
//! arrives last leaves first. `fanin_fanout`: rank 0 waits for everyone,
//! then releases them — two trips, rank 0 reads P lines and the others one,
//! and rank 0 leaves first. Where ranks outnumber cores that order matters:
//! a rank that must notice the barrier's end waits for the scheduler to run
//! it, and with `flags` the rank late out is the one that arrived first —
//! the root of a bcast that follows (it waits for nobody, so it arrives at
//! the next barrier first), whose late start every other rank then waits
//! for. Open MPI's bcast after a barrier, on 4 ranks over 2 cores, measured
//! 0.08–0.11 µs after its linear or tree barrier and 1.3–2.0 µs after its
//! recursive-doubling or Bruck one (BENCHMARKS.md). `fanin_fanout` moves
//! that wait into the barrier itself, and into a symmetric collective that
//! follows it: it is the default where ranks outnumber cores, `flags`
//! elsewhere (see `mod.rs`).

use ferrocoll_core::CollType::{Barrier, Fanin, Fanout};
use ferrocoll_core::Result;

use super::{Exec, ShmPost};
use crate::base::{Alg, Run};
use crate::shm::epoch::Flag;
use crate::shm::one_epoch::OneEpoch;

const FLAGS: &str = "one epoch of flags in the control lines";

pub(crate) const ALGS: &[Alg<ShmPost>] = &[
    Alg::new(Barrier, 0, "flags", FLAGS, Run::Barrier(|p| p.one_epoch(OneEpoch::Barrier))),
    Alg::new(
        Barrier,
        1,
        "fanin_fanout",
        "rank 0 waits for every rank's arrival, then releases them: two flag trips, rank 0 leaves first",
        Run::Barrier(|p| p.run(fanin_fanout)),
    ),
    Alg::new(Fanin, 0, "flags", FLAGS, Run::Fanin(|p, root| p.run(move |t| fanin(t, root)))),
    Alg::new(Fanout, 0, "flags", FLAGS, Run::Fanout(|p, root| p.run(move |t| fanout(t, root)))),
];

/// Everyone arrives at rank 0, which releases everyone (its `reduced`
/// counter, which no other collective of the epoch uses, is the release).
async fn fanin_fanout(team: Exec) -> Result<()> {
    let e = team.begin().await?;
    team.publish(Flag::Arrive, e)?;
    if team.rank == 0 {
        team.wait(Flag::Arrive, &team.all, e).await?;
        team.publish(Flag::Reduced, e)?;
    } else {
        team.wait(Flag::Reduced, &[0], e).await?;
        // Rank 0 released this epoch once every rank had arrived at it,
        // so every rank had finished the one before.
        team.learn_all_finished(e.saturating_sub(1));
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shm::test_support::{poll_to_end, threads};

    /// The other ranks wait for rank 0 alone, whose release says that every
    /// rank arrived: they learn from it that every rank finished the epoch
    /// before, so their next `begin` reads no other rank's control line.
    #[test]
    fn fanin_fanout_tells_every_rank_that_all_finished_the_epoch_before() {
        let teams = threads("ff-learn", 3);
        for _ in 0..2 {
            std::thread::scope(|s| {
                for t in &teams {
                    let t = t.clone();
                    s.spawn(move || poll_to_end(fanin_fanout(t)).expect("barrier"));
                }
            });
        }
        // Epoch 2's release: ranks 1 and 2, which never waited for each
        // other, know that each finished epoch 1 (not yet epoch 2).
        for (me, other) in [(1, 2), (2, 1)] {
            assert!(teams[me].known_finished(other, 1), "rank {me} about rank {other}");
            assert!(!teams[me].known_finished(other, 2), "rank {me} about rank {other}");
        }
    }
}
