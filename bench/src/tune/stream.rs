//! The streaming threshold: from which destination size bcast and
//! allgather/gather write past the cache (`UCC_TL_SHM_STREAM_THRESHOLD`).
//!
//! Its default is the last-level cache's size as sysfs gives it, at most
//! 64 MiB. Sysfs alone is wrong where it describes the host's cache rather
//! than what a core reaches: a 2-core AMD EPYC VM said 480 MiB (its host
//! socket's L3) for the 32 MiB a core's complex has, so it never streamed,
//! and a 64 MiB bcast took 7.2–7.5 ms instead of 5.1–5.4 (BENCHMARKS.md,
//! eleventh round). The tuner runs bcast and allgather both ways,
//! streaming from every size and never, and takes the smallest destination
//! size from which streaming wins by the margin with no larger size losing
//! by more ([`threshold`]).

use std::collections::BTreeMap;
use std::path::Path;

use ferrocoll::CollType;

use super::choose::{Times, median};
use super::measure::{self, Sweep};

/// The variable the tuner sets.
pub const VAR: &str = "UCC_TL_SHM_STREAM_THRESHOLD";

/// The collectives whose destinations stream.
pub const COLLS: [CollType; 2] = [CollType::Bcast, CollType::Allgather];

/// Both ways at one perftest size of one collective: median µs.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// The collective.
    pub coll: CollType,
    /// Bytes of each rank's destination (what the threshold is compared with).
    pub dest_bytes: u64,
    /// Streaming from every size.
    pub streamed: f64,
    /// Never streaming.
    pub cached: f64,
}

/// Bytes of each rank's destination for a perftest row of `size_bytes`
/// (each rank's source): allgather's holds every rank's block.
pub fn dest_bytes(coll: CollType, ranks: usize, size_bytes: u64) -> u64 {
    match coll {
        CollType::Allgather => size_bytes.saturating_mul(ranks.max(1) as u64),
        _ => size_bytes,
    }
}

/// The smallest destination size at which streaming beats not streaming
/// by `margin` (a fraction) for some collective, with no size from there
/// up where it loses by more than `margin` for any (within the margin
/// either way is a tie: on the VM above, every size up to 32 MiB); `None`
/// where it wins nowhere, or loses at the largest size: streaming then
/// stays as the default has it, since nothing measured says where it
/// starts to win.
pub fn threshold(points: &[Point], margin: f64) -> Option<u64> {
    let mut sizes: Vec<u64> = points.iter().map(|p| p.dest_bytes).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let mut from = None;
    for &s in sizes.iter().rev() {
        let mut at = points.iter().filter(|p| p.dest_bytes == s);
        if at.clone().any(|p| p.streamed > p.cached * (1.0 + margin)) {
            break;
        }
        if at.any(|p| p.streamed <= p.cached * (1.0 - margin)) {
            from = Some(s);
        }
    }
    from
}

/// Measure [`COLLS`] on `ranks` ranks both ways, `reps` times, the two
/// settings in turn (which first alternates); `counts` are the perftest's
/// `-b`, `-e`, `-f`.
pub fn measure(
    perftest: &Path,
    ranks: usize,
    counts: (String, String, String),
    iters: Option<(u64, u64)>,
    reps: usize,
    csv: &Path,
) -> Result<Vec<Point>, String> {
    let mut points = Vec::new();
    for coll in COLLS {
        let sweep = Sweep { perftest: perftest.to_path_buf(), ranks, coll, counts: counts.clone(), iters };
        // times[0]: streamed, times[1]: cached.
        let mut times: [Times; 2] = [BTreeMap::new(), BTreeMap::new()];
        for rep in 0..reps {
            eprintln!("ferrocoll-tune: streaming, {coll}, {ranks} ranks, round {} of {reps}", rep + 1);
            for k in 0..2 {
                let way = (k + rep) % 2;
                let value = if way == 0 { "0" } else { "inf" };
                for row in measure::run_env(&sweep, &format!("{VAR}={value}"), &[(VAR, value)], csv)? {
                    times[way].entry(row.size_bytes).or_default().push(row.time_avg_us);
                }
            }
        }
        for (&size, streamed) in &times[0] {
            let cached = times[1].get(&size).and_then(|t| median(t));
            if let (Some(streamed), Some(cached)) = (median(streamed), cached) {
                points.push(Point { coll, dest_bytes: dest_bytes(coll, ranks, size), streamed, cached });
            }
        }
    }
    Ok(points)
}

/// The table printed and written as comments.
pub fn table(points: &[Point], ranks: usize, margin: f64) -> String {
    let mut s = format!("streaming destinations ({VAR}), {ranks} ranks (median µs):\n");
    s.push_str(&format!("  {:>10}  {:>12}  {:>10}  {:>10}\n", "collective", "dest bytes", "streamed", "cached"));
    for p in points {
        s.push_str(&format!(
            "  {:>10}  {:>12}  {:>10.2}  {:>10.2}\n",
            p.coll.to_string(),
            p.dest_bytes,
            p.streamed,
            p.cached
        ));
    }
    match threshold(points, margin) {
        Some(t) => s.push_str(&format!("  streaming wins from {t} bytes of destination up\n")),
        None => s.push_str("  streaming wins by the margin nowhere, or loses at the largest size: the default stays\n"),
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(coll: CollType, dest_bytes: u64, streamed: f64, cached: f64) -> Point {
        Point { coll, dest_bytes, streamed, cached }
    }

    #[test]
    fn the_threshold_is_where_streaming_wins_from_there_up() {
        use CollType::{Allgather, Bcast};
        let points = [
            p(Bcast, 1 << 20, 120.0, 100.0),
            p(Bcast, 32 << 20, 5000.0, 5050.0),
            p(Bcast, 64 << 20, 5100.0, 7300.0),
            p(Allgather, 64 << 20, 9000.0, 11000.0),
            p(Bcast, 128 << 20, 10000.0, 15000.0),
        ];
        // 32 MiB wins by 1 % only: a tie at a 10 % margin, a win at none;
        // 1 MiB loses by 20 %, ending the run down from the top.
        assert_eq!(threshold(&points, 0.10), Some(64 << 20));
        assert_eq!(threshold(&points, 0.0), Some(32 << 20));
        // A size where one collective loses by more than the margin ends it too.
        let mut mixed = points.to_vec();
        mixed[3].streamed = 12000.0; // 9 % slower: a tie
        assert_eq!(threshold(&mixed, 0.10), Some(64 << 20));
        mixed[3].streamed = 13000.0; // 18 % slower
        assert_eq!(threshold(&mixed, 0.10), Some(128 << 20));
        // Losing at the top: nothing to say.
        mixed[4].streamed = 17000.0;
        assert_eq!(threshold(&mixed, 0.10), None);
        // Ties only: nothing either.
        let ties = [p(Bcast, 1 << 20, 101.0, 100.0), p(Allgather, 2 << 20, 199.0, 200.0)];
        assert_eq!(threshold(&ties, 0.10), None);
        assert_eq!(threshold(&[], 0.10), None);
    }

    #[test]
    fn an_allgathers_destination_holds_every_block() {
        assert_eq!(dest_bytes(CollType::Allgather, 4, 1 << 20), 4 << 20);
        assert_eq!(dest_bytes(CollType::Bcast, 4, 1 << 20), 1 << 20);
        assert_eq!(dest_bytes(CollType::Allgather, 4, u64::MAX), u64::MAX);
    }
}
