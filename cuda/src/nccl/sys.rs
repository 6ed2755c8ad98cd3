//! NCCL's C interface as ferrocoll calls it: the types of `nccl.h` that
//! cross the boundary, and the table of entry points looked up once in the
//! loaded library ([`Symbols`]), with the ones some versions lack as
//! `Option`s. Nothing here calls NCCL.
//!
//! Our own bindings rather than cudarc's: cudarc resolves each NCCL
//! function on its first call and panics where the library lacks it, and
//! its safe layer aborts communicators in `Drop`. Looking every symbol up at
//! load time turns a missing one into an error, or into a fallback.

use std::ffi::{c_char, c_int, c_void};

/// `ncclComm_t`.
pub type RawComm = *mut c_void;
/// `ncclResult_t`.
pub type NcclResult = c_int;
/// `cudaStream_t` (the same handle as the driver's `CUstream`).
pub type RawStream = *mut c_void;

/// `ncclSuccess`.
pub const SUCCESS: NcclResult = 0;
/// `ncclInProgress`: a non-blocking call has not finished yet.
pub const IN_PROGRESS: NcclResult = 7;

/// Bytes of `ncclUniqueId`.
pub const UNIQUE_ID_BYTES: usize = 128;

/// `ncclUniqueId`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RawUniqueId {
    /// The opaque bytes (rank 0's bootstrap address and a magic).
    pub internal: [c_char; UNIQUE_ID_BYTES],
}

/// `ncclConfig_t` as NCCL 2.14 defined it (`ncclConfig_v21400`): size,
/// magic, version, blocking. NCCL reads as many fields as the `version`
/// field says the caller knows, so advertising 2.14 with the 2.14 layout is
/// understood by every later version; the tail word is the C struct's
/// padding, initialised (it overlaps `cgaClusterSize` in later layouts, and
/// NCCL ignores it at this version).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ConfigV21400 {
    /// `sizeof` the structure.
    pub size: usize,
    /// `0xcafebeef`.
    pub magic: u32,
    /// `NCCL_VERSION(2, 14, 0)`.
    pub version: u32,
    /// 0: non-blocking communicator.
    pub blocking: c_int,
    /// Padding in the 2.14 layout.
    pub tail: c_int,
}

/// The magic of `NCCL_CONFIG_INITIALIZER`.
pub const CONFIG_MAGIC: u32 = 0xcafe_beef;
/// The config layout version ferrocoll passes (2.14.0).
pub const CONFIG_VERSION: u32 = 21400;

impl ConfigV21400 {
    /// A configuration asking for a non-blocking communicator.
    pub fn non_blocking() -> ConfigV21400 {
        ConfigV21400 {
            size: std::mem::size_of::<ConfigV21400>(),
            magic: CONFIG_MAGIC,
            version: CONFIG_VERSION,
            blocking: 0,
            tail: c_int::MIN,
        }
    }
}

type Res = NcclResult;
/// `ncclGetVersion`.
pub type GetVersionFn = unsafe extern "C" fn(*mut c_int) -> Res;
/// `ncclGetUniqueId`.
pub type GetUniqueIdFn = unsafe extern "C" fn(*mut RawUniqueId) -> Res;
/// `ncclCommInitRankConfig`.
pub type InitRankConfigFn = unsafe extern "C" fn(*mut RawComm, c_int, RawUniqueId, c_int, *mut ConfigV21400) -> Res;
/// `ncclCommGetAsyncError`.
pub type GetAsyncErrorFn = unsafe extern "C" fn(RawComm, *mut Res) -> Res;
/// `ncclCommFinalize`, `ncclCommDestroy`, `ncclCommAbort`.
pub type CommFn = unsafe extern "C" fn(RawComm) -> Res;
/// `ncclGetErrorString`.
pub type ErrorStringFn = unsafe extern "C" fn(Res) -> *const c_char;
/// `ncclGetLastError`.
pub type LastErrorFn = unsafe extern "C" fn(RawComm) -> *const c_char;
/// `ncclGroupStart`, `ncclGroupEnd`.
pub type GroupFn = unsafe extern "C" fn() -> Res;
/// `ncclAllReduce`, `ncclReduceScatter` (send, recv, count, datatype, op, comm, stream).
pub type ReduceAllFn = unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, c_int, RawComm, RawStream) -> Res;
/// `ncclReduce` (send, recv, count, datatype, op, root, comm, stream).
pub type ReduceFn =
    unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, c_int, c_int, RawComm, RawStream) -> Res;
