//! The one door to `libsharp_coll`: our own `#[repr(C)]` declarations of
//! just the structures, enumerations and entry points the TL uses (written
//! from SHARP's public API; nothing is generated or copied), the library
//! loaded at run time (never linked), and one error table from SHARP's
//! codes to [`Status`].
//!
//! A missing library, or one that lacks a required entry point, is
//! `NotSupported` naming it; `sharp_coll_do_reduce_scatter_nb` and
//! `sharp_coll_do_allgather_nb` exist only in newer libraries and are optional.

use std::ffi::{CStr, c_char, c_int, c_void};

use ferrocoll_core::{DataType, Error, ReduceOp, Result, Status};

/// The library's default file name.
pub(crate) const DEFAULT_LIBRARY: &str = "libsharp_coll.so";

// sharp_error_no: the codes the TL reacts to.
pub(crate) const SUCCESS: c_int = 0;
pub(crate) const ENOT_SUPP: c_int = -2;
pub(crate) const ENOMEM: c_int = -3;
pub(crate) const EINVAL: c_int = -10;
pub(crate) const EOOB: c_int = -15;
pub(crate) const ELOCK_FAILED: c_int = -18;
pub(crate) const ELOCK_DENIED: c_int = -19;
pub(crate) const ENO_RESOURCE: c_int = -20;
/// Resource quota (group or OST quota): a kind of "no resource".
pub(crate) const EQUOTA: c_int = -7;

/// `SHARP_FEATURE_SAT`: streaming aggregation (needed by reduce_scatter).
pub(crate) const FEATURE_SAT: u64 = 1 << 2;

// sharp_data_buffer_type, sharp_data_memory_type, sharp_aggregation_mode.
pub(crate) const DATA_BUFFER: c_int = 0;
pub(crate) const MEM_TYPE_HOST: c_int = 0;
pub(crate) const AGGREGATION_NONE: c_int = 0;
pub(crate) const AGGREGATION_STREAMING: c_int = 2;
/// `SHARP_DTYPE_NULL` (no tag type) and `SHARP_OP_NULL`.
pub(crate) const DTYPE_NULL: c_int = 12;

/// SHARP's datatype code for ours, if it has one (`enum sharp_datatype`).
pub(crate) fn dtype(d: DataType) -> Option<c_int> {
    Some(match d {
        DataType::Uint32 => 0,
        DataType::Int32 => 1,
        DataType::Uint64 => 2,
        DataType::Int64 => 3,
        DataType::Float32 => 4,
        DataType::Float64 => 5,
        DataType::Uint16 => 6,
        DataType::Int16 => 7,
        DataType::Float16 => 8,
        DataType::Bfloat16 => 9,
        DataType::Uint8 => 10,
        DataType::Int8 => 11,
        _ => return None,
    })
}

/// SHARP's operation code for ours, if it has one (`enum sharp_reduce_op`;
/// SHARP has a product in its enumeration but no switch computes it, and
/// no average).
pub(crate) fn op(o: ReduceOp) -> Option<c_int> {
    Some(match o {
        ReduceOp::Max => 0,
        ReduceOp::Min => 1,
        ReduceOp::Sum => 2,
        ReduceOp::Land => 4,
        ReduceOp::Band => 5,
        ReduceOp::Lor => 6,
        ReduceOp::Bor => 7,
        ReduceOp::Lxor => 8,
        ReduceOp::Bxor => 9,
        _ => return None,
    })
}

/// `struct sharp_coll_config`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Config {
    pub ib_dev_list: *const c_char,
    pub user_progress_num_polls: c_int,
    pub coll_timeout: c_int,
    pub flags: u32,
    pub reserved: [c_int; 3],
}

/// OOB broadcast: `(ctx, buf, len, root)`.
pub(crate) type OobBcast = unsafe extern "C" fn(*mut c_void, *mut c_void, c_int, c_int) -> c_int;
/// OOB barrier: `(ctx)`.
pub(crate) type OobBarrier = unsafe extern "C" fn(*mut c_void) -> c_int;
/// OOB gather: `(ctx, root, sbuf, rbuf, len)`.
pub(crate) type OobGather = unsafe extern "C" fn(*mut c_void, c_int, *mut c_void, *mut c_void, c_int) -> c_int;

/// `struct sharp_coll_out_of_band_colls`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct OobColls {
    pub bcast: Option<OobBcast>,
    pub barrier: Option<OobBarrier>,
    pub gather: Option<OobGather>,
}

