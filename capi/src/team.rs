//! Teams: `ucc_team_create_post` / `_test` / `_destroy` / `_get_attr`.
//!
//! The members come from an endpoint map over the context's endpoints
//! (Open MPI: no team OOB; ferrocoll creates the team over the transports
//! the context connected), from an endpoint list, or from a team OOB
//! (PyTorch): then each member first allgathers its context endpoint over
//! that OOB, which gives the map, and the team is created over it.

use std::ffi::c_void;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::task::Poll;
use std::time::{Duration, Instant};

use ferrocoll::core::engine::FruitlessProgress;
use ferrocoll::{EpMap as FcEpMap, Error, Result, Status, Team, TeamParams as FcTeamParams};

use crate::abi::*;
use crate::context::ContextHandle;
use crate::guard::{ffi, non_null};
use crate::handle::{Handle, borrow, publish, retire};
use crate::lib_api::put;
use crate::local_team::Wiring;
use crate::oob::{Fixed, RawOob};
use crate::spares::Spares;

/// Where UCC's own team object keeps the team size, which UCC's MPI test
/// reads through the opaque handle.
pub(crate) const SIZE_OFFSET: usize = 360;

/// `UCC_TEAM_CREATE_TIMEOUT`'s default (ferrocoll core's), which also bounds
/// the team OOB's exchange of endpoints.
const TEAM_CREATE_TIMEOUT: Duration = Duration::from_secs(120);

enum State {
    /// Allgathering the members' context endpoints over the team OOB,
    /// since the instant given, for at most the duration given.
    Gathering(Fixed, Instant, Option<Duration>),
    /// Making the team's own context over the team OOB (a context made
    /// without an OOB: `local_team.rs`), since the instant given, for at
    /// most the duration given.
    Wiring(Wiring, Instant, Option<Duration>),
    /// ferrocoll's team creation in progress.
    Creating(Team),
    /// Taken out by a `ucc_team_create_test` that is stepping it: the OOB's
    /// callbacks and the context's progress (completion callbacks) run
    /// without the lock, so that they may call back into this team.
    Busy,
    Ready(Team),
    Failed(Error),
}

/// What a `ucc_team_h` points to.
#[repr(C)]
pub struct TeamHandle {
    magic: AtomicU64,
    /// UCC's private team fields: nothing reads them.
    _ucc_private: [u8; SIZE_OFFSET - 8],
    /// Number of members, where UCC's team has it.
    size: u32,
    /// This member's team rank, once known.
    rank: OnceLock<u32>,
    /// The members' context endpoints, in team-rank order, once known.
    eps: OnceLock<Box<[u64]>>,
    /// The team's context.
    pub(crate) ctx: Arc<ContextHandle>,
    /// `ep` from the parameters, checked once the rank is known.
    ep_hint: Option<u64>,
    state: Mutex<State>,
    /// Finalized requests kept for a later call equal to theirs (`spares.rs`).
    pub(crate) spares: Arc<Spares>,
    /// `ucc_team_create_test` calls in a row that found the team still in
    /// creation (`Context::after_fruitless_test`).
    create_tests: FruitlessProgress,
}

// SAFETY: `magic` is the AtomicU64 at offset 0.
unsafe impl Handle for TeamHandle {
    const WHAT: &'static str = "ucc_team_h";
    const LIVE: u64 = 0xfe77_0c0c_0000_0005;
    const MAGIC_OFFSET: usize = 0;
    fn magic(&self) -> &AtomicU64 {
        &self.magic
    }
}

const _: () = assert!(std::mem::offset_of!(TeamHandle, size) == SIZE_OFFSET);

