//! The TCP transport: the fallback that reaches any two endpoints (the
//! router prefers in-process and shared memory where they reach).
//!
//! Design decisions:
//! - One connection per pair of endpoints, opened eagerly in `connect`: an
//!   endpoint connects to the peers above it and accepts those below it,
//!   all at once, retrying until `UCC_TL_P2P_TCP_CONNECT_TIMEOUT`. Both
//!   sides check a handshake (magic, version, job hash, both endpoints);
//!   connections of another job or from an unexpected endpoint, or that
//!   send no hello within 5 s of their accept, are refused and logged, and
//!   the wait goes on; past 64 (plus two per lower endpoint) connections
//!   waiting for their hello, the oldest are closed at once. A peer that
//!   accepts a connection and does not answer is waited for (it may not
//!   have reached its accept yet; closing would race with its answer),
//!   named with that reason in the deadline's error, and in the log after
//!   30 s — so a wait without a deadline (`inf`) still says what it waits
//!   for. `TCP_NODELAY`;
//!   every socket is non-blocking afterwards and no call waits on I/O. The
//!   listener is closed once `connect` is done.
//! - Address: `UCC_TL_P2P_TCP_ADDR` if set; else the local address that
//!   routes to `MASTER_ADDR` (listening on every interface); else 127.0.0.1
//!   (listening on loopback only).
//! - Frames (`wire.rs`): a 52-byte header (message key, payload length,
//!   kind DATA or GOODBYE, the sender's call signature) and the payload,
//!   little-endian. Everything read is length-checked: a corrupt frame
//!   fails that connection, naming the peer, never the process.
//! - Sends (`tx.rs`): a FIFO per peer. Payloads up to 16 KiB are copied
//!   into a coalescing buffer (a burst leaves in one system call; the send
//!   completes once the kernel has its bytes — at once unless the socket's
//!   buffer is full — so that a sender may close as soon as its sends are
//!   complete, and its close waits a little for room for its goodbye);
//!   larger ones are written straight from the
//!   sender's buffer by a vectored `sendmsg` (`MSG_NOSIGNAL`: a dead peer
//!   is an error, never a SIGPIPE) and complete once the kernel has every
//!   byte. A large send dropped early is retracted, or its unwritten rest
//!   copied, so the byte stream stays whole.
//! - Receives (`rx.rs`): the receiver pulls. `progress` polls every socket
//!   (one `poll`), reads whatever is there without blocking and files
//!   complete messages into a matching table per peer, FIFO per key;
//!   `try_recv` also reads its own peer's socket before matching. Large
//!   payloads are read straight into a message buffer (recycled through
//!   `pool.rs`), which the receive copies into the user's buffer (the
//!   sender's call signature must agree with the receive's, then the sizes
//!   must match exactly).
//! - Liveness: `close` (and drop) sends GOODBYE on every connection. A
//!   connection that ends without one (EOF, reset, a failed write, a
//!   corrupt frame) marks its peer dead: `failed` (one atomic load) says
//!   so, naming the endpoint. Messages filed before the end are still
//!   delivered; after them `try_recv` fails ("left" or the death). TCP
//!   keepalive (30 s idle, 6 probes 5 s apart, `sys.rs`) ends a connection
//!   to a host that vanished without a FIN or reset within about a minute.
//!
//! - Link emulation (`emulate.rs`, for testing and benchmarking only):
//!   `FERROCOLL_EMULATE_LINK` holds back messages from peers on other
//!   (emulated) hosts or switch groups by a latency and a bandwidth.
//!
//! Limits: host memory only; one connection per pair (no striping over
//! sockets or interfaces); a large message is copied twice on the receive
//! side (kernel to message buffer, then to the user's buffer: nothing is
//! registered before `try_recv`, so the kernel cannot write into the
//! user's buffer); `close` waits at most 2 s for room for its goodbye,
//! so a peer that reads nothing for longer sees a cut stream and reports
//! this endpoint dead; `UCC_TL_P2P_TCP_ADDR` is an IP address, not an
//! interface name; the handshake tells jobs apart but does not
//! authenticate.

mod config;
mod connect;
pub mod emulate;
mod listen;
mod peer;
mod pool;
mod rx;
mod sys;
mod transport;
mod tx;
mod wire;

#[cfg(test)]
mod tests;

pub use config::CONFIG_FIELDS;
pub use transport::TcpTransport;
