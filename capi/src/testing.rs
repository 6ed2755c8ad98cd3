//! Fixtures for the unit tests: a library, a context of one endpoint (no
//! OOB) and its teams, made through the exported calls as a C caller makes
//! them, and a collective whose completion callback runs inside the next
//! progress of its context (a triggered post on a CPU engine).

use std::ffi::c_void;
use std::ptr::null;
use std::sync::mpsc;
use std::time::Duration;

use crate::abi::*;
use crate::config::ContextConfigHandle;
use crate::context::{ContextHandle, ucc_context_create};
use crate::ee::{EeHandle, ucc_collective_triggered_post, ucc_ee_create, ucc_ee_set_event};
use crate::lib_api::{API_MAJOR, API_MINOR, LibHandle, ucc_init_version};
use crate::request::{ReqHandle, ucc_collective_init};
use crate::team::{TeamHandle, ucc_team_create_post, ucc_team_create_test};

/// `UCC_EVENT_COMPUTE_COMPLETE`.
const COMPUTE_COMPLETE: u32 = 4;

/// A library and a context of one endpoint (the library is finalized when dropped).
pub(crate) struct Single {
    lib: *mut LibHandle,
    pub ctx: *mut ContextHandle,
}

impl Single {
    /// Made with the context configuration `config` (NULL for none).
    pub fn new(config: *const ContextConfigHandle) -> Single {
        let mut lib = std::ptr::null_mut();
        // SAFETY: NULL parameters and configuration are allowed; `lib` is writable.
        assert_eq!(unsafe { ucc_init_version(API_MAJOR, API_MINOR, null(), null(), &mut lib) }, UCC_OK);
        let mut ctx = std::ptr::null_mut();
        // SAFETY: all-zero parameters are a mask of 0 (no field is read).
        let params: ContextParams = unsafe { std::mem::zeroed() };
        // SAFETY: a live library, the parameters above, a writable out-pointer.
        assert_eq!(unsafe { ucc_context_create(lib, &params, config, &mut ctx) }, UCC_OK);
        Single { lib, ctx }
    }

    /// The library.
    pub fn lib(&self) -> *mut LibHandle {
        self.lib
    }

    /// Post the creation of a team with `params` (without test).
    pub fn post_team(&self, params: &TeamParams) -> *mut TeamHandle {
        let mut team = std::ptr::null_mut();
        let ctxs = [self.ctx.cast_const()];
        // SAFETY: one live context; the caller's parameters; a writable out-pointer.
        assert_eq!(unsafe { ucc_team_create_post(ctxs.as_ptr(), 1, params, &mut team) }, UCC_OK);
        team
    }

    /// A created team of this context's one endpoint.
    pub fn team(&self) -> *mut TeamHandle {
        let team = self.post_team(&no_team_params());
        loop {
            // SAFETY: a live team.
            match unsafe { ucc_team_create_test(team) } {
                UCC_INPROGRESS => continue,
                st => assert_eq!(st, UCC_OK),
            }
            return team;
        }
    }

    /// An allreduce on `team` whose callback is `cb(data)`, triggered on a
    /// new CPU engine, with the trigger's event set: it starts and completes
    /// in the context's next progress (in whichever call makes it).
    pub fn armed_allreduce(
        &self,
        team: *mut TeamHandle,
        cb: unsafe extern "C" fn(*mut c_void, UccStatus),
        data: *mut c_void,
    ) -> (*mut ReqHandle, *mut EeHandle) {
        let bufs: &'static mut [i32; 8] = Box::leak(Box::new([1, 2, 3, 4, 0, 0, 0, 0]));
        let (src, dst) = bufs.split_at_mut(4);
        // SAFETY: all-zero arguments are a mask of 0; the fields an allreduce reads are set below.
        let mut a: CollArgs = unsafe { std::mem::zeroed() };
        a.mask = ARGS_FIELD_CB;
        a.coll_type = ferrocoll::CollType::Allreduce as u32;
        a.op = ferrocoll::ReduceOp::Sum as u32;
        let int32 = (ferrocoll::DataType::Int32 as u64) << 3;
        a.src.info = BufferInfo { buffer: src.as_mut_ptr().cast(), count: 4, datatype: int32, mem_type: 0 };
        a.dst.info = BufferInfo { buffer: dst.as_mut_ptr().cast(), count: 4, datatype: int32, mem_type: 0 };
        a.cb = CollCallback { cb: Some(cb), data };
        let mut req = std::ptr::null_mut();
        // SAFETY: the arguments above, over buffers leaked for the test; a live team.
        assert_eq!(unsafe { ucc_collective_init(&a, &mut req, team) }, UCC_OK);
        let mut ee = std::ptr::null_mut();
        let p = EeParams { ee_type: EE_CPU_THREAD, ee_context: std::ptr::null_mut(), ee_context_size: 0 };
        // SAFETY: a live team, CPU engine parameters, a writable out-pointer.
        assert_eq!(unsafe { ucc_ee_create(team, &p, &mut ee) }, UCC_OK);
        let ev =
            Ev { ev_type: COMPUTE_COMPLETE, ev_context: std::ptr::null_mut(), ev_context_size: 0, req: req.cast() };
        // SAFETY: a live engine and an event naming a live request.
        unsafe {
            assert_eq!(ucc_collective_triggered_post(ee, &ev), UCC_OK);
            assert_eq!(ucc_ee_set_event(ee, &ev), UCC_OK);
        }
        (req, ee)
    }
}

impl Drop for Single {
    fn drop(&mut self) {
        // SAFETY: the library made in `new`, finalized once (its context, if
        // not destroyed yet, keeps what it needs).
        unsafe { crate::lib_api::ucc_finalize(self.lib) };
    }
}

/// Team parameters with a mask of 0: every endpoint of the context.
pub(crate) fn no_team_params() -> TeamParams {
    // SAFETY: integers, raw pointers and optional function pointers: all-zero is a value of each.
    unsafe { std::mem::zeroed() }
}

/// Run `f` on a thread of its own, failing if it has not returned within
/// `limit` (a hang: the thread is left behind).
pub(crate) fn within<T: Send + 'static>(limit: Duration, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit).unwrap_or_else(|e| panic!("{what}: no return within {limit:?} ({e})"))
}
