//! The shm TL's team: the mapped segment, the per-rank epoch counter, and
//! the serialisation of its collectives.
//!
//! A rank runs its shm collectives one after another, in post order (each
//! post takes a ticket; a task runs when its ticket's turn comes), so that
//! every rank walks through the same epochs in the same order. A collective
//! that fails or is cancelled halfway leaves the ranks at different epochs:
//! the team is then broken, and its later collectives fail at once, saying so.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::Poll;
use std::time::Instant;

use ferrocoll_core::args::{CollInit, Signature};
use ferrocoll_core::backend::{CollTask, Mc, McSet, PostInfo, ReduceSpec, TlTeam};
use ferrocoll_core::engine::board::ENTRY_WORDS;
use ferrocoll_core::engine::{CallBoard, TaskDiag, TaskFuture};
use ferrocoll_core::score::Score;
use ferrocoll_core::{CollType, Error, MemRef, MemType, Result};
use ferrocoll_transport::cma;
use ferrocoll_transport::liveness::Proc;

use super::alg::single_copy::Reach;
use super::alg::{self, ShmPost as Post};
use super::copy_in::{self, CopyIn, Stores};
use super::layout::{LINE, Layout};
use super::liveness_cadence::LivenessCadence;
use super::one_epoch;
use super::segment::{CAUSE_SHIFT, FAILED, LEFT, PRESENT, Segment};
use super::{CMA_MEASURED, SCORE, ShmConfig, crossover, staging_probe};
use crate::base::local::alone_is_a_copy;
use crate::base::{Alg, AlgFuture, AlgTeam, DefaultAlg, Registry, Run, TeamOf};

/// Teams up to this size hand their ranks' parts around on the stack (see
/// [`ShmTeam::with_parts`]).
const STACK_PARTS: usize = 16;

/// Teams of up to this many ranks gather their parts in a shorter array.
const FEW_PARTS: usize = 4;

/// One rank's view of a shm team.
pub(crate) struct ShmTeam {
    pub(crate) seg: Segment,
    pub(crate) rank: usize,
    pub(crate) size: usize,
    /// 0..size, for waiting on every rank.
    pub(crate) all: Vec<usize>,
    /// Every rank but this one, for waits that follow this rank's own
    /// publish of the same flag (`Epoch::waits_for`).
    pub(crate) others: Vec<usize>,
    /// Each rank's process, from the first time its pid was seen in its
    /// control line (see `epoch.rs`).
    pub(crate) procs: Vec<OnceLock<Proc>>,
    /// Each rank's pid as its context announced it (0: unknown): checked
    /// while its control line has none yet (a rank that died before
    /// writing it would otherwise never be found dead).
    pub(crate) pids: Vec<u32>,
    /// For each rank `r`, the last epoch this rank knows `r` has finished:
    /// what `r`'s counters, read by earlier waits, already proved, so that
    /// `ShmTeam::begin` does not read `r`'s control line again for it
    /// (`epoch.rs`).
    pub(crate) finished: Vec<AtomicU64>,
    /// The last epoch of each parity that this rank began as a
    /// `Depth::Halves` one (`epoch.rs`: what a deep epoch must wait for).
    pub(crate) halves_epoch: [AtomicU64; 2],
    /// The last epoch of each parity whose signature this rank wrote into
    /// its control line's slot (`epoch.rs`: inline epochs sign it only now
    /// and then).
    pub(crate) signed_epoch: [AtomicU64; 2],
    pub(crate) mcs: McSet,
    /// The host memory component (looked up once: every copy and reduction uses it).
    host_mc: Option<Arc<dyn Mc>>,
    pub(crate) config: ShmConfig,
    tickets: AtomicU64,
    turn: AtomicU64,
    epoch: AtomicU64,
    broken: AtomicBool,
    /// The error of the first collective that failed on this rank, which
    /// the calls after it repeat (they fail at once on a broken team).
    first_failure: OnceLock<String>,
    /// The rank whose failure (death, leave or failed collective) ended
    /// this rank's part first, plus one (0: none seen): what `break_team`
    /// tells the others.
    blame: AtomicU64,
    /// The rank the running collective waits for (`u64::MAX`: none), copied
    /// into the task's diagnostics by the task's future.
    waiting: AtomicU64,
    /// The running collective's signature, which every epoch publishes and checks (`epoch.rs`).
    pub(crate) running: Running,
    /// Whether single copy may run, and which peers this rank can read (`alg/single_copy.rs`).
    pub(crate) reach: Reach,
    /// Which stores this rank's large copies into the segment use (`copy_in.rs`).
    copy_in: CopyIn,
}

