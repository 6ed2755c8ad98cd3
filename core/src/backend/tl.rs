//! The transport-layer traits: a TL component opens a context per
//! [`Context`](crate::Context), a context creates a team per
//! [`Team`](crate::Team), and a team turns validated arguments into tasks.

use std::sync::Arc;

use crate::args::{CollInit, Signature};
use crate::backend::{EngineCopies, McSet, PostedVia};
use crate::config::{Config, ConfigField};
use crate::engine::{BoxFuture, CallBoard, TaskDiag, TaskFuture};
use crate::error::Result;
use crate::score::{AlgId, Score, ScoreEntry};
use crate::topo::{Layout, ProcInfo};
use crate::types::{CollType, CollTypeSet, MemType};

/// One algorithm of a TL, as printed by `ferrocoll-info -A` and named in tune strings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AlgInfo {
    /// Collective.
    pub coll: CollType,
    /// Id within the TL and collective (`@0`).
    pub id: AlgId,
    /// Name (`@ring`).
    pub name: &'static str,
    /// One line on what it does and when it is good.
    pub description: &'static str,
}

/// What a TL context is created with.
pub struct TlContextParams<'a> {
    /// The context's configuration (environment plus overrides).
    pub config: &'a Config,
    /// The library's memory components.
    pub mcs: &'a McSet,
    /// This context's endpoint index in the OOB group.
    pub ep: usize,
    /// Number of endpoints in the OOB group.
    pub n_eps: usize,
    /// The job's name (see [`Oob::job_id`](crate::oob::Oob::job_id)), for naming resources.
    pub job: &'a str,
}

/// One endpoint as a TL context sees it when connecting.
#[derive(Clone, Debug)]
pub struct TlPeer {
    /// Its host and process.
    pub proc: ProcInfo,
    /// Its address blob for this TL (empty when it does not have this TL).
    pub addr: Vec<u8>,
}

/// A transport-layer component (UCC's `tl_lib`): stateless, shared by every context.
pub trait TlComponent: Send + Sync {
    /// Short name used in `UCC_TLS` and `UCC_TL_<NAME>_TUNE` (`p2p`, `self`).
    fn name(&self) -> &'static str;
    /// One line on what it is for.
    fn description(&self) -> &'static str;
    /// Score of its default entries (UCC: self 50, ucp 10).
    fn default_score(&self) -> Score;
    /// The configuration variables it reads.
    fn config_fields(&self) -> Vec<ConfigField>;
    /// Every algorithm it has.
    fn algorithms(&self) -> &'static [AlgInfo];
    /// The variables every member of a team must set alike for this TL to
    /// serve it (tune strings, algorithm knobs: anything that changes which
    /// algorithm runs or how), checked at team creation. Settings of a
    /// rank's own resources (interfaces, ports, ring sizes) are not.
    fn agreed_fields(&self) -> Vec<&'static str> {
        Vec::new()
    }
    /// Open this TL's resources for one context. `Err(NotSupported)` means the
    /// TL is unusable here (it is then left out, and the reason logged at debug level).
    fn context_create(&self, params: &TlContextParams<'_>) -> Result<Arc<dyn TlContext>>;
}

/// What a TL team is created with.
#[derive(Clone, Debug)]
pub struct TlTeamParams {
    /// Team id, identical on every member.
    pub team_id: u64,
    /// This rank.
    pub rank: usize,
    /// Number of ranks.
    pub size: usize,
    /// Context endpoint of each team rank.
    pub eps: Arc<[usize]>,
    /// Configuration (context's plus team overrides).
    pub config: Config,
    /// Where creation records what it waits for (named if creation times out).
    pub diag: Arc<TaskDiag>,
    /// The members' nodes and switch groups, as every member computed them
    /// (for hierarchical algorithms; see `topo::subgroups`).
    pub layout: Arc<Layout>,
    /// The variables of the team's TLs that every member must set alike
    /// (`TlComponent::agreed_fields`) with this member's values (the
    /// context's, or the team's overrides), in an order alike on every
    /// member. The context's values were compared at team creation; a TL
    /// that meets the others while it creates its team compares these,
    /// which also covers the per-team overrides (the p2p TL does).
    pub agreed: Arc<[(String, String)]>,
    /// Whether this host runs more of the job's endpoints than this
    /// process has cores to use (the context's view; its waiting ranks then
    /// yield their core on every poll). Members may see it differently
    /// (their affinities may differ): a TL whose choice of algorithm follows
    /// it must make its members agree on one view (TL/shm takes its first
    /// rank's, through the segment).
    pub oversubscribed: bool,
    /// Which TL each of the team's latest posts went to (the core notes
    /// every post), for judging late probes (see `PostedVia`).
    pub posted_via: Arc<PostedVia>,
    /// The tag the core notes this TL's posts under in `posted_via`.
    pub via_tag: u8,
}

