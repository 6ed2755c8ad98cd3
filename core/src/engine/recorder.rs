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
//! level. Recording costs one uncontended lock per post (and a reference
//! count for a slot the record does not hold yet); the clock is read only
//! by the timeout and the watchdog, as before.
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
    slots: Mutex<Posts>,
}

/// The recorded posts: each one's sequence number and slot. The posts of
/// a persistent request (and of one-shot requests that took the same
/// plan, `plan_cache.rs`) share one slot (see `TaskSlot::write_json`), so
/// the record holds each slot once, with a count of its posts: recording
/// the next post of a slot already held counts no reference (an atomic
/// operation on a line the posting thread shares with others, each a
/// measurable part of a small collective).
#[derive(Default)]
struct Posts {
    /// Oldest first: the sequence number and the slot's key ([`key`]).
    posts: VecDeque<(u64, usize)>,
    /// Each slot of `posts`, once, and how many of them it holds. Holding
    /// the slot keeps its address, the key, from being reused.
    slots: Vec<(Arc<TaskSlot>, usize)>,
}

/// A slot's identity in [`Posts`].
fn key(slot: &Arc<TaskSlot>) -> usize {
    Arc::as_ptr(slot) as usize
}

impl Posts {
    fn find(&self, k: usize) -> Option<usize> {
        // From the newest: a loop's slots are recorded over and over.
        self.slots.iter().rposition(|(s, _)| key(s) == k)
    }

    /// Add post `seq` of `slot`; if there are more than `capacity`, the
    /// oldest leaves, and its slot if it was that slot's last post (given
    /// back, to be freed outside the lock).
    fn push(&mut self, seq: u64, slot: &Arc<TaskSlot>, capacity: usize) -> Option<Arc<TaskSlot>> {
        let k = key(slot);
        match self.find(k) {
            Some(i) => self.slots[i].1 += 1,
            None => self.slots.push((slot.clone(), 1)),
        }
        self.posts.push_back((seq, k));
        if self.posts.len() <= capacity {
            return None;
        }
        let (_, old) = self.posts.pop_front()?;
        let i = self.find(old)?;
        self.slots[i].1 -= 1;
        (self.slots[i].1 == 0).then(|| self.slots.swap_remove(i).0)
    }

    /// Every post, oldest first, with its slot.
    fn list(&self) -> Vec<(u64, Arc<TaskSlot>)> {
        self.posts.iter().filter_map(|&(seq, k)| Some((seq, self.slots[self.find(k)?].0.clone()))).collect()
    }
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
        let r = Arc::new(FlightRecorder { who, capacity, slots: Mutex::new(Posts::default()) });
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
        let old = lock(&self.slots).push(seq, slot, self.capacity);
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
        let entries = lock(&self.slots).list();
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

    #[test]
    fn posts_keep_the_last_capacity_posts_and_hold_each_slot_once() {
        let (a, b) = (slot(), slot());
        let mut p = Posts::default();
        for seq in 1..=5 {
            let s = if seq % 2 == 1 { &a } else { &b };
            assert!(p.push(seq, s, 3).is_none(), "both slots still have posts in the record");
        }
        let list: Vec<(u64, bool)> = p.list().iter().map(|(seq, s)| (*seq, Arc::ptr_eq(s, &a))).collect();
        assert_eq!(list, [(3, true), (4, false), (5, true)]);
        assert_eq!(p.slots.len(), 2);
        assert_eq!((Arc::strong_count(&a), Arc::strong_count(&b)), (2, 2), "one reference per slot");
        // b's last post leaves: b is given back, a stays.
        let c = slot();
        assert!(p.push(6, &c, 3).is_none());
        let gone = p.push(7, &c, 3).expect("b's last post left");
        assert!(Arc::ptr_eq(&gone, &b));
        let seqs: Vec<u64> = p.list().iter().map(|(seq, _)| *seq).collect();
        assert_eq!(seqs, [5, 6, 7]);
    }
}
