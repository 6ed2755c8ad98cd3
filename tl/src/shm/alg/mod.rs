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

/// Bcast messages from this size up stage through the segment even where
/// single copy would run: there the root's copy in and the readers' copies
/// out run on two cores at once, pipelined, while a reader's single copy
/// is one core's. Where that starts to pay differs between machines (2
/// ranks, staged/single copy, µs):
/// - a 2-core AMD EPYC VM, family 26 (BENCHMARKS.md, tenth round): 1 MiB
///   63/50, 2 MiB 151/174, 4 MiB 312/354, 8 MiB 634/729 — from 2 MiB;
/// - a 2-core AMD EPYC VM, family 25 (twenty-fourth round, 3 runs): 2 MiB
///   211–222/158–174, 4 MiB 409–451/321–357, 8 MiB 855–904/732–814,
///   16 MiB 1 794–1 908/2 135–2 495 — from 16 MiB; Open MPI, which copies
///   once there too, 157–159, 318–329 at 2 and 4 MiB.
///
/// Single copy up to 16 MiB costs the first VM at most 1.15× (at 2–8 MiB),
/// and staging from 2 MiB cost the second 1.25–1.35× and put it 0.7× of
/// Open MPI's speed at 4 MiB; `ferrocoll-tune` measures a machine's own.
const BCAST_SINGLE_COPY_END: u64 = 16 << 20;

/// Where ranks outnumber cores, single copy starts this many times later
/// (alltoall(v), allgather(v), scatter(v)) or not at all (bcast,
/// gather(v)): its epoch ends with every rank waiting for every rank,
/// and there each wait may cost a trip through the scheduler. On 4 ranks
/// over 2 cores (BENCHMARKS.md, tenth round) single copy was slower below
/// 256 KiB for all of them (bcast of 4 KiB 4.8 against 0.8 µs), and
/// gather's, whose root alone copies, at every size measured (again in
/// the nineteenth round: 64 KiB blocks 22 against 9 µs, 16 MiB 13.2
/// against 7.3 ms). Scatter's root copies nothing by single copy, where
/// staging has it copy every block in: from 128 KiB blocks on 4 ranks
/// over 2 cores it took 0.4–0.6 of staging's time (512 KiB 99–165
/// against 209–215 µs, 4 MiB 0.92–1.0 against 1.9–2.0 ms; Open MPI 107
/// µs and 1.3 ms), on 3 and 8 ranks 0.4–0.5 from 256 KiB (nineteenth
/// round).
const OVERSUBSCRIBED_SINGLE_COPY_LATER: u64 = 16;

/// ... but no later than this (unless the threshold itself is later): those
/// measurements were made with a 16 KiB threshold, and what costs there is
/// the scheduler's trips, not the system call that a machine's measured
/// threshold follows (`crossover.rs`; 64 KiB on the family-25 AMD VM
/// would have moved it to 1 MiB, while scatter from 512 KiB took 0.4–0.6
/// of staging's time by single copy on the Intel VM).
const OVERSUBSCRIBED_SINGLE_COPY_BY: u64 = 256 << 10;

/// Reduce messages from this size up go back to the segment even where
/// single copy would run (`onestep` on two ranks): 2 ranks on the 2-core
/// AMD EPYC VM (BENCHMARKS.md, tenth round), single copy / rsag / onestep
/// 16 KiB 2.2/3.0/2.7 µs, 256 KiB 15.9/20.5/19.2, 1 MiB 120/114/86: the
/// root alone reads and reduces everything, which stops paying once the
/// inputs outgrow its L2 cache, where `onestep` lets the other rank copy
/// its input in meanwhile. Since `onestep`'s root reads its own input
/// where it lies, the crossover is lower: on a 2-core Intel Xeon VM
/// (BENCHMARKS.md, thirteenth round, 3 interleaved runs) single copy /
/// onestep 256 KiB 19.3–22.2/22.4–24.5 µs, 512 KiB 47.6–56.1/40.8–45.4,
/// 1 MiB 152–159/90–106; on the AMD VM single copy at 512 KiB was already
/// 0.75–0.79 of Open MPI's speed (eleventh round).
///
/// Past it, reduce on two ranks stays `onestep` at every size: its root
/// reads its own input where it lies and the other's from the segment,
/// 3 bytes moved per byte of the vector, while `rsag`'s root moves 4.5
/// (`reduction.rs`), and the other rank's copy in overlaps the root's
/// previous round. On a 2-core Intel Xeon VM (BENCHMARKS.md, thirteenth
/// round) onestep / rsag: 4 MiB 499–515/651–903 µs, 16 MiB 2 031–2 061/
/// 2 721–3 837, 64 MiB 13.5–13.7/16.8–20.6 ms, 256 MiB 60.6–62.5/
/// 77.3–79.5 ms (Open MPI 4 MiB 611–668 µs, 64 MiB 20.3–22.1 ms).
const REDUCE_SINGLE_COPY_END: u64 = 512 << 10;

