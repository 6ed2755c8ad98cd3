//! Finalized request handles a team keeps for a later call equal to theirs.
//!
//! A loop that runs the same collective on the same buffers (Open MPI's
//! coll/ucc, ucc_perftest, a training step) calls `ucc_collective_init`
//! and `ucc_collective_finalize` around every post. Making a handle each
//! time — translating the arguments, the request, its completion callback,
//! the allocations — and quarantining it at finalize cost the C interface
//! about twice what the collective itself costs.
//!
//! So `ucc_collective_finalize` keeps a handle whose call has a key
//! ([`CallKey`]) and whose request may run again (`Request::renew`: the
//! same conditions as the team's plan cache) on its team, dead as any
//! finalized handle; an init whose arguments have the same key takes it
//! back, alive, with its request renewed — the arguments are not
//! translated again, nothing is allocated, and the post re-arms the last
//! post's slot. A team keeps [`KEPT`] handles, the oldest given up first
//! (its request released, its memory quarantined as usual); destroying the
//! team gives them all up.
//!
//! What it changes for the caller: a handle finalized once is refused by a
//! second finalize, as ever, until an init with the same call hands it out
//! again; from then on the pointer is the new request's (as with any
//! allocator that reuses freed memory).

use std::sync::Arc;

use ferrocoll::core::engine::{SlotGuard, SlotLock};

use crate::call_key::CallKey;
use crate::request::ReqHandle;

/// Handles a team keeps: enough for a loop that alternates a few calls
/// (a collective and the barriers between them, say).
pub(crate) const KEPT: usize = 4;

/// A team's kept handles.
#[derive(Default)]
pub(crate) struct Spares {
    /// Taken by an init and a finalize of every call with a key: a lock of
    /// one atomic operation (`SlotLock`).
    kept: SlotLock<Kept>,
}

#[derive(Default)]
struct Kept {
    /// The team was destroyed: nothing is kept any more.
    closed: bool,
    /// Oldest first; each holds its call's key (`ReqHandle::call_key`).
    handles: Vec<Arc<ReqHandle>>,
}

impl Spares {
    /// The kept handle of the call `key`, if there is one.
    pub(crate) fn take(&self, key: &CallKey) -> Option<Arc<ReqHandle>> {
        let mut kept = self.lock();
        let i = kept.handles.iter().position(|h| h.call_key() == Some(key))?;
        Some(kept.handles.remove(i))
    }

    /// Keep `h`, finalized, for its call (C's reference to it, which the
    /// next init of that call hands back; a handle without a key is given
    /// up); the oldest kept one, or `h` itself once the team is destroyed,
    /// is given up instead. The key stays in the handle: copying its 136
    /// bytes in and out of the list cost three memcpy calls a finalize.
    pub(crate) fn keep(&self, h: Arc<ReqHandle>) {
        let given_up = {
            let mut kept = self.lock();
            if kept.closed || h.call_key().is_none() {
                Some(h)
            } else {
                if kept.handles.capacity() == 0 {
                    kept.handles.reserve_exact(KEPT);
                }
                let oldest = (kept.handles.len() == KEPT).then(|| kept.handles.remove(0));
                kept.handles.push(h);
                oldest
            }
        };
        // Outside the lock: giving up releases a request.
        if let Some(h) = given_up {
            ReqHandle::give_up(h);
        }
    }

    /// Give up every kept handle, and keep none from now on (the team is destroyed).
    pub(crate) fn close(&self) {
        let all = {
            let mut kept = self.lock();
            kept.closed = true;
            std::mem::take(&mut kept.handles)
        };
        for h in all {
            ReqHandle::give_up(h);
        }
    }