impl TeamHandle {
    /// This member's team rank, once known.
    pub(crate) fn rank(&self) -> Option<usize> {
        self.rank.get().map(|&r| r as usize)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Run `f` on the created team (an error while it is being created, or failed).
    pub(crate) fn with_team<T>(&self, f: impl FnOnce(&Team) -> Result<T>) -> Result<T> {
        match &*self.state() {
            State::Ready(t) => f(t),
            State::Failed(e) => Err(e.duplicate().prefixed("the team's creation failed")),
            _ => Err(Error::invalid_param("the team is still being created: call ucc_team_create_test until UCC_OK")),
        }
    }

    /// Start ferrocoll's team creation over context endpoints `eps`.
    fn create(&self, eps: Vec<u64>) -> Result<Team> {
        let ctx = self.ctx.get()?;
        let me = ctx.ep() as u64;
        let rank = eps.iter().position(|&e| e == me).ok_or_else(|| {
            Error::invalid_param(format!("this context (endpoint {me}) is not in the team's endpoints {eps:?}"))
        })?;
        if let Some(ep) = self.ep_hint.filter(|&ep| ep != rank as u64) {
            return Err(Error::invalid_param(format!(
                "team_params.ep {ep} differs from this member's rank {rank} in the team's endpoint map"
            )));
        }
        let map = if eps.iter().enumerate().all(|(i, &e)| e == i as u64) && eps.len() == ctx.n_eps() {
            FcEpMap::Full
        } else {
            FcEpMap::Array(eps.clone())
        };
        let team = Team::create_post(&ctx, FcTeamParams::with_ep_map(map))?;
        let _ = self.rank.set(rank as u32);
        let _ = self.eps.set(eps.into_boxed_slice());
        Ok(team)
    }

    /// One step of creation: `InProgress`, `Ok`, or the failure.
    fn step(&self) -> Result<Status> {
        loop {
            let taken = {
                let mut st = self.state();
                match &*st {
                    State::Ready(_) => return Ok(Status::Ok),
                    State::Failed(e) => return Err(e.duplicate()),
                    // Stepped by another call (another thread, or a callback run by that step).
                    State::Busy => return Ok(Status::InProgress),
                    State::Gathering(..) | State::Wiring(..) | State::Creating(_) => {
                        std::mem::replace(&mut *st, State::Busy)
                    }
                }
            };
            // A panic (caught at the boundary) must not leave the state Busy for ever.
            let (next, pending) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.advance(taken)))
                .unwrap_or_else(|_| {
                    (State::Failed(Error::internal("team creation step panicked (see the log)")), false)
                });
            let mut st = self.state();
            if !matches!(*st, State::Busy) {
                // Destroyed meanwhile: what this step made is dropped, without the lock.
                drop(st);
                drop(next);
                return Err(Error::invalid_param("the team was destroyed during ucc_team_create_test"));
            }
            *st = next;
            if pending {
                return Ok(Status::InProgress);
            }
        }
    }

    /// Advance a state taken out of the lock: the next state, and whether it is still in progress.
    fn advance(&self, state: State) -> (State, bool) {
        match state {
            State::Gathering(mut f, since, limit) => match f.test() {
                Poll::Pending => match limit.filter(|l| since.elapsed() > *l) {
                    Some(l) => {
                        let e = Error::timed_out(format!(
                            "team OOB exchange of endpoints not done after {:.1} s (UCC_TEAM_CREATE_TIMEOUT): a \
                             member has not called ucc_team_create_post, or the team OOB does not complete",
                            l.as_secs_f64()
                        ));
                        (State::Failed(e), false)
                    }
                    None => (State::Gathering(f, since, limit), true),
                },
                Poll::Ready(r) => match r.and_then(|b| decode_eps(&b)).and_then(|eps| self.create(eps)) {
                    Ok(team) => (State::Creating(team), false),
                    Err(e) => (State::Failed(e.prefixed("team OOB exchange of endpoints")), false),
                },
            },
            State::Wiring(mut w, since, limit) => match w.step() {
                Poll::Pending => match limit.filter(|l| since.elapsed() > *l) {
                    Some(l) => {
                        let e = Error::timed_out(format!(
                            "making the team's context over the team OOB not done after {:.1} s \
                             (UCC_TEAM_CREATE_TIMEOUT): a member has not called ucc_team_create_post, or the team \
                             OOB does not complete",
                            l.as_secs_f64()
                        ));
                        (State::Failed(e), false)
                    }
                    None => (State::Wiring(w, since, limit), true),
                },
                Poll::Ready(r) => {
                    let made = r.and_then(|ctx| {
                        let n = ctx.n_eps() as u64;
                        self.ctx.adopt(ctx);
                        self.create((0..n).collect())
                    });
                    match made {
                        Ok(team) => (State::Creating(team), false),
                        Err(e) => (State::Failed(e.prefixed("the team's context over its OOB")), false),
                    }
                }
            },
            State::Creating(team) => match team.create_test() {
                Ok(Status::InProgress) => (State::Creating(team), true),
                Ok(_) => (State::Ready(team), false),
                Err(e) => (State::Failed(e), false),
            },
            other => (other, false),
        }
    }
}