/// `[from, to)` ranges covering every message size, cut at `cuts` (in any
/// order; `u64::MAX` and repeats ignored), each with `alg_at(from)`;
/// neighbours with the same algorithm merged.
fn piecewise(
    cuts: impl IntoIterator<Item = u64>,
    alg_at: impl Fn(u64) -> u16,
) -> impl Iterator<Item = (u64, u64, u16)> {
    let mut cuts: Vec<u64> = cuts.into_iter().filter(|&c| c != 0 && c != u64::MAX).collect();
    cuts.push(0);
    cuts.sort_unstable();
    cuts.dedup();
    let mut ranges: Vec<(u64, u64, u16)> = Vec::new();
    for (i, &from) in cuts.iter().enumerate() {
        let (to, alg) = (cuts.get(i + 1).copied().unwrap_or(u64::MAX), alg_at(from));
        match ranges.last_mut() {
            Some(last) if last.2 == alg => last.1 = to,
            _ => ranges.push((from, to, alg)),
        }
    }
    ranges.into_iter()
}

/// The message sizes `[from, to)` at which `coll` goes by single copy
/// (`single_copy.rs`) by default: from `UCC_TL_SHM_CMA_THRESHOLD`, see
/// [`BCAST_SINGLE_COPY_END`], [`REDUCE_SINGLE_COPY_END`],
/// [`OVERSUBSCRIBED_SINGLE_COPY_LATER`] and
/// [`OVERSUBSCRIBED_SINGLE_COPY_BY`]. Reduce's is for two ranks (the
/// caller says `oversubscribed` otherwise: its root reads every input).
/// For the v-variants (0 to the selection), their size round decides with
/// the same range (`meta.rs`).
pub(crate) fn single_copy_range(config: &ShmConfig, coll: CollType, oversubscribed: bool) -> (u64, u64) {
    const NEVER: (u64, u64) = (u64::MAX, u64::MAX);
    let from = config.cma_threshold as u64;
    if from == u64::MAX {
        return NEVER;
    }
    match (coll, oversubscribed) {
        (Bcast, false) => (from, BCAST_SINGLE_COPY_END.max(from)),
        (Reduce, false) => (from, REDUCE_SINGLE_COPY_END.max(from)),
        (Alltoall | Alltoallv | Allgather | Allgatherv | Scatter | Scatterv, true) => {
            let later = from.saturating_mul(OVERSUBSCRIBED_SINGLE_COPY_LATER).min(OVERSUBSCRIBED_SINGLE_COPY_BY);
            (later.max(from), u64::MAX)
        }
        (_, true) => NEVER,
        (_, false) => (from, u64::MAX),
    }
}

