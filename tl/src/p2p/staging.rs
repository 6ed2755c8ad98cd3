//! Collectives on CUDA memory by staging through host memory.
//!
//! A collective whose buffers are CUDA device or managed memory runs the
//! host algorithm unchanged on host copies of its buffers: at each post the
//! inputs are copied device → host (pinned scratch from the CUDA memory
//! component, so the copies are DMA), the host algorithm runs on the copies
//! (transfers and reductions all on the host), and at completion the
//! outputs are copied host → device. Every algorithm, transport and team
//! shape of the p2p TL thereby works on CUDA memory, with the host's
//! results bit for bit.
//!
//! What is copied: every source buffer in, every destination buffer out;
//! a destination also in when the algorithm does not write all of it (in
//! place, or a v-variant whose blocks may leave gaps), so that copying it
//! back changes nothing it did not compute. Bcast's one buffer is the
//! root's input and everyone else's output.
//!
//! Limits, and the follow-up: the reductions run on the host, not as device
//! kernels, and the copies are whole-buffer and synchronous, not pipelined
//! with the transfers; a kernel-reduction path with pipelined staging
//! fragments is the next step for large messages. The copies do not block
//! the thread: they are started on the device and the task yields until
//! the device reports them done. A one-shot collective triggered on a CUDA
//! stream hands its copies to the stream engine instead
//! ([`Staging::engine_copies`]), which runs them on the user's stream around
//! the collective, so that nothing it needs waits on another stream.

use std::sync::Arc;
use std::task::Poll;

use ferrocoll_core::args::CollInit;
use ferrocoll_core::backend::{EngineCopies, Mc, McSet, Scratch};
use ferrocoll_core::engine::TaskDiag;
use ferrocoll_core::{CollType, Error, MemRef, MemType, Result, Status};

/// Memory types the p2p TL serves by staging, when the library has their component.
pub(crate) const STAGED: [MemType; 2] = [MemType::Cuda, MemType::CudaManaged];

/// One buffer's pair of homes.
struct Pair {
    /// The user's buffer (device or managed memory).
    user: MemRef,
    /// Its host copy.
    host: MemRef,
    /// Copy user → host at each post.
    copy_in: bool,
    /// Copy host → user at completion.
    copy_out: bool,
}

/// A collective's host copies: the host arguments the algorithm runs on,
/// and what to copy before and after.
pub(crate) struct Staging {
    host: Arc<CollInit>,
    pairs: Vec<Pair>,
    mc: Arc<dyn Mc>,
    /// Whether every host copy is the component's pinned memory (copies
    /// from and to it are asynchronous, so a stream may run them).
    pinned: bool,
    /// Owns the host copies (returned to their pool on drop).
    _scratch: Vec<Scratch>,
}

/// Whether the p2p TL stages `mem_type` in a library with `mcs`.
pub(crate) fn stages(mem_type: MemType, mcs: &McSet) -> bool {
    STAGED.contains(&mem_type) && mcs.get(mem_type).is_ok()
}

impl Staging {
    /// Host copies of `init`'s buffers (allocated once; a persistent
    /// request reuses them at every post), and `init`'s operands moved onto them.
    pub(crate) fn new(init: &CollInit, mcs: &McSet) -> Result<Staging> {
        let mc = mcs.get(init.mem_type)?.clone();
        let is_root = init.rank == init.root;
        let mut pairs = Vec::new();
        let mut scratch = Vec::new();
        let mut pinned = true;
        let mut host_copy = |user: Option<MemRef>, copy_in: bool, copy_out: bool| -> Result<Option<(MemRef, MemRef)>> {
            let Some(user) = user else { return Ok(None) };
            if user.mem_type() != init.mem_type {
                return Err(Error::not_supported(format!(
                    "p2p staging of {}: a buffer is {} memory, not {}",
                    init.coll,
                    user.mem_type(),
                    init.mem_type
                )));
            }
            let (s, is_pinned) = alloc_host(mc.as_ref(), mcs, user.len())?;
            pinned &= is_pinned;
            let host = s.mem();
            scratch.push(s);
            if !user.is_empty() && (copy_in || copy_out) {
                pairs.push(Pair { user, host, copy_in, copy_out });
            }
            Ok(Some((user, host)))
        };
        let (src, dst) = if init.coll == CollType::Bcast {
            (host_copy(init.src, is_root, !is_root)?, None)
        } else {
            (host_copy(init.src, true, false)?, host_copy(init.dst, !init.dst_fully_written, true)?)
        };
        let homes: Vec<(MemRef, MemRef)> = src.into_iter().chain(dst).collect();
        let ops = init.ops.map_mem(&|m| host_range(&homes, m))?;
        let host = Arc::new(CollInit {
            mem_type: MemType::Host,
            src: src.map(|(_, h)| h),
            dst: dst.map(|(_, h)| h),
            ops,
            ..init.clone()
        });
        Ok(Staging { host, pairs, mc, pinned, _scratch: scratch })
    }

