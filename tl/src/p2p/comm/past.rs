//! Late probes: a member still waits in a collective this rank finished.
//!
//! A receive that waited [`PROBE_AFTER`](super::PROBE_AFTER) probes its peer
//! at its own sequence number; the peer's looks read probes of the
//! collectives they wait in. But the peer may have finished that collective
//! without a message to the prober — its call there was another one, or a
//! zero-size one that no TL runs — and gone on: no look of it ever reads
//! the probe, and the two ranks wait for each other until their timeouts
//! (on a team without the shm TL's call board, which would have shown the
//! difference at once). So a waiting rank also looks for probes of earlier
//! collectives — of its team, or of any other p2p team of its context
//! ([`Teams`]), since it may wait on another team — and judges them by the calls it posted lately ([`PostLog`]:
//! those its p2p tasks ran, and the zero-size ones, which no TL runs, as
//! the core tells them, `TlTeam::posted_without_task`):
//! - the same call: the prober is only slow (its message is on the way);
//!   the probe is read and dropped;
//! - another call, or none known (a gap among the collectives this TL
//!   kept: another TL's, or a post that failed; or, past the last of them,
//!   a post the core noted as another TL's, `PostedVia`: this rank may
//!   wait in that very collective, TL/NCCL's say): the
//!   calls differ. It answers the prober with what it posted there: the
//!   prober's receive fails naming it, and tells the others (a notice).
//!   The answering rank goes on waiting where it is, as it would with the
//!   call board: its own calls so far completed as posted, and its
//!   current one may still meet the prober's next;
//! - older than the log: not judged; read and dropped.
//!
//! A rank that waits on no p2p team (idle in `ucc_context_progress`, or in
//! another TL's collective, whose waits progress the context) answers from
//! the context's progress, once in [`PROGRESS_LOOK_EVERY`] calls. Left: a
//! rank that calls no progress at all (busy in its own work) answers when
//! it next does; the prober waits until then, its timeout, or that rank
//! leaving.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::task::Poll;

use ferrocoll_core::args::Signature;
use ferrocoll_core::backend::ACTIVE_SET_SEQ;
use ferrocoll_core::{Error, MemRef, MemType};
use ferrocoll_transport::{CallsDiffer, MsgKey, Router};

use super::notice::{self, NOTICE_LEN, Notice};
use super::{Comm, PROBE_TAG};
use crate::p2p::team::TeamShared;

/// How many of its latest collectives a team remembers the calls of.
const POSTS_KEPT: usize = 64;

/// The step tag of an answer to a probe (see the module docs).
const ANSWER_TAG: u32 = u32::MAX - 2;

/// The calls of a team's latest collectives through this TL (and of its
/// zero-size ones), by sequence number (see the module docs).
#[derive(Default)]
pub(crate) struct PostLog {
    /// In increasing sequence numbers (posts take their numbers in order).
    recent: VecDeque<(u64, Signature)>,
    /// The first sequence number it knows about: 0 (the team's first
    /// collective) until it forgets its oldest entries.
    from: u64,
}

/// What this rank ran at a sequence number, as far as its log knows.
#[derive(Debug, PartialEq)]
enum Ran {
    Call(Signature),
    /// Nothing through this TL (see [`notice::not_here`]).
    Nothing,
    /// Too long ago (or not yet): not known.
    Unknown,
}

impl PostLog {
    /// Collective `seq` runs the call `sig` (collectives outside the team's
    /// order are not kept: see [`ACTIVE_SET_SEQ`]).
    pub(crate) fn record(&mut self, seq: u64, sig: Signature) {
        if seq >= ACTIVE_SET_SEQ || self.recent.back().is_some_and(|&(last, _)| seq <= last) {
            return;
        }
        if self.recent.len() >= POSTS_KEPT {
            if let Some((oldest, _)) = self.recent.pop_front() {
                self.from = oldest + 1;
            }
        }
        self.recent.push_back((seq, sig));
    }

    /// The latest sequence number it holds.
    fn last(&self) -> Option<u64> {
        self.recent.back().map(|&(seq, _)| seq)
    }

    fn ran(&self, seq: u64) -> Ran {
        let Some(&(last, _)) = self.recent.back() else { return Ran::Unknown };
        if seq < self.from || seq > last {
            return Ran::Unknown;
        }
        match self.recent.binary_search_by_key(&seq, |&(s, _)| s) {
            Ok(i) => self.recent.get(i).map_or(Ran::Unknown, |&(_, sig)| Ran::Call(sig)),
            Err(_) => Ran::Nothing,
        }
    }
}