/// `struct sharp_coll_init_spec`.
#[repr(C)]
pub(crate) struct InitSpec {
    pub job_id: u64,
    pub world_rank: c_int,
    pub world_size: c_int,
    pub progress_func: Option<unsafe extern "C" fn() -> c_int>,
    pub group_channel_idx: c_int,
    pub config: Config,
    pub oob_colls: OobColls,
    pub world_local_rank: c_int,
    pub enable_thread_support: c_int,
    pub oob_ctx: *mut c_void,
    pub reserved: [c_int; 4],
}

/// `struct sharp_coll_comm_init_spec`.
#[repr(C)]
pub(crate) struct CommInitSpec {
    pub rank: c_int,
    pub size: c_int,
    pub oob_ctx: *mut c_void,
    pub group_world_ranks: *const u32,
    pub reserved: [c_int; 2],
}

/// The support masks of `struct sharp_coll_caps`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SupportMask {
    pub dtypes: u64,
    pub tag_dtypes: u64,
    pub reduce_ops: u64,
    pub feature_mask: u64,
    pub reserved: [u64; 4],
}

/// The resources of `struct sharp_coll_caps`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Resources {
    pub max_osts: c_int,
    pub user_data_per_ost: c_int,
    pub max_groups: c_int,
    pub max_group_channels: c_int,
    pub osts_per_group: c_int,
}

/// `struct sharp_coll_caps`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Caps {
    pub sharp_pkt_version: c_int,
    pub reserved: [u64; 2],
    pub support_mask: SupportMask,
    pub resources: Resources,
}

/// The contiguous-buffer arm of `struct sharp_coll_data_desc`'s union (the
/// larger arm: the union has its size and alignment).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct BufferDesc {
    pub ptr: *mut c_void,
    pub length: usize,
    pub mem_handle: *mut c_void,
}

/// `struct sharp_coll_data_desc` (contiguous buffers only).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct DataDesc {
    pub kind: c_int,
    pub mem_type: c_int,
    pub reserved: [c_int; 2],
    pub buffer: BufferDesc,
}

impl DataDesc {
    /// A host buffer of `length` bytes at `ptr`, registered as `mr`.
    pub(crate) fn host(ptr: *mut u8, length: usize, mr: *mut c_void) -> DataDesc {
        DataDesc {
            kind: DATA_BUFFER,
            mem_type: MEM_TYPE_HOST,
            reserved: [0; 2],
            buffer: BufferDesc { ptr: ptr.cast(), length, mem_handle: mr },
        }
    }
}

/// `struct sharp_coll_reduce_spec` (allreduce, reduce, reduce_scatter).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct ReduceSpec {
    pub root: c_int,
    pub sbuf_desc: DataDesc,
    pub rbuf_desc: DataDesc,
    pub dtype: c_int,
    /// Elements (for reduce_scatter: the receive count).
    pub length: usize,
    pub op: c_int,
    pub tag_dtype: c_int,
    pub aggr_mode: c_int,
    pub stream_lock_batch_size: c_int,
    /// First element of a partial reduce_scatter.
    pub offset: usize,
    pub reserved: [c_int; 2],
}

/// `struct sharp_coll_bcast_spec`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct BcastSpec {
    pub root: c_int,
    pub buf_desc: DataDesc,
    pub size: usize,
    pub reserved: [c_int; 4],
}

/// `struct sharp_coll_gather_spec` (allgather).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct GatherSpec {
    pub sbuf_desc: DataDesc,
    pub rbuf_desc: DataDesc,
    pub dtype: c_int,
    pub size: usize,
    pub offset: usize,
    pub reserved: [c_int; 4],
}

/// Opaque `struct sharp_coll_context`.
#[repr(C)]
pub(crate) struct RawContext {
    _private: [u8; 0],
}

/// Opaque `struct sharp_coll_comm`.
#[repr(C)]
pub(crate) struct RawComm {
    _private: [u8; 0],
}