/// `ncclBroadcast`, `ncclGather`, `ncclScatter` (send, recv, count, datatype, root, comm, stream).
pub type RootedFn = unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, c_int, RawComm, RawStream) -> Res;
/// `ncclAllGather`, `ncclAlltoAll` (send, recv, count, datatype, comm, stream).
pub type MoveFn = unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, RawComm, RawStream) -> Res;
/// `ncclSend` (buf, count, datatype, peer, comm, stream).
pub type SendFn = unsafe extern "C" fn(*const c_void, usize, c_int, c_int, RawComm, RawStream) -> Res;
/// `ncclRecv` (buf, count, datatype, peer, comm, stream).
pub type RecvFn = unsafe extern "C" fn(*mut c_void, usize, c_int, c_int, RawComm, RawStream) -> Res;

/// Every entry point ferrocoll calls, in the order of [`Symbols`]'s
/// fields: the required ones (a library without one is refused), then the
/// optional ones (each with the version that introduced it; below it, or
/// absent, ferrocoll uses grouped send/receive instead).
pub const REQUIRED: [&str; 17] = [
    "ncclGetVersion",
    "ncclGetUniqueId",
    "ncclCommInitRankConfig",
    "ncclCommGetAsyncError",
    "ncclCommFinalize",
    "ncclCommDestroy",
    "ncclCommAbort",
    "ncclGetErrorString",
    "ncclGroupStart",
    "ncclGroupEnd",
    "ncclAllReduce",
    "ncclReduce",
    "ncclBroadcast",
    "ncclAllGather",
    "ncclReduceScatter",
    "ncclSend",
    "ncclRecv",
];

/// Optional entry points and the NCCL version (code) that introduced each.
/// (`ncclGetLastError` only adds text to messages.)
pub const OPTIONAL: [(&str, u32); 4] =
    [("ncclGetLastError", 21300), ("ncclAlltoAll", 22800), ("ncclGather", 22800), ("ncclScatter", 22800)];

/// The lowest NCCL version ferrocoll runs with: non-blocking communicators
/// (`ncclCommInitRankConfig`) and `ncclCommFinalize` came in 2.14.
pub const MIN_VERSION: u32 = 21400;

/// Where entry points are looked up: the loaded library, or a fake table in tests.
pub trait Lookup {
    /// The address of `name`, if the library exports it.
    fn find(&self, name: &str) -> Option<*const c_void>;
}

impl Lookup for libloading::Library {
    fn find(&self, name: &str) -> Option<*const c_void> {
        // SAFETY: looking a symbol up calls nothing; the address is only
        // turned into a function pointer of the type nccl.h declares for
        // that name (Symbols::resolve).
        let sym = unsafe { self.get::<*const c_void>(name.as_bytes()) }.ok()?;
        // SAFETY: for a `*const c_void` type libloading hands back the symbol's address itself.
        let addr = unsafe { sym.into_raw() }.as_raw_ptr();
        (!addr.is_null()).then_some(addr.cast_const())
    }
}

/// The entry points of one loaded NCCL.
#[derive(Clone, Copy, Debug)]
pub struct Symbols {
    pub(crate) get_unique_id: GetUniqueIdFn,
    pub(crate) init_rank_config: InitRankConfigFn,
    pub(crate) get_async_error: GetAsyncErrorFn,
    pub(crate) finalize: CommFn,
    pub(crate) destroy: CommFn,
    pub(crate) abort: CommFn,
    pub(crate) error_string: ErrorStringFn,
    pub(crate) group_start: GroupFn,
    pub(crate) group_end: GroupFn,
    pub(crate) all_reduce: ReduceAllFn,
    pub(crate) reduce: ReduceFn,
    pub(crate) broadcast: RootedFn,
    pub(crate) all_gather: MoveFn,
    pub(crate) reduce_scatter: ReduceAllFn,
    pub(crate) send: SendFn,
    pub(crate) recv: RecvFn,
    pub(crate) last_error: Option<LastErrorFn>,
    pub(crate) all_to_all: Option<MoveFn>,
    pub(crate) gather: Option<RootedFn>,
    pub(crate) scatter: Option<RootedFn>,
}

/// Why a library cannot be used, before any call into it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// A required entry point is missing.
    Missing(&'static str),
}

