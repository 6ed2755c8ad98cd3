//! Pairwise alltoall.
//!
//! P−1 exchanges: at exchange k (k = 1..P) a rank sends its block for
//! `rank + k` and receives the block from `rank − k` (mod P), which for
//! every k pairs each sender with exactly one receiver, so no rank is
//! flooded. Up to `alltoall_pairwise_num_posts` exchanges are in flight at
//! once, started in order of k as earlier ones complete (a sliding window);
//! every rank advances in the same order, so the oldest exchange in the
//! team can always finish and the window cannot deadlock.
//!
//! Any team size works, and blocks may be of any size (alltoallv reuses
//! [`exchange_blocks`] with its own layouts). Empty blocks are exchanged
//! as zero-byte messages, so ranks that disagree about a count get a
//! size-mismatch error rather than a hang. In place, dst is copied to
//! scratch first and the copy is the input, so receiving into dst never
//! overwrites a block that has yet to be sent.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use ferrocoll_core::args::{Alltoall, Blocks};
use ferrocoll_core::backend::Scratch;
use ferrocoll_core::{Error, MemRef, Result};

use crate::p2p::Comm;

/// Alltoall or alltoallv with `alltoall_pairwise_num_posts` exchanges in flight.
pub(crate) async fn run(comm: Comm, o: Alltoall) -> Result<()> {
    let window = comm.config().alltoall_pairwise_num_posts;
    run_with_window(&comm, &o, window).await
}

/// Alltoall or alltoallv with `window` exchanges in flight: the own block
/// is copied locally, every other one exchanged with [`exchange_blocks`].
pub(crate) async fn run_with_window(comm: &Comm, o: &Alltoall, window: usize) -> Result<()> {
    let rank = comm.rank();
    let input = Input::new(comm, o)?;
    if !o.in_place {
        comm.copy(o.dst.block(rank)?, o.src.block(rank)?)?;
    }
    exchange_blocks(comm, input.mem, &input.blocks, o.dst.mem, &o.dst.blocks, window).await
}

/// The input of an alltoall(v): src with its layout, or in place a scratch
/// copy of dst read with dst's layout (for alltoallv: dst's counts and
/// displacements stand for both sides).
pub(crate) struct Input {
    /// The input blocks' buffer.
    pub mem: MemRef,
    /// Their layout.
    pub blocks: Blocks,
    _scratch: Option<Scratch>,
}

impl Input {
    /// The input of `o` (copying dst when in place).
    pub(crate) fn new(comm: &Comm, o: &Alltoall) -> Result<Input> {
        if !o.in_place || o.dst.mem.is_empty() {
            return Ok(Input { mem: o.src.mem, blocks: o.src.blocks.clone(), _scratch: None });
        }
        let s = comm.scratch(o.dst.mem.len())?;
        comm.copy(s.mem(), o.dst.mem)?;
        Ok(Input { mem: s.mem(), blocks: o.dst.blocks.clone(), _scratch: Some(s) })
    }
}

/// `(send to, receive from)` of `rank` at exchange `k` (1..size): `(rank + k, rank − k)` mod size.
pub(crate) fn pairwise_peers(rank: usize, size: usize, k: usize) -> (usize, usize) {
    ((rank + k) % size, (rank + size - k % size) % size)
}

/// Send block j of `src` to rank j and receive rank j's message into block
/// j of `dst`, for every rank j but this one, in pairwise order with up to
/// `window` exchanges in flight (at least one). Exchange k uses tag k.
pub(crate) async fn exchange_blocks(
    comm: &Comm,
    src: MemRef,
    src_blocks: &Blocks,
    dst: MemRef,
    dst_blocks: &Blocks,
    window: usize,
) -> Result<()> {
    let (rank, size) = (comm.rank(), comm.size());
    if src_blocks.len() != size || dst_blocks.len() != size {
        return Err(Error::internal(format!(
            "alltoall over {} source and {} destination blocks in a team of {size}",
            src_blocks.len(),
            dst_blocks.len()
        )));
    }
    let exchanges = (1..size)
        .map(|k| {
            let (to, from) = pairwise_peers(rank, size, k);
            Ok((k as u32, to, src_blocks.of(src, to)?, from, dst_blocks.of(dst, from)?))
        })
        .collect::<Result<Vec<_>>>()?;
    let futures = exchanges.into_iter().map(|(tag, to, out, from, into)| comm.sendrecv(to, out, from, into, tag));
    windowed(futures, window.max(1)).await
}

/// Run the futures of `futures`, at most `window` at a time, starting each
/// in order as a slot frees; the first error wins (the rest are dropped,
/// which cancels them).
async fn windowed<F>(futures: impl Iterator<Item = F>, window: usize) -> Result<()>
where
    F: Future<Output = Result<()>>,
{
    let mut queue = futures.peekable();
    let mut running: Vec<Pin<Box<F>>> = Vec::new();
    std::future::poll_fn(move |cx| {
        loop {
            while running.len() < window {
                match queue.next() {
                    Some(f) => running.push(Box::pin(f)),
                    None => break,
                }
            }
            let before = running.len();
            let mut i = 0;
            while i < running.len() {
                match running[i].as_mut().poll(cx) {
                    // Order among running futures does not matter.
                    Poll::Ready(Ok(())) => drop(running.swap_remove(i)),
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Pending => i += 1,
                }
            }
            if running.is_empty() && queue.peek().is_none() {
                return Poll::Ready(Ok(()));
            }
            if running.len() == before {
                return Poll::Pending;
            }
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Context, Waker};

    /// A future that is pending for `polls` polls, counting how many run at once.
    async fn slow(polls: usize, live: &AtomicUsize, peak: &AtomicUsize) -> Result<()> {
        let now = live.fetch_add(1, Ordering::Relaxed) + 1;
        peak.fetch_max(now, Ordering::Relaxed);
        let mut left = polls;
        std::future::poll_fn(|_| if left == 0 { Poll::Ready(()) } else { (left -= 1, Poll::Pending).1 }).await;
        live.fetch_sub(1, Ordering::Relaxed);
        Ok(())
    }

    #[test]
    fn window_bounds_the_futures_in_flight() {
        let (live, peak) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let fut = windowed((0..10).map(|i| slow(1 + i % 3, &live, &peak)), 3);
        let mut fut = std::pin::pin!(fut);
        let mut cx = Context::from_waker(Waker::noop());
        let mut polls = 0;
        while fut.as_mut().poll(&mut cx).is_pending() {
            polls += 1;
            assert!(polls < 100);
        }
        assert_eq!((live.load(Ordering::Relaxed), peak.load(Ordering::Relaxed)), (0, 3));
        let err = windowed([async { Err(Error::internal("boom")) }].into_iter(), 1);
        assert!(std::pin::pin!(err).as_mut().poll(&mut cx).is_ready());
    }

    proptest! {
        /// At every exchange each rank sends to one peer and receives from
        /// the one that sends to it; over all exchanges it meets every other rank once.
        #[test]
        fn peers_pair_up(size in 1usize..60) {
            for r in 0..size {
                let mut met = vec![false; size];
                for k in 1..size {
                    let (to, from) = pairwise_peers(r, size, k);
                    prop_assert_eq!(pairwise_peers(to, size, k).1, r);
                    prop_assert_eq!(pairwise_peers(from, size, k).0, r);
                    prop_assert!(to != r && !met[to]);
                    met[to] = true;
                }
                prop_assert_eq!(met.iter().filter(|&&m| m).count(), size - 1);
            }
        }
    }
}
