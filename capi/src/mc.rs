//! UCC internals that UCC's own tools (perftest, the MPI test) link
//! against: the memory-component calls (`ucc_mc_*`), `ucc_str_to_memunits`,
//! (the executor calls, `ucc_ee_executor_*`, are `executor.rs`), and two
//! data objects whose sizes must be
//! UCC's, since programs copy them at load time (copy relocations).
//!
//! The memory calls run on ferrocoll's memory components, made once per
//! process (UCC's are global too).

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use ferrocoll::core::backend::{Mc, McSet, Scratch};
use ferrocoll::core::config::parse_size;
use ferrocoll::{Error, MemRef, MemType, Result};

use crate::abi::*;
use crate::config::req_str;
use crate::guard::{ffi, non_null};
use crate::lib_api::put;
use crate::types;

/// `ucc_dt_predefined_sizes`: bytes of each predefined datatype, indexed by
/// `datatype >> 3` (18 entries, as UCC's).
#[unsafe(no_mangle)]
pub static ucc_dt_predefined_sizes: [usize; types::DT_PREDEFINED] =
    [1, 2, 4, 8, 16, 1, 2, 4, 8, 16, 2, 4, 8, 2, 16, 8, 16, 32];

/// A table of C strings that C may read from any thread.
#[repr(transparent)]
pub struct Names(pub [*const c_char; 8]);

// SAFETY: the pointers are to static, immutable C string literals.
unsafe impl Sync for Names {}

/// `ucc_memory_type_names`: a name per `ucc_memory_type_t`, then UCC's two
/// internal values (8 entries, as UCC's).
#[unsafe(no_mangle)]
pub static ucc_memory_type_names: Names = Names([
    c"host".as_ptr(),
    c"cuda".as_ptr(),
    c"cuda-managed".as_ptr(),
    c"rocm".as_ptr(),
    c"rocm-managed".as_ptr(),
    c"unknown".as_ptr(),
    c"asymmetric".as_ptr(),
    c"not applicable".as_ptr(),
]);

/// The process's memory components.
fn mcs() -> &'static McSet {
    static MCS: OnceLock<McSet> = OnceLock::new();
    MCS.get_or_init(|| McSet::new(ferrocoll::default_components().mcs))
}

/// The memory type of `addr`, as the process's memory components see it.
pub(crate) fn resolve(addr: *const u8) -> MemType {
    mcs().resolve(addr)
}

/// The host memory component.
pub(crate) fn host_mc() -> Result<&'static Arc<dyn Mc>> {
    mcs().get(MemType::Host)
}

/// The component for `mem_type`: managed memory has its own (the CUDA
/// component's twin, allocating with `cuMemAllocManaged`), so that
/// `ucc_mc_alloc(UCC_MEMORY_TYPE_CUDA_MANAGED)` hands out memory the host
/// may touch, as UCC's does.
fn mc_for(mem_type: u32, field: &str) -> Result<&'static Arc<dyn Mc>> {
    let mt = match types::mem_type(mem_type, field)? {
        MemType::Unknown => return Err(Error::invalid_param(format!("{field} is UCC_MEMORY_TYPE_UNKNOWN"))),
        m => m,
    };
    mcs().get(mt).map_err(|e| Error::not_found(e.context().to_string()))
}

/// `ucc_mc_buffer_header_t` with what frees it behind the public part.
#[repr(C)]
pub struct McBuffer {
    /// `ucc_memory_type_t`.
    pub mt: u32,
    /// Whether it came from a pool (always 1: ferrocoll's scratch is pooled).
    pub from_pool: c_int,
    /// The memory.
    pub addr: *mut c_void,
    magic: AtomicU64,
    scratch: Option<Scratch>,
}

const BUFFER_LIVE: u64 = 0xfe77_0c0c_0000_00b0;

