//! The output-dependency flag of a stream engine: one 64-bit counter in
//! pinned host memory mapped into the device. Triggered post `n` enqueues
//! "wait until flag ≥ n" on the stream; the flag is raised to `n` once
//! posts 1..=n have all ended, so stream work never overtakes a collective
//! that ended later than one after it. Sequence-numbered, never reset.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use cudarc::driver::sys::{self, CUdeviceptr};

use super::driver::{Raw, check, make_current};
use ferrocoll_core::Result;

/// Bytes allocated: one cache line, so the device polls a line nobody else writes.
const BYTES: usize = 64;

/// Which sequence numbers were handed out and which have ended.
#[derive(Default)]
pub(crate) struct Order {
    issued: u64,
    released: u64,
    /// Ended posts above `released` (ended before an earlier one).
    ended: BTreeSet<u64>,
}

impl Order {
    /// The sequence number of the next triggered post.
    pub(crate) fn issue(&mut self) -> u64 {
        self.issued += 1;
        self.issued
    }

    /// Post `seq` ended: the new flag value if it rises (every post up to it ended).
    fn end(&mut self, seq: u64) -> Option<u64> {
        if seq <= self.released || seq > self.issued || !self.ended.insert(seq) {
            return None;
        }
        let before = self.released;
        while self.ended.first() == Some(&(self.released + 1)) {
            self.ended.pop_first();
            self.released += 1;
        }
        (self.released != before).then_some(self.released)
    }

    /// Every post issued so far ended: the flag value that releases them all.
    fn end_all(&mut self) -> u64 {
        self.released = self.issued;
        self.ended.clear();
        self.released
    }
}

pub(crate) struct Flag {
    host: Raw<AtomicU64>,
    dev: CUdeviceptr,
    ctx: Raw<sys::CUctx_st>,
    order: Mutex<Order>,
}

impl Flag {
    /// Allocate the flag (0) in pinned, device-mapped memory of context `ctx`.
    pub(crate) fn new(ctx: Raw<sys::CUctx_st>) -> Result<Flag> {
        make_current(ctx)?;
        let mut p: *mut std::ffi::c_void = std::ptr::null_mut();
        let flags = sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE;
        // SAFETY: p is a valid out-pointer; the context is current (above).
        check(unsafe { sys::cuMemHostAlloc(&mut p, BYTES, flags) }, "cuMemHostAlloc of the stream flag")?;
        let host = Raw(p.cast::<AtomicU64>());
        // SAFETY: p points to BYTES ≥ 8 bytes of page-aligned memory, ours alone; zero them before the device sees them.
        unsafe { host.0.write(AtomicU64::new(0)) };
        let mut flag = Flag { host, dev: 0, ctx, order: Mutex::default() };
        // SAFETY: p was allocated with DEVICEMAP in the current context; dev is a valid out-pointer.
        let r = unsafe { sys::cuMemHostGetDevicePointer_v2(&mut flag.dev, p, 0) };
        // On error `flag` is dropped, which frees p.
        check(r, "cuMemHostGetDevicePointer of the stream flag")?;
        Ok(flag)
    }

    /// The device address of the flag, or of its low 32-bit half (for 32-bit waits).
    pub(crate) fn device_ptr(&self, wide: bool) -> CUdeviceptr {
        if wide || cfg!(target_endian = "little") { self.dev } else { self.dev + 4 }
    }

    /// Lock the order, to issue a sequence number and enqueue its wait atomically.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Order> {
        // Poisoned only if a thread panicked holding it; the counters stay consistent.
        self.order.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn store(&self, value: u64) {
        // SAFETY: host points to the flag allocated in `new`, freed only in Drop.
        let flag = unsafe { &*self.host.0 };
        // Release: the collective's results (written by this thread, or seen
        // by it as the task ended) are visible before the device sees the flag.
        flag.store(value, Ordering::Release);
    }

    /// Post `seq` ended (or will never run): raise the flag as far as every
    /// post up to it has ended. Idempotent.
    pub(crate) fn release(&self, seq: u64) {
        let mut o = self.lock();
        if let Some(value) = o.end(seq) {
            self.store(value);
        }
    }

    /// Release every post issued so far (engine teardown).
    pub(crate) fn release_all(&self) {
        let mut o = self.lock();
        let value = o.end_all();
        self.store(value);
    }
}

impl Drop for Flag {
    fn drop(&mut self) {
        // The stream engine synchronised its stream before dropping us, so no wait reads the flag any more.
        if make_current(self.ctx).is_ok() {
            // SAFETY: host came from cuMemHostAlloc in this context and nothing uses it after this.
            let r = unsafe { sys::cuMemFreeHost(self.host.0.cast()) };
            if let Err(e) = check(r, "cuMemFreeHost of the stream flag") {
                ferrocoll_core::log_warn!("{e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_rises_only_over_posts_that_all_ended() {
        let mut o = Order::default();
        let (a, b, c) = (o.issue(), o.issue(), o.issue());
        assert_eq!((a, b, c), (1, 2, 3));
        assert_eq!(o.end(b), None, "post 1 has not ended: post 2 must keep waiting");
        assert_eq!(o.end(b), None, "idempotent");
        assert_eq!(o.end(a), Some(2));
        assert_eq!(o.end(a), None);
        assert_eq!(o.end(4), None, "never issued");
        assert_eq!(o.end(c), Some(3));
        let d = o.issue();
        assert_eq!(o.end_all(), d);
        assert_eq!(o.end(d), None);
    }
}
