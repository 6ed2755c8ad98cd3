//! Scratch pools for CUDA memory: device, managed and pinned host blocks in
//! power-of-two size classes, cached on free lists up to a byte cap — the
//! host pool's policy (see `host/pool.rs`) over driver allocations, which
//! are far slower than `malloc` (`cuMemAlloc` and `cuMemHostRegister` may
//! take milliseconds and synchronise the device), so caching matters more
//! here. The driver calls are `ferrocoll-cuda`'s; the policy is this file's.
//!
//! Blocks of at most the cap go to the class of the next power of two (at
//! least [`MIN_BLOCK`] bytes); larger ones are allocated at their own size
//! and freed when returned — unless the pool keeps its users' peak
//! ([`Keep::Peak`], the pinned pool): then it caches up to the most bytes
//! they held at once, larger blocks included (reused at the same size).

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

/// How much of what comes back a pool keeps for reuse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Keep {
    /// At most the cap, in the power-of-two classes up to it; larger
    /// blocks are freed when they come back.
    UpToCap,
    /// Also up to the most bytes its users held at once (their peak),
    /// larger blocks included. For pinned staging memory: a collective
    /// whose host copies together pass the cap (two of 256 MiB) otherwise
    /// pins and unpins one of them on every call — `cuMemHostRegister` of
    /// 256 MiB takes milliseconds and synchronises the device (on an H200 a
    /// 256 MiB allreduce on CUDA memory took 5× the host path's time, 16 MiB
    /// 1.6×). It never holds more than the program held pinned at once.
    Peak,
}

struct Lists {
    /// `free[k]`: blocks of `1 << k` bytes.
    free: Vec<Vec<usize>>,
    /// Blocks over the cap kept by a [`Keep::Peak`] pool: (size, address).
    large: Vec<(usize, usize)>,
    /// Bytes on all free lists.
    cached: usize,
    /// Bytes handed out and not yet back, and the most there ever were.
    in_use: usize,
    peak: usize,
}

/// A thread-safe pool of blocks from one [`Backing`].
pub(crate) struct Pool<B: Backing> {
    lists: Mutex<Lists>,
    cap: usize,
    keep: Keep,
    backing: B,
}

impl<B: Backing> Pool<B> {
    /// A pool that caches up to `cap` bytes ([`Keep::UpToCap`]).
    pub(crate) fn new(backing: B, cap: usize) -> Pool<B> {
        Pool::keeping(backing, cap, Keep::UpToCap)
    }

    /// A pool with the policy `keep`.
    pub(crate) fn keeping(backing: B, cap: usize, keep: Keep) -> Pool<B> {
        let lists = Lists { free: Vec::new(), large: Vec::new(), cached: 0, in_use: 0, peak: 0 };
        Pool { lists: Mutex::new(lists), cap, keep, backing }
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
        let reused = {
            let mut lists = self.lock();
            let block = match list {
                Some(k) => lists.free.get_mut(k).and_then(Vec::pop),
                None => {
                    let at = lists.large.iter().position(|&(s, _)| s == size);
                    at.map(|i| lists.large.swap_remove(i).1)
                }
            };
            if block.is_some() {
                lists.cached -= size;
            }
            // Counted before a new block is allocated: a failed allocation
            // (given back below) then leaves the peak a little high, which
            // only lets the pool keep a little more.
            lists.in_use = lists.in_use.saturating_add(size);
            lists.peak = lists.peak.max(lists.in_use);
            block
        };
        let ptr = match reused {
            Some(p) => p as *mut u8,
            None => match self.backing.alloc(size) {
                Ok(p) => p,
                Err(e) => {
                    let mut lists = self.lock();
                    lists.in_use = lists.in_use.saturating_sub(size);
                    return Err(e);
                }
            },
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
        {
            let mut lists = self.lock();
            lists.in_use = lists.in_use.saturating_sub(size);
            let room = match self.keep {
                Keep::UpToCap => self.cap,
                Keep::Peak => self.cap.max(lists.peak),
            };
            if lists.cached.saturating_add(size) <= room {
                let block = mem.addr() as usize;
                match list {
                    Some(k) => {
                        if lists.free.len() <= k {
                            lists.free.resize_with(k + 1, Vec::new);
                        }
                        if let Some(l) = lists.free.get_mut(k) {
                            l.push(block);
                            lists.cached += size;
                            return;
                        }
                    }
                    None if self.keep == Keep::Peak => {
                        lists.large.push((size, block));
                        lists.cached += size;
                        return;
                    }
                    None => {}
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
        for (size, block) in lists.large.drain(..) {
            self.backing.free(block as *mut u8, size);
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

    #[test]
    fn a_peak_keeping_pool_keeps_what_its_users_held_at_once() {
        let live = |p: &Pool<Fake>| p.backing.live.load(std::sync::atomic::Ordering::Relaxed);
        let pool = Pool::keeping(Fake { live: 0.into() }, 4096, Keep::Peak);
        // A collective's host copies: two blocks of the cap and one over it, at once.
        for _ in 0..3 {
            let (a, b, big) = (pool.take(4096).unwrap(), pool.take(4000).unwrap(), pool.take(10_000).unwrap());
            pool.release(a);
            pool.release(b);
            pool.release(big);
        }
        assert_eq!(live(&pool), 3, "the first call's blocks, reused by the next calls");
        assert_eq!(pool.cached_bytes(), 2 * 4096 + 10_240, "the peak, over the cap");
        // A block of another size over the cap: kept only within the peak.
        let odd = pool.take(20_000).unwrap();
        pool.release(odd);
        assert_eq!(live(&pool), 3, "the peak (18 432 bytes cached + 20 224) would pass: freed");
        let plain = Pool::new(Fake { live: 0.into() }, 4096);
        for _ in 0..3 {
            let (a, b) = (plain.take(4096).unwrap(), plain.take(4096).unwrap());
            plain.release(a);
            plain.release(b);
        }
        assert_eq!(plain.cached_bytes(), 4096, "a capped pool keeps one and frees the other each time");
    }
}
