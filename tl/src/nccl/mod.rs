//! # TL/NCCL: collectives on CUDA memory by NCCL
//!
//! NVIDIA's collective library behind the same API, engines and selection
//! as every other TL: it serves CUDA device memory, with a score above the
//! p2p TL's staging (which copies through the host), so GPU buffers go to
//! NCCL where the library and a device are there, and elsewhere the other
//! TLs serve them as before.
//!
//! ## Design
//! - **Probe** (`context_create`): the CUDA driver (a device), then
//!   `libnccl.so.2` with its version and entry points
//!   (`ferrocoll_cuda::nccl`). Any failure is `NotSupported` naming the
//!   cause; the TL is then left out, never a panic.
//! - **Unique id** over the team's out-of-band path: rank 0 makes it
//!   (`ncclGetUniqueId`) at team creation and sends it to every member
//!   through a p2p service context that this TL's context opens beside its
//!   own (the same transports as the p2p TL: in-process, shared memory,
//!   TCP), at a sequence number no collective uses. With it, every rank
//!   tells rank 0 its CUDA device: two ranks of one node on one device
//!   (which NCCL refuses, "Duplicate GPU detected") make team creation
//!   `NotSupported` on every rank alike, naming the ranks and the device,
//!   so the team's CUDA collectives fall back to the other TLs (the reason
//!   is logged at debug level, as for any TL left out of a team).
//! - **Lazy, non-blocking communicator**: made at the team's first
//!   collective (`ncclCommInitRankConfig` with `blocking = 0`), polled with
//!   `ncclCommGetAsyncError` by that collective's future (so by progress and
//!   wait), never blocking a plain post. Posts after a failed creation fail
//!   with its error. The exception: a triggered post on a CUDA stream engine
//!   while the communicator is not made waits for it (bounded by the
//!   collective's timeout, else `team::COMM_WAIT_LIMIT`, 120 s) before anything
//!   is enqueued, and is then stream-native — the host-driven path would
//!   hold the user's stream while NCCL makes the communicator and loads its
//!   kernels, and under CUDA's lazy module loading that load waits behind
//!   the held stream: a deadlock, seen on an H100.
//! - **Streams**: a plain post enqueues on the team's own stream (made with
//!   the communicator, on the device current when the team was created);
//!   completion is an event recorded after the call, queried by progress. A
//!   triggered post on a CUDA stream engine, once the communicator exists,
//!   enqueues on the engine's stream itself (`CollTask::native_on_stream`):
//!   stream order is the dependency, and a stream being captured into a
//!   CUDA graph captures the collective (the request then completes at
//!   post: the graph's launches run it). A triggered post on a stream being
//!   captured before the communicator exists takes the engine's host-driven
//!   path (event + flag), which refuses the capture with an error saying
//!   why (a communicator is not made inside a user's capture).
//! - **Errors**: a failed NCCL call or a failed creation aborts the
//!   communicator at once and fails the collective with an error naming the
//!   call and the rank (`ncclGetLastError`'s text included). A collective
//!   that timed out or was cancelled with work in flight marks the team;
//!   its communicator is then aborted at team destruction. A healthy team's
//!   communicator is finalized and destroyed, never aborted.
//! - **Collectives**: allreduce, reduce, bcast, allgather, reduce_scatter
//!   by NCCL's calls; alltoall, gather and scatter by NCCL's calls where the
//!   library has them (2.28+), else — and always for allgatherv, gatherv,
//!   scatterv and alltoallv — by `ncclSend`/`ncclRecv` in one group. Data
//!   movement moves bytes; reductions take int8/uint8, int32/uint32,
//!   int64/uint64, f16, bf16, f32, f64 with sum, prod, max, min, and avg on
//!   floats.
//!
//! ## Limits
//! - Run on one H100 with NCCL 2.28.9 (the nvidia-nccl-cu13 wheel): every
//!   test of `tests/tests/gpu_nccl.rs` passes (one-rank teams over every
//!   collective and datatype, two ranks of one GPU falling back, a captured
//!   allreduce replayed 100 times, a refused host-driven capture). Error
//!   paths NCCL will not produce on demand run against the fake
//!   `libnccl.so.2` of the tests (`tests/fake_nccl/`, over the fake CUDA
//!   driver). Multi-GPU and multi-node teams have not run anywhere.
//! - One communicator per team; the device is the one current on the thread
//!   that creates the team (device 0 if none).
//! - No barrier, fanin, fanout (host collectives), reduce_scatterv, active
//!   sets, in-place alltoall(v), fp8, or reductions NCCL lacks (`NotSupported`:
//!   selection moves to the next TL).
//! - A call answering `ncclInProgress` is waited out at post (bounded,
//!   `ferrocoll_cuda::nccl::CALL_LIMIT`): enqueueing must be finished when a
//!   post on a user's stream returns.
//! - The p2p service context opens its own transports (a second TCP
//!   listener per context) where TL/NCCL is available.

mod alg;
mod context;
mod team;

use std::sync::Arc;

use ferrocoll_core::backend::{AlgInfo, TlComponent, TlContext, TlContextParams};
use ferrocoll_core::config::ConfigField;
use ferrocoll_core::score::Score;
use ferrocoll_core::{Error, Result};

/// The NCCL TL component.
#[derive(Debug, Default)]
pub struct NcclTl;

/// Above the p2p TL's staging (10) and the shm TL (40, host memory only).
pub(crate) const SCORE: Score = Score(60);

const FIELDS: &[ConfigField] =
    &[ConfigField { name: "UCC_TL_NCCL_TUNE", default: "", doc: "Score-map overrides for the NCCL TL." }];

impl TlComponent for NcclTl {
    fn name(&self) -> &'static str {
        "nccl"
    }

    fn description(&self) -> &'static str {
        "collectives on CUDA memory by NVIDIA's NCCL (libnccl.so.2, loaded at run time)"
    }

    fn default_score(&self) -> Score {
        SCORE
    }

    fn config_fields(&self) -> Vec<ConfigField> {
        FIELDS.to_vec()
    }

    fn algorithms(&self) -> &'static [AlgInfo] {
        alg::registry().infos()
    }

    fn agreed_fields(&self) -> Vec<&'static str> {
        FIELDS.iter().map(|f| f.name).collect()
    }

    fn context_create(&self, params: &TlContextParams<'_>) -> Result<Arc<dyn TlContext>> {
        let why = |e: Error| Error::not_supported(format!("TL/NCCL is off: {}", e.context()));
        let driver = ferrocoll_cuda::driver().map_err(why)?;
        let nccl = ferrocoll_cuda::nccl::nccl().map_err(why)?;
        Ok(Arc::new(context::NcclContext::new(params, driver, nccl)?))
    }
}

/// Whether TL/NCCL can run here: `Ok` with the NCCL version, or
/// `NotSupported` naming the cause (no driver, no device, no or an old
/// `libnccl.so.2`, a missing entry point).
pub fn available() -> Result<String> {
    ferrocoll_cuda::driver()?;
    ferrocoll_cuda::nccl::nccl().map(|n| n.version_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrocoll_core::Status;

    #[test]
    fn the_registry_is_consistent() {
        alg::registry().check().unwrap();
    }

    #[test]
    fn unavailable_here_names_why() {
        if let Err(e) = available() {
            assert_eq!(e.status(), Status::NotSupported);
            assert!(
                ["libcuda.so.1", "cuInit", "no CUDA device", "libnccl.so"].iter().any(|w| e.context().contains(w)),
                "{e}"
            );
        }
    }
}
