//! Posting a SHARP request and waiting for it as a future, with the
//! retries of a busy SAT lock and the request timeout.

use std::ffi::{c_int, c_void};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Instant;

use ferrocoll_core::{Error, Result};

use super::reg::Reg;
use super::sys;
use super::team::{Exec, Group, Lib};

/// Which group of the team a request goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum On {
    /// Every team rank.
    Flat,
    /// The node leaders (hierarchical algorithms, on leaders only).
    Leaders,
}

/// One SHARP call to post.
pub(crate) enum Op {
    Allreduce(sys::ReduceSpec),
    Reduce(sys::ReduceSpec),
    ReduceScatter(sys::ReduceSpec),
    Bcast(sys::BcastSpec),
    Barrier,
    Allgather(sys::GatherSpec),
}

impl Op {
    fn name(&self) -> &'static str {
        match self {
            Op::Allreduce(_) => "sharp_coll_do_allreduce_nb",
            Op::Reduce(_) => "sharp_coll_do_reduce_nb",
            Op::ReduceScatter(_) => "sharp_coll_do_reduce_scatter_nb",
            Op::Bcast(_) => "sharp_coll_do_bcast_nb",
            Op::Barrier => "sharp_coll_do_barrier_nb",
            Op::Allgather(_) => "sharp_coll_do_allgather_nb",
        }
    }
}

/// The group `on`, or `NotSupported` when this team has none.
pub(crate) fn group(lib: &Lib, on: On) -> Result<&Group> {
    match on {
        On::Flat => lib.flat.as_ref().ok_or_else(|| Error::not_supported("this team has no flat SHARP group")),
        On::Leaders => {
            lib.leaders.as_ref().ok_or_else(|| Error::not_supported("this rank is in no SHARP group of node leaders"))
        }
    }
}

/// Post `op` on group `on`, keeping `regs` until it completes. A post
/// refused with "lock failed" is retried (`UCC_TL_SHARP_LOCK_RETRIES`).
pub(crate) fn post(exec: &Exec, on: On, mut op: Op, regs: Vec<Arc<Reg>>) -> Result<Request> {
    let lib = exec.team.lib.clone();
    let api = &lib.api;
    let g = group(&lib, on)?;
    let retries = exec.team.config.lock_retries;
    let mut handle: *mut c_void = std::ptr::null_mut();
    let mut attempt = 0;
    loop {
        let rc: c_int = {
            let _l = lib.lock();
            // SAFETY: `g.raw` is a live group of the team's context; the
            // specs describe registered host buffers (`regs`) that stay valid
            // until the request completes or is abandoned with them leaked.
            unsafe {
                match &mut op {
                    Op::Allreduce(s) => (api.allreduce_nb)(g.raw, s, &mut handle),
                    Op::Reduce(s) => (api.reduce_nb)(g.raw, s, &mut handle),
                    Op::ReduceScatter(s) => match api.reduce_scatter_nb {
                        Some(f) => f(g.raw, s, &mut handle),
                        None => sys::ENOT_SUPP,
                    },
                    Op::Bcast(s) => (api.bcast_nb)(g.raw, s, &mut handle),
                    Op::Barrier => (api.barrier_nb)(g.raw, &mut handle),
                    Op::Allgather(s) => match api.allgather_nb {
                        Some(f) => f(g.raw, s, &mut handle),
                        None => sys::ENOT_SUPP,
                    },
                }
            }
        };
        if rc == sys::ELOCK_FAILED && attempt < retries {
            attempt += 1;
            let _l = lib.lock();
            // SAFETY: a live context; progress lets the holder of the lock finish.
            unsafe { (api.progress)(lib.raw()) };
            drop(_l);
            std::thread::yield_now();
            continue;
        }
        let what = match attempt {
            0 => op.name().to_string(),
            n => format!("{} (after {n} retries of a busy SAT lock)", op.name()),
        };
        api.check(rc, &what)?;
        break;
    }
    if handle.is_null() {
        return Err(Error::internal(format!("{} succeeded without a request", op.name())));
    }
    exec.posted.store(true, Ordering::Relaxed);
    let what = format!("{} ({}) on the SHARP group of {} ranks", exec.what, op.name(), g.oob.size());
    Ok(Request { lib, handle, what, started: Instant::now(), timeout: exec.team.config.req_timeout, regs, done: false })
}

/// A posted request: done when the library says so, or timed out.
pub(crate) struct Request {
    lib: Arc<Lib>,
    handle: *mut c_void,
    what: String,
    started: Instant,
    timeout: Option<std::time::Duration>,
    regs: Vec<Arc<Reg>>,
    done: bool,
}

// SAFETY: the handle is an opaque token passed back to the library only
// under the team's library lock.
unsafe impl Send for Request {}

impl Future for Request {
    type Output = Result<()>;

    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<()>> {
        if self.done {
            return Poll::Ready(Ok(()));
        }
        let complete = {
            let _l = self.lib.lock();
            let api = &self.lib.api;
            // SAFETY: a live context and a request of it not yet freed.
            unsafe {
                (api.progress)(self.lib.raw());
                (api.req_test)(self.handle) != 0
            }
        };
        if complete {
            let _l = self.lib.lock();
            // SAFETY: the request completed and is freed once.
            let rc = unsafe { (self.lib.api.req_free)(self.handle) };
            drop(_l);
            self.done = true;
            self.regs.clear();
            return Poll::Ready(self.lib.api.check(rc, "sharp_coll_req_free"));
        }
        if let Some(t) = self.timeout.filter(|t| self.started.elapsed() > *t) {
            return Poll::Ready(Err(Error::timed_out(format!(
                "{} not complete after {:.1} s (UCC_TL_SHARP_REQ_TIMEOUT): {} never reported it done; \
                 the request and its registrations are abandoned",
                self.what,
                t.as_secs_f64(),
                self.lib.api.path
            ))));
        }
        Poll::Pending
    }
}

impl Drop for Request {
    fn drop(&mut self) {
        if !self.done {
            // Timed out or cancelled in flight: the library may still write
            // through the request and its registrations, so keep them forever.
            self.lib.abandon();
            for r in self.regs.drain(..) {
                std::mem::forget(r);
            }
        }
    }
}
