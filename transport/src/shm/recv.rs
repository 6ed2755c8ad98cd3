//! The receiving side: draining every sender's ring into a matching table
//! (FIFO per key), and delivering a match into the receive buffer.
//!
//! Draining does not wait for receives: every ring is emptied whenever the
//! transport is progressed or polled, so no sender is blocked behind a
//! message nobody asked for yet. Eager payloads are copied out, fragments are
//! reassembled, and rendezvous descriptors wait for their receive, which
//! reads the sender's buffer itself. Each arrived message keeps its
//! sender's call signature, which delivery checks before it copies anything.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use ferrocoll_core::args::Signature;
use ferrocoll_core::{Error, MemRef, Result};

use super::peer::Peer;
use super::pool::BufPool;
use super::ring::Consumer;
use super::wire::{Kind, RECORD_HEADER, RNDV_DESC, Record, RndvDesc, record_len, slot};
use crate::cma;
use crate::fxhash::FxBuildHasher;
use crate::p2p::MsgKey;

/// A message that arrived and waits for its receive, with its sender's call.
pub(super) enum Arrived {
    /// Its bytes (eager or reassembled).
    Bytes(Signature, Vec<u8>),
    /// Where to read it from; its slot is TAKEN by the time `take` returns it.
    Rndv { peer: Arc<Peer>, sig: Signature, len: usize, desc: RndvDesc },
}

impl Arrived {
    fn sig(&self) -> Signature {
        match self {
            Arrived::Bytes(sig, _) | Arrived::Rndv { sig, .. } => *sig,
        }
    }
}

/// A fragmented message being reassembled: `buf` has capacity for `total`
/// bytes, of which the first `filled` are written (its length stays 0 until
/// all are).
struct Partial {
    key: MsgKey,
    sig: Signature,
    buf: Vec<u8>,
    total: usize,
    filled: usize,
}

/// One sender's ring, as this endpoint reads it.
pub(super) struct Inbound {
    ring: Consumer,
    peer: Arc<Peer>,
    partial: Option<Partial>,
    broken: bool,
}

impl Inbound {
    /// Read `peer`'s messages from `ring`.
    pub fn new(ring: Consumer, peer: Arc<Peer>) -> Inbound {
        Inbound { ring, peer, partial: None, broken: false }
    }
}

type Table = HashMap<MsgKey, VecDeque<Arrived>, FxBuildHasher>;

/// Everything received and not matched yet.
#[derive(Default)]
pub(super) struct RecvState {
    inbound: Vec<Inbound>,
    table: Table,
}

impl RecvState {
    /// Read these senders.
    pub fn new(inbound: Vec<Inbound>) -> RecvState {
        RecvState { inbound, table: Table::default() }
    }

    /// Move every published record of every ring into the table. A ring that
    /// holds something corrupt is abandoned and its sender marked broken.
    pub fn drain(&mut self, pool: &BufPool) {
        let table = &mut self.table;
        for inb in self.inbound.iter_mut().filter(|i| !i.broken) {
            if let Err(e) = drain_one(inb, table, pool) {
                inb.broken = true;
                let ep = inb.peer.ep;
                inb.peer.health.set_broken(format!("endpoint {ep} sent a corrupt message: {}", e.context()));
            }
        }
    }

    /// See [`Transport::find_arrived`](crate::Transport::find_arrived).
    pub fn find(&self, pick: &dyn Fn(&MsgKey, &Signature) -> bool) -> Option<(MsgKey, Signature)> {
        self.table.iter().find_map(|(k, v)| v.iter().map(Arrived::sig).find(|theirs| pick(k, theirs)).map(|s| (*k, s)))
    }

