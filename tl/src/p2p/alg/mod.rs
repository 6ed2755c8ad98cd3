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
use ferrocoll_core::topo::Layout;

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

/// The default selection of every collective on a team of one node.
pub(crate) fn defaults() -> Vec<DefaultAlg> {
    defaults_of(&DEFAULTS)
}

/// The default selection of every collective on a team laid out as
/// `layout`. On a team spread over several nodes of which some hold
/// several ranks, bcast and reduce from 32 KiB take the hierarchy: the
/// vector then crosses between nodes once per node instead of once per
/// rank (sag/srg_knomial move about twice the vector per rank, over the
/// slow links too). Measured on 8 ranks over 4 emulated hosts under 2
/// switches (BENCHMARKS.md "Flat and hierarchical"): hier/flat 0.15–0.35
/// for bcast and 0.34–0.59 for reduce from 32 KiB to 2 MiB, with and
/// without link emulation; below 32 KiB the flat knomial trees won or tied.
/// The other hierarchical algorithms lost or tied there and stay by name
/// only (`UCC_TL_P2P_TUNE=<coll>:@hier`); `ferrocoll-tune` re-measures.
///
/// On two ranks bcast takes `knomial` at every size: `sag_knomial`'s
/// scatter and allgather move the same bytes to the one other rank in two
/// steps instead of one (shared memory, 2 ranks, BENCHMARKS.md tenth
/// round: knomial/sag_knomial 64 KiB 5.0/14.0 µs, 1 MiB 74/97, 16 MiB
/// 1 537/1 664).
pub(crate) fn defaults_for(layout: &Layout) -> Vec<DefaultAlg> {
    if layout.size() == 2 {
        let table = DEFAULTS.map(|(coll, d)| match coll {
            Bcast => (coll, bcast::PAIR_DEFAULTS),
            _ => (coll, d),
        });
        return defaults_of(&table);
    }
    let nodes = layout.nodes();
    if nodes.len() < 2 || nodes.iter().all(|n| n.len() < 2) {
        return defaults();
    }
    let table = DEFAULTS.map(|(coll, d)| match coll {
        Bcast => (coll, bcast::HIER_DEFAULTS),
        Reduce => (coll, reduce::HIER_DEFAULTS),
        _ => (coll, d),
    });
    defaults_of(&table)
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

    /// The algorithm the defaults pick for `coll` at `bytes`, by name.
    fn picked(defaults: &[DefaultAlg], coll: CollType, bytes: u64) -> &'static str {
        let d = defaults.iter().find(|d| d.coll == coll && d.range.contains(bytes)).expect("a default");
        registry().find(coll, d.alg).expect("an algorithm").info.name
    }

    #[test]
    fn teams_over_several_nodes_of_several_ranks_take_the_hierarchy_for_large_bcast_and_reduce() {
        let places = |hosts: &[&str]| Layout::new(&hosts.iter().map(|h| (*h, "s")).collect::<Vec<_>>());
        let spread = defaults_for(&places(&["a", "a", "b", "b"]));
        for coll in [Bcast, Reduce] {
            assert_eq!(picked(&spread, coll, 1 << 20), "hier", "{coll}");
            assert_eq!(picked(&spread, coll, 1 << 10), "knomial", "{coll}");
        }
        assert_ne!(picked(&spread, Allreduce, 1 << 20), "hier", "allreduce's hierarchy is by name only");
        // Two ranks: one message, whatever the size.
        for layout in [places(&["a", "a"]), places(&["a", "b"])] {
            assert_eq!(picked(&defaults_for(&layout), Bcast, 16 << 20), "knomial", "{layout:?}");
        }
        // One node, or one rank per node: nothing to gain, the flat defaults.
        for layout in [places(&["a", "a", "a"]), places(&["a", "b", "c"])] {
            for coll in [Bcast, Reduce] {
                assert_ne!(picked(&defaults_for(&layout), coll, 1 << 20), "hier", "{coll} on {layout:?}");
            }
        }
    }
}
