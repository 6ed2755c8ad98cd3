//! The epoch protocol: how ranks hand data to each other through the segment.
//!
//! Every step of a collective is an epoch `e`, the same on every rank. In it
//! a rank (1) waits until everyone has finished epoch `e - 2`, which used the
//! same half of its area ([`ShmTeam::begin`]; an epoch that writes only its
//! inline region waits for `e - INLINE_DEPTH`, see [`Depth`]); (2) writes
//! its half and publishes `arrive = e` (an inline epoch publishes its
//! region's tag instead and leaves its control line alone, `inline.rs`);
//! (3) waits for the `arrive` (or `reduced`) of the ranks it reads;
//! (4) reads; (5) publishes `done = e`. Each counter is written by its rank
//! only, with Release after the data it covers, and read by the others
//! with Acquire before they read that data.
//!
//! Every epoch of a rank ends with its `done`, and the next one's `arrive`,
//! `reduced` or inline tag (`inline.rs`) comes after it: a rank seen at
//! `arrive = v` (or `reduced = v`, or a tag `v`) has finished epoch `v - 1`. Waits remember that per rank
//! (`ShmTeam::finished`), so (1) reads no control line for ranks whose
//! counters already proved it — in a run of symmetric collectives, every
//! one of them: the wait of step (3) in epoch `e - 1` proved it. The wait
//! in (1) would otherwise cost a cache line's trip between cores in every
//! epoch, on the critical path, since the peer has just written that line.

use std::sync::atomic::Ordering;
use std::task::Poll;

use ferrocoll_core::args::Signature;
use ferrocoll_core::{Error, Result};
use ferrocoll_transport::liveness::Proc;

use super::demote::demote;
use super::layout::INLINE_DEPTH;
use super::liveness_cadence::LivenessCadence;
use super::segment::{CAUSE_SHIFT, Ctrl, FAILED, PRESENT, SigSlot};
use super::team::ShmTeam;

/// Where a wait (`ShmTeam::poll_wait`) stands: the first rank of its list
/// not seen yet, and how often in a row it was found not there (when to
/// check that it lives).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct WaitCursor {
    next: usize,
    liveness: LivenessCadence,
}

/// Epochs after which an inline epoch signs its control-line slot anyway.
/// A slot carries only its epoch's low byte (`tagged`), and inline epochs
/// do not sign it: a rank whose call differs and which waits on this
/// rank's control line (its own call goes through the halves) checks the
/// slot once this rank's `arrive` passed its epoch. Left unsigned for 256
/// epochs of its parity, the slot would carry that epoch's byte, and the
/// same call: the check would pass, and the rank would read a half
/// written 256 epochs before as this call's data. Signed at least this
/// often, a stale slot's byte always differs (the wait says the ranks are
/// out of step). Less than 256; rarely enough to cost nothing.
const SIGN_AT_LEAST_EVERY: u64 = 128;

/// What an epoch writes, which says how far back the readers of what it
/// overwrites were (see [`ShmTeam::poll_begin`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Depth {
    /// Its half of the data area (and its single-copy slots, by parity):
    /// it starts once every rank has finished the epoch two before.
    Halves,
    /// Only its inline region (`inline.rs`) and counters, and its readers
    /// wait on inline tags only: it starts once every rank has finished
    /// the epoch `INLINE_DEPTH` before (and the one two before, if that one
    /// was of `Halves`), so a rank whose readers lag runs that far ahead.
    Inline,
}

/// Which counter to wait on: one of the control lines', or the tag of the
/// epoch's inline region (`inline.rs`), which says what `Arrive` says for
/// a payload that lies beside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flag {
    Arrive,
    Reduced,
    Done,
    Inline,
}

impl Flag {
    /// The counter's name, for messages.
    fn name(self) -> &'static str {
        match self {
            Flag::Arrive => "arrive",
            Flag::Reduced => "reduced",
            Flag::Done => "done",
            Flag::Inline => "inline tag",
        }
    }
}

