//! The flight recorder: each team keeps its last collectives (their slots in
//! the progress queue) so that a hang can be explained after the fact —
//! which collective every rank is in, and which rank it waits for.
//!
//! Dumped as one JSON document per team:
//! - on a timeout and on a watchdog warning of a collective (every team of
//!   the process, at the next progress);
//! - on request ([`request_dump`], which `SIGUSR1` calls where the facade
//!   installs the handler): the next `Context::progress` on any thread dumps
//!   every team of the process;
//! - by [`Team::flight_record`](crate::Team::flight_record).
//!
//! A dump goes to `<FERROCOLL_FLIGHT_RECORDER_DIR>/ep<endpoint>-team<id>.json`
//! when that variable names a directory (`ferrocoll-run` sets it and reads
//! the files when a job fails or is interrupted), else to the log at warn
//! level. Recording a post of a slot the record holds already (a
//! persistent request's next post, a one-shot call that took a parked
//! plan) costs two plain stores: its sequence number and slot, in a ring
//! of the last posts at the place its sequence number gives. A slot seen for the first time takes a lock (and a reference);
//! the clock is read only by the timeout and the watchdog, as before.
//! A persistent request's posts share its slot: the record keeps each
//! post's sequence number beside it.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

use super::task::TaskSlot;
use crate::json::json_str;

/// The variable naming the directory dumps go to.
pub const DUMP_DIR_VAR: &str = "FERROCOLL_FLIGHT_RECORDER_DIR";

/// Who a team is, for the dump's header.
#[derive(Clone, Debug)]
pub struct TeamIdentity {
    /// Team id.
    pub id: u64,
    /// This rank in the team.
    pub rank: usize,
    /// Team size.
    pub size: usize,
    /// This context's endpoint (the job's rank).
    pub ep: usize,
    /// Host identity.
    pub host: String,
}

/// A team's last collectives.
pub struct FlightRecorder {
    who: TeamIdentity,
    /// The last posts: post `seq` is in `ring[seq % len]` (`len` a power of
    /// two, at least `capacity`): the team's sequence numbers are distinct,
    /// so posts less than `len` apart never share an entry, and recording
    /// takes no atomic read-modify-write. (Active-set collectives, numbered
    /// by their tag outside the team's sequence, may take the entry of
    /// another post.)
    ring: Box<[Entry]>,
    /// How many posts a dump shows.
    capacity: usize,
    held: Mutex<Held>,
}

/// The slots a recorder holds.
#[derive(Default)]
struct Held {
    /// Every slot whose posts may be in the ring, each once. Holding the
    /// slot keeps its address, the ring's key, from being reused.
    slots: Vec<Arc<TaskSlot>>,
    /// Room for the ring's keys while letting slots go (kept: no
    /// allocation each time).
    shown: Vec<usize>,
}

/// Largest `UCC_FLIGHT_RECORDER_SIZE` honoured: the ring is allocated at once.
const MAX_CAPACITY: usize = 1 << 16;

/// One post in the ring: its sequence number and its slot's [`key`]
/// (0: empty). A dump while a post is being recorded may pair one post's
/// number with another's slot: it is a diagnosis, read when nothing moves.
#[derive(Default)]
struct Entry {
    seq: AtomicU64,
    key: AtomicUsize,
}

/// A slot's identity in the ring.
fn key(slot: &Arc<TaskSlot>) -> usize {
    Arc::as_ptr(slot) as usize
}

/// Every recorder of the process, for dumps on request.
static RECORDERS: Mutex<Vec<Weak<FlightRecorder>>> = Mutex::new(Vec::new());
/// Set by [`request_dump`] (from a signal handler), cleared by the dump.
static DUMP_REQUESTED: AtomicBool = AtomicBool::new(false);
/// Why the next dump was asked for, when it was not a signal.
static DUMP_REASON: Mutex<Option<String>> = Mutex::new(None);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Poisoned only if a panic happened while it was held; the data stays whole.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Ask for a dump of every team of the process at the next progress.
/// Async-signal-safe: one atomic store.
pub fn request_dump() {
    // Release: the dumper that Acquire-swaps the flag sees the reason a
    // requester stored before it (request_dump_because).
    DUMP_REQUESTED.store(true, Ordering::Release);
}