/// The future of a TL team creation.
pub type TlTeamFuture = BoxFuture<'static, Result<Arc<dyn TlTeam>>>;

/// A TL's per-context state.
pub trait TlContext: Send + Sync {
    /// This context's address blob, exchanged through the OOB.
    fn address(&self) -> Vec<u8>;
    /// Learn every endpoint (index = endpoint, this one included) and connect.
    fn connect(&self, peers: &[TlPeer]) -> Result<()>;
    /// Called once every endpoint of the OOB group has returned from
    /// `connect`: release what only connecting needed (e.g. unlink the
    /// names of shared-memory segments that every peer has now mapped).
    fn connected(&self) -> Result<()> {
        Ok(())
    }
    /// Move bytes (transport I/O); called by every `Context::progress`.
    fn progress(&self) -> Result<()>;
    /// Start creating a team. `Err(NotSupported)` leaves this TL out of the team.
    fn team_create(&self, params: &TlTeamParams) -> Result<TlTeamFuture>;
    /// Release resources so that peers see this endpoint gone (context destruction).
    fn close(&self);
}

/// A TL's per-team state.
pub trait TlTeam: Send + Sync {
    /// Collectives it implements.
    fn colls(&self) -> CollTypeSet;
    /// Memory types it handles.
    fn mem_types(&self) -> &[MemType];
    /// Its default score-map entries (before tuning).
    fn default_scores(&self) -> Vec<ScoreEntry>;
    /// Prepare algorithm `alg` for these arguments. `Err(NotSupported)` makes
    /// the engine try the next candidate.
    fn coll_init(&self, alg: AlgId, init: &Arc<CollInit>) -> Result<Arc<dyn CollTask>>;
    /// A call board in memory that every rank of the team reads (see
    /// `engine/board.rs`), if this TL has one. The engine uses the one of the
    /// TL first by name, so a TL must offer it on every rank or on none.
    fn call_board(&self) -> Option<Arc<dyn CallBoard>> {
        None
    }
    /// The team's collective `seq` was posted as the call `sig` without a
    /// task of any TL (a zero-size call, done at post): for a TL that judges
    /// a peer's wait against what this rank posted (p2p's late probes).
    fn posted_without_task(&self, _seq: u64, _sig: Signature) {}
}

/// Sequence numbers from this one up are outside the team's order:
/// active-set collectives' (`ACTIVE_SET_SEQ | tag`: ranks outside the set
/// do not post them) and a TL's own (its team's creation). Below it, each
/// rank numbers the collectives it posts to the team 0, 1, 2, … in the
/// order posted, zero-size ones included, whichever TL runs them.
pub const ACTIVE_SET_SEQ: u64 = 1 << 63;

/// What each post of a request passes to its task.
#[derive(Clone, Copy, Debug)]
pub struct PostInfo<'a> {
    /// The team's sequence number of this collective (matching key; see
    /// [`ACTIVE_SET_SEQ`]).
    pub seq: u64,
    /// Where the task records what it waits for (the request's: a task
    /// clones it into its future; lent, so a post counts no reference it
    /// does not keep).
    pub diag: &'a Arc<TaskDiag>,
    /// The CUDA stream (a `CUstream`, as an address) of the execution engine
    /// on which a stream-native task enqueues this post: set only for a
    /// triggered post whose task said it is
    /// [`native_on_stream`](CollTask::native_on_stream) and whose engine
    /// has a stream ([`Ee::native_post`](crate::backend::Ee::native_post)).
    pub stream: Option<usize>,
    /// Whether the execution engine runs the task's [`CollTask::engine_copies`]
    /// for this post (then the task must not make them).
    pub engine_copies: bool,
}

