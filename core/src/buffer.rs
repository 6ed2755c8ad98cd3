//! [`MemRef`]: a typed-free view of memory that a task reads or writes.
//!
//! Algorithms, memory components and transports pass `MemRef`s instead of
//! slices because the memory may be on a device, may be the same buffer seen
//! twice (in-place collectives), and must outlive the borrow checker's view of
//! a request (a task is stored in the context's progress queue). The promise
//! that makes this sound is made once, by whoever calls [`MemRef::new`].

use crate::error::{Error, Result};
use crate::types::MemType;

/// A range of memory: address, length in bytes and memory type.
///
/// Cheap to copy. Sub-ranges are bounds-checked, so a `MemRef` never reaches
/// outside the range it was created with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemRef {
    addr: *mut u8,
    len: usize,
    mem_type: MemType,
}

// SAFETY: a MemRef is an address and a length; the creator of the MemRef
// promised (see `MemRef::new`) that the memory stays valid while any copy is
// in use, and the engine serialises accesses to one task's buffers, so moving
// or sharing the handle between threads is sound.
unsafe impl Send for MemRef {}
// SAFETY: as for Send; a shared &MemRef only reads the address and length.
unsafe impl Sync for MemRef {}

impl MemRef {
    /// An empty range (any address is valid for zero bytes).
    #[inline]
    pub const fn empty(mem_type: MemType) -> MemRef {
        MemRef { addr: std::ptr::NonNull::<u8>::dangling().as_ptr(), len: 0, mem_type }
    }

    /// Wrap `len` bytes at `addr`.
    ///
    /// # Safety
    /// For as long as this `MemRef` or any copy or sub-range of it is used:
    /// - if `len > 0`, `addr..addr+len` is one allocation of `mem_type`
    ///   memory, readable and (where ferrocoll writes it, i.e. a destination)
    ///   writable;
    /// - no one but ferrocoll reads or writes it (the request that carries it
    ///   owns it until completion or cancellation).
    #[inline]
    pub unsafe fn new(addr: *mut u8, len: usize, mem_type: MemType) -> MemRef {
        if len == 0 { MemRef::empty(mem_type) } else { MemRef { addr, len, mem_type } }
    }

    /// Wrap a host slice that ferrocoll may read.
    ///
    /// # Safety
    /// The slice must stay alive and unmodified while the `MemRef` is used,
    /// and ferrocoll must never be asked to write through it.
    pub unsafe fn from_slice(s: &[u8]) -> MemRef {
        // SAFETY: forwarded to the caller, see the contract above.
        unsafe { MemRef::new(s.as_ptr().cast_mut(), s.len(), MemType::Host) }
    }

    /// Wrap a mutable host slice.
    ///
    /// # Safety
    /// The slice must stay alive and otherwise unaccessed while the `MemRef` is used.
    pub unsafe fn from_mut_slice(s: &mut [u8]) -> MemRef {
        // SAFETY: forwarded to the caller, see the contract above.
        unsafe { MemRef::new(s.as_mut_ptr(), s.len(), MemType::Host) }
    }

    /// Start address.
    #[inline]
    pub fn addr(&self) -> *mut u8 {
        self.addr
    }

    /// Length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the range is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Memory type.
    #[inline]
    pub fn mem_type(&self) -> MemType {
        self.mem_type
    }

    /// The sub-range of `len` bytes starting `offset` bytes in. An empty
    /// range is valid at any offset (v-variant blocks of count 0 may carry
    /// any displacement).
    #[inline]
    pub fn range(&self, offset: usize, len: usize) -> Result<MemRef> {
        if len == 0 {
            return Ok(MemRef::empty(self.mem_type));
        }
        match offset.checked_add(len) {
            Some(end) if end <= self.len => {
                // wrapping_add cannot leave the allocation: offset + len <= self.len.
                Ok(MemRef { addr: self.addr.wrapping_add(offset), len, mem_type: self.mem_type })
            }
            _ => Err(outside(offset, len, self.len)),
        }
    }

    /// Whether the two ranges share at least one byte.
    #[inline]
    pub fn overlaps(&self, other: &MemRef) -> bool {
        if self.len == 0 || other.len == 0 {
            return false;
        }
        let (a, b) = (self.addr as usize, other.addr as usize);
        a < b + other.len && b < a + self.len
    }