/// The collective this rank runs on the team now (one at a time: see the module docs).
#[derive(Default)]
pub(crate) struct Running {
    /// `Signature::word`.
    pub word: AtomicU64,
    /// `Signature::size`.
    pub size: AtomicU64,
}

impl Running {
    /// What is running now (Relaxed: only the one running task of this rank touches it).
    pub(crate) fn get(&self) -> Signature {
        Signature { word: self.word.load(Ordering::Relaxed), size: self.size.load(Ordering::Relaxed) }
    }

    pub(super) fn set(&self, sig: Signature) {
        // Relaxed: read only by this rank's running task (see `get`).
        self.word.store(sig.word, Ordering::Relaxed);
        self.size.store(sig.size, Ordering::Relaxed);
    }
}

/// What rank 0 creates the team's segment with: its name, the creator
/// endpoint's cookie, and whether the creator's host is oversubscribed
/// (the others take its view from the segment); and every member's pid as
/// its context announced it (0: unknown).
pub(crate) struct TeamSetup {
    pub name: String,
    pub cookie: u64,
    pub oversubscribed: bool,
    pub pids: Vec<u32>,
    /// Where the context keeps the single-copy threshold its first team
    /// timed with a peer, for its later ones.
    pub probed: Arc<OnceLock<usize>>,
}

/// A member's segment while its creation may still be given up: dropped
/// before [`Unfinished::finish`], it marks the rank LEFT (unless it marked
/// itself FAILED already), so that the members that wait for it stop.
struct Unfinished {
    seg: Option<Segment>,
    rank: usize,
}

impl Unfinished {
    /// The segment, the creation done.
    fn finish(&mut self) -> Result<Segment> {
        self.seg.take().ok_or_else(|| Error::internal("shm team creation finished twice"))
    }
}

impl Drop for Unfinished {
    fn drop(&mut self) {
        if let Some(ctrl) = self.seg.as_ref().and_then(|s| s.ctrl(self.rank).ok()) {
            // Release: as a team's destruction marks it. A FAILED word, which
            // names a cause, stays.
            let _ = ctrl.left.compare_exchange(PRESENT, LEFT, Ordering::Release, Ordering::Relaxed);
        }
    }
}

/// The first of `ranks` (with their pids) whose process is gone, and an
/// error naming it: `what` says what this rank waited for it to do.
pub(crate) fn dead_among(ranks: impl IntoIterator<Item = (usize, u32)>, what: &str) -> Option<(usize, Error)> {
    let me = std::process::id();
    ranks
        .into_iter()
        .filter(|&(_, pid)| pid != 0 && pid != me)
        .find(|&(_, pid)| Proc::of(pid).gone())
        .map(|(r, pid)| (r, Error::io(format!("shm team rank {r} (pid {pid}) died before {what}"))))
}

impl ShmTeam {
    /// Create (rank 0) or attach to (others) the team's segment; completes
    /// once every member has mapped it.
    pub(crate) async fn create(
        setup: TeamSetup,
        rank: usize,
        size: usize,
        mcs: McSet,
        config: ShmConfig,
    ) -> Result<Arc<dyn TlTeam>> {
        let team = ShmTeam::create_shared(setup, rank, size, mcs, config).await?;
        Ok(Arc::new(TeamOf(team)))
    }

