//! Collectives of one epoch: what each publishes, waits for and reads, and
//! a hand-written state machine that runs one as a whole post.
//!
//! A small collective is one epoch of the protocol (`epoch.rs`): begin,
//! publish, wait, read, publish `done`. [`OneEpoch`] says, per collective,
//! the three steps in the middle. Two drivers run it:
//! - [`ShmTeam::one_epoch`], an `async fn`, for algorithms that run it as
//!   one step among others (gatherv after agreeing on the sizes);
//! - [`ShmPost::one_epoch`], a post's whole future: the turn, the epoch and
//!   the turn's hand-over written out as a state machine. A post of a small
//!   collective was ~15 nested futures (the turn, the wrapper that copies
//!   what it waits for into the diag, the algorithm, `begin`, each wait),
//!   each a state to dispatch on every poll and bytes to move into the box:
//!   on a team of one, a barrier's poll cost ~1 050 instructions of its
//!   ~2 600, which this machine cuts to a few hundred. What it does is
//!   exactly what `ShmPost::run` does around the `async` version.
//!
//! The machine runs any [`Epoch`]: a collective of one epoch, or the first
//! epoch of one that may need more — a v-variant's size round
//! (`alg/meta.rs`), which usually carries the whole collective and
//! otherwise hands what is left to a future ([`Then::Continue`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use ferrocoll_core::args::{Blocked, Reducer};
use ferrocoll_core::backend::{PreparedReduce, ReduceSpec};
use ferrocoll_core::engine::{TaskDiag, TaskFuture, downcast_spent};
use ferrocoll_core::{Error, MemRef, MemType, Result};

use super::alg::meta::SizeRound;
use super::epoch::{Depth, Flag, WaitCursor};
use super::inline::WITH_TAG;
use super::team::{ShmPost, ShmTeam, note_waiting};
use crate::base::AlgFuture;
use crate::base::local::alone_is_a_copy;

/// A collective that takes one epoch: its payloads fit the inline regions
/// (`inline.rs`), or it has none.
pub(crate) enum OneEpoch {
    /// Barrier (`flags`): everyone arrives, everyone waits for everyone
    /// else.
    Barrier,
    /// Allreduce and reduce (`onestep`): every rank publishes `src`; the
    /// ranks with an `out` (every rank, or the root) reduce all inputs into it.
    Reduce { src: MemRef, out: Option<MemRef>, reduction: Reduction },
    /// Bcast: the root publishes `buf`; the others copy it out.
    Bcast { buf: MemRef, root: usize },
    /// Allgather(v) and gather(v): every rank publishes `mine` where the
    /// others `read` it (allgather(v), a gather(v)'s givers: a gather(v)'s
    /// root publishes only its flag, its block going from `mine` to its
    /// place); the ranks with a `dst` copy every rank's into its block.
    Gather { mine: MemRef, dst: Option<Blocked>, read: bool },
    /// Alltoall: every rank publishes its whole `src`, one `block` of bytes
    /// per rank; each copies block `rank` of every rank's into block `g` of
    /// `dst`. In place (`src` is `dst`) the published copy is the input.
    Alltoall { src: MemRef, dst: MemRef, block: usize },
    /// Reduce-scatter: every rank publishes its whole vector `src`; each
    /// reduces its block of every rank's vector into `dst`.
    ReduceScatter { src: Blocked, dst: MemRef, reduction: Reduction },
    /// Scatter: the root publishes its whole `src` (at the root only), one
    /// block of `dst.len()` bytes per rank; every rank copies block `rank`
    /// into `dst` (at the root in place, `dst` is that block already).
    Scatter { src: Option<MemRef>, dst: MemRef, root: usize },
}

