//! [`Comm`]: one NCCL communicator, created non-blocking and polled, its
//! collectives enqueued on a stream, released by finalize and destroy —
//! and aborted only after an error.
//!
//! States: `Initializing` (ncclCommInitRankConfig returned, the
//! communicator is being made in NCCL's threads; [`Comm::poll_ready`]
//! asks `ncclCommGetAsyncError`), `Ready`, `Released` (destroyed or
//! aborted: every later call is refused with the reason). A failed call
//! (the init, a collective, the async error) aborts the communicator at
//! once and keeps the error; [`Comm::release`] finalizes and destroys a
//! healthy one. `Drop` never aborts a healthy communicator: it finalizes
//! and destroys it (bounded), and leaks it with a warning when that does
//! not finish in time.

use std::ffi::{c_int, c_void};
use std::task::Poll;
use std::time::{Duration, Instant};

use ferrocoll_core::{Error, Result, Status};

use super::sys::{self, ConfigV21400, IN_PROGRESS, RawComm, RawUniqueId, SUCCESS};
use super::{Nccl, error};

/// How long a call on a non-blocking communicator that answered
/// `ncclInProgress` (an enqueue, a finalize) may take before it is an
/// error: such calls end in milliseconds unless something is broken.
pub const CALL_LIMIT: Duration = Duration::from_secs(30);

/// `ncclUniqueId`: made by rank 0 ([`Nccl::unique_id`]), sent to every rank.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct UniqueId(pub [u8; sys::UNIQUE_ID_BYTES]);

impl std::fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "UniqueId({:02x?}..)", &self.0[..8])
    }
}

impl Nccl {
    /// A new unique id (`ncclGetUniqueId`; NCCL opens rank 0's bootstrap socket).
    pub fn unique_id(&self) -> Result<UniqueId> {
        let mut raw = RawUniqueId { internal: [0; sys::UNIQUE_ID_BYTES] };
        // SAFETY: the entry point is present (probe); it writes the id we own.
        let r = unsafe { (self.symbols().get_unique_id)(&mut raw) };
        if r != SUCCESS {
            return Err(error::nccl_error("ncclGetUniqueId", r, self.error_text(r), None));
        }
        // `c_char` is i8 on x86_64 and u8 on aarch64: the cast is a no-op there.
        #[allow(clippy::unnecessary_cast)]
        Ok(UniqueId(raw.internal.map(|c| c as u8)))
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    Initializing,
    Ready,
    /// Destroyed or aborted; why, for the refusal of later calls.
    Released(String),
}

/// One NCCL communicator (see the module docs). Not `Sync`: NCCL calls on
/// one communicator must not run concurrently; holders put it behind a lock.
pub struct Comm {
    nccl: &'static Nccl,
    raw: RawComm,
    state: State,
    rank: usize,
    size: usize,
}

// SAFETY: the communicator handle may be used from any thread, one call at
// a time (NCCL's rule); `&mut self` on every call that touches it gives that.
unsafe impl Send for Comm {}

impl std::fmt::Debug for Comm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NCCL communicator (rank {} of {}, {:?})", self.rank, self.size, self.state)
    }
}

