//! Pinned host memory that the device reaches directly, in two kinds, each
//! kept where it is used:
//!
//! - [`HostAlloc`]: `cuMemHostAlloc(PORTABLE | DEVICEMAP)`, memory the
//!   driver allocates and maps. The stream engine's flag lives there: a few
//!   bytes that only this process's host thread writes and its device
//!   reads, for which the driver's own allocation is the simplest thing.
//! - [`RegisteredHost`]: page-aligned heap memory registered with
//!   `cuMemHostRegister(PORTABLE | DEVICEMAP)`. The memory component's
//!   pinned scratch and `PinnedHost` use it, because `cuMemHostAlloc` pages
//!   are mapped from the driver (`VM_IO | VM_PFNMAP`), which
//!   `process_vm_readv` cannot read: the shared-memory transport's
//!   single-copy CMA would fail on staged buffers of processes. Registered
//!   heap pages are ordinary anonymous memory that CMA reads, and the device
//!   reaches them by DMA all the same.

use std::alloc::Layout;
use std::ffi::c_void;
use std::sync::atomic::AtomicU64;

use ferrocoll_core::{Error, Result};

use crate::context::Context;
use crate::error::check;
use crate::sys::driver as sys;

/// The device address of pinned, device-mapped host memory at `host`
/// (`cuMemHostGetDevicePointer`); its context must be current.
fn device_pointer(host: *mut c_void) -> Result<u64> {
    let mut dev: sys::CUdeviceptr = 0;
    // SAFETY: callers pass the start of a live DEVICEMAP allocation or
    // registration of the current context; the call writes one address.
    check("cuMemHostGetDevicePointer", unsafe { sys::cuMemHostGetDevicePointer_v2(&mut dev, host, 0) })?;
    Ok(dev)
}

/// `cuMemHostAlloc` memory of one context, zeroed, mapped into the device;
/// freed (`cuMemFreeHost`, with the context made current) on drop.
#[derive(Debug)]
pub struct HostAlloc {
    host: *mut c_void,
    dev: u64,
    len: usize,
    ctx: Context,
}

// SAFETY: the memory is owned by this value and freed once, by whichever
// thread drops it (making the context current there); the host side is
// only reached through atomics (`atomic_u64`) or the owner's raw pointer.
unsafe impl Send for HostAlloc {}
// SAFETY: shared access hands out addresses and `&AtomicU64`s, which are Sync.
unsafe impl Sync for HostAlloc {}

impl HostAlloc {
    /// `len` bytes (at least 8) in `ctx`, which is made current first.
    pub fn new(ctx: Context, len: usize) -> Result<HostAlloc> {
        let len = len.max(8);
        ctx.make_current()?;
        let mut host: *mut c_void = std::ptr::null_mut();
        let flags = sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE;
        // SAFETY: ctx is current (above) and alive (Context invariant);
        // host is a valid out-pointer.
        check("cuMemHostAlloc", unsafe { sys::cuMemHostAlloc(&mut host, len, flags) })?;
        // SAFETY: host points to len bytes of page-aligned memory that are
        // ours alone; zero them before the device can see them.
        unsafe { host.cast::<u8>().write_bytes(0, len) };
        let mut mem = HostAlloc { host, dev: 0, len, ctx };
        // On error `mem` is dropped, which frees host.
        mem.dev = device_pointer(host)?;
        Ok(mem)
    }

    /// The host address.
    pub fn host_ptr(&self) -> *mut u8 {
        self.host.cast()
    }

    /// The device address (for kernels and stream memory operations).
    pub fn device_ptr(&self) -> u64 {
        self.dev
    }

    /// The 64-bit word at byte `8 * index`, as an atomic shared with the
    /// device; `None` past the end.
    pub fn atomic_u64(&self, index: usize) -> Option<&AtomicU64> {
        let end = index.checked_add(1)?.checked_mul(8)?;
        (end <= self.len).then(|| {
            // SAFETY: the range is inside the allocation (checked above),
            // which is page-aligned (so 8-aligned at 8 * index), zeroed at
            // creation and live while `self` is borrowed; every host access
            // goes through atomics, and the device's accesses are the
            // hardware's own atomic 8-byte reads and writes.
            unsafe { &*self.host.cast::<AtomicU64>().add(index) }
        })
    }
}

impl Drop for HostAlloc {
    fn drop(&mut self) {
        if self.ctx.make_current().is_ok() {
            // SAFETY: host came from cuMemHostAlloc in this context (current,
            // above); the owner made sure no stream work uses it any more.
            if let Err(e) = check("cuMemFreeHost", unsafe { sys::cuMemFreeHost(self.host) }) {
                ferrocoll_core::log_warn!("{e}");
            }
        }
    }
}

