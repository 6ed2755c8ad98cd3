//! Scattered device blocks, staged block by block.
//!
//! PyTorch's `all_to_all` on lists of separately allocated CUDA tensors
//! passes a NULL buffer and the tensors' addresses as displacements. On
//! host memory the blocks are rebased on the lowest one (the collective
//! touches only the blocks); device memory is staged whole by the TLs, and
//! the span between scattered blocks is not the caller's to read or write.
//! So such a side runs on contiguous scratch of the device's memory
//! component instead: the non-empty blocks are packed into it in rank
//! order, gathered into it at each post (a source) or scattered back from
//! it when the collective completes, before its status says so (a
//! destination).
//!
//! A triggered post (PyTorch's CUDA path) does the same in step with the
//! engine ([`StagingEe`]): it gathers once the trigger fired (the work
//! queued before it on the stream is done) and scatters before it releases
//! the engine (so later stream work sees the results). The copies are
//! synchronous on the memory component.

use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::task::Poll;
use std::time::Duration;

use ferrocoll::core::backend::{EeTrigger, Mc, McSet, Scratch};
use ferrocoll::{Ee, EeType, Event, MemRef, MemType, Result};

use crate::abi::{UCC_OK, UccStatus};
use crate::guard::{log_error, status_code};

/// One non-empty block of a side: `bytes` at the caller's `addr`, at
/// `off` bytes into the scratch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Block {
    /// The caller's address.
    pub addr: u64,
    /// Its length.
    pub bytes: u64,
    /// Where it lies in the scratch.
    pub off: u64,
}

/// What to stage for one side, as translation finds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// The source side (gathered at post), else the destination (scattered at completion).
    pub src: bool,
    /// The blocks' memory type.
    pub mem: MemType,
    /// The non-empty blocks, packed in rank order.
    pub blocks: Vec<Block>,
    /// Scratch bytes (the blocks' total).
    pub bytes: u64,
}

/// A side running on scratch: the plan and its memory.
pub(crate) struct Staged {
    plan: Plan,
    scratch: Scratch,
    mc: Arc<dyn Mc>,
}

// SAFETY: the scratch is device memory owned by this value; it and the
// caller's blocks are only touched through the memory component's copies,
// which a request makes from one thread at a time (a post, or the
// completion of that post).
unsafe impl Send for Staged {}
// SAFETY: as above: no method mutates the value itself.
unsafe impl Sync for Staged {}

impl Staged {
    /// Scratch for `plan` from `mcs`.
    pub(crate) fn new(plan: Plan, mcs: &McSet) -> Result<Staged> {
        let mc = mcs.get(plan.mem)?.clone();
        let bytes = usize::try_from(plan.bytes)
            .map_err(|_| ferrocoll::Error::invalid_param(format!("{} bytes to stage overflow", plan.bytes)))?;
        let scratch = mc.alloc(bytes)?;
        Ok(Staged { plan, scratch, mc })
    }

    /// Whether this is the source side.
    pub(crate) fn is_src(&self) -> bool {
        self.plan.src
    }

    /// The scratch's start (the side's buffer from now on).
    pub(crate) fn addr(&self) -> *mut u8 {
        self.scratch.mem().addr()
    }

    /// The memory type of the scratch and the blocks.
    pub(crate) fn mem_type(&self) -> MemType {
        self.plan.mem
    }

    /// The block `b`'s two places: (the caller's, the scratch's).
    fn places(&self, b: &Block) -> (MemRef, MemRef) {
        let mt = self.plan.mem;
        // SAFETY: the caller's block (valid while the request lives, UCC's
        // contract) and its slot of the scratch (off + bytes <= its size,
        // as the plan was built); copies are the only access.
        unsafe {
            (
                MemRef::new(b.addr as usize as *mut u8, b.bytes as usize, mt),
                MemRef::new(self.addr().add(b.off as usize), b.bytes as usize, mt),
            )
        }
    }

