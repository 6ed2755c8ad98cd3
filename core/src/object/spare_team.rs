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
    if let Some(mine) = take_spare_if(|t| Arc::ptr_eq(t, team)) {
        return mine;
    }
    // Another team's spare whose handle is gone meanwhile: released here.
    drop(take_spare_if(|t| !handle_lives(t)));
    team.clone()
}

/// Keep `team`, a dropped request's reference, as this thread's spare; the
/// spare before it is released. A thread that is exiting releases `team`
/// at once (the closure that owns it is dropped unrun).
pub(crate) fn keep(team: Arc<TeamInner>) {
    if !handle_lives(&team) {
        // Released now: the team goes with its last request.
        drop(team);
        return;
    }
    // The spare before it is dropped after the cell holds `team`: that
    // drop may end a team, and with it requests, which use the cell.
    drop(SPARE.try_with(move |s| s.replace(Some(team))));
}

/// Release this thread's spare if it is one of `team` (its handle is dropped).
pub(crate) fn release(team: &TeamInner) {
    drop(take_spare_if(|t| std::ptr::eq(Arc::as_ptr(t), team)));
}

/// This thread's spare, taken out if `wanted` says so (else left there).
/// The caller drops what it gets outside the cell's access.
fn take_spare_if(wanted: impl FnOnce(&Arc<TeamInner>) -> bool) -> Option<Arc<TeamInner>> {
    let taken = SPARE.try_with(|s| match s.take() {
        Some(t) if wanted(&t) => Some(t),
        other => {
            s.set(other);
            None
        }
    });
    taken.ok().flatten()
}

/// Whether the user's handle of `team` is still there.
fn handle_lives(team: &TeamInner) -> bool {
    // Relaxed: a stale `true` keeps a spare a while longer, nothing more.
    team.alive.load(Ordering::Relaxed)
}
