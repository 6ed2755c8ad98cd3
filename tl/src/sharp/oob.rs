//! The out-of-band collectives libsharp_coll asks for (bcast, barrier,
//! gather), implemented over the TL's own point-to-point router among the
//! members of one SHARP group, as C callbacks.
//!
//! The library calls them synchronously and expects them to return when
//! done, so each call drives its messages to completion here: it polls the
//! sends and receives and the router until they finish or
//! `UCC_TL_SHARP_OOB_TIMEOUT` passes (then the call fails, and the library
//! reports an OOB error). The library calls them at team creation (which
//! may block, bounded) and, in libraries like the test double, while it
//! completes a request. Every member makes the same OOB calls in the same
//! order; the n-th call of a group is matched by its own sequence number,
//! far above any collective's.

use std::ffi::{c_int, c_void};
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::{Duration, Instant};

use ferrocoll_core::args::Signature;
use ferrocoll_core::engine::{Backoff, TaskDiag, try_join_all};
use ferrocoll_core::{CollType, Error, MemRef, MemType, Result};

use crate::p2p::Comm;
use crate::p2p::team::TeamShared;

/// First sequence number of the flat group's OOB calls; the leaders' group
/// counts from [`LEADERS_SEQ`]. Collectives count from 0 and never get near.
pub(crate) const FLAT_SEQ: u64 = 1 << 62;
/// First sequence number of the node leaders' group's OOB calls.
pub(crate) const LEADERS_SEQ: u64 = (1 << 62) | (1 << 61);
/// The sequence number of the creation agreement (not counted).
pub(crate) const AGREE_SEQ: u64 = (1 << 62) - 1;

/// One SHARP group's OOB: its members (team ranks, in SHARP rank order)
/// and this rank's place among them.
pub(crate) struct Oob {
    team: Arc<TeamShared>,
    members: Vec<usize>,
    me: usize,
    base: u64,
    next: AtomicU64,
    timeout: Duration,
    /// The last failure, for the message of the library call that saw it.
    error: Mutex<Option<Error>>,
}

impl Oob {
    pub(crate) fn new(team: Arc<TeamShared>, members: Vec<usize>, base: u64, timeout: Duration) -> Result<Oob> {
        let me = members.iter().position(|&r| r == team.rank).ok_or_else(|| {
            Error::internal(format!("rank {} is not among the SHARP group's members {members:?}", team.rank))
        })?;
        Ok(Oob { team, members, me, base, next: AtomicU64::new(0), timeout, error: Mutex::new(None) })
    }

    /// This rank's place in the group.
    pub(crate) fn rank(&self) -> usize {
        self.me
    }

    /// The group's size.
    pub(crate) fn size(&self) -> usize {
        self.members.len()
    }

    /// The members, as team ranks.
    pub(crate) fn members(&self) -> &[usize] {
        &self.members
    }

