//! CUDA IPC: reading and writing another process's device memory on the
//! same node (`cuIpcGetMemHandle` / `cuIpcOpenMemHandle`).
//!
//! This is the foundation of a future TL/CUDA (collectives among the
//! processes of one node that copy straight between each other's device
//! buffers, UCC's `tl/cuda`); that TL is **not built yet**, and nothing in
//! ferrocoll calls this module outside its tests.
//!
//! ## The pieces
//! - [`export`]: what a peer needs to map the allocation holding an address
//!   ([`Exported`]): its 64-byte [`IpcHandle`], the allocation's base and
//!   size (`cuMemGetAddressRange`), the address's offset in it, and its
//!   buffer id (`CU_POINTER_ATTRIBUTE_BUFFER_ID`). [`Exported::to_bytes`]
//!   is a fixed 96-byte form for an out-of-band exchange.
//! - [`OpenedMem`]: one mapping of a peer's allocation
//!   (`cuIpcOpenMemHandle_v2` with `CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS`),
//!   closed on drop (`cuIpcCloseMemHandle`); [`OpenedMem::range`] hands out
//!   addresses in it only after checked arithmetic against its size.
//! - [`IpcCache`]: the mappings a collective reuses, keyed by
//!   (peer rank, buffer id, handle), bounded, stale entries replaced.
//!
//! ## Why the buffer id
//! The allocator hands the same address out again after a free, and the
//! handle of the new allocation may look like the old one's; a mapping of
//! the old one would then be silently read as the new buffer. The driver
//! gives every allocation a buffer id unique within its process, so
//! (rank, buffer id) names one allocation for its whole life: an entry of
//! the cache with the same (rank, base) but another buffer id is stale and
//! is closed before the new one is opened.
//!
//! ## Errors
//! The IPC entry points are not part of the driver probe (a driver without
//! them still serves the rest of ferrocoll): they are looked up on the
//! first use of this module, and a missing one is `NotSupported` naming
//! it. Every failure names the call and the address. The driver refuses to
//! open a handle in the process that exported it (`CUDA_ERROR_INVALID_CONTEXT`,
//! hence `InvalidParam`); that too is an error, never a panic.
//!
//! ## Limits
//! - Never run on a GPU yet: tested on the fake driver of the tests, whose
//!   IPC maps the exporter's memory through `/proc/<pid>/fd` (see
//!   `tests/fake_cuda/memory.c`). `tests/tests/gpu_ipc.rs` is collected by
//!   `scripts/gpu-check.sh` for the next GPU session.
//! - Only `cuMemAlloc` memory (the legacy IPC); memory of the virtual
//!   memory management API (`cuMemCreate` with shareable handles) is not
//!   handled.
//! - The cache does not know about stream work: a mapping evicted or
//!   replaced while a stream still uses it is closed under that work. Its
//!   user keeps the number of buffers in flight below the capacity.

use std::ffi::c_void;

use ferrocoll_core::{Error, Result};

use crate::context::Context;
use crate::error::check;
use crate::kept::Kept;
use crate::probe::loaded;
use crate::sys::{driver as sys, load_group};

mod cache;

pub use cache::{CacheStats, DEFAULT_CAPACITY, IpcCache};

/// The driver entry points this module calls beyond the probe's
/// ([`crate::probe::SYMBOLS`]); checked on first use.
pub const SYMBOLS: &[&str] =
    &["cuMemGetAddressRange_v2", "cuIpcGetMemHandle", "cuIpcOpenMemHandle_v2", "cuIpcCloseMemHandle"];

/// `Ok` once the driver passed the probe and exports [`SYMBOLS`].
fn ipc_loaded() -> Result<()> {
    static IPC: Kept<()> = Kept::new();
    loaded()?;
    load_group(&IPC, "CUDA IPC", SYMBOLS)
}

/// A `CUipcMemHandle`: 64 opaque bytes that let another process of the
/// same node map one device allocation.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpcHandle([u8; IpcHandle::LEN]);

impl IpcHandle {
    /// The size of a handle in bytes.
    pub const LEN: usize = 64;

    /// The bytes to send to a peer.
    pub fn to_bytes(&self) -> [u8; IpcHandle::LEN] {
        self.0
    }

