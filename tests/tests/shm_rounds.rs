//! The shm TL's rounds: allreduce and reduce (`rsag`, `onestep`) move a half's data
//! part (`UCC_TL_SHM_DATA_SIZE`) per round, the copying collectives and
//! reduce_scatter a pipeline round (`UCC_TL_SHM_PIPELINE_SIZE`, at most the
//! data part). With both set small, the conformance cases of
//! `ferrocoll_tests::cases::matrix` (up to 4 099 elements) take many rounds
//! of each kind; they run on teams of 2, 3 and 4 threads against the same
//! references, with the pipeline smaller than the data part (the defaults'
//! relation) and larger (then clamped to it). Single copy
//! (`UCC_TL_SHM_CMA_THRESHOLD` at 0) runs the same cases, reduce-scatter(v)
//! too: the v-variants after a size round that carries only blocks that
//! fit its small rounds.

use ferrocoll::{CollType, Config, TeamParams};
use ferrocoll_tests::cases::matrix;
use ferrocoll_tests::runner::run_pinned;

/// Run every conformance case of `coll` pinned to shm's `alg`, with halves
/// of `data` bytes and pipeline rounds of `pipeline` bytes.
fn in_rounds(coll: CollType, alg: &str, sizes: (&str, &str)) {
    in_rounds_with(coll, alg, sizes, Config::new());
}

/// [`in_rounds`] with `config`'s other settings.
fn in_rounds_with(coll: CollType, alg: &str, (data, pipeline): (&str, &str), mut config: Config) {
    config.set("TL_SHM_DATA_SIZE", data);
    config.set("TL_SHM_PIPELINE_SIZE", pipeline);
    let want = format!("shm/{alg}");
    for size in [2, 3, 4] {
        let cases = matrix(coll, size, size as u64 * 7_919 + coll.index() as u64);
        let params = TeamParams::default().set("TL_SHM_TUNE", format!("{coll}:@{alg}:inf")).set("TL_SELF_TUNE", "0");
        let per_rank = run_pinned(size, &config, params, cases, &want);
        for (rank, r) in per_rank.into_iter().enumerate() {
            let n = r.unwrap_or_else(|e| panic!("{coll} ({data}/{pipeline}), {size} ranks, rank {rank}: {e}"));
            assert!(n > 0, "{coll}, {size} ranks: no cases");
        }
    }
}

/// Halves of 8 KiB, pipeline rounds of 4 KiB (the minimum of each).
const SMALL: (&str, &str) = ("8K", "4K");
/// A pipeline larger than the halves: clamped to them.
const CLAMPED: (&str, &str) = ("8K", "64K");

#[test]
fn reductions_run_in_rounds_of_the_data_part() {
    for sizes in [SMALL, CLAMPED] {
        in_rounds(CollType::Allreduce, "rsag", sizes);
        in_rounds(CollType::Reduce, "rsag", sizes);
        // Past the inline regions, onestep's rounds: a reduce's root reads
        // its own input where it lies (in place, through the segment).
        in_rounds(CollType::Allreduce, "onestep", sizes);
        in_rounds(CollType::Reduce, "onestep", sizes);
    }
}

#[test]
fn copying_collectives_run_in_pipeline_rounds() {
    for sizes in [SMALL, CLAMPED] {
        for coll in [CollType::Bcast, CollType::Allgather, CollType::Allgatherv, CollType::Gather, CollType::Gatherv] {
            in_rounds(coll, "staged", sizes);
        }
    }
}

#[test]
fn exchanges_run_in_pipeline_rounds() {
    for sizes in [SMALL, CLAMPED] {
        for coll in [
            CollType::Alltoall,
            CollType::Alltoallv,
            CollType::Scatter,
            CollType::Scatterv,
            CollType::ReduceScatter,
            CollType::ReduceScatterv,
        ] {
            in_rounds(coll, "staged", sizes);
        }
    }
}

#[test]
fn copying_collectives_copy_once_from_the_threshold() {
    let mut config = Config::new();
    config.set("TL_SHM_CMA_THRESHOLD", "0");
    for coll in [
        CollType::Bcast,
        CollType::Allgather,
        CollType::Allgatherv,
        CollType::Gather,
        CollType::Scatter,
        CollType::Alltoall,
        CollType::ReduceScatter,
        CollType::ReduceScatterv,
    ] {
        in_rounds_with(coll, "cma", SMALL, config.clone());
    }
    for coll in [CollType::Gatherv, CollType::Scatterv, CollType::Alltoallv] {
        in_rounds_with(coll, "staged", SMALL, config.clone());
    }
}
