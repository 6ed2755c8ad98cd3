//! One-shot requests whose call repeats: a loop that runs the same small
//! collective on the same buffers (what most training loops and HPC codes
//! do) would otherwise select an algorithm, make a task, a diag and a queue
//! slot for every call, and free them all again at finalize.
//!
//! When such a request is released after it completed successfully, its
//! prepared parts are parked on its team ([`PlanCache::park`]); the next
//! `collective_init` with the same call takes them back instead of making
//! new ones — the one-shot request then costs what a persistent request's
//! post costs. A bad argument is refused exactly as before, and the trace
//! still logs the selection. Two ways to match:
//!
//! - On the raw arguments ([`PlanCache::take_raw`]), before validation, when
//!   they are plain buffers of an explicit memory type with no callback and
//!   no active set: validation is a function of the arguments, the team's
//!   rank and size and the context's default timeout alone, so arguments
//!   equal to a parked request's would validate as they did.
//! - On the validated arguments ([`PlanCache::take`]) otherwise: the
//!   collective, the buffers (address, length and memory type), count,
//!   datatype, reduction, root, flags, timeout and tag. For the collectives
//!   parked (no v-variants, no active sets) the algorithms' operands follow
//!   from those alone.
//!
//! Only host memory is parked, only tasks that say they may run again for a
//! new request ([`CollTask::reusable`]), only requests never posted on an
//! execution engine, and none with a callback in its arguments (a closure
//! cannot be compared; `Request::set_completion`, which the C interface
//! uses, is not part of the call and does not stop parking).

use std::sync::{Arc, Mutex, MutexGuard};

use crate::args::{BufferInfo, CollArgs, CollBuffer, CollFlags, CollInit};
use crate::backend::CollTask;
use crate::engine::{Posted, TaskDiag, TaskSlot};
use crate::types::{CollType, DataType, MemType, ReduceOp};

/// What a request runs: everything made at `collective_init` that a later
/// request with the same call can run again.
pub(crate) struct Plan {
    pub(crate) init: Arc<CollInit>,
    /// `None` for zero-size collectives, which complete at post.
    pub(crate) task: Option<Arc<dyn CollTask>>,
    /// `"tl/algorithm"`.
    pub(crate) selected: Arc<str>,
    /// What each post shows on the call board, if there is one (all but the sequence number).
    pub(crate) shown: Option<Posted>,
    /// What its task waits for, shared by its posts: a post starts once the
    /// one before has finished, and a finished slot's record never reads it.
    pub(crate) diag: Arc<TaskDiag>,
    /// The raw arguments it was made from, when a later call can be matched on them.
    pub(crate) raw: Option<RawCall>,
}

/// The prepared parts of a finished one-shot request: its plan (with a
/// task) and its finished slot, which the next post re-arms.
pub(crate) struct Parked {
    pub(crate) plan: Box<Plan>,
    pub(crate) slot: Arc<TaskSlot>,
}

/// One plain buffer of the raw arguments (address, count, datatype, memory type).
type RawBuffer = Option<(usize, u64, DataType, MemType)>;

/// The raw arguments of a call that validation would treat alike every
/// time (see the module docs), compared as they are.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct RawCall {
    coll: CollType,
    src: RawBuffer,
    dst: RawBuffer,
    op: ReduceOp,
    flags: CollFlags,
    root: u64,
    timeout: u64,
    tag: Option<u16>,
}

impl RawCall {
    /// The raw call of `args`, if they can be matched raw.
    pub(crate) fn of(args: &CollArgs) -> Option<RawCall> {
        fn buffer(b: &CollBuffer) -> Option<RawBuffer> {
            match b {
                CollBuffer::None => Some(None),
                CollBuffer::Info(BufferInfo { mem_type: MemType::Unknown, .. }) | CollBuffer::InfoV(_) => None,
                CollBuffer::Info(i) => Some(Some((i.buffer as usize, i.count, i.datatype, i.mem_type))),
            }
        }
        if args.cb.is_some() || args.active_set.is_some() {
            return None;
        }
        Some(RawCall {
            coll: args.coll_type,
            src: buffer(&args.src)?,
            dst: buffer(&args.dst)?,
            op: args.op,
            flags: args.flags,
            root: args.root,
            timeout: args.timeout.to_bits(),
            tag: args.tag,
        })
    }
}

/// Requests parked per team: a loop of a few calls (a collective and the
/// barrier a benchmark puts between two, a trainer's few buckets) finds
/// each of its calls; the oldest leaves when a fifth arrives.
const PARKED: usize = 4;

/// A team's parked requests, oldest first.
#[derive(Default)]
pub(crate) struct PlanCache {
    parked: Mutex<Vec<Parked>>,
}

impl PlanCache {
    fn lock(&self) -> MutexGuard<'_, Vec<Parked>> {
        // Poisoned only if a panic happened while it was held; the Vec stays whole.
        self.parked.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The parked parts of a request with the same call as `init`, if any.
    pub(crate) fn take(&self, init: &CollInit) -> Option<Parked> {
        if !parkable(init) {
            return None;
        }
        let mut parked = self.lock();
        let i = parked.iter().position(|p| same_call(&p.plan.init, init))?;
        Some(parked.remove(i))
    }

    /// The parked parts of a request made from exactly these raw arguments
    /// (see the module docs: no validation needed).
    pub(crate) fn take_raw(&self, raw: &RawCall) -> Option<Parked> {
        let mut parked = self.lock();
        let i = parked.iter().position(|p| p.plan.raw.as_ref() == Some(raw))?;
        Some(parked.remove(i))
    }

    /// Park a finished request's parts (the oldest parked one leaves if
    /// there are [`PARKED`]; it is freed outside the lock).
    pub(crate) fn park(&self, p: Parked) {
        if !(parkable(&p.plan.init) && p.plan.task.as_ref().is_some_and(|t| t.reusable())) {
            return;
        }
        let mut parked = self.lock();
        if parked.capacity() == 0 {
            parked.reserve_exact(PARKED);
        }
        let old = (parked.len() >= PARKED).then(|| parked.remove(0));
        parked.push(p);
        drop(parked);
        drop(old);
    }

    /// Release what is parked (the team is destroyed: its TL teams should go now).
    pub(crate) fn clear(&self) {
        let old = std::mem::take(&mut *self.lock());
        drop(old);
    }
}

/// Whether requests like `init` are parked at all (see the module docs).
fn parkable(init: &CollInit) -> bool {
    !init.coll.is_vector() && init.active_set.is_none() && init.mem_type == MemType::Host && init.cb.is_none()
}

/// Whether `a` and `b` are the same call (see the module docs).
fn same_call(a: &CollInit, b: &CollInit) -> bool {
    a.coll == b.coll
        && a.rank == b.rank
        && a.size == b.size
        && a.root == b.root
        && a.op == b.op
        && a.dtype == b.dtype
        && a.elem_size == b.elem_size
        && a.in_place == b.in_place
        && a.persistent == b.persistent
        && a.timeout == b.timeout
        && a.mem_type == b.mem_type
        && a.msgsize == b.msgsize
        && a.count == b.count
        && a.src == b.src
        && a.dst == b.dst
        && a.dst_fully_written == b.dst_fully_written
        && a.active_set == b.active_set
        && a.tag == b.tag
}