/// A prepared collective: produces one future per post (persistent requests post many times).
pub trait CollTask: Send + Sync {
    /// The future of one execution.
    fn start(&self, post: &PostInfo<'_>) -> Result<TaskFuture>;

    /// Whether [`CollTask::restart`] can run a post in the box of the one
    /// before: the queue slot then keeps a future that finished
    /// successfully (instead of dropping it) until the next post or the
    /// slot's end. `false` (the default) drops it at once.
    fn recycles_futures(&self) -> bool {
        false
    }

    /// The future of the next execution, given the future of this task's
    /// last one if it finished successfully and the task
    /// [recycles futures](CollTask::recycles_futures) (`spent`, else
    /// `None`): a task may re-initialise that box for this post
    /// ([`downcast_spent`](crate::engine::downcast_spent)) rather than
    /// allocate another — no allocation, and no reference counted again
    /// for what the last post already held. Called under the lock of the
    /// request's queue slot. The default drops `spent` and calls
    /// [`CollTask::start`].
    fn restart(&self, post: &PostInfo<'_>, spent: Option<TaskFuture>) -> Result<TaskFuture> {
        drop(spent);
        self.start(post)
    }

    /// Whether polling the task's own future is all it needs to finish: it
    /// moves no bytes through a TL context's transports (the shm TL's
    /// flags in a mapped segment, the self TL's copies). A blocking wait on
    /// such a task then polls only the task while its rank spins, and the
    /// whole context once in a while and whenever it yields the core (see
    /// `Request::wait`); `false` (the default) has the wait progress the
    /// context every other poll, since the task's messages move only then.
    fn progresses_itself(&self) -> bool {
        false
    }

    /// Whether the task may run again for another one-shot request with the
    /// same call (same buffers, count, datatype, …) once the request it was
    /// made for finished: then a loop of such requests reuses it (see
    /// `core/src/object/plan_cache.rs`). `false` (the default) for tasks
    /// that hold anything bound to the memory behind the addresses (a
    /// registration, a mapping), which a buffer freed and allocated again
    /// at the same address would leave stale.
    fn reusable(&self) -> bool {
        false
    }

    /// Whether a triggered post on a stream engine can enqueue this
    /// collective on the engine's stream itself, now (TL/NCCL once its
    /// communicator exists): the post then gets the stream in
    /// [`PostInfo::stream`], the future's first poll (at post) must enqueue
    /// the work there, and the engine neither waits for an event nor blocks
    /// the stream on a flag — stream order is the dependency, and a stream
    /// being captured into a CUDA graph captures the collective. `false`
    /// (host-driven TLs) keeps the engine's trigger.
    fn native_on_stream(&self) -> bool {
        false
    }

    /// Called before a triggered post on a CUDA stream engine, before the
    /// engine enqueues anything on its stream: the last moment a task may
    /// do work that must not overlap the stream being held for it. TL/NCCL
    /// makes its communicator here (bounded), so that the post can be
    /// stream-native: the host-driven alternative would block the stream
    /// on a flag while NCCL makes the communicator, and NCCL loads its
    /// kernels then — which, under CUDA's lazy module loading, waits for
    /// the device behind that very stream (a deadlock, seen on an H100).
    /// The default does nothing.
    fn prepare_stream_post(&self, _ee: &dyn crate::backend::Ee) -> Result<()> {
        Ok(())
    }

    /// The copies the task makes around each execution, if an execution
    /// engine may make them instead (see [`EngineCopies`]); `None` (the
    /// default) if it makes none or must make them itself.
    fn engine_copies(&self) -> Option<EngineCopies> {
        None
    }
}
