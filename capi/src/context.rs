//! Contexts: `ucc_context_create` over the caller's OOB, progress,
//! attributes (with an address blob), destroy. Memory maps are [`crate::mem_map`].

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, Weak};
use std::time::Duration;

use ferrocoll::{Context, ContextParams as FcContextParams, ContextType, Error, Lib, Result};

use crate::abi::*;
use crate::config::{ContextConfigHandle, lock};
use crate::guard::{ffi, non_null};
use crate::handle::{Handle, borrow, publish, retire};
use crate::lib_api::{LibHandle, put};
use crate::oob::{CollOob, RawOob};

/// `UCC_OOB_TIMEOUT`'s default (ferrocoll core's).
pub(crate) const OOB_TIMEOUT: Duration = Duration::from_secs(120);

/// What a `ucc_context_h` points to.
#[repr(C)]
pub struct ContextHandle {
    magic: AtomicU64,
    /// Taken by `ucc_context_destroy` (write lock); progress and team
    /// creation hold the read lock while they use it.
    ctx: RwLock<Option<Context>>,
    /// `ucc_context_type_t` asked for.
    ctx_type: u32,
    /// The library (its memory components resolve pointers of unknown memory type).
    pub(crate) lib: Lib,
    /// What `CTX_ADDR` hands out (see [`address`]): owned by the context, as in UCC.
    addr: Box<[u8]>,
    /// Made without an OOB: the parameters its teams' own contexts are made
    /// with (`local_team.rs`).
    pub(crate) local: Option<FcContextParams>,
    /// The contexts of its teams made over a team OOB (`local_team.rs`),
    /// progressed with it; `has_children` says whether there are any
    /// without taking the lock. A list replaced whole when a team is added,
    /// so that progress takes a reference to it (no allocation) and runs
    /// the children's callbacks without the lock.
    children: Mutex<Arc<Vec<Weak<ContextHandle>>>>,
    has_children: AtomicBool,
    /// A team's own context ([`ContextHandle::child`]), closed with its team.
    team_own: bool,
}

// SAFETY: `magic` is the AtomicU64 at offset 0.
unsafe impl Handle for ContextHandle {
    const WHAT: &'static str = "ucc_context_h";
    const LIVE: u64 = 0xfe77_0c0c_0000_0004;
    const MAGIC_OFFSET: usize = 0;
    fn magic(&self) -> &AtomicU64 {
        &self.magic
    }
}

thread_local! {
    /// The context handles whose user callbacks this thread is running (see
    /// [`InUse`]). Completion callbacks run inside progress, under the
    /// context's read guard: a callback that destroyed the same context
    /// would wait for the write lock for ever.
    static IN_USE: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// Whether this thread runs a user callback of the context at `p`.
fn in_use_here(p: *const ContextHandle) -> bool {
    IN_USE.with(|u| u.borrow().contains(&(p as usize)))
}

/// The context at an address marked in use by this thread until dropped
/// (also on unwinding): held around a user's completion callback, the only
/// user code that runs while this thread holds the context's read guard
/// (inside `ucc_context_progress`, `ucc_ee_wait`, or a post). Progress
/// itself does not mark: a thread-local push and pop at every
/// `ucc_context_progress`, ~65 of its ~300 instructions of overhead.
pub(crate) struct InUse(usize);

impl InUse {
    /// Mark the context handle at `ctx` in use by this thread.
    pub(crate) fn mark(ctx: usize) -> InUse {
        // try_with: never a panic, even while the thread's locals are torn down.
        let _ = IN_USE.try_with(|u| u.borrow_mut().push(ctx));
        InUse(ctx)
    }
}

impl Drop for InUse {
    fn drop(&mut self) {
        let _ = IN_USE.try_with(|u| {
            let mut u = u.borrow_mut();
            if let Some(i) = u.iter().rposition(|&h| h == self.0) {
                u.swap_remove(i);
            }
        });
    }
}

/// A context in use: the read guard of its handle.
pub(crate) struct CtxRef<'a> {
    guard: RwLockReadGuard<'a, Option<Context>>,
}