impl Comm {
    /// Answer a probe from a member that waits for this rank in an earlier
    /// collective of this team, or of another p2p team of its context,
    /// whose call there differed (see the module docs). Probes whose calls
    /// agreed, or too old to judge, are read and dropped. One per look.
    pub(super) fn answer_late_probe(&self) {
        let mut teams = self.team.teams.live();
        if !teams.iter().any(|t| Arc::ptr_eq(t, &self.team)) {
            teams.push(self.team.clone());
        }
        answer_one(&self.team.transport, &teams, Some((&self.team, self.seq)));
    }

    /// The answer of `peer` to this collective's probe (see the module
    /// docs), if it came: its call differs, named in the error.
    pub(super) fn answered(&self, peer: usize) -> Option<Error> {
        let key = MsgKey { tag: ANSWER_TAG, ..self.notice_key(peer) };
        let mut buf = [0u8; NOTICE_LEN];
        // SAFETY: `buf` lives on this frame through the call, which alone uses it.
        let mem = unsafe { MemRef::from_mut_slice(&mut buf) };
        match self.team.transport.try_recv(self.ep(peer).ok()?, &key, &self.sig, mem) {
            Poll::Ready(Ok(())) => {}
            // Nothing yet, or the peer gone (its receive speaks for that).
            _ => return None,
        }
        let Notice { theirs, .. } = Notice::decode(&buf);
        self.tell_all(CallsDiffer { rank: peer as u32, theirs });
        Some(Error::invalid_param(format!(
            "the ranks' calls differ: rank {peer} posted {}, this rank posted {} (collective seq {}; rank {peer} \
             answered this rank's probe: it finished that collective without a message to this rank and went on)",
            notice::describe(&theirs),
            self.sig.describe(),
            self.seq
        )))
    }
}

/// Answer one late probe of `teams` (see the module docs): of a team's
/// collectives as far as its log goes — but for `waiting`, a team and the
/// collective this rank waits in there, only those before it (a probe of
/// that one its own look reads).
fn answer_one(transport: &Router, teams: &[Arc<TeamShared>], waiting: Option<(&Arc<TeamShared>, u64)>) {
    // Per team: the last collective its log judges, and whether later ones
    // this rank posted to other TLs are judged too (not on the team this
    // rank waits in: nothing after its current collective is posted).
    let upto: Vec<(&Arc<TeamShared>, Option<u64>, bool)> = teams
        .iter()
        .map(|t| match waiting {
            Some((w, now)) if Arc::ptr_eq(t, w) && now < ACTIVE_SET_SEQ => (t, now.checked_sub(1), false),
            _ => (t, t.posted.lock().unwrap_or_else(PoisonError::into_inner).last(), true),
        })
        .collect();
    let pick = |k: &MsgKey, _: &Signature| {
        k.tag == PROBE_TAG
            && upto.iter().any(|&(t, last, later)| {
                let judged = || last.is_some_and(|last| k.seq <= last) || (later && t.posted_elsewhere(k.seq));
                t.id == k.team && (k.src as usize) < t.size && k.src as usize != t.rank && judged()
            })
    };
    let Some((key, theirs)) = transport.find_arrived(&pick) else { return };
    if let Some(&(team, _, _)) = upto.iter().find(|(t, _, _)| t.id == key.team) {
        answer(team, key, theirs);
    }
}

/// Judge the probe `key` (the call `theirs`) of a member of `team` (see
/// [`Comm::answer_late_probe`]), read it, and answer it if the calls differ.
fn answer(team: &TeamShared, key: MsgKey, theirs: Signature) {
    let r = key.src as usize;
    let Some(&ep) = team.eps.get(r) else { return };
    let t = &team.transport;
    // Read it (as the call it carries, which agrees): a probe is judged
    // once, by the thread that took it.
    if !matches!(t.try_recv(ep, &key, &theirs, MemRef::empty(MemType::Host)), Poll::Ready(Ok(()))) {
        return;
    }
    let mut ran = team.posted.lock().unwrap_or_else(PoisonError::into_inner).ran(key.seq);
    if ran == Ran::Unknown && team.posted_elsewhere(key.seq) {
        // Another TL's collective (this rank's newest, maybe): not this TL's call.
        ran = Ran::Nothing;
    }
    let mine = match ran {
        Ran::Call(mine) if mine.agrees(&theirs) => return,
        Ran::Unknown => {
            ferrocoll_core::log_debug!("p2p: a probe of collective seq {} from rank {r}: too old to judge", key.seq);
            return;
        }
        Ran::Call(mine) => mine,
        Ran::Nothing => notice::not_here(),
    };
    ferrocoll_core::log_info!(
        "p2p: rank {r} waits for this rank in collective seq {} of team {:#x}, which this rank went past: \
         rank {r} posted {} there, this rank {}; told it",
        key.seq,
        team.id,
        theirs.describe(),
        notice::describe(&mine)
    );
    // Under the prober's call, which its receive checks the message against.
    let me = team.rank as u32;
    let answer = MsgKey { tag: ANSWER_TAG, src: me, ..key };
    let mut n = team.notices.lock().unwrap_or_else(PoisonError::into_inner);
    let to = team.eps.iter().enumerate().filter(|&(q, _)| q == r);
    n.send(t, to, answer, theirs, Notice { rank: me, theirs: mine });
}

