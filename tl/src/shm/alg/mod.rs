//! The shm algorithms and their default selection.

pub(crate) mod allreduce;
pub(crate) mod bcast;
pub(crate) mod common;
pub(crate) mod gather;
pub(crate) mod meta;
pub(crate) mod reduce_scatter;
pub(crate) mod scatter;
pub(crate) mod sync;

use std::sync::LazyLock;

use ferrocoll_core::CollType::{self, *};
use ferrocoll_core::backend::AlgInfo;
use ferrocoll_core::score::{AlgId, MsgRange};

use super::ShmConfig;
use super::team::RunFn;

struct Entry {
    info: AlgInfo,
    run: RunFn,
}

const fn info(coll: CollType, id: AlgId, name: &'static str, description: &'static str) -> AlgInfo {
    AlgInfo { coll, id, name, description }
}

const STAGED: &str = "through the team segment, a half of each rank's area per round";

static TABLE: LazyLock<Vec<Entry>> = LazyLock::new(|| {
    let mut t = vec![
        Entry {
            info: info(
                Allreduce,
                0,
                "onestep",
                "every rank publishes its input and reduces all of them: one synchronisation",
            ),
            run: |t, a| Box::pin(allreduce::onestep(t, a)),
        },
        Entry {
            info: info(Allreduce, 1, "rsag", "reduce-scatter + allgather of slices through the segment, chunked"),
            run: |t, a| Box::pin(allreduce::rsag(t, a)),
        },
        Entry {
            info: info(Reduce, 0, "onestep", "every rank publishes its input; the root reduces all of them"),
            run: |t, a| Box::pin(allreduce::onestep(t, a)),
        },
        Entry {
            info: info(Reduce, 1, "rsag", "every rank reduces a slice; the root gathers the slices"),
            run: |t, a| Box::pin(allreduce::rsag(t, a)),
        },
        Entry { info: info(Bcast, 0, "staged", STAGED), run: |t, a| Box::pin(bcast::staged(t, a)) },
        Entry { info: info(ReduceScatter, 0, "staged", STAGED), run: |t, a| Box::pin(reduce_scatter::staged(t, a)) },
        Entry { info: info(ReduceScatterv, 0, "staged", STAGED), run: |t, a| Box::pin(reduce_scatter::staged(t, a)) },
    ];
    for coll in [Allgather, Allgatherv, Gather, Gatherv] {
        t.push(Entry { info: info(coll, 0, "staged", STAGED), run: |t, a| Box::pin(gather::staged(t, a)) });
    }
    for coll in [Scatter, Scatterv, Alltoall, Alltoallv] {
        t.push(Entry { info: info(coll, 0, "staged", STAGED), run: |t, a| Box::pin(scatter::staged(t, a)) });
    }
    for coll in [Barrier, Fanin, Fanout] {
        t.push(Entry {
            info: info(coll, 0, "flags", "one epoch of flags in the control lines"),
            run: |t, a| Box::pin(sync::flags(t, a)),
        });
    }
    t
});

static INFOS: LazyLock<Vec<AlgInfo>> = LazyLock::new(|| TABLE.iter().map(|e| e.info).collect());

/// Every algorithm.
pub(crate) fn infos() -> &'static [AlgInfo] {
    &INFOS
}

/// The function of algorithm `id` of `coll`.
pub(crate) fn find(coll: CollType, id: AlgId) -> Option<RunFn> {
    TABLE.iter().find(|e| e.info.coll == coll && e.info.id == id).map(|e| e.run)
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
pub(crate) fn defaults(config: &ShmConfig, size: usize) -> Vec<(CollType, MsgRange, AlgId)> {
    const K: u64 = 1 << 10;
    const M: u64 = 1 << 20;
    const INF: u64 = u64::MAX;
    let two = size == 2;
    let t = config.rsag_threshold as u64;
    let mut d =
        vec![(Reduce, MsgRange::new(0, t), 0), (Reduce, MsgRange::new(t, INF), 1), (Allreduce, MsgRange::new(0, t), 0)];
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
            d.push((coll, MsgRange::new(lo, hi), if coll == Allreduce { 1 } else { 0 }));
        }
    }
    for e in TABLE.iter().filter(|e| !matches!(e.info.coll, Allreduce | Reduce | Alltoall | Allgather | ReduceScatter))
    {
        d.push((e.info.coll, MsgRange::ALL, e.info.id));
    }
    d
}
