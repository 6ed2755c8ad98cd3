//! Shared-memory transport between processes of one host.
//!
//! Each endpoint creates one POSIX shared-memory segment,
//! `/ferrocoll-<job>-<ep>-<nonce>-<owner>`, holding a receive ring per possible sender, a
//! table of rendezvous completion slots, and a header that peers check
//! (magic, version, owner pid) and read (is the owner open; can it read a
//! sender's memory with CMA). Peers map it at connect; the name is unlinked
//! as soon as every endpoint has connected, so a crash leaves nothing in
//! `/dev/shm` after that point; one before it is removed by the next
//! ferrocoll process's sweep (`shmem::sweep_stale`, at transport creation
//! and close), which reads the owner from the name.
//!
//! Receivers pull, as in the in-process transport: senders write records
//! into the receiver's ring for them, and the receiver drains every ring
//! into a matching table (FIFO per [`MsgKey`](crate::MsgKey)) whenever it is
//! progressed or polled, so no sender waits for a receive to be posted.
//! Every record carries its sender's call signature (`wire`); a receive
//! checks it against its own before it copies or reads anything.
//!
//! - Eager (up to `UCC_TL_P2P_SHM_EAGER_SIZE`): the payload is copied into
//!   the ring; the send completes at once. With the ring full, a copy waits
//!   in a per-destination FIFO that progress flushes (later sends queue
//!   behind it), and the send completes once the copy is in the ring: a
//!   sender that finished its collectives may close at once, since nothing
//!   they sent is left in its own memory.
//! - Rendezvous by CMA: the ring carries the buffer's address and a
//!   completion slot in the sender's segment; the receiver takes the slot
//!   (QUEUED → TAKEN), `process_vm_readv`s straight into the receive buffer
//!   (one copy) and marks it DONE (or FAILED); the send completes at DONE. A
//!   dropped send retracts a QUEUED slot (→ CANCELLED, which the receiver
//!   skips) or waits for a TAKEN one unless the receiver's process is gone
//!   (or, 10 s on, retracts that too: the receiver then fails its receive).
//! - Fragments, when the receiver cannot CMA-read the sender (Yama, seccomp,
//!   containers) or `UCC_TL_P2P_SHM_CMA=n`: the message is streamed through
//!   the ring in order as space frees and reassembled by the receiver; a
//!   send dropped midway copies its unsent rest so the stream stays whole.
//!
//! Whether endpoint `r` can CMA-read sender `s` is probed once, at connect
//! (`r` reads a word of `s`'s header through `s`'s address space), and
//! published in `r`'s header for `s` to read. With CMA on, creating the
//! transport calls `prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY)`, so that on
//! hosts with Yama `ptrace_scope=1` the job's other processes (same user)
//! may read this one; it has no effect elsewhere.
//!
//! Files: `wire` (every byte layout and its checked parsing), `segment`
//! (this endpoint's segment and its peers', on [`crate::shmem`]), `ring`
//! (the SPSC byte ring), `health` (what is known of each peer), `send`
//! (outboxes, streams, slots, handles), `recv` (draining and matching),
//! `peer`, `pool`, `config`, and `transport`, which ties them into the
//! [`Transport`](crate::Transport).
//!
//! Liveness: every 50 ms at most, progress checks each peer's segment state
//! and process ([`crate::liveness::Proc`]: pidfd, else `kill(pid, 0)` and
//! `/proc/<pid>/stat`); a peer whose process is gone without having closed
//! cleanly is reported by `failed`. Messages it sent before dying are still
//! delivered.
//!
//! Limits: host memory only. Rings are sparse: `/dev/shm` allocates a page
//! when it is first written, so memory grows with the traffic between each
//! pair, up to the ring size; a `/dev/shm` too small for one whole segment
//! turns the transport off, but several endpoints filling their rings at
//! once on a tiny `/dev/shm` (containers default to 64 MiB) can still
//! exhaust it. Nothing blocks, except dropping a rendezvous send while the
//! receiver copies from it (a bounded memcpy, waited for 10 s at most).

mod config;
mod health;
mod peer;
mod pool;
mod recv;
mod ring;
mod segment;
mod send;
mod transport;
mod wire;

#[cfg(test)]
mod forged_slot_tests;
#[cfg(test)]
mod tests;

use ferrocoll_core::config::ConfigField;

pub use transport::ShmTransport;

/// Configuration variables of this transport.
pub const CONFIG_FIELDS: &[ConfigField] = config::FIELDS;
