//! What one rank's buffers look like for a collective of block count `c`
//! (the `-b`/`-e` count), and how ucc_perftest reports it: the printed
//! count, the bus-bandwidth formula. Pure functions of the shape of the
//! job, with no I/O.
//!
//! `c` is the count ucc_perftest's `-b`/`-e` take: the elements each rank
//! contributes per peer. allreduce, reduce, bcast: the vector; allgather(v)
//! and gather(v): each rank's block (the result holds P·c); alltoall(v),
//! reduce_scatter(v), scatter(v): the block per peer (each rank's source
//! holds P·c). Like ucc_perftest, the table's `Count` is each rank's
//! source count (c, or P·c for the last group) and `Size` is that in bytes.

use ferrocoll::CollType;

/// Buffer lengths of one rank, in elements (pairs for maxloc/minloc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Source buffer length (`None`: no source on this rank).
    pub src: Option<usize>,
    /// Destination buffer length (`None`: no destination on this rank).
    pub dst: Option<usize>,
}

/// Whether `-i` applies to `coll` (ucc_perftest's `has_inplace`).
pub fn has_in_place(coll: CollType) -> bool {
    !matches!(coll, CollType::Bcast | CollType::Barrier | CollType::Fanin | CollType::Fanout)
}

/// Whether `coll` moves data (ucc_perftest's `has_range`).
pub fn has_data(coll: CollType) -> bool {
    !coll.is_synchronisation()
}

/// The buffers of `rank` in a team of `p` for block count `c`.
pub fn layout(coll: CollType, c: usize, p: usize, rank: usize, root: usize, in_place: bool) -> Layout {
    use CollType::*;
    let ip = in_place && has_in_place(coll);
    let is_root = rank == root;
    let all = c * p;
    let (src, dst) = match coll {
        Barrier | Fanin | Fanout => (None, None),
        Bcast => (Some(c), None),
        Allreduce => ((!ip).then_some(c), Some(c)),
        Reduce if is_root => ((!ip).then_some(c), Some(c)),
        Reduce => (Some(c), None),
        Allgather | Allgatherv => ((!ip).then_some(c), Some(all)),
        Alltoall | Alltoallv => ((!ip).then_some(all), Some(all)),
        ReduceScatter | ReduceScatterv if ip => (None, Some(all)),
        ReduceScatter | ReduceScatterv => (Some(all), Some(c)),
        Gather | Gatherv if is_root => ((!ip).then_some(c), Some(all)),
        Gather | Gatherv => (Some(c), None),
        Scatter | Scatterv if is_root => (Some(all), (!ip).then_some(c)),
        Scatter | Scatterv => (None, Some(c)),
    };
    Layout { src, dst }
}

/// The count ucc_perftest prints: each rank's source count (`None`:
/// barrier, fanin, fanout, printed `N/A`).
pub fn printed_count(coll: CollType, c: u64, p: u64) -> Option<u64> {
    use CollType::*;
    match coll {
        Barrier | Fanin | Fanout => None,
        Alltoall | Alltoallv | ReduceScatter | ReduceScatterv | Scatter | Scatterv => Some(c * p),
        _ => Some(c),
    }
}

/// Bytes × factor such that bus bandwidth = `busbw_bytes / time`: the
/// nccl-tests / ucc_perftest formulas on `c` elements of `elem` bytes per
/// block and `p` ranks (`None`: no bandwidth, as for barrier).
///
/// | collective | bytes S | factor |
/// |---|---|---|
/// | allreduce | c | 2(P−1)/P |
/// | allgather(v), alltoall(v), reduce_scatter(v) | P·c (the total) | (P−1)/P |
/// | bcast, reduce | c | 1 |
/// | gather(v), scatter(v) | c | P−1 |
///
/// (ucc_perftest prints no bandwidth for the v-variants; with the uniform
/// counts of a sweep they move what their plain forms move, so they get the
/// same formula.)
pub fn busbw_bytes(coll: CollType, c: u64, elem: u64, p: u64) -> Option<f64> {
    use CollType::*;
    let (s, n) = ((c * elem) as f64, p as f64);
    if p == 0 {
        return None;
    }
    match coll {
        Barrier | Fanin | Fanout => None,
        Allreduce => Some(s * 2.0 * (n - 1.0) / n),
        Allgather | Allgatherv | Alltoall | Alltoallv | ReduceScatter | ReduceScatterv => Some(s * n * (n - 1.0) / n),
        Bcast | Reduce => Some(s),
        Gather | Gatherv | Scatter | Scatterv => Some(s * (n - 1.0)),
    }
}

/// GB/s (10⁹ bytes per second) for `bytes` moved in `time_us` microseconds.
pub fn gbps(bytes: f64, time_us: f64) -> f64 {
    if time_us > 0.0 { bytes / time_us / 1e3 } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use CollType::*;

    #[test]
    fn shapes() {
        assert_eq!(layout(Allreduce, 8, 4, 1, 0, false), Layout { src: Some(8), dst: Some(8) });
        assert_eq!(layout(Allreduce, 8, 4, 1, 0, true), Layout { src: None, dst: Some(8) });
        assert_eq!(layout(Alltoall, 8, 4, 1, 0, false), Layout { src: Some(32), dst: Some(32) });
        assert_eq!(layout(ReduceScatter, 8, 4, 1, 0, false), Layout { src: Some(32), dst: Some(8) });
        assert_eq!(layout(ReduceScatter, 8, 4, 1, 0, true), Layout { src: None, dst: Some(32) });
        assert_eq!(layout(Gather, 8, 4, 2, 2, true), Layout { src: None, dst: Some(32) });
        assert_eq!(layout(Gather, 8, 4, 1, 2, true), Layout { src: Some(8), dst: None });
        assert_eq!(layout(Scatter, 8, 4, 0, 0, true), Layout { src: Some(32), dst: None });
        assert_eq!(layout(Bcast, 8, 4, 0, 0, true), Layout { src: Some(8), dst: None });
        assert_eq!(layout(Barrier, 8, 4, 0, 0, false), Layout { src: None, dst: None });
    }

    #[test]
    fn bandwidth_formulas() {
        // 1 MB allreduce on 4 ranks in 1000 µs: algbw 1 GB/s, busbw 1.5 GB/s.
        let b = busbw_bytes(Allreduce, 250_000, 4, 4).unwrap();
        assert!((gbps(b, 1000.0) - 1.5).abs() < 1e-12);
        let b = busbw_bytes(Allgather, 250_000, 4, 4).unwrap();
        assert!((gbps(b, 1000.0) - 3.0).abs() < 1e-12);
        assert_eq!(busbw_bytes(Bcast, 10, 4, 8), Some(40.0));
        assert_eq!(busbw_bytes(Gather, 10, 4, 8), Some(280.0));
        assert_eq!(busbw_bytes(Barrier, 10, 4, 8), None);
        assert_eq!(printed_count(Alltoall, 3, 4), Some(12));
        assert_eq!(printed_count(Allgather, 3, 4), Some(3));
        assert_eq!(printed_count(Fanin, 3, 4), None);
    }
}
