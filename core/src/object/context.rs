//! [`Context`]: one communicating endpoint (`ucc_context_create`): the TL
//! contexts, the address exchange over the OOB, and the progress queue.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::endpoint::EndpointInfo;
use super::library::{Lib, LibInner};
use super::settings::Settings;
use crate::backend::{TlComponent, TlContext, TlContextParams, TlPeer};
use crate::config::Config;
use crate::engine::{FruitlessProgress, Holds, ProgressQueue};
use crate::error::{Error, Result, Status};
use crate::oob::{Oob, allgather_blocking};
use crate::topo::ProcInfo;

/// UCC's context types (recorded; both behave the same in ferrocoll).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ContextType {
    /// Used by one user (UCC's default).
    #[default]
    Exclusive,
    /// Shared among users.
    Shared,
}

/// Parameters of [`Context`] creation.
#[derive(Clone, Default)]
pub struct ContextParams {
    /// The bootstrap among this job's contexts. Without one, the context is
    /// endpoint 0 of 1 and can only make teams of itself.
    pub oob: Option<Arc<dyn Oob>>,
    /// Overrides laid over the library's configuration (UCC's `ucc_context_config_modify`).
    pub config: Config,
    /// Context type.
    pub ctx_type: ContextType,
}

impl ContextParams {
    /// Parameters with an OOB and nothing else.
    pub fn with_oob(oob: impl Oob + 'static) -> ContextParams {
        ContextParams { oob: Some(Arc::new(oob)), ..ContextParams::default() }
    }
}

pub(crate) struct TlEntry {
    pub(crate) component: Arc<dyn TlComponent>,
    pub(crate) context: Arc<dyn TlContext>,
}

/// How often a user's progress call runs the transports while no task in
/// flight moves through them: often enough that what they carry for no
/// task yet (a peer's early messages, a connection, a failure) still moves
/// within microseconds of a caller that keeps progressing.
const TRANSPORTS_EVERY: u32 = 16;

pub(crate) struct ContextInner {
    pub(crate) lib: Arc<LibInner>,
    pub(crate) id: u64,
    pub(crate) ep: usize,
    pub(crate) n_eps: usize,
    /// Host and process of every endpoint.
    pub(crate) procs: Vec<ProcInfo>,
    /// What every endpoint said of itself (its TLs, the settings teams must share).
    pub(crate) endpoints: Vec<EndpointInfo>,
    pub(crate) config: Config,
    pub(crate) settings: Settings,
    pub(crate) tls: Vec<TlEntry>,
    pub(crate) queue: ProgressQueue,
    /// Polls before a waiting rank yields (see `UCC_SPIN_COUNT`).
    pub(crate) spins: u32,
    /// Whether this host has a core per local rank (then waits yield rarely).
    pub(crate) dedicated: bool,
    alive: AtomicBool,
    /// User progress calls that skipped the transports (see `progress`).
    skipped: AtomicU32,
    /// User progress calls in a row that finished no queued task while
    /// some were in flight (see `user_progress`).
    fruitless: FruitlessProgress,
    /// Teams created per endpoint list: the n-th team over the same list gets the same id everywhere.
    team_counters: Mutex<HashMap<u64, u64>>,
}

impl ContextInner {
    pub(crate) fn check_alive(&self) -> Result<()> {
        // Acquire: pairs with the Release in destroy(), so that a caller that
        // sees "alive" also sees the TL contexts before they were closed.
        if self.alive.load(Ordering::Acquire) {
            Ok(())
        } else {
            Err(Error::invalid_param(format!("context {} (ep {}) was destroyed", self.id, self.ep)))
        }
    }

    /// How a rank of this context waits (see [`Backoff::for_rank`](crate::engine::Backoff::for_rank)).
    pub(crate) fn backoff(&self) -> crate::engine::Backoff {
        crate::engine::Backoff::for_rank(self.spins, self.dedicated)
    }

    /// A user's progress (`Context::progress`, `ucc_context_progress`):
    /// every queued task is polled; the TLs' transports too, unless no task
    /// in flight moves through them (none, or only tasks that progress
    /// themselves) — then only every [`TRANSPORTS_EVERY`]th call. A caller
    /// that spins on the status of a small shm collective (as C callers do,
    /// with `ucc_collective_test` and this) then looks at its flag again
    /// sooner, and an idle context's progress, which Open MPI calls from
    /// every wait of its own, costs little: the transports' work took
    /// longer than a flag takes to cross between cores.
    pub(crate) fn progress(&self) -> Result<()> {
        self.progress_counting().map(|_| ())
    }

    /// [`ContextInner::progress`], saying how many queued tasks it finished.
    fn progress_counting(&self) -> Result<usize> {
        let transports = self.queue.holds() == Holds::Transported || self.transports_due();
        self.step(transports)
    }