    /// [`ShmTeam::create`], before the engine's wrapper.
    pub(crate) async fn create_shared(
        TeamSetup { name, cookie, oversubscribed, pids, probed }: TeamSetup,
        rank: usize,
        size: usize,
        mcs: McSet,
        config: ShmConfig,
    ) -> Result<Arc<ShmTeam>> {
        let seg = if rank == 0 {
            // "auto" where a second rank can time staging with this one:
            // `None`, measured below, unless this context already has.
            let cma_threshold = match config.cma_threshold {
                CMA_MEASURED if size > 1 && !oversubscribed => probed.get().copied(),
                CMA_MEASURED => Some(crossover::measured_threshold()),
                t => Some(t),
            };
            Segment::create(&name, Layout::new(size, config.data_size)?, cookie, oversubscribed, cma_threshold)?
        } else {
            let mut tries = LivenessCadence::default();
            std::future::poll_fn(|_| match Segment::open(&name, size, cookie) {
                Ok(Some(s)) => Poll::Ready(Ok(s)),
                Ok(None) if tries.due() => {
                    let creator = pids.first().map(|&pid| (0, pid));
                    dead_among(creator, "creating the team's segment")
                        .map_or(Poll::Pending, |(_, e)| Poll::Ready(Err(e)))
                }
                Ok(None) => Poll::Pending,
                Err(e) => Poll::Ready(Err(e)),
            })
            .await?
        };
        let me = seg.ctrl(rank)?;
        // Relaxed: read only by liveness checks, which tolerate a late view,
        // and by single copy after a flag this rank publishes later.
        me.pid.store(u64::from(std::process::id()), Ordering::Relaxed);
        // From here the others may wait for this rank (rank 0's threshold,
        // rank 1's timed copies): if this creation is given up (dropped, or
        // an error), they learn it from this rank's `left`.
        let mut unfinished = Unfinished { seg: Some(seg), rank };
        let seg = unfinished.seg.as_mut().ok_or_else(|| Error::internal("shm team creation without its segment"))?;
        let pid_of = |r: usize| pids.get(r).copied().unwrap_or(0);
        let cma_threshold = if rank == 0 {
            let finished = ShmTeam::finish_creating(seg, size, &pids, &probed).await;
            if let Err((blame, e)) = finished {
                // Release: the members that wait for the threshold stop,
                // naming the rank that failed first.
                let cause = blame.map_or(0, |r| (r as u64 + 1) << CAUSE_SHIFT);
                seg.ctrl(0)?.left.store(FAILED | cause, Ordering::Release);
                return Err(e);
            }
            seg.cma_threshold().ok_or_else(|| Error::internal("shm team: no single-copy threshold after creation"))?
        } else {
            staging_probe::await_threshold(seg, rank, pid_of(0)).await?
        };
        let seg = unfinished.finish()?;
        // Every member starts single copy where the first rank does (its
        // figure may be its machine's measure, `crossover.rs`).
        let config = ShmConfig { cma_threshold, ..config };
        // Single copy runs where the selection may choose it: then this
        // process lets the team's others read it (Yama `ptrace_scope=1`) and
        // says where they find the proof that they read the right process.
        // Before any flag this rank publishes, which is what a reader waits on.
        let single_copy = config.cma_threshold != usize::MAX;
        if single_copy {
            cma::allow_readers();
            // Relaxed: as the pid.
            seg.ctrl(rank)?.cookie_at.store(seg.cookie()?.1, Ordering::Relaxed);
        }
        Ok(Arc::new(ShmTeam {
            seg,
            rank,
            size,
            all: (0..size).collect(),
            others: (0..size).filter(|&r| r != rank).collect(),
            procs: (0..size).map(|_| OnceLock::new()).collect(),
            pids,
            finished: (0..size).map(|_| AtomicU64::new(0)).collect(),
            halves_epoch: [AtomicU64::new(0), AtomicU64::new(0)],
            signed_epoch: [AtomicU64::new(0), AtomicU64::new(0)],
            host_mc: mcs.get(MemType::Host).ok().cloned(),
            mcs,
            config,
            tickets: AtomicU64::new(0),
            turn: AtomicU64::new(0),
            epoch: AtomicU64::new(0),
            broken: AtomicBool::new(false),
            first_failure: OnceLock::new(),
            blame: AtomicU64::new(0),
            waiting: AtomicU64::new(u64::MAX),
            running: Running::default(),
            reach: Reach::new(size, single_copy),
            copy_in: CopyIn::default(),
        }))
    }

