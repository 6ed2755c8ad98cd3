//! What staging a message through the segment costs, timed between a
//! team's first two ranks as the team is created: the `staged_time` of
//! `crossover::threshold_from`, from which "auto" sets where single copy
//! starts (`UCC_TL_SHM_CMA_THRESHOLD`).
//!
//! A staged message is copied twice: the giver copies it into its data
//! part, whose lines the taker read the round before and which the giver
//! must first take back; the taker copies it out, across cores. Rank 0
//! (the giver) times its copy in, rank 1 (the taker) its copy out and
//! hands the figure back through the header's cells, round after round:
//!
//! ```text
//! rank 0: copy in (timed) ── turn = 2k+1 ──▶ rank 1: copy out (timed), out_ns
//! rank 0: ◀── turn = 2k+2 ───────────────────────────────────────────────────
//! ```
//!
//! Each copy is timed inside one poll of its rank, so how often the ranks
//! are polled does not count; the fastest round of each copy counts (a
//! preempted one is slower). On the 2-core family-25 AMD EPYC VM, 64 KiB
//! (copy in + copy out): 7.2 + 1.4 µs in its usual mode, where bcast's
//! staging grows by 0.11–0.12 ns a byte (`crossover.rs`).
//!
//! Rank 0 publishes the threshold in the header when done; every member
//! waits for it ([`await_threshold`]), rank 1 serving the rounds meanwhile.

use std::sync::atomic::Ordering;
use std::task::Poll;
use std::time::{Duration, Instant};

use ferrocoll_core::{Error, MemRef, Result};

use super::crossover;
use super::epoch::gone;
use super::liveness_cadence::LivenessCadence;
use super::segment::Segment;
use super::team::dead_among;

/// Untimed rounds per size first (the first touch of the segment's pages,
/// and of the taker's buffer, costs more than a round).
const WARMUPS: u64 = 3;

/// Rounds timed per size.
const ROUNDS: u64 = 8;

/// The single-copy threshold for a team whose ranks 0 (this one) and 1
/// (pid `taker_pid`, 0: unknown) time staging through `seg`; an error if
/// rank 1 dies meanwhile. Where staging still wins at the largest size
/// tried, single copy starts at [`crossover::PAST_CACHES`]: the rounds
/// are timed within the caches, and past them, where both paths go to
/// memory, single copy moves half the bytes. (On the family-25 VM in the
/// spells in which its cores pass lines fastest, staging won at every
/// size to 1 MiB: bcast of 64 KiB 2.2 µs staged, 7.2 by single copy.)
pub(crate) async fn threshold_with_rank_1(seg: &Segment, taker_pid: u32) -> Result<usize> {
    let area = seg.data(0, 0)?;
    // The largest power of two the data part holds: larger sizes are
    // scaled from it (staging grows about linearly past the caches).
    let Some(log) = area.len().checked_ilog2() else { return Ok(crossover::measured_threshold()) };
    let largest = 1usize << log;
    let (mut src, mut turn, start) = (Vec::new(), 0, Instant::now());
    // The last size timed and its time: sizes past `largest` reuse it.
    let mut last: Option<(usize, Duration)> = None;
    // `crossover::threshold_from`'s walk, with staging timed here.
    let (mut t, mut seen) = (crossover::PAST_CACHES, String::new());
    for size in crossover::sizes() {
        let Some(read) = crossover::measure(size) else {
            t = usize::MAX;
            break;
        };
        let timed = size.min(largest);
        let staged = match last {
            Some((at, took)) if at == timed => took,
            _ => staged_time(seg, area, timed, &mut src, &mut turn, taker_pid).await?,
        };
        last = Some((timed, staged));
        let staged = staged.mul_f64(size as f64 / timed as f64);
        seen += &format!(" {size}: {:.2}/{:.2}", read.as_secs_f64() * 1e6, staged.as_secs_f64() * 1e6);
        if crossover::single_copy_pays(read, staged) {
            t = size;
            break;
        }
    }
    ferrocoll_core::log_debug!(
        "shm: single copy pays from {t} bytes on this machine (UCC_TL_SHM_CMA_THRESHOLD=auto; bytes: read/staged \
         µs with rank 1:{seen}; timed in {:.2} ms)",
        start.elapsed().as_secs_f64() * 1e3
    );
    Ok(t)
}

/// The fastest copy in plus the fastest copy out of `size` bytes through
/// `area` (rank 0's data part), over [`ROUNDS`] rounds with rank 1.
async fn staged_time(
    seg: &Segment,
    area: MemRef,
    size: usize,
    src: &mut Vec<u8>,
    turn: &mut u64,
    taker_pid: u32,
) -> Result<Duration> {
    let cells = seg.probe_cells()?;
    src.resize(size, 0x5a);
    // SAFETY: `src` lives, unmoved, until this function returns, and only
    // this MemRef touches it meanwhile.
    let from = unsafe { MemRef::from_slice(src) };
    let into = area.range(0, size)?;
    let (mut copy_in, mut copy_out) = (Duration::MAX, Duration::MAX);
    for round in 0..WARMUPS + ROUNDS {
        let t = Instant::now();
        into.copy_host_from(&from)?;
        let took = t.elapsed();
        // Relaxed: published by the turn's Release.
        cells.size.store(size as u64, Ordering::Relaxed);
        *turn += 2;
        let asked = *turn - 1;
        // Release: rank 1 that sees the turn (Acquire) sees the round's bytes and size.
        cells.turn.store(asked, Ordering::Release);
        let mut polls = LivenessCadence::default();
        std::future::poll_fn(|_| {
            // Acquire: pairs with rank 1's Release; its `out_ns` is the round's.
            if cells.turn.load(Ordering::Acquire) == *turn {
                return Poll::Ready(Ok(()));
            }
            if polls.due()
                && let Some(e) = stopped(seg, 1, taker_pid, "timing staging with rank 0")?
            {
                return Poll::Ready(Err(e));
            }
            Poll::Pending
        })
        .await?;
        if round >= WARMUPS {
            copy_in = copy_in.min(took);
            // Relaxed: see above.
            copy_out = copy_out.min(Duration::from_nanos(cells.out_ns.load(Ordering::Relaxed)));
        }
    }
    Ok(copy_in.saturating_add(copy_out))
}