/// The last epoch a rank has surely finished, given that its counter
/// `flag` reads `value`: its `arrive`, `reduced` and inline tag of an epoch
/// come after its `done` of the epoch before (see the module docs).
fn finished_given(flag: Flag, value: u64) -> u64 {
    match flag {
        Flag::Done => value,
        Flag::Arrive | Flag::Reduced | Flag::Inline => value.saturating_sub(1),
    }
}

/// A signature's word as a control line holds it for epoch `epoch`: with
/// the epoch's low byte in its tag bits (the slot of epoch `e` held `e - 2`
/// before: the byte tells them apart).
fn tagged(sig: &Signature, epoch: u64) -> u64 {
    sig.word | (epoch & 0xff) << Signature::TAG_BITS.trailing_zeros()
}

/// Why rank `r` of a team of `size` no longer takes part in the team's
/// collectives, given its `left` word, and the rank to blame (`r`, or the
/// one whose failure ended `r`'s part, as `r` says); `None` while it takes
/// part. The word is untrusted: a cause out of the team is ignored.
pub(crate) fn gone(r: usize, size: usize, word: u64) -> Option<(Error, usize)> {
    let cause = (word >> CAUSE_SHIFT).checked_sub(1).and_then(|c| usize::try_from(c).ok());
    match word & 0xff {
        PRESENT => None,
        FAILED => match cause.filter(|&c| c < size && c != r) {
            Some(c) => Some((
                Error::io(format!(
                    "shm team rank {r} stopped taking part because of rank {c} (rank {c} died, left, failed or \
                     posted another call: their errors say which)"
                )),
                c,
            )),
            None => Some((
                Error::io(format!(
                    "shm team rank {r} stopped taking part: a collective failed on it (its own error says why, \
                     e.g. calls that differ between ranks, or a collective cancelled halfway)"
                )),
                r,
            )),
        },
        _ => Some((Error::io(format!("shm team rank {r} left the team (its team or context was destroyed)")), r)),
    }
}

impl ShmTeam {
    /// Wait until `flag` of every rank in `ranks` is at least `epoch`, an
    /// epoch of the running collective, checking that each of those ranks
    /// runs the same collective (see `ferrocoll_core::args::Signature`) before anything it
    /// published is read.
    pub(crate) async fn wait(&self, flag: Flag, ranks: &[usize], epoch: u64) -> Result<()> {
        self.wait_for(flag, ranks, epoch, true).await
    }

    async fn wait_for(&self, flag: Flag, ranks: &[usize], epoch: u64, same_collective: bool) -> Result<()> {
        let mut cursor = WaitCursor::default();
        std::future::poll_fn(|_| self.poll_wait(flag, ranks, epoch, same_collective, &mut cursor)).await
    }

    /// One look at the ranks a wait (as [`ShmTeam::wait`], or without the
    /// signature check) has not seen yet, from `cursor` on: ready once every
    /// one of `ranks` was seen at `epoch` or later. The hand-written state
    /// machine of one-epoch collectives (`one_epoch.rs`) calls it directly.
    pub(crate) fn poll_wait(
        &self,
        flag: Flag,
        ranks: &[usize],
        epoch: u64,
        same_collective: bool,
        cursor: &mut WaitCursor,
    ) -> Poll<Result<()>> {
        while let Some(&r) = ranks.get(cursor.next) {
            if flag == Flag::Done && self.known_finished(r, epoch) {
                cursor.next += 1;
                continue;
            }
            let (ctrl, mut value, sig) = match self.load(r, flag, epoch) {
                Ok(v) => v,
                Err(e) => return Poll::Ready(Err(e)),
            };
            if value < epoch {
                self.diag_waiting(r);
                let Err(e) = self.still_there(r, ctrl, cursor.liveness.due()) else { return Poll::Pending };
                // r may have published, then left or exited (its part
                // done), between the load and the check: a rank that
                // finishes a collective ahead of the others and
                // destroys its team is no failure. Its flag decides.
                value = match self.load(r, flag, epoch) {
                    Ok((_, v, _)) if v >= epoch => v,
                    _ => return Poll::Ready(Err(e)),
                };
            }
            if let Err(e) = self.check_plausible(r, flag, value, epoch) {
                return Poll::Ready(Err(e));
            }
            self.learn_finished(r, finished_given(flag, value));
            if same_collective {
                if let Err(e) = self.check_signature(r, sig, epoch) {
                    return Poll::Ready(Err(e));
                }
            }
            cursor.next += 1;
            cursor.liveness = LivenessCadence::default();
        }
        Poll::Ready(Ok(()))
    }

