//! Scratch pools for CUDA memory: device, managed and pinned host blocks in
//! power-of-two size classes, cached on free lists up to a byte cap — the
//! host pool's policy (see `host/pool.rs`) over driver allocations, which
//! are far slower than `malloc` (`cuMemAlloc` and `cuMemHostRegister` may
//! take milliseconds and synchronise the device), so caching matters more
//! here. The driver calls are `ferrocoll-cuda`'s; the policy is this file's.
//!
//! Blocks of at most the cap go to the class of the next power of two (at
//! least [`MIN_BLOCK`] bytes); larger ones are allocated at their own size
//! and freed when returned.

use std::sync::{Mutex, MutexGuard};

use ferrocoll_core::backend::ScratchOwner;
use ferrocoll_core::{Error, MemRef, MemType, Result};
use ferrocoll_cuda::{Context, RegisteredHost, memory};

/// Smallest block: the driver aligns allocations to 256 bytes anyway.
pub const MIN_BLOCK: usize = 256;

/// Where a pool's blocks come from.
pub(crate) trait Backing: Send + Sync {
    /// Memory type of the blocks.
    const MEM_TYPE: MemType;
    /// What the blocks are, for messages ("device memory").
    const WHAT: &'static str;
    /// Allocate `size` bytes.
    fn alloc(&self, size: usize) -> Result<*mut u8>;
    /// Free a block of `size` bytes from `alloc` (errors are logged: this runs in drops).
    fn free(&self, ptr: *mut u8, size: usize);
}

/// Device memory of one device (`cuMemAlloc` in its primary context).
pub(crate) struct DeviceBacking {
    pub ordinal: usize,
    pub ctx: Context,
}

/// Managed memory (`cuMemAllocManaged`, attached globally) from one device's context.
pub(crate) struct ManagedBacking {
    pub ordinal: usize,
    pub ctx: Context,
}

/// Pinned host memory: page-aligned heap memory registered with
/// `cuMemHostRegister` (portable, device-mapped), as a
/// [`RegisteredHost`] kept by address. Why not `cuMemHostAlloc`: its pages
/// cannot be read by the shared-memory transport's single-copy CMA (see
/// `ferrocoll_cuda`'s `host` module).
pub(crate) struct PinnedBacking {
    pub ctx: Context,
}

/// Free a device or managed block in `ctx`, logging a failure (this runs in drops).
fn free_device(ctx: Context, ptr: *mut u8) {
    let Ok(_bound) = ctx.bind() else { return };
    // SAFETY: ptr came from memory::alloc or alloc_managed in this context
    // and is freed once (the pool hands each block out to one Scratch at a
    // time, and frees only blocks that came back).
    if let Err(e) = unsafe { memory::free(ptr as u64) } {
        ferrocoll_core::log_warn!("returning scratch: {e}");
    }
}

impl Backing for DeviceBacking {
    const MEM_TYPE: MemType = MemType::Cuda;
    const WHAT: &'static str = "device memory";

    fn alloc(&self, size: usize) -> Result<*mut u8> {
        let _bound = self.ctx.bind()?;
        let p = memory::alloc(size).map_err(|e| e.prefixed(format!("{size} bytes on CUDA device {}", self.ordinal)))?;
        Ok(p as *mut u8)
    }

    fn free(&self, ptr: *mut u8, _size: usize) {
        free_device(self.ctx, ptr);
    }
}

impl Backing for ManagedBacking {
    const MEM_TYPE: MemType = MemType::CudaManaged;
    const WHAT: &'static str = "managed memory";

    fn alloc(&self, size: usize) -> Result<*mut u8> {
        let _bound = self.ctx.bind()?;
        let p = memory::alloc_managed(size)
            .map_err(|e| e.prefixed(format!("{size} bytes from CUDA device {}", self.ordinal)))?;
        Ok(p as *mut u8)
    }

    fn free(&self, ptr: *mut u8, _size: usize) {
        free_device(self.ctx, ptr);
    }
}

impl Backing for PinnedBacking {
    const MEM_TYPE: MemType = MemType::Host;
    const WHAT: &'static str = "pinned host memory";

    fn alloc(&self, size: usize) -> Result<*mut u8> {
        let block = RegisteredHost::alloc(self.ctx, size)
            .map_err(|e| e.prefixed(format!("pinning {size} bytes of host memory")))?;
        Ok(block.into_raw())
    }

    fn free(&self, ptr: *mut u8, size: usize) {
        // SAFETY: ptr came from `alloc` above with this size (the pool passes
        // the size it allocated) in this context, and is freed once.
        drop(unsafe { RegisteredHost::from_raw(self.ctx, ptr, size) });
    }
}

struct Lists {
    /// `free[k]`: blocks of `1 << k` bytes.
    free: Vec<Vec<usize>>,
    /// Bytes on all free lists.
    cached: usize,
}

/// A thread-safe pool of blocks from one [`Backing`].
pub(crate) struct Pool<B: Backing> {
    lists: Mutex<Lists>,
    cap: usize,
    backing: B,
}

impl<B: Backing> Pool<B> {
    pub(crate) fn new(backing: B, cap: usize) -> Pool<B> {
        Pool { lists: Mutex::new(Lists { free: Vec::new(), cached: 0 }), cap, backing }
    }