/// The steps of an epoch that a post's state machine runs: begin it at
/// `depth`, `publish`, wait for `waits_for`, `finish`.
pub(crate) trait Epoch: Send + Unpin + 'static {
    /// What the epoch writes (see `Depth`).
    fn depth(&self, team: &ShmTeam) -> Depth;

    /// Step 2 of the epoch: publish what this rank gives.
    fn publish(&self, team: &ShmTeam, e: u64) -> Result<()>;

    /// Step 3: the counter to wait on, and whose (none: this rank reads
    /// nothing). Never this rank's own (`ShmTeam::others`): it published
    /// its flag in step 2, and its `done` in step 5 records that it finished
    /// the epoch (`ShmTeam::publish`). Reading its own control line back
    /// cost ~50–100 instructions a collective, 4–15 % of a 2-rank
    /// allgather's time (BENCHMARKS.md, thirty-first round).
    fn waits_for<'a>(&'a self, team: &'a ShmTeam) -> Option<(Flag, &'a [usize])>;

    /// Between steps 3 and 4, once the wait is over: ask for the lines of
    /// the others' payloads that `finish` will read, all at once
    /// (`prefetch.rs`). Nothing by default.
    fn prefetch(&self, _team: &ShmTeam, _e: u64) {}

    /// Steps 4 and 5: read what the wait said is there and publish `done`
    /// — or leave what is left of the collective (`done` of this epoch
    /// included) to a future.
    fn finish(&self, team: &Arc<ShmTeam>, e: u64) -> Result<Then>;
}

/// What follows an epoch's `finish`.
pub(crate) enum Then {
    /// The collective is over.
    Over,
    /// The rest of the collective, which runs in the same turn.
    Continue(AlgFuture),
}

impl Epoch for OneEpoch {
    /// A barrier's readers wait on `arrive` and check the control line's
    /// signature; every other one reads inline regions only.
    fn depth(&self, _: &ShmTeam) -> Depth {
        match self {
            OneEpoch::Barrier => Depth::Halves,
            _ => Depth::Inline,
        }
    }

    fn publish(&self, team: &ShmTeam, e: u64) -> Result<()> {
        match self {
            OneEpoch::Barrier => team.publish(Flag::Arrive, e),
            OneEpoch::Reduce { src, .. } => team.publish_inline(e, *src),
            OneEpoch::Bcast { buf, root } if team.rank == *root => team.publish_inline(e, *buf),
            OneEpoch::Bcast { .. } => Ok(()),
            OneEpoch::Gather { mine, read: true, .. } => team.publish_inline(e, *mine),
            OneEpoch::Gather { read: false, .. } => team.publish_inline_written(e),
            OneEpoch::Alltoall { src, .. } => team.publish_inline(e, *src),
            OneEpoch::ReduceScatter { src, .. } => team.publish_inline(e, src.mem),
            OneEpoch::Scatter { src: Some(src), .. } => team.publish_inline(e, *src),
            OneEpoch::Scatter { src: None, .. } => Ok(()),
        }
    }

    fn waits_for<'a>(&'a self, team: &'a ShmTeam) -> Option<(Flag, &'a [usize])> {
        match self {
            OneEpoch::Barrier => Some((Flag::Arrive, &team.others)),
            OneEpoch::Reduce { out: Some(_), .. }
            | OneEpoch::Gather { dst: Some(_), .. }
            | OneEpoch::Alltoall { .. }
            | OneEpoch::ReduceScatter { .. } => Some((Flag::Inline, &team.others)),
            OneEpoch::Bcast { root, .. } | OneEpoch::Scatter { root, .. } if team.rank != *root => {
                Some((Flag::Inline, std::slice::from_ref(root)))
            }
            _ => None,
        }
    }

    /// The payload lines past the tag's of the ranks whose payloads `read`
    /// reads (their addresses follow from the call: see `prefetch.rs` for
    /// why asking for them first pays anyway); none when every byte read
    /// came with the tag.
    #[inline]
    fn prefetch(&self, team: &ShmTeam, e: u64) {
        if self.read_end(team.rank) > WITH_TAG {
            self.prefetch_payloads(team, e);
        }
    }

    fn finish(&self, team: &Arc<ShmTeam>, e: u64) -> Result<Then> {
        self.read(team, e)?;
        team.publish(Flag::Done, e)?;
        Ok(Then::Over)
    }
}

impl OneEpoch {
    /// How far into another rank's payload this rank (`me`) reads, at
    /// most (0: it reads none).
    fn read_end(&self, me: usize) -> usize {
        match self {
            OneEpoch::Reduce { src, out: Some(_), .. } => src.len(),
            OneEpoch::Bcast { buf, root } if me != *root => buf.len(),
            OneEpoch::Gather { dst: Some(d), .. } => d.mem.len(),
            OneEpoch::Alltoall { block, .. } => me.saturating_add(1).saturating_mul(*block),
            OneEpoch::ReduceScatter { src, .. } => src.mem.len(),
            OneEpoch::Scatter { src: None, dst, .. } => me.saturating_add(1).saturating_mul(dst.len()),
            _ => 0,
        }
    }