/// Default (collective, message range, algorithm) entries for a team of
/// `size`, on a host the team sees `oversubscribed` or not.
///
/// The segment serves every size of every collective but alltoall from
/// 2 MiB up with more than two ranks, which goes to p2p. Reductions stage
/// through it (`onestep`, then `rsag` from `UCC_TL_SHM_RSAG_THRESHOLD`;
/// reduce on two ranks stays `onestep`, but for single copy's range, and
/// so does reduce on any team whose ranks outnumber their cores).
/// The copying collectives (bcast, allgather(v), gather(v), scatter(v),
/// alltoall(v)) and reduce-scatter(v) stage small messages through it and, from
/// `UCC_TL_SHM_CMA_THRESHOLD`, copy once straight from the giver's buffer
/// (`single_copy.rs`: two copies become one, which is what the p2p TL's
/// rendezvous over CMA gained in the mid sizes before; BENCHMARKS.md, the
/// tenth round). The v-variants' message size is 0 to the selection
/// (UCC's), so `gatherv`, `scatterv` and `alltoallv` make that choice
/// themselves after their size round. `ferrocoll-tune` measures a
/// machine's own crossovers; `UCC_TL_SHM_TUNE` changes any of this.
pub(crate) fn defaults(config: &ShmConfig, size: usize, oversubscribed: bool) -> Vec<DefaultAlg> {
    const M: u64 = 1 << 20;
    const INF: u64 = u64::MAX;
    let t = config.rsag_threshold as u64;
    let entry = |coll, lo, hi, alg| DefaultAlg { coll, range: MsgRange::new(lo, hi), alg };
    let mut d = vec![
        entry(Allreduce, 0, t, 0),
        entry(Allreduce, t, INF, 1),
        entry(Gatherv, 0, INF, 0),
        entry(Scatterv, 0, INF, 0),
        entry(Alltoallv, 0, INF, 0),
    ];
    // Reduce: onestep, then rsag; on two ranks with a core each, single
    // copy in its range and onestep at every other size (see
    // `REDUCE_SINGLE_COPY_END`); where ranks outnumber cores, onestep at
    // every size. There rsag's every rank waits for every other twice
    // (its slice's inputs, then the root for the slices), each wait a
    // likely trip through the scheduler, while onestep's other ranks copy
    // their input in and leave. On a 2-core Intel Xeon VM (BENCHMARKS.md,
    // eighteenth round, 2 runs) onestep / rsag on 4 ranks: 16 KiB 3.6–3.9
    // / 8.0–11.9 µs, 1 MiB 143–191 / 257–362, 16 MiB 4.9–5.1 / 5.0–6.1 ms;
    // on 3 ranks 256 KiB 21–23 / 37–38 µs, 4 MiB 0.77–0.81 / 1.05–1.26 ms.
    let pair = size == 2 && !oversubscribed;
    let onestep_always = pair || oversubscribed;
    let (lo, hi) = single_copy_range(config, Reduce, !pair);
    let (lo, hi) = (lo.max(t), hi.max(t));
    let reduce_alg = |m: u64| match m {
        m if (lo..hi).contains(&m) => 2,
        m if m < t || onestep_always => 0,
        _ => 1,
    };
    d.extend(piecewise([t, lo, hi], reduce_alg).map(|(from, to, alg)| entry(Reduce, from, to, alg)));
    // Staged outside the single-copy range, single copy in it; alltoall
    // from 2 MiB up on more than two ranks goes to p2p (measured faster on
    // 4 ranks over 2 cores against the segment's rounds, and 1.08–1.20×
    // against single copy at 4–16 MiB, BENCHMARKS.md tenth round).
    // Reduce-scatter(v) reads its block of the others' vectors the same
    // way (`reduction::single_copy_window`).
    for coll in [Bcast, Allgather, Allgatherv, Gather, Scatter, Alltoall, ReduceScatter, ReduceScatterv] {
        let end = if coll == Alltoall && size > 2 { 2 * M } else { INF };
        let (lo, hi) = single_copy_range(config, coll, oversubscribed);
        let (lo, hi) = (lo.min(end), hi.min(end));
        for (from, to, alg) in [(0, lo, 0), (lo, hi, 1), (hi.max(lo), end, 0)] {
            if from < to {
                d.push(entry(coll, from, to, alg));
            }
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
                let d = defaults(&config, size, oversubscribed);
                for e in &d {
                    assert!(registry().find(e.coll, e.alg).is_some(), "{e:?}");
                }
                // Every collective's ranges follow each other from 0 to the end.
                for coll in [Reduce, Bcast, Alltoall, Allreduce] {
                    let mut ranges: Vec<_> = d.iter().filter(|e| e.coll == coll).map(|e| e.range).collect();
                    ranges.sort_by_key(|r| r.start);
                    assert_eq!(ranges.first().map(|r| r.start), Some(0), "{coll} on {size}");
                    assert!(ranges.windows(2).all(|w| w[0].end == w[1].start), "{coll} on {size}: {ranges:?}");
                    let last = ranges.last().map(|r| r.end);
                    assert!(last == Some(u64::MAX) || coll == Alltoall, "{coll} on {size}: {ranges:?}");
                }
            }
        }
        let cut = |cuts: Vec<u64>, alg: fn(u64) -> u16| piecewise(cuts, alg).collect::<Vec<_>>();
        assert_eq!(cut(vec![5, 0, u64::MAX, 3, 5], |m| u16::from(m >= 3)), [(0, 3, 0), (3, u64::MAX, 1)]);
        assert_eq!(cut(vec![], |_| 7), [(0, u64::MAX, 7)]);
        let barrier = |oversubscribed| {
            let d = defaults(&config, 4, oversubscribed);
            let b = d.iter().find(|d| d.coll == Barrier).map(|d| d.alg);
            b.and_then(|alg| registry().find(Barrier, alg)).map(|a| a.info.name)
        };
        // Single copy from the threshold; bcast back to the segment from
        // 16 MiB; where ranks outnumber cores, only alltoall and allgather, later.
        let alg_at = |coll, msg: u64, oversubscribed| {
            let d = defaults(&config, 4, oversubscribed);
            let e = d.iter().find(|d| d.coll == coll && d.range.contains(msg)).expect("an entry for every size");
            registry().find(coll, e.alg).map(|a| a.info.name)
        };
        for coll in [Bcast, Allgather, Allgatherv, Gather, Scatter, Alltoall, ReduceScatter, ReduceScatterv] {
            assert_eq!(alg_at(coll, 8 << 10, false), Some("staged"), "{coll}");
            assert_eq!(alg_at(coll, 64 << 10, false), Some("cma"), "{coll}");
        }
        assert_eq!(alg_at(Bcast, 8 << 20, false), Some("cma"));
        assert_eq!(alg_at(Bcast, 16 << 20, false), Some("staged"));
        assert_eq!(alg_at(Allgather, 4 << 20, false), Some("cma"));
        assert!(defaults(&config, 4, false).iter().all(|d| d.coll != Alltoall || !d.range.contains(4 << 20)), "p2p's");
        assert_eq!(alg_at(Alltoall, 64 << 10, true), Some("staged"));
        assert_eq!(alg_at(Alltoall, 256 << 10, true), Some("cma"));
        assert_eq!(alg_at(Gather, 64 << 20, true), Some("staged"));
        // Scatter's root copies nothing by single copy: later where ranks
        // outnumber cores, as alltoall, but not never, as gather.
        assert_eq!(alg_at(Scatter, 64 << 10, true), Some("staged"));
        assert_eq!(alg_at(Scatter, 256 << 10, true), Some("cma"));
        assert_eq!(single_copy_range(&config, Scatterv, true), single_copy_range(&config, Alltoallv, true));
        assert_eq!(single_copy_range(&config, Gatherv, true), (u64::MAX, u64::MAX));
        // Reduce: single copy on two ranks only, from the threshold to 512 KiB.
        let reduce_at = |size, msg: u64| {
            let d = defaults(&config, size, false);
            let e = d.iter().find(|d| d.coll == Reduce && d.range.contains(msg)).expect("an entry for every size");
            registry().find(Reduce, e.alg).map(|a| a.info.name)
        };
        assert_eq!(reduce_at(2, 8 << 10), Some("onestep"));
        assert_eq!(reduce_at(2, 64 << 10), Some("cma"));
        // Then onestep on two ranks at every size; rsag past the threshold on more.
        assert_eq!(reduce_at(2, (512 << 10) - 1), Some("cma"));
        for msg in [512 << 10, 64 << 20, u64::MAX - 1] {
            assert_eq!(reduce_at(2, msg), Some("onestep"), "{msg}");
        }
        assert_eq!(reduce_at(4, 64 << 10), Some("rsag"));
        assert_eq!(reduce_at(4, 4 << 20), Some("rsag"));
        // Where ranks outnumber cores, onestep at every size, on any team.
        for (size, msg) in [(2, 64 << 10), (3, 64 << 10), (4, 4 << 20), (8, u64::MAX - 1)] {
            let d = defaults(&config, size, true);
            let e = d.iter().find(|d| d.coll == Reduce && d.range.contains(msg)).expect("an entry for every size");
            assert_eq!(registry().find(Reduce, e.alg).map(|a| a.info.name), Some("onestep"), "{size} ranks, {msg}");
        }
        // Where ranks outnumber cores, 16 times later, but by 256 KiB (a
        // machine's measured threshold follows its system call, not its
        // scheduler), unless the threshold itself is later.
        let from = |threshold: usize| {
            single_copy_range(&ShmConfig { cma_threshold: threshold, ..config.clone() }, Alltoall, true).0
        };
        assert_eq!([from(0), from(4 << 10), from(16 << 10), from(64 << 10)], [0, 64 << 10, 256 << 10, 256 << 10]);
        assert_eq!(from(1 << 20), 1 << 20);
        let off = ShmConfig { cma_threshold: usize::MAX, ..config.clone() };
        assert!(defaults(&off, 2, false).iter().all(|d| registry().find(d.coll, d.alg).unwrap().info.name != "cma"));
        assert_eq!(single_copy_range(&off, Alltoallv, false), (u64::MAX, u64::MAX));
        assert_eq!(barrier(false), Some("flags"));
        assert_eq!(barrier(true), Some("fanin_fanout"), "rank 0 leaves first where ranks outnumber cores");
    }
}
