//! Copies between host, device and managed memory, in any direction.
//!
//! Unified addressing lets one `cuMemcpyAsync` serve every direction (the
//! driver sees from the addresses where each side lives), and lets it run in
//! any context, so the calling thread's current device is used. The copy
//! goes on the per-thread default stream, which threads do not share, and is
//! waited for before returning: callers see a finished copy, as with the
//! host component.

use ferrocoll_core::{Error, MemRef, MemType, Result};
use ferrocoll_cuda::{Stream, memory};

use super::device::Devices;

/// Whether the CUDA component can address memory of this type.
pub(crate) fn addressable(mt: MemType) -> bool {
    matches!(mt, MemType::Host | MemType::Cuda | MemType::CudaManaged)
}

/// Copy `src` to `dst` (equal lengths; overlapping ranges allowed).
pub(crate) fn copy(devices: &Devices, dst: MemRef, src: MemRef) -> Result<()> {
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
    let device = devices.current_device()?;
    let _bound = device.cuda.bind()?;
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
    let stream = Stream::per_thread()?;
    let n = dst.len();
    // SAFETY: by the MemRef contract both ranges are live allocations of n
    // bytes (dst writable) that only ferrocoll touches during the call, of a
    // memory type the driver addresses under unified addressing (checked by
    // the caller); they do not overlap (the caller stages overlapping
    // copies); the stream is synchronised below, before they are used again.
    unsafe { memory::copy_async(dst.addr() as u64, src.addr() as u64, n, &stream) }
        .map_err(|e| e.prefixed(format!("copy of {n} bytes from {} to {} memory", src.mem_type(), dst.mem_type())))?;
    stream.synchronize().map_err(|e| e.prefixed(format!("copy of {n} bytes")))
}
