//! The host scratch pool: 64-byte-aligned blocks in power-of-two size
//! classes, cached on free lists up to a byte cap.
//!
//! A request of `len` bytes gets a block of the next power of two (at least
//! 64 bytes). Freed blocks go back to their class's free list unless that
//! would cache more than the cap, in which case they are really freed.
//! Requests larger than the cap are never cached, so they are allocated at
//! their own size (rounded up to 64 bytes) rather than a power of two.

use std::alloc::{Layout, alloc, dealloc};
use std::ptr::NonNull;
use std::sync::{Mutex, MutexGuard};

use ferrocoll_core::backend::ScratchOwner;
use ferrocoll_core::{Error, MemRef, MemType, Result};

/// Alignment of every block: a cache line, enough for any element type and for SIMD.
pub const ALIGN: usize = 64;

/// Default cap on cached bytes.
pub const DEFAULT_CACHE_LIMIT: usize = 256 << 20;

/// A block owned by the pool (on a free list).
struct Block(NonNull<u8>);

// SAFETY: a Block is a heap allocation that no one else references while it
// sits on a free list; moving the owning pointer between threads is sound.
unsafe impl Send for Block {}

struct Lists {
    /// `free[k]`: blocks of `1 << k` bytes.
    free: Vec<Vec<Block>>,
    /// Bytes on all free lists.
    cached: usize,
}

/// A thread-safe pool of host blocks (see the module docs).
pub struct Pool {
    lists: Mutex<Lists>,
    cap: usize,
}

/// How a request of some length is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Class {
    /// Bytes really allocated.
    size: usize,
    /// Free-list index when the block may be cached.
    list: Option<usize>,
}

impl Pool {
    /// An empty pool caching at most `cap` bytes of freed blocks.
    pub fn new(cap: usize) -> Pool {
        Pool { lists: Mutex::new(Lists { free: Vec::new(), cached: 0 }), cap }
    }

    /// The cap on cached bytes.
    pub fn cache_limit(&self) -> usize {
        self.cap
    }

    /// Bytes of freed blocks held for reuse.
    pub fn cached_bytes(&self) -> usize {
        self.lock().cached
    }

    fn lock(&self) -> MutexGuard<'_, Lists> {
        // Nothing panics while the lock is held; if something ever did, the
        // lists are still consistent (each push/pop is one step), so go on.
        self.lists.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn class(&self, len: usize) -> Result<Class> {
        let too_big = || Error::no_memory(format!("host scratch of {len} bytes is too large to allocate"));
        match len.max(ALIGN).checked_next_power_of_two() {
            Some(size) if size <= self.cap => Ok(Class { size, list: Some(size.trailing_zeros() as usize) }),
            _ => Ok(Class { size: len.checked_next_multiple_of(ALIGN).ok_or_else(too_big)?, list: None }),
        }
    }

    /// A block of at least `len` bytes, 64-byte aligned; `len == 0` gives an empty range.
    pub(crate) fn take(&self, len: usize) -> Result<MemRef> {
        if len == 0 {
            return Ok(MemRef::empty(MemType::Host));
        }
        let class = self.class(len)?;
        let reused = class.list.and_then(|k| {
            let mut lists = self.lock();
            let block = lists.free.get_mut(k)?.pop()?;
            lists.cached -= class.size;
            Some(block.0)
        });
        let ptr = match reused {
            Some(p) => p,
            None => {
                let layout = layout(class.size).map_err(|e| e.prefixed(format!("host scratch of {len} bytes")))?;
                // SAFETY: the layout has a non-zero size (class.size >= len > 0).
                let raw = unsafe { alloc(layout) };
                NonNull::new(raw).ok_or_else(|| {
                    Error::no_memory(format!("allocating {} bytes of host scratch for {len} bytes failed", class.size))
                })?
            }
        };
        // SAFETY: ptr is a live allocation of class.size >= len bytes that only
        // the returned MemRef (through its Scratch) uses until `release`.
        Ok(unsafe { MemRef::new(ptr.as_ptr(), len, MemType::Host) })
    }

