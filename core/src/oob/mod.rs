//! Out-of-band (bootstrap) communication: how the ranks of a job find each
//! other before any transport is connected.
//!
//! The only operation is UCC's: a non-blocking allgather of a byte string
//! ([`Oob::allgather`] posts, [`OobRequest::test`] polls). Built in:
//! [`ThreadOob`] for ranks that are threads of one process. The TCP store
//! that reads the launchers' variables (`TcpOob`) is a transport and lives in
//! `ferrocoll-transport` (the facade re-exports it). Users with their own
//! bootstrap (MPI, a torch store) implement [`Oob`] over their allgather.

mod thread;

use std::task::Poll;
use std::time::{Duration, Instant};

pub use thread::ThreadOob;

use crate::engine::Backoff;
use crate::error::{Error, Result};

/// An out-of-band allgather among `size()` endpoints.
pub trait Oob: Send + Sync {
    /// This endpoint's index (UCC's `oob_ep`).
    fn rank(&self) -> usize;
    /// Number of endpoints (UCC's `n_oob_eps`).
    fn size(&self) -> usize;
    /// Post an allgather of `data`: every endpoint contributes one byte
    /// string (lengths may differ) and receives all of them in rank order.
    /// All endpoints must call it the same number of times, in the same order.
    fn allgather(&self, data: &[u8]) -> Result<Box<dyn OobRequest>>;
    /// A name of the job, equal on every endpoint and unlikely to be shared
    /// with another job (names resources such as shared-memory segments, so
    /// that a launcher can clean up after a crash). `None`: not known.
    fn job_id(&self) -> Option<String> {
        None
    }
}

/// A posted OOB allgather.
pub trait OobRequest: Send {
    /// `Ready(Ok(v))` with `v[r]` = rank r's bytes once everyone contributed.
    fn test(&mut self) -> Poll<Result<Vec<Vec<u8>>>>;
    /// The ranks that have not contributed yet (for error messages); empty
    /// when the OOB cannot tell (a C OOB's callbacks do not say).
    fn missing(&self) -> Vec<usize> {
        Vec::new()
    }
}

/// Run an allgather to completion, failing with `TimedOut` (naming the
/// missing ranks) after `timeout` (`None`: wait forever).
pub fn allgather_blocking(oob: &dyn Oob, data: &[u8], timeout: Option<Duration>) -> Result<Vec<Vec<u8>>> {
    let mut req = oob.allgather(data)?;
    let start = Instant::now();
    let mut backoff = Backoff::new();
    loop {
        if let Poll::Ready(r) = req.test() {
            return r;
        }
        if let Some(t) = timeout {
            if start.elapsed() > t {
                let missing = req.missing();
                let who = if missing.is_empty() {
                    "the OOB does not say which ranks are missing: one has not called it, or has called it a \
                     different number of times"
                        .to_string()
                } else {
                    format!("missing ranks {missing:?}")
                };
                return Err(Error::timed_out(format!(
                    "OOB allgather among {} endpoints did not complete in {:.1} s; {who}",
                    oob.size(),
                    t.as_secs_f64(),
                )));
            }
        }
        backoff.snooze();
    }
}
