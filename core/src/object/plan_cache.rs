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
//!   there is no callback and no active set: validation is a function of
//!   the arguments, the contents of the counts and displacement arrays it
//!   reads (v-variants), the memory type of a buffer given as unknown (the
//!   raw call holds the type the memory components give its address now,
//!   as validation would: Open MPI's coll/ucc passes every buffer so), the
//!   team's rank and size and the context's default timeout alone, so
//!   arguments equal to a parked request's, whose arrays hold the values
//!   its validation read ([`ArraysRead`]), would validate as they did.
//! - On the validated arguments ([`PlanCache::take`]) otherwise: the
//!   collective, the buffers (address, length and memory type), count,
//!   datatype, reduction, root, flags, timeout, tag, and the operands the
//!   algorithms receive — for the v-variants, whose counts and
//!   displacements live in arrays the caller may rewrite between calls,
//!   the blocks validation just read from them.
//!
//! Only host memory is parked, only tasks that say they may run again for a
//! new request ([`CollTask::reusable`]), only requests never posted on an
//! execution engine, and none with a callback in its arguments (a closure
//! cannot be compared; `Request::set_completion`, which the C interface
//! uses, is not part of the call and does not stop parking).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

use super::request::Live;
use crate::args::{ArraysRead, CollArgs, CollBuffer, CollFlags, CollInit};
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
    /// The TL's tag that each post notes in the team's `PostedVia`
    /// (`NO_TL` for zero-size collectives).
    pub(crate) via_tag: u8,
    /// What each post shows on the call board, if there is one (all but the sequence number).
    pub(crate) shown: Option<Posted>,
    /// What its task waits for, shared by its posts: a post starts once the
    /// one before has finished, and a finished slot's record never reads it.
    pub(crate) diag: Arc<TaskDiag>,
    /// The raw arguments it was made from, when a later call can be matched on them.
    pub(crate) raw: Option<RawKey>,
    /// [`call_hint`] of `init`, worked out once (each park writes it).
    pub(crate) call_hint: u64,
    /// While parked: the finished request's slot, which the next post
    /// re-arms. `None` otherwise.
    pub(crate) parked: Option<Arc<TaskSlot>>,
    /// The cache entry this plan was taken from, held for it until it is
    /// parked back there or released ([`PlanCache::release`]).
    pub(crate) held: Option<usize>,
    /// The state of the request that runs it now (`request.rs`); a
    /// default one while parked.
    pub(crate) live: Live,
}

impl Drop for Plan {
    /// A parked plan that is dropped (evicted, refused, or its team
    /// destroyed) takes its slot's kept future with it: the progress queue
    /// or the flight recorder may hold the slot a while longer.
    fn drop(&mut self) {
        if let Some(slot) = &self.parked {
            slot.forget_spent();
        }
    }
}

/// One side of the raw arguments, as validation would read it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum RawBuffer {
    None,
    /// Address, count, datatype, memory type.
    Plain(usize, u64, DataType, MemType),
    /// Address, counts array, displacements array, datatype, memory type:
    /// the arrays' contents are compared apart ([`ArraysRead`]).
    Listed(usize, usize, usize, DataType, MemType),
}

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
    /// The raw call of `args`, if they can be matched raw; a buffer of
    /// unknown memory type has the type `resolve` gives its address now,
    /// as validation would resolve it.
    pub(crate) fn of(args: &CollArgs, resolve: &dyn Fn(*const u8) -> MemType) -> Option<RawCall> {
        let typed = |mem_type: MemType, addr: *const u8| match mem_type {
            MemType::Unknown => resolve(addr),
            t => t,
        };
        let buffer = |b: &CollBuffer| match b {
            CollBuffer::None => RawBuffer::None,
            CollBuffer::Info(i) => {
                RawBuffer::Plain(i.buffer as usize, i.count, i.datatype, typed(i.mem_type, i.buffer.cast_const()))
            }
            CollBuffer::InfoV(i) => RawBuffer::Listed(
                i.buffer as usize,
                i.counts as usize,
                i.displacements as usize,
                i.datatype,
                typed(i.mem_type, i.buffer.cast_const()),
            ),
        };
        if args.cb.is_some() || args.active_set.is_some() {
            return None;
        }
        Some(RawCall {
            coll: args.coll_type,
            src: buffer(&args.src),
            dst: buffer(&args.dst),
            op: args.op,
            flags: args.flags,
            root: args.root,
            timeout: args.timeout.to_bits(),
            tag: args.tag,
        })
    }

    /// A hint for finding it among the parked: equal calls, equal hints.
    fn hint(&self) -> u64 {
        let buf = |b: &RawBuffer| match *b {
            RawBuffer::None => 0,
            RawBuffer::Plain(addr, count, ..) => mix(addr as u64, count),
            RawBuffer::Listed(addr, counts, ..) => mix(addr as u64, counts as u64),
        };
        mix(mix(self.coll as u64, self.root), mix(buf(&self.src), buf(&self.dst)))
    }
}