impl std::ops::Deref for CtxRef<'_> {
    type Target = Context;

    fn deref(&self) -> &Context {
        // The guard is made only when the Option is Some (see ContextHandle::get).
        self.guard.as_ref().unwrap_or_else(|| unreachable!("CtxRef holds a context"))
    }
}

impl ContextHandle {
    /// A handle without a context yet (set under its lock), never published.
    fn empty(lib: Lib) -> ContextHandle {
        ContextHandle {
            magic: AtomicU64::new(0),
            ctx: RwLock::new(None),
            ctx_type: 0,
            lib,
            addr: Box::default(),
            local: None,
            children: Mutex::default(),
            has_children: AtomicBool::new(false),
            team_own: false,
        }
    }

    /// A context for a team over a team OOB, made later
    /// ([`ContextHandle::adopt`]), progressed with this one.
    pub(crate) fn child(&self) -> Arc<ContextHandle> {
        let c = Arc::new(ContextHandle {
            ctx_type: self.ctx_type,
            team_own: true,
            ..ContextHandle::empty(self.lib.clone())
        });
        let mut children = self.children.lock().unwrap_or_else(|p| p.into_inner());
        let mut list: Vec<Weak<ContextHandle>> = children.iter().filter(|w| w.strong_count() > 0).cloned().collect();
        list.push(Arc::downgrade(&c));
        *children = Arc::new(list);
        self.has_children.store(true, Ordering::Relaxed);
        c
    }

    /// Close a [`ContextHandle::child`] as its team is destroyed (the
    /// destroyed team's handle stays readable a while, and would otherwise
    /// keep the context's transports open); a user's context is left alone.
    pub(crate) fn close_if_team_own(&self) {
        if self.team_own {
            drop(self.ctx.write().unwrap_or_else(|p| p.into_inner()).take());
        }
    }

    /// Give a [`ContextHandle::child`] its context, once made.
    pub(crate) fn adopt(&self, ctx: Context) {
        *self.ctx.write().unwrap_or_else(|p| p.into_inner()) = Some(ctx);
    }

    /// Progress the contexts of its teams made over a team OOB (those
    /// still being made, or gone with their team, are skipped).
    fn progress_children(&self) -> Result<()> {
        let children = self.children.lock().unwrap_or_else(|p| p.into_inner()).clone();
        for c in children.iter().filter_map(Weak::upgrade) {
            // A child without its context (being made, or its team destroyed) has nothing to progress.
            if let Ok(ctx) = c.get() {
                ctx.progress()?;
            }
        }
        Ok(())
    }

    /// The context, or why there is none.
    pub(crate) fn get(&self) -> Result<CtxRef<'_>> {
        let guard = self.ctx.read().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            return Err(Error::invalid_param("the context was destroyed"));
        }
        Ok(CtxRef { guard })
    }
}