    /// A progress the user calls in a loop of their own (`Context::progress`,
    /// `ucc_context_progress`, `Team::progress`): [`ContextInner::progress`],
    /// and where ranks outnumber cores, past [`ContextInner::spins`] calls in
    /// a row that finished nothing while tasks are in flight, a yield of the
    /// core, as a rank waiting in `Request::wait` does. A C caller spins on
    /// `ucc_collective_test` and this (ucc_perftest, and the UCC examples):
    /// without the yield, a rank waiting for a peer that shares its core kept
    /// the core until the kernel took it away, milliseconds later (4 ranks on
    /// 2 cores, `capi-latency 4`: allreduce 4.3 ms, barrier 8.2 ms;
    /// BENCHMARKS.md, twenty-third round). Where every rank has a core, it
    /// never yields: the caller decides how it waits.
    pub(crate) fn user_progress(&self) -> Result<()> {
        let finished = self.progress_counting()?;
        self.yield_if_fruitless(&self.fruitless, finished, self.queue.holds() != Holds::Nothing);
        Ok(())
    }

    /// Where ranks outnumber cores, yield the core if `fruitless` says the
    /// caller's loop has found nothing finished for long enough (see
    /// [`FruitlessProgress::yields_after`]); never where every rank has one.
    fn yield_if_fruitless(&self, fruitless: &FruitlessProgress, finished: usize, in_flight: bool) {
        if !self.dedicated && fruitless.yields_after(finished, in_flight, self.spins) {
            std::thread::yield_now();
        }
    }

    /// Progress every TL's transports, then poll every queued task.
    pub(crate) fn progress_all(&self) -> Result<()> {
        self.step(true).map(|_| ())
    }

    /// One progress: the transports if asked, then the queue; how many
    /// queued tasks finished.
    fn step(&self, transports: bool) -> Result<usize> {
        self.check_alive()?;
        if transports {
            for tl in &self.tls {
                tl.context.progress()?;
            }
        }
        let finished = self.queue.progress(&self.settings.watchdog);
        crate::engine::recorder::dump_if_requested();
        Ok(finished)
    }

    /// Whether this user progress, with no task in flight that moves
    /// through the transports, is the [`TRANSPORTS_EVERY`]th since they last ran.
    fn transports_due(&self) -> bool {
        // Relaxed, and a load and a store: only how often matters.
        let n = self.skipped.load(Ordering::Relaxed).wrapping_add(1);
        self.skipped.store(n, Ordering::Relaxed);
        n.is_multiple_of(TRANSPORTS_EVERY)
    }

    pub(crate) fn next_team_index(&self, key: u64) -> u64 {
        let mut counters = self.team_counters.lock().unwrap_or_else(|p| p.into_inner());
        let n = counters.entry(key).or_insert(0);
        *n += 1;
        *n
    }

    fn destroy(&self) {
        // Release: see check_alive.
        if self.alive.swap(false, Ordering::AcqRel) {
            let id = self.id;
            self.queue.cancel_all(&|desc| Error::invalid_param(format!("{desc}: context {id} was destroyed")));
            for tl in &self.tls {
                tl.context.close();
            }
        }
    }
}

/// A communication context: create one per rank (thread or process).
///
/// Dropping it (or [`Context::destroy`]) cancels its collectives in flight;
/// teams and requests that outlive it fail with an error naming it.
pub struct Context {
    pub(crate) inner: Arc<ContextInner>,
}