impl Comm {
    /// Start creating rank `rank` of a communicator of `size` ranks
    /// (`ncclCommInitRankConfig`, non-blocking). The CUDA context of the
    /// device it is for must be current on the calling thread. Returns at
    /// once; [`Comm::poll_ready`] says when it is made.
    pub fn start(nccl: &'static Nccl, id: &UniqueId, size: usize, rank: usize) -> Result<Comm> {
        let (n, r) = match (c_int::try_from(size), c_int::try_from(rank)) {
            (Ok(n), Ok(r)) if rank < size => (n, r),
            _ => return Err(Error::invalid_param(format!("NCCL rank {rank} of {size} is out of range"))),
        };
        let mut raw: RawComm = std::ptr::null_mut();
        let mut config = ConfigV21400::non_blocking();
        let id = RawUniqueId { internal: id.0.map(|b| b as std::ffi::c_char) };
        // SAFETY: the entry point is present (probe); raw and config are
        // ours and outlive the call (NCCL copies the config); the id is
        // passed by value as declared.
        let res = unsafe { (nccl.symbols().init_rank_config)(&mut raw, n, id, r, &mut config) };
        let mut comm = Comm { nccl, raw, state: State::Initializing, rank, size };
        match res {
            SUCCESS | IN_PROGRESS if !raw.is_null() => Ok(comm),
            SUCCESS | IN_PROGRESS => {
                comm.state = State::Released("never created".into());
                Err(Error::new(Status::NoMessage, "ncclCommInitRankConfig returned no communicator"))
            }
            res => Err(comm.fail("ncclCommInitRankConfig", res)),
        }
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Whether the communicator is made and healthy.
    pub fn is_ready(&self) -> bool {
        self.state == State::Ready
    }

    /// Whether it was destroyed or aborted.
    pub fn is_released(&self) -> bool {
        matches!(self.state, State::Released(_))
    }

    /// The library.
    pub fn nccl(&self) -> &'static Nccl {
        self.nccl
    }

    /// `Ready(Ok)` once the communicator is made, `Pending` while NCCL
    /// makes it, `Ready(Err)` if that failed (the communicator is then
    /// aborted) or it was released. Also the health check of a ready one
    /// (`ncclCommGetAsyncError`: a failed peer or network shows here).
    pub fn poll_ready(&mut self) -> Poll<Result<()>> {
        if let State::Released(why) = &self.state {
            return Poll::Ready(Err(Error::invalid_param(format!("the NCCL communicator was {why}"))));
        }
        match self.async_error() {
            SUCCESS => {
                self.state = State::Ready;
                Poll::Ready(Ok(()))
            }
            IN_PROGRESS => Poll::Pending,
            r => {
                let call =
                    if self.state == State::Initializing { "ncclCommInitRankConfig" } else { "ncclCommGetAsyncError" };
                Poll::Ready(Err(self.fail(call, r)))
            }
        }
    }

    fn async_error(&mut self) -> sys::NcclResult {
        let mut r: sys::NcclResult = SUCCESS;
        // SAFETY: the communicator is live (not released: checked by callers); r is ours.
        let call = unsafe { (self.nccl.symbols().get_async_error)(self.raw, &mut r) };
        if call != SUCCESS { call } else { r }
    }

    /// The error of `call` that returned `r`, with NCCL's last message;
    /// the communicator is aborted (an error occurred: it cannot be trusted
    /// to finalize), and later calls are refused naming this one.
    fn fail(&mut self, call: &str, r: sys::NcclResult) -> Error {
        let last = match (self.nccl.symbols().last_error, self.raw.is_null()) {
            // SAFETY: ncclGetLastError accepts the communicator (or none) and returns its text.
            (Some(last), false) => error::text(unsafe { last(self.raw) }),
            _ => None,
        };
        let e = error::nccl_error(call, r, self.nccl.error_text(r), last)
            .prefixed(format_args!("NCCL rank {} of {}", self.rank, self.size));
        if let Err(abort) = self.abort() {
            ferrocoll_core::log_warn!("{abort} (after: {e})");
        }
        self.state = State::Released(format!("aborted after: {e}"));
        e
    }

    /// Abort the communicator (`ncclCommAbort`): only after an error.
    pub fn abort(&mut self) -> Result<()> {
        if self.is_released() || self.raw.is_null() {
            return Ok(());
        }
        self.state = State::Released("aborted".into());
        // SAFETY: live communicator, released here once (state set above).
        let r = unsafe { (self.nccl.symbols().abort)(self.raw) };
        if r == SUCCESS { Ok(()) } else { Err(error::nccl_error("ncclCommAbort", r, self.nccl.error_text(r), None)) }
    }

    /// Wait (at most `limit`) until a call that answered `ncclInProgress` has finished.
    fn settle(&mut self, call: &str, limit: Duration) -> Result<()> {
        let start = Instant::now();
        loop {
            match self.async_error() {
                SUCCESS => return Ok(()),
                IN_PROGRESS if start.elapsed() < limit => std::thread::yield_now(),
                IN_PROGRESS => {
                    return Err(Error::new(
                        Status::TimedOut,
                        format!("{call} on NCCL rank {} of {} did not finish within {limit:?}", self.rank, self.size),
                    ));
                }
                r => return Err(self.fail(call, r)),
            }
        }
    }