    /// Take back a block from [`Pool::take`] (called once per block).
    fn give_back(&self, mem: MemRef) {
        if mem.is_empty() {
            return;
        }
        let Ok(class) = self.class(mem.len()) else { return };
        let Some(ptr) = NonNull::new(mem.addr()) else { return };
        if let Some(k) = class.list {
            let mut lists = self.lock();
            if lists.cached + class.size <= self.cap {
                if lists.free.len() <= k {
                    lists.free.resize_with(k + 1, Vec::new);
                }
                if let Some(list) = lists.free.get_mut(k) {
                    list.push(Block(ptr));
                    lists.cached += class.size;
                    return;
                }
            }
        }
        free(ptr, class.size);
    }
}

fn layout(size: usize) -> Result<Layout> {
    Layout::from_size_align(size, ALIGN)
        .map_err(|e| Error::no_memory(format!("a block of {size} bytes has no valid layout: {e}")))
}

/// Free a block of `size` bytes from `take`.
fn free(ptr: NonNull<u8>, size: usize) {
    // The layout was valid when the block was allocated with this size.
    if let Ok(layout) = layout(size) {
        // SAFETY: ptr was returned by `alloc` with exactly this layout (the
        // size class is a pure function of the length) and is freed once:
        // it was either just taken off a free list or handed back by its Scratch.
        unsafe { dealloc(ptr.as_ptr(), layout) };
    }
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool").field("cached_bytes", &self.cached_bytes()).field("cap", &self.cap).finish()
    }
}

impl ScratchOwner for Pool {
    fn release(&self, mem: MemRef) {
        self.give_back(mem);
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let lists = self.lists.get_mut().unwrap_or_else(|poisoned| poisoned.into_inner());
        for (k, list) in lists.free.drain(..).enumerate() {
            for block in list {
                free(block.0, 1 << k);
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
        let pool = Pool::new(1 << 20);
        assert_eq!(pool.class(1).unwrap(), Class { size: 64, list: Some(6) });
        assert_eq!(pool.class(65).unwrap(), Class { size: 128, list: Some(7) });
        assert_eq!(pool.class(1 << 20).unwrap(), Class { size: 1 << 20, list: Some(20) });
        assert_eq!(pool.class((1 << 20) + 1).unwrap(), Class { size: (1 << 20) + 64, list: None });
        assert!(pool.class(usize::MAX).is_err());
    }

    #[test]
    fn blocks_are_reused_aligned_and_capped() {
        let pool = Pool::new(4096);
        let a = pool.take(1000).unwrap();
        assert_eq!(a.len(), 1000);
        assert_eq!(a.addr() as usize % ALIGN, 0);
        pool.give_back(a);
        assert_eq!(pool.cached_bytes(), 1024);
        let b = pool.take(600).unwrap();
        assert_eq!(b.addr(), a.addr(), "same class reuses the block");
        assert_eq!(pool.cached_bytes(), 0);
        let (c, d) = (pool.take(4096).unwrap(), pool.take(4000).unwrap());
        pool.give_back(c);
        pool.give_back(d);
        assert_eq!(pool.cached_bytes(), 4096, "the second block would exceed the cap and is freed");
        pool.give_back(b);
        assert_eq!(pool.cached_bytes(), 4096, "still capped");
        let big = pool.take(10_000).unwrap();
        pool.give_back(big);
        assert_eq!(pool.cached_bytes(), 4096, "blocks over the cap are never cached");
        assert!(pool.take(0).unwrap().is_empty());
        pool.give_back(MemRef::empty(MemType::Host));
    }

    #[test]
    fn absurd_sizes_are_no_memory_errors() {
        let pool = Pool::new(1 << 20);
        for len in [usize::MAX, isize::MAX as usize, 1 << 62] {
            let err = pool.take(len).unwrap_err();
            assert_eq!(err.status(), ferrocoll_core::Status::NoMemory);
            assert!(err.to_string().contains(&len.to_string()), "{err}");
        }
    }
}