impl Symbols {
    /// Look every entry point up in `lib`. A missing required one is a
    /// [`Refusal`]; `ncclGetLastError` and the optional ones become `None`
    /// (an optional one is dropped later, by [`Symbols::for_version`], if
    /// the library's version is older than the one that introduced it).
    pub fn resolve(lib: &dyn Lookup) -> Result<Symbols, Refusal> {
        macro_rules! req {
            ($name:literal, $ty:ty) => {{
                let addr = lib.find($name).ok_or(Refusal::Missing($name))?;
                // SAFETY: `addr` is the library's function `$name`, whose C
                // signature nccl.h declares as `$ty` (the types above).
                unsafe { std::mem::transmute::<*const c_void, $ty>(addr) }
            }};
        }
        macro_rules! opt {
            ($name:literal, $ty:ty) => {
                // SAFETY: as in req!.
                lib.find($name).map(|addr| unsafe { std::mem::transmute::<*const c_void, $ty>(addr) })
            };
        }
        // Called before the rest is resolved (Nccl::check), not kept.
        lib.find("ncclGetVersion").ok_or(Refusal::Missing("ncclGetVersion"))?;
        Ok(Symbols {
            get_unique_id: req!("ncclGetUniqueId", GetUniqueIdFn),
            init_rank_config: req!("ncclCommInitRankConfig", InitRankConfigFn),
            get_async_error: req!("ncclCommGetAsyncError", GetAsyncErrorFn),
            finalize: req!("ncclCommFinalize", CommFn),
            destroy: req!("ncclCommDestroy", CommFn),
            abort: req!("ncclCommAbort", CommFn),
            error_string: req!("ncclGetErrorString", ErrorStringFn),
            group_start: req!("ncclGroupStart", GroupFn),
            group_end: req!("ncclGroupEnd", GroupFn),
            all_reduce: req!("ncclAllReduce", ReduceAllFn),
            reduce: req!("ncclReduce", ReduceFn),
            broadcast: req!("ncclBroadcast", RootedFn),
            all_gather: req!("ncclAllGather", MoveFn),
            reduce_scatter: req!("ncclReduceScatter", ReduceAllFn),
            send: req!("ncclSend", SendFn),
            recv: req!("ncclRecv", RecvFn),
            last_error: opt!("ncclGetLastError", LastErrorFn),
            all_to_all: opt!("ncclAlltoAll", MoveFn),
            gather: opt!("ncclGather", RootedFn),
            scatter: opt!("ncclScatter", RootedFn),
        })
    }

    /// The table with the optional entry points that `version` (an NCCL
    /// version code) is too old for removed: a symbol of the same name in
    /// an older library (a fork, a preview) is not trusted to have the
    /// signature ferrocoll calls.
    pub fn for_version(mut self, version: u32) -> Symbols {
        let since = |name: &str| OPTIONAL.iter().find(|(n, _)| *n == name).map_or(u32::MAX, |(_, v)| *v);
        if version < since("ncclGetLastError") {
            self.last_error = None;
        }
        if version < since("ncclAlltoAll") {
            self.all_to_all = None;
        }
        if version < since("ncclGather") {
            self.gather = None;
        }
        if version < since("ncclScatter") {
            self.scatter = None;
        }
        self
    }

    /// How the collectives that have a native call in some versions run with this table.
    pub fn fallbacks(&self) -> Fallbacks {
        Fallbacks {
            alltoall_native: self.all_to_all.is_some(),
            gather_native: self.gather.is_some(),
            scatter_native: self.scatter.is_some(),
        }
    }
}

/// Which collectives run as NCCL's own call and which as grouped
/// send/receive (v-variants always run grouped: NCCL has no v-calls).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fallbacks {
    /// `ncclAlltoAll` (out of place, equal blocks).
    pub alltoall_native: bool,
    /// `ncclGather` (equal blocks).
    pub gather_native: bool,
    /// `ncclScatter` (equal blocks).
    pub scatter_native: bool,
}

/// An NCCL version code as `(major, minor, patch)`: `X*10000 + Y*100 + Z`
/// from 2.9 on, `X*1000 + Y*100 + Z` before.
pub fn decode_version(code: u32) -> (u32, u32, u32) {
    if code >= 10000 {
        (code / 10000, code % 10000 / 100, code % 100)
    } else {
        (code / 1000, code % 1000 / 100, code % 100)
    }
}
