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

use std::sync::{Arc, LazyLock};

use ferrocoll_core::CollType::{self, *};
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
/// The segment serves every size of every collective but alltoall from
/// 2 MiB up with more than two ranks, which goes to p2p. At two ranks the
/// p2p TL over the shared-memory transport (single-copy CMA) was faster in
/// mid sizes on the 2-core Intel VM that measured the first map (by up to
/// ~1.25×, e.g. allreduce 256 KiB), and slower by 1.4–2.3× on a 2-core AMD
/// EPYC VM (allreduce, allgather 512 KiB–8 MiB, reduce_scatter 64 KiB–16 MiB,
/// alltoall 16 KiB–16 MiB; `ferrocoll-tune`, BENCHMARKS.md): the segment is
/// the choice that is never far off on either. `ferrocoll-tune` measures a
/// machine's own crossovers; `UCC_TL_SHM_TUNE` changes any of this.
pub(crate) fn defaults(config: &ShmConfig, size: usize, oversubscribed: bool) -> Vec<DefaultAlg> {
    const M: u64 = 1 << 20;
    const INF: u64 = u64::MAX;
    let t = config.rsag_threshold as u64;
    let entry = |coll, lo, hi, alg| DefaultAlg { coll, range: MsgRange::new(lo, hi), alg };
    let mut d = vec![entry(Reduce, 0, t, 0), entry(Reduce, t, INF, 1), entry(Allreduce, 0, t, 0)];
    // The ranges of each collective the segment serves (the rest goes to p2p).
    let alltoall_end = if size == 2 { INF } else { 2 * M };
    let ranges: &[(CollType, u64, u64)] =
        &[(Allreduce, 0, INF), (Alltoall, 0, alltoall_end), (Allgather, 0, INF), (ReduceScatter, 0, INF)];
    for &(coll, lo, hi) in ranges {
        let lo = if coll == Allreduce { lo.max(t) } else { lo };
        if lo < hi {
            d.push(entry(coll, lo, hi, if coll == Allreduce { 1 } else { 0 }));
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
    for a in registry()
        .infos()
        .iter()
        .filter(|a| !matches!(a.coll, Allreduce | Reduce | Alltoall | Allgather | ReduceScatter | Barrier))
    {
        d.push(entry(a.coll, 0, INF, a.id));
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
