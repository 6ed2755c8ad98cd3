//! # ferrocoll-transport
//!
//! How ferrocoll's processes reach each other, below the transport layers
//! (TLs) that run collectives over it:
//!
//! - **Point-to-point transports** behind one interface ([`Transport`]:
//!   tagged sends and pulled receives between the endpoints of a context):
//!   [`InProcTransport`] (threads of one process), [`shm::ShmTransport`]
//!   (processes of one host: rings for eager messages, single-copy CMA for
//!   large ones), [`tcp::TcpTransport`] (any two hosts), and the [`Router`]
//!   that picks one per peer by where the peer runs. The p2p TL's algorithms
//!   run over the router.
//! - **The TCP bootstrap** ([`TcpOob`]): an [`Oob`](ferrocoll_core::Oob)
//!   whose store runs at rank 0 and that reads the launchers' variables
//!   (ferrocoll-run, torchrun, mpirun, srun).
//! - **Shared memory** ([`shmem`]): the one layer that names, creates
//!   (exclusively, after a space check), opens (checking owner and mode),
//!   maps (with checked bounds) and unlinks segments in `/dev/shm`, used by
//!   the shm transport, the shm TL's team segments and the launcher's
//!   cleanup.
//! - **Liveness** ([`liveness`]): whether a peer process still runs (pidfd,
//!   else `kill(pid, 0)` and `/proc/<pid>/stat` against reused pids).
//!
//! Depends on `ferrocoll-core` (errors, `MemRef`, `ProcInfo`, configuration,
//! the `Oob` trait, wire readers, logging) and `libc`; nothing above it.
//!
//! Design decisions:
//! - Receivers pull: a receive asks its transport for the message when
//!   polled, so nothing is registered and cancelling is dropping.
//! - Messages that arrive before their receive wait in an unexpected queue
//!   (FIFO per [`MsgKey`]), so a fast rank may run ahead and no sender waits
//!   for a receive to be posted.
//! - Large messages go by rendezvous: the receiver copies from the sender's
//!   buffer (CMA on one host, straight `sendmsg` from it over TCP), and the
//!   send completes when that copy is done.
//! - A peer that dies is noticed by its transport (process checks for shared
//!   memory, a broken connection for TCP) and reported by
//!   [`Transport::failed`], naming it, so collectives fail instead of hanging.
//! - Everything another process wrote (segment headers, ring records,
//!   frames) is parsed with length and range checks: corrupt input is an
//!   error, never a panic.
//!
//! Limits: host memory only (device memory is staged by the TL above);
//! Linux only (`/dev/shm`, pidfd, `process_vm_readv`); no RDMA transport yet;
//! a rank that loses its bootstrap or TCP connection cannot rejoin.

#![deny(unsafe_op_in_unsafe_fn)]

mod bootstrap;
mod cause;
pub mod cma;
mod fxhash;
mod inproc;
pub mod liveness;
mod p2p;
mod router;
pub mod shm;
pub mod shmem;
pub mod tcp;
#[cfg(test)]
mod testing;

pub use bootstrap::{TcpOob, TcpOobParams};
pub use inproc::InProcTransport;
pub use p2p::{CallsDiffer, MsgKey, SendHandle, Transport, TransportPeer};
pub use router::Router;
