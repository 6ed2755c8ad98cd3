//! The sending side: per-destination outboxes (the ring, and a FIFO of what
//! waits for ring space), fragment streams, the completion slots of
//! rendezvous sends, and the send handles.
//!
//! Order per destination is kept by one rule: once something waits in an
//! outbox, everything after it waits behind it.
//!
//! A rendezvous completion slot is a `u64` in the sender's segment,
//! `generation << 8 | state`:
//!
//! ```text
//! sender, at send:               (free) -> QUEUED(g)          (fresh generation g)
//! receiver, before reading:      QUEUED(g) -> TAKEN(g)        (CAS; a failed CAS = retracted: skip)
//! receiver, after reading:       TAKEN(g) -> DONE | FAILED_READ                 (CAS, Release; failed: an error)
//! receiver, refusing:            TAKEN(g) -> FAILED_CALL | FAILED_SIZE          (CAS; nothing read)
//! receiver, closing:             QUEUED(g) -> FAILED_CLOSED   (CAS)
//! sender, dropped or peer gone:  QUEUED(g) -> CANCELLED       (CAS)
//! sender, dropped, 10 s TAKEN:   TAKEN(g) -> CANCELLED        (CAS; the receiver's last CAS fails: its receive too)
//! ```
//!
//! The sender frees the slot once it has seen a final state or won the
//! cancel (or the receiver's process is gone), and bumps the generation on
//! reuse, so a stale descriptor can never take a newer message's slot.
//!
//! Lock order: an outbox, then a stream.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::{Duration, Instant};

use ferrocoll_core::args::Signature;
use ferrocoll_core::engine::Backoff;
use ferrocoll_core::{Error, MemRef, Result};

use super::peer::{Peer, lock};
use super::pool::BufPool;
use super::ring::Producer;
use super::transport::Shared;
use super::wire::{Kind, RECORD_HEADER, Record, slot};
use crate::p2p::{MsgKey, SendHandle};
use crate::shmem::Mapping;

/// Smallest fragment pushed while more remains (smaller ones would waste headers).
const MIN_FRAG: usize = 1024;

/// What waits for ring space.
enum Pending {
    /// A whole record (eager message or rendezvous descriptor), and the
    /// flag its send handle watches, set once the record is in the ring.
    Record(Vec<u8>, Arc<AtomicBool>),
    /// A message still being streamed.
    Frag(Arc<Mutex<FragStream>>),
}

/// Messages to one destination.
pub(super) struct Outbox {
    ring: Producer,
    queue: VecDeque<Pending>,
    /// Whether this outbox is counted in the transport's count of non-empty outboxes.
    counted: bool,
}

impl Outbox {
    /// An outbox writing into `ring`.
    pub fn new(ring: Producer) -> Outbox {
        Outbox { ring, queue: VecDeque::new(), counted: false }
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Push what waits, in order, as far as ring space allows.
    pub fn flush(&mut self, pool: &BufPool) -> Result<()> {
        while let Some(front) = self.queue.front() {
            let finished = match front {
                Pending::Record(v, _) => self.ring.push(&[v])?,
                Pending::Frag(s) => lock(s).push_some(&mut self.ring)?,
            };
            if !finished {
                break;
            }
            if let Some(Pending::Record(v, pushed)) = self.queue.pop_front() {
                // Release: nothing to publish but the fact; the handle only reads it.
                pushed.store(true, Ordering::Release);
                pool.put(v);
            }
        }
        Ok(())
    }

    /// Send a record made of `parts` now if nothing waits and it fits
    /// (`None`), else queue a copy: `Some` flag, set once the copy is in
    /// the ring.
    pub fn post(&mut self, parts: &[&[u8]], pool: &BufPool) -> Result<Option<Arc<AtomicBool>>> {
        self.flush(pool)?;
        if self.queue.is_empty() && self.ring.push(parts)? {
            return Ok(None);
        }
        let mut v = pool.get(parts.iter().map(|p| p.len()).sum());
        parts.iter().for_each(|p| v.extend_from_slice(p));
        let pushed = Arc::new(AtomicBool::new(false));
        self.queue.push_back(Pending::Record(v, pushed.clone()));
        Ok(Some(pushed))
    }

    /// Start streaming a message.
    pub fn post_stream(&mut self, s: Arc<Mutex<FragStream>>, pool: &BufPool) -> Result<()> {
        self.queue.push_back(Pending::Frag(s));
        self.flush(pool)
    }

    /// Drop everything that waits (the destination is gone), failing streams with `err`.
    pub fn abandon(&mut self, err: &Error, pool: &BufPool) {
        for p in self.queue.drain(..) {
            match p {
                Pending::Record(v, _) => pool.put(v),
                Pending::Frag(s) => lock(&s).fail(err),
            }
        }
    }

    /// Keep `nonempty` (the transport's count of outboxes with something waiting) in step.
    pub fn sync(&mut self, nonempty: &AtomicUsize) {
        let now = !self.queue.is_empty();
        if now != self.counted {
            // Relaxed: a hint that lets progress skip idle outboxes; each outbox is read under its lock.
            if now {
                nonempty.fetch_add(1, Ordering::Relaxed);
            } else {
                nonempty.fetch_sub(1, Ordering::Relaxed);
            }
            self.counted = now;
        }
    }
}

/// Where a stream's bytes come from.
enum Source {
    /// The sender's buffer, valid while its handle lives.
    Borrowed(MemRef),
    /// A copy of the bytes from `base` on, made when the handle was dropped.
    Owned { bytes: Vec<u8>, base: usize },
}

/// A message streamed through the ring in fragments.
pub(super) struct FragStream {
    key: MsgKey,
    sig: Signature,
    total: usize,
    sent: usize,
    max_chunk: usize,
    src: Source,
    error: Option<Error>,
}

impl FragStream {
    /// A stream of `data` under `key` for call `sig`, in fragments of at most `max_chunk` bytes.
    pub fn new(key: MsgKey, sig: Signature, data: MemRef, max_chunk: usize) -> FragStream {
        FragStream { key, sig, total: data.len(), sent: 0, max_chunk, src: Source::Borrowed(data), error: None }
    }

