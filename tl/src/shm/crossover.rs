//! Where single copy starts paying on this machine: the default of
//! `UCC_TL_SHM_CMA_THRESHOLD` ("auto"), measured once per context (with
//! a peer) or once per process (alone).
//!
//! A staged message is copied twice (the giver's copy into the segment, the
//! taker's out of it, across cores); single copy copies it once with
//! `process_vm_readv`, whose system call and page pinning cost what they
//! cost on the machine — and that is what differs between machines. Three
//! 2-core KVM VMs measured (BENCHMARKS.md, tenth, sixteenth and
//! twenty-fourth rounds):
//!
//! | VM | read of 16 KiB | of 64 KiB | single copy pays from |
//! |---|---|---|---|
//! | AMD EPYC, family 26 | 0.75 µs | 2.56 µs | 8–16 KiB |
//! | Intel Xeon | 1.84 | 4.93 | 32 KiB |
//! | AMD EPYC, family 25 | 2.43 | 5.85 | 64 KiB |
//!
//! - staging's time grows by ~0.11 ns a byte (bcast, 2 ranks: 0.111 on the
//!   family-26 VM, 0.124 on the family-25 one);
//! - single copy's collective costs its read plus ~0.7 µs more than
//!   staging's fixed cost (its status round);
//! - a fixed 16 KiB default, the family-26 VM's, cost the family-25 VM up
//!   to 4× in the mid sizes (gather of 8 KiB blocks 3.12 µs by single copy,
//!   0.78 staged).
//!
//! So the library times the read here ([`measure`]: a read of this
//! process's own memory, the same kernel path as a peer's) and starts
//! single copy at the first size where the read beats staging's two copies
//! by that round ([`threshold_from`]). The team takes its first rank's
//! figure (`segment.rs`), so that every member chooses alike.
//!
//! What staging's copies cost is not the same on every machine either, nor
//! in every mode of one: the family-25 VM has spells (seconds long) in
//! which a line passed between its cores costs 3–4× its usual time, and
//! then bcast of 32 KiB staged took 16–22 µs where single copy, whose cost
//! did not move, took 5–6 (BENCHMARKS.md, thirty-seventh round): there
//! single copy paid from 8 KiB, while a constant 0.11 ns a byte for
//! staging still said 64 KiB. Most of that cost is the giver's copy in,
//! whose every line must first be taken back from the taker that read it
//! last round; the taker's copy out costs a fraction of it. So where a
//! team has a second rank on a core of its own, its first two ranks time
//! the two copies through the segment as the team is created
//! (`staging_probe.rs`: the giver times its copy in, the taker its copy
//! out), once per context (`TeamSetup::probed`); elsewhere (a team of
//! one, ranks that outnumber their cores) staging is taken to cost
//! [`STAGED_NS_PER_BYTE`].
//!
//! Ranks measuring at once slow each other's reads (25–35 % on the
//! family-25 VM), so the figure there is 64 KiB or, now and then, 128 KiB:
//! sizes between which the two paths are within ±15 % of each other.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Nanoseconds a byte that staging's two copies cost where they are not
/// timed (the team has no second rank on a core of its own): 0.111 and
/// 0.124 on the two AMD VMs' bcast in their usual mode.
const STAGED_NS_PER_BYTE: f64 = 0.11;

/// Nanoseconds of single copy's fixed cost past its read, net of staging's
/// fixed cost (its status round). With [`STAGED_NS_PER_BYTE`], each VM's
/// crossover allows a range: 400–1 050 on the family-26 VM, up to 730 on
/// the Intel VM (whose 32 KiB read, 2.87 µs, then just pays: it may land
/// on 64 KiB there), 50–1 350 on the family-25 VM.
const SINGLE_COPY_EXTRA_NS: f64 = 700.0;