    /// How many handles are kept (for tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().handles.len()
    }

    fn lock(&self) -> SlotGuard<'_, Kept> {
        self.kept.lock()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::*;
    use crate::request::{ucc_collective_finalize, ucc_collective_init, ucc_collective_post};
    use crate::team::{TeamHandle, ucc_team_destroy};
    use crate::testing::Single;

    /// An allreduce of 4 int32 on host memory from `src` to `dst`.
    fn allreduce(src: &mut [i32; 4], dst: &mut [i32; 4]) -> CollArgs {
        let int32 = (ferrocoll::DataType::Int32 as u64) << 3;
        // SAFETY: all-zero arguments are a mask of 0; the fields an allreduce reads are set below.
        let mut a: CollArgs = unsafe { std::mem::zeroed() };
        a.coll_type = ferrocoll::CollType::Allreduce as u32;
        a.op = ferrocoll::ReduceOp::Sum as u32;
        a.src.info = BufferInfo { buffer: src.as_mut_ptr().cast(), count: 4, datatype: int32, mem_type: 0 };
        a.dst.info = BufferInfo { buffer: dst.as_mut_ptr().cast(), count: 4, datatype: int32, mem_type: 0 };
        a
    }

    /// Init, post and finalize `a` on `team` (a team of one: the post ends at once); the handle.
    fn run(a: &CollArgs, team: *mut TeamHandle) -> *mut ReqHandle {
        let mut req = std::ptr::null_mut();
        // SAFETY: the caller's arguments over live buffers; a live team; a writable out-pointer.
        unsafe {
            assert_eq!(ucc_collective_init(a, &mut req, team), UCC_OK);
            assert_eq!(ucc_collective_post(req), UCC_OK);
            assert_eq!((*req.cast::<CollReq>()).status, UCC_OK, "a team of one ends at post");
            assert_eq!(ucc_collective_finalize(req), UCC_OK);
        }
        req
    }

    /// The same call again gets the finalized handle back, alive, and its
    /// post reads what the buffers hold now; a finalized handle is still
    /// refused by a second finalize until then.
    #[test]
    fn the_same_call_gets_its_finalized_handle_back() {
        let s = Single::new(std::ptr::null());
        let team = s.team();
        let (mut src, mut dst) = ([1, 2, 3, 4], [0; 4]);
        let a = allreduce(&mut src, &mut dst);
        let first = run(&a, team);
        // SAFETY: finalized, so dead (kept): the word reads so.
        assert_eq!(unsafe { ucc_collective_finalize(first) }, UCC_ERR_INVALID_PARAM, "finalized twice");
        // SAFETY: a live team.
        assert_eq!(unsafe { &*team }.spares.len(), 1);
        for x in 10..20 {
            // SAFETY: the buffer `a` points to; no post is in flight.
            unsafe { a.src.info.buffer.cast::<i32>().write(x) };
            assert_eq!(run(&a, team), first, "the same call, the same handle");
            // SAFETY: as above.
            assert_eq!(unsafe { a.dst.info.buffer.cast::<i32>().read() }, x, "read what the buffer held");
        }
        // SAFETY: the team made above, destroyed once.
        assert_eq!(unsafe { ucc_team_destroy(team) }, UCC_OK);
    }

    /// Another call gets a handle of its own; at most `KEPT` are kept, and
    /// destroying the team gives them all up (their handles still read as
    /// finalized).
    #[test]
    fn other_calls_get_their_own_and_the_team_gives_them_up() {
        let s = Single::new(std::ptr::null());
        let team = s.team();
        let mut bufs = [[0i32; 4]; 2 * (KEPT + 2)];
        let (srcs, dsts) = bufs.split_at_mut(KEPT + 2);
        let calls: Vec<CollArgs> = srcs.iter_mut().zip(dsts).map(|(s, d)| allreduce(s, d)).collect();
        let handles: Vec<_> = calls.iter().map(|a| run(a, team)).collect();
        for (i, h) in handles.iter().enumerate() {
            assert!(!handles[..i].contains(h), "call {i} got a handle of an earlier call");
        }
        // SAFETY: a live team.
        let spares = unsafe { &*team }.spares.clone();
        assert_eq!(spares.len(), KEPT, "the oldest were given up");
        // SAFETY: the team made above, destroyed once.
        assert_eq!(unsafe { ucc_team_destroy(team) }, UCC_OK);
        assert_eq!(spares.len(), 0, "a destroyed team keeps nothing");
        for h in handles {
            // SAFETY: finalized handles, all quarantined (not freed) by now.
            assert_eq!(unsafe { ucc_collective_finalize(h) }, UCC_ERR_INVALID_PARAM);
        }
    }

    /// A kept handle outlives its context when the caller destroys the
    /// context first (out of UCC's order): handed out again, its post fails
    /// naming the destroyed context, and the team's destroy gives it up.
    #[test]
    fn kept_handles_survive_their_context_being_destroyed_first() {
        let s = Single::new(std::ptr::null());
        let team = s.team();
        let (mut src, mut dst) = ([1, 2, 3, 4], [0; 4]);
        let a = allreduce(&mut src, &mut dst);
        let kept = run(&a, team);
        // SAFETY: the test's live context, destroyed once.
        assert_eq!(unsafe { crate::context::ucc_context_destroy(s.ctx) }, UCC_OK);
        let mut req = std::ptr::null_mut();
        // SAFETY: the arguments above; a live team whose context is gone.
        assert_eq!(unsafe { ucc_collective_init(&a, &mut req, team) }, UCC_OK);
        assert_eq!(req, kept, "the kept handle, handed out again");
        // SAFETY: the live request just made.
        assert_eq!(unsafe { ucc_collective_post(req) }, UCC_ERR_INVALID_PARAM, "its context is gone");
        // SAFETY: as above; its post failed, so it is not in progress.
        assert_eq!(unsafe { ucc_collective_finalize(req) }, UCC_OK);
        // SAFETY: the team made above, destroyed once.
        assert_eq!(unsafe { ucc_team_destroy(team) }, UCC_OK);
        // SAFETY: the request's handle, finalized and quarantined (still readable).
        assert_eq!(unsafe { ucc_collective_finalize(kept) }, UCC_ERR_INVALID_PARAM);
    }
}
