//! The shm algorithms — one file per collective, its v-variant beside it
//! when they share the code — and their default selection.
//!
//! Every algorithm walks the same epochs on every rank (see `epoch.rs`):
//! small messages in one round, large ones in rounds of half a rank's area
//! (or a P-th of it, a slot, when every rank gives every rank something).
//! The engines the collectives share: [`reduction`] (onestep and
//! reduce-scatter + allgather of slices), [`exchange`] (publish a block or
//! a slot per rank, take what is yours), [`meta`] (agreeing on the sizes of
//! v-variants) and [`rounds`] (cutting data into rounds).

pub(crate) mod allgather;
pub(crate) mod allreduce;
pub(crate) mod alltoall;
pub(crate) mod barrier;
pub(crate) mod bcast;
pub(crate) mod exchange;
pub(crate) mod gather;
pub(crate) mod meta;
pub(crate) mod reduce;
pub(crate) mod reduce_scatter;
pub(crate) mod reduction;
pub(crate) mod rounds;
pub(crate) mod scatter;
pub(crate) mod single_copy;

use std::sync::{Arc, LazyLock};

use ferrocoll_core::CollType::*;
use ferrocoll_core::score::MsgRange;

use super::ShmConfig;
use super::team::ShmTeam;
use crate::base::{DefaultAlg, Registry};

/// What a shm algorithm runs with: the rank's view of the team.
pub(crate) type Exec = Arc<ShmTeam>;

/// What the registry's functions get: one post of a task, whose
/// [`ShmPost::run`] wraps the algorithm in the post's turn on the team.
pub(crate) use super::team::ShmPost;

/// What every staged algorithm says of itself.
pub(crate) const STAGED: &str = "through the team segment, a pipeline round (UCC_TL_SHM_PIPELINE_SIZE) at a time";

/// What every single-copy algorithm says of itself.
pub(crate) const SINGLE_COPY: &str = "one copy, straight from the giving rank's buffer by cross-memory attach; through the segment where the kernel refuses it";

static REGISTRY: LazyLock<Registry<ShmPost>> = LazyLock::new(|| {
    Registry::new(&[
        allreduce::ALGS,
        reduce::ALGS,
        bcast::ALGS,
        allgather::ALGS,
        gather::ALGS,
        scatter::ALGS,
        alltoall::ALGS,
        reduce_scatter::ALGS,
        barrier::ALGS,
    ])
});

/// Every algorithm.
pub(crate) fn registry() -> &'static Registry<ShmPost> {
    &REGISTRY
}

/// Default (collective, message range, algorithm) entries for a team of
/// `size`, on a host the team sees `oversubscribed` or not.
///
/// The segment serves every size of every collective. Reductions stage
/// through it (`onestep`, then `rsag` from `UCC_TL_SHM_RSAG_THRESHOLD`).
/// The copying collectives (bcast, allgather(v), gather(v), scatter(v),
/// alltoall(v)) stage small messages through it and, from
/// `UCC_TL_SHM_CMA_THRESHOLD`, copy once straight from the giver's buffer
/// (`single_copy.rs`: two copies become one, which is what the p2p TL's
/// rendezvous over CMA gained in the mid sizes before; BENCHMARKS.md, the
/// tenth round). The v-variants' message size is 0 to the selection
/// (UCC's), so `gatherv`, `scatterv` and `alltoallv` make that choice
/// themselves after their size round. `ferrocoll-tune` measures a
/// machine's own crossovers; `UCC_TL_SHM_TUNE` changes any of this.
pub(crate) fn defaults(config: &ShmConfig, _size: usize, oversubscribed: bool) -> Vec<DefaultAlg> {
    const INF: u64 = u64::MAX;
    let t = config.rsag_threshold as u64;
    let cma = config.cma_threshold as u64;
    let entry = |coll, lo, hi, alg| DefaultAlg { coll, range: MsgRange::new(lo, hi), alg };
    let mut d = vec![
        entry(Reduce, 0, t, 0),
        entry(Reduce, t, INF, 1),
        entry(Allreduce, 0, t, 0),
        entry(Allreduce, t, INF, 1),
        entry(ReduceScatter, 0, INF, 0),
        entry(ReduceScatterv, 0, INF, 0),
        entry(Gatherv, 0, INF, 0),
        entry(Scatterv, 0, INF, 0),
        entry(Alltoallv, 0, INF, 0),
    ];
    // Staged below the single-copy threshold, single copy from it.
    for coll in [Bcast, Allgather, Allgatherv, Gather, Scatter, Alltoall] {
        if cma > 0 {
            d.push(entry(coll, 0, cma, 0));
        }
        if cma < INF {
            d.push(entry(coll, cma, INF, 1));
        }
    }
    // Barrier: `flags` (one flag's trip) where every rank has a core;
    // `fanin_fanout` (rank 0 leaves first) where ranks outnumber cores.
    // There a rank that waits yields its core, and whoever must notice the
    // barrier's end waits for the scheduler to run it: after `flags` that
    // is the rank that arrived first — the root of a bcast that follows,
    // whose late start every other rank then waits for. On 4 ranks over 2
    // cores (2 rounds, BENCHMARKS.md) bcast of 32 B–64 KiB took 0.64–3.9 µs
    // after `fanin_fanout` against 1.6–4.7 µs after `flags` (Open MPI
    // 0.23–12 µs), allreduce, alltoall and reduce_scatter the same, reduce
    // and allgather below 1 KiB 5–25 % longer, and the barrier itself 5.1
    // against 3.4 µs: the bcast's gain is the largest by far. The choice
    // is the team's (its first rank's view, through the segment), so every
    // member makes it.
    d.push(entry(Barrier, 0, INF, if oversubscribed { 1 } else { 0 }));
    // Every other collective (fanin, fanout): its one algorithm.
    for a in registry().infos() {
        if !d.iter().any(|x| x.coll == a.coll) {
            d.push(entry(a.coll, 0, INF, a.id));
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_consistent_and_defaults_name_existing_algorithms() {
        registry().check().unwrap();
        let config = ShmConfig {
            data_size: 1 << 19,
            pipeline_size: 1 << 18,
            rsag_threshold: 16 << 10,
            stream_threshold: 32 << 20,
            cma_threshold: 16 << 10,
        };
        for size in [2, 3, 8] {
            for oversubscribed in [false, true] {
                for d in defaults(&config, size, oversubscribed) {
                    assert!(registry().find(d.coll, d.alg).is_some(), "{d:?}");
                }
            }
        }
        let barrier = |oversubscribed| {
            let d = defaults(&config, 4, oversubscribed);
            let b = d.iter().find(|d| d.coll == Barrier).map(|d| d.alg);
            b.and_then(|alg| registry().find(Barrier, alg)).map(|a| a.info.name)
        };
        assert_eq!(barrier(false), Some("flags"));
        assert_eq!(barrier(true), Some("fanin_fanout"), "rank 0 leaves first where ranks outnumber cores");
    }
}
