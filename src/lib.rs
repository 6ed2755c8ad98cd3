//! # ferrocoll
//!
//! Collective communication — allreduce, bcast, alltoall, reduce-scatter and
//! the other group operations — for host and CUDA memory, with UCC's
//! objects, semantics and tuning knobs.
//!
//! ```no_run
//! use ferrocoll::{Coll, Context, ContextParams, Lib, ReduceOp, Team, TeamParams, ThreadOob};
//!
//! # fn main() -> ferrocoll::Result<()> {
//! // Four ranks as threads of this process.
//! let handles: Vec<_> = ThreadOob::group(4)
//!     .into_iter()
//!     .map(|oob| {
//!         std::thread::spawn(move || -> ferrocoll::Result<Vec<f32>> {
//!             let lib = Lib::new()?;
//!             let ctx = Context::new(&lib, ContextParams::with_oob(oob))?;
//!             let team = Team::create(&ctx, TeamParams::default())?;
//!             let src = vec![team.rank() as f32; 8];
//!             let mut dst = vec![0.0f32; 8];
//!             Coll::allreduce(&src, &mut dst, ReduceOp::Sum).run(&team)?;
//!             Ok(dst) // [6.0; 8] on every rank
//!         })
//!     })
//!     .collect();
//! for h in handles {
//!     assert_eq!(h.join().unwrap()?, vec![6.0; 8]);
//! }
//! # Ok(()) }
//! ```
//!
//! The crates behind it: `ferrocoll-core` (objects, engine, selection),
//! `ferrocoll-mc` (memory and reductions), `ferrocoll-ee` (execution
//! engines), `ferrocoll-transport` (point-to-point transports, the TCP
//! bootstrap, shared memory), `ferrocoll-tl` (transport layers and
//! algorithms).

#![deny(unsafe_op_in_unsafe_fn)]

mod signal;

use std::ops::Deref;

pub use ferrocoll_core::{
    ActiveSet, BufferInfo, BufferInfoV, CollArgs, CollBuffer, CollFlags, CollInit, CollType, CollTypeSet, Complex32,
    Complex64, Components, Context, ContextParams, ContextType, CountInt, DataType, Element, EpMap, Error, Float8E4M3,
    Float8E5M2, LibParams, LocValue, MemRef, MemType, Oob, OobRequest, ProcInfo, ReduceOp, Request, Result, Status,
    Team, TeamParams, ThreadMode, ThreadOob, ValueIndex,
};
pub use ferrocoll_core::{Coll, Config};
pub use ferrocoll_core::{Ee, EeType, Event, EventType};
pub use ferrocoll_ee::{CpuEe, CudaStreamEe};
pub use ferrocoll_transport::{TcpOob, TcpOobParams};

/// Execution engines (CPU thread, CUDA stream) and what triggered post means on each.
pub mod ee {
    pub use ferrocoll_ee::*;
}

/// Transport layers: whether TL/NCCL can run here ([`tl::nccl::available`]).
pub mod tl {
    /// TL/NCCL's probe.
    pub mod nccl {
        pub use ferrocoll_tl::nccl::available;
    }
}

/// Lower-level modules of the core crate, for component authors and tools.
pub mod core {
    pub use ferrocoll_core::{
        args, backend, buffer, config, config_file, engine, error, json, log, oob, score, topo, types, wire,
    };
    /// The logging macros, which print only at the level `UCC_LOG_LEVEL` allows.
    pub use ferrocoll_core::{log_at, log_debug, log_info, log_warn};
}

/// A library instance with every component ferrocoll ships (`ucc_init`).
///
/// It dereferences to [`ferrocoll_core::Lib`], so it is accepted wherever
/// that is (e.g. [`Context::new`]).
#[derive(Clone)]
pub struct Lib(ferrocoll_core::Lib);

impl Lib {
    /// A library with default parameters (thread mode single, configuration
    /// from the `UCC_*` environment).
    pub fn new() -> Result<Lib> {
        Lib::with_params(LibParams::default())
    }

    /// A library with explicit parameters.
    pub fn with_params(params: LibParams) -> Result<Lib> {
        Lib::with_components(params, default_components())
    }

    /// A library over a chosen set of components (e.g. [`default_components`]
    /// plus a transport layer of your own).
    pub fn with_components(params: LibParams, components: Components) -> Result<Lib> {
        let lib = ferrocoll_core::Lib::with_components(params, components).map(Lib)?;
        signal::install_dump_signal();
        Ok(lib)
    }
}

impl Deref for Lib {
    type Target = ferrocoll_core::Lib;

    fn deref(&self) -> &ferrocoll_core::Lib {
        &self.0
    }
}

/// Every memory component and transport layer of this build.
pub fn default_components() -> Components {
    Components { mcs: ferrocoll_mc::default_mcs(), tls: ferrocoll_tl::default_tls() }
}