    /// The first rank's part of the creation, once the segment exists:
    /// wait until every member has mapped it, unlink its name, and time
    /// staging with rank 1 if the threshold is still to measure. On an
    /// error, the rank to blame if one is known.
    async fn finish_creating(
        seg: &mut Segment,
        size: usize,
        pids: &[u32],
        probed: &OnceLock<usize>,
    ) -> std::result::Result<(), (Option<usize>, Error)> {
        let mut polls = LivenessCadence::default();
        std::future::poll_fn(|_| {
            match seg.attached() {
                Ok(n) if n + 1 >= size => Poll::Ready(Ok(())),
                Ok(_) if polls.due() => {
                    // A member that attached and is gone went on without
                    // this rank, and likely failed because of one that
                    // never attached (killed at start-up): that one is
                    // named first, as the cause.
                    let members = || pids.iter().copied().enumerate().skip(1);
                    // Relaxed: a late view only names the other kind of member.
                    let attached = |r: usize| seg.ctrl(r).is_ok_and(|c| c.pid.load(Ordering::Relaxed) != 0);
                    dead_among(members().filter(|&(r, _)| !attached(r)), "attaching to the team's segment")
                        .or_else(|| dead_among(members(), "the team's creation completed"))
                        .map_or(Poll::Pending, |(r, e)| Poll::Ready(Err((Some(r), e))))
                }
                Ok(_) => Poll::Pending,
                Err(e) => Poll::Ready(Err((None, e))),
            }
        })
        .await?;
        seg.unlink();
        if seg.cma_threshold().is_none() {
            let taker = pids.get(1).copied().unwrap_or(0);
            let t = staging_probe::threshold_with_rank_1(seg, taker).await.map_err(|e| (Some(1), e))?;
            // The first figure stays the context's (a race between two of
            // its teams keeps either: both are this machine's).
            let _ = probed.set(t);
            seg.publish_cma_threshold(t).map_err(|e| (None, e))?;
        }
        Ok(())
    }

    /// The next epoch of this rank (collectives are serialised, see the module docs).
    pub(crate) fn next_epoch(&self) -> u64 {
        // Relaxed, and a load and a store rather than a read-modify-write:
        // only the one running task of this rank touches the counter, and
        // the turn (Release when passed on, Acquire when taken) orders it
        // after the task before, whichever thread ran that one.
        let e = self.epoch.load(Ordering::Relaxed) + 1;
        self.epoch.store(e, Ordering::Relaxed);
        e
    }

    /// The last epoch this rank took (0: none yet).
    pub(crate) fn epoch_now(&self) -> u64 {
        // Relaxed: see `next_epoch`.
        self.epoch.load(Ordering::Relaxed)
    }

    pub(crate) fn diag_waiting(&self, r: usize) {
        // Relaxed: a diagnostic hint, read by this rank's own task.
        self.waiting.store(r as u64, Ordering::Relaxed);
    }

    /// Bytes a round of a copying collective moves: the pipeline size, at
    /// most a half's data part and at least a line per rank (so that a
    /// P-th of it, a slot, holds any element). Every member computes the
    /// same: the pipeline size is agreed at team creation, the data part is
    /// the segment's.
    pub(crate) fn pipeline_round(&self) -> usize {
        let data = self.seg.layout().data;
        self.config.pipeline_size.max(LINE.saturating_mul(self.size)).min(data)
    }

    /// `(r, part(r))` for every rank `r` but this one, in rank order.
    pub(crate) fn others(&self, part: impl Fn(usize) -> Result<MemRef>) -> Result<Vec<(usize, MemRef)>> {
        self.all.iter().filter(|&&r| r != self.rank).map(|&r| Ok((r, part(r)?))).collect()
    }