    fn bytes(&self, from: usize, len: usize) -> &[u8] {
        match &self.src {
            Source::Borrowed(m) => {
                // SAFETY: the sender keeps its buffer valid and unmodified until
                // the handle completes or drops; the handle's drop replaces this
                // source with an owned copy under the lock we hold, so a Borrowed
                // source always has a live handle. from + len <= total (callers).
                let all = unsafe { m.as_slice() };
                all.get(from..from + len).unwrap_or(&[])
            }
            Source::Owned { bytes, base } => from.checked_sub(*base).and_then(|s| bytes.get(s..s + len)).unwrap_or(&[]),
        }
    }

    /// Push fragments while ring space allows; `Ok(true)` once all are pushed.
    fn push_some(&mut self, ring: &mut Producer) -> Result<bool> {
        if self.error.is_some() {
            return Ok(true);
        }
        while self.sent < self.total {
            let rest = self.total - self.sent;
            let room = ring.free()?.saturating_sub(RECORD_HEADER) & !7;
            let chunk = rest.min(self.max_chunk).min(room);
            // Wait for room for a useful fragment: the rest, a whole chunk, or MIN_FRAG.
            if chunk < rest.min(self.max_chunk).min(MIN_FRAG) || chunk == 0 {
                return Ok(false);
            }
            let rec = Record {
                kind: Kind::Frag,
                key: self.key,
                sig: self.sig,
                chunk_len: chunk as u32,
                total_len: self.total as u64,
                offset: self.sent as u64,
            };
            let payload = self.bytes(self.sent, chunk);
            if payload.len() != chunk || !ring.push(&[&rec.encode(), payload])? {
                return Err(Error::internal(format!("fragment of {chunk} bytes at {} did not go out", self.sent)));
            }
            self.sent += chunk;
        }
        Ok(true)
    }

    /// Copy what is not sent yet, so the stream outlives the sender's buffer.
    fn detach(&mut self) {
        if let Source::Borrowed(_) = self.src {
            let bytes =
                if self.error.is_some() { Vec::new() } else { self.bytes(self.sent, self.total - self.sent).to_vec() };
            self.src = Source::Owned { bytes, base: self.sent };
        }
    }

    fn fail(&mut self, err: &Error) {
        if self.sent < self.total && self.error.is_none() {
            self.error = Some(err.duplicate());
        }
    }

    fn outcome(&self) -> Option<Result<()>> {
        match &self.error {
            Some(e) => Some(Err(e.duplicate())),
            None => (self.sent == self.total).then_some(Ok(())),
        }
    }
}

/// This endpoint's completion slots (in its own segment) and which are free.
pub(super) struct Slots {
    map: Arc<Mapping>,
    off: usize,
    n: u32,
    free: Mutex<Vec<u32>>,
}

/// Generations wrap at 56 bits.
const GEN_MASK: u64 = (1 << 56) - 1;

impl Slots {
    /// The `n` slots at `off` in `map`, all free.
    pub fn new(map: Arc<Mapping>, off: usize, n: u32) -> Slots {
        Slots { map, off, n, free: Mutex::new((0..n).rev().collect()) }
    }

