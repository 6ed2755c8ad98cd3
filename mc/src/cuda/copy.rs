//! Copies between host, device and managed memory, in any direction.
//!
//! Unified addressing lets one `cuMemcpyAsync` serve every direction (the
//! driver sees from the addresses where each side lives), and lets it run in
//! any context, so the calling thread's current device is used. The copy
//! goes on the per-thread default stream, which threads do not share.
//! [`copy`] waits for it before returning, as the host component does;
//! [`copy_start`] records an event after it and returns, and the caller
//! polls the event — so that the thread progressing collectives never
//! blocks on the device (a copy stuck behind other stream work then ends in
//! the collective's timeout, which names it, instead of a silent hang).

use ferrocoll_core::backend::{CopyInFlight, PendingCopy};
use ferrocoll_core::{Error, MemRef, MemType, Result};
use std::sync::Arc;

use ferrocoll_cuda::{Event, EventPool, PerDevice, Stream, memory};

use super::device::{Device, Devices};

/// Whether the CUDA component can address memory of this type.
pub(crate) fn addressable(mt: MemType) -> bool {
    matches!(mt, MemType::Host | MemType::Cuda | MemType::CudaManaged)
}

/// Whether a copy of `src` to `dst` is well formed and has anything to do.
fn needs_copy(dst: &MemRef, src: &MemRef) -> Result<bool> {
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
    Ok(!dst.is_empty() && dst.addr() != src.addr())
}

/// Copy `src` to `dst` (equal lengths; overlapping ranges allowed).
pub(crate) fn copy(devices: &Devices, dst: MemRef, src: MemRef) -> Result<()> {
    if !needs_copy(&dst, &src)? {
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

/// Start copying `src` to `dst` (equal lengths); overlapping ranges are
/// copied at once through scratch, as [`copy`] does.
pub(crate) fn copy_start(
    devices: &'static Devices,
    events: &PerDevice<Arc<EventPool>>,
    dst: MemRef,
    src: MemRef,
) -> Result<PendingCopy> {
    if !needs_copy(&dst, &src)? {
        return Ok(PendingCopy::done());
    }
    if dst.overlaps(&src) {
        copy(devices, dst, src)?;
        return Ok(PendingCopy::done());
    }
    let device = devices.current_device()?;
    let _bound = device.cuda.bind()?;
    let events = events.get_or_init(device.cuda.ordinal(), || Ok(Arc::new(EventPool::new(device.cuda.context()))))?;
    let stream = Stream::per_thread()?;
    let event = events.take()?;
    if let Err(e) = enqueue_copy(dst, src, &stream) {
        events.put(event);
        return Err(e);
    }
    if let Err(e) = event.record(&stream) {
        events.put(event);
        // Nothing tracks the copy now: wait for it here, so that the caller
        // may free its memory once we return.
        let _ = stream.synchronize();
        return Err(e.prefixed(format!("copy of {} bytes", dst.len())));
    }
    let events = events.clone();
    Ok(PendingCopy::in_flight(Box::new(StartedCopy { device, events, event: Some(event), bytes: dst.len() })))
}

/// A copy enqueued on a stream, and the event recorded after it.
struct StartedCopy {
    device: &'static Device,
    events: Arc<EventPool>,
    /// Given back to `events` on drop.
    event: Option<Event>,
    bytes: usize,
}

impl CopyInFlight for StartedCopy {
    fn is_done(&mut self) -> Result<bool> {
        let Some(event) = &self.event else { return Ok(true) };
        let _bound = self.device.cuda.bind()?;
        event.query().map_err(|e| e.prefixed(format!("copy of {} bytes", self.bytes)))
    }
}

impl Drop for StartedCopy {
    fn drop(&mut self) {
        if let Some(event) = self.event.take() {
            self.events.put(event);
        }
    }
}

/// One copy on the per-thread stream, waited for. A context must be current.
fn raw_copy(dst: MemRef, src: MemRef) -> Result<()> {
    let stream = Stream::per_thread()?;
    enqueue_copy(dst, src, &stream)?;
    stream.synchronize().map_err(|e| e.prefixed(format!("copy of {} bytes", dst.len())))
}

/// Enqueue one copy on `stream`. A context must be current.
fn enqueue_copy(dst: MemRef, src: MemRef, stream: &Stream) -> Result<()> {
    let n = dst.len();
    // SAFETY: by the MemRef contract both ranges are live allocations of n
    // bytes (dst writable) that only ferrocoll touches during the call, of a
    // memory type the driver addresses under unified addressing (checked by
    // the caller); they do not overlap (the caller stages overlapping
    // copies); the caller keeps them alive until the stream has run the
    // copy (raw_copy synchronises; copy_start's PendingCopy waits on drop).
    unsafe { memory::copy_async(dst.addr() as u64, src.addr() as u64, n, stream) }
        .map_err(|e| e.prefixed(format!("copy of {n} bytes from {} to {} memory", src.mem_type(), dst.mem_type())))
}