    /// Whether rank `r`, whose control line is `ctrl` and which this rank
    /// has found not there yet, still takes part. Whether it is still in
    /// the team is one load of the line just read; whether its process
    /// lives is a system call, so only when `check_alive` (see
    /// `liveness_cadence.rs`).
    fn still_there(&self, r: usize, ctrl: &Ctrl, check_alive: bool) -> Result<()> {
        // Acquire: the peer's Release when it left or failed.
        if let Some((e, culprit)) = gone(r, self.size, ctrl.left.load(Ordering::Acquire)) {
            // A rank that left or stopped often did so because another one
            // died: name the dead one, the cause, if there is one — the
            // culprit `r` names first, else any member.
            let dead = self.dead(culprit).map(|e| (culprit, e)).or_else(|| self.dead_member());
            let (culprit, e) = dead.unwrap_or((culprit, e));
            self.blame(culprit);
            return Err(e);
        }
        if check_alive {
            self.check_alive(r, ctrl).inspect_err(|_| self.blame(r))?;
        }
        Ok(())
    }

    /// An error if rank `r` no longer takes part in the team's collectives
    /// (it left, or a collective failed or was cancelled on it): what a
    /// rank that read `r`'s own buffer checks after the read, since `r`
    /// marks itself so before its caller may touch that buffer again.
    pub(crate) fn still_takes_part(&self, r: usize) -> Result<()> {
        // Acquire: pairs with the Release of `r`'s `left`.
        match gone(r, self.size, self.seg.ctrl(r)?.left.load(Ordering::Acquire)) {
            None => Ok(()),
            Some((e, culprit)) => {
                self.blame(culprit);
                Err(e)
            }
        }
    }

    /// An error if rank `r`, not known to have finished `epoch`, no longer
    /// takes part in the team's collectives and did not finish `epoch`
    /// first: as in a wait ([`ShmTeam::poll_wait`]), a rank that finished
    /// its collectives ahead of this one and then left (or failed in a
    /// later one) is no failure of this epoch. Of a rooted collective's
    /// other ranks, which wait for the root only, one that finished its
    /// last call and destroyed its team was taken for one that failed.
    fn finished_or_takes_part(&self, r: usize, epoch: u64) -> Result<()> {
        let ctrl = self.seg.ctrl(r)?;
        // Acquire: the peer's Release when it left or failed.
        if gone(r, self.size, ctrl.left.load(Ordering::Acquire)).is_none() {
            return Ok(());
        }
        // Acquire: see `load`.
        let done = ctrl.done.load(Ordering::Acquire);
        if done >= epoch {
            self.check_plausible(r, Flag::Done, done, epoch)?;
            self.learn_finished(r, done);
            return Ok(());
        }
        self.still_takes_part(r)
    }

    /// Rank `r`'s control line, the value of its counter `flag` for
    /// `epoch`, and the signature slot that goes with that counter.
    fn load(&self, r: usize, flag: Flag, epoch: u64) -> Result<(&Ctrl, u64, &SigSlot)> {
        let c = self.seg.ctrl(r)?;
        let slot = &c.sig[(epoch % 2) as usize];
        // Acquire: pairs with the Release of the rank that published the
        // counter, so its data (or its having stopped reading ours) is
        // visible after this.
        Ok(match flag {
            Flag::Arrive => (c, c.arrive.load(Ordering::Acquire), slot),
            Flag::Reduced => (c, c.reduced.load(Ordering::Acquire), slot),
            Flag::Done => (c, c.done.load(Ordering::Acquire), slot),
            Flag::Inline => {
                let head = self.seg.inline_head(r, epoch)?;
                (c, head.tag.load(Ordering::Acquire), &head.sig)
            }
        })
    }

