//! The p2p algorithms, one folder per collective and one file per algorithm.
//!
//! Each collective's `mod.rs` lists its algorithms ([`Alg`]: id, name, what
//! it is good for, the function that runs it, and a check that refuses
//! arguments it cannot handle) and its default selection by message size.
//! Ids and names are what `UCC_TL_P2P_TUNE` accepts after `@`.

use std::sync::{Arc, LazyLock};

use ferrocoll_core::args::CollInit;
use ferrocoll_core::backend::AlgInfo;
use ferrocoll_core::engine::BoxFuture;
use ferrocoll_core::score::{AlgId, MsgRange};
use ferrocoll_core::{CollType, Result};

use super::Comm;

pub(crate) mod allgather;
pub(crate) mod allgatherv;
pub(crate) mod allreduce;
pub(crate) mod alltoall;
pub(crate) mod alltoallv;
pub(crate) mod barrier;
pub(crate) mod bcast;
pub(crate) mod blocks;
pub(crate) mod fanin;
pub(crate) mod fanout;
pub(crate) mod gather;
pub(crate) mod gatherv;
pub(crate) mod local;
pub(crate) mod reduce;
pub(crate) mod reduce_scatter;
pub(crate) mod reduce_scatterv;
pub(crate) mod scatter;
pub(crate) mod scatterv;

/// Runs one execution of an algorithm.
pub(crate) type RunFn = fn(Comm, Arc<CollInit>) -> BoxFuture<'static, Result<()>>;

/// Refuses (with `NotSupported`) arguments an algorithm cannot handle.
pub(crate) type CheckFn = fn(&CollInit) -> Result<()>;

/// One algorithm.
pub(crate) struct Alg {
    pub info: AlgInfo,
    pub run: RunFn,
    pub check: CheckFn,
}

/// An algorithm that handles every valid argument set.
pub(crate) fn supports_all(_: &CollInit) -> Result<()> {
    Ok(())
}

/// Default selection for one collective: the algorithm per message-size range.
pub(crate) struct Defaults {
    pub coll: CollType,
    pub ranges: &'static [(MsgRange, AlgId)],
}

/// `[lo, hi)` in bytes, for default tables.
pub(crate) const fn range(lo: u64, hi: u64) -> MsgRange {
    MsgRange::new(lo, hi)
}

/// No upper bound.
pub(crate) const INF: u64 = u64::MAX;

fn tables() -> [(&'static [Alg], &'static Defaults); 16] {
    [
        (allgather::ALGS, &allgather::DEFAULTS),
        (allgatherv::ALGS, &allgatherv::DEFAULTS),
        (allreduce::ALGS, &allreduce::DEFAULTS),
        (alltoall::ALGS, &alltoall::DEFAULTS),
        (alltoallv::ALGS, &alltoallv::DEFAULTS),
        (barrier::ALGS, &barrier::DEFAULTS),
        (bcast::ALGS, &bcast::DEFAULTS),
        (fanin::ALGS, &fanin::DEFAULTS),
        (fanout::ALGS, &fanout::DEFAULTS),
        (gather::ALGS, &gather::DEFAULTS),
        (gatherv::ALGS, &gatherv::DEFAULTS),
        (reduce::ALGS, &reduce::DEFAULTS),
        (reduce_scatter::ALGS, &reduce_scatter::DEFAULTS),
        (reduce_scatterv::ALGS, &reduce_scatterv::DEFAULTS),
        (scatter::ALGS, &scatter::DEFAULTS),
        (scatterv::ALGS, &scatterv::DEFAULTS),
    ]
}

static INFOS: LazyLock<Vec<AlgInfo>> =
    LazyLock::new(|| tables().iter().flat_map(|(algs, _)| algs.iter().map(|a| a.info)).collect());

/// Every algorithm's description.
pub(crate) fn infos() -> &'static [AlgInfo] {
    &INFOS
}

/// The algorithm `id` of `coll`.
pub(crate) fn find(coll: CollType, id: AlgId) -> Option<&'static Alg> {
    tables().into_iter().flat_map(|(algs, _)| algs.iter()).find(|a| a.info.coll == coll && a.info.id == id)
}

/// Every collective's default selection.
pub(crate) fn defaults() -> impl Iterator<Item = &'static Defaults> {
    tables().into_iter().map(|(_, d)| d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_consistent() {
        for (algs, defaults) in tables() {
            assert!(!algs.is_empty(), "{} has no algorithm", defaults.coll);
            for (i, a) in algs.iter().enumerate() {
                assert_eq!(a.info.coll, defaults.coll);
                assert_eq!(usize::from(a.info.id), i, "{}/{} id", a.info.coll, a.info.name);
            }
            // Defaults cover every size exactly once, with existing algorithms.
            let mut at = 0;
            for (r, alg) in defaults.ranges {
                assert_eq!(r.start, at, "{} defaults have a gap", defaults.coll);
                assert!(find(defaults.coll, *alg).is_some());
                at = r.end;
            }
            assert_eq!(at, INF, "{} defaults stop short", defaults.coll);
        }
    }
}
