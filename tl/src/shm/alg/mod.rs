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

/// What every staged algorithm says of itself.
pub(crate) const STAGED: &str = "through the team segment, a half of each rank's area per round";

static REGISTRY: LazyLock<Registry<Exec>> = LazyLock::new(|| {
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
pub(crate) fn registry() -> &'static Registry<Exec> {
    &REGISTRY
}

/// Default (collective, message range, algorithm) entries for a team of `size`.
///
/// Measured on a 2-core host against the p2p TL over the shared-memory
/// transport (single-copy CMA), which is faster for some ranges when each
/// rank has a core: the shm TL leaves those ranges to p2p (see BENCHMARKS.md).
/// Copying through the segment costs two copies where CMA costs one, so at
/// two ranks p2p wins mid-size and large alltoall, allgather, reduce_scatter
/// and allreduce; with more ranks than cores the segment's one-step
/// exchanges win nearly everywhere. `UCC_TL_SHM_TUNE` changes any of this.
pub(crate) fn defaults(config: &ShmConfig, size: usize) -> Vec<DefaultAlg> {
    const K: u64 = 1 << 10;
    const M: u64 = 1 << 20;
    const INF: u64 = u64::MAX;
    let two = size == 2;
    let t = config.rsag_threshold as u64;
    let entry = |coll, lo, hi, alg| DefaultAlg { coll, range: MsgRange::new(lo, hi), alg };
    let mut d = vec![entry(Reduce, 0, t, 0), entry(Reduce, t, INF, 1), entry(Allreduce, 0, t, 0)];
    // The ranges of each collective the segment serves (the rest goes to p2p).
    let ranges: &[(CollType, u64, u64)] = if two {
        &[
            (Allreduce, 0, 512 * K),
            (Allreduce, 32 * M, INF),
            (Alltoall, 0, 8 * K),
            (Allgather, 0, M),
            (Allgather, 32 * M, INF),
            (ReduceScatter, 0, 16 * K),
            (ReduceScatter, 32 * M, INF),
        ]
    } else {
        &[(Allreduce, 0, INF), (Alltoall, 0, 2 * M), (Allgather, 0, INF), (ReduceScatter, 0, INF)]
    };
    for &(coll, lo, hi) in ranges {
        let lo = if coll == Allreduce { lo.max(t) } else { lo };
        if lo < hi {
            d.push(entry(coll, lo, hi, if coll == Allreduce { 1 } else { 0 }));
        }
    }
    for a in registry()
        .infos()
        .iter()
        .filter(|a| !matches!(a.coll, Allreduce | Reduce | Alltoall | Allgather | ReduceScatter))
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
        let config = ShmConfig { data_size: 1 << 18, rsag_threshold: 16 << 10 };
        for size in [2, 3, 8] {
            for d in defaults(&config, size) {
                assert!(registry().find(d.coll, d.alg).is_some(), "{d:?}");
            }
        }
    }
}
