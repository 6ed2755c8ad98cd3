//! NCCL (`libnccl.so.2`), loaded at run time with our own bindings: the
//! probe ([`nccl()`]), the entry-point table checked against the loaded
//! version with fallbacks ([`sys::Symbols`]), the error table ([`error`]),
//! and a communicator that is created non-blocking, polled, finalized and
//! destroyed — and aborted only after an error, never from `Drop` on a
//! healthy one ([`Comm`]).
//!
//! ## The probe
//! Once per process, kept ([`Kept`]): `libnccl.so.2` loads (else
//! `libnccl.so`; the `nvidia-nccl-cu13` wheel ships only the first), it
//! exports `ncclGetVersion`, the version is at least 2.14 (non-blocking
//! communicators and `ncclCommFinalize`), and it exports every required
//! entry point ([`sys::REQUIRED`]). Each failure is `NotSupported` naming
//! the library, the version or the symbol — never a panic. The optional
//! entry points ([`sys::OPTIONAL`]: `ncclAlltoAll`, `ncclGather`,
//! `ncclScatter`, new in 2.28) are used only where present *and* the
//! version has them; otherwise those collectives run as grouped
//! `ncclSend`/`ncclRecv` ([`sys::Fallbacks`]).
//!
//! Why not cudarc's NCCL layer: it resolves each function on first call
//! and panics where one is missing, its `Comm` is not `Send`, its init
//! blocks, and its `Drop` aborts the communicator (and panics if that
//! fails) — aborts that hang are among NCCL's most reported problems.
//!
//! ## Limits
//! No GPU was available where this was written: the bindings run against
//! the fake `libnccl.so.2` of the tests (`tests/fake_nccl/`) and a fake
//! symbol table in the unit tests; their behaviour with the real library
//! is for the GPU tests (`tests/tests/gpu_nccl.rs`) to confirm. fp8 types
//! are not mapped (their NCCL codes depend on the version).

pub mod comm;
pub mod error;
pub mod sys;

use std::ffi::c_int;

use ferrocoll_core::{DataType, Error, ReduceOp, Result};

pub use comm::{Comm, UniqueId};
use sys::{Lookup, Symbols};

use crate::Kept;

/// The names tried, in order.
pub const LIBRARY_NAMES: [&str; 2] = ["libnccl.so.2", "libnccl.so"];

/// The loaded NCCL: its version and entry points.
pub struct Nccl {
    version: u32,
    symbols: Symbols,
    /// Keeps the library mapped while the entry points are used (for ever: kept in a static).
    _lib: Option<libloading::Library>,
}

impl std::fmt::Debug for Nccl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NCCL {}", self.version_string())
    }
}

/// NCCL, probed once per process (see the module docs).
///
/// ```
/// match ferrocoll_cuda::nccl::nccl() {
///     Ok(nccl) => println!("NCCL {}", nccl.version_string()),
///     Err(e) => println!("no NCCL here: {e}"), // NotSupported, naming the library, version or symbol
/// }
/// ```
pub fn nccl() -> Result<&'static Nccl> {
    static NCCL: Kept<Nccl> = Kept::new();
    NCCL.get_or_init(load)
}

fn load() -> Result<Nccl> {
    let mut tried = Vec::new();
    for name in LIBRARY_NAMES {
        // SAFETY: loading a shared library runs its initialisers; NCCL's
        // only set up its own state. The library stays loaded for the
        // process (the Nccl value lives in a static).
        match unsafe { libloading::Library::new(name) } {
            Ok(lib) => {
                let (version, symbols) = Nccl::check(&lib, name)?;
                return Ok(Nccl { version, symbols, _lib: Some(lib) });
            }
            Err(e) => tried.push(format!("{name}: {e}")),
        }
    }
    Err(Error::not_supported(format!(
        "NCCL cannot be loaded ({}); put the folder holding libnccl.so.2 (the nvidia-nccl-cu13 wheel's \
         nvidia/nccl/lib) on LD_LIBRARY_PATH",
        tried.join("; ")
    )))
}