    /// Check the result of an enqueueing call: `ncclInProgress` is waited
    /// out (bounded by [`CALL_LIMIT`]), an error aborts the communicator.
    fn checked(&mut self, call: &str, r: sys::NcclResult) -> Result<()> {
        match r {
            SUCCESS => Ok(()),
            IN_PROGRESS => self.settle(call, CALL_LIMIT),
            r => Err(self.fail(call, r)),
        }
    }

    fn usable(&self, call: &str) -> Result<()> {
        match &self.state {
            State::Ready => Ok(()),
            State::Initializing => Err(Error::internal(format!("{call} on an NCCL communicator still being created"))),
            State::Released(why) => Err(Error::invalid_param(format!("{call}: the NCCL communicator was {why}"))),
        }
    }

    /// Finalize and destroy a healthy communicator (`ncclCommFinalize`,
    /// polled at most `limit`, then `ncclCommDestroy`); a communicator still
    /// being created is first waited for (as long). A failure aborts it (an
    /// error occurred); one that does not finish in `limit` is left alone
    /// (`TimedOut`; never aborted for slowness alone).
    pub fn release(&mut self, limit: Duration) -> Result<()> {
        if self.is_released() || self.raw.is_null() {
            return Ok(());
        }
        let start = Instant::now();
        while self.state == State::Initializing {
            match self.poll_ready() {
                Poll::Ready(r) => r?,
                Poll::Pending if start.elapsed() < limit => std::thread::sleep(Duration::from_micros(100)),
                Poll::Pending => {
                    return Err(Error::new(
                        Status::TimedOut,
                        format!(
                            "the NCCL communicator (rank {} of {}) was still being created after {limit:?}",
                            self.rank, self.size
                        ),
                    ));
                }
            }
        }
        // SAFETY: live, ready communicator; no call runs concurrently (&mut self).
        let r = unsafe { (self.nccl.symbols().finalize)(self.raw) };
        match r {
            SUCCESS => {}
            IN_PROGRESS => self.settle("ncclCommFinalize", limit.saturating_sub(start.elapsed()))?,
            r => return Err(self.fail("ncclCommFinalize", r)),
        }
        self.state = State::Released("destroyed".into());
        // SAFETY: finalized, released once (state set above).
        let r = unsafe { (self.nccl.symbols().destroy)(self.raw) };
        if r == SUCCESS { Ok(()) } else { Err(error::nccl_error("ncclCommDestroy", r, self.nccl.error_text(r), None)) }
    }

    /// Run `enqueue` between `ncclGroupStart` and `ncclGroupEnd` (grouped
    /// send/receive); `ncclGroupEnd` is called even if `enqueue` fails.
    pub fn group(&mut self, enqueue: impl FnOnce(&mut Comm) -> Result<()>) -> Result<()> {
        self.usable("ncclGroupStart")?;
        // SAFETY: present entry point; takes no argument.
        let r = unsafe { (self.nccl.symbols().group_start)() };
        self.checked("ncclGroupStart", r)?;
        let inner = enqueue(self);
        // SAFETY: as above; closes the group opened here.
        let r = unsafe { (self.nccl.symbols().group_end)() };
        let end = if self.is_released() { Ok(()) } else { self.checked("ncclGroupEnd", r) };
        inner.and(end)
    }
}

