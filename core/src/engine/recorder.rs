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
//! level. Recording costs one uncontended lock and one reference count per
//! post; the clock is read only by the timeout and the watchdog, as before.
//! A persistent request's posts share its slot: the record keeps each
//! post's sequence number beside it.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
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
    capacity: usize,
    /// The sequence number of each recorded post, and its slot (a
    /// persistent request's posts share one slot: see `TaskSlot::write_json`).
    slots: Mutex<VecDeque<(u64, Arc<TaskSlot>)>>,
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
    /// A recorder of the last `capacity` collectives of a team (0: records nothing).
    pub fn new(who: TeamIdentity, capacity: usize) -> Arc<FlightRecorder> {
        let r = Arc::new(FlightRecorder { who, capacity, slots: Mutex::new(VecDeque::with_capacity(capacity)) });
        if capacity > 0 {
            lock(&RECORDERS).push(Arc::downgrade(&r));
        }
        r
    }

    /// Remember post `seq`, which `slot` holds (the slot tells its state when dumped).
    pub fn record(&self, seq: u64, slot: &Arc<TaskSlot>) {
        if self.capacity == 0 {
            return;
        }
        let mut slots = lock(&self.slots);
        let old = if slots.len() == self.capacity { slots.pop_front() } else { None };
        slots.push_back((seq, slot.clone()));
        drop(slots);
        // The oldest slot, if this was its last holder, is freed outside the lock.
        drop(old);
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
        let entries: Vec<(u64, Arc<TaskSlot>)> = lock(&self.slots).iter().cloned().collect();
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
