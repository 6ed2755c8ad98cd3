//! Where single copy starts paying on this machine: the default of
//! `UCC_TL_SHM_CMA_THRESHOLD` ("auto"), measured once per process.
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
//! single copy at the first size where the read beats staging's extra
//! copy by that round ([`threshold_from`]); on each VM above that gives
//! its measured crossover. The team takes its first rank's figure
//! (`segment.rs`), so that every member chooses alike.
//!
//! Ranks measuring at once slow each other's reads (25–35 % on the
//! family-25 VM), so the figure there is 64 KiB or, now and then, 128 KiB:
//! sizes between which the two paths are within ±15 % of each other.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Nanoseconds a byte that staging costs more than single copy's read
/// leaves to pay for (the second copy, across cores): 0.111 and 0.124 on
/// the two AMD VMs.
const STAGED_NS_PER_BYTE: f64 = 0.11;

/// Nanoseconds of single copy's fixed cost past its read, net of staging's
/// fixed cost (its status round). With [`STAGED_NS_PER_BYTE`], each VM's
/// crossover allows a range: 400–1 050 on the family-26 VM, up to 730 on
/// the Intel VM (whose 32 KiB read, 2.87 µs, then just pays: it may land
/// on 64 KiB there), 50–1 350 on the family-25 VM.
const SINGLE_COPY_EXTRA_NS: f64 = 700.0;

/// The sizes tried, smallest first: powers of two from 4 KiB to 1 MiB.
const SMALLEST: usize = 4 << 10;
const LARGEST: usize = 1 << 20;

/// Untimed reads per size first: a fresh process's first reads of a
/// fresh buffer are slower (64 KiB on the family-25 VM: the fastest of 16
/// right away 5.85–7.7 µs, after 8 untimed 5.84–5.90).
const WARMUPS: usize = 8;

/// Reads timed per size; the fastest counts (a preempted one is slower).
const READS: usize = 32;

/// The measured default of `UCC_TL_SHM_CMA_THRESHOLD`, once per process:
/// the smallest message size at which single copy beats staging here, or
/// `usize::MAX` (never) where the kernel refuses the read or it never
/// pays up to 1 MiB.
pub(crate) fn measured_threshold() -> usize {
    static THRESHOLD: OnceLock<usize> = OnceLock::new();
    *THRESHOLD.get_or_init(|| {
        let t = threshold_from(measure);
        ferrocoll_core::log_debug!(
            "shm: single copy pays from {t} bytes on this machine (UCC_TL_SHM_CMA_THRESHOLD=auto)"
        );
        t
    })
}

/// The smallest size (a power of two, [`SMALLEST`] to [`LARGEST`]) whose
/// read `read_time(size)` leaves single copy faster than staging; sizes
/// are tried in order, so a fast machine stops after a few small reads.
/// `usize::MAX` when none does or a read fails (`None`).
pub(crate) fn threshold_from(mut read_time: impl FnMut(usize) -> Option<Duration>) -> usize {
    let mut size = SMALLEST;
    while size <= LARGEST {
        let Some(read) = read_time(size) else { return usize::MAX };
        let read_ns = read.as_nanos() as f64;
        if read_ns + SINGLE_COPY_EXTRA_NS <= size as f64 * STAGED_NS_PER_BYTE {
            return size;
        }
        size *= 2;
    }
    usize::MAX
}

/// The fastest of [`READS`] cross-memory reads of `size` bytes of this
/// process's own memory (after [`WARMUPS`] untimed ones); `None` if the
/// kernel refuses them.
fn measure(size: usize) -> Option<Duration> {
    let src = vec![1u8; size];
    let mut dst = vec![0u8; size];
    let pid = std::process::id();
    let addr = src.as_ptr() as u64;
    for _ in 0..WARMUPS {
        ferrocoll_transport::cma::read(pid, addr, &mut dst).ok()?;
    }
    let mut best = Duration::MAX;
    for _ in 0..READS {
        let t = Instant::now();
        ferrocoll_transport::cma::read(pid, addr, &mut dst).ok()?;
        best = best.min(t.elapsed());
    }
    Some(best)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A read time of `fixed_ns` plus `ns_per_byte` a byte.
    fn machine(fixed_ns: f64, ns_per_byte: f64) -> impl FnMut(usize) -> Option<Duration> {
        move |size| Some(Duration::from_nanos((fixed_ns + ns_per_byte * size as f64) as u64))
    }

    #[test]
    fn each_machine_gets_its_own_crossover() {
        // The family-25 AMD VM's reads (4 KiB 1.26 µs, 16 KiB 2.14, 32 KiB 3.3, 64 KiB 5.4).
        let zen4 = |size| {
            let us = match size {
                4096 => 1.26,
                8192 => 1.51,
                16384 => 2.14,
                32768 => 3.30,
                65536 => 5.43,
                _ => 9.8 * size as f64 / 131072.0,
            };
            Some(Duration::from_nanos((us * 1000.0) as u64))
        };
        assert_eq!(threshold_from(zen4), 64 << 10);
        // The Intel VM's: 16 KiB 1.84 µs, 64 KiB 4.93.
        assert_eq!(threshold_from(machine(810.0, 0.063)), 32 << 10);
        // The family-26 AMD VM's: 16 KiB 0.75 µs, 64 KiB 2.56.
        assert_eq!(threshold_from(machine(350.0, 0.025)), 16 << 10);
        // A machine whose read is nearly free starts where staging's extra
        // copy outgrows single copy's extra round (0.7 µs: 6.4 KiB).
        assert_eq!(threshold_from(machine(10.0, 0.01)), 8 << 10);
    }

    #[test]
    fn a_refused_or_never_paying_read_means_never() {
        assert_eq!(threshold_from(|_| None), usize::MAX);
        assert_eq!(threshold_from(machine(1000.0, 0.2)), usize::MAX, "slower a byte than staging");
        let mut tried = Vec::new();
        threshold_from(|size| {
            tried.push(size);
            (size < 16 << 10).then_some(Duration::from_micros(100))
        });
        assert_eq!(tried, [4 << 10, 8 << 10, 16 << 10], "stops at the first refusal");
    }

    #[test]
    fn every_member_takes_the_first_ranks_threshold() {
        use crate::shm::test_support::threads_with;
        use crate::shm::{CMA_MEASURED, ShmConfig};
        use ferrocoll_core::config::Config;
        let auto = ShmConfig::from_config(&Config::new()).unwrap();
        assert_eq!(auto.cma_threshold, CMA_MEASURED, "measured when a team is created, not before");
        // The first rank's figure, whatever the others would have measured.
        let first = |rank| ShmConfig { cma_threshold: if rank == 0 { 40 << 10 } else { CMA_MEASURED }, ..auto.clone() };
        let team = threads_with("crossover-given", 3, first);
        assert!(team.iter().all(|t| t.config.cma_threshold == 40 << 10));
        // "auto" on the first rank: its measure, on every member.
        let team = threads_with("crossover-auto", 2, |_| auto.clone());
        assert!(team.iter().all(|t| t.config.cma_threshold == measured_threshold()));
    }

    #[test]
    fn this_machine_measures_a_threshold_in_range_or_never() {
        let t = measured_threshold();
        assert!(t == usize::MAX || (SMALLEST..=LARGEST).contains(&t) && t.is_power_of_two(), "{t}");
    }
}