type Init = unsafe extern "C" fn(*mut InitSpec, *mut *mut RawContext) -> c_int;
type Finalize = unsafe extern "C" fn(*mut RawContext) -> c_int;
type CapsQuery = unsafe extern "C" fn(*mut RawContext, *mut Caps) -> c_int;
type Progress = unsafe extern "C" fn(*mut RawContext) -> c_int;
type CommInit = unsafe extern "C" fn(*mut RawContext, *mut CommInitSpec, *mut *mut RawComm) -> c_int;
type CommDestroy = unsafe extern "C" fn(*mut RawComm) -> c_int;
type RegMr = unsafe extern "C" fn(*mut RawContext, *mut c_void, usize, *mut *mut c_void) -> c_int;
type DeregMr = unsafe extern "C" fn(*mut RawContext, *mut c_void) -> c_int;
type DoReduce = unsafe extern "C" fn(*mut RawComm, *mut ReduceSpec, *mut *mut c_void) -> c_int;
type DoBcast = unsafe extern "C" fn(*mut RawComm, *mut BcastSpec, *mut *mut c_void) -> c_int;
type DoBarrier = unsafe extern "C" fn(*mut RawComm, *mut *mut c_void) -> c_int;
type DoGather = unsafe extern "C" fn(*mut RawComm, *mut GatherSpec, *mut *mut c_void) -> c_int;
type ReqTest = unsafe extern "C" fn(*mut c_void) -> c_int;
type ReqFree = unsafe extern "C" fn(*mut c_void) -> c_int;
type StrError = unsafe extern "C" fn(c_int) -> *const c_char;

// SAFETY: function pointers into a library kept loaded by the Api, and a
// copied configuration whose one pointer (the device list) is NULL or the
// library's static data, never written through.
unsafe impl Send for Api {}
// SAFETY: as for Send; nothing in the Api changes after loading.
unsafe impl Sync for Api {}

/// The loaded library and its entry points.
pub(crate) struct Api {
    pub init: Init,
    pub finalize: Finalize,
    pub caps_query: CapsQuery,
    pub progress: Progress,
    pub comm_init: CommInit,
    pub comm_destroy: CommDestroy,
    pub reg_mr: RegMr,
    pub dereg_mr: DeregMr,
    pub allreduce_nb: DoReduce,
    pub reduce_nb: DoReduce,
    pub bcast_nb: DoBcast,
    pub barrier_nb: DoBarrier,
    /// Newer libraries only.
    pub reduce_scatter_nb: Option<DoReduce>,
    /// Newer libraries only.
    pub allgather_nb: Option<DoGather>,
    pub req_test: ReqTest,
    pub req_free: ReqFree,
    strerror: StrError,
    /// `sharp_coll_default_config`, copied (zeros and no timeout when absent).
    pub default_config: Config,
    /// Where it was loaded from, for messages.
    pub path: String,
    /// Keeps the code of every pointer above mapped; dropped last.
    _lib: libloading::Library,
}

impl Api {
    /// Load `path` (a file name searched the loader's way, or a path) and
    /// every entry point the TL calls.
    pub(crate) fn load(path: &str) -> Result<Api> {
        // SAFETY: loading runs the library's initialisers; libsharp_coll's
        // (and the test double's) only set up their own state. The library
        // stays loaded as long as this Api (it owns `_lib`).
        let lib = unsafe { libloading::Library::new(path) }
            .map_err(|e| Error::not_supported(format!("{path} not found or not loadable: {e}")))?;
        macro_rules! sym {
            ($name:literal, $ty:ty) => {{
                // SAFETY: the symbol is one of SHARP's public entry points, whose C
                // prototype `$ty` declares; the pointer is used only while `lib` is loaded.
                let s = unsafe { lib.get::<$ty>(concat!($name, "\0").as_bytes()) };
                s.map(|s| *s)
            }};
        }
        macro_rules! required {
            ($name:literal, $ty:ty) => {
                sym!($name, $ty).map_err(|e| Error::not_supported(format!("{path} has no {}: {e}", $name)))?
            };
        }
        Ok(Api {
            init: required!("sharp_coll_init", Init),
            finalize: required!("sharp_coll_finalize", Finalize),
            caps_query: required!("sharp_coll_caps_query", CapsQuery),
            progress: required!("sharp_coll_progress", Progress),
            comm_init: required!("sharp_coll_comm_init", CommInit),
            comm_destroy: required!("sharp_coll_comm_destroy", CommDestroy),
            reg_mr: required!("sharp_coll_reg_mr", RegMr),
            dereg_mr: required!("sharp_coll_dereg_mr", DeregMr),
            allreduce_nb: required!("sharp_coll_do_allreduce_nb", DoReduce),
            reduce_nb: required!("sharp_coll_do_reduce_nb", DoReduce),
            bcast_nb: required!("sharp_coll_do_bcast_nb", DoBcast),
            barrier_nb: required!("sharp_coll_do_barrier_nb", DoBarrier),
            reduce_scatter_nb: sym!("sharp_coll_do_reduce_scatter_nb", DoReduce).ok(),
            allgather_nb: sym!("sharp_coll_do_allgather_nb", DoGather).ok(),
            req_test: required!("sharp_coll_req_test", ReqTest),
            req_free: required!("sharp_coll_req_free", ReqFree),
            strerror: required!("sharp_coll_strerror", StrError),
            default_config: {
                // SAFETY: `sharp_coll_default_config` is a const struct of the
                // declared layout; it is copied while the library is loaded.
                let p = unsafe { lib.get::<*const Config>(b"sharp_coll_default_config\0") };
                match p {
                    // SAFETY: a data symbol's address, read once as the struct it is.
                    Ok(sym) if !(*sym).is_null() => unsafe { std::ptr::read(*sym) },
                    _ => Config {
                        ib_dev_list: std::ptr::null(),
                        user_progress_num_polls: 0,
                        coll_timeout: -1,
                        flags: 0,
                        reserved: [0; 3],
                    },
                }
            },
            path: path.to_string(),
            _lib: lib,
        })
    }