    /// An error if rank `r`'s counter `flag`, read as `value` by a wait at
    /// `epoch`, is further ahead than any rank can be. A rank begins epoch
    /// `e` only once every rank (this one too) has finished `e -
    /// INLINE_DEPTH` at the latest (`must_have_finished`), so no counter
    /// passes this rank's epoch by more than `INLINE_DEPTH`: one that does
    /// was written by something else in the segment, and taken for
    /// progress (`learn_finished`) it would have this rank stop waiting for
    /// `r` for good, and rewrite halves that `r` may still read.
    #[inline]
    fn check_plausible(&self, r: usize, flag: Flag, value: u64, epoch: u64) -> Result<()> {
        // The usual case first, without the bound: a counter at or behind
        // the epoch waited for.
        if value <= epoch || value <= self.epoch_now().max(epoch).saturating_add(INLINE_DEPTH as u64) {
            return Ok(());
        }
        Err(self.implausible(r, flag, value, epoch))
    }

    /// The error of [`ShmTeam::check_plausible`] (out of the wait's way).
    #[cold]
    #[inline(never)]
    fn implausible(&self, r: usize, flag: Flag, value: u64, epoch: u64) -> Error {
        let at = self.epoch_now().max(epoch);
        let newest = at.saturating_add(INLINE_DEPTH as u64);
        self.blame(r);
        Error::io(format!(
            "shm team rank {r}'s {} counter reads epoch {value}, but no rank can be past epoch {newest} while this \
             rank ({}) is at epoch {at}: something other than rank {r} wrote its control line",
            flag.name(),
            self.rank
        ))
    }

    /// Rank `r` has finished epoch `epoch` (and every one before).
    fn learn_finished(&self, r: usize, epoch: u64) {
        if let Some(f) = self.finished.get(r) {
            // Relaxed: only this rank's running task reads or writes it (the
            // turn orders the tasks); it only grows.
            if f.load(Ordering::Relaxed) < epoch {
                f.store(epoch, Ordering::Relaxed);
            }
        }
    }

    /// Every rank has finished `epoch`, as a rank that saw them all arrive
    /// at `epoch + 1` says (the release of `fanin_fanout`): what this rank
    /// would have learnt waiting for each itself. A rank's later `begin`
    /// then reads none of their control lines, which their owners wrote
    /// last: a line's trip each, on the path of a rooted collective's other
    /// ranks, which wait for the root alone (`poll_begin`).
    pub(crate) fn learn_all_finished(&self, epoch: u64) {
        for r in 0..self.size {
            self.learn_finished(r, epoch);
        }
    }

    /// Whether every rank is known to have finished `epoch`.
    fn all_known_finished(&self, epoch: u64) -> bool {
        // Relaxed: see `learn_finished`.
        self.finished.iter().all(|f| f.load(Ordering::Relaxed) >= epoch)
    }

    /// Whether rank `r` is known to have finished `epoch`.
    pub(super) fn known_finished(&self, r: usize, epoch: u64) -> bool {
        // Relaxed: see `learn_finished`.
        self.finished.get(r).is_some_and(|f| f.load(Ordering::Relaxed) >= epoch)
    }

    /// Rank `r`, seen at `epoch` or later, must have published the running
    /// collective's signature for `epoch`.
    fn check_signature(&self, r: usize, slot: &SigSlot, epoch: u64) -> Result<()> {
        // Relaxed: written by rank r before the Release of the flag this wait
        // just Acquire-loaded, and not rewritten before this rank finishes
        // `epoch` (the slot's next user is epoch + 2, or an inline head's
        // epoch + INLINE_DEPTH: `must_have_finished`).
        let (word, size) = (slot.word.load(Ordering::Relaxed), slot.size.load(Ordering::Relaxed));
        let mine = self.running.get();
        if word == tagged(&mine, epoch) && mine.agrees(&Signature { word: mine.word, size }) {
            return Ok(());
        }
        let me = self.rank;
        // The calls differ from rank r's: r is the cause this rank names.
        self.blame(r);
        Err(Error::invalid_param(if (word >> 24) & 0xff != epoch & 0xff {
            format!(
                "the ranks' collectives are out of step: rank {r} is not at the step of this rank's ({me}) {}: \
                 earlier calls on the team differed",
                mine.describe()
            )
        } else {
            let theirs = Signature { word: word & !Signature::TAG_BITS, size };
            format!(
                "the ranks' calls differ: rank {r} posted {}, this rank ({me}) posted {}",
                theirs.describe(),
                mine.describe()
            )
        }))
    }

