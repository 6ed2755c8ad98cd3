//! TL/NCCL's team: the unique id, the communicator made at the first
//! collective, the team's own stream and events, and teardown.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Poll;
use std::time::{Duration, Instant};

use ferrocoll_core::args::CollInit;
use ferrocoll_core::backend::CollTask;
use ferrocoll_core::score::Score;
use ferrocoll_core::{Error, MemType, Result};
use ferrocoll_cuda::nccl::sys::Fallbacks;
use ferrocoll_cuda::nccl::{Comm, Nccl, UniqueId, comm::CALL_LIMIT};
use ferrocoll_cuda::{Context, Event, EventPool, Stream};

use super::alg::{self, NcclTask};
use crate::base::{Alg, AlgTeam, DefaultAlg, Registry, TeamOf};

/// What the first collective makes, and what later ones use.
#[derive(Default)]
struct Lazy {
    comm: Option<Comm>,
    /// The creation's (or a later fatal call's) error, repeated to every later post.
    failed: Option<Error>,
    /// The team's own stream, for plain posts.
    stream: Option<Stream>,
    events: Option<EventPool>,
}

/// How long the first triggered post on a CUDA stream waits for the team's
/// communicator when the collective has no timeout of its own: as long as
/// team creation may take (`UCC_TEAM_CREATE_TIMEOUT`'s default), since
/// every rank's first collective takes part in making it.
pub(crate) const COMM_WAIT_LIMIT: Duration = Duration::from_secs(120);

/// The team (shared by its tasks).
pub(crate) struct NcclTeam {
    nccl: &'static Nccl,
    id: UniqueId,
    pub(crate) rank: usize,
    pub(crate) size: usize,
    device: usize,
    ctx: Context,
    fallbacks: Fallbacks,
    lazy: Mutex<Lazy>,
    /// A collective failed, timed out or was cancelled with work in flight:
    /// the communicator is aborted at teardown instead of finalized.
    errored: AtomicBool,
    /// "TL/NCCL rank r of n (device d)", for messages.
    pub(crate) desc: Arc<str>,
    /// What a collective waits for, for timeout messages, made once per
    /// team (`None`: the communicator's creation) and NCCL call rather than
    /// formatted at every post.
    messages: Mutex<HashMap<Option<&'static str>, Arc<str>>>,
}

impl NcclTeam {
    /// The engine's team over a new TL/NCCL team (no NCCL call yet: the
    /// communicator is made at the first collective).
    pub(crate) fn new(
        nccl: &'static Nccl,
        device: usize,
        id: UniqueId,
        rank: usize,
        size: usize,
    ) -> Result<TeamOf<NcclTeam>> {
        let ctx = ferrocoll_cuda::driver()?.device(device)?.context();
        let desc =
            format!("TL/NCCL rank {rank} of {size} (CUDA device {device}, NCCL {})", nccl.version_string()).into();
        let team = NcclTeam {
            nccl,
            id,
            rank,
            size,
            device,
            ctx,
            fallbacks: nccl.fallbacks(),
            lazy: Mutex::default(),
            errored: AtomicBool::new(false),
            desc,
            messages: Mutex::default(),
        };
        Ok(TeamOf(Arc::new(team)))
    }

    fn lock(&self) -> MutexGuard<'_, Lazy> {
        // Poisoned only by a panic while held; its fields stay consistent
        // (each is replaced whole), so go on.
        self.lazy.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn fallbacks(&self) -> Fallbacks {
        self.fallbacks
    }

    /// "`call` enqueued by this team to complete", for timeout messages.
    pub(crate) fn message_enqueued(&self, call: &'static str) -> Arc<str> {
        self.message(Some(call), || format!("{call} enqueued by {} to complete (cuEventQuery)", self.desc))
    }

    /// "this team's communicator to be created", for timeout messages.
    pub(crate) fn message_creating(&self) -> Arc<str> {
        self.message(None, || {
            format!(
                "{}'s communicator to be created (ncclCommInitRankConfig, polled by ncclCommGetAsyncError)",
                self.desc
            )
        })
    }

    fn message(&self, key: Option<&'static str>, make: impl FnOnce() -> String) -> Arc<str> {
        let mut map = self.messages.lock().unwrap_or_else(|p| p.into_inner());
        map.entry(key).or_insert_with(|| make().into()).clone()
    }

