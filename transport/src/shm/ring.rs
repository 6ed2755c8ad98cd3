//! A single-producer single-consumer byte ring in shared memory.
//!
//! Layout at the ring's offset: the consumer's `head` (bytes consumed) on its
//! own 128 bytes, the producer's `tail` (bytes published) on the next 128,
//! then `size` data bytes (a power of two). Both counters only grow; a byte
//! at stream position `p` lives at `data[p % size]`. The producer writes a
//! whole record, then publishes it with one Release store of `tail`; the
//! consumer Acquire-loads `tail`, reads, then Release-stores `head`, which
//! hands the bytes back to the producer.
//!
//! Memory safety never depends on the counters, which another process may
//! corrupt: every access is reduced modulo `size`. Inconsistent counters are
//! reported as errors.

use std::mem::MaybeUninit;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use ferrocoll_core::{Error, Result};

use super::wire::RING_CTRL;
use crate::shmem::Mapping;

/// One ring, as either side maps it.
struct Ring {
    /// Keeps the memory below mapped.
    _map: Arc<Mapping>,
    head: NonNull<AtomicU64>,
    tail: NonNull<AtomicU64>,
    data: NonNull<u8>,
    size: usize,
}

// SAFETY: the pointers target MAP_SHARED memory kept alive by `_map`; the
// counters are atomics and the data bytes follow the SPSC protocol, whose
// single-producer/single-consumer rule is kept by `&mut self` on the
// Producer and Consumer wrappers (each lives behind its owner's mutex).
unsafe impl Send for Ring {}

impl Ring {
    fn new(map: Arc<Mapping>, off: usize, size: usize) -> Result<Ring> {
        let end = off.checked_add(RING_CTRL).and_then(|e| e.checked_add(size));
        if !size.is_power_of_two() || end.is_none_or(|e| e > map.len()) || !off.is_multiple_of(8) {
            return Err(Error::internal(format!(
                "ring of {size} bytes at offset {off} does not fit a mapping of {} bytes",
                map.len()
            )));
        }
        let head = NonNull::from(map.u64_at(off)?);
        let tail = NonNull::from(map.u64_at(off + RING_CTRL / 2)?);
        let data = NonNull::new(map.ptr().wrapping_add(off + RING_CTRL))
            .ok_or_else(|| Error::internal("ring data pointer is null"))?;
        Ok(Ring { _map: map, head, tail, data, size })
    }

    fn head(&self) -> &AtomicU64 {
        // SAFETY: checked in bounds and aligned by `Mapping::u64_at` in new(); `_map` keeps it mapped.
        unsafe { self.head.as_ref() }
    }

    fn tail(&self) -> &AtomicU64 {
        // SAFETY: as in head().
        unsafe { self.tail.as_ref() }
    }

    /// Copy `src` to stream position `pos` (wrapping).
    fn copy_in(&self, pos: u64, src: &[u8]) {
        let mut done = 0;
        while done < src.len() {
            let at = (pos.wrapping_add(done as u64) % self.size as u64) as usize;
            let n = (src.len() - done).min(self.size - at);
            // SAFETY: at + n <= size, so the destination lies in the data
            // area; the producer owns bytes between tail and head + size (the
            // consumer reads them only after our Release store of tail).
            // Not overlapping: the source is the caller's slice.
            unsafe { ferrocoll_core::host_copy::memmove(self.data.as_ptr().add(at), src.as_ptr().add(done), n) };
            done += n;
        }
    }

    /// Copy from stream position `pos` (wrapping) into `out` (possibly uninitialised; all of it is written).
    fn copy_out(&self, pos: u64, out: &mut [MaybeUninit<u8>]) {
        let mut done = 0;
        while done < out.len() {
            let at = (pos.wrapping_add(done as u64) % self.size as u64) as usize;
            let n = (out.len() - done).min(self.size - at);
            // SAFETY: at + n <= size, so the source lies in the data area; the
            // bytes between head and tail are the consumer's until it
            // Release-stores head past them. The destination is `out[done..done + n]`.
            unsafe {
                ferrocoll_core::host_copy::memmove(out.as_mut_ptr().add(done).cast(), self.data.as_ptr().add(at), n)
            };
            done += n;
        }
    }

    fn corrupt(&self, head: u64, tail: u64) -> Error {
        Error::io(format!("ring counters are inconsistent: head {head}, tail {tail}, size {}", self.size))
    }
}

/// The writing side: this endpoint's ring in a peer's segment.
pub(super) struct Producer(Ring);

impl Producer {
    /// The producer of the ring at `off` in `map`.
    pub fn new(map: Arc<Mapping>, off: usize, size: usize) -> Result<Producer> {
        Ring::new(map, off, size).map(Producer)
    }

    /// Bytes that can be pushed now.
    pub fn free(&mut self) -> Result<usize> {
        // Relaxed: only this producer stores tail.
        let tail = self.0.tail().load(Ordering::Relaxed);
        // Acquire: the consumer read the bytes below head before Release-storing
        // it, so we may overwrite them.
        let head = self.0.head().load(Ordering::Acquire);
        let used = tail.wrapping_sub(head);
        if used > self.0.size as u64 {
            return Err(self.0.corrupt(head, tail));
        }
        Ok(self.0.size - used as usize)
    }

