//! [`Mapping`]: a shared, read-write mapping of part of a segment, and the
//! checked ways to reach into it (byte ranges, atomics, structs of atomics).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU8, AtomicU16, AtomicU32, AtomicU64};

use ferrocoll_core::{Error, Result};

/// A type that may be viewed in place in memory that other processes write.
///
/// # Safety
///
/// Implementors guarantee that every bit pattern (all zeroes included, as a
/// fresh segment holds) is a valid value, and that the type has no state that
/// is not an atomic: other processes read and write it concurrently, and
/// Rust code only ever holds `&T` to it.
pub unsafe trait AtomicView: Sync {}

// SAFETY: atomics of plain integers: any bits are a value, all access is atomic.
unsafe impl AtomicView for AtomicU8 {}
// SAFETY: as for AtomicU8.
unsafe impl AtomicView for AtomicU16 {}
// SAFETY: as for AtomicU8.
unsafe impl AtomicView for AtomicU32 {}
// SAFETY: as for AtomicU8.
unsafe impl AtomicView for AtomicU64 {}

/// A `MAP_SHARED` read-write mapping of part of a segment, unmapped on drop.
///
/// Made by [`ShmFile::map`](super::ShmFile::map); the file descriptor may be
/// closed afterwards (the mapping keeps the memory) and the name unlinked.
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a Mapping is an address range of MAP_SHARED memory that stays
// mapped until drop; it hands out only atomics (through `AtomicView`) and raw
// pointers, never references to non-atomic data, so which thread holds it
// does not matter: the users of the raw pointers keep their own protocols
// (the ring gives each byte one writer at a time, the epoch protocol one
// writer per area per epoch).
unsafe impl Send for Mapping {}
// SAFETY: see Send; `&Mapping` only hands out atomics and raw pointers.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// mmap `len` bytes of `fd` from `offset` (the caller checked both against the file).
    pub(super) fn new(fd: &OwnedFd, offset: libc::off_t, len: usize) -> io::Result<Mapping> {
        // SAFETY: a fresh mapping chosen by the kernel (addr null) aliases no
        // Rust object; `fd` is an open shared-memory object; the result is
        // checked against MAP_FAILED before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                offset,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        NonNull::new(p.cast::<u8>())
            .map(|ptr| Mapping { ptr, len })
            .ok_or_else(|| io::Error::other("mmap returned null"))
    }

    /// First byte (page-aligned).
    #[inline]
    pub fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the mapping is empty (never: mappings have at least one byte).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The first of `len` bytes at `off`, once `off + len` is checked to lie
    /// within the mapping (without overflowing). What may be written there,
    /// and when, is the caller's protocol.
    // Inlined: the shm TL reaches its segment through this on every step.
    #[inline]
    pub fn range(&self, off: usize, len: usize) -> Result<*mut u8> {
        match off.checked_add(len) {
            Some(end) if end <= self.len => Ok(self.ptr().wrapping_add(off)),
            _ => Err(outside(off, len, self.len)),
        }
    }

    /// A `T` at `off`, in bounds and aligned for `T` (the mapping is page-aligned).
    #[inline]
    pub fn at<T>(&self, off: usize) -> Result<*mut T> {
        let (size, align) = (std::mem::size_of::<T>(), std::mem::align_of::<T>());
        if !off.is_multiple_of(align) {
            return Err(Error::internal(format!("offset {off} is not {align}-byte aligned for a {size}-byte value")));
        }
        self.range(off, size).map(|p| p.cast::<T>())
    }

    /// The `T` at `off` (bounds and alignment checked), for as long as the mapping.
    pub fn view<T: AtomicView>(&self, off: usize) -> Result<&T> {
        let p = self.at::<T>(off)?;
        // SAFETY: `p` is in bounds and aligned (checked by `at`), the mapping
        // lives as long as `&self`, and `T: AtomicView` promises that any bits
        // are a valid `T` and that every process touches it only atomically.
        Ok(unsafe { &*p })
    }

    /// The `u64` atomic at `off`.
    pub fn u64_at(&self, off: usize) -> Result<&AtomicU64> {
        self.view(off)
    }

    /// The `u32` atomic at `off`.
    pub fn u32_at(&self, off: usize) -> Result<&AtomicU32> {
        self.view(off)
    }

    /// The `u8` atomic at `off`.
    pub fn u8_at(&self, off: usize) -> Result<&AtomicU8> {
        self.view(off)
    }
}

/// The error of a range outside a mapping (out of line: the checks above are hot).
#[cold]
fn outside(off: usize, len: usize, mapped: usize) -> Error {
    Error::internal(format!("{len} bytes at offset {off} lie outside a {mapped}-byte mapping"))
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len are exactly what mmap returned, and every borrow of
        // the mapping (atomics, ring views, MemRefs of a team) holds the
        // Mapping, or an Arc of it or of its owner, for as long as it lives.
        if unsafe { libc::munmap(self.ptr().cast(), self.len) } != 0 {
            ferrocoll_core::log_debug!("shm: munmap failed: {}", io::Error::last_os_error());
        }
    }
}

/// The system page size (mmap offsets are multiples of it).
pub fn page_size() -> u64 {
    // SAFETY: sysconf reads a constant of the system.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(p).ok().filter(|p| p.is_power_of_two()).unwrap_or(4096)
}