/// Ask for a dump of every team of the process at the next progress, saying why
/// (a collective's timeout or watchdog warning; not from a signal handler).
pub fn request_dump_because(reason: String) {
    lock(&DUMP_REASON).get_or_insert(reason);
    request_dump();
}

/// Dump every team of the process if a dump was requested (called by every progress).
pub fn dump_if_requested() {
    // Relaxed look first (every progress calls this); the Acquire swap
    // makes one caller do it and pairs with request_dump's Release.
    if DUMP_REQUESTED.load(Ordering::Relaxed) && DUMP_REQUESTED.swap(false, Ordering::Acquire) {
        let reason = lock(&DUMP_REASON).take().unwrap_or_else(|| "requested (signal or launcher)".to_string());
        let live: Vec<Arc<FlightRecorder>> = {
            let mut all = lock(&RECORDERS);
            all.retain(|w| w.strong_count() > 0);
            all.iter().filter_map(Weak::upgrade).collect()
        };
        for r in live {
            r.dump(&reason);
        }
    }
}

impl FlightRecorder {
    /// A recorder of the last `capacity` collectives of a team (0: records
    /// nothing; at most 65 536).
    pub fn new(who: TeamIdentity, capacity: usize) -> Arc<FlightRecorder> {
        let capacity = capacity.min(MAX_CAPACITY);
        let len = if capacity == 0 { 0 } else { capacity.next_power_of_two() };
        let ring = (0..len).map(|_| Entry::default()).collect();
        let r = Arc::new(FlightRecorder { who, ring, capacity, held: Mutex::default() });
        if capacity > 0 {
            lock(&RECORDERS).push(Arc::downgrade(&r));
        }
        r
    }

    /// Its identity as a slot's holder (see `TaskSlot::recorded_by`).
    fn id(&self) -> usize {
        self as *const FlightRecorder as usize
    }

    /// Remember post `seq`, which `slot` holds (the slot tells its state when dumped).
    pub fn record(&self, seq: u64, slot: &Arc<TaskSlot>) {
        if self.ring.is_empty() {
            return;
        }
        if slot.recorded_by() != self.id() {
            self.hold(slot);
        }
        // `len` is a power of two: the mask is `seq % len`, which fits a usize.
        let e = &self.ring[(seq & (self.ring.len() as u64 - 1)) as usize];
        // Relaxed: a dump reads what it finds (see `Entry`).
        e.key.store(key(slot), Ordering::Relaxed);
        e.seq.store(seq, Ordering::Release);
    }

    /// Hold `slot` (seen for the first time), and let go of the slots that
    /// nobody else holds and that have no post left in the ring: they
    /// cannot be recorded again, nor shown.
    fn hold(&self, slot: &Arc<TaskSlot>) {
        let mut held = lock(&self.held);
        let Held { slots, shown } = &mut *held;
        if !slots.iter().any(|s| Arc::ptr_eq(s, slot)) {
            slots.push(slot.clone());
        }
        slot.set_recorded_by(self.id());
        if slots.len() > 2 * self.capacity.max(8) {
            shown.clear();
            shown.extend(self.ring.iter().map(|e| e.key.load(Ordering::Relaxed)));
            shown.sort_unstable();
            slots.retain(|s| Arc::strong_count(s) > 1 || shown.binary_search(&key(s)).is_ok());
        }
    }

    /// The last `capacity` posts in the ring, oldest first, with their slots.
    fn list(&self) -> Vec<(u64, Arc<TaskSlot>)> {
        let held = lock(&self.held);
        let mut posts: Vec<(u64, Arc<TaskSlot>)> = self
            .ring
            .iter()
            .filter_map(|e| {
                let seq = e.seq.load(Ordering::Acquire);
                let k = e.key.load(Ordering::Relaxed);
                held.slots.iter().find(|s| key(s) == k).map(|s| (seq, s.clone()))
            })
            .collect();
        posts.sort_unstable_by_key(|(seq, _)| *seq);
        let old = posts.len().saturating_sub(self.capacity);
        posts.drain(..old);
        posts
    }

