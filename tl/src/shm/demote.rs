//! Handing a just-written flag's cache line towards the core that waits for it.
//!
//! A flag that another rank spins on crosses between cores by a snoop: the
//! waiter's next load misses and finds the line modified in the writer's
//! private cache. CLDEMOTE (Intel, from Sapphire Rapids and Tremont) moves
//! the line out to the shared last-level cache right after the store, where
//! the waiter's miss finds it sooner. Measured on the 2-core Intel Xeon VM
//! (BENCHMARKS.md, seventeenth round): a 2-rank barrier 4 % faster; done
//! for inline payloads as well it made allreduce and reduce slower (the
//! writer reads its own payload back), so only the flags are demoted.
//! Elsewhere the instruction is a hint that executes as a NOP (x86's
//! reserved hint-NOP space, `0F 1C`); on other architectures nothing.

/// Hint that the cache line holding `p` is next read by another core.
#[inline(always)]
pub(crate) fn demote<T>(p: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: CLDEMOTE reads and writes no memory and cannot fault (a hint);
    // `readonly` keeps the flag's store before it.
    unsafe {
        std::arch::asm!("cldemote [{0}]", in(reg) p as *const T, options(nostack, preserves_flags, readonly));
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    /// The hint runs on this CPU (a hint, or a NOP: no SIGILL) and leaves the value alone.
    #[test]
    fn a_demoted_flag_keeps_its_value() {
        let flag = AtomicU64::new(0);
        for e in 1..=3 {
            flag.store(e, Ordering::Release);
            super::demote(&flag);
            assert_eq!(flag.load(Ordering::Acquire), e);
        }
    }
}