    /// The first live message for `key`, taken (cancelled rendezvous are skipped).
    pub fn take(&mut self, key: &MsgKey) -> Option<Arrived> {
        let queue = self.table.get_mut(key)?;
        let mut found = None;
        while let Some(a) = queue.pop_front() {
            if let Arrived::Rndv { peer, desc, .. } = &a {
                let Ok(word) = peer.slot(desc.slot) else { continue };
                let queued = slot::word(desc.generation, slot::QUEUED);
                // The sender's writes before it posted (its buffer) happen
                // before our read through the ring: its Release push of the
                // descriptor, our Acquire pop (QUEUED itself is stored
                // Relaxed; this CAS's Acquire adds nothing). Failure: the
                // sender cancelled it (or a newer message reuses the slot): skip it.
                let taken = slot::word(desc.generation, slot::TAKEN);
                if word.compare_exchange(queued, taken, Ordering::Acquire, Ordering::Relaxed).is_err() {
                    continue;
                }
            }
            found = Some(a);
            break;
        }
        if queue.is_empty() {
            self.table.remove(key);
        }
        found
    }

    /// Closing: reject every rendezvous still queued here, so their senders complete with an error.
    pub fn reject_all(&mut self, pool: &BufPool) {
        self.drain(pool);
        for a in self.table.drain().flat_map(|(_, q)| q) {
            match a {
                Arrived::Bytes(_, v) => pool.put(v),
                Arrived::Rndv { peer, desc, .. } => {
                    if let Ok(word) = peer.slot(desc.slot) {
                        let queued = slot::word(desc.generation, slot::QUEUED);
                        // Release: nothing of ours is published; the CAS only
                        // fails if the sender cancelled first, which is fine.
                        let failed = slot::word(desc.generation, slot::FAILED_CLOSED);
                        let _ = word.compare_exchange(queued, failed, Ordering::Release, Ordering::Relaxed);
                    }
                }
            }
        }
    }
}

fn corrupt(what: String) -> Error {
    Error::io(what)
}

/// Drain one ring.
fn drain_one(inb: &mut Inbound, table: &mut Table, pool: &BufPool) -> Result<()> {
    loop {
        let avail = inb.ring.readable()?;
        if avail == 0 {
            return Ok(());
        }
        if avail < RECORD_HEADER {
            return Err(corrupt(format!("{avail} bytes published, less than a record header")));
        }
        let mut hb = [0u8; RECORD_HEADER];
        inb.ring.peek(0, &mut hb);
        let rec = Record::parse(&hb)?;
        let chunk = rec.chunk_len as usize;
        let len = record_len(chunk);
        if len > avail {
            return Err(corrupt(format!("a record of {len} bytes, but {avail} published")));
        }
        match rec.kind {
            Kind::Eager => {
                let mut v = pool.get(chunk);
                v.resize(chunk, 0);
                inb.ring.peek(RECORD_HEADER, &mut v);
                table.entry(rec.key).or_default().push_back(Arrived::Bytes(rec.sig, v));
            }
            Kind::RndvCma => {
                let mut d = [0u8; RNDV_DESC];
                inb.ring.peek(RECORD_HEADER, &mut d);
                let desc = RndvDesc::parse(&d)?;
                if desc.pid != inb.peer.proc.pid {
                    return Err(corrupt(format!("a rendezvous from pid {}, not {}", desc.pid, inb.peer.proc.pid)));
                }
                inb.peer.slot(desc.slot)?;
                let arrived = Arrived::Rndv { peer: inb.peer.clone(), sig: rec.sig, len: rec.total_len as usize, desc };
                table.entry(rec.key).or_default().push_back(arrived);
            }
            Kind::Frag => {
                if let Some(done) = reassemble(inb, &rec)? {
                    table.entry(rec.key).or_default().push_back(Arrived::Bytes(rec.sig, done));
                }
            }
        }
        inb.ring.consume(len);
    }
}