/// The sizes tried, smallest first: powers of two from 8 KiB to 1 MiB.
/// Not 4 KiB: on no machine measured did single copy pay there. Staged,
/// a message of up to 8 KiB goes inline (`inline.rs`: one line trip and
/// no data part, a flag's trip less than the halves): the copies timed
/// here are the same, and the 8 KiB step stays (bcast of 8 KiB blocks, 2
/// ranks: single copy 1.04–1.20 µs, inline 1.25–1.32 on a 2-core Intel
/// Xeon VM, whose figure is 16 KiB; BENCHMARKS.md, thirty-ninth round).
const SMALLEST: usize = 8 << 10;
pub(crate) const LARGEST: usize = 1 << 20;

/// Where single copy starts when staging, timed with a peer, still wins at
/// [`LARGEST`] (`staging_probe.rs`).
pub(crate) const PAST_CACHES: usize = 2 * LARGEST;

/// Untimed reads per size first: a fresh process's first reads of a
/// fresh buffer are slower (64 KiB on the family-25 VM: the fastest of 16
/// right away 5.85–7.7 µs, after 8 untimed 5.84–5.90).
const WARMUPS: usize = 8;

/// Reads timed per size; the fastest counts (a preempted one is slower).
const READS: usize = 32;

/// ... but no more of either than fit these times (at least
/// [`MIN_WARMUPS`] and [`MIN_READS`]): 40 reads of 1 MiB take ~3.6 ms, and
/// a machine where staging wins at every size reads them all (the VM's
/// fast mode: 7 ms of reads, 9.3 ms of timing, before these caps).
const WARMUPS_TIME: Duration = Duration::from_micros(250);
const READS_TIME: Duration = Duration::from_micros(500);
const MIN_WARMUPS: usize = 2;
const MIN_READS: usize = 4;

/// The measured default of `UCC_TL_SHM_CMA_THRESHOLD` where staging is
/// not timed ([`STAGED_NS_PER_BYTE`]), once per process: the smallest
/// message size at which single copy beats staging here, or `usize::MAX`
/// (never) where the kernel refuses the read or it never pays up to 1 MiB.
pub(crate) fn measured_threshold() -> usize {
    static THRESHOLD: OnceLock<usize> = OnceLock::new();
    *THRESHOLD.get_or_init(|| {
        let modelled = |size: usize| Duration::from_nanos((size as f64 * STAGED_NS_PER_BYTE) as u64);
        let t = threshold_from(measure, modelled);
        ferrocoll_core::log_debug!(
            "shm: single copy pays from {t} bytes on this machine (UCC_TL_SHM_CMA_THRESHOLD=auto, staging not timed)"
        );
        t
    })
}

/// The sizes tried, in order: powers of two, [`SMALLEST`] to [`LARGEST`].
/// A machine where single copy pays early stops after a few small ones.
pub(crate) fn sizes() -> impl Iterator<Item = usize> {
    std::iter::successors(Some(SMALLEST), |s| s.checked_mul(2)).take_while(|&s| s <= LARGEST)
}

/// Whether single copy beats staging at a size whose read takes `read`
/// and whose staging copies take `staged`.
pub(crate) fn single_copy_pays(read: Duration, staged: Duration) -> bool {
    read.as_nanos() as f64 + SINGLE_COPY_EXTRA_NS <= staged.as_nanos() as f64
}

/// The first of [`sizes`] at which single copy's read `read_time(size)`
/// beats staging's two copies `staged_time(size)`; `usize::MAX` when none
/// does or a read fails (`None`). (`staging_probe.rs` walks the sizes the
/// same way, timing staging with a peer.)
pub(crate) fn threshold_from(
    mut read_time: impl FnMut(usize) -> Option<Duration>,
    mut staged_time: impl FnMut(usize) -> Duration,
) -> usize {
    for size in sizes() {
        let Some(read) = read_time(size) else { return usize::MAX };
        if single_copy_pays(read, staged_time(size)) {
            return size;
        }
    }
    usize::MAX
}

