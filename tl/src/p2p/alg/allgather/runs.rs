//! Messages made of consecutive blocks (a "run" `lo..hi` of block indices),
//! for algorithms that move several blocks per step over any [`Blocks`] layout.
//!
//! A run's message is its blocks' bytes one after the other, in index order,
//! so its size depends only on the block counts, which every rank agrees on
//! (allgatherv displacements, by contrast, are each rank's own business).
//! When the run's blocks lie back to back in a rank's buffer, as with even
//! layouts, that rank sends or receives in place; otherwise it packs into or
//! unpacks from scratch memory. Either side decides for itself.

use std::ops::Range;

use ferrocoll_core::backend::Scratch;
use ferrocoll_core::{MemRef, Result};

use crate::p2p::Comm;
use ferrocoll_core::args::Blocks;

/// The `(byte offset, byte length)` that the blocks of `run` cover when they
/// lie back to back in the buffer (empty blocks are ignored; a run of only
/// empty blocks covers nothing at offset 0); `None` when they do not.
pub(super) fn span(blocks: &Blocks, run: Range<usize>) -> Result<Option<(usize, usize)>> {
    let mut covered: Option<(usize, usize)> = None;
    for i in run {
        let (off, len) = blocks.get(i)?;
        if len == 0 {
            continue;
        }
        covered = match covered {
            None => Some((off, len)),
            Some((start, n)) if start + n == off => Some((start, n + len)),
            Some(_) => return Ok(None),
        };
    }
    Ok(Some(covered.unwrap_or((0, 0))))
}

/// Bytes of the message of `run`.
pub(super) fn run_bytes(blocks: &Blocks, run: Range<usize>) -> usize {
    run.map(|i| blocks.bytes(i)).sum()
}

/// One run's message on this rank: where its bytes are sent from or received
/// into, and the scratch memory holding them when they are not in place.
pub(super) struct Staged {
    /// The message's bytes.
    pub mem: MemRef,
    run: Range<usize>,
    scratch: Option<Scratch>,
}

impl Staged {
    /// The message of `run` of `buf`, ready to send (packed when not contiguous).
    pub(super) fn outgoing(comm: &Comm, buf: MemRef, blocks: &Blocks, run: Range<usize>) -> Result<Staged> {
        let staged = Staged::incoming(comm, buf, blocks, run)?;
        if let Some(s) = &staged.scratch {
            let mut at = 0;
            for i in staged.run.clone() {
                let part = blocks.of(buf, i)?;
                comm.copy(s.mem().range(at, part.len())?, part)?;
                at += part.len();
            }
        }
        Ok(staged)
    }

    /// Where to receive the message of `run` of `buf`: in place when
    /// contiguous, else scratch memory that [`Staged::land`] unpacks.
    pub(super) fn incoming(comm: &Comm, buf: MemRef, blocks: &Blocks, run: Range<usize>) -> Result<Staged> {
        match span(blocks, run.clone())? {
            Some((off, len)) => {
                let mem = if len == 0 { MemRef::empty(buf.mem_type()) } else { buf.range(off, len)? };
                Ok(Staged { mem, run, scratch: None })
            }
            None => {
                let s = comm.scratch(run_bytes(blocks, run.clone()))?;
                Ok(Staged { mem: s.mem(), run, scratch: Some(s) })
            }
        }
    }

    /// After the receive: copy the message's blocks to their places in `buf`.
    pub(super) fn land(&self, comm: &Comm, buf: MemRef, blocks: &Blocks) -> Result<()> {
        let Some(s) = &self.scratch else { return Ok(()) };
        let mut at = 0;
        for i in self.run.clone() {
            let part = blocks.of(buf, i)?;
            comm.copy(part, s.mem().range(at, part.len())?)?;
            at += part.len();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_of_even_and_irregular_layouts() {
        let even = Blocks::even(10, 4, 2);
        assert_eq!(span(&even, 1..4).unwrap(), Some((6, 14)));
        assert_eq!(span(&even, 2..2).unwrap(), Some((0, 0)));
        assert_eq!(run_bytes(&even, 0..4), 20);
        // Empty blocks with stray displacements do not break a run.
        let v = Blocks::from_counts(&[2, 0, 3, 1], &[0, 99, 2, 5], 4);
        assert_eq!(span(&v, 0..4).unwrap(), Some((0, 24)));
        assert_eq!(span(&v, 1..2).unwrap(), Some((0, 0)));
        // A gap or a reversed order needs packing.
        let gap = Blocks::from_counts(&[2, 3], &[0, 3], 1);
        assert_eq!(span(&gap, 0..2).unwrap(), None);
        let reversed = Blocks::from_counts(&[2, 3], &[3, 0], 1);
        assert_eq!(span(&reversed, 0..2).unwrap(), None);
        assert_eq!(span(&reversed, 1..2).unwrap(), Some((0, 3)));
        assert!(span(&reversed, 1..3).is_err());
    }
}