/// `ucc_context_create`.
///
/// # Safety
/// `lib_handle` is a handle; `params` a `ucc_context_params_t` whose masked
/// fields are set; `config` NULL or a handle; `context` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_context_create(
    lib_handle: *const LibHandle,
    params: *const ContextParams,
    config: *const ContextConfigHandle,
    context: *mut *mut ContextHandle,
) -> UccStatus {
    ffi("ucc_context_create", || {
        // SAFETY: see handle::borrow.
        let lib_h = unsafe { borrow(lib_handle, "lib_handle") }?;
        non_null(params, "params")?;
        non_null(context, "context")?;
        let lib = lib_h.lib()?;
        let mut p = FcContextParams::default();
        // SAFETY: the caller's struct; fields are read only when masked.
        let mask = unsafe { (&raw const (*params).mask).read_unaligned() };
        let mut ctx_type = 0;
        if mask & CTX_FIELD_TYPE != 0 {
            // SAFETY: masked field.
            ctx_type = unsafe { (&raw const (*params).ctx_type).read_unaligned() };
            p.ctx_type = match ctx_type {
                0 => ContextType::Exclusive,
                UCC_CONTEXT_SHARED => ContextType::Shared,
                t => return Err(Error::invalid_param(format!("params.type {t} is not a UCC context type"))),
            };
        }
        if mask & CTX_FIELD_SYNC_TYPE != 0 {
            // SAFETY: masked field.
            let s = unsafe { (&raw const (*params).sync_type).read_unaligned() };
            if s != UCC_NO_SYNC_COLLECTIVES {
                return Err(Error::not_supported(format!(
                    "params.sync_type {s}: ferrocoll's collectives are non-synchronous only"
                )));
            }
        }
        // SAFETY: masked field, read below only when set.
        let oob = (mask & CTX_PARAM_OOB != 0).then(|| unsafe { (&raw const (*params).oob).read_unaligned() });
        if mask & CTX_PARAM_MEM_PARAMS != 0 {
            ferrocoll::core::log_debug!(
                "ucc_context_create: params.mem_params ignored (ferrocoll has no one-sided collectives)"
            );
        }
        // params.ctx_id (CTX_PARAM_ID) is a label ferrocoll does not need: contexts number themselves.
        if !config.is_null() {
            // SAFETY: see handle::borrow.
            let c = unsafe { borrow(config, "config") }?;
            p.config = lock(&c.config).clone();
        }
        if let Some(oob) = oob {
            let raw = RawOob::new(oob, "params.oob")?;
            let timeout = lib.config().merged(&p.config).positive_duration_or("OOB_TIMEOUT", Some(OOB_TIMEOUT))?;
            p.oob = Some(Arc::new(CollOob::agree_on_job(raw, timeout)?));
        }
        let job = p.oob.as_ref().and_then(|o| o.job_id());
        let local = p.oob.is_none().then(|| p.clone());
        let ctx = Context::new(&lib, p)?;
        let addr = address(job.as_deref(), ctx.ep(), ctx.n_eps());
        let h = ContextHandle { ctx_type, addr, local, ..ContextHandle::empty(lib) };
        *h.ctx.write().unwrap_or_else(|p| p.into_inner()) = Some(ctx);
        // SAFETY: checked non-null.
        unsafe { put(context, publish(h)) };
        Ok(UCC_OK)
    })
}

/// `ucc_context_progress`.
///
/// # Safety
/// `context` is a handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_context_progress(context: *const ContextHandle) -> UccStatus {
    ffi("ucc_context_progress", || {
        // SAFETY: see handle::borrow.
        let h = unsafe { borrow(context, "context") }?;
        h.get()?.progress()?;
        if h.has_children.load(Ordering::Relaxed) {
            h.progress_children()?;
        }
        Ok(UCC_OK)
    })
}

/// `ucc_context_destroy`: cancels what is still in flight on it. Refused
/// from inside the context's own progress (a completion callback).
///
/// # Safety
/// `context` is a handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_context_destroy(context: *mut ContextHandle) -> UccStatus {
    ffi("ucc_context_destroy", || {
        if in_use_here(context) {
            return Err(Error::invalid_param(format!(
                "context = {context:p} is in use by this thread: ucc_context_destroy was called from a completion \
                 callback of a collective on it (run inside ucc_context_progress, ucc_ee_wait or a post); destroy it \
                 after that call returns"
            )));
        }
        // SAFETY: see handle::retire.
        let h = unsafe { retire(context, "context") }?;
        let ctx = h.ctx.write().unwrap_or_else(|p| p.into_inner()).take();
        drop(ctx);
        Ok(UCC_OK)
    })
}

/// `ucc_context_get_attr`. `CTX_ADDR` is the context's address blob
/// ([`address`]: ferrocoll's endpoints exchange their transport addresses
/// at creation, so it only names the job and endpoint), valid until the
/// context is destroyed; `CTX_ADDR_LEN` its length.
///
/// # Safety
/// `context` is a handle; `context_attr` a `ucc_context_attr_t` with its mask set.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_context_get_attr(
    context: *const ContextHandle,
    context_attr: *mut ContextAttr,
) -> UccStatus {
    ffi("ucc_context_get_attr", || {
        // SAFETY: see handle::borrow.
        let h = unsafe { borrow(context, "context") }?;
        non_null(context_attr, "context_attr")?;
        h.get()?;
        // SAFETY: the caller's struct: its mask is read, and only asked-for fields are written.
        unsafe {
            let mask = (&raw const (*context_attr).mask).read_unaligned();
            if mask & CTX_ATTR_CTX_ADDR_LEN != 0 {
                put(&raw mut (*context_attr).ctx_addr_len, h.addr.len());
            }
            if mask & CTX_ATTR_CTX_ADDR != 0 {
                // The caller only reads it (UCC's type is a pointer to const data in spirit).
                put(&raw mut (*context_attr).ctx_addr, h.addr.as_ptr().cast_mut().cast());
            }
            if mask & CTX_FIELD_TYPE != 0 {
                put(&raw mut (*context_attr).ctx_type, h.ctx_type);
            }
            if mask & CTX_FIELD_SYNC_TYPE != 0 {
                put(&raw mut (*context_attr).sync_type, UCC_NO_SYNC_COLLECTIVES);
            }
            if mask & CTX_ATTR_WORK_BUFFER_SIZE != 0 {
                put(&raw mut (*context_attr).global_work_buffer_size, 0);
            }
        }
        Ok(UCC_OK)
    })
}