    /// Mark the team as having had an error (its communicator will be aborted at teardown).
    pub(crate) fn set_errored(&self) {
        self.errored.store(true, Ordering::Relaxed);
    }

    /// Whether the communicator exists and is healthy (a triggered post may
    /// then enqueue on the engine's stream).
    pub(crate) fn comm_ready(&self) -> bool {
        self.lock().comm.as_ref().is_some_and(Comm::is_ready)
    }

    /// Poll [`poll_comm`](Self::poll_comm) until the communicator is made or
    /// failed, at most `limit` (a `TimedOut` error saying what was awaited;
    /// the creation goes on, and later posts poll it again).
    pub(crate) fn wait_comm(&self, limit: Duration) -> Result<()> {
        let start = Instant::now();
        loop {
            if let Poll::Ready(r) = self.poll_comm() {
                return r;
            }
            if start.elapsed() >= limit {
                // As for a collective that timed out: the creation may never
                // end, so teardown aborts instead of finalizing.
                self.set_errored();
                return Err(Error::timed_out(format!(
                    "{}: a triggered post on a CUDA stream waited {limit:?} for the NCCL communicator \
                     (ncclCommInitRankConfig still in progress: has every rank of the team posted a collective?)",
                    self.desc
                )));
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    /// Make the communicator (first call), then poll its creation: `Pending`
    /// while NCCL makes it; the error of a failed creation for this and every
    /// later collective.
    pub(crate) fn poll_comm(&self) -> Poll<Result<()>> {
        let mut lazy = self.lock();
        if let Some(e) = &lazy.failed {
            return Poll::Ready(Err(e.duplicate()));
        }
        let res = (|| -> Result<Poll<Result<()>>> {
            if lazy.comm.is_none() {
                self.ctx.make_current()?;
                lazy.comm = Some(Comm::start(self.nccl, &self.id, self.size, self.rank)?);
            }
            let comm = lazy.comm.as_mut().ok_or_else(|| Error::internal("TL/NCCL has no communicator"))?;
            Ok(comm.poll_ready())
        })();
        let res = match res {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(r)) => r,
            Err(e) => Err(e),
        };
        match res {
            Ok(()) => {
                if lazy.stream.is_none() {
                    let made = self.ctx.make_current().and_then(|()| Stream::create(self.ctx));
                    match made {
                        Ok(s) => lazy.stream = Some(s),
                        Err(e) => return Poll::Ready(Err(self.fatal(&mut lazy, e.prefixed("the team's stream")))),
                    }
                    lazy.events = Some(EventPool::new(self.ctx));
                }
                Poll::Ready(Ok(()))
            }
            Err(e) => Poll::Ready(Err(self.fatal(&mut lazy, e))),
        }
    }

    /// Keep `e` for every later post, abort the communicator (an error
    /// occurred), and return it.
    fn fatal(&self, lazy: &mut Lazy, e: Error) -> Error {
        self.set_errored();
        if let Some(comm) = lazy.comm.as_mut() {
            if let Err(abort) = comm.abort() {
                ferrocoll_core::log_warn!("{}: {abort}", self.desc);
            }
        }
        let e = e.prefixed(&self.desc);
        lazy.failed = Some(Error::duplicate(&e));
        e
    }

    /// Enqueue with `enqueue` on `stream` (the engine's, as a `CUstream`) or
    /// on the team's own stream, then record an event after it — unless the
    /// stream is being captured (the graph's launches will run the work:
    /// `Ok(None)`). The device's context is made current first.
    pub(crate) fn enqueue(
        &self,
        stream: Option<usize>,
        enqueue: &dyn Fn(&mut Comm, *mut std::ffi::c_void) -> Result<()>,
    ) -> Result<Option<Event>> {
        let mut lazy = self.lock();
        if let Some(e) = &lazy.failed {
            return Err(e.duplicate());
        }
        let res = (|| {
            self.ctx.make_current()?;
            let Lazy { comm, stream: own, events, .. } = &mut *lazy;
            let user;
            let stream = match (stream, &*own) {
                (Some(raw), _) => {
                    // SAFETY: the engine's stream, valid while the engine and
                    // every request triggered on it live (CudaStreamEe's contract).
                    user = unsafe { Stream::from_raw(std::ptr::with_exposed_provenance_mut(raw)) }?;
                    &user
                }
                (None, Some(own)) => own,
                (None, None) => return Err(Error::internal("TL/NCCL enqueue before its stream was made")),
            };
            let capturing = stream.capture_status()? != ferrocoll_cuda::Capture::None;
            let comm = comm.as_mut().ok_or_else(|| Error::internal("TL/NCCL enqueue without a communicator"))?;
            enqueue(comm, stream.as_raw())?;
            if capturing {
                return Ok(None);
            }
            let events = events.as_ref().ok_or_else(|| Error::internal("TL/NCCL enqueue without events"))?;
            let ev = events.take()?;
            match ev.record(stream) {
                Ok(()) => Ok(Some(ev)),
                Err(e) => {
                    events.put(ev);
                    Err(e)
                }
            }
        })();
        res.map_err(|e| {
            let released = lazy.comm.as_ref().is_some_and(Comm::is_released);
            if released { self.fatal(&mut lazy, e) } else { e.prefixed(&self.desc) }
        })
    }

    /// Whether the work before `ev` has run; also checks the communicator's
    /// health (a peer's failure shows as an async error), which aborts it.
    pub(crate) fn poll_event(&self, ev: &Event) -> Poll<Result<()>> {
        let mut lazy = self.lock();
        if let Some(e) = &lazy.failed {
            return Poll::Ready(Err(e.duplicate()));
        }
        if let Err(e) = self.ctx.make_current() {
            return Poll::Ready(Err(e));
        }
        match ev.query() {
            Ok(true) => Poll::Ready(Ok(())),
            Ok(false) => match lazy.comm.as_mut().map(Comm::poll_ready) {
                Some(Poll::Ready(Err(e))) => Poll::Ready(Err(self.fatal(&mut lazy, e))),
                _ => Poll::Pending,
            },
            Err(e) => Poll::Ready(Err(self.fatal(&mut lazy, e.prefixed("the collective's completion event")))),
        }
    }

    /// Give an event back to the pool.
    pub(crate) fn put_event(&self, ev: Event) {
        if let Some(events) = &self.lock().events {
            events.put(ev);
        }
    }
}

impl Drop for NcclTeam {
    /// Team destruction: finalize and destroy a healthy communicator; abort
    /// one only after an error. Then the team's stream (synchronised first
    /// when healthy) and events.
    fn drop(&mut self) {
        let errored = self.errored.load(Ordering::Relaxed);
        let lazy = self.lazy.get_mut().unwrap_or_else(|p| p.into_inner());
        if self.ctx.make_current().is_err() {
            ferrocoll_core::log_warn!(
                "{}: cannot make device {}'s context current at teardown",
                self.desc,
                self.device
            );
        }
        if let Some(comm) = lazy.comm.as_mut() {
            let released = if errored { comm.abort() } else { comm.release(CALL_LIMIT) };
            if let Err(e) = released {
                ferrocoll_core::log_warn!("{} at teardown: {e}", self.desc);
            }
        }
        if let Some(stream) = &lazy.stream {
            if !errored {
                if let Err(e) = stream.synchronize() {
                    ferrocoll_core::log_warn!("{} at teardown: {e}", self.desc);
                }
            }
        }
        // Fields drop next: the stream (destroyed), then the event pool.
    }
}

impl AlgTeam for NcclTeam {
    type Exec = alg::Exec;
    const TL: &'static str = "nccl";

    fn registry(&self) -> &'static Registry<alg::Exec> {
        alg::registry()
    }

    fn mem_types(&self) -> &[MemType] {
        &[MemType::Cuda]
    }

    fn score(&self) -> Score {
        super::SCORE
    }

    fn defaults(&self) -> Vec<DefaultAlg> {
        alg::defaults()
    }

    fn accepts(&self, init: &CollInit) -> Result<()> {
        alg::accepts(init)
    }

    fn task(self: &Arc<Self>, alg: &'static Alg<alg::Exec>, init: &Arc<CollInit>) -> Result<Arc<dyn CollTask>> {
        Ok(Arc::new(NcclTask::new(self.clone(), init.clone(), alg.run)))
    }
}