    /// The first rank of the team whose process died, and the error naming
    /// it (an error path: one liveness check per rank).
    fn dead_member(&self) -> Option<(usize, Error)> {
        self.all.iter().find_map(|&r| self.dead(r).map(|e| (r, e)))
    }

    /// The error naming rank `r` if its process died.
    fn dead(&self, r: usize) -> Option<Error> {
        self.seg.ctrl(r).ok().and_then(|ctrl| self.check_alive(r, ctrl).err())
    }

    fn check_alive(&self, r: usize, ctrl: &Ctrl) -> Result<()> {
        // Relaxed: the pid is written once, and a late view only delays the check.
        let raw = match ctrl.pid.load(Ordering::Relaxed) {
            // Not attached yet (or died before writing it): the pid its
            // context announced, if known.
            0 => self.pids.get(r).copied().map_or(0, u64::from),
            raw => raw,
        };
        let pid = match u32::try_from(raw) {
            Ok(0) => return Ok(()),                            // unknown
            Ok(p) if p == std::process::id() => return Ok(()), // a thread of this process
            Ok(p) => p,
            Err(_) => return Err(Error::io(format!("shm team rank {r}'s control line holds pid {raw}, not a pid"))),
        };
        // A rank's pid appears in its control line only once it has attached;
        // before, the pid its context announced stands for it (so a rank that
        // died after mapping the segment but before writing its pid is found
        // too). Its process is taken (pidfd, start time) the first time it is
        // checked here, and that process is the one checked from then on.
        // What this cannot catch: a rank that died and whose pid was reused
        // before this first look (the new process is taken for it), and a
        // rank whose context announced no pid. Those waits end by the
        // collective's timeout instead.
        let cell =
            self.procs.get(r).ok_or_else(|| Error::internal(format!("rank {r} in a shm team of {}", self.size)))?;
        let proc = cell.get_or_init(|| Proc::of(pid));
        if proc.gone() {
            return Err(Error::io(format!("shm team rank {r} (pid {}) died", proc.pid)));
        }
        Ok(())
    }

    /// Start the next epoch, a [`Depth::Halves`] one: wait until every
    /// rank has finished reading the epoch two before (the last user of the
    /// half this one writes).
    pub(crate) async fn begin(&self) -> Result<u64> {
        self.begin_at(Depth::Halves).await
    }

    /// Start the next epoch, of `depth`: wait until every rank has finished
    /// the epochs whose regions it writes ([`ShmTeam::must_have_finished`]).
    pub(crate) async fn begin_at(&self, depth: Depth) -> Result<u64> {
        let e = self.next_epoch();
        let mut cursor = WaitCursor::default();
        std::future::poll_fn(|_| self.poll_begin(e, depth, &mut cursor)).await?;
        Ok(e)
    }

