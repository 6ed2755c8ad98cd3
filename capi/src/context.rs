//! Contexts: `ucc_context_create` over the caller's OOB, progress,
//! attributes, destroy; and the one-sided memory maps ferrocoll does not have.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, RwLock, RwLockReadGuard};
use std::time::Duration;

use ferrocoll::{Context, ContextParams as FcContextParams, ContextType, Error, Lib, Result};

use crate::abi::*;
use crate::config::{ContextConfigHandle, lock};
use crate::guard::{ffi, non_null};
use crate::handle::{Handle, borrow, publish, retire};
use crate::lib_api::{LibHandle, put};
use crate::oob::{CollOob, RawOob};

/// `UCC_OOB_TIMEOUT`'s default (ferrocoll core's).
const OOB_TIMEOUT: Duration = Duration::from_secs(120);

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

/// A context in use: the read guard of its handle.
pub(crate) struct CtxRef<'a>(RwLockReadGuard<'a, Option<Context>>);

impl std::ops::Deref for CtxRef<'_> {
    type Target = Context;

    fn deref(&self) -> &Context {
        // The guard is made only when the Option is Some (see ContextHandle::get).
        self.0.as_ref().unwrap_or_else(|| unreachable!("CtxRef holds a context"))
    }
}

impl ContextHandle {
    /// The context, or why there is none.
    pub(crate) fn get(&self) -> Result<CtxRef<'_>> {
        let g = self.ctx.read().unwrap_or_else(|p| p.into_inner());
        if g.is_none() {
            return Err(Error::invalid_param("the context was destroyed"));
        }
        Ok(CtxRef(g))
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
            ferrocoll::core::log::write(
                ferrocoll::core::log::Level::Debug,
                format_args!("ucc_context_create: params.mem_params ignored (ferrocoll has no one-sided collectives)"),
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
        let ctx = Context::new(&lib, p)?;
        let h = ContextHandle { magic: AtomicU64::new(0), ctx: RwLock::new(Some(ctx)), ctx_type, lib };
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
        Ok(UCC_OK)
    })
}

/// `ucc_context_destroy`: cancels what is still in flight on it.
///
/// # Safety
/// `context` is a handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_context_destroy(context: *mut ContextHandle) -> UccStatus {
    ffi("ucc_context_destroy", || {
        // SAFETY: see handle::retire.
        let h = unsafe { retire(context, "context") }?;
        let ctx = h.ctx.write().unwrap_or_else(|p| p.into_inner()).take();
        drop(ctx);
        Ok(UCC_OK)
    })
}

/// `ucc_context_get_attr`. A context has no address of its own in
/// ferrocoll (endpoints exchange theirs at creation), so `CTX_ADDR` and
/// `CTX_ADDR_LEN` are `UCC_ERR_NOT_SUPPORTED`.
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
            if mask & (CTX_ATTR_CTX_ADDR | CTX_ATTR_CTX_ADDR_LEN) != 0 {
                return Err(Error::not_supported(
                    "context_attr CTX_ADDR/CTX_ADDR_LEN: ferrocoll contexts exchange addresses at creation and \
                     have none to hand out",
                ));
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

/// `ucc_mem_map`: one-sided memory maps are not part of ferrocoll.
///
/// # Safety
/// Any arguments: none is dereferenced.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_mem_map(
    _context: *const ContextHandle,
    _mode: u32,
    _params: *mut MemMapParams,
    _memh_size: *mut usize,
    _memh: *mut *mut std::ffi::c_void,
) -> UccStatus {
    ffi("ucc_mem_map", || Err(Error::not_supported("ferrocoll has no one-sided collectives, so no memory maps")))
}

/// `ucc_mem_unmap`.
///
/// # Safety
/// Any arguments: none is dereferenced.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_mem_unmap(_memh: *mut *mut std::ffi::c_void) -> UccStatus {
    ffi("ucc_mem_unmap", || Err(Error::not_supported("ferrocoll makes no memory maps")))
}