    /// The record as one JSON document; `reason` says why it was taken.
    pub fn to_json(&self, reason: &str) -> String {
        let w = &self.who;
        let mut out = String::new();
        let _ = write!(
            out,
            "{{\"team\":\"{:#x}\",\"rank\":{},\"size\":{},\"ep\":{},\"pid\":{},\"host\":{},\"reason\":{},\"collectives\":[",
            w.id,
            w.rank,
            w.size,
            w.ep,
            std::process::id(),
            json_str(&w.host),
            json_str(reason)
        );
        let entries = self.list();
        for (i, (seq, slot)) in entries.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            slot.write_json(*seq, &mut out);
        }
        out.push_str("]}");
        out
    }

    /// Write the record where dumps go (see the module docs).
    pub fn dump(&self, reason: &str) {
        let json = self.to_json(reason);
        static DIR: OnceLock<Option<std::path::PathBuf>> = OnceLock::new();
        let dir = DIR
            .get_or_init(|| std::env::var_os(DUMP_DIR_VAR).map(Into::into).filter(|p: &std::path::PathBuf| p.is_dir()));
        match dir {
            Some(d) => {
                let path = d.join(format!("ep{}-team{:x}.json", self.who.ep, self.who.id));
                let tmp = path.with_extension("json.tmp");
                let written = std::fs::write(&tmp, json.as_bytes()).and_then(|()| std::fs::rename(&tmp, &path));
                if let Err(e) = written {
                    crate::log_warn!("flight recorder: cannot write {}: {e}", path.display());
                }
            }
            None => crate::log_warn!("flight recorder ({reason}): {json}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::task::{Call, TaskDesc};

    fn slot() -> Arc<TaskSlot> {
        let desc = TaskDesc { coll: "barrier", seq: 0, team: "t".into(), via: "x/y".into(), call: Call::default() };
        TaskSlot::finished(Ok(()), desc)
    }

    fn who() -> TeamIdentity {
        TeamIdentity { id: 1, rank: 0, size: 1, ep: 0, host: "h".into() }
    }

    fn seqs(r: &FlightRecorder, a: &Arc<TaskSlot>) -> Vec<(u64, bool)> {
        r.list().iter().map(|(seq, s)| (*seq, Arc::ptr_eq(s, a))).collect()
    }

    #[test]
    fn the_record_keeps_the_last_capacity_posts_and_holds_each_slot_once() {
        let (a, b) = (slot(), slot());
        let r = FlightRecorder::new(who(), 3);
        for seq in 1..=5 {
            r.record(seq, if seq % 2 == 1 { &a } else { &b });
        }
        assert_eq!(seqs(&r, &a), [(3, true), (4, false), (5, true)]);
        assert_eq!((Arc::strong_count(&a), Arc::strong_count(&b)), (2, 2), "one reference per slot");
        // Slots that nobody else holds and that have left the ring are let
        // go once enough new ones came: b's last post leaves, b goes; a,
        // still held by its request, stays.
        let b_weak = Arc::downgrade(&b);
        drop(b);
        let mut seq = 5;
        for _ in 0..20 {
            seq += 1;
            r.record(seq, &slot());
        }
        assert!(b_weak.upgrade().is_none(), "b is still held");
        assert_eq!(Arc::strong_count(&a), 2, "a is held by its request and the record");
        r.record(seq + 1, &a);
        let last: Vec<u64> = r.list().iter().map(|(s, _)| *s).collect();
        assert_eq!(last, [seq - 1, seq, seq + 1]);
        assert!(Arc::ptr_eq(&r.list()[2].1, &a));
    }

    #[test]
    fn a_record_of_size_zero_records_nothing() {
        let r = FlightRecorder::new(who(), 0);
        r.record(1, &slot());
        assert!(r.list().is_empty());
    }
}
