//! What the shm TL's unit tests share.

use std::future::Future;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use ferrocoll_core::{Error, Result};

/// Poll `fut` with a no-op waker until it is done (10 s at most).
pub(super) fn poll_to_end<T>(fut: impl Future<Output = Result<T>>) -> Result<T> {
    let mut fut = std::pin::pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Poll::Ready(r) = fut.as_mut().poll(&mut cx) {
            return r;
        }
        if Instant::now() > deadline {
            return Err(Error::internal("still waiting after 10 s"));
        }
        std::thread::yield_now();
    }
}