    /// A handle from a peer's bytes; `InvalidParam` unless there are exactly [`IpcHandle::LEN`].
    ///
    /// ```
    /// use ferrocoll_cuda::ipc::IpcHandle;
    /// let h = IpcHandle::from_bytes(&[7u8; 64]).unwrap();
    /// assert_eq!(IpcHandle::from_bytes(&h.to_bytes()).unwrap(), h);
    /// assert!(IpcHandle::from_bytes(&[0u8; 63]).is_err());
    /// ```
    pub fn from_bytes(bytes: &[u8]) -> Result<IpcHandle> {
        let raw: [u8; IpcHandle::LEN] = bytes.try_into().map_err(|_| {
            Error::invalid_param(format!(
                "a CUDA IPC handle (CUipcMemHandle) is {} bytes, not {}",
                IpcHandle::LEN,
                bytes.len()
            ))
        })?;
        Ok(IpcHandle(raw))
    }

    fn from_raw(raw: &sys::CUipcMemHandle) -> IpcHandle {
        // `c_char` is i8 on x86_64 and u8 on aarch64: the cast is a no-op there.
        #[allow(clippy::unnecessary_cast)]
        IpcHandle(raw.reserved.map(|c| c as u8))
    }

    fn to_raw(self) -> sys::CUipcMemHandle {
        sys::CUipcMemHandle { reserved: self.0.map(|b| b as std::ffi::c_char) }
    }
}

impl std::fmt::Debug for IpcHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "IpcHandle(")?;
        for b in &self.0[..16] {
            write!(f, "{b:02x}")?;
        }
        write!(f, "..)")
    }
}

/// What a peer needs to map the allocation holding an exported address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Exported {
    /// The allocation's handle.
    pub handle: IpcHandle,
    /// The allocation's base address in the exporting process.
    pub base: u64,
    /// The allocation's size in bytes.
    pub size: u64,
    /// Where the exported address lies in the allocation.
    pub offset: u64,
    /// The allocation's buffer id in the exporting process: another one
    /// after the address was freed and allocated again.
    pub buffer_id: u64,
}

impl Exported {
    /// The size of [`Exported::to_bytes`].
    pub const LEN: usize = IpcHandle::LEN + 4 * 8;

    /// A fixed little-endian form: the handle, then base, size, offset and
    /// buffer id as 8 bytes each.
    pub fn to_bytes(&self) -> [u8; Exported::LEN] {
        let mut out = [0u8; Exported::LEN];
        out[..IpcHandle::LEN].copy_from_slice(&self.handle.0);
        for (i, v) in [self.base, self.size, self.offset, self.buffer_id].into_iter().enumerate() {
            let at = IpcHandle::LEN + 8 * i;
            out[at..at + 8].copy_from_slice(&v.to_le_bytes());
        }
        out
    }

    /// The inverse of [`Exported::to_bytes`]; `InvalidParam` for a wrong
    /// length or an offset outside the size.
    pub fn from_bytes(bytes: &[u8]) -> Result<Exported> {
        if bytes.len() != Exported::LEN {
            return Err(Error::invalid_param(format!(
                "an exported CUDA IPC buffer is {} bytes, not {}",
                Exported::LEN,
                bytes.len()
            )));
        }
        let word = |i: usize| {
            let at = IpcHandle::LEN + 8 * i;
            u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
        };
        let e = Exported {
            handle: IpcHandle::from_bytes(&bytes[..IpcHandle::LEN])?,
            base: word(0),
            size: word(1),
            offset: word(2),
            buffer_id: word(3),
        };
        if e.offset >= e.size {
            return Err(Error::invalid_param(format!(
                "an exported CUDA IPC buffer at offset {} of an allocation of {} bytes",
                e.offset, e.size
            )));
        }
        Ok(e)
    }
}