    /// The library's words for `code`.
    pub(crate) fn strerror(&self, code: c_int) -> String {
        // SAFETY: sharp_coll_strerror takes any code and returns a static
        // NUL-terminated string or NULL (checked); it is copied at once.
        let p = unsafe { (self.strerror)(code) };
        if p.is_null() {
            return format!("SHARP error {code}");
        }
        // SAFETY: non-NULL, NUL-terminated, static in the library (see above).
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    /// `Ok` for success, else the error of `call`, named, with SHARP's words.
    pub(crate) fn check(&self, code: c_int, call: &str) -> Result<()> {
        if code == SUCCESS {
            return Ok(());
        }
        let words = self.strerror(code);
        Err(Error::new(status_of(code), format!("{call} failed: {words} ({code})")))
    }
}

/// The one error table: SHARP's code to UCC's status. "Not supported",
/// "no resource" (and quotas, and a SAT lock that stayed busy or is
/// denied) are what the TL falls back on.
pub(crate) fn status_of(code: c_int) -> Status {
    match code {
        SUCCESS => Status::Ok,
        ENOT_SUPP => Status::NotSupported,
        ENOMEM => Status::NoMemory,
        EINVAL => Status::InvalidParam,
        ENO_RESOURCE | EQUOTA | ELOCK_FAILED | ELOCK_DENIED => Status::NoResource,
        EOOB => Status::IoError,
        _ => Status::NoMessage,
    }
}

/// Whether an error from the library means "not here, try another way".
pub(crate) fn is_refusal(e: &Error) -> bool {
    matches!(e.status(), Status::NotSupported | Status::NoResource)
}

#[cfg(test)]
mod tests {
    use std::mem::{offset_of, size_of};

    use super::*;

    /// The layouts SHARP's header gives on LP64 (the test double checks the
    /// same numbers from its side, in C).
    #[test]
    fn layouts_match_the_c_api() {
        assert_eq!(size_of::<Config>(), 32);
        assert_eq!(size_of::<InitSpec>(), 120);
        assert_eq!(offset_of!(InitSpec, config), 32);
        assert_eq!(offset_of!(InitSpec, oob_colls), 64);
        assert_eq!(offset_of!(InitSpec, oob_ctx), 96);
        assert_eq!(size_of::<CommInitSpec>(), 32);
        assert_eq!(size_of::<Caps>(), 112);
        assert_eq!(offset_of!(Caps, support_mask), 24);
        assert_eq!(size_of::<DataDesc>(), 40);
        assert_eq!(size_of::<ReduceSpec>(), 136);
        assert_eq!(offset_of!(ReduceSpec, length), 96);
        assert_eq!(offset_of!(ReduceSpec, offset), 120);
        assert_eq!(size_of::<BcastSpec>(), 72);
        assert_eq!(size_of::<GatherSpec>(), 120);
    }

    #[test]
    fn missing_library_is_not_supported_naming_it() {
        let e = Api::load("/nonexistent/libsharp_coll.so").err().expect("no such library");
        assert_eq!(e.status(), Status::NotSupported);
        assert!(e.to_string().contains("/nonexistent/libsharp_coll.so"), "{e}");
    }

    #[test]
    fn codes_map_to_statuses() {
        assert_eq!(status_of(ENOT_SUPP), Status::NotSupported);
        assert_eq!(status_of(ENO_RESOURCE), Status::NoResource);
        assert_eq!(status_of(ELOCK_FAILED), Status::NoResource);
        assert_eq!(status_of(-1), Status::NoMessage);
        assert_eq!(dtype(DataType::Bfloat16), Some(9));
        assert_eq!(dtype(DataType::Float8E4M3), None);
        assert_eq!(op(ReduceOp::Prod), None);
        assert_eq!(op(ReduceOp::Sum), Some(2));
    }
}