    /// [`Epoch::prefetch`] of payloads longer than the tag's line holds.
    #[inline(never)]
    fn prefetch_payloads(&self, team: &ShmTeam, e: u64) {
        let me = team.rank;
        let others = |at: &dyn Fn(usize) -> (usize, usize)| {
            for r in (0..team.size).filter(|&r| r != me) {
                let (from, len) = at(r);
                team.prefetch_inline(r, e, from, len);
            }
        };
        match self {
            OneEpoch::Reduce { src, out: Some(_), .. } => others(&|_| (0, src.len())),
            OneEpoch::Bcast { buf, root } if me != *root => team.prefetch_inline(*root, e, 0, buf.len()),
            OneEpoch::Gather { dst: Some(d), .. } => others(&|r| (0, d.blocks.bytes(r))),
            OneEpoch::Alltoall { block, .. } => others(&|_| (me.saturating_mul(*block), *block)),
            OneEpoch::ReduceScatter { src, .. } => {
                if let Ok((at, n)) = src.blocks.get(me) {
                    others(&|_| (at, n));
                }
            }
            OneEpoch::Scatter { src: None, dst, root } => {
                team.prefetch_inline(*root, e, me.saturating_mul(dst.len()), dst.len())
            }
            _ => {}
        }
    }

    /// Step 4: read what the wait said is there.
    fn read(&self, team: &ShmTeam, e: u64) -> Result<()> {
        match self {
            OneEpoch::Barrier => Ok(()),
            OneEpoch::Reduce { src, out: Some(out), reduction } => {
                let n = src.len();
                let own = own_input(*src, *out);
                let part = |r: usize| match own {
                    Some(own) if r == team.rank => Ok(own),
                    _ => team.inline_part(r, e, n),
                };
                team.with_parts(part, |srcs| reduction.run(team, *out, srcs))
            }
            OneEpoch::Bcast { buf, root } if team.rank != *root => {
                team.copy(*buf, team.inline_part(*root, e, buf.len())?)
            }
            OneEpoch::Gather { mine, dst: Some(d), .. } => {
                for r in (0..team.size).filter(|&r| r != team.rank) {
                    let theirs = d.block(r)?;
                    team.copy(theirs, team.inline_part(r, e, theirs.len())?)?;
                }
                team.copy(d.block(team.rank)?, *mine)
            }
            OneEpoch::Alltoall { src, dst, block } => {
                let (me, b) = (team.rank, *block);
                for g in (0..team.size).filter(|&g| g != me) {
                    team.copy(dst.range(g * b, b)?, team.inline_part(g, e, src.len())?.range(me * b, b)?)?;
                }
                if src == dst { Ok(()) } else { team.copy(dst.range(me * b, b)?, src.range(me * b, b)?) }
            }
            OneEpoch::ReduceScatter { src, dst, reduction } => {
                let (at, n) = src.blocks.get(team.rank)?;
                if n != dst.len() {
                    return Err(Error::internal(format!("a {n}-byte block for a {}-byte result", dst.len())));
                }
                let whole = src.mem.len();
                let own = own_input(src.mem, *dst).map(|mine| mine.range(at, n)).transpose()?;
                let part = |r: usize| match own {
                    Some(own) if r == team.rank => Ok(own),
                    _ => team.inline_part(r, e, whole)?.range(at, n),
                };
                team.with_parts(part, |srcs| reduction.run(team, *dst, srcs))
            }
            OneEpoch::Scatter { src, dst, root } => {
                let (me, b) = (team.rank, dst.len());
                let whole = team.size.checked_mul(b).ok_or_else(|| Error::internal("a scatter of blocks this long"))?;
                let mine = match src {
                    Some(src) => src.range(me * b, b)?,
                    None => team.inline_part(*root, e, whole)?.range(me * b, b)?,
                };
                if mine == *dst { Ok(()) } else { team.copy(*dst, mine) }
            }
            _ => Ok(()),
        }
    }
}

