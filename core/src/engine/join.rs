//! Joining futures: what schedules need to run branches side by side.
//!
//! Tasks are polled by the progress queue with a no-op waker, so these
//! combinators simply poll every unfinished branch each time they are polled.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::error::Result;

/// A boxed future of a task or branch.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Run two fallible branches side by side; the first error wins.
pub async fn try_join2<A, B>(a: A, b: B) -> Result<()>
where
    A: Future<Output = Result<()>>,
    B: Future<Output = Result<()>>,
{
    let mut a = std::pin::pin!(a);
    let mut b = std::pin::pin!(b);
    let (mut a_done, mut b_done) = (false, false);
    std::future::poll_fn(move |cx| {
        if !a_done {
            if let Poll::Ready(r) = a.as_mut().poll(cx) {
                r?;
                a_done = true;
            }
        }
        if !b_done {
            if let Poll::Ready(r) = b.as_mut().poll(cx) {
                r?;
                b_done = true;
            }
        }
        if a_done && b_done { Poll::Ready(Ok(())) } else { Poll::Pending }
    })
    .await
}

/// Run any number of fallible branches side by side; the first error wins
/// (the remaining branches are dropped, which cancels them).
pub fn try_join_all<'a, F>(futures: impl IntoIterator<Item = F>) -> TryJoinAll<'a>
where
    F: Future<Output = Result<()>> + Send + 'a,
{
    TryJoinAll { pending: futures.into_iter().map(|f| Box::pin(f) as BoxFuture<'a, Result<()>>).collect() }
}

/// The future of [`try_join_all`].
pub struct TryJoinAll<'a> {
    pending: Vec<BoxFuture<'a, Result<()>>>,
}

impl Future for TryJoinAll<'_> {
    type Output = Result<()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let mut i = 0;
        while i < self.pending.len() {
            match self.pending[i].as_mut().poll(cx) {
                Poll::Ready(Ok(())) => {
                    // Order among the branches does not matter.
                    drop(self.pending.swap_remove(i));
                }
                Poll::Ready(Err(e)) => {
                    self.pending.clear();
                    return Poll::Ready(Err(e));
                }
                Poll::Pending => i += 1,
            }
        }
        if self.pending.is_empty() { Poll::Ready(Ok(())) } else { Poll::Pending }
    }
}

/// Yield once to the progress queue (lets other tasks and transports run).
pub async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(move |_| {
        if yielded {
            Poll::Ready(())
        } else {
            yielded = true;
            Poll::Pending
        }
    })
    .await
}

/// Poll a future to completion on this thread with a no-op waker, calling
/// `idle` between fruitless polls (tests and simple blocking helpers).
pub fn block_on<F: Future>(fut: F, mut idle: impl FnMut()) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let mut cx = Context::from_waker(std::task::Waker::noop());
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        idle();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    async fn after(polls: u32, fail: bool) -> Result<()> {
        for _ in 0..polls {
            yield_now().await;
        }
        if fail { Err(Error::io("branch failed")) } else { Ok(()) }
    }

    #[test]
    fn join_all_waits_for_every_branch() {
        let r = block_on(try_join_all((0..5).map(|i| after(i, false))), || {});
        assert!(r.is_ok());
        let r = block_on(try_join_all([after(3, false), after(1, true)]), || {});
        assert_eq!(r.unwrap_err().context(), "branch failed");
    }

    #[test]
    fn join2_runs_both() {
        assert!(block_on(try_join2(after(2, false), after(4, false)), || {}).is_ok());
        assert!(block_on(try_join2(after(2, false), after(4, true)), || {}).is_err());
    }
}
