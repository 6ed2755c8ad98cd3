//! The host memmove every copy between host buffers comes down to
//! ([`crate::MemRef::copy_host_from`]): the C library's, but for one case
//! where it is an order of magnitude slow.
//!
//! glibc before 2.40 copies from a few KiB up to its non-temporal threshold
//! with `rep movsb` on CPUs that say their short `rep movsb` is fast (FSRM),
//! AMD's Zen 3 and 4 among them, whose microcode runs 12–20× slower when
//! the destination starts 1–15 bytes past the source modulo the 4-KiB page:
//! on a family-25 AMD EPYC VM with glibc 2.36, 3.5 GB/s against 45–90
//! (BENCHMARKS.md, forty-first round; glibc bug 30994). A user's buffer
//! can sit at any offset from the segment or from another buffer, so a
//! copy whose source and destination meet that way goes through a plain
//! vector loop instead (34–45 GB/s there). glibc itself keeps Intel's CPUs
//! off `rep movsb` at these distances, so there the loop stands in for
//! glibc's own vector loop (not measured on an Intel CPU).

/// Copies shorter than this never use `rep movsb` (glibc's lowest threshold,
/// for 16-byte vectors, is 2 KiB), so they always go to the C library.
const SLOW_FROM: usize = 2048;

/// Whether a copy from `src` to `dst` of `len` bytes is one that `rep movsb`
/// runs slowly on Zen (glibc's, or the kernel's copy to user memory on CPUs
/// with FSRM): long enough for glibc to use it, not overlapping
/// (overlapping copies glibc makes backwards, without `rep movsb`), and the
/// destination 1–63 bytes past the source modulo the page (1–15 measured;
/// up to a cache line, as glibc's own check for Intel). Never on other
/// architectures.
pub fn page_aliased(dst: usize, src: usize, len: usize) -> bool {
    cfg!(target_arch = "x86_64")
        && len >= SLOW_FROM
        && dst.abs_diff(src) >= len
        && (1..64).contains(&(dst.wrapping_sub(src) % 4096))
}

/// Copy `len` bytes from `src` to `dst` (they may overlap: a memmove).
///
/// # Safety
/// `src..src+len` is readable and `dst..dst+len` writable host memory, and
/// nothing else accesses either meanwhile.
#[inline]
pub unsafe fn memmove(dst: *mut u8, src: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    if page_aliased(dst as usize, src as usize, len) {
        // SAFETY: the caller's promise; the ranges do not overlap (checked).
        unsafe { x86::copy_forward(dst, src, len) };
        return;
    }
    // SAFETY: the caller's promise; `ptr::copy` is memmove.
    unsafe { std::ptr::copy(src, dst, len) };
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_storeu_si128};

    /// Bytes per iteration: four 16-byte vectors, a cache line.
    const STEP: usize = 64;

    /// Copy `len` bytes forward with SSE2 loads and stores (part of x86-64).
    ///
    /// # Safety
    /// As for `memmove`, and the ranges do not overlap.
    pub(super) unsafe fn copy_forward(dst: *mut u8, src: *const u8, len: usize) {
        let body = len / STEP * STEP;
        let mut i = 0;
        while i < body {
            // SAFETY: `i + STEP <= len`, so the 64 bytes at `i` lie in both
            // ranges; the loads and stores are unaligned ones.
            unsafe {
                let (s, d) = (src.add(i).cast::<__m128i>(), dst.add(i).cast::<__m128i>());
                let v = [
                    _mm_loadu_si128(s),
                    _mm_loadu_si128(s.add(1)),
                    _mm_loadu_si128(s.add(2)),
                    _mm_loadu_si128(s.add(3)),
                ];
                _mm_storeu_si128(d, v[0]);
                _mm_storeu_si128(d.add(1), v[1]);
                _mm_storeu_si128(d.add(2), v[2]);
                _mm_storeu_si128(d.add(3), v[3]);
            }
            i += STEP;
        }
        // SAFETY: the tail, under 64 bytes, inside both ranges; too short for
        // `rep movsb`.
        unsafe { std::ptr::copy_nonoverlapping(src.add(body), dst.add(body), len - body) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_long_disjoint_copies_just_past_their_source_are_aliased() {
        let (src, len) = (0x10_0000usize, 64 << 10);
        if !cfg!(target_arch = "x86_64") {
            assert!(!page_aliased(src + (1 << 20) + 8, src, len), "only x86-64 has the slow rep movsb");
            return;
        }
        for d in [1usize, 8, 15, 63] {
            assert!(page_aliased(src + 20 * 4096 + d, src, len), "{d} past, pages apart");
            assert!(page_aliased(src + (1 << 20) + d, src, len), "{d} past, far apart");
        }
        assert!(!page_aliased(src + (1 << 20), src, len), "same page offset");
        assert!(!page_aliased(src + (1 << 20) + 64, src, len), "a cache line past");
        assert!(!page_aliased(src + (1 << 20) - 8, src, len), "before its source's offset");
        assert!(!page_aliased(src + 8, src, len), "overlapping: glibc copies it backwards");
        assert!(!page_aliased(src + (1 << 20) + 8, src, SLOW_FROM - 1), "too short for rep movsb");
        assert!(page_aliased(src - (1 << 20) + 8, src, len), "below its source, 8 past modulo the page");
    }

    #[test]
    fn copies_every_byte_at_any_distance_and_length() {
        // Source page-aligned, destination a megabyte on plus `gap`: the
        // loop for gaps 1–63 from 2 KiB, the C library otherwise.
        let mut buf = vec![0u8; 3 << 20];
        let base = buf.as_ptr() as usize;
        let so = base.next_multiple_of(4096) - base;
        for len in [0usize, 1, 63, 64, 65, 2047, 2048, 2049, 4096 + 17, 100_003] {
            for gap in [0usize, 1, 8, 15, 16, 63, 64, 4095] {
                let dof = so + (1 << 20) + gap;
                buf.fill(0xAA);
                for (i, b) in buf[so..so + len].iter_mut().enumerate() {
                    *b = (i % 251) as u8;
                }
                let aliased = page_aliased(base + dof, base + so, len);
                let expected = cfg!(target_arch = "x86_64") && len >= SLOW_FROM && (1..64).contains(&gap);
                assert_eq!(aliased, expected, "len {len}, gap {gap}");
                // SAFETY: both ranges lie inside `buf`, a megabyte apart.
                unsafe { memmove(buf.as_mut_ptr().add(dof), buf.as_ptr().add(so), len) };
                let d = &buf[dof..dof + len];
                assert!(d.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8), "len {len}, gap {gap}");
                assert!(buf[so + len..dof].iter().all(|&b| b == 0xAA), "wrote before the range");
                assert!(buf[dof + len..].iter().all(|&b| b == 0xAA), "wrote past the range");
            }
        }
    }

    #[test]
    fn overlapping_copies_stay_memmoves() {
        for shift in [1usize, 8, 15, 64, 3000] {
            let len = 8192;
            let mut v: Vec<u8> = (0..len + shift).map(|i| (i * 7) as u8).collect();
            let want: Vec<u8> = v[..len].to_vec();
            // SAFETY: both ranges lie inside `v`; memmove allows the overlap.
            unsafe { memmove(v.as_mut_ptr().add(shift), v.as_ptr(), len) };
            assert_eq!(&v[shift..], &want[..], "forward by {shift}");
        }
    }
}