    /// The message sizes at which `coll` goes by single copy on this team
    /// now (none once a peer could not be read).
    pub(crate) fn single_copy_range(&self, coll: CollType) -> (u64, u64) {
        if !self.reach.on() {
            return (u64::MAX, u64::MAX);
        }
        alg::single_copy_range(&self.config, coll, self.seg.oversubscribed())
    }

    /// Copy host memory (other memory through the host memory component,
    /// which says it is not its own).
    pub(crate) fn copy(&self, dst: MemRef, src: MemRef) -> Result<()> {
        if dst.len() != src.len() {
            return Err(Error::internal(format!("shm copy of {} bytes into {}", src.len(), dst.len())));
        }
        if dst.is_empty() || dst == src {
            return Ok(());
        }
        if dst.mem_type() == MemType::Host && src.mem_type() == MemType::Host {
            // What the host component's copy does after the same checks,
            // without the call through it: a small collective copies a few
            // times per call (~50 instructions each).
            return dst.copy_host_from(&src);
        }
        self.host()?.copy(dst, src)
    }

    /// Copy host `src` into `dst`, a part of the segment another rank reads
    /// next: from [`copy_in::TIMED_FROM`] bytes up with the stores this
    /// rank measured faster lately (`copy_in.rs`), else as [`Self::copy`].
    pub(crate) fn copy_in(&self, dst: MemRef, src: MemRef) -> Result<()> {
        if dst.len() < copy_in::TIMED_FROM || src.mem_type() != MemType::Host {
            return self.copy(dst, src);
        }
        let stores = self.copy_in.pick();
        let start = Instant::now();
        match stores {
            Stores::Plain => self.copy(dst, src)?,
            Stores::Streaming => self.host()?.copy_streaming(dst, src)?,
        }
        self.copy_in.record(stores, dst.len(), start.elapsed());
        Ok(())
    }

    /// Whether this rank's large copies into the segment stream now (its
    /// plain ones measured several times slower, `copy_in.rs`): then what
    /// it would compute straight into the segment is better computed
    /// elsewhere and copied in.
    pub(crate) fn copy_in_streams(&self) -> bool {
        self.copy_in.favoured() == Stores::Streaming
    }

    /// Make `stores` the kind this rank's copies into the segment favour.
    #[cfg(test)]
    pub(crate) fn favour_copy_in(&self, stores: Stores) {
        self.copy_in.favour(stores);
    }

    /// The host memory component.
    #[inline]
    pub(crate) fn host(&self) -> Result<&Arc<dyn Mc>> {
        match &self.host_mc {
            Some(mc) => Ok(mc),
            None => self.mcs.get(MemType::Host), // its error
        }
    }

    /// Every rank's `part(r)`, in rank order, handed to `f`: on the stack
    /// for teams of up to [`STACK_PARTS`] ranks, since a small reduction
    /// should not allocate.
    pub(crate) fn with_parts<R>(
        &self,
        part: impl Fn(usize) -> Result<MemRef>,
        f: impl FnOnce(&[MemRef]) -> Result<R>,
    ) -> Result<R> {
        /// `with_parts` on an array of `N` slots (the team fits): no
        /// longer than needed, since filling 16 slots for two ranks cost
        /// more than a small reduction's kernel.
        fn on_stack<const N: usize, R>(
            all: &[usize],
            part: impl Fn(usize) -> Result<MemRef>,
            f: impl FnOnce(&[MemRef]) -> Result<R>,
        ) -> Result<R> {
            let mut parts = [MemRef::empty(MemType::Host); N];
            for (p, &r) in parts.iter_mut().zip(all) {
                *p = part(r)?;
            }
            f(&parts[..all.len().min(N)])
        }
        match self.size {
            0..=FEW_PARTS => on_stack::<FEW_PARTS, R>(&self.all, part, f),
            n if n <= STACK_PARTS => on_stack::<STACK_PARTS, R>(&self.all, part, f),
            _ => {
                let parts = self.all.iter().map(|&r| part(r)).collect::<Result<Vec<_>>>()?;
                f(&parts)
            }
        }
    }

