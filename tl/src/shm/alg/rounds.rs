//! Cutting data into the rounds that fit a half of a rank's area (or a slot of it).

use ferrocoll_core::{Error, MemRef, Result};

/// Rounds needed to move `len` bytes `cap` bytes at a time (at least one,
/// so every rank walks the same epochs even when it has nothing to move).
pub(crate) fn rounds(len: usize, cap: usize) -> usize {
    if cap == 0 { 1 } else { len.div_ceil(cap).max(1) }
}

/// Bytes `[start, start + len)` of round `k` when `total` bytes go `cap` at a time.
pub(crate) fn piece(total: usize, cap: usize, k: usize) -> (usize, usize) {
    let start = (k * cap).min(total);
    (start, cap.min(total - start))
}

/// `cap` rounded down to whole elements (at least one element).
pub(crate) fn whole(cap: usize, es: usize) -> usize {
    match cap.checked_div(es) {
        Some(n) => n.max(1) * es,
        None => cap,
    }
}

/// Round `k`'s piece of `buf`, `cap` bytes a round.
pub(crate) fn piece_of(buf: MemRef, cap: usize, k: usize) -> Result<MemRef> {
    let (start, len) = piece(buf.len(), cap, k);
    buf.range(start, len)
}

/// The largest value, as usize, of a list of u64 (v-variants' sizes).
pub(crate) fn max_len(v: impl IntoIterator<Item = u64>) -> Result<usize> {
    let m = v.into_iter().max().unwrap_or(0);
    usize::try_from(m).map_err(|_| Error::internal(format!("size {m} does not fit in memory")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_cover_everything_once() {
        for total in [0usize, 1, 100, 4096, 10_001] {
            for cap in [1usize, 64, 4096] {
                let n = rounds(total, cap);
                let mut at = 0;
                for k in 0..n {
                    let (s, l) = piece(total, cap, k);
                    assert_eq!(s, at);
                    at += l;
                }
                assert_eq!(at, total);
                assert_eq!(piece(total, cap, n + 3).1, 0);
            }
        }
        assert_eq!(whole(100, 8), 96);
        assert_eq!(whole(3, 8), 8);
    }
}
