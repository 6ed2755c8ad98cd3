//! Streaming copies: copies whose destination bypasses the caches.
//!
//! A plain copy into memory that is not in cache first reads every
//! destination line (read for ownership), then writes it back when it is
//! evicted: three bytes of memory traffic per byte copied, and it evicts
//! data that is still wanted (a shm segment's halves, the source). When the
//! destination is part of a buffer larger than the cache, nothing gains from
//! having it in cache: non-temporal stores write it straight to memory (two
//! bytes of traffic per byte) and leave the cache to the data that is reused.
//! Callers choose (they know the whole buffer's size; a copy sees a piece).
//!
//! x86-64 only (SSE2's `movntdq`, part of the base instruction set, so no
//! run-time detection); elsewhere, and for the unaligned head and the tail,
//! an ordinary copy.

/// Copy `src` into `dst` (same length, not overlapping) with non-temporal
/// stores where the CPU has them. The stores are fenced before returning,
/// so the copy is visible to other threads that synchronise with this one
/// afterwards, as an ordinary copy would be.
pub(crate) fn copy_streaming(dst: &mut [u8], src: &[u8]) {
    debug_assert_eq!(dst.len(), src.len());
    #[cfg(target_arch = "x86_64")]
    {
        x86::copy(dst, src);
    }
    #[cfg(not(target_arch = "x86_64"))]
    dst.copy_from_slice(src);
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};

    /// Bytes per loop iteration: one cache line, so that each line is
    /// written whole by consecutive stores (the write-combining buffer then
    /// sends full lines to memory).
    const STEP: usize = 64;

    pub(super) fn copy(dst: &mut [u8], src: &[u8]) {
        let n = dst.len().min(src.len());
        // The head up to the first 16-byte aligned destination byte.
        let head = dst.as_ptr().align_offset(16).min(n);
        dst[..head].copy_from_slice(&src[..head]);
        let body = (n - head) / STEP * STEP;
        let (d, s) = (&mut dst[head..head + body], &src[head..head + body]);
        for (d, s) in d.chunks_exact_mut(STEP).zip(s.chunks_exact(STEP)) {
            let (dp, sp) = (d.as_mut_ptr().cast::<__m128i>(), s.as_ptr().cast::<__m128i>());
            for i in 0..STEP / 16 {
                // SAFETY: `d` and `s` are STEP bytes long, so the 16 bytes at
                // `i * 16` lie inside both; `d` starts 16-byte aligned (the head
                // was peeled off and STEP is a multiple of 16), as movntdq
                // requires; the load is unaligned. SSE2 is part of x86-64.
                unsafe { _mm_stream_si128(dp.add(i), _mm_loadu_si128(sp.add(i))) };
            }
        }
        // Non-temporal stores are weakly ordered: fence them, so that the
        // release store a caller publishes next is ordered after them.
        // SAFETY: sfence has no operands; SSE is part of x86-64.
        unsafe { _mm_sfence() };
        let tail = head + body;
        dst[tail..n].copy_from_slice(&src[tail..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_every_byte_at_any_alignment_and_length() {
        let src: Vec<u8> = (0..5000u32).map(|i| (i * 31 + 7) as u8).collect();
        for len in [0usize, 1, 15, 16, 63, 64, 65, 200, 4095, 4096] {
            for (so, doff) in [(0, 0), (1, 0), (0, 1), (3, 13), (16, 7)] {
                let mut dst = vec![0xAAu8; len + doff + 32];
                copy_streaming(&mut dst[doff..doff + len], &src[so..so + len]);
                assert_eq!(&dst[doff..doff + len], &src[so..so + len], "len {len} at {so}->{doff}");
                assert!(dst[..doff].iter().all(|&b| b == 0xAA), "wrote before the range");
                assert!(dst[doff + len..].iter().all(|&b| b == 0xAA), "wrote past the range");
            }
        }
    }
}