    /// Slot `i`'s word.
    pub fn word(&self, i: u32) -> Result<&AtomicU64> {
        if i >= self.n {
            return Err(Error::internal(format!("completion slot {i} of {}", self.n)));
        }
        self.map.u64_at(self.off + 8 * i as usize)
    }

    /// A free slot, set QUEUED under a fresh generation; `None` if all are in use.
    pub fn alloc(&self) -> Option<(u32, u64)> {
        let i = lock(&self.free).pop()?;
        let Ok(w) = self.word(i) else { return None };
        // Relaxed: a free slot is written by no one else (the receiver writes
        // only under a generation it saw QUEUED, and every such write happened
        // before we observed the final state and freed the slot).
        let (g, _) = slot::split(w.load(Ordering::Relaxed));
        let generation = (g + 1) & GEN_MASK;
        // Relaxed: the receiver learns of the slot from the ring record, whose
        // Release store of tail publishes this store too.
        w.store(slot::word(generation, slot::QUEUED), Ordering::Relaxed);
        Some((i, generation))
    }

    /// Give slot `i` back.
    pub fn release(&self, i: u32) {
        lock(&self.free).push(i);
    }
}

/// An eager send whose record went into the ring: complete.
pub(super) struct Sent;

impl SendHandle for Sent {
    fn test(&mut self) -> Poll<Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// An eager send whose record waits in the outbox for ring space: complete
/// once the record is in the destination's ring. Completing it at once
/// (the bytes are copied) would let a sender finish its collectives and
/// close while what they sent still sat in its own memory, lost with it —
/// and the receiver would take a peer that did its part for a failure.
pub(super) struct QueuedEager {
    pub shared: Arc<Shared>,
    pub peer: Arc<Peer>,
    pub pushed: Arc<AtomicBool>,
}

impl QueuedEager {
    fn is_pushed(&self) -> bool {
        // Acquire: pairs with the Release in `Outbox::flush`.
        self.pushed.load(Ordering::Acquire)
    }
}

impl SendHandle for QueuedEager {
    fn test(&mut self) -> Poll<Result<()>> {
        if self.is_pushed() {
            return Poll::Ready(Ok(()));
        }
        self.shared.flush_peer(&self.peer);
        if self.is_pushed() {
            return Poll::Ready(Ok(()));
        }
        // A destination that is gone had the record dropped from the outbox.
        if let Some(e) = self.peer.gone() {
            return Poll::Ready(Err(e));
        }
        self.shared.maybe_scan();
        Poll::Pending
    }
}

/// A rendezvous send: complete when the receiver has read the buffer.
pub(super) struct RndvSend {
    pub shared: Arc<Shared>,
    pub peer: Arc<Peer>,
    pub slot: u32,
    pub generation: u64,
    pub key: MsgKey,
    pub outcome: Option<Result<()>>,
}

impl RndvSend {
    fn finish(&mut self, r: Result<()>) -> Poll<Result<()>> {
        self.shared.slots.release(self.slot);
        let out = match &r {
            Ok(()) => Ok(()),
            Err(e) => Err(e.duplicate()),
        };
        self.outcome = Some(r);
        Poll::Ready(out)
    }