static NEXT_CONTEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Context {
    /// Create a context (collective over the OOB's endpoints: every endpoint
    /// must call it). Blocks until the address exchange completes or
    /// `UCC_OOB_TIMEOUT` expires.
    pub fn new(lib: &Lib, params: ContextParams) -> Result<Context> {
        let config = lib.inner.config.merged(&params.config);
        let settings = Settings::from_config(&config)?;
        let id = NEXT_CONTEXT_ID.fetch_add(1, Ordering::Relaxed);
        let (ep, n_eps) = match &params.oob {
            Some(oob) => (oob.rank(), oob.size()),
            None => (0, 1),
        };
        if n_eps == 0 || ep >= n_eps {
            return Err(Error::invalid_param(format!("OOB endpoint {ep} is not below its size {n_eps}")));
        }
        let job =
            params.oob.as_ref().and_then(|o| o.job_id()).unwrap_or_else(|| format!("c{:x}-{id:x}", std::process::id()));
        let mut tls = Vec::new();
        for component in &lib.inner.tls {
            let p = TlContextParams { config: &config, mcs: &lib.inner.mcs, ep, n_eps, job: &job };
            match component.context_create(&p) {
                Ok(context) => tls.push(TlEntry { component: component.clone(), context }),
                Err(e) if e.status() == Status::NotSupported => {
                    crate::log_debug!("TL {} is off for this context: {}", component.name(), e.context());
                }
                Err(e) => return Err(e.prefixed(format!("TL {} context", component.name()))),
            }
        }
        let me = crate::topo::detect_with(&crate::topo::Env::process())
            .map_err(|e| e.prefixed("topology of this endpoint"))?;
        let blob = own_endpoint(&me, &tls, &config).encode()?;
        let all = match &params.oob {
            Some(oob) => allgather_blocking(oob.as_ref(), &blob, settings.oob_timeout)
                .map_err(|e| e.prefixed("context creation (address exchange)"))?,
            None => vec![blob],
        };
        let endpoints = all
            .iter()
            .enumerate()
            .map(|(i, b)| EndpointInfo::decode(b).map_err(|e| e.prefixed(format!("address of endpoint {i}"))))
            .collect::<Result<Vec<_>>>()?;
        for tl in &tls {
            let name = tl.component.name();
            let peers: Vec<TlPeer> =
                endpoints.iter().map(|e| TlPeer { proc: e.proc.clone(), addr: e.address(name) }).collect();
            tl.context.connect(&peers).map_err(|e| e.prefixed(format!("TL {name} connect")))?;
        }
        // Every endpoint has connected once all pass this barrier.
        if let Some(oob) = &params.oob {
            allgather_blocking(oob.as_ref(), &[], settings.oob_timeout)
                .map_err(|e| e.prefixed("context creation (connection barrier)"))?;
        }
        for tl in &tls {
            tl.context.connected().map_err(|e| e.prefixed(format!("TL {}", tl.component.name())))?;
        }
        let procs: Vec<ProcInfo> = endpoints.iter().map(|e| e.proc.clone()).collect();
        // Endpoints of this job on this host against the cores it may use.
        let local = procs.iter().filter(|p| p.same_host(&me)).count();
        let dedicated = local <= super::cores::usable_cores();
        let spins = settings.spin_count.unwrap_or(if dedicated {
            crate::engine::SPINS_DEDICATED
        } else {
            crate::engine::SPINS_OVERSUBSCRIBED
        });
        let inner = ContextInner {
            lib: lib.inner.clone(),
            id,
            ep,
            n_eps,
            procs,
            endpoints,
            config,
            settings,
            tls,
            queue: ProgressQueue::default(),
            spins,
            dedicated,
            alive: AtomicBool::new(true),
            skipped: AtomicU32::new(0),
            fruitless: FruitlessProgress::default(),
            team_counters: Mutex::new(HashMap::new()),
        };
        Ok(Context { inner: Arc::new(inner) })
    }

    /// Progress every collective in flight and the transports
    /// (`ucc_context_progress`). Never blocks; where ranks outnumber cores,
    /// yields the core when called in a loop that finds nothing finished
    /// (see `ContextInner::user_progress`).
    pub fn progress(&self) -> Result<()> {
        self.inner.user_progress()
    }

    /// A caller's test of something of this context that is not a queued
    /// task (a team's creation, `ucc_team_create_test`) found it still in
    /// progress: where ranks outnumber cores, past `UCC_SPIN_COUNT` such
    /// tests in a row (`fruitless` counts them; one per operation), yield
    /// the core, as [`Context::progress`] does for collectives. A C caller
    /// spinning on `ucc_team_create_test` and `ucc_context_progress` kept
    /// the core from the members it waited for: 8 ranks on 2 cores created
    /// a team in 40–80 ms; now 1.2 ms.
    pub fn after_fruitless_test(&self, fruitless: &FruitlessProgress) {
        self.inner.yield_if_fruitless(fruitless, 0, true);
    }

    /// This context's endpoint index.
    pub fn ep(&self) -> usize {
        self.inner.ep
    }

    /// Number of endpoints.
    pub fn n_eps(&self) -> usize {
        self.inner.n_eps
    }

    /// Host and process of every endpoint (index = endpoint).
    pub fn procs(&self) -> &[ProcInfo] {
        &self.inner.procs
    }

    /// Names of the TLs usable in this context.
    pub fn tl_names(&self) -> Vec<&'static str> {
        self.inner.tls.iter().map(|t| t.component.name()).collect()
    }

    /// The configuration in effect.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// Destroy the context (same as dropping it).
    pub fn destroy(self) {}
}

impl Drop for Context {
    fn drop(&mut self) {
        self.inner.destroy();
    }
}

/// This endpoint as the others will know it: its TLs' addresses and the
/// settings of each that every member of a team must share.
fn own_endpoint(me: &ProcInfo, tls: &[TlEntry], config: &Config) -> EndpointInfo {
    let addrs = tls.iter().map(|tl| (tl.component.name().to_string(), tl.context.address())).collect();
    let agreed =
        tls.iter()
            .flat_map(|tl| {
                let name = tl.component.name();
                tl.component.agreed_fields().into_iter().map(move |var| {
                    (name.to_string(), var.to_string(), config.get(var).unwrap_or_default().to_string())
                })
            })
            .collect();
    EndpointInfo { proc: me.clone(), tls: addrs, agreed }
}