    /// The copies of one execution, for an execution engine to run in its
    /// own order (see `EngineCopies`): only with pinned host copies, whose
    /// copies never block the thread that enqueues them. `keep` is this
    /// staging, which owns the host copies.
    pub(crate) fn engine_copies(self: &Arc<Self>) -> Option<EngineCopies> {
        if !self.pinned {
            return None;
        }
        let before = self.pairs.iter().filter(|p| p.copy_in).map(|p| (p.host, p.user)).collect();
        let after = self.pairs.iter().filter(|p| p.copy_out).map(|p| (p.user, p.host)).collect();
        Some(EngineCopies { before, after, keep: self.clone() })
    }

    /// The arguments the host algorithm runs on.
    pub(crate) fn host_init(&self) -> &Arc<CollInit> {
        &self.host
    }

    /// Copy the inputs to the host (at post).
    pub(crate) async fn copy_in(&self, diag: &TaskDiag) -> Result<()> {
        let copies = self.pairs.iter().filter(|p| p.copy_in).map(|p| (p.host, p.user));
        self.copy_all(copies, diag).await.map_err(|e| e.prefixed(format!("staging {} input", self.host.coll)))
    }

    /// Copy the outputs back (at completion).
    pub(crate) async fn copy_out(&self, diag: &TaskDiag) -> Result<()> {
        let copies = self.pairs.iter().filter(|p| p.copy_out).map(|p| (p.user, p.host));
        self.copy_all(copies, diag).await.map_err(|e| e.prefixed(format!("staging {} output", self.host.coll)))
    }

    /// Start every copy `(dst, src)`, then wait for them without blocking
    /// the thread: the task yields until the device has run them, and a
    /// copy that never finishes ends in the collective's timeout, which
    /// says what it waited for.
    async fn copy_all(&self, copies: impl Iterator<Item = (MemRef, MemRef)>, diag: &TaskDiag) -> Result<()> {
        // Dropping the started copies on an error waits for them (PendingCopy's drop).
        let mut pending = copies.map(|(dst, src)| self.mc.copy_start(dst, src)).collect::<Result<Vec<_>>>()?;
        // A copy that never finishes is, on a GPU, most often queued behind
        // a stream held for a triggered collective: CUDA maps a process's
        // streams onto CUDA_DEVICE_MAX_CONNECTIONS hardware queues (8 by
        // default), and work behind a stream wait on one queue waits with it
        // (measured on an H100: 3 ranks of one process hung at 8, ran at 32).
        diag.waiting_for_device(Some(
            "the GPU to finish the staging copies (if ranks of this process share a GPU and post on CUDA \
             streams, a copy can queue behind another stream's wait on one of the device's hardware queues: \
             set CUDA_DEVICE_MAX_CONNECTIONS=32 before CUDA starts)",
        ));
        let done = std::future::poll_fn(|_| {
            for copy in &mut pending {
                match copy.is_done() {
                    Ok(true) => {}
                    Ok(false) => return Poll::Pending,
                    Err(e) => return Poll::Ready(Err(e)),
                }
            }
            Poll::Ready(Ok(()))
        })
        .await;
        diag.waiting_for_device(None);
        done
    }
}

/// The host copy of `m`, a range of one of the user's buffers (`homes`:
/// each buffer with its host copy). Ranges of one buffer map into the same
/// copy, so in-place aliasing is kept.
fn host_range(homes: &[(MemRef, MemRef)], m: MemRef) -> Result<MemRef> {
    if m.is_empty() {
        return Ok(MemRef::empty(MemType::Host));
    }
    let at = m.addr() as usize;
    for (user, host) in homes {
        let start = user.addr() as usize;
        if let Some(off) = at.checked_sub(start) {
            if off.checked_add(m.len()).is_some_and(|end| end <= user.len()) {
                return host.range(off, m.len());
            }
        }
    }
    Err(Error::internal(format!("an operand of {} bytes lies outside the staged buffers", m.len())))
}

/// Host memory for staging: the component's pinned memory when it has
/// some (true), else ordinary host scratch (false: slower copies, same results).
fn alloc_host(mc: &dyn Mc, mcs: &McSet, len: usize) -> Result<(Scratch, bool)> {
    match mc.alloc_host(len) {
        Ok(s) => Ok((s, true)),
        Err(e) if e.status() == Status::NotSupported => Ok((mcs.get(MemType::Host)?.alloc(len)?, false)),
        Err(e) => Err(e.prefixed(format!("{} bytes of {} staging memory", len, mc.name()))),
    }
}
