//! The output-dependency flag of a stream engine: one 64-bit counter in
//! pinned host memory mapped into the device. Triggered post `n` enqueues
//! "wait until flag ≥ n" on the stream; the flag is raised to `n` once
//! posts 1..=n have all ended, so stream work never overtakes a collective
//! that ended later than one after it. Sequence-numbered, never reset.
//!
//! The same allocation holds, one cache line further, the `started` word
//! of the `write` input (`UCC_EE_CUDA_STREAM_INPUT=write`): the stream
//! writes post `n`'s number there when it reaches the post, and progress
//! reads it. The lines are apart so that the device's polled word and the
//! host's polled word never share one.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, MutexGuard};

use ferrocoll_core::Result;
use ferrocoll_cuda::{Context, HostAlloc};

/// The widest cache line of the CPUs served (128 bytes on some aarch64
/// ones, and Intel's adjacent-line prefetcher fetches 64-byte lines in
/// pairs): the shm TL's `LINE` too.
const LINE: usize = 128;

/// Bytes allocated: two cache lines, the flag's (which the device polls and
/// only the host writes) and the `started` word's (which the host polls and
/// only the device writes).
const BYTES: usize = 2 * LINE;

/// The 64-bit word of the `started` value: the first of the second line.
const STARTED: usize = LINE / 8;

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
    /// Pinned, device-mapped memory (`cuMemHostAlloc`), freed when the flag
    /// drops: the stream engine synchronises its stream before dropping the
    /// flag, so no wait reads it any more.
    mem: HostAlloc,
    order: Mutex<Order>,
}

impl Flag {
    /// Allocate the flag (0) in pinned, device-mapped memory of context `ctx`.
    pub(crate) fn new(ctx: Context) -> Result<Flag> {
        let mem = HostAlloc::new(ctx, BYTES).map_err(|e| e.prefixed("the stream flag"))?;
        Ok(Flag { mem, order: Mutex::default() })
    }

    /// The device address of the flag, or of its low 32-bit half (for 32-bit waits).
    pub(crate) fn device_ptr(&self, wide: bool) -> u64 {
        let dev = self.mem.device_ptr();
        if wide || cfg!(target_endian = "little") { dev } else { dev + 4 }
    }

    /// The device address of the `started` word, or of its low 32-bit half
    /// (for 32-bit writes), where the stream writes the number of the post
    /// it reached.
    pub(crate) fn started_device_ptr(&self, wide: bool) -> u64 {
        let dev = self.mem.device_ptr() + 8 * STARTED as u64;
        if wide || cfg!(target_endian = "little") { dev } else { dev + 4 }
    }

    /// Whether the stream reached post `seq`'s write of `started` (so ran
    /// everything enqueued before it). `wide`: the device writes 64 bits;
    /// else 32, compared cyclically (exact while fewer than 2³¹ posts are
    /// outstanding, as the 32-bit wait).
    pub(crate) fn started(&self, seq: u64, wide: bool) -> bool {
        // BYTES >= 8 * (STARTED + 1) were allocated in `new`.
        let Some(word) = self.mem.atomic_u64(STARTED) else { return false };
        // Acquire: pairs with the write's memory barrier (default flags), so
        // the work before it — staging copies into host memory the
        // collective then reads — is visible once the value is.
        let value = word.load(Ordering::Acquire);
        let reached = if wide {
            value >= seq
        } else {
            // started_device_ptr points at the numerically low half on either
            // endianness, so that is the device's value. Truncations intended:
            // GEQ compared cyclically.
            (value as u32).wrapping_sub(seq as u32) as i32 >= 0
        };
        if reached {
            device_read_barrier();
        }
        reached
    }

    /// Lock the order, to issue a sequence number and enqueue its wait atomically.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Order> {
        // Poisoned only if a thread panicked holding it; the counters stay consistent.
        self.order.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn store(&self, value: u64) {
        // BYTES >= 8 bytes were allocated in `new`, so word 0 always exists.
        let Some(flag) = self.mem.atomic_u64(0) else { return };
        // The collective's results (written by this thread, or seen by it as
        // the task ended; host copies the stream then copies to the device)
        // must be visible to the device before the flag is. x86 stores reach
        // devices in order; on aarch64 a release store orders them for CPUs
        // (inner shareable) only, and devices need a barrier over the outer
        // shareable domain first, as Linux's dma_mb() does (the reads of the
        // memory the work after the flag overwrites included).
        device_write_barrier();
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

/// Order this thread's earlier reads and writes of memory before its later
/// stores, as a device (DMA over PCIe or C2C) observes them. Reads too
/// (`dmb osh`, Linux's dma_mb(), not the store-only `dmb oshst`): the flag
/// lets stream work run that may overwrite pinned memory the collective
/// read, and an aarch64 load may otherwise complete after a later store.
#[inline]
fn device_write_barrier() {
    #[cfg(target_arch = "aarch64")]
    // SAFETY: a data memory barrier; it reads and writes no memory and
    // changes no register.
    unsafe {
        std::arch::asm!("dmb osh", options(nostack, preserves_flags))
    };
}

/// Order this thread's later reads after a device write it has seen (the
/// read side of [`device_write_barrier`], as Linux's dma_rmb()): on
/// aarch64 an acquire load orders reads for CPUs (inner shareable) only;
/// data the device wrote before the word needs the outer shareable domain.
/// x86 loads are not reordered with later loads: nothing to do.
#[inline]
fn device_read_barrier() {
    #[cfg(target_arch = "aarch64")]
    // SAFETY: a data memory barrier; it reads and writes no memory and
    // changes no register.
    unsafe {
        std::arch::asm!("dmb oshld", options(nostack, preserves_flags))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_started_word_is_on_its_own_cache_line() {
        const { assert!(STARTED * 8 >= 128 && (STARTED + 1) * 8 <= BYTES) };
    }

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