/// The enqueueing calls. Addresses are device (or device-accessible)
/// addresses; `stream` a `CUstream`.
///
/// # Safety (every call)
/// The buffers must be device-accessible memory of the communicator's
/// device, valid for the counts given (in elements of `dtype`) until the
/// stream has run the work, and `stream` a valid stream of that device.
impl Comm {
    /// `ncclAllReduce`.
    ///
    /// # Safety
    /// See the impl block.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn all_reduce(
        &mut self,
        send: u64,
        recv: u64,
        count: usize,
        dtype: c_int,
        op: c_int,
        stream: *mut c_void,
    ) -> Result<()> {
        self.usable("ncclAllReduce")?;
        // SAFETY: the caller's contract; the communicator is ready.
        let r = unsafe {
            (self.nccl.symbols().all_reduce)(ptr(send), ptr(recv).cast_mut(), count, dtype, op, self.raw, stream)
        };
        self.checked("ncclAllReduce", r)
    }

    /// `ncclReduce`.
    ///
    /// # Safety
    /// See the impl block (`recv` matters only on the root).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn reduce(
        &mut self,
        send: u64,
        recv: u64,
        count: usize,
        dtype: c_int,
        op: c_int,
        root: usize,
        stream: *mut c_void,
    ) -> Result<()> {
        self.usable("ncclReduce")?;
        let root = self.peer(root)?;
        // SAFETY: the caller's contract; the communicator is ready.
        let r = unsafe {
            (self.nccl.symbols().reduce)(ptr(send), ptr(recv).cast_mut(), count, dtype, op, root, self.raw, stream)
        };
        self.checked("ncclReduce", r)
    }

    /// `ncclBroadcast`.
    ///
    /// # Safety
    /// See the impl block.
    pub unsafe fn broadcast(
        &mut self,
        send: u64,
        recv: u64,
        count: usize,
        dtype: c_int,
        root: usize,
        stream: *mut c_void,
    ) -> Result<()> {
        self.usable("ncclBroadcast")?;
        let root = self.peer(root)?;
        // SAFETY: the caller's contract; the communicator is ready.
        let r = unsafe {
            (self.nccl.symbols().broadcast)(ptr(send), ptr(recv).cast_mut(), count, dtype, root, self.raw, stream)
        };
        self.checked("ncclBroadcast", r)
    }

    /// `ncclAllGather` (`count` per rank).
    ///
    /// # Safety
    /// See the impl block.
    pub unsafe fn all_gather(
        &mut self,
        send: u64,
        recv: u64,
        count: usize,
        dtype: c_int,
        stream: *mut c_void,
    ) -> Result<()> {
        self.usable("ncclAllGather")?;
        // SAFETY: the caller's contract; the communicator is ready.
        let r = unsafe {
            (self.nccl.symbols().all_gather)(ptr(send), ptr(recv).cast_mut(), count, dtype, self.raw, stream)
        };
        self.checked("ncclAllGather", r)
    }

    /// `ncclReduceScatter` (`count` per rank).
    ///
    /// # Safety
    /// See the impl block.
    pub unsafe fn reduce_scatter(
        &mut self,
        send: u64,
        recv: u64,
        count: usize,
        dtype: c_int,
        op: c_int,
        stream: *mut c_void,
    ) -> Result<()> {
        self.usable("ncclReduceScatter")?;
        // SAFETY: the caller's contract; the communicator is ready.
        let r = unsafe {
            (self.nccl.symbols().reduce_scatter)(ptr(send), ptr(recv).cast_mut(), count, dtype, op, self.raw, stream)
        };
        self.checked("ncclReduceScatter", r)
    }

    /// `ncclAlltoAll` where the library has it (`NotSupported` otherwise:
    /// use grouped send/receive).
    ///
    /// # Safety
    /// See the impl block.
    pub unsafe fn all_to_all(
        &mut self,
        send: u64,
        recv: u64,
        count: usize,
        dtype: c_int,
        stream: *mut c_void,
    ) -> Result<()> {
        self.usable("ncclAlltoAll")?;
        let f = self.nccl.symbols().all_to_all.ok_or_else(|| self.missing("ncclAlltoAll"))?;
        // SAFETY: the caller's contract; the communicator is ready.
        let r = unsafe { f(ptr(send), ptr(recv).cast_mut(), count, dtype, self.raw, stream) };
        self.checked("ncclAlltoAll", r)
    }

    /// `ncclGather` where the library has it.
    ///
    /// # Safety
    /// See the impl block.
    pub unsafe fn gather(
        &mut self,
        send: u64,
        recv: u64,
        count: usize,
        dtype: c_int,
        root: usize,
        stream: *mut c_void,
    ) -> Result<()> {
        let f = self.nccl.symbols().gather;
        // SAFETY: forwarded to our caller.
        unsafe { self.rooted("ncclGather", f, send, recv, count, dtype, root, stream) }
    }

    /// `ncclScatter` where the library has it.
    ///
    /// # Safety
    /// See the impl block.
    pub unsafe fn scatter(
        &mut self,
        send: u64,
        recv: u64,
        count: usize,
        dtype: c_int,
        root: usize,
        stream: *mut c_void,
    ) -> Result<()> {
        let f = self.nccl.symbols().scatter;
        // SAFETY: forwarded to our caller.
        unsafe { self.rooted("ncclScatter", f, send, recv, count, dtype, root, stream) }
    }

    /// A rooted call (`ncclGather`, `ncclScatter`) that only newer libraries have.
    ///
    /// # Safety
    /// See the impl block.
    #[allow(clippy::too_many_arguments)]
    unsafe fn rooted(
        &mut self,
        name: &'static str,
        f: Option<sys::RootedFn>,
        send: u64,
        recv: u64,
        count: usize,
        dtype: c_int,
        root: usize,
        stream: *mut c_void,
    ) -> Result<()> {
        self.usable(name)?;
        let f = f.ok_or_else(|| self.missing(name))?;
        let root = self.peer(root)?;
        // SAFETY: the caller's contract; the communicator is ready.
        let r = unsafe { f(ptr(send), ptr(recv).cast_mut(), count, dtype, root, self.raw, stream) };
        self.checked(name, r)
    }

    /// `ncclSend` (inside [`Comm::group`] when paired with receives).
    ///
    /// # Safety
    /// See the impl block.
    pub unsafe fn send(
        &mut self,
        buf: u64,
        count: usize,
        dtype: c_int,
        peer: usize,
        stream: *mut c_void,
    ) -> Result<()> {
        self.usable("ncclSend")?;
        let peer = self.peer(peer)?;
        // SAFETY: the caller's contract; the communicator is ready.
        let r = unsafe { (self.nccl.symbols().send)(ptr(buf), count, dtype, peer, self.raw, stream) };
        self.checked("ncclSend", r)
    }

    /// `ncclRecv` (inside [`Comm::group`] when paired with sends).
    ///
    /// # Safety
    /// See the impl block.
    pub unsafe fn recv(
        &mut self,
        buf: u64,
        count: usize,
        dtype: c_int,
        peer: usize,
        stream: *mut c_void,
    ) -> Result<()> {
        self.usable("ncclRecv")?;
        let peer = self.peer(peer)?;
        // SAFETY: the caller's contract; the communicator is ready.
        let r = unsafe { (self.nccl.symbols().recv)(ptr(buf).cast_mut(), count, dtype, peer, self.raw, stream) };
        self.checked("ncclRecv", r)
    }

    fn peer(&self, peer: usize) -> Result<c_int> {
        match c_int::try_from(peer) {
            Ok(p) if peer < self.size => Ok(p),
            _ => {
                Err(Error::invalid_param(format!("NCCL peer {peer} is not a rank of a communicator of {}", self.size)))
            }
        }
    }

    fn missing(&self, call: &str) -> Error {
        Error::not_supported(format!(
            "NCCL {} has no {call} (grouped send/receive stands in for it)",
            self.nccl.version_string()
        ))
    }
}

fn ptr(addr: u64) -> *const c_void {
    std::ptr::with_exposed_provenance(addr as usize)
}

impl Drop for Comm {
    fn drop(&mut self) {
        if self.is_released() || self.raw.is_null() {
            return;
        }
        // Never an abort here for a healthy communicator: finalize and
        // destroy, bounded; if that does not finish, leak it with a warning.
        if let Err(e) = self.release(CALL_LIMIT) {
            ferrocoll_core::log_warn!("releasing the NCCL communicator (rank {} of {}): {e}", self.rank, self.size);
        }
    }
}
