//! Asking for every line a reader is about to copy out of a peer's region
//! at once, as soon as it knows that the peer has written them.
//!
//! A line another core has just written crosses to the reader's core on a
//! miss: on the 2-core AMD EPYC VM 70–250 ns, most of a small collective.
//! The reader sees an epoch's tag in the first line of a peer's inline
//! region, which brings the payload's first 32 bytes along (`inline.rs`);
//! the payload's other lines miss when the copy or the reduction reaches
//! them. Where their addresses follow from this rank's own call, the
//! core's out-of-order window issues those misses together anyway. Where
//! they follow from what the peer wrote — a v-variant's blocks lie where
//! the giver's size table says (`alg/meta.rs`) — each miss waits for the
//! one before: the table's line, then the block's. A prefetch of the lines
//! the reader will likely read, issued right after the wait, fetches them
//! together. Measured on that VM (BENCHMARKS.md, twenty-sixth round).
//!
//! A prefetch is a hint: it cannot fault, changes no value, and a line it
//! fetches that the reader then does not read costs bandwidth only.

/// Bytes between two prefetched addresses: the smallest cache line of the
/// CPUs this runs on (a CPU with 128-byte lines gets each line twice).
const STRIDE: usize = 64;

/// The most bytes one call asks for: an inline region's payload. Past
/// that the copy's own stream of misses trains the hardware's prefetchers.
const MOST: usize = super::layout::INLINE_PAYLOAD;

/// Ask for the cache line holding `p`, to be read soon.
#[inline(always)]
fn prefetch_line(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 is a hint: it reads no architectural state, writes
    // nothing and never faults, whatever the address.
    unsafe {
        std::arch::asm!("prefetcht0 [{0}]", in(reg) p, options(nostack, preserves_flags, readonly));
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: PRFM is a hint, as above.
    unsafe {
        std::arch::asm!("prfm pldl1keep, [{0}]", in(reg) p, options(nostack, preserves_flags, readonly));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let _ = p;
}

/// Ask for every line of the `len` bytes at `start` (of the first
/// [`MOST`] of them).
pub(crate) fn prefetch_bytes(start: *const u8, len: usize) {
    let first = (start as usize) & !(STRIDE - 1);
    let end = (start as usize).saturating_add(len.min(MOST));
    // Addresses only: `wrapping_add` from `start` keeps the pointer's
    // provenance, and nothing dereferences it.
    for at in (first..end).step_by(STRIDE) {
        prefetch_line(start.wrapping_add(at.wrapping_sub(start as usize)));
    }
}

#[cfg(test)]
mod tests {
    /// Prefetching runs on this CPU and leaves the bytes alone, whatever
    /// the alignment and length (empty, within a line, across lines).
    #[test]
    fn prefetching_leaves_the_bytes_alone() {
        let bytes: Vec<u8> = (0..=255u8).collect();
        for (at, len) in [(0, 0), (3, 1), (1, 64), (17, 200), (0, 256), (255, usize::MAX)] {
            super::prefetch_bytes(bytes[at..].as_ptr(), len);
        }
        assert!(bytes.iter().enumerate().all(|(i, &b)| b == i as u8));
    }
}