/// A freed header, kept in the handle quarantine.
struct Freed(#[allow(dead_code)] Box<McBuffer>);

// SAFETY: the header's address field is never dereferenced again; the
// header is only kept so that its (atomic) word can be read.
unsafe impl Send for Freed {}
// SAFETY: as above.
unsafe impl Sync for Freed {}

const _: () = {
    assert!(std::mem::offset_of!(McBuffer, from_pool) == 4);
    assert!(std::mem::offset_of!(McBuffer, addr) == 8);
};

/// `ucc_mc_available`: `UCC_OK`, or `UCC_ERR_NOT_FOUND` when this build or
/// machine has no component for the type.
#[unsafe(no_mangle)]
pub extern "C" fn ucc_mc_available(mem_type: u32) -> UccStatus {
    // Through `ffi`, which logs the absence of a component at debug level only.
    ffi("ucc_mc_available", || mc_for(mem_type, "mem_type").map(|_| UCC_OK))
}

/// `ucc_mc_alloc`: `len` bytes of `mem_type` memory (contents undefined).
///
/// # Safety
/// `h_ptr` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_mc_alloc(h_ptr: *mut *mut McBuffer, len: usize, mem_type: u32) -> UccStatus {
    ffi("ucc_mc_alloc", || {
        non_null(h_ptr, "h_ptr")?;
        let mc = mc_for(mem_type, "mem_type")?;
        // One byte for zero-length requests: the caller still gets a distinct address.
        let scratch = mc.alloc(len.max(1))?;
        let b = Box::new(McBuffer {
            mt: mem_type,
            from_pool: 1,
            addr: scratch.mem().addr().cast(),
            magic: AtomicU64::new(BUFFER_LIVE),
            scratch: Some(scratch),
        });
        // SAFETY: checked non-null.
        unsafe { put(h_ptr, Box::into_raw(b)) };
        Ok(UCC_OK)
    })
}

/// `ucc_mc_free`.
///
/// # Safety
/// `h_ptr` is a header from `ucc_mc_alloc` (freed once).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_mc_free(h_ptr: *mut McBuffer) -> UccStatus {
    ffi("ucc_mc_free", || {
        non_null(h_ptr, "h_ptr")?;
        // SAFETY: the caller passes a header from ucc_mc_alloc; its word is
        // checked before the box is taken back.
        let word = unsafe { &(*h_ptr).magic };
        if word.compare_exchange(BUFFER_LIVE, 0, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return Err(Error::invalid_param(format!("h_ptr = {h_ptr:p} is not a live buffer from ucc_mc_alloc")));
        }
        // SAFETY: made by Box::into_raw in ucc_mc_alloc, and its word was live (so not freed yet).
        let mut b = unsafe { Box::from_raw(h_ptr) };
        // The memory goes back to its pool now; the header is kept a while
        // so that a second free reads a dead word rather than freed memory.
        drop(b.scratch.take());
        crate::handle::quarantine(Arc::new(Freed(b)));
        Ok(UCC_OK)
    })
}

/// `len` bytes at `p` of `mem_type` memory.
///
/// # Safety
/// `p` is valid for `len` bytes of that memory, and nothing else uses it meanwhile.
unsafe fn memref(p: *mut c_void, len: usize, mem_type: u32, field: &str) -> Result<MemRef> {
    if p.is_null() && len > 0 {
        return Err(crate::guard::null(field));
    }
    let mt = types::mem_type(mem_type, format_args!("{field}'s memory type"))?;
    // SAFETY: forwarded from the caller.
    Ok(unsafe { MemRef::new(p.cast(), len, mt) })
}

/// `ucc_mc_memcpy`: through the non-host side's component, as UCC does.
///
/// # Safety
/// `dst` and `src` are valid for `len` bytes of their memory types.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_mc_memcpy(
    dst: *mut c_void,
    src: *const c_void,
    len: usize,
    dst_mem: u32,
    src_mem: u32,
) -> UccStatus {
    ffi("ucc_mc_memcpy", || {
        let via = if dst_mem == 0 { src_mem } else { dst_mem };
        let mc = mc_for(via, "memory type")?;
        // SAFETY: the caller's buffers.
        let (d, s) = unsafe { (memref(dst, len, dst_mem, "dst")?, memref(src.cast_mut(), len, src_mem, "src")?) };
        mc.copy(d, s)?;
        Ok(UCC_OK)
    })
}

/// Bytes of the host pattern `ucc_mc_memset` copies to device memory at a time.
const MEMSET_PIECE: usize = 1 << 20;