impl Nccl {
    /// Check a library (or a fake table): its version first, then every
    /// required entry point; the optional ones kept only where the version
    /// has them. `name` is the library's name for messages.
    pub fn check(lib: &dyn Lookup, name: &str) -> Result<(u32, Symbols)> {
        let Some(get_version) = lib.find("ncclGetVersion") else {
            return Err(Error::not_supported(format!("{name} has no ncclGetVersion: it is not an NCCL library")));
        };
        // SAFETY: the address is the library's ncclGetVersion, whose C signature is GetVersionFn.
        let get_version = unsafe { std::mem::transmute::<*const std::ffi::c_void, sys::GetVersionFn>(get_version) };
        let mut code: c_int = 0;
        // SAFETY: ncclGetVersion writes one int we own; it needs no device and no communicator.
        let r = unsafe { get_version(&mut code) };
        if r != sys::SUCCESS {
            return Err(Error::not_supported(format!("{name}: ncclGetVersion failed: {}", error::result_name(r))));
        }
        let version = u32::try_from(code)
            .map_err(|_| Error::not_supported(format!("{name}: ncclGetVersion gave a negative version {code}")))?;
        if version < sys::MIN_VERSION {
            let (x, y, z) = sys::decode_version(version);
            return Err(Error::not_supported(format!(
                "{name} is NCCL {x}.{y}.{z}; ferrocoll needs 2.14 or newer (non-blocking ncclCommInitRankConfig, \
                 ncclCommFinalize)"
            )));
        }
        let symbols = Symbols::resolve(lib).map_err(|sys::Refusal::Missing(sym)| {
            let (x, y, z) = sys::decode_version(version);
            Error::not_supported(format!("{name} (NCCL {x}.{y}.{z}) has no {sym}, which ferrocoll calls"))
        })?;
        Ok((version, symbols.for_version(version)))
    }

    /// The version code (`X*10000 + Y*100 + Z`).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The version as `X.Y.Z`.
    pub fn version_string(&self) -> String {
        let (x, y, z) = sys::decode_version(self.version);
        format!("{x}.{y}.{z}")
    }

    /// Which collectives have NCCL's own call here, and which run grouped.
    pub fn fallbacks(&self) -> sys::Fallbacks {
        self.symbols.fallbacks()
    }

    pub(crate) fn symbols(&self) -> &Symbols {
        &self.symbols
    }

    /// NCCL's text for a result code.
    pub(crate) fn error_text(&self, r: sys::NcclResult) -> Option<String> {
        // SAFETY: ncclGetErrorString (checked present) returns a static string for any code.
        error::text(unsafe { (self.symbols.error_string)(r) })
    }
}

/// NCCL's datatype code for `dt` (`ncclDataType_t`), if NCCL has it.
/// Data movement does not need this (it moves bytes as `ncclUint8`).
pub fn datatype(dt: DataType) -> Option<c_int> {
    Some(match dt {
        DataType::Int8 => 0,
        DataType::Uint8 => 1,
        DataType::Int32 => 2,
        DataType::Uint32 => 3,
        DataType::Int64 => 4,
        DataType::Uint64 => 5,
        DataType::Float16 => 6,
        DataType::Float32 => 7,
        DataType::Float64 => 8,
        DataType::Bfloat16 => 9,
        _ => return None,
    })
}

/// `ncclUint8`: the type data movement uses, counting bytes.
pub const BYTES: c_int = 1;

/// NCCL's reduction code for `op` (`ncclRedOp_t`), if NCCL has it.
pub fn reduce_op(op: ReduceOp) -> Option<c_int> {
    Some(match op {
        ReduceOp::Sum => 0,
        ReduceOp::Prod => 1,
        ReduceOp::Max => 2,
        ReduceOp::Min => 3,
        ReduceOp::Avg => 4,
        _ => return None,
    })
}

#[cfg(test)]
mod tests;
