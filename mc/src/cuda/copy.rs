//! Copies between host, device and managed memory, in any direction.
//!
//! Unified addressing lets one `cuMemcpyAsync` serve every direction (the
//! driver sees from the addresses where each side lives), and lets it run in
//! any context, so the calling thread's current device is used. The copy
//! goes on the per-thread default stream, which threads do not share, and is
//! waited for before returning: callers see a finished copy, as with the
//! host component.

use cudarc::driver::sys::{self, CUstream};
use ferrocoll_core::{Error, MemRef, MemType, Result};

use super::device::Driver;
use super::probe::check;

/// `CU_STREAM_PER_THREAD`: the calling thread's default stream of the current context.
pub(crate) fn per_thread_stream() -> CUstream {
    std::ptr::without_provenance_mut(0x2)
}

/// Whether the CUDA component can address memory of this type.
pub(crate) fn addressable(mt: MemType) -> bool {
    matches!(mt, MemType::Host | MemType::Cuda | MemType::CudaManaged)
}

/// Copy `src` to `dst` (equal lengths; overlapping ranges allowed).
pub(crate) fn copy(driver: &Driver, dst: MemRef, src: MemRef) -> Result<()> {
    for (what, m) in [("destination", &dst), ("source", &src)] {
        if !addressable(m.mem_type()) {
            return Err(Error::invalid_param(format!(
                "CUDA memory component given {} memory as copy {what}",
                m.mem_type()
            )));
        }
    }
    if dst.len() != src.len() {
        return Err(Error::invalid_param(format!(
            "copy of {} source bytes into a {}-byte destination",
            src.len(),
            dst.len()
        )));
    }
    if dst.is_empty() || dst.addr() == src.addr() {
        return Ok(());
    }
    let device = driver.current_device()?;
    let _bound = device.bind()?;
    if dst.overlaps(&src) {
        // cuMemcpy does not promise memmove semantics: go through scratch.
        let tmp = device.pool.take(src.len())?;
        let result = raw_copy(tmp, src).and_then(|()| raw_copy(dst, tmp));
        ferrocoll_core::backend::ScratchOwner::release(&*device.pool, tmp);
        return result;
    }
    raw_copy(dst, src)
}

/// One copy on the per-thread stream, waited for. A context must be current.
fn raw_copy(dst: MemRef, src: MemRef) -> Result<()> {
    let stream = per_thread_stream();
    let n = dst.len();
    // SAFETY: by the MemRef contract both ranges are live allocations of n
    // bytes (dst writable) that only ferrocoll touches during the call, of a
    // memory type the driver addresses under unified addressing (checked by
    // the caller); they do not overlap (the caller stages overlapping
    // copies); the caller bound a context, whose per-thread stream this is.
    check("cuMemcpyAsync", unsafe {
        sys::cuMemcpyAsync(dst.addr() as sys::CUdeviceptr, src.addr() as sys::CUdeviceptr, n, stream)
    })
    .map_err(|e| e.prefixed(format!("copy of {n} bytes from {} to {} memory", src.mem_type(), dst.mem_type())))?;
    // SAFETY: the per-thread stream of the current context always exists.
    check("cuStreamSynchronize", unsafe { sys::cuStreamSynchronize(stream) })
        .map_err(|e| e.prefixed(format!("copy of {n} bytes")))
}
