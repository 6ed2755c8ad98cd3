//! Where everything lies in a team's shared segment. Pure arithmetic, so
//! every rank computes the same offsets from the same parameters.
//!
//! ```text
//! [header: 1 line]
//! [control lines of rank 0] … [control lines of rank P-1]    CTRL bytes each
//! [call board of rank 0] … [call board of rank P-1]          BOARD_DEPTH entries of 64 bytes each
//! [rank 0: inline 0 … inline D-1] … [rank P-1: …]          INLINE bytes each, D = INLINE_DEPTH
//! [rank 0: half 0 (data H, results R) | half 1 (data H, results R)]
//! …
//! [rank P-1: …]
//! ```
//!
//! A collective runs in *epochs*; epoch `e` uses half `e % 2` of every
//! rank's area, so a rank may write epoch `e + 1` while slower ranks still
//! read epoch `e`. The data part holds what a rank publishes (its input, or
//! a chunk of it); the results part (`H / P`, rounded up) holds the slice it
//! reduced for the others to copy. The inline region of epoch `e`, the
//! `e % INLINE_DEPTH`-th of the rank's, holds a small payload right after
//! the epoch's tag and signature, in the same cache line: a reader that
//! sees the tag has the first bytes of the payload too (`inline.rs`).
//!
//! Sizes come from configuration and, at the members that open a segment,
//! from its creator's header: [`Layout::new`] computes the total with
//! checked arithmetic, and every offset below it then fits.

use ferrocoll_core::engine::board::{BOARD_DEPTH, ENTRY_WORDS};
use ferrocoll_core::{Error, Result};

/// Bytes of a line as the layout aligns things: two cache lines, so that
/// the adjacent-line prefetcher (which fetches a 64-byte line's 128-byte
/// buddy) does not make neighbouring regions share traffic.
pub(crate) const LINE: usize = 128;

/// Bytes of a rank's control lines: three LINEs, one for what readers of
/// a step wait on, one for `done`, one for what is read while waiting but
/// rarely written (`segment::Ctrl`).
pub(crate) const CTRL: usize = 3 * LINE;

/// Bytes of one call-board entry (`ferrocoll_core::engine::board`): a cache line.
pub(crate) const ENTRY: usize = ENTRY_WORDS * 8;

/// Bytes of one rank's call board.
const BOARD: usize = BOARD_DEPTH * ENTRY;

/// Bytes of the head of an inline region (tag, signature), before its payload.
pub(crate) const INLINE_HEAD: usize = 32;

/// Bytes of payload an inline region holds at least (`INLINE` holds a
/// few more, its last line's): 8 KiB. Payloads past the regions go through
/// the data halves, whose second line trip (the control line, then the
/// data) and `done` cost more than the bytes: 4 KiB, not 1 KiB, made 2 KiB
/// collectives on 2 ranks 0.66–0.89 of the time (BENCHMARKS.md, eighteenth
/// round); 8 KiB, not 4 KiB, made bcast and reduce of 8 KiB 0.84–0.88 of
/// it on 2 ranks, averaged over the ranks (the giving rank's own time
/// 0.67: its copy in, no flag round), and bcast, reduce and gather
/// 0.85–0.90 on 4 ranks over 2 cores (thirty-ninth round, a 2-core Intel
/// Xeon VM); smaller sizes alike.
pub(crate) const INLINE_PAYLOAD: usize = 8192;

/// Bytes of one inline region: a head and [`INLINE_PAYLOAD`], in whole
/// control lines (so that every region starts a line pair).
pub(crate) const INLINE: usize = (INLINE_HEAD + INLINE_PAYLOAD).div_ceil(LINE) * LINE;

/// Inline regions per rank, used in turn by the epochs that publish
/// inline: a rank may publish epoch `e` while slower ranks still read
/// `e - INLINE_DEPTH + 1` (`epoch.rs`, deep epochs). Deeper than the data
/// halves' two, so that a bcast's root or a reduce's other ranks, which
/// wait for nobody's data, run ahead of their readers instead of waiting
/// for them every other call: where ranks outnumber cores, every such wait
/// is a switch to another process.
pub(crate) const INLINE_DEPTH: usize = 8;

/// Geometry of a team segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Team size.
    pub ranks: usize,
    /// Bytes of the data part of a half (H).
    pub data: usize,
    /// Bytes of the results part of a half (R = H/P rounded up to a line).
    pub results: usize,
    /// Bytes of the whole segment (checked not to overflow).
    total: usize,
}

impl Layout {
    /// The layout for `ranks` ranks with `data` bytes per half (rounded up
    /// to a line, and to at least a line per rank, so that a P-th of a half
    /// holds any element); an error if the segment would not fit in memory.
    pub(crate) fn new(ranks: usize, data: usize) -> Result<Layout> {
        let n = ranks.max(1);
        // header + control lines + boards + INLINE_DEPTH inline regions and 2 halves of (data + results) per rank
        let sizes = LINE.checked_mul(n).and_then(|min| round_up(data.max(min), LINE)).and_then(|data| {
            let results = round_up(data.div_ceil(n), LINE)?;
            let halves = data.checked_add(results)?.checked_mul(2)?.checked_mul(ranks)?;
            let boards = BOARD.checked_mul(ranks)?;
            let inline = INLINE.checked_mul(INLINE_DEPTH)?.checked_mul(ranks)?;
            let total = CTRL
                .checked_mul(ranks)?
                .checked_add(LINE)?
                .checked_add(boards)?
                .checked_add(inline)?
                .checked_add(halves)?;
            (total <= isize::MAX as usize).then_some((data, results, total))
        });
        let (data, results, total) = sizes.ok_or_else(|| {
            Error::invalid_param(format!("a shm team segment for {ranks} ranks with {data}-byte halves is too large"))
        })?;
        Ok(Layout { ranks, data, results, total })
    }

