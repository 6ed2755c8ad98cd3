//! A thread's spare reference to the team of the last request it dropped.
//!
//! A request holds its team (`Arc<TeamInner>`): it may outlive the user's
//! [`Team`](super::Team) handle. Counting that reference is a locked
//! instruction at init and another at drop, and the one at drop comes right
//! after the collective's last stores to the shared segment: it waits until
//! those reach the other core, a cache line's trip (BENCHMARKS.md, sixteenth
//! round) — on two ranks most of what a bcast's root or a reduce's leaf
//! pays to leave. So a dropped request leaves its reference here, still
//! counted, and the next request of the same team on this thread takes it
//! over: a loop of one-shot collectives moves no count at all.
//!
//! One per thread, and only of a team whose handle lives: a request that
//! outlives its team's handle releases its reference as before, so that the
//! team goes (and its peers learn that this rank left) with its last
//! request. A team's handle, dropped, releases the spare of the thread it
//! is dropped on, where its requests usually were; a spare on another
//! thread keeps the team (its segment, its sockets) until that thread
//! takes or leaves a reference of another team, or exits.

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::team::TeamInner;

thread_local! {
    static SPARE: Cell<Option<Arc<TeamInner>>> = const { Cell::new(None) };
}

/// A counted reference to `team`: this thread's spare if it is one of
/// `team`, else a new one.
pub(crate) fn take(team: &Arc<TeamInner>) -> Arc<TeamInner> {
    let spare = SPARE.try_with(|s| match s.take() {
        Some(t) if Arc::ptr_eq(&t, team) => Ok(t),
        // Another team's, whose handle is gone: released here.
        Some(t) if !handle_lives(&t) => Err(Some(t)),
        other => {
            s.set(other);
            Err(None)
        }
    });
    match spare {
        Ok(Ok(mine)) => mine,
        // Dropped once the cell is in order again: its team's drop may
        // drop requests, which use the cell.
        Ok(Err(gone)) => {
            drop(gone);
            team.clone()
        }
        Err(_) => team.clone(),
    }
}

/// Whether the user's handle of `team` is still there.
fn handle_lives(team: &TeamInner) -> bool {
    // Relaxed: a stale `true` keeps a spare a while longer, nothing more.
    team.alive.load(Ordering::Relaxed)
}

/// Keep `team`, a dropped request's reference, as this thread's spare; the
/// spare before it is released. A thread that is exiting releases it at
/// once.
pub(crate) fn keep(team: Arc<TeamInner>) {
    if !handle_lives(&team) {
        // Released now: the team goes with its last request.
        drop(team);
        return;
    }
    let mut team = Some(team);
    // The spare before it is dropped once the cell is in order again (as
    // in `take`).
    let before = SPARE.try_with(|s| s.replace(team.take()));
    drop(before);
    drop(team);
}

/// Release this thread's spare if it is one of `team` (its handle is dropped).
pub(crate) fn release(team: &TeamInner) {
    let spare = SPARE.try_with(|s| match s.take() {
        Some(t) if std::ptr::eq(Arc::as_ptr(&t), team) => Some(t),
        other => {
            s.set(other);
            None
        }
    });
    drop(spare);
}