fn decode_eps(b: &[u8]) -> Result<Vec<u64>> {
    if !b.len().is_multiple_of(8) {
        return Err(Error::io(format!("{} bytes are not a list of 8-byte endpoints", b.len())));
    }
    Ok(b.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8]))).collect())
}

/// Read a field of the caller's `ucc_team_params_t`.
macro_rules! field {
    ($p:expr, $($f:tt)+) => {
        // SAFETY: the caller's struct; read only when its mask bit is set (every use is guarded).
        unsafe { (&raw const (*$p).$($f)+).read_unaligned() }
    };
}

/// The members' context endpoints from an `ucc_ep_map_t`.
///
/// # Safety
/// `m`'s union member for its type is set; an array map points to `ep_num`
/// elements; a callback map's callback may be called.
unsafe fn ep_map_eps(m: &EpMap, n_eps: usize) -> Result<Vec<u64>> {
    let n = usize::try_from(m.ep_num).ok().filter(|&n| n <= n_eps).ok_or_else(|| {
        Error::invalid_param(format!("team_params.ep_map.ep_num {} exceeds the context's {n_eps} endpoints", m.ep_num))
    })?;
    match m.map_type {
        EP_MAP_FULL => {
            if n != 0 && n != n_eps {
                return Err(Error::invalid_param(format!(
                    "team_params.ep_map is FULL but ep_num {n} is not the context's {n_eps} endpoints"
                )));
            }
            Ok((0..n_eps as u64).collect())
        }
        EP_MAP_STRIDED => {
            // SAFETY: the type says the strided member is set.
            let s = unsafe { m.u.strided };
            (0..n as i128)
                .map(|r| {
                    let e = i128::from(s.start) + r * i128::from(s.stride);
                    u64::try_from(e).map_err(|_| {
                        Error::invalid_param(format!(
                            "team_params.ep_map (strided start {} stride {}) maps rank {r} to endpoint {e}",
                            s.start, s.stride
                        ))
                    })
                })
                .collect()
        }
        EP_MAP_ARRAY => {
            // SAFETY: the type says the array member is set.
            let a = unsafe { m.u.array };
            if a.map.is_null() && n > 0 {
                return Err(Error::invalid_param("team_params.ep_map.array.map is NULL"));
            }
            match a.elem_size {
                // SAFETY: the caller promises ep_num elements of elem_size bytes.
                4 => Ok((0..n).map(|i| u64::from(unsafe { a.map.cast::<u32>().add(i).read_unaligned() })).collect()),
                // SAFETY: as above.
                8 => Ok((0..n).map(|i| unsafe { a.map.cast::<u64>().add(i).read_unaligned() }).collect()),
                s => Err(Error::invalid_param(format!("team_params.ep_map.array.elem_size {s} is not 4 or 8"))),
            }
        }
        EP_MAP_CB => {
            // SAFETY: the type says the cb member is set.
            let c = unsafe { m.u.cb };
            let cb = c.cb.ok_or_else(|| Error::invalid_param("team_params.ep_map.cb.cb is NULL"))?;
            // SAFETY: the caller's callback, called with team ranks below ep_num.
            Ok((0..n as u64).map(|r| unsafe { cb(r, c.cb_ctx) }).collect())
        }
        t => Err(Error::invalid_param(format!("team_params.ep_map.type {t} is not a UCC endpoint map type"))),
    }
}