    /// Copy host memory `src` into this host memory, of the same length
    /// (they may overlap: a memmove). What every copy between host buffers
    /// comes down to; errors name a memory type or length that differ.
    #[inline]
    pub fn copy_host_from(&self, src: &MemRef) -> Result<()> {
        if self.mem_type != MemType::Host || src.mem_type != MemType::Host || self.len != src.len {
            return Err(not_a_host_copy(self, src));
        }
        if self.len > 0 {
            // SAFETY: by the MemRef contract both ranges are live host
            // allocations (host checked above) of len bytes, self writable,
            // and no one outside ferrocoll touches them meanwhile; overlap
            // is fine for a memmove.
            unsafe { crate::host_copy::memmove(self.addr, src.addr, self.len) };
        }
        Ok(())
    }

    /// View as a host slice.
    ///
    /// # Safety
    /// The memory is host memory and no one writes it while the slice lives.
    pub unsafe fn as_slice<'a>(&self) -> &'a [u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: the MemRef contract makes addr..addr+len one live allocation;
        // the caller promises it is host memory with no concurrent writer.
        unsafe { std::slice::from_raw_parts(self.addr, self.len) }
    }

    /// View as a mutable host slice.
    ///
    /// # Safety
    /// The memory is host memory and nothing else reads or writes it while the slice lives.
    pub unsafe fn as_mut_slice<'a>(&self) -> &'a mut [u8] {
        if self.len == 0 {
            return &mut [];
        }
        // SAFETY: the MemRef contract makes addr..addr+len one live writable
        // allocation; the caller promises exclusive host access.
        unsafe { std::slice::from_raw_parts_mut(self.addr, self.len) }
    }
}

/// The error of [`MemRef::copy_host_from`] (out of line: it is hot).
#[cold]
fn not_a_host_copy(dst: &MemRef, src: &MemRef) -> Error {
    Error::invalid_param(format!(
        "host copy of {} bytes of {} memory into {} bytes of {} memory",
        src.len, src.mem_type, dst.len, dst.mem_type
    ))
}

/// The error of a sub-range outside its buffer (out of line: `range` is hot).
#[cold]
fn outside(offset: usize, len: usize, buffer: usize) -> Error {
    Error::internal(format!("range {offset}+{len} is outside a buffer of {buffer} bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_bounds_checked() {
        let mut v = vec![0u8; 16];
        // SAFETY: v outlives m and is not touched while m is used.
        let m = unsafe { MemRef::from_mut_slice(&mut v) };
        let r = m.range(4, 8).unwrap();
        assert_eq!(r.len(), 8);
        assert_eq!(r.addr() as usize, m.addr() as usize + 4);
        assert!(m.range(10, 7).is_err());
        assert!(m.range(usize::MAX, 2).is_err());
        assert!(m.range(16, 0).unwrap().is_empty());
        assert!(m.range(99, 0).unwrap().is_empty());
        assert!(r.overlaps(&m));
        assert!(!m.range(0, 4).unwrap().overlaps(&m.range(4, 4).unwrap()));
    }

    #[test]
    fn host_copies_move_overlapping_bytes_and_refuse_other_memory_or_lengths() {
        let mut v: Vec<u8> = (0..16).collect();
        // SAFETY: v outlives m and is not touched while m is used.
        let m = unsafe { MemRef::from_mut_slice(&mut v) };
        // Overlapping ranges: a memmove.
        m.range(2, 8).unwrap().copy_host_from(&m.range(0, 8).unwrap()).unwrap();
        m.range(0, 0).unwrap().copy_host_from(&MemRef::empty(MemType::Host)).unwrap();
        let e = m.range(0, 4).unwrap().copy_host_from(&m.range(8, 3).unwrap()).unwrap_err().to_string();
        assert!(e.contains("3 bytes") && e.contains("4 bytes"), "{e}");
        // SAFETY: never read or written: the copy refuses device memory first.
        let device = unsafe { MemRef::new(m.addr(), 4, MemType::Cuda) };
        let e = m.range(0, 4).unwrap().copy_host_from(&device).unwrap_err().to_string();
        assert!(e.contains("cuda"), "{e}");
        assert_eq!(v, [0, 1, 0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15]);
    }
}