/// Describe the allocation holding `ptr` for a peer (see [`Exported`]):
/// `cuMemGetAddressRange`, `cuIpcGetMemHandle` on its base and its buffer
/// id, in the current context. `ptr` must lie in `cuMemAlloc` memory;
/// otherwise the driver's refusal, naming the call and `ptr`.
pub fn export(ptr: u64) -> Result<Exported> {
    ipc_loaded().map_err(|e| e.prefixed(format_args!("CUDA IPC export of {ptr:#x}")))?;
    let (mut base, mut size): (sys::CUdeviceptr, usize) = (0, 0);
    // SAFETY: the driver exports the call (ipc_loaded); it only looks the
    // address up and writes two values we own.
    check("cuMemGetAddressRange", unsafe { sys::cuMemGetAddressRange_v2(&mut base, &mut size, ptr) })
        .map_err(|e| e.prefixed(format_args!("CUDA IPC export of {ptr:#x}")))?;
    let mut raw = sys::CUipcMemHandle { reserved: [0; IpcHandle::LEN] };
    // SAFETY: as above; base is the start of a live allocation (the driver
    // just said so) and the call writes one 64-byte handle we own.
    check("cuIpcGetMemHandle", unsafe { sys::cuIpcGetMemHandle(&mut raw, base) })
        .map_err(|e| e.prefixed(format_args!("CUDA IPC export of {ptr:#x} (allocation {base:#x})")))?;
    let buffer_id = buffer_id(base).map_err(|e| e.prefixed(format_args!("CUDA IPC export of {ptr:#x}")))?;
    let size = size as u64;
    let offset = ptr.checked_sub(base).filter(|&o| o < size).ok_or_else(|| {
        Error::internal(format!(
            "CUDA IPC export of {ptr:#x}: cuMemGetAddressRange answered {base:#x} + {size}, which does not hold it"
        ))
    })?;
    Ok(Exported { handle: IpcHandle::from_raw(&raw), base, size, offset, buffer_id })
}

/// The buffer id of the allocation holding `addr` (`CU_POINTER_ATTRIBUTE_BUFFER_ID`).
pub fn buffer_id(addr: u64) -> Result<u64> {
    loaded()?;
    let mut id: u64 = 0;
    let mut attr = [sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_BUFFER_ID];
    let mut data: [*mut c_void; 1] = [(&raw mut id).cast()];
    // SAFETY: the driver passed the probe; one attribute, whose value is an
    // unsigned 64-bit integer written to `id`, ours. The address is only looked up.
    check("cuPointerGetAttributes(BUFFER_ID)", unsafe {
        sys::cuPointerGetAttributes(1, attr.as_mut_ptr(), data.as_mut_ptr(), addr)
    })
    .map_err(|e| e.prefixed(format_args!("buffer id of {addr:#x}")))?;
    if id == 0 {
        return Err(Error::invalid_param(format!(
            "{addr:#x} is not in memory the CUDA driver allocated (buffer id 0)"
        )));
    }
    Ok(id)
}

/// `[offset, offset + len)` of a mapping of `size` bytes, as the offset, or
/// `InvalidParam` naming the range when it does not fit (or overflows).
pub fn checked_range(size: u64, offset: u64, len: u64) -> Result<u64> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(offset),
        _ => Err(Error::invalid_param(format!(
            "bytes [{offset}, {offset} + {len}) are outside a CUDA IPC mapping of {size} bytes"
        ))),
    }
}

/// One mapping of a peer's allocation in this process, closed on drop.
#[derive(Debug)]
pub struct OpenedMem {
    ptr: u64,
    size: u64,
    ctx: Context,
    peer: Exported,
}

// SAFETY: OpenedMem holds a device address and a context handle, plain
// values that the thread-safe driver API accepts from any thread; it never
// dereferences them on the host. Closing (drop) binds the context it was
// opened in, so whichever thread drops it closes it correctly, and it is
// dropped once (ownership).
unsafe impl Send for OpenedMem {}
// SAFETY: every `&self` method only reads the plain fields above; what is
// done with the addresses handed out (copies, kernels) is the caller's
// `unsafe` business, as for any device address.
unsafe impl Sync for OpenedMem {}

impl OpenedMem {
    /// Map the allocation `peer` describes into the current context
    /// (`cuIpcOpenMemHandle_v2` with `CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS`).
    /// Fails (never panics) without a current context, when the driver
    /// lacks the IPC entry points, and when it refuses — in the exporting
    /// process among others.
    pub fn open(peer: &Exported) -> Result<OpenedMem> {
        let what = || format!("CUDA IPC open of the peer's allocation {:#x} ({} bytes)", peer.base, peer.size);
        ipc_loaded().map_err(|e| e.prefixed(what()))?;
        let ctx = Context::current()
            .map_err(|e| e.prefixed(what()))?
            .ok_or_else(|| Error::invalid_param(format!("{}: no current CUDA context", what())))?;
        let mut ptr: sys::CUdeviceptr = 0;
        let lazy = sys::CUipcMem_flags::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS as std::ffi::c_uint;
        // SAFETY: the driver exports the call (ipc_loaded); the handle is
        // passed by value (any 64 bytes: the driver validates them) and the
        // call writes one address we own.
        check("cuIpcOpenMemHandle", unsafe { sys::cuIpcOpenMemHandle_v2(&mut ptr, peer.handle.to_raw(), lazy) })
            .map_err(|e| e.prefixed(what()))?;
        Ok(OpenedMem { ptr, size: peer.size, ctx, peer: *peer })
    }

