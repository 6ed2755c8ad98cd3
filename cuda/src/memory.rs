//! Device and managed memory, and copies between any two addresses.
//!
//! Allocations are plain addresses (`u64`, a `CUdeviceptr`) rather than
//! owning values: ferrocoll's pools keep freed blocks by address and hand
//! them out again, so the pool, not a value, owns a block. Freeing is
//! therefore `unsafe` (the caller promises the address is a live block of
//! this kind that nothing uses any more).
//!
//! Every call acts in the calling thread's current context (bind one
//! first, see [`Context::bind`](crate::Context::bind)).

use ferrocoll_core::Result;

use crate::error::check;
use crate::probe::loaded;
use crate::stream::Stream;
use crate::sys::driver as sys;

/// `size` bytes of device memory in the current context (`cuMemAlloc`).
pub fn alloc(size: usize) -> Result<u64> {
    loaded()?;
    let mut p: sys::CUdeviceptr = 0;
    // SAFETY: the driver passed the probe; the call writes one address.
    check("cuMemAlloc", unsafe { sys::cuMemAlloc_v2(&mut p, size) })?;
    Ok(p)
}

/// `size` bytes of managed memory, attached globally (every stream and the
/// host may use it), from the current context (`cuMemAllocManaged`).
pub fn alloc_managed(size: usize) -> Result<u64> {
    loaded()?;
    let mut p: sys::CUdeviceptr = 0;
    let global = sys::CUmemAttach_flags::CU_MEM_ATTACH_GLOBAL as std::ffi::c_uint;
    // SAFETY: the driver passed the probe; the call writes one address.
    check("cuMemAllocManaged", unsafe { sys::cuMemAllocManaged(&mut p, size, global) })?;
    Ok(p)
}

/// Free a block of device or managed memory (`cuMemFree`).
///
/// # Safety
/// `ptr` must come from [`alloc`] or [`alloc_managed`], be freed only
/// once, and no work (host or device) may use it any more.
pub unsafe fn free(ptr: u64) -> Result<()> {
    loaded()?;
    // SAFETY: the caller's promise above; the driver passed the probe.
    check("cuMemFree", unsafe { sys::cuMemFree_v2(ptr) })
}

/// Enqueue a copy of `n` bytes from `src` to `dst` on `stream`
/// (`cuMemcpyAsync`). Unified addressing lets one call serve every
/// direction (the driver sees from the addresses where each side lives)
/// and run in any context. It may return before the copy ran: synchronise
/// the stream before using `dst` or changing `src`.
///
/// # Safety
/// `src` and `dst` must be live ranges of `n` bytes (dst writable) of host,
/// device or managed memory, that do not overlap and that nothing else
/// touches until the stream has run the copy.
pub unsafe fn copy_async(dst: u64, src: u64, n: usize, stream: &Stream) -> Result<()> {
    // SAFETY: the caller's promise above; the stream is valid (Stream's invariant).
    check("cuMemcpyAsync", unsafe { sys::cuMemcpyAsync(dst, src, n, stream.handle()) })
}
