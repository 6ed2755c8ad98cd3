//! The future of a posted collective, and how a task gets back the box of
//! one that finished to run its next post in (see [`CollTask::restart`]).
//!
//! [`CollTask::restart`]: crate::backend::CollTask::restart

use std::any::Any;
use std::future::Future;
use std::pin::Pin;

use crate::error::Result;

/// What a task's future is: any `'static` future of a collective's result.
/// `Any` makes a finished one recognisable to the task that made it, which
/// may then run its next post in the same box ([`downcast_spent`]); every
/// future of that shape is one, through the blanket implementation.
pub trait PostFuture: Future<Output = Result<()>> + Send + Any {}

impl<F: Future<Output = Result<()>> + Send + 'static> PostFuture for F {}

/// The future of a posted collective: polled by the progress queue.
pub type TaskFuture = Pin<Box<dyn PostFuture>>;

/// `spent` (a task's finished future) as the `T` it is, or given back
/// unchanged if it is another type. `T: Unpin`: taking it out of its `Pin`
/// then moves nothing that pinning protects.
pub fn downcast_spent<T: PostFuture + Unpin>(spent: TaskFuture) -> std::result::Result<Box<T>, TaskFuture> {
    let any: &dyn Any = &*spent;
    if !any.is::<T>() {
        return Err(spent);
    }
    // SAFETY: `T: Unpin`, so the value may leave its `Pin`.
    let boxed: Box<dyn PostFuture> = unsafe { Pin::into_inner_unchecked(spent) };
    // SAFETY: the value is a `T` (checked above): the box's pointer, its
    // vtable dropped, points to a `T` allocated as a `Box<T>` would be.
    Ok(unsafe { Box::from_raw(Box::into_raw(boxed) as *mut T) })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Counter(u32);

    impl Future for Counter {
        type Output = Result<()>;
        fn poll(self: Pin<&mut Self>, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[test]
    fn a_spent_future_comes_back_as_its_type_and_only_as_it() {
        let spent: TaskFuture = Box::pin(Counter(7));
        let back = downcast_spent::<Counter>(spent).ok().map(|c| c.0);
        assert_eq!(back, Some(7));
        let other: TaskFuture = Box::pin(async { Ok(()) });
        assert!(downcast_spent::<Counter>(other).is_err(), "an async block is not a Counter");
    }
}
