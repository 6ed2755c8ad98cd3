//! A connected peer: its mapped segment, the ring this endpoint writes
//! there (behind the outbox lock), and what is known of its health.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use ferrocoll_core::{Error, Result};

use super::health::Health;
use super::segment::PeerSegment;
use super::send::Outbox;
use super::wire::{self, slot};
use crate::liveness::Proc;

/// One peer of this endpoint.
pub(super) struct Peer {
    /// Its endpoint index.
    pub ep: usize,
    /// Its process.
    pub proc: Proc,
    /// Its segment (meta part).
    pub seg: PeerSegment,
    /// Messages to it: the ring and what waits for ring space.
    pub outbox: Mutex<Outbox>,
    /// Left, died or broke.
    pub health: Health,
    /// The cause it named as it left was handed to the router (see `Peer::cause`).
    pub cause_taken: AtomicBool,
}

/// Lock ignoring poison: every critical section of this transport leaves its
/// data consistent at each step, so a panic elsewhere does not corrupt it.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Peer {
    /// Whether the peer marked its segment closed.
    pub fn closed(&self) -> bool {
        // Acquire: pairs with the peer's Release in mark_closed, so every record
        // it pushed before closing is visible to a drain that follows.
        self.seg.meta.u32_at(wire::H_STATE).map_or(true, |s| s.load(Ordering::Acquire) != wire::SEG_OPEN)
    }

    /// Whether the peer can read this endpoint's (`me`) memory with CMA.
    pub fn reads_us_by_cma(&self, me: usize) -> bool {
        let flag = wire::H_CMA.checked_add(me).and_then(|off| self.seg.meta.u8_at(off).ok());
        // Acquire: pairs with the Release store in the peer's connect (nothing
        // else is published with the flag; Acquire keeps the pairing explicit).
        flag.is_some_and(|f| f.load(Ordering::Acquire) == wire::CMA_YES)
    }

    /// The peer's completion slot `i`.
    pub fn slot(&self, i: u32) -> Result<&AtomicU64> {
        if i >= self.seg.header.n_slots {
            return Err(Error::io(format!(
                "endpoint {} named completion slot {i} of {}",
                self.ep, self.seg.header.n_slots
            )));
        }
        self.seg.meta.u64_at(self.seg.header.slots_off as usize + 8 * i as usize)
    }

    /// Update health from the peer's segment state and process.
    pub fn check(&self) {
        if !self.health.is_open() {
            return;
        }
        if self.closed() {
            self.health.set_left();
        } else if self.proc.gone() {
            // It may have closed and then exited between the two checks.
            if self.closed() {
                self.health.set_left();
            } else {
                self.health.set_dead(format!("endpoint {} (pid {}) died", self.ep, self.proc.pid));
            }
        }
    }

    /// The endpoint the peer named, as it closed, as the failure it left
    /// because of (read from its segment: checked by the caller).
    pub fn cause(&self) -> Option<usize> {
        if !self.closed() {
            return None;
        }
        // Relaxed: the Acquire load of the state in `closed` ordered it.
        let w = self.seg.meta.u32_at(wire::H_CAUSE).ok()?.load(Ordering::Relaxed);
        usize::try_from(w.checked_sub(1)?).ok()
    }

    /// Why messages can no longer go to or come from this peer, if so.
    pub fn gone(&self) -> Option<Error> {
        if self.health.is_open() && self.closed() {
            self.health.set_left();
        }
        self.health.gone(self.ep)
    }

    /// The error of a rendezvous the receiver failed, by slot state (a
    /// receive of another call is the caller's mistake: `InvalidParam`, as
    /// the receiver's own error).
    pub fn rejection(&self, state: u8, what: &str) -> Error {
        let why = match state {
            slot::FAILED_SIZE => "its receive had another size",
            slot::FAILED_CALL => {
                return Error::invalid_param(format!(
                    "endpoint {} rejected {what}: its receive was posted for another call",
                    self.ep
                ));
            }
            slot::FAILED_READ => "it could not read this process's memory",
            slot::FAILED_CLOSED => "it closed first",
            _ => "its slot holds an unknown state",
        };
        Error::io(format!("endpoint {} rejected {what}: {why}", self.ep))
    }
}