    fn what(&self) -> String {
        format!("a message of seq {} step tag {} (slot {})", self.key.seq, self.key.tag, self.slot)
    }
}

impl SendHandle for RndvSend {
    fn test(&mut self) -> Poll<Result<()>> {
        if let Some(o) = &self.outcome {
            return Poll::Ready(o.as_ref().map(|_| ()).map_err(Error::duplicate));
        }
        let word = match self.shared.slots.word(self.slot) {
            Ok(w) => w,
            Err(e) => return self.finish(Err(e)),
        };
        loop {
            // Acquire: pairs with the receiver's Release after its read, so the
            // buffer may be reused once DONE is seen.
            let w = word.load(Ordering::Acquire);
            let (generation, state) = slot::split(w);
            if generation != self.generation {
                return self.finish(Err(Error::internal(format!("{} changed generation", self.what()))));
            }
            match state {
                slot::DONE => return self.finish(Ok(())),
                slot::QUEUED => {
                    let Some(e) = self.peer.gone() else {
                        // The descriptor may still wait for ring space.
                        self.shared.flush_peer(&self.peer);
                        self.shared.maybe_scan();
                        return Poll::Pending;
                    };
                    // The receiver will not take it any more: retract it.
                    // Relaxed: on success the receiver never reads the buffer.
                    let cancelled = slot::word(generation, slot::CANCELLED);
                    if word.compare_exchange(w, cancelled, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
                        return self.finish(Err(e));
                    }
                }
                // The receiver is copying from our buffer: it must outlive the
                // copy. Only a receiver whose process is gone will not finish
                // it; one that is merely broken (its ring unreadable to us)
                // may still be reading, and marks the slot when done.
                slot::TAKEN => match self.peer.health.failure() {
                    // It may have finished the copy, marked the slot and then
                    // exited since the load above: the slot decides.
                    Some(e) if self.peer.proc.gone() => {
                        let done = word.load(Ordering::Acquire) == slot::word(generation, slot::DONE);
                        return self.finish(if done { Ok(()) } else { Err(e) });
                    }
                    _ => {
                        self.shared.maybe_scan();
                        return Poll::Pending;
                    }
                },
                s => {
                    let e = self.peer.rejection(s, &self.what());
                    return self.finish(Err(e));
                }
            }
        }
    }
}

/// How long a dropped rendezvous send waits for a receiver that took it
/// and still runs: its read is one `process_vm_readv` (well under a second
/// for the largest message), so a slot TAKEN for longer was written by
/// something else (the slot is in shared memory) or belongs to a stopped
/// process. The sender then retracts it (TAKEN → CANCELLED), and a receiver
/// still reading fails its receive rather than deliver what the buffer
/// holds by then (`recv::deliver`).
pub(super) const TAKEN_PATIENCE: Duration = Duration::from_secs(10);

impl Drop for RndvSend {
    fn drop(&mut self) {
        if self.outcome.is_some() {
            return;
        }
        let Ok(word) = self.shared.slots.word(self.slot) else { return };
        let mut backoff = Backoff::new();
        let mut polls = 0u32;
        let start = Instant::now();
        loop {
            // Acquire: as in test().
            let w = word.load(Ordering::Acquire);
            let (generation, state) = slot::split(w);
            // Only this send and its receiver write the slot under its
            // generation: another one is not a state of this message (the
            // word was overwritten), and nothing is left to wait for.
            if generation != self.generation {
                ferrocoll_core::log_warn!(
                    "shm: {} to endpoint {}: its completion slot holds generation {generation}, not {} (corrupt)",
                    self.what(),
                    self.peer.ep,
                    self.generation
                );
                break;
            }
            match state {
                slot::QUEUED => {
                    let cancelled = slot::word(generation, slot::CANCELLED);
                    // Relaxed: see test().
                    if word.compare_exchange(w, cancelled, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
                        break;
                    }
                }
                // The receiver is copying from our buffer: it must outlive the
                // copy, so wait, unless the receiver's process is gone or the
                // copy takes far longer than any copy does.
                slot::TAKEN => {
                    polls = polls.wrapping_add(1);
                    if polls.is_multiple_of(1024) && self.peer.proc.gone() {
                        ferrocoll_core::log_debug!("shm: endpoint {} died while reading {}", self.peer.ep, self.what());
                        break;
                    }
                    if polls.is_multiple_of(1024) && start.elapsed() > TAKEN_PATIENCE {
                        let cancelled = slot::word(generation, slot::CANCELLED);
                        // Relaxed: a receiver whose final CAS fails on it
                        // discards what it read; a failed CAS here (it just
                        // finished) is looked at again.
                        if word.compare_exchange(w, cancelled, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
                            ferrocoll_core::log_warn!(
                                "shm: {} to endpoint {} was still TAKEN after {} s: retracted",
                                self.what(),
                                self.peer.ep,
                                TAKEN_PATIENCE.as_secs()
                            );
                            break;
                        }
                    }
                    backoff.snooze();
                }
                _ => break,
            }
        }
        self.shared.slots.release(self.slot);
    }
}

/// A fragmented send: complete when its last fragment is in the ring.
pub(super) struct FragSend {
    pub shared: Arc<Shared>,
    pub peer: Arc<Peer>,
    pub stream: Arc<Mutex<FragStream>>,
}

impl SendHandle for FragSend {
    fn test(&mut self) -> Poll<Result<()>> {
        if let Some(r) = lock(&self.stream).outcome() {
            return Poll::Ready(r);
        }
        // Lock order: outbox, then stream (flush takes both).
        self.shared.flush_peer(&self.peer);
        if let Some(r) = lock(&self.stream).outcome() {
            return Poll::Ready(r);
        }
        self.shared.maybe_scan();
        Poll::Pending
    }
}

impl Drop for FragSend {
    fn drop(&mut self) {
        lock(&self.stream).detach();
    }
}
