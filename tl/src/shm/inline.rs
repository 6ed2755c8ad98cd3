//! Small payloads beside their epoch's tag: one cache line's trip instead
//! of two.
//!
//! Through the data halves, a reader waits for a peer's `arrive` in the
//! peer's control line, then reads the peer's data part: two lines the
//! peer has just written, fetched one after the other from the peer's
//! cache — on a 2-core AMD EPYC VM ~250 ns each, most of a small
//! collective's time. An epoch's inline region (`layout.rs`: per rank and
//! parity, a head and at least 8 KiB) holds the payload right after a
//! tag and the epoch's signature: the line that tells a reader the payload
//! is there brings its first 32 bytes along; a longer payload's other
//! lines are fetched together after it, one more trip for all of them
//! (measured: allreduce 8 B 0.93 µs, 64 B 1.10 µs on 2 ranks).
//!
//! The protocol is the epoch protocol's (`epoch.rs`) with `Flag::Inline`
//! for `Flag::Arrive`: the writer copies its payload and signs the head,
//! then publishes the tag (Release; readers Acquire it). Its control line
//! is not written (neither `arrive` nor the signature slot): nobody reads
//! it for this epoch, and a write there costs a line's trip whenever a
//! peer read it last — after every barrier (measured: bcast, allreduce and
//! alltoall of 8 B on 2 ranks 0.83–0.87 of the time; BENCHMARKS.md,
//! fourteenth round). Only these publishes write the region — a
//! payload never lands on a tag, which is why the region is not a part of
//! the data half — and the region of epoch `e` is written again at
//! `e + INLINE_DEPTH` (`layout.rs`), once every rank has finished `e`
//! (`ShmTeam::poll_begin`, `Depth::Inline`): a rank that reads nobody's
//! payload (a bcast's root, a reduce's other ranks) runs up to that many
//! epochs ahead of its readers.
//!
//! Whether a payload goes inline depends on the call only (its size), so
//! ranks that agree take the same path. Ranks whose calls differ may not:
//! one waits on the other's control line, the other on an inline tag that
//! never comes; each learns that the calls differ from the call board
//! (after `FIRST_LOOK`, 10 ms), from the other's failing (`left`), or from
//! the other's next control-line epoch, whose signature says another
//! epoch (`check_signature`: out of step).

use ferrocoll_core::{Error, MemRef, Result};

use super::epoch::Flag;
use super::layout::INLINE_HEAD;
use super::prefetch::prefetch_bytes;
use super::team::ShmTeam;

/// Bytes of a payload in its region's first cache line, with the tag: a
/// reader that saw the tag has them.
pub(crate) const WITH_TAG: usize = 64 - INLINE_HEAD;

impl ShmTeam {
    /// Whether a payload of `len` bytes fits an inline region.
    pub(crate) fn fits_inline(&self, len: usize) -> bool {
        len <= self.seg.inline_capacity()
    }

    /// Publish `src` as this rank's payload of epoch `e` (it must fit).
    pub(crate) fn publish_inline(&self, e: u64, src: MemRef) -> Result<()> {
        if !self.fits_inline(src.len()) {
            return Err(Error::internal(format!("a {}-byte inline payload", src.len())));
        }
        self.copy(self.seg.inline_payload(self.rank, e)?.range(0, src.len())?, src)?;
        self.publish_inline_written(e)
    }

    /// Publish this rank's payload of epoch `e`, written into its inline
    /// region already (`ShmTeam::publish_inline` copies it there first).
    pub(crate) fn publish_inline_written(&self, e: u64) -> Result<()> {
        self.sign_slot(&self.seg.inline_head(self.rank, e)?.sig, e);
        self.publish(Flag::Inline, e)
    }

    /// The first `len` bytes of rank `r`'s payload of epoch `e` (read them
    /// after `wait(Flag::Inline, …)` saw `r` there).
    pub(crate) fn inline_part(&self, r: usize, e: u64, len: usize) -> Result<MemRef> {
        self.seg.inline_payload(r, e)?.range(0, len)
    }

    /// Ask for the lines of bytes `at..at + len` of rank `r`'s payload of
    /// epoch `e` (`prefetch.rs`), once `r` published it: those past the
    /// first line, which came with the tag. Bytes past the region are not
    /// asked for.
    pub(crate) fn prefetch_inline(&self, r: usize, e: u64, at: usize, len: usize) {
        let end = at.saturating_add(len).min(self.seg.inline_capacity());
        if end <= WITH_TAG {
            return;
        }
        let from = at.max(WITH_TAG);
        if let Ok(payload) = self.seg.inline_payload(r, e) {
            prefetch_bytes(payload.addr().wrapping_add(from), end.saturating_sub(from));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::threads;
    use super::*;

    /// Asking for a payload's lines changes none of its bytes, and ranges
    /// inside the tag's line, past the region or of any length are taken
    /// (clipped), not refused or overrun.
    #[test]
    fn prefetching_a_payload_leaves_it_alone() {
        let team = threads("inline-prefetch", 1).pop().expect("a team of one");
        let payload = team.seg.inline_payload(0, 1).unwrap();
        let bytes: Vec<u8> = (0..payload.len()).map(|i| (i % 251) as u8).collect();
        // SAFETY: this rank's own region, which nobody else reads or writes.
        unsafe { payload.as_mut_slice().copy_from_slice(&bytes) };
        let capacity = team.seg.inline_capacity();
        for (at, len) in
            [(0, 8), (0, WITH_TAG), (8, 100), (0, capacity), (capacity - 1, 5), (capacity, 1), (7, usize::MAX)]
        {
            team.prefetch_inline(0, 1, at, len);
        }
        // SAFETY: as above.
        assert!(unsafe { payload.as_slice() } == &bytes[..]);
    }
}