/// An epoch's final reduction, the same at every post
/// of its task: its spec checked and its kernel chosen by the host memory
/// component at the first post ([`prepare_reduce`]), not at each.
///
/// [`prepare_reduce`]: ferrocoll_core::backend::Mc::prepare_reduce
pub(crate) struct Reduction {
    spec: ReduceSpec,
    prepared: OnceLock<Option<PreparedReduce>>,
}

impl Reduction {
    /// The final reduction of `bytes` of `reducer`'s elements.
    pub(crate) fn new(reducer: &Reducer, bytes: usize) -> Reduction {
        Reduction { spec: reducer.last(bytes / reducer.elem_size), prepared: OnceLock::new() }
    }

    /// `out = op(srcs...)` on `team`'s host memory component.
    fn run(&self, team: &ShmTeam, out: MemRef, srcs: &[MemRef]) -> Result<()> {
        if srcs.len() == 1 && alone_is_a_copy(self.spec.op) {
            // A team of one's logical operation (`ShmTeam::reduce` copies it).
            return team.reduce(out, srcs, self.spec);
        }
        let host = team.host()?;
        match self.prepared.get_or_init(|| host.prepare_reduce(&self.spec)) {
            Some(prepared) => host.reduce_prepared(out, srcs, prepared),
            // A component without the prepared path, or a spec it refuses,
            // which `reduce` then names.
            None => team.reduce(out, srcs, self.spec),
        }
    }
}

/// Where a reduction reads this rank's own input: `src` itself, host
/// memory apart from the result `out` — not its copy in this rank's inline
/// region (the same bytes). The peers read that copy while this rank
/// reduces, and on a 2-core Intel Xeon VM reading it back cost the
/// reduction a trip for its line in some calls: allreduce of 8 B on 2
/// ranks 0.28–0.29 µs against allgather's 0.24, with the same
/// instructions, the samples on the reduction's loads (BENCHMARKS.md,
/// thirty-ninth round). In place, or in other memory, the copy it is.
pub(crate) fn own_input(src: MemRef, out: MemRef) -> Option<MemRef> {
    (src.mem_type() == MemType::Host && !src.overlaps(&out)).then_some(src)
}

impl ShmTeam {
    /// Run `coll` as the next epoch of the running collective.
    pub(crate) async fn one_epoch(&self, coll: &OneEpoch) -> Result<()> {
        let e = self.begin_at(coll.depth(self)).await?;
        coll.publish(self, e)?;
        if let Some((flag, ranks)) = coll.waits_for(self) {
            self.wait(flag, ranks, e).await?;
            coll.prefetch(self, e);
        }
        coll.read(self, e)?;
        self.publish(Flag::Done, e)
    }
}

impl ShmPost {
    /// The future of `coll` run as this post's whole collective: as
    /// `self.run(|team| async move { team.one_epoch(&coll).await })`, with
    /// one state machine instead of nested futures.
    pub(crate) fn one_epoch(self, coll: impl Epoch) -> AlgFuture {
        Box::pin(OneEpochPost { post: self, coll, step: Step::Turn, cursor: WaitCursor::default(), rest: None })
    }

    /// [`ShmPost::one_epoch`] of what `make` makes for this team, or a
    /// future of its error.
    pub(crate) fn one_epoch_with<E: Epoch>(self, make: impl FnOnce(&ShmTeam) -> Result<E>) -> AlgFuture {
        match make(&self.team) {
            Ok(coll) => self.one_epoch(coll),
            Err(e) => self.run(move |_| async move { Err(e) }),
        }
    }

    /// `one(o)` as this post's one epoch when payloads of `len` bytes fit
    /// an inline region, else the algorithm `rounds` over the segment's
    /// halves (what every algorithm with an inline case registers).
    pub(crate) fn one_epoch_or<O, F>(
        self,
        len: usize,
        o: O,
        one: fn(O) -> OneEpoch,
        rounds: impl FnOnce(Arc<ShmTeam>, O) -> F + Send + 'static,
    ) -> AlgFuture
    where
        O: Send + 'static,
        F: Future<Output = Result<()>> + Send + 'static,
    {
        if self.team.fits_inline(len) { self.one_epoch(one(o)) } else { self.run(move |t| rounds(t, o)) }
    }

