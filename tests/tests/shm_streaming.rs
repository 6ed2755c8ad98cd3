//! The shm TL's streaming copies (non-temporal stores into destinations at
//! least `UCC_TL_SHM_STREAM_THRESHOLD` large; by default the last-level
//! cache at most 64 MiB, so the conformance suite's small buffers never reach them): the
//! collectives that use them — bcast, allgather(v), gather(v) — run the
//! conformance cases of `ferrocoll_tests::cases::matrix` with the threshold
//! at 0, so that every copy out of the segment streams, on teams of 2, 3
//! and 4 threads, against the same references.

use ferrocoll::{CollType, Config, TeamParams};
use ferrocoll_tests::cases::matrix;
use ferrocoll_tests::runner::run_pinned;

fn streamed(coll: CollType) {
    let mut config = Config::new();
    config.set("TL_SHM_STREAM_THRESHOLD", "0");
    for size in [2, 3, 4] {
        let cases = matrix(coll, size, size as u64 * 104_729 + coll.index() as u64);
        let params = TeamParams::default().set("TL_SHM_TUNE", format!("{coll}:@staged:inf")).set("TL_SELF_TUNE", "0");
        let per_rank = run_pinned(size, &config, params, cases, "shm/staged");
        for (rank, r) in per_rank.into_iter().enumerate() {
            let n = r.unwrap_or_else(|e| panic!("{coll}, {size} ranks, rank {rank}: {e}"));
            assert!(n > 0, "{coll}, {size} ranks: no cases");
        }
    }
}

#[test]
fn bcast_streams_correctly() {
    streamed(CollType::Bcast);
}

#[test]
fn allgather_streams_correctly() {
    streamed(CollType::Allgather);
    streamed(CollType::Allgatherv);
}

#[test]
fn gather_streams_correctly() {
    streamed(CollType::Gather);
    streamed(CollType::Gatherv);
}