/// The team's threshold, once rank 0 (pid `creator_pid`, 0: unknown) has
/// published it; rank 1 (`rank`) times the copies out meanwhile. An error
/// if rank 0 dies or gives up first, or asks for a copy past its data part.
pub(crate) async fn await_threshold(seg: &mut Segment, rank: usize, creator_pid: u32) -> Result<usize> {
    let (mut served, mut dst) = (0, Vec::new());
    let mut polls = LivenessCadence::default();
    std::future::poll_fn(|_| {
        if let Some(t) = seg.refresh_cma_threshold()? {
            return Poll::Ready(Ok(t));
        }
        if rank == 1 && serve_round(seg, &mut served, &mut dst)? {
            return Poll::Pending;
        }
        if polls.due()
            && let Some(e) = stopped(seg, 0, creator_pid, "finishing the team's creation")?
        {
            return Poll::Ready(Err(e));
        }
        Poll::Pending
    })
    .await
}

/// The error that ends a wait for rank `r` (pid `pid`, 0: unknown) of
/// `seg`'s team, if it has stopped: it left or failed (its `left` word, a
/// failure naming its cause), or its process is gone (`what`: what this
/// rank waited for it to do).
fn stopped(seg: &Segment, r: usize, pid: u32, what: &str) -> Result<Option<Error>> {
    // Relaxed: a late view only delays the error.
    let left = seg.ctrl(r)?.left.load(Ordering::Relaxed);
    Ok(gone(r, seg.layout().ranks, left).map(|(e, _)| e).or_else(|| dead_among([(r, pid)], what).map(|(_, e)| e)))
}

/// Rank 1's part of a round, if rank 0 has handed it one it has not
/// served yet (`served`: the last turn it served): copy the round out of
/// rank 0's data part into `dst`, timed, and hand the time back. Whether
/// it served one.
fn serve_round(seg: &Segment, served: &mut u64, dst: &mut Vec<u8>) -> Result<bool> {
    let cells = seg.probe_cells()?;
    // Acquire: pairs with rank 0's Release of the turn.
    let turn = cells.turn.load(Ordering::Acquire);
    if turn % 2 == 0 || turn == *served {
        return Ok(false);
    }
    // Relaxed: published by the turn. Untrusted: a range of rank 0's data part.
    let bytes = cells.size.load(Ordering::Relaxed);
    let from = usize::try_from(bytes)
        .ok()
        .filter(|&b| b <= crossover::LARGEST)
        .and_then(|b| seg.data(0, 0).and_then(|d| d.range(0, b)).ok());
    let from = from.ok_or_else(|| {
        Error::invalid_param(format!(
            "shm team rank 0 asked rank 1 to time a copy of {bytes} bytes, past its data part or the {} that \
             the timing uses",
            crossover::LARGEST
        ))
    })?;
    dst.resize(from.len(), 0);
    // SAFETY: `dst` lives, unmoved, until the copy below is done, and only
    // this MemRef touches it meanwhile.
    let into = unsafe { MemRef::from_mut_slice(dst) };
    let t = Instant::now();
    into.copy_host_from(&from)?;
    let ns = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
    // Relaxed: published by the turn's Release below.
    cells.out_ns.store(ns, Ordering::Relaxed);
    *served = turn;
    cells.turn.store(turn + 1, Ordering::Release);
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shm::layout::Layout;

    #[test]
    fn rank_1_serves_each_round_once_and_refuses_sizes_past_the_data_part() {
        let name = Segment::name(&format!("shmtl-probeserve{}", std::process::id()), 0x3a, 0xcf, "p1t2n3");
        let seg = Segment::create(&name, Layout::new(2, 4096).unwrap(), 0xcf, false, None).unwrap();
        let cells = seg.probe_cells().unwrap();
        let (mut served, mut dst) = (0, Vec::new());
        assert!(!serve_round(&seg, &mut served, &mut dst).unwrap(), "no round handed yet");
        cells.size.store(1024, Ordering::Relaxed);
        cells.turn.store(1, Ordering::Release);
        assert!(serve_round(&seg, &mut served, &mut dst).unwrap());
        assert_eq!((cells.turn.load(Ordering::Acquire), dst.len()), (2, 1024), "handed back, copied");
        assert!(!serve_round(&seg, &mut served, &mut dst).unwrap(), "rank 0's turn now");
        // A header is input: a size past the data part (4 KiB here), or
        // one no timing uses, is an error naming it, not a copy.
        for bytes in [8192, u64::MAX] {
            cells.size.store(bytes, Ordering::Relaxed);
            cells.turn.fetch_add(1, Ordering::Release);
            let e = serve_round(&seg, &mut served, &mut dst).expect_err("past the data part").to_string();
            assert!(e.contains(&format!("copy of {bytes} bytes")), "{e}");
            cells.turn.fetch_add(1, Ordering::Release);
        }
    }
}