    /// Copy every block into the scratch (a source, before each post).
    pub(crate) fn gather(&self) -> Result<()> {
        for b in &self.plan.blocks {
            let (user, scratch) = self.places(b);
            self.mc.copy(scratch, user)?;
        }
        Ok(())
    }

    /// Copy every block back from the scratch (a destination, at completion).
    pub(crate) fn scatter(&self) -> Result<()> {
        for b in &self.plan.blocks {
            let (user, scratch) = self.places(b);
            self.mc.copy(user, scratch)?;
        }
        Ok(())
    }
}

/// A request's staged sides, and how their last scatter went.
pub(crate) struct StageSet {
    /// The sides (empty for most requests).
    pub staged: Vec<Staged>,
    /// `UCC_OK`, or the status of a failed scatter of a triggered post
    /// (made before the completion callback, which reports it).
    failed: AtomicI32,
}

impl StageSet {
    /// A set of sides.
    pub(crate) fn new(staged: Vec<Staged>) -> StageSet {
        StageSet { staged, failed: AtomicI32::new(UCC_OK) }
    }

    /// Gather every source side.
    pub(crate) fn gather(&self) -> Result<()> {
        self.staged.iter().filter(|s| s.is_src()).try_for_each(Staged::gather)
    }

    /// Scatter every destination side.
    pub(crate) fn scatter(&self) -> Result<()> {
        self.staged.iter().filter(|s| !s.is_src()).try_for_each(Staged::scatter)
    }

    /// The status a triggered post's scatter left (and forget it).
    pub(crate) fn take_failed(&self) -> UccStatus {
        // Relaxed: written by the task before its completion callback, which reads it on the same thread.
        self.failed.swap(UCC_OK, Ordering::Relaxed)
    }
}

/// An engine seen through a request's staged sides: its triggers gather
/// when they fire and scatter before they release the engine. It offers no
/// `native_post` (the default): the gathers and scatters are host work, so
/// a staged request always takes the engine's host-driven trigger.
pub(crate) struct StagingEe<'a> {
    /// The caller's engine.
    pub inner: &'a dyn Ee,
    /// The request's sides.
    pub stages: Arc<StageSet>,
}

impl Ee for StagingEe<'_> {
    fn ee_type(&self) -> EeType {
        self.inner.ee_type()
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn trigger(&self, ev: &Event, request: u64) -> Result<Box<dyn EeTrigger>> {
        let inner = self.inner.trigger(ev, request)?;
        Ok(Box::new(StagingTrigger { inner, stages: self.stages.clone() }))
    }

    fn set_event(&self, ev: Event) -> Result<()> {
        self.inner.set_event(ev)
    }

    fn get_event(&self) -> Option<Event> {
        self.inner.get_event()
    }

    fn ack_event(&self, ev: &Event) -> Result<()> {
        self.inner.ack_event(ev)
    }

    fn wait(&self, timeout: Duration) -> Result<Event> {
        self.inner.wait(timeout)
    }

    fn capturing(&self) -> Result<bool> {
        self.inner.capturing()
    }
}

/// The trigger of a [`StagingEe`].
struct StagingTrigger {
    inner: Box<dyn EeTrigger>,
    stages: Arc<StageSet>,
}

impl EeTrigger for StagingTrigger {
    fn poll_ready(&mut self) -> Poll<Result<()>> {
        match self.inner.poll_ready() {
            // The work queued before the post is done: its blocks are final.
            Poll::Ready(Ok(())) => Poll::Ready(self.stages.gather()),
            other => other,
        }
    }

    fn waiting_for(&self) -> Arc<str> {
        self.inner.waiting_for()
    }

    fn emit(&self, ev: Event) {
        self.inner.emit(ev)
    }

    fn complete(&mut self, succeeded: bool) {
        let mut ok = succeeded;
        if succeeded {
            // Before the engine lets later work run: that work reads the blocks.
            if let Err(e) = self.stages.scatter() {
                log_error("triggered collective (copying staged blocks back)", &e);
                self.stages.failed.store(status_code(e.status()), Ordering::Relaxed);
                ok = false;
            }
        }
        self.inner.complete(ok);
    }
}
