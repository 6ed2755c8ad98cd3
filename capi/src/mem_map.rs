//! `ucc_mem_map` / `ucc_mem_unmap`: memory handles for the callers that
//! make them (UCC's perftest map modes, UCC's tests, one-sided users).
//!
//! ferrocoll has no one-sided collectives, so a handle maps nothing: it is
//! an opaque, self-describing blob (the segment, the exporting endpoint and
//! process) that follows UCC's protocol. `UCC_MEM_MAP_MODE_EXPORT` returns
//! a handle the library owns and its size in `*memh_size`; the caller
//! copies those bytes to its peers (an allgather), and each peer passes its
//! copy to `UCC_MEM_MAP_MODE_IMPORT`, which checks and marks it in place
//! (the copy stays the caller's, `*memh_size` becomes 0, as in UCC).
//! `ucc_mem_unmap` frees an exported handle and sets `*memh` to NULL; an
//! imported one is marked unmapped and left to its owner to free.
//!
//! Collectives never read the handles (`UCC_COLL_ARGS_FIELD_MEM_MAP_*`);
//! a collective on mapped buffers (`UCC_COLL_ARGS_FLAG_MEM_MAPPED_BUFFERS`,
//! UCC's one-sided alltoall(v) and allgather, with a `global_work_buffer`)
//! runs as the two-sided one: every rank posts it, with the same result.
//! The offload modes (a DPU's) answer `UCC_ERR_NOT_SUPPORTED`.

use std::collections::BTreeSet;
use std::ffi::c_void;
use std::sync::Mutex;

use ferrocoll::Error;

use crate::abi::*;
use crate::context::ContextHandle;
use crate::guard::{ffi, non_null};
use crate::handle::borrow;
use crate::lib_api::put;

/// `UCC_MEM_MAP_MODE_EXPORT`.
const MODE_EXPORT: u32 = 0;
/// `UCC_MEM_MAP_MODE_IMPORT`.
const MODE_IMPORT: u32 = 1;
/// `UCC_MEM_MAP_MODE_EXPORT_OFFLOAD`.
const MODE_EXPORT_OFFLOAD: u32 = 2;
/// `UCC_MEM_MAP_MODE_IMPORT_OFFLOAD`.
const MODE_IMPORT_OFFLOAD: u32 = 3;

/// The first word of a handle as exported (and of a peer's copy of it).
const EXPORTED: u64 = 0xfe77_0c0c_3e3b_0e01;
/// The first word of a copy after `UCC_MEM_MAP_MODE_IMPORT`.
const IMPORTED: u64 = 0xfe77_0c0c_3e3b_0e02;
/// The first word of an imported copy after `ucc_mem_unmap`.
const UNMAPPED: u64 = 0xfe77_0c0c_3e3b_0dea;

/// A memory handle: what `*memh` points to, `memh_size` bytes that the
/// caller may copy between processes of the same build.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Memh {
    /// [`EXPORTED`], [`IMPORTED`] or [`UNMAPPED`].
    state: u64,
    /// The segment's start, in the exporter's address space.
    address: u64,
    /// Its length in bytes.
    len: u64,
    /// The exporter's context endpoint.
    ep: u32,
    /// Its process id.
    pid: u32,
}

/// The size handed out in `*memh_size`.
const MEMH_SIZE: usize = std::mem::size_of::<Memh>();

/// Addresses of the exported handles this process owns: only these are
/// freed by `ucc_mem_unmap` (a caller's copy never is, whatever it holds).
fn exported() -> &'static Mutex<BTreeSet<usize>> {
    static SET: Mutex<BTreeSet<usize>> = Mutex::new(BTreeSet::new());
    &SET
}

