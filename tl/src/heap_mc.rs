//! A host memory component for unit tests that build teams without a
//! library: heap scratch and plain copies, no reductions.

use std::sync::Arc;

use ferrocoll_core::backend::{Mc, McSet, ReduceSpec, Scratch, ScratchOwner};
use ferrocoll_core::{Error, MemRef, MemType, Result};

/// A set holding [`HeapMc`] alone.
pub(crate) fn heap_mcs() -> McSet {
    McSet::new(vec![Arc::new(HeapMc)])
}

/// Host memory on the heap; copies only.
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

    fn reduce(&self, _dst: MemRef, _srcs: &[MemRef], _spec: &ReduceSpec) -> Result<()> {
        Err(Error::not_supported("the test memory component does not reduce"))
    }
}