    /// Bytes of one half.
    pub(crate) fn half(&self) -> usize {
        self.data + self.results
    }

    /// Offset of rank `r`'s control line.
    pub(crate) fn ctrl(&self, r: usize) -> usize {
        LINE + r * CTRL
    }

    /// Offset of entry `i` of rank `r`'s call board.
    pub(crate) fn board(&self, r: usize, i: usize) -> usize {
        LINE + self.ranks * CTRL + r * BOARD + i * ENTRY
    }

    /// Offset of rank `r`'s inline region for epoch `epoch`.
    pub(crate) fn inline_at(&self, r: usize, epoch: u64) -> usize {
        LINE + self.ranks * (CTRL + BOARD) + (INLINE_DEPTH * r + (epoch % INLINE_DEPTH as u64) as usize) * INLINE
    }

    fn area(&self, r: usize) -> usize {
        LINE + self.ranks * (CTRL + BOARD + INLINE_DEPTH * INLINE) + r * 2 * self.half()
    }

    /// Offset of rank `r`'s data part for epoch `epoch`.
    pub(crate) fn data_at(&self, r: usize, epoch: u64) -> usize {
        self.area(r) + (epoch % 2) as usize * self.half()
    }

    /// Offset of rank `r`'s results part for epoch `epoch`.
    pub(crate) fn results_at(&self, r: usize, epoch: u64) -> usize {
        self.data_at(r, epoch) + self.data
    }

    /// Total bytes of the segment.
    pub(crate) fn total(&self) -> usize {
        self.total
    }
}

fn round_up(x: usize, to: usize) -> Option<usize> {
    x.div_ceil(to).checked_mul(to)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_do_not_overlap() {
        for ranks in 1..20 {
            for data in [1, 100, 4096, 65536 + 3] {
                let l = Layout::new(ranks, data).unwrap();
                assert!(l.data >= data && l.data.is_multiple_of(LINE) && l.results * ranks >= l.data);
                let mut spans: Vec<(usize, usize)> = (0..ranks).map(|r| (l.ctrl(r), CTRL)).collect();
                for r in 0..ranks {
                    spans.extend((0..BOARD_DEPTH).map(|i| (l.board(r, i), ENTRY)));
                    spans.extend((0..INLINE_DEPTH as u64).map(|e| (l.inline_at(r, e), INLINE)));
                }
                for r in 0..ranks {
                    for e in 0..2 {
                        spans.push((l.data_at(r, e), l.data));
                        spans.push((l.results_at(r, e), l.results));
                    }
                }
                spans.push((0, LINE));
                spans.sort();
                for w in spans.windows(2) {
                    assert!(w[0].0 + w[0].1 <= w[1].0, "{ranks} ranks, {data} B: {w:?}");
                }
                let last = spans.last().unwrap();
                assert_eq!(last.0 + last.1, l.total());
                assert_eq!(l.area(ranks), l.total());
                assert!(l.data_at(0, 2) == l.data_at(0, 0) && l.data_at(0, 1) != l.data_at(0, 0));
                let depth = INLINE_DEPTH as u64;
                assert!(l.inline_at(0, depth) == l.inline_at(0, 0) && l.inline_at(0, depth - 1) != l.inline_at(0, 0));
                assert!((0..ranks).all(|r| (0..depth).all(|e| l.inline_at(r, e).is_multiple_of(LINE))));
            }
        }
    }

    #[test]
    fn sizes_that_overflow_are_errors() {
        for (ranks, data) in [(3, usize::MAX), (3, usize::MAX / 4), (usize::MAX / 64, 4096), (usize::MAX, 1)] {
            let e = Layout::new(ranks, data).unwrap_err();
            assert!(e.context().contains(&format!("{ranks} ranks with {data}-byte")), "{e}");
        }
    }

    proptest::proptest! {
        /// Sizes come from configuration and from the creator's header: any
        /// of them is a layout whose regions lie inside the segment, or an
        /// error, never an overflow.
        #[test]
        fn any_size_is_a_layout_inside_its_segment_or_an_error(ranks in 0usize..1 << 20, data in proptest::prelude::any::<usize>()) {
            if let Ok(l) = Layout::new(ranks, data) {
                let last = ranks.saturating_sub(1);
                proptest::prop_assert!(l.results_at(last, 1) + l.results <= l.total());
                proptest::prop_assert!(l.ctrl(last) + CTRL <= l.total());
                proptest::prop_assert!(l.board(last, BOARD_DEPTH - 1) + ENTRY <= l.total());
                proptest::prop_assert!(l.inline_at(last, INLINE_DEPTH as u64 - 1) + INLINE <= l.total());
            }
        }
    }
}