/// `ucc_mem_map`: export a handle for `params`' one segment, or import a
/// peer's copy of one (see the module docs).
///
/// # Safety
/// `context` is a handle; `params` a `ucc_mem_map_params_t` (with one
/// segment, to export); `memh_size` a writable `size_t`; `memh` a writable
/// handle pointer, which for an import points to a copy of `memh_size`
/// bytes of an exported handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_mem_map(
    context: *const ContextHandle,
    mode: u32,
    params: *mut MemMapParams,
    memh_size: *mut usize,
    memh: *mut *mut c_void,
) -> UccStatus {
    ffi("ucc_mem_map", || {
        // SAFETY: see handle::borrow.
        let h = unsafe { borrow(context, "context") }?;
        let ep = h.get()?.ep();
        non_null(params, "params")?;
        non_null(memh, "memh")?;
        non_null(memh_size, "memh_size")?;
        match mode {
            MODE_EXPORT => {
                // SAFETY: checked non-null; the caller's struct.
                let p = unsafe { params.read_unaligned() };
                if p.n_segments != 1 {
                    return Err(Error::invalid_param(format!(
                        "params.n_segments is {}: a memory handle maps exactly one segment",
                        p.n_segments
                    )));
                }
                non_null(p.segments, "params.segments")?;
                // SAFETY: one segment (checked above), the caller's.
                let seg = unsafe { p.segments.read_unaligned() };
                if seg.address.is_null() && seg.len > 0 {
                    return Err(Error::invalid_param(format!("params.segments[0].address is NULL (len {})", seg.len)));
                }
                let blob = Box::new(Memh {
                    state: EXPORTED,
                    address: seg.address as u64,
                    len: seg.len as u64,
                    ep: ep as u32,
                    pid: std::process::id(),
                });
                let raw = Box::into_raw(blob);
                exported().lock().unwrap_or_else(|p| p.into_inner()).insert(raw as usize);
                // SAFETY: both checked non-null.
                unsafe {
                    put(memh, raw.cast());
                    put(memh_size, MEMH_SIZE);
                }
                Ok(UCC_OK)
            }
            MODE_IMPORT => {
                // SAFETY: checked non-null.
                let copy = unsafe { memh.read_unaligned() }.cast::<Memh>();
                non_null(copy, "*memh")?;
                // SAFETY: the caller's copy of an exported handle (at least MEMH_SIZE bytes,
                // since it copied memh_size of them); its first word is read before anything else.
                let state = unsafe { (&raw const (*copy).state).read_unaligned() };
                if state != EXPORTED {
                    return Err(Error::invalid_param(format!(
                        "*memh = {copy:p} does not hold a handle from ucc_mem_map(UCC_MEM_MAP_MODE_EXPORT) (first \
                         word {state:#x})"
                    )));
                }
                if exported().lock().unwrap_or_else(|p| p.into_inner()).contains(&(copy as usize)) {
                    return Err(Error::invalid_param(format!(
                        "*memh = {copy:p} is this process's exported handle itself: import a copy of its bytes"
                    )));
                }
                // SAFETY: as above; the copy is the caller's to have written.
                unsafe {
                    put(&raw mut (*copy).state, IMPORTED);
                    put(memh_size, 0);
                }
                Ok(UCC_OK)
            }
            MODE_EXPORT_OFFLOAD | MODE_IMPORT_OFFLOAD => Err(Error::not_supported(format!(
                "mode {mode} (offload to a DPU): ferrocoll maps memory for no device"
            ))),
            m => Err(Error::invalid_param(format!("mode {m} is not a ucc_mem_map_mode_t"))),
        }
    })
}

/// `ucc_mem_unmap`: frees an exported handle (`*memh` becomes NULL) or
/// marks an imported copy unmapped (the copy is its owner's to free).
///
/// # Safety
/// `memh` points to a handle from `ucc_mem_map`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_mem_unmap(memh: *mut *mut c_void) -> UccStatus {
    ffi("ucc_mem_unmap", || {
        non_null(memh, "memh")?;
        // SAFETY: checked non-null.
        let m = unsafe { memh.read_unaligned() }.cast::<Memh>();
        non_null(m, "*memh")?;
        if exported().lock().unwrap_or_else(|p| p.into_inner()).remove(&(m as usize)) {
            // SAFETY: made by Box::into_raw in ucc_mem_map and in the set until now (so freed once).
            drop(unsafe { Box::from_raw(m) });
            // SAFETY: checked non-null.
            unsafe { put(memh, std::ptr::null_mut()) };
            return Ok(UCC_OK);
        }
        // SAFETY: not ours, so the caller's imported copy (its contract); the first word says.
        let state = unsafe { (&raw const (*m).state).read_unaligned() };
        if state != IMPORTED {
            return Err(Error::invalid_param(format!(
                "*memh = {m:p} is not a live memory handle (first word {state:#x}: {})",
                if state == UNMAPPED { "already unmapped" } else { "not from ucc_mem_map" }
            )));
        }
        // SAFETY: as above.
        unsafe { put(&raw mut (*m).state, UNMAPPED) };
        Ok(UCC_OK)
    })
}

const _: () = assert!(MEMH_SIZE == 32);