    /// Bytes of freed blocks held for reuse.
    pub(crate) fn cached_bytes(&self) -> usize {
        self.lock().cached
    }

    fn lock(&self) -> MutexGuard<'_, Lists> {
        // Every update of the lists is one step, so a poisoned lock still guards consistent lists.
        self.lists.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A block of at least `len` bytes (`len == 0`: an empty range).
    pub(crate) fn take(&self, len: usize) -> Result<MemRef> {
        if len == 0 {
            return Ok(MemRef::empty(B::MEM_TYPE));
        }
        let (size, list) = class(len, self.cap)
            .ok_or_else(|| Error::no_memory(format!("{} scratch of {len} bytes is too large", B::WHAT)))?;
        let reused = list.and_then(|k| {
            let mut lists = self.lock();
            let block = lists.free.get_mut(k)?.pop()?;
            lists.cached -= size;
            Some(block)
        });
        let ptr = match reused {
            Some(p) => p as *mut u8,
            None => self.backing.alloc(size)?,
        };
        // SAFETY: ptr is a live allocation of size >= len bytes of B's memory
        // type, used only through the returned MemRef (in its Scratch) until
        // it comes back through `release`.
        Ok(unsafe { MemRef::new(ptr, len, B::MEM_TYPE) })
    }
}

/// (bytes allocated, free list) for a request of `len` bytes; `None` if it overflows.
pub(crate) fn class(len: usize, cap: usize) -> Option<(usize, Option<usize>)> {
    match len.max(MIN_BLOCK).checked_next_power_of_two() {
        Some(size) if size <= cap => Some((size, Some(size.trailing_zeros() as usize))),
        _ => len.checked_next_multiple_of(MIN_BLOCK).map(|size| (size, None)),
    }
}

impl<B: Backing> ScratchOwner for Pool<B> {
    fn release(&self, mem: MemRef) {
        if mem.is_empty() {
            return;
        }
        let Some((size, list)) = class(mem.len(), self.cap) else { return };
        if let Some(k) = list {
            let mut lists = self.lock();
            if lists.cached + size <= self.cap {
                if lists.free.len() <= k {
                    lists.free.resize_with(k + 1, Vec::new);
                }
                if let Some(l) = lists.free.get_mut(k) {
                    l.push(mem.addr() as usize);
                    lists.cached += size;
                    return;
                }
            }
        }
        self.backing.free(mem.addr(), size);
    }
}

impl<B: Backing> Drop for Pool<B> {
    fn drop(&mut self) {
        let lists = self.lists.get_mut().unwrap_or_else(|poisoned| poisoned.into_inner());
        for (k, list) in lists.free.drain(..).enumerate() {
            for block in list {
                self.backing.free(block as *mut u8, 1 << k);
            }
        }
        lists.cached = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_powers_of_two_up_to_the_cap() {
        assert_eq!(class(1, 1 << 20), Some((256, Some(8))));
        assert_eq!(class(257, 1 << 20), Some((512, Some(9))));
        assert_eq!(class(1 << 20, 1 << 20), Some((1 << 20, Some(20))));
        assert_eq!(class((1 << 20) + 1, 1 << 20), Some(((1 << 20) + 256, None)));
        assert_eq!(class(usize::MAX, 1 << 20), None);
    }

    /// Host memory standing in for the driver, counting live blocks.
    struct Fake {
        live: std::sync::atomic::AtomicIsize,
    }

    impl Backing for Fake {
        const MEM_TYPE: MemType = MemType::Cuda;
        const WHAT: &'static str = "fake memory";

        fn alloc(&self, size: usize) -> Result<*mut u8> {
            self.live.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            // Never dereferenced: only the address is handed around.
            Ok(Box::into_raw(vec![0u8; size].into_boxed_slice()).cast())
        }

        fn free(&self, _ptr: *mut u8, _size: usize) {
            // The test leaks the few bytes rather than remember each size.
            self.live.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    #[test]
    fn blocks_are_reused_and_the_cache_capped() {
        let live = |p: &Pool<Fake>| p.backing.live.load(std::sync::atomic::Ordering::Relaxed);
        let pool = Pool::new(Fake { live: 0.into() }, 4096);
        let a = pool.take(1000).unwrap();
        assert_eq!((a.len(), a.mem_type()), (1000, MemType::Cuda));
        pool.release(a);
        assert_eq!(pool.cached_bytes(), 1024);
        let b = pool.take(600).unwrap();
        assert_eq!(b.addr(), a.addr(), "same class reuses the block");
        assert_eq!((pool.cached_bytes(), live(&pool)), (0, 1));
        let (c, d) = (pool.take(4096).unwrap(), pool.take(4000).unwrap());
        pool.release(c);
        pool.release(d);
        assert_eq!(pool.cached_bytes(), 4096, "the second block would pass the cap and is freed");
        assert_eq!(live(&pool), 2);
        let big = pool.take(10_000).unwrap();
        pool.release(big);
        assert_eq!((pool.cached_bytes(), live(&pool)), (4096, 2), "blocks over the cap are never cached");
        pool.release(b);
        assert!(pool.take(0).unwrap().is_empty());
        let err = pool.take(usize::MAX).unwrap_err();
        assert!(err.to_string().contains(&usize::MAX.to_string()), "{err}");
        drop(pool);
    }
}