    /// `dst = op(srcs...)` as `spec` says, in the order given (one source
    /// of a logical operation, a team of one's, is copied as it is:
    /// `alone_is_a_copy`).
    pub(crate) fn reduce(&self, dst: MemRef, srcs: &[MemRef], spec: ReduceSpec) -> Result<()> {
        if spec.count == 0 {
            return Ok(());
        }
        if let [src] = srcs
            && alone_is_a_copy(spec.op)
        {
            return dst.copy_host_from(src);
        }
        self.host()?.reduce(dst, srcs, &spec)
    }
}

impl ShmTeam {
    /// Keep `err`, a collective's failure, for the calls after it, if it
    /// is the first (its turn then breaks the team).
    pub(super) fn note_failure(&self, err: &Error) {
        let _ = self.first_failure.set(err.context().to_string());
    }

    /// Remember rank `r` as the one whose failure ended this rank's part,
    /// if none was before it.
    pub(super) fn blame(&self, r: usize) {
        // Relaxed: read by this rank's break_team, after its wait failed.
        let _ = self.blame.compare_exchange(0, r as u64 + 1, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// Mark the team broken on this rank, and tell the others: they fail
    /// at their next wait for this rank instead of waiting for a collective
    /// it will not run.
    pub(super) fn break_team(&self) {
        // Release: later tasks that see `broken` fail instead of running.
        self.broken.store(true, Ordering::Release);
        if let Ok(c) = self.seg.ctrl(self.rank) {
            // Release: peers that see FAILED stop waiting for us. A rank that
            // already left stays LEFT.
            let failed = FAILED | self.blame.load(Ordering::Relaxed) << CAUSE_SHIFT;
            let _ = c.left.compare_exchange(PRESENT, failed, Ordering::Release, Ordering::Relaxed);
            order_before_handback();
        }
    }
}

impl Drop for ShmTeam {
    fn drop(&mut self) {
        self.mark_left();
    }
}

impl ShmTeam {
    /// Say in this rank's control line that it left the team.
    fn mark_left(&self) {
        if let Ok(c) = self.seg.ctrl(self.rank) {
            // Release: peers that see `left` stop waiting for us. A rank on
            // which a collective failed stays FAILED, the better reason.
            let _ = c.left.compare_exchange(PRESENT, LEFT, Ordering::Release, Ordering::Relaxed);
            order_before_handback();
        }
    }
}

/// After this rank marks itself FAILED or LEFT: a peer reading this
/// rank's own buffer by single copy checks the mark after its read
/// (`single_copy::announce`, a SeqCst fence then an acquire load), and the
/// caller may rewrite that buffer as soon as the collective is handed
/// back. A Release CAS orders what came before it, not the caller's later
/// stores (a weakly ordered CPU, aarch64, may show those first, and the
/// peer would pass off the new bytes as this rank's data): the fence keeps
/// the mark first. Whether or not the CAS won: an earlier mark must come
/// first too. On x86 the locked CAS already was such a fence.
fn order_before_handback() {
    std::sync::atomic::fence(Ordering::SeqCst);
}

impl AlgTeam for ShmTeam {
    type Exec = Post;
    const TL: &'static str = "shm";

    fn registry(&self) -> &'static Registry<Post> {
        alg::registry()
    }

    /// Peers waiting for this rank learn it from `left` at once, though the
    /// progress queue may still hold finished slots whose call board entry
    /// (this team) keeps the segment mapped until the context's next progress.
    fn leave(&self) {
        self.mark_left();
    }

    fn mem_types(&self) -> &[MemType] {
        &[MemType::Host]
    }

    fn score(&self) -> Score {
        SCORE
    }

    fn defaults(&self) -> Vec<DefaultAlg> {
        alg::defaults(&self.config, self.size, self.seg.oversubscribed())
    }

    fn accepts(&self, init: &CollInit) -> Result<()> {
        if init.active_set.is_some() {
            return Err(Error::not_supported("shm does not run active-set collectives"));
        }
        Ok(())
    }

    fn task(self: &Arc<Self>, alg: &'static Alg<Post>, init: &Arc<CollInit>) -> Result<Arc<dyn CollTask>> {
        let sig = Signature::of(init);
        Ok(Arc::new(ShmTask { team: self.clone(), init: init.clone(), run: alg.run, sig }))
    }

    fn call_board(self: &Arc<Self>) -> Option<Arc<dyn CallBoard>> {
        Some(self.clone())
    }
}

/// The team's call board lies in its segment, beside the control lines.
impl CallBoard for ShmTeam {
    fn ranks(&self) -> usize {
        self.size
    }