/// `ucc_mc_memset`: host memory directly; device memory by a copy from a host pattern.
///
/// # Safety
/// `ptr` is valid for `size` bytes of `mem_type` memory.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_mc_memset(ptr: *mut c_void, value: c_int, size: usize, mem_type: u32) -> UccStatus {
    ffi("ucc_mc_memset", || {
        let mc = mc_for(mem_type, "mem_type")?;
        // SAFETY: the caller's buffer.
        let dst = unsafe { memref(ptr, size, mem_type, "ptr") }?;
        // memset's conversion: the value's low byte.
        let byte = value as u8;
        if mc.mem_type() == MemType::Host {
            // SAFETY: host memory of `size` bytes, the caller's to write.
            unsafe { std::ptr::write_bytes(dst.addr(), byte, size) };
        } else {
            // Device memory is written from a host pattern, a piece at a
            // time: a pattern as large as the buffer would double a large
            // memset's footprint in host memory.
            let pattern = vec![byte; size.min(MEMSET_PIECE)];
            let mut at = 0;
            while at < size {
                let n = (size - at).min(pattern.len());
                // SAFETY: the Vec outlives the copy, which finishes before returning.
                let src = unsafe { MemRef::from_slice(&pattern[..n]) };
                mc.copy(dst.range(at, n)?, src)?;
                at += n;
            }
        }
        Ok(UCC_OK)
    })
}

/// `ucc_str_to_memunits`: `"4k"`, `"1M"`, `"inf"` (`SIZE_MAX`) or `"auto"`
/// (`SIZE_MAX - 1`, UCS's value) into the `size_t` at `dest`.
///
/// # Safety
/// `buf` is a C string; `dest` points to a writable `size_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_str_to_memunits(buf: *const c_char, dest: *mut c_void) -> UccStatus {
    ffi("ucc_str_to_memunits", || {
        non_null(dest, "dest")?;
        // SAFETY: the caller's C string.
        let s = unsafe { req_str(buf, "buf") }?;
        let v = if s.trim().eq_ignore_ascii_case("auto") {
            usize::MAX - 1
        } else {
            let n = parse_size(s)?;
            if n == u64::MAX {
                usize::MAX
            } else {
                usize::try_from(n).map_err(|_| Error::invalid_param(format!("{s:?} does not fit size_t")))?
            }
        };
        // SAFETY: checked non-null; the caller promises a size_t.
        unsafe { put(dest.cast::<usize>(), v) };
        Ok(UCC_OK)
    })
}

/// `ucc_dt_create_generic`: user-defined datatypes are not supported.
///
/// # Safety
/// Any arguments: none is dereferenced.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_dt_create_generic(_ops: *const c_void, _context: *mut c_void, _dt: *mut u64) -> UccStatus {
    ffi("ucc_dt_create_generic", || Err(Error::not_supported("ferrocoll has no user-defined datatypes")))
}

/// `ucc_dt_destroy`: nothing to release (no generic datatype is ever made).
#[unsafe(no_mangle)]
pub extern "C" fn ucc_dt_destroy(_datatype: u64) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_match_ferrocolls_datatypes() {
        for (i, d) in ferrocoll::DataType::ALL.iter().take(types::DT_PREDEFINED).enumerate() {
            assert_eq!(ucc_dt_predefined_sizes[i], d.size(), "{d}");
        }
        assert_eq!(std::mem::size_of_val(&ucc_dt_predefined_sizes), 18 * 8);
        assert_eq!(std::mem::size_of_val(&ucc_memory_type_names), 8 * 8);
    }

    #[test]
    fn host_buffers() {
        let mut h = std::ptr::null_mut();
        // SAFETY: a writable out-pointer; the buffer is used within its 64 bytes and freed once.
        unsafe {
            assert_eq!(ucc_mc_alloc(&mut h, 64, 0), UCC_OK);
            assert_eq!(ucc_mc_memset((*h).addr, 0x5a, 64, 0), UCC_OK);
            let mut out = [0u8; 64];
            assert_eq!(ucc_mc_memcpy(out.as_mut_ptr().cast(), (*h).addr, 64, 0, 0), UCC_OK);
            assert!(out.iter().all(|&b| b == 0x5a));
            assert_eq!(ucc_mc_free(h), UCC_OK);
        }
        assert_eq!(ucc_mc_available(0), UCC_OK);
        assert_eq!(ucc_mc_available(9), UCC_ERR_INVALID_PARAM);
    }

    #[test]
    fn memunits() {
        let mut v = 0usize;
        for (s, want) in [(c"4k", 4096), (c"1M", 1 << 20), (c"inf", usize::MAX), (c"auto", usize::MAX - 1), (c"17", 17)]
        {
            // SAFETY: a C string and a size_t.
            assert_eq!(unsafe { ucc_str_to_memunits(s.as_ptr(), (&raw mut v).cast()) }, UCC_OK);
            assert_eq!(v, want, "{s:?}");
        }
        // SAFETY: as above.
        assert_eq!(unsafe { ucc_str_to_memunits(c"12q".as_ptr(), (&raw mut v).cast()) }, UCC_ERR_INVALID_PARAM);
    }
}