    /// Whether one block of `block` bytes per rank fits an inline region
    /// (what alltoall and scatter publish).
    pub(crate) fn fits_inline_blocks(&self, block: usize) -> bool {
        block.checked_mul(self.team.size).is_some_and(|whole| self.team.fits_inline(whole))
    }
}

/// `spent`, the finished future of a task's last post, made ready to run
/// the task's next post on `team` with `ticket` and `diag`, if it is a
/// one-epoch post on that team (the same task runs the same collective
/// each time); else given back. The box, its team and (usually) its diag
/// are the last post's: nothing allocated, no reference counted.
pub(crate) fn restart(
    spent: TaskFuture,
    team: &Arc<ShmTeam>,
    ticket: impl Fn() -> u64,
    diag: &Arc<TaskDiag>,
) -> std::result::Result<TaskFuture, TaskFuture> {
    restart_as::<OneEpoch>(spent, team, &ticket, diag)
        .or_else(|spent| restart_as::<SizeRound>(spent, team, &ticket, diag))
}

/// [`restart`] for a post of an `E`.
fn restart_as<E: Epoch>(
    spent: TaskFuture,
    team: &Arc<ShmTeam>,
    ticket: &impl Fn() -> u64,
    diag: &Arc<TaskDiag>,
) -> std::result::Result<TaskFuture, TaskFuture> {
    let mut again = downcast_spent::<OneEpochPost<E>>(spent)?;
    if again.step != Step::Over || !Arc::ptr_eq(&again.post.team, team) {
        return Err(Box::into_pin(again));
    }
    if !Arc::ptr_eq(&again.post.diag, diag) {
        again.post.diag = diag.clone();
    }
    again.post.ticket = ticket();
    again.step = Step::Turn;
    again.cursor = WaitCursor::default();
    Ok(Box::into_pin(again))
}

/// Where a [`OneEpochPost`] stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Waiting for the post's turn on the team (nothing done yet).
    Turn,
    /// The turn held, epoch taken: waiting until every rank has finished
    /// the epoch two before (`ShmTeam::begin`).
    Begin(u64),
    /// Published: waiting for the ranks this one reads.
    Wait(u64),
    /// The epoch is over, the collective not: running the rest (`Then::Continue`).
    After,
    /// Done, failed, or cancelled: the turn was passed on.
    Over,
}

/// One post of a one-epoch collective (see [`ShmPost::one_epoch`]).
struct OneEpochPost<E> {
    post: ShmPost,
    coll: E,
    step: Step,
    cursor: WaitCursor,
    /// The rest of the collective, in `Step::After`.
    rest: Option<AlgFuture>,
}

impl<E: Epoch> OneEpochPost<E> {
    /// Run as far as possible; `Pending` where a rank (or the turn) is not there yet.
    fn advance(&mut self, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let OneEpochPost { post, coll, step, cursor, rest } = self;
        let team = &*post.team;
        loop {
            let next = match *step {
                Step::Turn => match team.poll_turn(post.ticket) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Err(e)) => {
                        // As a dropped `Waiting` does: the other ranks run the
                        // collective this rank will not.
                        *step = Step::Over;
                        team.break_team();
                        return Poll::Ready(Err(e));
                    }
                    Poll::Ready(Ok(())) => {
                        team.running.set(post.sig);
                        Step::Begin(team.next_epoch())
                    }
                },
                Step::Begin(e) => match team.poll_begin(e, coll.depth(team), cursor) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(r) => match r.and_then(|()| coll.publish(team, e)) {
                        Ok(()) => {
                            *cursor = WaitCursor::default();
                            Step::Wait(e)
                        }
                        Err(err) => return Poll::Ready(Err(fail(step, post, err))),
                    },
                },
                Step::Wait(e) => {
                    if let Some((flag, ranks)) = coll.waits_for(team) {
                        match team.poll_wait(flag, ranks, e, true, cursor) {
                            Poll::Pending => return Poll::Pending,
                            Poll::Ready(Ok(())) => coll.prefetch(team, e),
                            Poll::Ready(Err(err)) => return Poll::Ready(Err(fail(step, post, err))),
                        }
                    }
                    match coll.finish(&post.team, e) {
                        Ok(Then::Over) => return Poll::Ready(done(step, post)),
                        Ok(Then::Continue(f)) => *rest = Some(f),
                        Err(err) => return Poll::Ready(Err(fail(step, post, err))),
                    }
                    Step::After
                }
                Step::After => {
                    let Some(f) = rest else { return Poll::Ready(Err(fail(step, post, Error::internal("no rest")))) };
                    let r = f.as_mut().poll(cx);
                    if r.is_ready() {
                        *rest = None;
                    }
                    return match r {
                        Poll::Pending => Poll::Pending,
                        Poll::Ready(Ok(())) => Poll::Ready(done(step, post)),
                        Poll::Ready(Err(err)) => Poll::Ready(Err(fail(step, post, err))),
                    };
                }
                Step::Over => return Poll::Ready(Err(Error::internal("a finished shm collective was polled again"))),
            };
            *step = next;
        }
    }
}

