//! The p2p algorithms, one folder per collective and one file per algorithm.
//!
//! Each collective's `mod.rs` lists its algorithms (`ALGS`: id, name, what
//! it is good for, how it runs) and its default selection by message size
//! (`DEFAULTS`). Ids and names are what `UCC_TL_P2P_TUNE` accepts after `@`.
//! An algorithm is an `async fn(Comm, Operands)`: its collective's
//! validated operands and the team's tagged send/receive.

use std::sync::LazyLock;

use ferrocoll_core::CollType::{self, *};
use ferrocoll_core::score::{AlgId, MsgRange};

use super::Comm;
use crate::base::{DefaultAlg, Registry, defaults_of};

pub(crate) mod allgather;
pub(crate) mod allgatherv;
pub(crate) mod allreduce;
pub(crate) mod alltoall;
pub(crate) mod alltoallv;
pub(crate) mod barrier;
pub(crate) mod bcast;
pub(crate) mod fanin;
pub(crate) mod fanout;
pub(crate) mod gather;
pub(crate) mod gatherv;
pub(crate) mod reduce;
pub(crate) mod reduce_scatter;
pub(crate) mod reduce_scatterv;
pub(crate) mod scatter;
pub(crate) mod scatterv;

/// `[lo, hi)` in bytes, for default tables.
pub(crate) const fn range(lo: u64, hi: u64) -> MsgRange {
    MsgRange::new(lo, hi)
}

/// No upper bound.
pub(crate) const INF: u64 = u64::MAX;

/// Each collective's default algorithm per message range.
const DEFAULTS: [(CollType, &[(MsgRange, AlgId)]); 16] = [
    (Allgather, allgather::DEFAULTS),
    (Allgatherv, allgatherv::DEFAULTS),
    (Allreduce, allreduce::DEFAULTS),
    (Alltoall, alltoall::DEFAULTS),
    (Alltoallv, alltoallv::DEFAULTS),
    (Barrier, barrier::DEFAULTS),
    (Bcast, bcast::DEFAULTS),
    (Fanin, fanin::DEFAULTS),
    (Fanout, fanout::DEFAULTS),
    (Gather, gather::DEFAULTS),
    (Gatherv, gatherv::DEFAULTS),
    (Reduce, reduce::DEFAULTS),
    (ReduceScatter, reduce_scatter::DEFAULTS),
    (ReduceScatterv, reduce_scatterv::DEFAULTS),
    (Scatter, scatter::DEFAULTS),
    (Scatterv, scatterv::DEFAULTS),
];

static REGISTRY: LazyLock<Registry<Comm>> = LazyLock::new(|| {
    Registry::new(&[
        allgather::ALGS,
        allgatherv::ALGS,
        allreduce::ALGS,
        alltoall::ALGS,
        alltoallv::ALGS,
        barrier::ALGS,
        bcast::ALGS,
        fanin::ALGS,
        fanout::ALGS,
        gather::ALGS,
        gatherv::ALGS,
        reduce::ALGS,
        reduce_scatter::ALGS,
        reduce_scatterv::ALGS,
        scatter::ALGS,
        scatterv::ALGS,
    ])
});

/// Every algorithm.
pub(crate) fn registry() -> &'static Registry<Comm> {
    &REGISTRY
}

/// The default selection of every collective.
pub(crate) fn defaults() -> Vec<DefaultAlg> {
    defaults_of(&DEFAULTS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_consistent() {
        registry().check().unwrap();
        for (coll, ranges) in DEFAULTS {
            assert!(registry().find(coll, 0).is_some(), "{coll} has no algorithm");
            // Defaults cover every size exactly once, with existing algorithms.
            let mut at = 0;
            for (r, alg) in ranges {
                assert_eq!(r.start, at, "{coll} defaults have a gap");
                assert!(registry().find(coll, *alg).is_some());
                at = r.end;
            }
            assert_eq!(at, INF, "{coll} defaults stop short");
        }
    }
}