    /// What the last failed OOB call said, if one failed.
    pub(crate) fn take_error(&self) -> Option<Error> {
        self.error.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    fn comm(&self, seq: u64) -> Comm {
        let sig = Signature::new(CollType::Bcast, None, 0, 0);
        Comm::new(self.team.clone(), seq, sig, Arc::new(TaskDiag::default()))
    }

    fn next_comm(&self) -> Comm {
        self.comm(self.base + self.next.fetch_add(1, Ordering::Relaxed))
    }

    /// Drive `fut` and the router until it is done or the OOB timeout passes.
    pub(crate) fn block_on<T>(&self, what: &str, fut: impl Future<Output = Result<T>>) -> Result<T> {
        self.block_for(what, self.timeout, fut)
    }

    /// [`Oob::block_on`] with its own bound.
    fn block_for<T>(&self, what: &str, bound: Duration, fut: impl Future<Output = Result<T>>) -> Result<T> {
        let mut fut = pin!(fut);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let deadline = Instant::now() + bound;
        let mut backoff = Backoff::with_spins(64);
        loop {
            if let Poll::Ready(r) = fut.as_mut().poll(&mut cx) {
                return r;
            }
            self.team.transport.progress()?;
            if Instant::now() > deadline {
                return Err(Error::timed_out(format!(
                    "SHARP's out-of-band {what} among team ranks {:?} not done after {:.1} s \
                     (UCC_TL_SHARP_OOB_TIMEOUT): a member has not arrived",
                    self.members,
                    bound.as_secs_f64()
                )));
            }
            backoff.snooze();
        }
    }

    /// `root`'s `buf` to every member.
    pub(crate) fn bcast(&self, buf: MemRef, root: usize) -> Result<()> {
        let comm = self.next_comm();
        let root_rank = *self.members.get(root).ok_or_else(|| {
            Error::invalid_param(format!("OOB bcast root {root} outside a group of {}", self.members.len()))
        })?;
        self.block_on("bcast", async {
            if self.me == root {
                let others = self.members.iter().filter(|&&r| r != root_rank);
                let sends = others.map(|&r| comm.isend(r, 0, buf)).collect::<Result<Vec<_>>>()?;
                try_join_all(sends).await.map(|_| ())
            } else {
                comm.recv(root_rank, 0, buf).await
            }
        })
    }

    /// Every member's `send` into `recv` at `root` (member i's at offset i·len).
    pub(crate) fn gather(&self, root: usize, send: MemRef, recv: Option<MemRef>) -> Result<()> {
        let comm = self.next_comm();
        let root_rank = *self.members.get(root).ok_or_else(|| {
            Error::invalid_param(format!("OOB gather root {root} outside a group of {}", self.members.len()))
        })?;
        let len = send.len();
        self.block_on("gather", async {
            if self.me != root {
                return comm.send(root_rank, 0, send).await;
            }
            let recv = recv.ok_or_else(|| Error::invalid_param("OOB gather without a receive buffer at its root"))?;
            let slot = |i: usize| recv.range(i * len, len);
            comm.copy(slot(self.me)?, send)?;
            let recvs = self
                .members
                .iter()
                .enumerate()
                .filter(|&(i, _)| i != self.me)
                .map(|(i, &r)| Ok(comm.recv(r, 0, slot(i)?)))
                .collect::<Result<Vec<_>>>()?;
            try_join_all(recvs).await.map(|_| ())
        })
    }

    /// Every member arrives before any leaves.
    pub(crate) fn barrier(&self) -> Result<()> {
        let mut one = [0u8; 1];
        let n = self.members.len();
        let mut all = vec![0u8; n];
        // SAFETY: both arrays live on this stack frame until the calls below
        // return, and nothing else touches them meanwhile.
        let (one_ref, all_ref) = unsafe { (MemRef::from_mut_slice(&mut one), MemRef::from_mut_slice(&mut all)) };
        self.gather(0, one_ref, (self.me == 0).then_some(all_ref))?;
        self.bcast(one_ref, 0)
    }

    /// Whether `ok` holds on every member (for agreeing on a creation
    /// outcome); its own sequence number, so it works after a failure that
    /// left the counted calls out of step. It waits three OOB timeouts: a
    /// member may still sit in a library call whose OOB collective waits
    /// for this one, and arrives once that times out.
    pub(crate) fn agree(&self, ok: bool) -> Result<bool> {
        let comm = self.comm(AGREE_SEQ + self.base);
        let mine = [u8::from(ok)];
        let mut all = vec![0u8; self.members.len()];
        let mut verdict = [0u8; 1];
        // SAFETY: the three arrays live on this stack frame until the
        // blocking call below returns; while it runs they are reached only
        // through these MemRefs (`mine` is only read).
        let (mine_ref, all_ref, verdict_ref) = unsafe {
            (MemRef::from_slice(&mine), MemRef::from_mut_slice(&mut all), MemRef::from_mut_slice(&mut verdict))
        };
        let root = self.members[0];
        let bound = self.timeout.saturating_mul(3);
        self.block_for("agreement", bound, async {
            if self.me != 0 {
                comm.send(root, 0, mine_ref).await?;
                return comm.recv(root, 1, verdict_ref).await;
            }
            let recvs = (1..self.members.len())
                .map(|i| Ok(comm.recv(self.members[i], 0, all_ref.range(i, 1)?)))
                .collect::<Result<Vec<_>>>()?;
            try_join_all(recvs).await?;
            // SAFETY: every receive into `all` is complete; reading it through its MemRef.
            let got = unsafe { std::slice::from_raw_parts(all_ref.addr(), all_ref.len()) };
            let every = ok && got[1..].iter().all(|&b| b == 1);
            // SAFETY: `verdict` is one byte reached only through its MemRef while the block runs.
            unsafe { verdict_ref.addr().write(u8::from(every)) };
            let sends = self.members[1..].iter().map(|&r| comm.isend(r, 1, verdict_ref)).collect::<Result<Vec<_>>>()?;
            try_join_all(sends).await.map(|_| ())
        })?;
        Ok(verdict[0] == 1)
    }

    fn record(&self, e: Error) -> c_int {
        ferrocoll_core::log_debug!("sharp: {}", e);
        *self.error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
        -1
    }
}

/// A length from the library (`int`), checked.
fn length(len: c_int) -> Result<usize> {
    usize::try_from(len).map_err(|_| Error::invalid_param(format!("OOB length {len} from libsharp_coll is negative")))
}

/// The raw buffer the library passed, as a host `MemRef`.
///
/// # Safety
/// `ptr` must point to `len` bytes the library lets us read and write for
/// the duration of the callback.
unsafe fn host(ptr: *mut c_void, len: usize) -> Result<MemRef> {
    if len > 0 && ptr.is_null() {
        return Err(Error::invalid_param(format!("libsharp_coll passed a NULL buffer of {len} bytes")));
    }
    // SAFETY: forwarded to the caller.
    Ok(unsafe { MemRef::new(ptr.cast(), len, MemType::Host) })
}

/// Run a callback body, turning errors and panics into a nonzero code.
fn guarded(ctx: *mut c_void, f: impl FnOnce(&Oob) -> Result<()>) -> c_int {
    if ctx.is_null() {
        return -1;
    }
    // SAFETY: `ctx` is the `Oob` the TL passed as the OOB context of
    // sharp_coll_init/comm_init; the team keeps it alive (boxed, never
    // moved) until after sharp_coll_finalize and comm_destroy.
    let oob = unsafe { &*ctx.cast::<Oob>() };
    match catch_unwind(AssertUnwindSafe(|| f(oob))) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => oob.record(e),
        Err(_) => oob.record(Error::internal("an OOB callback panicked")),
    }
}