/// `ucc_team_create_post`.
///
/// # Safety
/// `contexts` points to `num_contexts` handles; `team_params` is a
/// `ucc_team_params_t` whose masked fields are set; `new_team` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_team_create_post(
    contexts: *const *const ContextHandle,
    num_contexts: u32,
    team_params: *const TeamParams,
    new_team: *mut *mut TeamHandle,
) -> UccStatus {
    ffi("ucc_team_create_post", || {
        non_null(contexts, "contexts")?;
        non_null(team_params, "team_params")?;
        non_null(new_team, "new_team")?;
        // NULL until a team is made: a caller that tests or destroys the
        // handle of a failed post gets an error naming it, not a read of
        // whatever was there (UCC's gtest tests its handle after a failure).
        // SAFETY: checked non-null; the caller's handle slot.
        unsafe { new_team.write_unaligned(std::ptr::null_mut()) };
        if num_contexts != 1 {
            return Err(Error::not_supported(format!("num_contexts {num_contexts}: a team spans exactly one context")));
        }
        // SAFETY: one handle pointer, checked by borrow.
        let ctx = unsafe { borrow(contexts.read(), "contexts[0]") }?;
        let p = team_params;
        let mask: u64 = field!(p, mask);
        if mask & TEAM_PARAM_ORDERING != 0 {
            let o: u32 = field!(p, ordering);
            if o != POST_ORDERED {
                return Err(Error::not_supported(format!(
                    "team_params.ordering {o}: ferrocoll runs a team's collectives in post order \
                     (UCC_COLLECTIVE_POST_ORDERED)"
                )));
            }
        }
        if mask & TEAM_PARAM_SYNC_TYPE != 0 {
            let s: u32 = field!(p, sync_type);
            if s != UCC_NO_SYNC_COLLECTIVES {
                return Err(Error::not_supported(format!(
                    "team_params.sync_type {s}: ferrocoll's collectives are non-synchronous only"
                )));
            }
        }
        let ep_hint = (mask & TEAM_PARAM_EP != 0).then(|| field!(p, ep));
        let n_eps = ctx.get()?.n_eps();
        // Members: the endpoint map, else the list, else the team OOB, else every endpoint.
        let (eps, oob) = if mask & TEAM_PARAM_EP_MAP != 0 {
            let m: EpMap = field!(p, ep_map);
            // SAFETY: the caller's map (see ep_map_eps).
            (Some(unsafe { ep_map_eps(&m, n_eps) }?), None)
        } else if mask & TEAM_PARAM_EP_LIST != 0 {
            if mask & TEAM_PARAM_TEAM_SIZE == 0 {
                return Err(Error::invalid_param("team_params.ep_list is set without team_size"));
            }
            let list: *mut u64 = field!(p, ep_list);
            let size: u64 = field!(p, team_size);
            let n = usize::try_from(size).ok().filter(|&n| n <= n_eps).ok_or_else(|| {
                Error::invalid_param(format!("team_params.team_size {size} exceeds the context's {n_eps} endpoints"))
            })?;
            non_null(list, "team_params.ep_list")?;
            // SAFETY: the caller promises team_size elements.
            (Some((0..n).map(|i| unsafe { list.add(i).read_unaligned() }).collect()), None)
        } else if mask & TEAM_PARAM_OOB != 0 {
            let raw = RawOob::new(field!(p, oob), "team_params.oob")?;
            if let Some(ep) = ep_hint.filter(|&ep| ep != raw.rank() as u64) {
                return Err(Error::invalid_param(format!(
                    "team_params.ep {ep} differs from team_params.oob.oob_ep {}",
                    raw.rank()
                )));
            }
            if raw.size() > n_eps && ctx.local.is_none() {
                return Err(Error::invalid_param(format!(
                    "team_params.oob has {} endpoints but the context has {n_eps}: a team's members are endpoints \
                     of its context's OOB (PyTorch's ProcessGroupUCC makes one context a process, over the OOB of \
                     the first group that runs a collective: run one on the whole world first, or set \
                     TORCH_UCC_SHARED_COMM=0)",
                    raw.size()
                )));
            }
            (None, Some(raw))
        } else {
            ((0..n_eps as u64).collect::<Vec<_>>().into(), None)
        };
        let size = eps.as_ref().map_or_else(|| oob.map_or(0, |o| o.size()), Vec::len);
        // A context made without an OOB, and a team of more than itself:
        // the team gets a context of its own, made over the team OOB.
        let wiring = match (&ctx.local, oob) {
            (Some(params), Some(raw)) if raw.size() > 1 => Some(Wiring::start(ctx.lib.clone(), params.clone(), raw)?),
            _ => None,
        };
        let team_ctx = if wiring.is_some() { ctx.child() } else { ctx.clone() };
        let h = TeamHandle {
            magic: AtomicU64::new(0),
            _ucc_private: [0; SIZE_OFFSET - 8],
            size: u32::try_from(size).map_err(|_| Error::invalid_param(format!("team of {size} members")))?,
            rank: OnceLock::new(),
            eps: OnceLock::new(),
            ctx: team_ctx,
            ep_hint: ep_hint.filter(|_| oob.is_none()),
            state: Mutex::new(State::Failed(Error::internal("team not started"))),
            spares: Arc::default(),
            create_tests: FruitlessProgress::default(),
        };
        let state = match (eps, oob, wiring) {
            (_, _, Some(w)) => {
                let limit =
                    ctx.get()?.config().positive_duration_or("TEAM_CREATE_TIMEOUT", Some(TEAM_CREATE_TIMEOUT))?;
                State::Wiring(w, Instant::now(), limit)
            }
            (Some(eps), _, None) => State::Creating(h.create(eps)?),
            (None, Some(raw), None) => {
                let (me, limit) = {
                    let c = ctx.get()?;
                    (c.ep() as u64, c.config().positive_duration_or("TEAM_CREATE_TIMEOUT", Some(TEAM_CREATE_TIMEOUT))?)
                };
                State::Gathering(raw.allgather(me.to_le_bytes().to_vec())?, Instant::now(), limit)
            }
            (None, None, None) => return Err(Error::internal("a team with neither endpoints nor OOB")),
        };
        *h.state() = state;
        // SAFETY: checked non-null.
        unsafe { put(new_team, publish(h)) };
        Ok(UCC_OK)
    })
}