    /// The mapping's device address in this process (the peer's base).
    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    /// The mapping's size in bytes (the peer's allocation).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// What the peer exported.
    pub fn peer(&self) -> &Exported {
        &self.peer
    }

    /// The address, in this process, of `len` bytes at `offset` of the
    /// mapping; `InvalidParam` when they do not lie inside it.
    pub fn range(&self, offset: u64, len: u64) -> Result<u64> {
        Ok(self.ptr + checked_range(self.size, offset, len)?)
    }

    /// The address, in this process, of `len` bytes at the address the peer
    /// exported; `InvalidParam` when they run past the allocation.
    pub fn exported_range(&self, len: u64) -> Result<u64> {
        self.range(self.peer.offset, len)
    }
}

impl Drop for OpenedMem {
    fn drop(&mut self) {
        let closed = self.ctx.bind().and_then(|_bound| {
            // SAFETY: ptr came from cuIpcOpenMemHandle in this context
            // (bound for the call) and is closed once, here; the holder's
            // work on it is finished (an owner's promise, see the module's limits).
            check("cuIpcCloseMemHandle", unsafe { sys::cuIpcCloseMemHandle(self.ptr) })
        });
        if let Err(e) = closed {
            ferrocoll_core::log_warn!("CUDA IPC close of {:#x} (peer allocation {:#x}): {e}", self.ptr, self.peer.base);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrocoll_core::Status;

    fn exported() -> Exported {
        let mut h = [0u8; 64];
        for (i, b) in h.iter_mut().enumerate() {
            *b = (i * 7 + 3) as u8;
        }
        Exported { handle: IpcHandle(h), base: 0x7f00_0000_0000, size: 4096, offset: 256, buffer_id: 42 }
    }

    #[test]
    fn handle_bytes_round_trip_and_wrong_lengths_are_refused() {
        let e = exported();
        assert_eq!(IpcHandle::from_bytes(&e.handle.to_bytes()).unwrap(), e.handle);
        assert_eq!(IpcHandle::from_raw(&e.handle.to_raw()), e.handle);
        for len in [0usize, 1, 63, 65, 128] {
            let err = IpcHandle::from_bytes(&vec![0u8; len]).unwrap_err();
            assert_eq!(err.status(), Status::InvalidParam);
            assert!(err.context().contains("CUipcMemHandle") && err.context().contains(&format!("not {len}")), "{err}");
        }
        assert!(format!("{:?}", e.handle).starts_with("IpcHandle(030a11"), "{:?}", e.handle);
    }

    #[test]
    fn exported_bytes_round_trip_and_are_checked() {
        let e = exported();
        assert_eq!(Exported::from_bytes(&e.to_bytes()).unwrap(), e);
        assert_eq!(Exported::from_bytes(&e.to_bytes()[1..]).unwrap_err().status(), Status::InvalidParam);
        let bad = Exported { offset: 4096, ..e };
        let err = Exported::from_bytes(&bad.to_bytes()).unwrap_err();
        assert!(err.context().contains("offset 4096"), "{err}");
    }

    #[test]
    fn ranges_are_checked_against_the_mapping() {
        assert_eq!(checked_range(4096, 0, 4096).unwrap(), 0);
        assert_eq!(checked_range(4096, 4000, 96).unwrap(), 4000);
        assert_eq!(checked_range(4096, 4096, 0).unwrap(), 4096);
        for (offset, len) in [(0, 4097), (4000, 97), (4097, 0), (u64::MAX, 2), (1, u64::MAX)] {
            let err = checked_range(4096, offset, len).unwrap_err();
            assert_eq!(err.status(), Status::InvalidParam);
            assert!(err.context().contains(&format!("[{offset}, {offset} + {len})")), "{err}");
        }
    }

    /// Every `sys::cu...(` call of this module is in the probe's list or in
    /// this module's own.
    #[test]
    fn every_driver_call_is_listed() {
        let src = include_str!("ipc.rs");
        let listed: Vec<&str> = SYMBOLS.iter().copied().chain(["cuPointerGetAttributes"]).collect();
        crate::sys::assert_calls_listed(&[src], "cu", &listed);
    }
}