    /// One look for [`ShmTeam::begin_at`] of epoch `e` (taken by
    /// `next_epoch`): ready, with the epoch signed, once every rank has
    /// finished the epochs whose regions `e` writes.
    #[inline]
    pub(crate) fn poll_begin(&self, e: u64, depth: Depth, cursor: &mut WaitCursor) -> Poll<Result<()>> {
        let need = self.must_have_finished(e, depth);
        // Usually known already (see the module docs): then not even the
        // wait's one look (which reads no peer's control line either, but
        // was a third of a small collective's epoch on a team of one).
        if need > 0 && !self.all_known_finished(need) {
            match self.poll_wait(Flag::Done, &self.all, need, false, cursor) {
                Poll::Ready(Ok(())) => {}
                other => return other,
            }
        }
        match depth {
            Depth::Halves => {
                // Relaxed: only this rank's running task reads or writes it (as `finished`).
                self.halves_epoch[(e % 2) as usize].store(e, Ordering::Relaxed);
                Poll::Ready(self.sign(e))
            }
            Depth::Inline => {
                // Running ahead, this rank waits for nobody: a rank not known
                // to have finished the epoch two before may have failed or
                // left meanwhile, which the next call must say, as a wait would.
                let two_before = e.saturating_sub(2);
                for (r, f) in self.finished.iter().enumerate() {
                    // Relaxed: see `learn_finished`.
                    if f.load(Ordering::Relaxed) < two_before {
                        if let Err(err) = self.finished_or_takes_part(r, two_before) {
                            return Poll::Ready(Err(err));
                        }
                    }
                }
                // Its signature goes in its inline region's head, which its
                // readers check: the control line is not written (a write
                // there costs a line's trip when a peer read it last, as
                // every barrier does) — but now and then, so that the slot
                // never holds an epoch whose low byte is this one's.
                // Relaxed: see `halves_epoch`.
                let signed = self.signed_epoch[(e % 2) as usize].load(Ordering::Relaxed);
                if e.saturating_sub(signed) >= SIGN_AT_LEAST_EVERY {
                    return Poll::Ready(self.sign(e));
                }
                Poll::Ready(Ok(()))
            }
        }
    }

    /// The epoch every rank must have finished before this one starts
    /// epoch `e` of `depth` (0: none).
    ///
    /// Epoch `e` writes, by depth, its control-line signature slot and its
    /// data half (both `e % 2`), or its inline region (`e % INLINE_DEPTH`,
    /// the signature in its head) and, only if it goes on to single copy's
    /// agreement, its control-line signature slot ([`ShmTeam::slots_read_at`]).
    /// Their last users were epochs `e - 2` and `e - INLINE_DEPTH`; of the
    /// signature slot, the only readers are those of a `Halves` epoch (or
    /// of an agreement), which such an epoch records.
    #[inline]
    fn must_have_finished(&self, e: u64, depth: Depth) -> u64 {
        let two_before = e.saturating_sub(2);
        match depth {
            Depth::Halves => two_before,
            Depth::Inline => {
                // Relaxed: see `poll_begin`.
                let halves_two_before =
                    two_before > 0 && self.halves_epoch[(e % 2) as usize].load(Ordering::Relaxed) == two_before;
                let inline_before = e.saturating_sub(INLINE_DEPTH as u64);
                if halves_two_before { two_before } else { inline_before }
            }
        }
    }

    /// Epoch `e`, begun as a [`Depth::Inline`] one, goes on to a step whose
    /// readers check its control-line slots (single copy's agreement, in a
    /// v-variant's size round): sign the slot, which its begin did not, and
    /// make the epoch two after wait for its readers, as after a `Halves`
    /// epoch (`must_have_finished`). The slot's readers of epoch `e - 2`
    /// have finished: if there were any, this epoch's begin waited for them.
    pub(crate) fn slots_read_at(&self, e: u64) -> Result<()> {
        // Relaxed: see `poll_begin`.
        self.halves_epoch[(e % 2) as usize].store(e, Ordering::Relaxed);
        self.sign(e)
    }

    /// Write the running collective's signature for epoch `e` (its slot's
    /// readers of epoch `e - 2` have all finished: `begin` waited for them,
    /// or for the readers of the last epoch before it that had any).
    fn sign(&self, e: u64) -> Result<()> {
        self.sign_slot(&self.seg.ctrl(self.rank)?.sig[(e % 2) as usize], e);
        // Relaxed: only this rank's running task reads or writes it.
        self.signed_epoch[(e % 2) as usize].store(e, Ordering::Relaxed);
        Ok(())
    }

    /// Write the running collective's signature for epoch `e` into `slot`.
    pub(crate) fn sign_slot(&self, slot: &SigSlot, e: u64) {
        let sig = self.running.get();
        // Relaxed: published by the Release of this rank's next flag.
        slot.word.store(tagged(&sig, e), Ordering::Relaxed);
        slot.size.store(sig.size, Ordering::Relaxed);
    }