/// The raw arguments a plan was made from, and the counts and
/// displacement arrays (v-variants) their validation read.
pub(crate) struct RawKey {
    pub(crate) call: RawCall,
    pub(crate) arrays: ArraysRead,
    /// `call`'s hint, worked out once (each park writes it).
    hint: u64,
}

impl RawKey {
    /// The key of a call made from `call`, whose validation read `arrays`.
    pub(crate) fn new(call: RawCall, arrays: ArraysRead) -> RawKey {
        RawKey { hint: call.hint(), call, arrays }
    }
}

/// The hint of a validated call: equal (`same_call`) calls, equal hints.
pub(crate) fn call_hint(init: &CollInit) -> u64 {
    let addr = |m: &Option<crate::MemRef>| m.map_or(0, |m| m.addr() as u64);
    mix(mix(init.coll as u64, init.count as u64), mix(addr(&init.src), addr(&init.dst)))
}

/// Two words into one (a multiplicative mix: hints, not a hash table
/// facing untrusted keys; a collision only costs a comparison).
fn mix(a: u64, b: u64) -> u64 {
    (a.rotate_left(29) ^ b).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Requests parked per team: a loop of a few calls (a collective and the
/// barrier a benchmark puts between two, a trainer's few buckets) finds
/// each of its calls; when a fifth arrives, one leaves (round robin).
const PARKED: usize = 4;

/// One parked plan, and the hints of its call (written before the plan
/// is, read before it is taken: a stale hint costs a miss or a
/// comparison, never a wrong plan — the taker compares the whole call).
/// Its `plan` is null (free), a parked plan, or [`held`] while the request
/// that took its plan runs.
#[derive(Default)]
struct Entry {
    plan: AtomicPtr<Plan>,
    raw: AtomicU64,
    call: AtomicU64,
}

/// An entry's `plan` while the request that took its plan out runs: the
/// entry is that request's, and it parks its plan back with a plain store
/// (no locked instruction, which would wait until the stores of the
/// collective just finished reached the cache: on two ranks a trip to the
/// other core, BENCHMARKS.md eleventh round). Never a `Box`'s address.
fn held() -> *mut Plan {
    std::ptr::NonNull::dangling().as_ptr()
}

/// Whether `p`, an entry's `plan`, is a parked plan.
fn is_plan(p: *mut Plan) -> bool {
    !p.is_null() && p != held()
}

impl Entry {
    /// Take the plan out and hold the entry for it, if there is a plan
    /// (one atomic operation).
    fn hold(&self) -> Option<Box<Plan>> {
        // Acquire: pairs with the Release of the park that put it there.
        let p = self.plan.swap(held(), Ordering::AcqRel);
        if p.is_null() {
            // Nothing was there: free again (no one else writes an entry held).
            self.plan.store(std::ptr::null_mut(), Ordering::Release);
            return None;
        }
        // Held already: by another request, whose entry stays so.
        // SAFETY: any other value came from `Box::into_raw` in a park, and
        // the swap made this caller its only owner.
        (p != held()).then(|| unsafe { Box::from_raw(p) })
    }

    /// Take the plan out and leave the entry free, if there is a plan (a
    /// held entry stays held).
    fn take(&self) -> Option<Box<Plan>> {
        let p = self.plan.load(Ordering::Acquire);
        if !is_plan(p) {
            return None;
        }
        // Acquire: as in `hold`.
        let taken = self.plan.compare_exchange(p, std::ptr::null_mut(), Ordering::AcqRel, Ordering::Relaxed);
        // SAFETY: as in `hold`: the exchange made this caller its owner.
        taken.ok().map(|p| unsafe { Box::from_raw(p) })
    }
}

/// A team's parked requests: a few entries that a request takes its plan
/// from with one atomic operation and parks it back into with none (a
/// lock cost two each, and the post path of a small collective is counted
/// in them).
#[derive(Default)]
pub(crate) struct PlanCache {
    entries: [Entry; PARKED],
    /// The entry the next park of a new plan replaces when none is free (round robin).
    next: AtomicUsize,
    /// Set when the team is destroyed: nothing is parked any more.
    closed: AtomicBool,
}

impl PlanCache {
    /// The parked plan of a request with the same call as `init`, if any.
    pub(crate) fn take(&self, init: &CollInit) -> Option<Box<Plan>> {
        if !parkable(init) {
            return None;
        }
        let hint = call_hint(init);
        self.find(|e| e.call.load(Ordering::Relaxed) == hint, |p| same_call(&p.init, init))
    }

    /// The parked plan of a request made from exactly these raw arguments,
    /// whose counts and displacement arrays (v-variants) still hold what
    /// they held then (see the module docs: no validation needed).
    ///
    /// # Safety
    /// `raw` must be the raw call of arguments passed to this team's
    /// `collective_init`, under its contract (which covers the arrays their
    /// validation would read: [`ArraysRead::unchanged`]).
    pub(crate) unsafe fn take_raw(&self, raw: &RawCall) -> Option<Box<Plan>> {
        let hint = raw.hint();
        let same = |p: &Plan| {
            // SAFETY: equal raw calls on one team read the same arrays, which
            // our caller's contract covers.
            p.raw.as_ref().is_some_and(|r| r.call == *raw && unsafe { r.arrays.unchanged() })
        };
        self.find(|e| e.raw.load(Ordering::Relaxed) == hint, same)
    }

    /// The first plan whose entry's hint says `maybe` and which is `it`,
    /// its entry held for it; one taken on a hint that misled is parked
    /// again.
    fn find(&self, maybe: impl Fn(&Entry) -> bool, it: impl Fn(&Plan) -> bool) -> Option<Box<Plan>> {
        for (i, e) in self.entries.iter().enumerate() {
            if !(maybe(e) && is_plan(e.plan.load(Ordering::Relaxed))) {
                continue;
            }
            if let Some(mut p) = e.hold() {
                p.held = Some(i);
                if it(&p) {
                    return Some(p);
                }
                self.park(p);
            }
        }
        None
    }

    /// Let `plan` go without parking it, giving back the entry it holds.
    pub(crate) fn release(&self, mut plan: Box<Plan>) {
        self.unhold(&mut plan);
    }

    /// Free the entry `plan` was taken from, if it holds one: for a plan
    /// that goes (`release`), or that its request keeps for longer than a
    /// collective (`Request::renew`: a C handle kept for its call), which
    /// would otherwise keep the entry from other calls. It parks later as
    /// a new plan would.
    pub(crate) fn unhold(&self, plan: &mut Plan) {
        if let Some(e) = plan.held.take().and_then(|i| self.entries.get(i)) {
            // Release: no one else writes an entry held.
            e.plan.store(std::ptr::null_mut(), Ordering::Release);
        }
    }

    /// Park a finished request's plan (holding its slot, see
    /// [`Plan::parked`]) for the next request with the same call: back into
    /// the entry it was taken from, with a plain store, or into a free one,
    /// or else in place of a parked one (round robin). A plan that is not
    /// parked (not parkable, the team destroyed, every entry held) is
    /// dropped here.
    pub(crate) fn park(&self, mut plan: Box<Plan>) {
        if !plan.reusable() {
            return self.release(plan);
        }
        let (raw, call) = (plan.raw.as_ref().map_or(0, |r| r.hint), plan.call_hint);
        let held = plan.held.take();
        let p = Box::into_raw(plan);
        let hint = |e: &Entry| {
            e.raw.store(raw, Ordering::Relaxed);
            e.call.store(call, Ordering::Relaxed);
        };
        let parked_in = match held.and_then(|i| self.entries.get(i)) {
            Some(e) => {
                hint(e);
                // Release: the taker's Acquire sees the plan whole. No one
                // else writes an entry held (see `held`).
                e.plan.store(p, Ordering::Release);
                e
            }
            None => match self.park_new(p, hint) {
                Some(e) => e,
                None => {
                    // SAFETY: `p` came from `Box::into_raw` above and was not parked.
                    drop(unsafe { Box::from_raw(p) });
                    return;
                }
            },
        };
        // Either `clear` takes this plan, or this park sees the cache closed
        // and takes it back (both may happen; one gets it). A plan parked
        // back with a plain store may miss a `clear` running at the same
        // time: it then stays until the cache is dropped, with the team.
        if self.closed.load(Ordering::SeqCst) {
            drop(parked_in.take());
        }
    }

    /// Park `p` (from `Box::into_raw`) into a free entry, else in place of
    /// a parked plan, never a held entry; the entry, or `None` if every
    /// entry was held.
    fn park_new(&self, p: *mut Plan, hint: impl Fn(&Entry)) -> Option<&Entry> {
        let null = std::ptr::null_mut();
        for e in &self.entries {
            if e.plan.load(Ordering::Relaxed).is_null() {
                hint(e);
                // SeqCst with `clear`'s (see `park`).
                if e.plan.compare_exchange(null, p, Ordering::SeqCst, Ordering::Relaxed).is_ok() {
                    return Some(e);
                }
            }
        }
        for _ in 0..PARKED {
            // Relaxed, and a load and a store rather than one atomic
            // operation: only which entry goes depends on it.
            let n = self.next.load(Ordering::Relaxed);
            self.next.store(n.wrapping_add(1), Ordering::Relaxed);
            let e = &self.entries[n % PARKED];
            let old = e.plan.load(Ordering::Relaxed);
            if old == held() {
                continue;
            }
            hint(e);
            // SeqCst with `clear`'s (see `park`).
            if e.plan.compare_exchange(old, p, Ordering::SeqCst, Ordering::Relaxed).is_ok() {
                if !old.is_null() {
                    // SAFETY: a plan from `Box::into_raw`, which the exchange made ours.
                    drop(unsafe { Box::from_raw(old) });
                }
                return Some(e);
            }
        }
        None
    }

    /// Release what is parked, and park nothing more (the team is
    /// destroyed: its TL teams should go now).
    pub(crate) fn clear(&self) {
        self.closed.store(true, Ordering::SeqCst);
        for e in &self.entries {
            drop(e.take());
        }
    }
}

impl Drop for PlanCache {
    fn drop(&mut self) {
        for e in &self.entries {
            drop(e.take());
        }
    }
}

impl Plan {
    /// Whether a later request with the same call may run this plan again
    /// (see the module docs): parked, or renewed in place (`Request::renew`).
    pub(crate) fn reusable(&self) -> bool {
        parkable(&self.init) && self.task.as_ref().is_some_and(|t| t.reusable())
    }
}

/// Whether requests like `init` are parked at all (see the module docs).
fn parkable(init: &CollInit) -> bool {
    init.active_set.is_none() && init.mem_type == MemType::Host && init.cb.is_none()
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
        && a.ops == b.ops
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::PostInfo;
    use crate::engine::TaskFuture;
    use crate::{Error, Result};

    /// A task that may run again (`reusable`), and never runs here.
    struct Reusable;

    impl CollTask for Reusable {
        fn start(&self, _: &PostInfo<'_>) -> Result<TaskFuture> {
            Err(Error::internal("not run in these tests"))
        }
        fn reusable(&self) -> bool {
            true
        }
    }

    /// A barrier's plan on a team of one, parkable.
    fn plan() -> Box<Plan> {
        let args = CollArgs::new(CollType::Barrier);
        // SAFETY: a barrier has no buffers.
        let init = unsafe { CollInit::validate(&args, 0, 1, &|_| MemType::Host, None) }.expect("a barrier");
        let task: Arc<dyn CollTask> = Arc::new(Reusable);
        Box::new(Plan {
            call_hint: call_hint(&init),
            init: Arc::new(init),
            task: Some(task),
            selected: "test/reusable".into(),
            via_tag: 0,
            shown: None,
            diag: Arc::default(),
            raw: None,
            parked: None,
            held: None,
            live: Live::default(),
        })
    }

    fn states(c: &PlanCache) -> Vec<&'static str> {
        let state = |e: &Entry| match e.plan.load(Ordering::Relaxed) {
            p if p.is_null() => "free",
            p if p == held() => "held",
            _ => "plan",
        };
        c.entries.iter().map(state).collect()
    }

    #[test]
    fn a_taken_plan_holds_its_entry_until_it_is_parked_back_or_released() {
        assert!(parkable(&plan().init), "the test's plan must be parkable");
        let c = PlanCache::default();
        c.park(plan());
        assert_eq!(states(&c), ["plan", "free", "free", "free"]);
        let init = plan().init.clone();
        let taken = c.take(&init).expect("the parked plan");
        assert_eq!((taken.held, states(&c)), (Some(0), vec!["held", "free", "free", "free"]));
        // New plans fill the free entries, and then replace parked ones,
        // never the held one.
        for _ in 0..6 {
            c.park(plan());
        }
        assert_eq!(states(&c), ["held", "plan", "plan", "plan"]);
        assert!(c.take(&init).is_some_and(|p| p.held.is_some_and(|i| i > 0)), "another parked plan");
        // Parked back: into its own entry, which is a plan again.
        c.park(taken);
        assert_eq!(states(&c)[0], "plan");
        // Released (a request that failed or was cancelled): the entry is free.
        let taken = c.take(&init).expect("a parked plan");
        let i = taken.held.expect("held");
        c.release(taken);
        assert_eq!(states(&c)[i], "free");
        // Kept by its request (renewed): the entry is free, and the plan
        // parks later as a new one, into a free entry.
        let holds = |c: &PlanCache| states(c).iter().filter(|s| **s == "held").count();
        let before = holds(&c);
        let mut kept = c.take(&init).expect("a parked plan");
        let i = kept.held.expect("held");
        assert_eq!(holds(&c), before + 1);
        c.unhold(&mut kept);
        assert_eq!((kept.held, states(&c)[i], holds(&c)), (None, "free", before));
        let plans = |c: &PlanCache| states(c).iter().filter(|s| **s == "plan").count();
        let parked = plans(&c);
        c.park(kept);
        assert_eq!((plans(&c), holds(&c)), (parked + 1, before), "parked into a free entry: {:?}", states(&c));
    }

    #[test]
    fn clear_leaves_a_held_entry_to_its_holder_and_nothing_is_parked_after_it() {
        let c = PlanCache::default();
        c.park(plan());
        c.park(plan());
        let init = plan().init.clone();
        let taken = c.take(&init).expect("a parked plan");
        c.clear();
        let i = taken.held.expect("held");
        assert!(states(&c).iter().enumerate().all(|(j, s)| if j == i { *s == "held" } else { *s == "free" }));
        // Parked back after the clear: taken out again at once.
        c.park(taken);
        c.park(plan());
        assert_eq!(states(&c), ["free"; PARKED]);
    }
}