    /// Append one record made of `parts`, padded to 8 bytes; `Ok(false)` if it
    /// does not fit now.
    pub fn push(&mut self, parts: &[&[u8]]) -> Result<bool> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let rec = len.next_multiple_of(8);
        if rec > self.0.size {
            return Err(Error::internal(format!("record of {rec} bytes exceeds a ring of {}", self.0.size)));
        }
        if self.free()? < rec {
            return Ok(false);
        }
        // Relaxed: only this producer stores tail.
        let tail = self.0.tail().load(Ordering::Relaxed);
        let mut pos = tail;
        for p in parts {
            self.0.copy_in(pos, p);
            pos = pos.wrapping_add(p.len() as u64);
        }
        // Release: publishes the record's bytes (and whatever this thread wrote
        // before, such as a completion slot's QUEUED state) to the consumer's
        // Acquire load of tail.
        self.0.tail().store(tail.wrapping_add(rec as u64), Ordering::Release);
        Ok(true)
    }
}

/// The reading side: sender `s`'s ring in this endpoint's segment.
pub(super) struct Consumer(Ring);

impl Consumer {
    /// The consumer of the ring at `off` in `map`.
    pub fn new(map: Arc<Mapping>, off: usize, size: usize) -> Result<Consumer> {
        Ring::new(map, off, size).map(Consumer)
    }

    /// Bytes published and not consumed yet.
    pub fn readable(&mut self) -> Result<usize> {
        // Relaxed: only this consumer stores head.
        let head = self.0.head().load(Ordering::Relaxed);
        // Acquire: pairs with the producer's Release store, so the record bytes
        // below tail are visible.
        let tail = self.0.tail().load(Ordering::Acquire);
        let used = tail.wrapping_sub(head);
        if used > self.0.size as u64 {
            return Err(self.0.corrupt(head, tail));
        }
        Ok(used as usize)
    }

    /// Copy `out.len()` bytes starting `at` bytes past head (the caller checks
    /// they are readable; memory safety does not depend on it).
    pub fn peek(&self, at: usize, out: &mut [u8]) {
        // SAFETY: u8 and MaybeUninit<u8> have the same layout, and copy_out
        // writes only initialised bytes, so `out` stays initialised.
        let out = unsafe { &mut *(std::ptr::from_mut(out) as *mut [MaybeUninit<u8>]) };
        self.peek_uninit(at, out);
    }

    /// As [`Consumer::peek`], into memory not initialised yet (all of `out` is written).
    pub fn peek_uninit(&self, at: usize, out: &mut [MaybeUninit<u8>]) {
        // Relaxed: only this consumer stores head.
        let head = self.0.head().load(Ordering::Relaxed);
        self.0.copy_out(head.wrapping_add(at as u64), out);
    }

    /// Hand `n` bytes back to the producer.
    pub fn consume(&mut self, n: usize) {
        // Relaxed: only this consumer stores head.
        let head = self.0.head().load(Ordering::Relaxed);
        // Release: our reads of these bytes happen before the producer's
        // Acquire load of head lets it overwrite them.
        self.0.head().store(head.wrapping_add(n as u64), Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shm::segment::OwnedSegment;

    fn pair(size: u64) -> (OwnedSegment, Producer, Consumer) {
        let job = format!("ringtest{}-{size}", std::process::id());
        let seg = OwnedSegment::create(&job, 0, 1, size, 1).unwrap();
        seg.unlink().unwrap();
        let off = seg.header.ring_off(0).unwrap() as usize;
        let p = Producer::new(seg.map.clone(), off, size as usize).unwrap();
        let c = Consumer::new(seg.map.clone(), off, size as usize).unwrap();
        (seg, p, c)
    }

    #[test]
    fn records_wrap_and_space_returns() {
        let (_seg, mut p, mut c) = pair(4096);
        let rec: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
        for round in 0..20u8 {
            let mut tagged = rec.clone();
            tagged[0] = round;
            assert!(p.push(&[&tagged[..10], &tagged[10..]]).unwrap());
            assert_eq!(c.readable().unwrap(), 1000);
            let mut out = vec![0u8; 1000];
            c.peek(0, &mut out);
            assert_eq!(out, tagged);
            c.consume(1000);
        }
        for _ in 0..4 {
            assert!(p.push(&[&rec]).unwrap());
        }
        assert!(!p.push(&[&rec]).unwrap(), "a full ring refuses");
        assert_eq!(p.free().unwrap(), 4096 - 4000);
        assert!(p.push(&[&[0u8; 5000]]).is_err());
    }

    #[test]
    fn corrupt_counters_are_errors() {
        let (seg, mut p, mut c) = pair(4096);
        let off = seg.header.ring_off(0).unwrap() as usize;
        seg.map.u64_at(off + RING_CTRL / 2).unwrap().store(1 << 40, Ordering::Relaxed);
        assert!(c.readable().is_err());
        assert!(p.free().is_err());
        let mut out = [0u8; 16];
        c.peek(usize::MAX, &mut out); // out of range positions stay inside the ring
    }
}