    /// Publish this rank's data (or results) of epoch `e`.
    pub(crate) fn publish(&self, flag: Flag, e: u64) -> Result<()> {
        let c = self.seg.ctrl(self.rank)?;
        // Release: everything this rank wrote for epoch e is visible to a
        // reader that Acquire-loads the counter (see `load`). The flags that
        // a peer spins on are handed towards it (`demote.rs`).
        match flag {
            Flag::Arrive => {
                c.arrive.store(e, Ordering::Release);
                demote(&c.arrive);
            }
            Flag::Reduced => {
                c.reduced.store(e, Ordering::Release);
                demote(&c.reduced);
            }
            Flag::Done => c.done.store(e, Ordering::Release),
            Flag::Inline => self.seg.inline_head(self.rank, e)?.tag.store(e, Ordering::Release),
        }
        if flag == Flag::Done {
            self.learn_finished(self.rank, e);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::segment::LEFT;
    use super::super::test_support::poll_to_end;
    use super::super::test_support::threads;
    use super::*;

    /// A counter in another rank's control line is input: one further ahead
    /// than any rank can be (INLINE_DEPTH epochs past this one's) was not
    /// written by that rank, and is an error naming it. Taken for the
    /// rank's progress, a `done` of u64::MAX told this rank that the other
    /// had finished every epoch to come: it never waited for it again, and
    /// rewrote halves the other might still be reading.
    #[test]
    fn a_counter_past_any_rank_is_an_error_not_progress() {
        let teams = threads("ep-counter", 2);
        let t = &teams[0];
        let other = t.seg.ctrl(1).unwrap();
        other.done.store(u64::MAX, Ordering::Release);
        for e in 1..=2 {
            assert_eq!(poll_to_end(t.begin()).unwrap(), e);
            t.publish(Flag::Done, e).unwrap();
        }
        let e = poll_to_end(t.begin()).unwrap_err().to_string();
        assert!(e.contains(&format!("rank 1's done counter reads epoch {}", u64::MAX)), "{e}");
        assert!(e.contains("no rank can be past epoch 11 while this rank (0) is at epoch 3"), "{e}");
        // As far ahead as a rank can be is a value; an `arrive` further is named as a `done` is.
        let t = &threads("ep-counter2", 2)[0];
        let other = t.seg.ctrl(1).unwrap();
        for e in 1..=2 {
            assert_eq!(poll_to_end(t.begin()).unwrap(), e);
            t.publish(Flag::Done, e).unwrap();
        }
        other.done.store(3 + INLINE_DEPTH as u64, Ordering::Release);
        assert_eq!(poll_to_end(t.begin()).unwrap(), 3);
        other.arrive.store(u64::MAX, Ordering::Release);
        let e = poll_to_end(t.wait(Flag::Arrive, &[1], 3)).unwrap_err().to_string();
        assert!(e.contains(&format!("rank 1's arrive counter reads epoch {}", u64::MAX)), "{e}");
    }

    #[test]
    fn a_left_word_names_its_cause_only_within_the_team() {
        let failed_because = |c: u64| FAILED | (c + 1) << CAUSE_SHIFT;
        assert!(gone(1, 4, PRESENT).is_none());
        let (e, blame) = gone(1, 4, failed_because(3)).unwrap();
        assert_eq!(blame, 3);
        assert!(e.to_string().contains("rank 1 stopped taking part because of rank 3"), "{e}");
        // Its own failure, a cause naming itself, out of the team or absurd: blame the rank itself.
        for word in [FAILED, failed_because(1), failed_because(4), failed_because(u64::from(u32::MAX))] {
            let (e, blame) = gone(1, 4, word).unwrap();
            assert_eq!(blame, 1, "{word:#x}");
            assert!(e.to_string().contains("a collective failed on it"), "{word:#x}: {e}");
        }
        let (e, blame) = gone(2, 4, LEFT).unwrap();
        assert_eq!(blame, 2);
        assert!(e.to_string().contains("rank 2 left the team"), "{e}");
        // Any other state is a leave, never a panic.
        for word in [0xff, u64::MAX] {
            assert!(gone(0, 4, word).is_some_and(|(e, r)| r == 0 && e.to_string().contains("left")), "{word:#x}");
        }
    }
}
