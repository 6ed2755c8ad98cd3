//! # ferrocoll-cuda
//!
//! ferrocoll's one layer over the CUDA driver API and NVRTC: every CUDA
//! call of ferrocoll goes through this crate, and it is the only one that
//! depends on `cudarc`. The memory component (`ferrocoll-mc`), the stream
//! execution engine (`ferrocoll-ee`) and the kernels (`ferrocoll-kernels`)
//! call its safe wrappers and keep their own logic; transports that need
//! the driver (CUDA IPC, NCCL) are meant to add their calls here.
//!
//! ## Layers
//! 1. **Raw** ([`sys`]): cudarc's `sys` bindings, loaded at run time with
//!    `dlopen`, so building needs no CUDA toolkit. cudarc *panics* when a
//!    library or a symbol is missing; nothing here calls into a library
//!    before its probe said it is complete.
//! 2. **Checked**: the probes and the one error table ([`error`]). Every
//!    driver or NVRTC result becomes an [`Error`](ferrocoll_core::Error)
//!    whose status is chosen once (out of memory → `NoMemory`; no device,
//!    driver mismatch, not supported, stub library, unsupported PTX, no
//!    binary for the GPU → `NotSupported`; invalid value, handle, context
//!    or device → `InvalidParam`; the rest → `NoMessage`, UCC's "unhandled
//!    error", see [`error`] for why), and whose message names the call, the
//!    code and the library's own text.
//! 3. **Safe types**: the [`Driver`] and its [`Device`]s with their primary
//!    contexts, [`Context`] and the [`Bound`] guard, [`Stream`], [`Event`]
//!    and [`EventPool`], pinned memory ([`HostAlloc`], [`RegisteredHost`]),
//!    device and managed memory and copies ([`memory`]), the pointer query
//!    ([`pointer_attributes`]), [`Module`] and [`Function`] (kernel
//!    launch), NVRTC compilation to [`Ptx`] or a CUBIN ([`nvrtc`]), and
//!    CUDA IPC between processes of one node ([`ipc`]: export, open, the
//!    cache of opened mappings; for a TL/CUDA not built yet).
//!    `unsafe` remains only where a raw address's validity is the caller's
//!    promise (freeing, copying, launching, stream waits, a user's stream).
//!
//! ## The probes
//! [`driver()`]: `libcuda.so.1` loads, it has every entry point ferrocoll
//! calls ([`probe::SYMBOLS`]), `cuInit` succeeds, at least one device.
//! [`nvrtc::version`]: `libnvrtc.so.13` loads, it has every entry point
//! ferrocoll calls, `nvrtcVersion` answers. A failure is
//! `Error(NotSupported)` naming the library, the symbol or the call —
//! never a panic — and is kept for the process. Every function of this
//! crate that is handed no handle checks the driver probe first, and every
//! handle comes from such a function, so no path reaches cudarc's panic.
//!
//! ## Process-wide state, and why
//! The driver, primary contexts, device memory and loaded modules belong to
//! the process, not to a ferrocoll object: the probe result and one
//! [`Device`] per ordinal (opened on first use, its primary context
//! retained and never released, as the CUDA runtime does) are kept in
//! statics, so every component and every `Lib` share them. [`Kept`] and
//! [`PerDevice`] are the two shapes of that state, for other components'
//! own per-process or per-device data.
//!
//! ## Limits
//! - **No GPU execution is verified on the machine this crate was written
//!   on**: there is no GPU and no driver there. The probes' failure paths,
//!   the error table and NVRTC compilation are tested; every driver call
//!   runs in the GPU tests, on a GPU (`scripts/gpu-check.sh`) or, without
//!   one, on the fake driver of the tests (`tests/fake_cuda/`), which checks
//!   the order, pairing and error handling of the calls and the results of
//!   the kernels compiled for the CPU — not the device itself.
//! - Linux names of the libraries; CUDA 12 or newer (the stream memory
//!   operations `_v2`); one-dimensional launches without dynamic shared memory.
//! - Contexts and events are plain handles: their holders keep them alive
//!   (see [`Context`]); a destroyed one is the driver's error, not ours.

#![deny(unsafe_op_in_unsafe_fn)]

mod context;
mod device;
pub mod error;
mod event;
mod host;
pub mod ipc;
mod kept;
pub mod memory;
mod module;
pub mod nccl;
pub mod nvrtc;
mod pointer;
pub mod probe;
mod stream;
pub mod sys;

pub use context::{Bound, Context, current_device};
pub use device::{Attribute, Device, DeviceId, PrimaryContext};
pub use event::{Event, EventPool, relaxed_capture};
pub use host::{HostAlloc, RegisteredHost};
pub use kept::{Kept, PerDevice};
pub use module::{Function, Module};
pub use nvrtc::Ptx;
pub use pointer::{MemoryType, PointerAttributes, PointerQueryFailure, pointer_attributes};
pub use probe::{Driver, driver};
pub use stream::{Capture, Stream, WaitCond};