/// The p2p teams of one context, for judging probes of any of them: a
/// rank may wait on another team than the prober's, or on none.
#[derive(Default)]
pub(crate) struct Teams {
    /// Weakly held: a team destroyed is forgotten at the next `add`.
    teams: Mutex<Vec<Weak<TeamShared>>>,
    /// The context's progress calls (`Teams::progressed`).
    progress_calls: AtomicU32,
}

/// Calls of the context's progress between two looks for late probes
/// (`Teams::progressed`): a few milliseconds of a rank that only
/// progresses, nothing on the path of a collective's own polls.
const PROGRESS_LOOK_EVERY: u32 = 4096;

impl Teams {
    /// Add `team` (and forget the teams gone).
    pub(crate) fn add(&self, team: &Arc<TeamShared>) {
        let mut v = self.teams.lock().unwrap_or_else(PoisonError::into_inner);
        v.retain(|w| w.strong_count() > 0);
        v.push(Arc::downgrade(team));
    }

    fn live(&self) -> Vec<Arc<TeamShared>> {
        self.teams.lock().unwrap_or_else(PoisonError::into_inner).iter().filter_map(Weak::upgrade).collect()
    }

    /// The context's progress, once in [`PROGRESS_LOOK_EVERY`] calls:
    /// answer a late probe of any of its teams, for a rank that waits on
    /// none of them (idle in `ucc_context_progress`, or waiting on
    /// another TL's collective, whose waits progress the context too).
    pub(crate) fn progressed(&self, transport: &Router) {
        // Relaxed: a count of calls; a lost update only delays a look.
        let n = self.progress_calls.load(Ordering::Relaxed).wrapping_add(1);
        self.progress_calls.store(n, Ordering::Relaxed);
        if n.is_multiple_of(PROGRESS_LOOK_EVERY) {
            answer_one(transport, &self.live(), None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrocoll_core::CollType;

    fn sig(n: u64) -> Signature {
        Signature::new(CollType::Allreduce, None, 0, n)
    }

    #[test]
    fn the_log_knows_its_window_and_its_gaps() {
        let mut log = PostLog::default();
        assert_eq!(log.ran(0), Ran::Unknown, "empty");
        log.record(2, sig(2));
        assert_eq!(log.ran(0), Ran::Nothing, "the team's first collectives were not this TL's");
        assert_eq!(log.ran(2), Ran::Call(sig(2)));
        assert_eq!(log.ran(3), Ran::Unknown, "not yet");
        for seq in (3..=200).filter(|s| s % 10 != 0) {
            log.record(seq, sig(seq));
        }
        log.record(ACTIVE_SET_SEQ | 5, sig(1));
        log.record(10, sig(1));
        assert_eq!(log.recent.len(), POSTS_KEPT, "the oldest forgotten; the last two not kept");
        assert_eq!(log.ran(199), Ran::Call(sig(199)));
        assert_eq!(log.ran(190), Ran::Nothing, "a gap: no call of this TL");
        assert_eq!(log.ran(200), Ran::Unknown, "not yet");
        assert_eq!(log.ran(log.from - 1), Ran::Unknown, "forgotten");
        assert_eq!(log.ran(log.recent[0].0), Ran::Call(sig(log.recent[0].0)));
        assert_eq!(log.ran(10), Ran::Unknown, "forgotten");
        assert_eq!(log.ran(ACTIVE_SET_SEQ | 5), Ran::Unknown, "outside the team's order");
    }
}
