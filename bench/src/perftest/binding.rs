//! Which CPUs each rank may run on (its affinity: what `ferrocoll-run
//! --bind-to`, `mpirun --bind-to` or `taskset` left it), for the header:
//! a latency measured on ranks that share a core, or that the scheduler
//! moves, is not the same measurement.

use ferrocoll::{Coll, Result, Team};

use crate::run::bind::{CpuSet, cpu_list};

/// 64-bit words of a CPU mask: as many CPUs as the kernel's `cpu_set_t` holds.
const WORDS: usize = libc::CPU_SETSIZE as usize / 64;

/// Every rank's CPUs, gathered on every rank (a collective: all ranks call
/// it): `rank 0: CPU 0; rank 1: CPU 1`, or `none (every rank may use CPUs
/// 0-1)` when all ranks have the same set of several CPUs.
pub fn describe(team: &Team) -> Result<String> {
    let mine = CpuSet::of_this_process().map(|s| s.cpus()).unwrap_or_default();
    let mut words = [0u64; WORDS];
    for c in &mine {
        words[c / 64] |= 1 << (c % 64);
    }
    let mut all = vec![0u64; WORDS * team.size()];
    Coll::allgather(&words, &mut all).run(team)?;
    let sets: Vec<Vec<usize>> = all
        .chunks_exact(WORDS)
        .map(|w| (0..WORDS * 64).filter(|&c| w[c / 64] & (1 << (c % 64)) != 0).collect())
        .collect();
    Ok(summary(&sets))
}

fn summary(sets: &[Vec<usize>]) -> String {
    if sets.len() > 1 && sets.windows(2).all(|w| w[0] == w[1]) && sets[0].len() > 1 {
        return format!("none (every rank may use CPUs {})", cpu_list(&sets[0]));
    }
    let each: Vec<String> = sets
        .iter()
        .enumerate()
        .map(|(r, s)| match s.len() {
            0 => format!("rank {r}: unknown"),
            1 => format!("rank {r}: CPU {}", s[0]),
            _ => format!("rank {r}: CPUs {}", cpu_list(s)),
        })
        .collect();
    each.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries() {
        assert_eq!(summary(&[vec![0], vec![1]]), "rank 0: CPU 0; rank 1: CPU 1");
        assert_eq!(summary(&[vec![0, 1], vec![0, 1]]), "none (every rank may use CPUs 0-1)");
        assert_eq!(summary(&[vec![0, 1, 2, 3]]), "rank 0: CPUs 0-3");
        assert_eq!(summary(&[vec![], vec![2]]), "rank 0: unknown; rank 1: CPU 2");
    }
}