/// `ucc_team_create_test`: `UCC_INPROGRESS` until the team is ready.
///
/// # Safety
/// `team` is a handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_team_create_test(team: *const TeamHandle) -> UccStatus {
    ffi("ucc_team_create_test", || {
        // SAFETY: see handle::borrow.
        let h = unsafe { borrow(team, "team") }?;
        let status = h.step()?;
        if status == Status::InProgress {
            // Callers spin on this and ucc_context_progress; where ranks
            // outnumber cores, the members it waits for need the core.
            // (A team's own context still being made over its OOB has no core context yet.)
            if let Ok(ctx) = h.ctx.get() {
                ctx.after_fruitless_test(&h.create_tests);
            }
        }
        Ok(crate::guard::status_code(status))
    })
}

/// `ucc_team_destroy`: done at once (`UCC_OK`); requests still alive fail to post.
///
/// # Safety
/// `team` is a handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_team_destroy(team: *mut TeamHandle) -> UccStatus {
    ffi("ucc_team_destroy", || {
        // SAFETY: see handle::retire.
        let h = unsafe { retire(team, "team") }?;
        h.spares.close();
        let old = std::mem::replace(&mut *h.state(), State::Failed(Error::invalid_param("the team was destroyed")));
        drop(old);
        h.ctx.close_if_team_own();
        Ok(UCC_OK)
    })
}

/// `ucc_team_get_attr`.
///
/// # Safety
/// `team` is a handle; `team_attr` a `ucc_team_attr_t` with its mask set.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_team_get_attr(team: *const TeamHandle, team_attr: *mut TeamAttr) -> UccStatus {
    ffi("ucc_team_get_attr", || {
        // SAFETY: see handle::borrow.
        let h = unsafe { borrow(team, "team") }?;
        non_null(team_attr, "team_attr")?;
        // SAFETY: the caller's struct: its mask is read, and only asked-for fields are written.
        unsafe {
            let mask = (&raw const (*team_attr).mask).read_unaligned();
            let created = || h.with_team(|_| Ok(()));
            if mask & (TEAM_ATTR_EP | TEAM_ATTR_EPS) != 0 {
                created()?;
            }
            if mask & TEAM_ATTR_POST_ORDERING != 0 {
                put(&raw mut (*team_attr).ordering, POST_ORDERED);
            }
            if mask & TEAM_ATTR_OUTSTANDING_CALLS != 0 {
                put(&raw mut (*team_attr).outstanding_colls, 0);
            }
            if mask & TEAM_ATTR_EP != 0 {
                put(&raw mut (*team_attr).ep, u64::from(h.rank.get().copied().unwrap_or(0)));
            }
            if mask & TEAM_ATTR_EP_RANGE != 0 {
                put(&raw mut (*team_attr).ep_range, EP_RANGE_CONTIG);
            }
            if mask & TEAM_ATTR_SYNC_TYPE != 0 {
                put(&raw mut (*team_attr).sync_type, UCC_NO_SYNC_COLLECTIVES);
            }
            if mask & TEAM_ATTR_MEM_PARAMS != 0 {
                put(&raw mut (*team_attr).mem_params, MemMapParams { segments: std::ptr::null_mut(), n_segments: 0 });
            }
            if mask & TEAM_ATTR_SIZE != 0 {
                put(&raw mut (*team_attr).size, h.size);
            }
            if mask & TEAM_ATTR_EPS != 0 {
                // The list lives as long as the team handle (UCC hands out its own array too).
                let eps = h.eps.get().map_or(std::ptr::null_mut(), |e| e.as_ptr().cast_mut());
                put(&raw mut (*team_attr).eps, eps);
            }
        }
        Ok(UCC_OK)
    })
}

