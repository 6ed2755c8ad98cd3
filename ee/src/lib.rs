//! # ferrocoll-ee
//!
//! Execution engines (UCC's EEs): where a collective is ordered with the
//! user's other work, and where its events are reported. Both engines
//! implement [`ferrocoll_core::Ee`], which is all core knows of them.
//!
//! ## Triggered post
//!
//! [`Request::triggered_post(ee, ev)`](ferrocoll_core::Request::triggered_post)
//! (`ucc_collective_triggered_post`) posts a collective that starts only
//! when the engine's trigger fires. Core asks the engine to arm a trigger,
//! puts the collective in the team's order at once (same rule as a plain
//! post: ranks post a team's collectives in the same order), polls the
//! trigger on every progress, and once it fires produces `CollectivePost`,
//! runs the collective, releases the engine and produces
//! `CollectiveComplete` — also on failure, timeout or cancellation (then
//! without `CollectivePost` if it never started). Both events carry the
//! request's [`id`](ferrocoll_core::Request::id); the user takes them with
//! `get_event` / `wait` and acknowledges them with `ack_event`. The
//! request's timeout covers the wait for the trigger, and its message names
//! what the trigger waited for. A persistent request may be triggered again
//! once it has completed.
//!
//! What the trigger is:
//! - [`CpuEe`]: an event the user sets with `set_event` (UCC's model: e.g.
//!   `ComputeComplete` once the input is computed), of the type given to
//!   `triggered_post`, with its tag unless that is 0; first come, first
//!   served (see [`cpu`]). No output dependency: the user learns of the end
//!   from `CollectiveComplete` or `test`.
//! - [`CudaStreamEe`]: the stream itself. The collective starts after the
//!   work enqueued on the stream before `triggered_post`, and work enqueued
//!   after it waits until the collective has ended (an event, or with
//!   `UCC_EE_CUDA_STREAM_INPUT=write` a stream write to host memory, and a
//!   stream-memory-op wait on a host-mapped flag; see [`cuda`]).
//!
//! ## Events
//!
//! UCC's calls: `set_event` (user → engine), `get_event`, `ack_event`,
//! `wait` (engine → user). Differences from UCC, where UCC has known
//! defects: `wait` returns the event instead of losing it, and
//! `CollectiveComplete` is produced. Each engine keeps up to 4096 events for the user; past that an
//! `Overflow` event takes the place of the excess until it is taken.
//!
//! ## Limits
//!
//! - Stream-native collectives (TL/NCCL once its communicator exists) are
//!   enqueued on the CUDA engine's stream itself (`Ee::native_post`): no
//!   event, no flag; device kernels of ferrocoll's own are not wired yet.
//! - A host-driven triggered post on a stream being captured into a CUDA
//!   graph is refused at once (`NotSupported`, nothing enqueued).
//! - A CUDA stream engine is refused (`NotSupported`, never a panic) where
//!   `libcuda.so.1` cannot be loaded or the device cannot wait on memory
//!   in a stream; `set_event` on it is `NotSupported` (its trigger is the stream).
//! - Triggers of different engines are not ordered with each other.

#![deny(unsafe_op_in_unsafe_fn)]

pub mod cpu;
pub mod cuda;
pub mod event;
mod queue;

pub use cpu::CpuEe;
pub use cuda::CudaStreamEe;
pub use event::{EeType, Event, EventType};
pub use ferrocoll_core::{Ee, EeTrigger};