/// The first bytes of a context address.
pub(crate) const ADDR_MAGIC: &[u8; 8] = b"fcucctx1";

/// A context's address blob, `CTX_ADDR`: [`ADDR_MAGIC`], the endpoint and
/// the number of endpoints (little-endian `u32`s), the job id's length (a
/// `u32`) and the job id (the name every endpoint of the context agreed on
/// over its OOB, or this process's own name for a context without one).
fn address(job: Option<&str>, ep: usize, n_eps: usize) -> Box<[u8]> {
    let own = format!("p{:x}", std::process::id());
    let job = job.unwrap_or(&own).as_bytes();
    let mut a = Vec::with_capacity(ADDR_MAGIC.len() + 12 + job.len());
    a.extend_from_slice(ADDR_MAGIC);
    for n in [ep, n_eps, job.len()] {
        a.extend_from_slice(&(n as u32).to_le_bytes());
    }
    a.extend_from_slice(job);
    a.into_boxed_slice()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;
    use crate::testing::{Single, within};

    /// What the callback of `callback_destroying_its_context_is_refused` saw.
    static CTX: AtomicUsize = AtomicUsize::new(0);
    static DESTROY_IN_CB: AtomicI32 = AtomicI32::new(i32::MIN);

    unsafe extern "C" fn destroy_ctx(_data: *mut std::ffi::c_void, _status: UccStatus) {
        // SAFETY: the test's live context.
        let st = unsafe { ucc_context_destroy(CTX.load(Ordering::Acquire) as *mut ContextHandle) };
        DESTROY_IN_CB.store(st, Ordering::Release);
    }

    /// A completion callback that destroys its context, inside that
    /// context's progress: refused (it would wait for the progress that
    /// runs it), and the context is destroyed once progress returns.
    #[test]
    fn callback_destroying_its_context_is_refused() {
        let s = Single::new(std::ptr::null());
        let team = s.team();
        let _armed = s.armed_allreduce(team, destroy_ctx, std::ptr::null_mut());
        CTX.store(s.ctx as usize, Ordering::Release);
        let ctx = s.ctx as usize;
        within(Duration::from_secs(30), "progress whose callback destroys the context", move || {
            while DESTROY_IN_CB.load(Ordering::Acquire) == i32::MIN {
                // SAFETY: the test's live context.
                assert_eq!(unsafe { ucc_context_progress(ctx as *const ContextHandle) }, UCC_OK);
            }
        });
        assert_eq!(DESTROY_IN_CB.load(Ordering::Acquire), UCC_ERR_INVALID_PARAM);
        // SAFETY: still live: the destroy in the callback was refused.
        assert_eq!(unsafe { ucc_context_destroy(s.ctx) }, UCC_OK);
    }

    #[test]
    fn address_names_job_and_endpoint() {
        let a = super::address(Some("u1234"), 3, 4);
        assert_eq!(&a[..8], super::ADDR_MAGIC);
        assert_eq!(&a[8..20], &[3, 0, 0, 0, 4, 0, 0, 0, 5, 0, 0, 0]);
        assert_eq!(&a[20..], b"u1234");
        let own = super::address(None, 0, 1);
        assert_eq!(own.len(), 20 + own[16] as usize);
    }
}