/// Whole pages for `size` bytes: registration pins pages, so no two blocks
/// may share one. The kernel's page size (aarch64 kernels often use 16 or
/// 64 KiB pages), at least 4 KiB.
fn page_layout(size: usize) -> Result<Layout> {
    let page = page_size();
    size.max(1)
        .checked_next_multiple_of(page)
        .and_then(|n| Layout::from_size_align(n, page).ok())
        .ok_or_else(|| Error::no_memory(format!("{size} bytes of pinned host memory have no valid layout")))
}

/// The kernel's page size, at least 4 KiB.
fn page_size() -> usize {
    // SAFETY: sysconf reads a constant of the system; no memory is passed.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(0).max(4096)
}

/// Page-aligned heap memory registered with `cuMemHostRegister(PORTABLE |
/// DEVICEMAP)` in one context; unregistered (with the context bound) and
/// freed on drop. [`into_raw`](RegisteredHost::into_raw) and
/// [`from_raw`](RegisteredHost::from_raw) let a pool keep blocks by address.
#[derive(Debug)]
pub struct RegisteredHost {
    ptr: *mut u8,
    size: usize,
    ctx: Context,
}

// SAFETY: the block is plain heap memory owned by this value and freed
// once, by whichever thread drops it (binding the context there).
unsafe impl Send for RegisteredHost {}
// SAFETY: shared access only reads the address and size.
unsafe impl Sync for RegisteredHost {}

impl RegisteredHost {
    /// `size` bytes (rounded up to whole pages) registered in `ctx`.
    pub fn alloc(ctx: Context, size: usize) -> Result<RegisteredHost> {
        let layout = page_layout(size)?;
        // SAFETY: the layout is at least one page, never zero-sized.
        let ptr = unsafe { std::alloc::alloc(layout) };
        if ptr.is_null() {
            return Err(Error::no_memory(format!("allocating {size} bytes of host memory to pin failed")));
        }
        let registered = ctx.bind().and_then(|_bound| {
            let flags = sys::CU_MEMHOSTREGISTER_PORTABLE | sys::CU_MEMHOSTREGISTER_DEVICEMAP;
            // SAFETY: ptr..ptr+layout.size() is a live heap allocation of
            // whole pages that stays registered until Drop unregisters it
            // before freeing; the context is bound (current) here.
            check("cuMemHostRegister", unsafe { sys::cuMemHostRegister_v2(ptr.cast(), layout.size(), flags) })
        });
        if let Err(e) = registered {
            // SAFETY: ptr came from alloc with this layout and was not registered.
            unsafe { std::alloc::dealloc(ptr, layout) };
            return Err(e);
        }
        Ok(RegisteredHost { ptr, size, ctx })
    }

    /// The host address.
    pub fn host_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Its device address (`cuMemHostGetDevicePointer`, with the context bound).
    pub fn device_ptr(&self) -> Result<u64> {
        let _bound = self.ctx.bind()?;
        device_pointer(self.ptr.cast())
    }

    /// Give up ownership: the address, to be passed to
    /// [`from_raw`](RegisteredHost::from_raw) with the same size and context.
    pub fn into_raw(self) -> *mut u8 {
        std::mem::ManuallyDrop::new(self).ptr
    }

    /// Take ownership back of a block from [`into_raw`](RegisteredHost::into_raw).
    ///
    /// # Safety
    /// `ptr` must come from `into_raw` of a block allocated with `size`
    /// bytes in `ctx`, and be taken back only once; nothing may use it
    /// after the returned value drops.
    pub unsafe fn from_raw(ctx: Context, ptr: *mut u8, size: usize) -> RegisteredHost {
        RegisteredHost { ptr, size, ctx }
    }
}

impl Drop for RegisteredHost {
    fn drop(&mut self) {
        let Ok(layout) = page_layout(self.size) else { return };
        if let Ok(_bound) = self.ctx.bind() {
            // SAFETY: ptr was registered in `alloc` and is unregistered once, here.
            if let Err(e) = check("cuMemHostUnregister", unsafe { sys::cuMemHostUnregister(self.ptr.cast()) }) {
                ferrocoll_core::log_warn!("{e}");
            }
        }
        // SAFETY: ptr came from std::alloc::alloc with the layout of this
        // size (alloc, or from_raw's caller, guarantees the size) and is
        // freed once.
        unsafe { std::alloc::dealloc(self.ptr, layout) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_blocks_are_whole_pages() {
        let page = page_size();
        let l = page_layout(1).unwrap();
        assert_eq!((l.size(), l.align()), (page, page));
        assert_eq!(page_layout(page + 1).unwrap().size(), 2 * page);
        assert_eq!(page_layout(1 << 20).unwrap().size(), (1usize << 20).next_multiple_of(page));
        assert!(page_layout(usize::MAX).unwrap_err().to_string().contains(&usize::MAX.to_string()));
    }
}