    fn write(&self, index: usize, words: &[u64; ENTRY_WORDS]) {
        // Always in bounds: the engine's index is below BOARD_DEPTH, and the
        // board of this rank exists in every segment of this layout.
        if let Ok(entry) = self.seg.board(self.rank, index) {
            for (cell, &w) in entry.0.iter().zip(words) {
                // Relaxed: readers take what they find and check its checksum.
                cell.store(w, Ordering::Relaxed);
            }
        }
    }

    fn read(&self, r: usize, index: usize) -> Result<[u64; ENTRY_WORDS]> {
        let entry = self.seg.board(r, index)?;
        // Relaxed: see `write`.
        Ok(std::array::from_fn(|i| entry.0[i].load(Ordering::Relaxed)))
    }
}

struct ShmTask {
    team: Arc<ShmTeam>,
    init: Arc<CollInit>,
    run: Run<Post>,
    sig: Signature,
}

impl CollTask for ShmTask {
    /// Flags and copies in the mapped segment: nothing moves through the context.
    fn progresses_itself(&self) -> bool {
        true
    }

    /// It holds the operands' addresses only, never anything bound to the memory.
    fn reusable(&self) -> bool {
        true
    }

    fn start(&self, post: &PostInfo) -> Result<TaskFuture> {
        let post = ShmPost { team: self.team.clone(), ticket: self.ticket(), sig: self.sig, diag: post.diag.clone() };
        // The registry's function wraps the algorithm in the post's turn
        // (`ShmPost::run`): one box for both.
        self.run.start(post, &self.init)
    }

    /// A one-epoch post's box runs the next post of the same task.
    fn recycles_futures(&self) -> bool {
        true
    }

    fn restart(&self, post: &PostInfo, spent: Option<TaskFuture>) -> Result<TaskFuture> {
        match spent.map(|f| one_epoch::restart(f, &self.team, || self.ticket(), post.diag)) {
            Some(Ok(again)) => Ok(again),
            _ => self.start(post),
        }
    }
}

impl ShmTask {
    /// The next post's place in this rank's order of the team's collectives.
    fn ticket(&self) -> u64 {
        // Relaxed: tickets are taken in post order by this rank's posting thread(s).
        self.team.tickets.fetch_add(1, Ordering::Relaxed)
    }
}

/// One post of a shm task, as the registry's functions get it: the team,
/// the post's ticket (its place in this rank's order of the team's
/// collectives), the call's signature and where the task records what it
/// waits for.
pub(crate) struct ShmPost {
    pub(super) team: Arc<ShmTeam>,
    pub(super) ticket: u64,
    pub(super) sig: Signature,
    pub(super) diag: Arc<TaskDiag>,
}

impl ShmPost {
    /// The future of `alg` run in this post's turn on the team: it waits
    /// for the turn, publishes the call's signature, runs the algorithm,
    /// and passes the turn on (breaking the team if the algorithm failed or
    /// was dropped halfway); while pending it copies the rank it waits for
    /// into the task's diag. One box holds it all, the algorithm's future
    /// included (made here, where its type is known: a boxed algorithm
    /// inside a boxed wrapper cost an allocation per post more).
    pub(crate) fn run<F>(self, alg: impl FnOnce(Arc<ShmTeam>) -> F + Send + 'static) -> AlgFuture
    where
        F: Future<Output = Result<()>> + Send + 'static,
    {
        let ShmPost { team, ticket, sig, diag } = self;
        Box::pin(async move {
            // The turn and the wait for it borrow the team from this future
            // (each reference counted costs an atomic operation per post,
            // then another when the future is dropped).
            let collective = async {
                let mut turn = Turn::take(Waiting { team: &team, armed: true }, ticket).await?;
                team.running.set(sig);
                let result = alg(team.clone()).await;
                if let Err(e) = &result {
                    team.note_failure(e);
                }
                turn.ok = result.is_ok();
                result
            };
            let mut collective = std::pin::pin!(collective);
            std::future::poll_fn(|cx| {
                let r = collective.as_mut().poll(cx);
                if r.is_pending() {
                    note_waiting(&team, &diag);
                }
                r
            })
            .await
        })
    }
}

/// This rank's turn to run a collective on the team; the next one's on drop.
struct Turn<'a> {
    team: &'a ShmTeam,
    ticket: u64,
    ok: bool,
}

/// A task that has its ticket but not its turn yet: dropped then (the
/// collective cancelled before it started), the team is broken, since the
/// other ranks will run that collective.
struct Waiting<'a> {
    team: &'a ShmTeam,
    armed: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.team.break_team();
        }
    }
}