/// `ucc_team_create_from_parent`: not implemented (UCC does not implement it either).
///
/// # Safety
/// Any arguments: none is dereferenced.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_team_create_from_parent(
    _my_ep: u64,
    _included: u32,
    _parent_team: *const TeamHandle,
    _new_team: *mut *mut c_void,
) -> UccStatus {
    ffi("ucc_team_create_from_parent", || {
        Err(Error::not_implemented("ucc_team_create_from_parent: create the team from an ep_map instead"))
    })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;
    use crate::testing::{Single, no_team_params, within};

    /// The team the callback of `callback_touching_a_team_in_creation_does_not_deadlock` touches.
    static NEW_TEAM: AtomicUsize = AtomicUsize::new(0);
    static ATTR_IN_CB: AtomicI32 = AtomicI32::new(i32::MIN);
    static DESTROY_IN_CB: AtomicI32 = AtomicI32::new(i32::MIN);

    unsafe extern "C" fn touch_new_team(_data: *mut c_void, _status: UccStatus) {
        let team = NEW_TEAM.load(Ordering::Acquire) as *mut TeamHandle;
        // SAFETY: all-zero is a value of the attribute struct; the mask asks for the endpoint.
        let mut attr: TeamAttr = unsafe { std::mem::zeroed() };
        attr.mask = TEAM_ATTR_EP;
        // SAFETY: the test's team, live until the destroy below.
        ATTR_IN_CB.store(unsafe { ucc_team_get_attr(team, &mut attr) }, Ordering::Release);
        // SAFETY: as above.
        DESTROY_IN_CB.store(unsafe { ucc_team_destroy(team) }, Ordering::Release);
    }

    /// A completion callback that runs inside `ucc_team_create_test` of
    /// another team (which progresses the context) and calls into that
    /// team: answered (it is still being created; it may be destroyed),
    /// not a deadlock on the team's state.
    #[test]
    fn callback_touching_a_team_in_creation_does_not_deadlock() {
        let s = Single::new(std::ptr::null());
        let world = s.team();
        let _armed = s.armed_allreduce(world, touch_new_team, std::ptr::null_mut());
        let new = s.post_team(&no_team_params());
        NEW_TEAM.store(new as usize, Ordering::Release);
        let addr = new as usize;
        let last = within(Duration::from_secs(30), "team creation whose progress runs the callback", move || {
            let new = addr as *const TeamHandle;
            loop {
                // SAFETY: the test's team (destroyed by the callback: then the handle reads dead).
                let st = unsafe { ucc_team_create_test(new) };
                if st != UCC_INPROGRESS || DESTROY_IN_CB.load(Ordering::Acquire) != i32::MIN {
                    return st;
                }
            }
        });
        assert_eq!(ATTR_IN_CB.load(Ordering::Acquire), UCC_ERR_INVALID_PARAM, "the team is not created yet");
        assert_eq!(DESTROY_IN_CB.load(Ordering::Acquire), UCC_OK);
        assert_eq!(last, UCC_ERR_INVALID_PARAM, "the team was destroyed during its create_test");
        // SAFETY: destroyed, so quarantined: the handle reads dead.
        assert_eq!(unsafe { ucc_team_create_test(new) }, UCC_ERR_INVALID_PARAM);
    }

    unsafe extern "C" fn never_done_allgather(
        _src: *mut c_void,
        _recv: *mut c_void,
        _size: usize,
        _info: *mut c_void,
        req: *mut *mut c_void,
    ) -> UccStatus {
        // SAFETY: a writable request pointer (UCC's contract).
        unsafe { *req = std::ptr::dangling_mut() };
        UCC_OK
    }

    unsafe extern "C" fn in_progress(_req: *mut c_void) -> UccStatus {
        UCC_INPROGRESS
    }

    unsafe extern "C" fn freed(_req: *mut c_void) -> UccStatus {
        UCC_OK
    }

    /// A team OOB whose allgather never completes (a member that never
    /// came): `ucc_team_create_test` fails once UCC_TEAM_CREATE_TIMEOUT has
    /// passed, as the rest of team creation does, rather than answering
    /// UCC_INPROGRESS for ever.
    #[test]
    fn a_team_oob_that_never_completes_times_out() {
        let mut cfg = std::ptr::null_mut();
        let lib = Single::new(std::ptr::null());
        // SAFETY: a live library, no file, a writable out-pointer; then C strings.
        unsafe {
            assert_eq!(crate::config_api::ucc_context_config_read(lib.lib(), std::ptr::null(), &mut cfg), UCC_OK);
            let (name, value) = (c"TEAM_CREATE_TIMEOUT", c"50ms");
            let st = crate::config_api::ucc_context_config_modify(cfg, std::ptr::null(), name.as_ptr(), value.as_ptr());
            assert_eq!(st, UCC_OK);
        }
        let s = Single::new(cfg);
        let mut p = no_team_params();
        p.mask = TEAM_PARAM_OOB;
        p.oob = OobColl {
            allgather: Some(never_done_allgather),
            req_test: Some(in_progress),
            req_free: Some(freed),
            coll_info: std::ptr::null_mut(),
            n_oob_eps: 1,
            oob_ep: 0,
        };
        let team = s.post_team(&p) as usize;
        let st = within(Duration::from_secs(30), "team creation over an OOB that never completes", move || {
            loop {
                // SAFETY: the test's live team.
                match unsafe { ucc_team_create_test(team as *const TeamHandle) } {
                    UCC_INPROGRESS => std::thread::sleep(Duration::from_millis(1)),
                    st => return st,
                }
            }
        });
        assert_eq!(st, UCC_ERR_TIMED_OUT);
    }

    fn map(map_type: u32, ep_num: u64, u: EpMapUnion) -> EpMap {
        EpMap { map_type, ep_num, u }
    }

    #[test]
    fn endpoint_maps() {
        let full = map(EP_MAP_FULL, 4, EpMapUnion { strided: EpMapStrided { start: 0, stride: 0 } });
        // SAFETY: the maps below are well-formed.
        assert_eq!(unsafe { ep_map_eps(&full, 4) }.unwrap(), [0, 1, 2, 3]);
        let rev = map(EP_MAP_STRIDED, 3, EpMapUnion { strided: EpMapStrided { start: 3, stride: -1 } });
        // SAFETY: as above.
        assert_eq!(unsafe { ep_map_eps(&rev, 4) }.unwrap(), [3, 2, 1]);
        let neg = map(EP_MAP_STRIDED, 3, EpMapUnion { strided: EpMapStrided { start: 1, stride: -1 } });
        // SAFETY: as above.
        assert!(unsafe { ep_map_eps(&neg, 4) }.unwrap_err().context().contains("rank 2"));
        let mut a32 = [2u32, 0];
        let arr = map(EP_MAP_ARRAY, 2, EpMapUnion { array: EpMapArray { map: a32.as_mut_ptr().cast(), elem_size: 4 } });
        // SAFETY: two u32s.
        assert_eq!(unsafe { ep_map_eps(&arr, 4) }.unwrap(), [2, 0]);
        let bad = map(EP_MAP_ARRAY, 2, EpMapUnion { array: EpMapArray { map: a32.as_mut_ptr().cast(), elem_size: 2 } });
        // SAFETY: refused before reading.
        assert!(unsafe { ep_map_eps(&bad, 4) }.unwrap_err().context().contains("elem_size 2"));
        unsafe extern "C" fn double(ep: u64, _: *mut c_void) -> u64 {
            ep * 2
        }
        let cb = map(EP_MAP_CB, 2, EpMapUnion { cb: EpMapCb { cb: Some(double), cb_ctx: std::ptr::null_mut() } });
        // SAFETY: a callback that reads nothing.
        assert_eq!(unsafe { ep_map_eps(&cb, 4) }.unwrap(), [0, 2]);
        let big = map(EP_MAP_FULL, 5, EpMapUnion { strided: EpMapStrided { start: 0, stride: 0 } });
        // SAFETY: refused before reading.
        assert!(unsafe { ep_map_eps(&big, 4) }.is_err());
        let odd = map(9, 1, EpMapUnion { strided: EpMapStrided { start: 0, stride: 0 } });
        // SAFETY: refused before reading.
        assert!(unsafe { ep_map_eps(&odd, 4) }.unwrap_err().context().contains("type 9"));
    }
}