/// The collective is over: the next task's turn comes.
fn done(step: &mut Step, post: &ShmPost) -> Result<()> {
    *step = Step::Over;
    post.team.pass_turn(post.ticket, true);
    Ok(())
}

/// The collective failed halfway: the team is broken (the ranks are at
/// different epochs now), and the next task's turn comes.
fn fail(step: &mut Step, post: &ShmPost, err: Error) -> Error {
    *step = Step::Over;
    post.team.note_failure(&err);
    post.team.pass_turn(post.ticket, false);
    err
}

impl<E: Epoch> Future for OneEpochPost<E> {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let this = self.get_mut();
        let r = this.advance(cx);
        if r.is_pending() {
            note_waiting(&this.post.team, &this.post.diag);
        }
        r
    }
}

impl<E> Drop for OneEpochPost<E> {
    /// Cancelled before its end: before its turn came, the team is broken
    /// (the others will run a collective this rank will not); during it,
    /// the team is broken too, and the turn passed on.
    fn drop(&mut self) {
        match self.step {
            Step::Turn => self.post.team.break_team(),
            Step::Begin(_) | Step::Wait(_) | Step::After => self.post.team.pass_turn(self.post.ticket, false),
            Step::Over => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{poll_to_end, threads};
    use super::*;

    /// A reduction reads its own input where it lies only when that is
    /// host memory apart from the result; in place, overlapping, or in
    /// another memory type it reads its published copy.
    #[test]
    fn a_reduction_reads_its_own_input_where_it_lies_when_that_is_apart() {
        let mut buf = [0u8; 64];
        // SAFETY: MemRefs over `buf`, which outlives them; `own_input`
        // compares addresses and types and reads nothing.
        let (src, out, whole, device) = unsafe {
            let whole = MemRef::from_mut_slice(&mut buf);
            (
                whole.range(0, 16).unwrap(),
                whole.range(32, 16).unwrap(),
                whole,
                MemRef::new(whole.addr(), 16, MemType::Cuda),
            )
        };
        assert_eq!(own_input(src, out), Some(src), "apart: the input itself");
        assert_eq!(own_input(src, src), None, "in place: the copy");
        assert_eq!(own_input(whole.range(8, 16).unwrap(), src), None, "overlapping: the copy");
        assert_eq!(own_input(device, out), None, "device memory: the copy");
        assert_eq!(
            own_input(whole.range(16, 16).unwrap(), src),
            Some(whole.range(16, 16).unwrap()),
            "adjacent is apart"
        );
    }

    /// A one-epoch collective waits for the other ranks, not for itself
    /// (see `Epoch::waits_for`), and still runs to its end on every rank.
    #[test]
    fn a_one_epoch_collective_waits_for_the_others_only() {
        let teams = threads("oe-self", 3);
        for t in &teams {
            let (flag, ranks) = OneEpoch::Barrier.waits_for(t).expect("a barrier waits");
            assert_eq!(flag, Flag::Arrive);
            let expected: Vec<usize> = (0..3).filter(|&r| r != t.rank).collect();
            assert_eq!(ranks, &expected[..], "rank {}", t.rank);
        }
        std::thread::scope(|s| {
            for t in &teams {
                s.spawn(move || {
                    for _ in 0..3 {
                        poll_to_end(t.one_epoch(&OneEpoch::Barrier)).expect("barrier");
                    }
                    // Its own `done` recorded what a wait for itself would have.
                    assert!((0..3).all(|r| t.known_finished(r, 2)), "rank {}", t.rank);
                });
            }
        });
    }
}