impl ShmTeam {
    /// One look for the turn of `ticket`: ready when it is ours, or failed
    /// at once on a broken team (passing the turn on if it was ours, so that
    /// the tasks after this one fail too).
    pub(super) fn poll_turn(&self, ticket: u64) -> Poll<Result<()>> {
        // Acquire: see the Release in `pass_turn`. The turn first: the task
        // before stores `broken` before it passes the turn on, so once
        // the turn is ours, `broken` says whether that task broke the
        // team (read the other way round, a break between the two loads
        // would go unseen, and this task would run on a broken team).
        let ours = self.turn.load(Ordering::Acquire) == ticket;
        let broken = || {
            Error::io(match self.first_failure.get() {
                Some(first) => format!("the shm team is broken: an earlier collective on it failed: {first}"),
                None => "the shm team is broken: an earlier collective on it was cancelled halfway".to_string(),
            })
        };
        match (ours, self.broken.load(Ordering::Acquire)) {
            (true, false) => {
                // Relaxed: see ShmTeam::waiting.
                self.waiting.store(u64::MAX, Ordering::Relaxed);
                Poll::Ready(Ok(()))
            }
            // Pass the turn on, so that the tasks after this one fail too.
            (true, true) => {
                self.turn.store(ticket + 1, Ordering::Release);
                Poll::Ready(Err(broken()))
            }
            // Fail at once rather than wait for a turn on a broken team.
            (false, true) => Poll::Ready(Err(broken())),
            (false, false) => Poll::Pending,
        }
    }

    /// End the turn of `ticket`: the team is broken unless its collective
    /// ran to the end (`ok`), and the next task may start.
    pub(super) fn pass_turn(&self, ticket: u64, ok: bool) {
        if !ok {
            self.break_team();
        }
        // Release: the next task starts after this one's last step.
        self.turn.store(ticket + 1, Ordering::Release);
    }
}

/// Copy the rank the team's running collective waits for, if any, into
/// `diag` (what a pending post's future does after each poll).
pub(super) fn note_waiting(team: &ShmTeam, diag: &TaskDiag) {
    // Relaxed: see ShmTeam::waiting.
    let w = team.waiting.load(Ordering::Relaxed);
    if w != u64::MAX {
        diag.waiting_for(w as usize, 0);
    }
}

impl<'a> Turn<'a> {
    async fn take(mut waiting: Waiting<'a>, ticket: u64) -> Result<Turn<'a>> {
        let team = waiting.team;
        std::future::poll_fn(|_| team.poll_turn(ticket)).await?;
        waiting.armed = false;
        Ok(Turn { team, ticket, ok: false })
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.team.pass_turn(self.ticket, self.ok);
    }
}
