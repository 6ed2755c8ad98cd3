//! A host memory component for unit tests that build teams without a
//! library: heap scratch, plain copies, and float32 sums only.

use std::sync::Arc;

use ferrocoll_core::backend::{Mc, McSet, ReduceSpec, Scratch, ScratchOwner};
use ferrocoll_core::{DataType, Error, MemRef, MemType, ReduceOp, Result};

/// A set holding [`HeapMc`] alone.
pub(crate) fn heap_mcs() -> McSet {
    McSet::new(vec![Arc::new(HeapMc)])
}

/// Host memory on the heap; copies, and sums of float32.
pub(crate) struct HeapMc;

/// Frees what [`HeapMc::alloc`] handed out.
struct HeapOwner;

impl ScratchOwner for HeapOwner {
    fn release(&self, mem: MemRef) {
        let slice = std::ptr::slice_from_raw_parts_mut(mem.addr(), mem.len());
        // SAFETY: `mem` is exactly the boxed slice that `HeapMc::alloc` leaked
        // (address and length; a dangling address for length 0, which is a
        // valid empty box), and each Scratch releases once, on drop.
        drop(unsafe { Box::from_raw(slice) });
    }
}

impl Mc for HeapMc {
    fn name(&self) -> &'static str {
        "heap"
    }

    fn mem_type(&self) -> MemType {
        MemType::Host
    }

    fn alloc(&self, len: usize) -> Result<Scratch> {
        let raw = Box::into_raw(vec![0xeeu8; len].into_boxed_slice());
        // SAFETY: a fresh allocation of `len` bytes, owned by the Scratch until
        // HeapOwner frees it.
        let mem = unsafe { MemRef::new(raw.cast(), len, MemType::Host) };
        Ok(Scratch::new(mem, Arc::new(HeapOwner)))
    }

    fn copy(&self, dst: MemRef, src: MemRef) -> Result<()> {
        dst.copy_host_from(&src)
    }

    fn reduce(&self, dst: MemRef, srcs: &[MemRef], spec: &ReduceSpec) -> Result<()> {
        if spec.dtype != DataType::Float32 || spec.op != ReduceOp::Sum || spec.avg_divisor.is_some() {
            return Err(Error::not_supported("the test memory component only sums float32"));
        }
        let bytes = spec.count.checked_mul(4).ok_or_else(|| Error::invalid_param("count"))?;
        if dst.len() < bytes || srcs.iter().any(|s| s.len() < bytes) {
            return Err(Error::invalid_param("a sum longer than its buffers"));
        }
        // Element by element through raw reads, since the destination may be
        // the first source (in place).
        for i in 0..spec.count {
            let sum: f32 = srcs
                .iter()
                .map(|s| {
                    // SAFETY: every source is live host memory of at least
                    // `bytes` bytes (checked above; the MemRef contract), and
                    // `i * 4 + 4 <= bytes`; unaligned reads need no alignment.
                    unsafe { s.addr().add(i * 4).cast::<f32>().read_unaligned() }
                })
                .sum();
            // SAFETY: as above for the writable destination.
            unsafe { dst.addr().add(i * 4).cast::<f32>().write_unaligned(sum) };
        }
        Ok(())
    }
}