/// Add fragment `rec` (whose bytes follow its header in the ring); the whole
/// message once its last fragment is in.
fn reassemble(inb: &mut Inbound, rec: &Record) -> Result<Option<Vec<u8>>> {
    let total = rec.total_len as usize;
    if rec.offset == 0 {
        if let Some(p) = &inb.partial {
            return Err(corrupt(format!("a new message began after {} of {} bytes of the last", p.filled, p.total)));
        }
        // Not zeroed: fragments fill it in order, and its length is set once all are in.
        let mut buf = Vec::new();
        buf.try_reserve_exact(total)
            .map_err(|e| Error::no_memory(format!("reassembling a message of {total} bytes: {e}")))?;
        inb.partial = Some(Partial { key: rec.key, sig: rec.sig, buf, total, filled: 0 });
    }
    let Some(p) = inb.partial.as_mut() else {
        return Err(corrupt(format!("a fragment at offset {} of a message never begun", rec.offset)));
    };
    if p.key != rec.key || p.sig != rec.sig || p.total != total || p.filled as u64 != rec.offset {
        return Err(corrupt(format!(
            "a fragment at offset {} of {total} bytes, expected offset {} of {}",
            rec.offset, p.filled, p.total
        )));
    }
    let end = p.filled + rec.chunk_len as usize;
    // In range: Record::parse checked offset + chunk <= total, and total <= capacity.
    let Some(dst) = p.buf.spare_capacity_mut().get_mut(p.filled..end) else {
        return Err(corrupt(format!("fragment end {end} past {total}")));
    };
    inb.ring.peek_uninit(RECORD_HEADER, dst);
    p.filled = end;
    if p.filled < p.total {
        return Ok(None);
    }
    let Some(mut p) = inb.partial.take() else { return Ok(None) };
    // SAFETY: p.total <= capacity (reserved), and bytes 0..p.total are
    // initialised: each fragment was written at offset `filled` (checked equal
    // to its offset) and advanced `filled` by its length, up to `total`.
    unsafe { p.buf.set_len(p.total) };
    Ok(Some(p.buf))
}

/// Copy `a` into `buf` (host memory, checked by the caller) if its sender's
/// call agrees with `sig` (checked first) and its size with `buf`'s,
/// completing a rendezvous sender with DONE or a failure state.
pub(super) fn deliver(a: Arrived, key: &MsgKey, sig: &Signature, buf: MemRef, pool: &BufPool) -> Result<()> {
    match a {
        Arrived::Bytes(theirs, v) => {
            let r = if !theirs.agrees(sig) {
                Err(key.calls_differ(&theirs, sig))
            } else if v.len() != buf.len() {
                Err(key.size_mismatch(v.len(), buf.len()))
            } else {
                // SAFETY: `buf` is the receive's host buffer (checked by the
                // caller), valid and exclusively ours while try_recv runs, and
                // of the same length as `v`, a distinct allocation.
                unsafe { buf.as_mut_slice() }.copy_from_slice(&v);
                Ok(())
            };
            pool.put(v);
            r
        }
        Arrived::Rndv { peer, sig: theirs, len, desc } => {
            let (state, r) = if !theirs.agrees(sig) {
                (slot::FAILED_CALL, Err(key.calls_differ(&theirs, sig)))
            } else if len != buf.len() {
                (slot::FAILED_SIZE, Err(key.size_mismatch(len, buf.len())))
            } else {
                // SAFETY: as above for `buf`; the kernel reads the sender's
                // buffer, which the sender keeps valid while the slot is TAKEN
                // (its handle's drop waits for DONE).
                let dst = unsafe { buf.as_mut_slice() };
                match cma::read(desc.pid, desc.addr, dst) {
                    Ok(()) => (slot::DONE, Ok(())),
                    Err(e) => (
                        slot::FAILED_READ,
                        Err(Error::io(format!(
                            "reading {len} bytes from endpoint {} (pid {}) failed: {e}",
                            peer.ep, desc.pid
                        ))),
                    ),
                }
            };
            let word = peer.slot(desc.slot)?;
            let taken = slot::word(desc.generation, slot::TAKEN);
            // Release: our read of the sender's buffer happens before its
            // Acquire load of DONE lets it reuse the buffer. A CAS, not a
            // store: a sender that saw us die, or waited too long for us
            // (`send::TAKEN_PATIENCE`), moved on and owns the slot.
            let marked =
                word.compare_exchange(taken, slot::word(desc.generation, state), Ordering::Release, Ordering::Relaxed);
            match marked {
                // The slot was not TAKEN under this message any more: its
                // sender may have reused its buffer while we read, so what
                // we read is not its data.
                Err(now) if r.is_ok() => Err(Error::io(format!(
                    "endpoint {} retracted a message of {len} bytes while this endpoint read it (its completion slot \
                     {} reads {now:#x}, not TAKEN under generation {})",
                    peer.ep, desc.slot, desc.generation
                ))),
                _ => r,
            }
        }
    }
}
