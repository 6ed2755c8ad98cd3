//! Scattered device blocks, staged block by block.
//!
//! PyTorch's `all_to_all` on lists of separately allocated CUDA tensors
//! passes a NULL buffer and the tensors' addresses as displacements. On
//! host memory the blocks are rebased on the lowest one (the collective
//! touches only the blocks); device memory is staged whole by the TLs, and
//! the span between scattered blocks is not the caller's to read or write.
//! So such a side runs on contiguous scratch of the device's memory
//! component instead: the non-empty blocks are packed into it in rank
//! order, gathered into it at each post (a source) or scattered back from
//! it when the collective completes, before its status says so (a
//! destination).
//!
//! The copies are synchronous on the memory component, so this serves
//! `ucc_collective_post`; a triggered post (stream-ordered) of such a
//! collective is refused (`UCC_ERR_NOT_SUPPORTED`).

use std::sync::Arc;

use ferrocoll::core::backend::{Mc, McSet, Scratch};
use ferrocoll::{MemRef, MemType, Result};

/// One non-empty block of a side: `bytes` at the caller's `addr`, at
/// `off` bytes into the scratch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Block {
    /// The caller's address.
    pub addr: u64,
    /// Its length.
    pub bytes: u64,
    /// Where it lies in the scratch.
    pub off: u64,
}

/// What to stage for one side, as translation finds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// The source side (gathered at post), else the destination (scattered at completion).
    pub src: bool,
    /// The blocks' memory type.
    pub mem: MemType,
    /// The non-empty blocks, packed in rank order.
    pub blocks: Vec<Block>,
    /// Scratch bytes (the blocks' total).
    pub bytes: u64,
}

/// A side running on scratch: the plan and its memory.
pub(crate) struct Staged {
    plan: Plan,
    scratch: Scratch,
    mc: Arc<dyn Mc>,
}

// SAFETY: the scratch is device memory owned by this value; it and the
// caller's blocks are only touched through the memory component's copies,
// which a request makes from one thread at a time (a post, or the
// completion of that post).
unsafe impl Send for Staged {}
// SAFETY: as above: no method mutates the value itself.
unsafe impl Sync for Staged {}

impl Staged {
    /// Scratch for `plan` from `mcs`.
    pub(crate) fn new(plan: Plan, mcs: &McSet) -> Result<Staged> {
        let mc = mcs.get(plan.mem)?.clone();
        let bytes = usize::try_from(plan.bytes)
            .map_err(|_| ferrocoll::Error::invalid_param(format!("{} bytes to stage overflow", plan.bytes)))?;
        let scratch = mc.alloc(bytes)?;
        Ok(Staged { plan, scratch, mc })
    }

    /// Whether this is the source side.
    pub(crate) fn is_src(&self) -> bool {
        self.plan.src
    }

    /// The scratch's start (the side's buffer from now on).
    pub(crate) fn addr(&self) -> *mut u8 {
        self.scratch.mem().addr()
    }

    /// The memory type of the scratch and the blocks.
    pub(crate) fn mem_type(&self) -> MemType {
        self.plan.mem
    }

    /// The block `b`'s two places: (the caller's, the scratch's).
    fn places(&self, b: &Block) -> (MemRef, MemRef) {
        let mt = self.plan.mem;
        // SAFETY: the caller's block (valid while the request lives, UCC's
        // contract) and its slot of the scratch (off + bytes <= its size,
        // as the plan was built); copies are the only access.
        unsafe {
            (
                MemRef::new(b.addr as usize as *mut u8, b.bytes as usize, mt),
                MemRef::new(self.addr().add(b.off as usize), b.bytes as usize, mt),
            )
        }
    }

    /// Copy every block into the scratch (a source, before each post).
    pub(crate) fn gather(&self) -> Result<()> {
        for b in &self.plan.blocks {
            let (user, scratch) = self.places(b);
            self.mc.copy(scratch, user)?;
        }
        Ok(())
    }

    /// Copy every block back from the scratch (a destination, at completion).
    pub(crate) fn scatter(&self) -> Result<()> {
        for b in &self.plan.blocks {
            let (user, scratch) = self.places(b);
            self.mc.copy(user, scratch)?;
        }
        Ok(())
    }
}