/// The fastest of [`READS`] cross-memory reads of `size` bytes of this
/// process's own memory (after [`WARMUPS`] untimed ones; fewer where they
/// outlast [`WARMUPS_TIME`] and [`READS_TIME`]); `None` if the kernel
/// refuses them.
pub(crate) fn measure(size: usize) -> Option<Duration> {
    let src = vec![1u8; size];
    let mut dst = vec![0u8; size];
    let pid = std::process::id();
    let addr = src.as_ptr() as u64;
    let start = Instant::now();
    for n in 0..WARMUPS {
        if n >= MIN_WARMUPS && start.elapsed() > WARMUPS_TIME {
            break;
        }
        ferrocoll_transport::cma::read(pid, addr, &mut dst).ok()?;
    }
    let (mut best, start) = (Duration::MAX, Instant::now());
    for n in 0..READS {
        if n >= MIN_READS && start.elapsed() > READS_TIME {
            break;
        }
        let t = Instant::now();
        ferrocoll_transport::cma::read(pid, addr, &mut dst).ok()?;
        best = best.min(t.elapsed());
    }
    Some(best)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A time of `fixed_ns` plus `ns_per_byte` a byte.
    fn linear(fixed_ns: f64, ns_per_byte: f64) -> impl FnMut(usize) -> Duration {
        move |size| Duration::from_nanos((fixed_ns + ns_per_byte * size as f64) as u64)
    }

    /// [`linear`], as a read that never fails.
    fn machine(fixed_ns: f64, ns_per_byte: f64) -> impl FnMut(usize) -> Option<Duration> {
        let mut time = linear(fixed_ns, ns_per_byte);
        move |size| Some(time(size))
    }

    /// The family-25 AMD VM's reads (4 KiB 1.26 µs, 16 KiB 2.14, 32 KiB 3.3, 64 KiB 5.4).
    fn zen4(size: usize) -> Option<Duration> {
        let us = match size {
            4096 => 1.26,
            8192 => 1.51,
            16384 => 2.14,
            32768 => 3.30,
            65536 => 5.43,
            _ => 9.8 * size as f64 / 131072.0,
        };
        Some(Duration::from_nanos((us * 1000.0) as u64))
    }

    #[test]
    fn each_machine_gets_its_own_crossover() {
        let usual = || linear(0.0, STAGED_NS_PER_BYTE);
        assert_eq!(threshold_from(zen4, usual()), 64 << 10);
        // The Intel VM's: 16 KiB 1.84 µs, 64 KiB 4.93.
        assert_eq!(threshold_from(machine(810.0, 0.063), usual()), 32 << 10);
        // The family-26 AMD VM's: 16 KiB 0.75 µs, 64 KiB 2.56.
        assert_eq!(threshold_from(machine(350.0, 0.025), usual()), 16 << 10);
        // A machine whose read is nearly free starts where staging's extra
        // copy outgrows single copy's extra round (0.7 µs: 6.4 KiB).
        assert_eq!(threshold_from(machine(10.0, 0.01), usual()), 8 << 10);
    }

    #[test]
    fn staging_that_costs_more_starts_single_copy_sooner() {
        // The family-25 VM in its slow spells: staging ~0.5 ns a byte
        // (bcast of 8 KiB 4.6 µs staged, 3.4 by single copy).
        assert_eq!(threshold_from(zen4, linear(0.0, 0.5)), 8 << 10);
        // Staging that costs less than the read never loses.
        assert_eq!(threshold_from(zen4, linear(0.0, 0.05)), usize::MAX);
    }

    #[test]
    fn a_refused_or_never_paying_read_means_never() {
        let usual = || linear(0.0, STAGED_NS_PER_BYTE);
        assert_eq!(threshold_from(|_| None, usual()), usize::MAX);
        assert_eq!(threshold_from(machine(1000.0, 0.2), usual()), usize::MAX, "slower a byte than staging");
        let mut tried = Vec::new();
        threshold_from(
            |size| {
                tried.push(size);
                (size < 32 << 10).then_some(Duration::from_micros(100))
            },
            usual(),
        );
        assert_eq!(tried, [8 << 10, 16 << 10, 32 << 10], "stops at the first refusal");
        assert_eq!(sizes().collect::<Vec<_>>(), (13..=20).map(|p| 1 << p).collect::<Vec<_>>());
    }

    #[test]
    fn every_member_takes_the_first_ranks_threshold() {
        use crate::shm::test_support::{threads_in, threads_with};
        use crate::shm::{CMA_MEASURED, ShmConfig};
        use ferrocoll_core::config::Config;
        use std::sync::Arc;
        let auto = ShmConfig::from_config(&Config::new()).unwrap();
        assert_eq!(auto.cma_threshold, CMA_MEASURED, "measured when a team is created, not before");
        // The first rank's figure, whatever the others would have measured.
        let first = |rank| ShmConfig { cma_threshold: if rank == 0 { 40 << 10 } else { CMA_MEASURED }, ..auto.clone() };
        let team = threads_with("crossover-given", 3, first);
        assert!(team.iter().all(|t| t.config.cma_threshold == 40 << 10));
        // "auto" on the first rank: timed with rank 1, on every member, and
        // kept for the context's later teams.
        let probed = Arc::new(OnceLock::new());
        let team = threads_in("crossover-auto", 3, &probed, |_| auto.clone());
        let figure = *probed.get().expect("timed with rank 1");
        assert!(figure == usize::MAX || figure == PAST_CACHES || sizes().any(|s| s == figure), "{figure}");
        assert!(team.iter().all(|t| t.config.cma_threshold == figure));
        let again = threads_in("crossover-again", 2, &probed, |_| auto.clone());
        assert!(again.iter().all(|t| t.config.cma_threshold == figure));
    }

    #[test]
    fn one_thread_polling_both_ranks_in_turn_times_staging_too() {
        // As UCC's gtest drives the contexts of one process: one thread
        // polls every member's creation in turn. Neither rank's poll may
        // wait for the other's.
        use crate::shm::segment::Segment;
        use crate::shm::team::{ShmTeam, TeamSetup};
        use crate::shm::{CMA_MEASURED, ShmConfig};
        use ferrocoll_core::config::Config;
        use std::sync::Arc;
        use std::task::{Context, Poll, Waker};
        let config = ShmConfig::from_config(&Config::new()).unwrap();
        assert_eq!(config.cma_threshold, CMA_MEASURED);
        let name = Segment::name(&format!("shmtl-onethread{}", std::process::id()), 0x2d, 0xce, "p1t2n3");
        let probed = Arc::new(OnceLock::new());
        let mut ranks: Vec<_> = (0..2)
            .map(|rank| {
                let setup = TeamSetup {
                    name: name.clone(),
                    cookie: 0xce,
                    oversubscribed: false,
                    pids: vec![0; 2],
                    probed: probed.clone(),
                };
                let mcs = crate::heap_mc::heap_mcs();
                Box::pin(ShmTeam::create_shared(setup, rank, 2, mcs, config.clone()))
            })
            .collect();
        let mut done: Vec<Option<Arc<ShmTeam>>> = vec![None, None];
        let mut cx = Context::from_waker(Waker::noop());
        let deadline = Instant::now() + Duration::from_secs(10);
        while done.iter().any(Option::is_none) {
            assert!(Instant::now() < deadline, "team creation still going after 10 s");
            for (rank, fut) in ranks.iter_mut().enumerate() {
                if done[rank].is_none()
                    && let Poll::Ready(team) = fut.as_mut().poll(&mut cx)
                {
                    done[rank] = Some(team.expect("team"));
                }
            }
        }
        let figure = *probed.get().expect("rank 0 timed staging with rank 1");
        assert!(done.iter().flatten().all(|t| t.config.cma_threshold == figure));
    }

    #[test]
    fn this_machine_measures_a_threshold_in_range_or_never() {
        let t = measured_threshold();
        assert!(t == usize::MAX || (SMALLEST..=LARGEST).contains(&t) && t.is_power_of_two(), "{t}");
    }
}