/// `bcast(ctx, buf, len, root)` for libsharp_coll.
pub(crate) unsafe extern "C" fn oob_bcast(ctx: *mut c_void, buf: *mut c_void, len: c_int, root: c_int) -> c_int {
    guarded(ctx, |oob| {
        let root = usize::try_from(root).map_err(|_| Error::invalid_param(format!("OOB bcast root {root}")))?;
        // SAFETY: the library passes a buffer of `len` bytes it owns for the call.
        let buf = unsafe { host(buf, length(len)?)? };
        oob.bcast(buf, root)
    })
}

/// `barrier(ctx)` for libsharp_coll.
pub(crate) unsafe extern "C" fn oob_barrier(ctx: *mut c_void) -> c_int {
    guarded(ctx, Oob::barrier)
}

/// `gather(ctx, root, sbuf, rbuf, len)` for libsharp_coll (`rbuf` holds
/// `len` bytes per member at the root).
pub(crate) unsafe extern "C" fn oob_gather(
    ctx: *mut c_void,
    root: c_int,
    sbuf: *mut c_void,
    rbuf: *mut c_void,
    len: c_int,
) -> c_int {
    guarded(ctx, |oob| {
        let root = usize::try_from(root).map_err(|_| Error::invalid_param(format!("OOB gather root {root}")))?;
        let len = length(len)?;
        // SAFETY: the library passes `len` bytes to send, and at the root
        // `len` bytes per member to receive into, for the call.
        let send = unsafe { host(sbuf, len)? };
        let recv = if oob.rank() == root {
            let total = len
                .checked_mul(oob.size())
                .ok_or_else(|| Error::invalid_param(format!("OOB gather of {len} bytes × {} overflows", oob.size())))?;
            // SAFETY: as above.
            Some(unsafe { host(rbuf, total)? })
        } else {
            None
        };
        oob.gather(root, send, recv)
    })
}
