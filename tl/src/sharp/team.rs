//! The SHARP TL's team: the library context and groups made at creation
//! (see the TL's documentation), and the tasks, which fall back to p2p
//! when the library refuses.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use ferrocoll_core::args::{CollInit, Signature};
use ferrocoll_core::backend::{CollTask, PostInfo, TlTeam};
use ferrocoll_core::engine::TaskFuture;
use ferrocoll_core::score::Score;
use ferrocoll_core::{Error, MemRef, MemType, Result};

use super::oob::{FLAT_SEQ, LEADERS_SEQ, Oob};
use super::reg::{Reg, RegCache};
use super::{SCORE, SharpConfig, alg, oob, sys};
use crate::base::{Alg, AlgTeam, DefaultAlg, Registry, Run, TeamOf};
use crate::p2p::Comm;
use crate::p2p::team::TeamShared;

/// One SHARP group (`sharp_coll_comm`) and its OOB.
pub(crate) struct Group {
    pub raw: *mut sys::RawComm,
    /// Boxed: the library keeps its address as the OOB context.
    pub oob: Box<Oob>,
}

/// A team's library state: its SHARP context, caps and groups. Every call
/// into the library goes through [`Lib::lock`] (the context is made
/// without thread support).
pub(crate) struct Lib {
    pub api: Arc<sys::Api>,
    raw: *mut sys::RawContext,
    /// The context's OOB: boxed, its address is the library's.
    world: Option<Box<Oob>>,
    pub caps: sys::Caps,
    /// All team ranks.
    pub flat: Option<Group>,
    /// The node leaders, when nodes hold several ranks (on leaders only).
    pub leaders: Option<Group>,
    /// Whether the leaders' group exists on every leader.
    pub has_leaders: bool,
    pub cache: RegCache,
    lock: Mutex<()>,
    /// A request was abandoned: keep everything registered and the context alive.
    abandoned: AtomicBool,
}

// SAFETY: the raw context and groups are used only under `lock` (the
// library serialises nothing itself without thread support), and the OOB
// contexts are read-only to the callbacks apart from their own atomics and mutex.
unsafe impl Send for Lib {}
// SAFETY: as for Send.
unsafe impl Sync for Lib {}

impl Lib {
    /// Hold the library for one call sequence.
    pub(crate) fn lock(&self) -> MutexGuard<'_, ()> {
        self.lock.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn raw(&self) -> *mut sys::RawContext {
        self.raw
    }

    /// Register `mem`.
    pub(crate) fn reg(&self, mem: MemRef) -> Result<*mut c_void> {
        let mut mr = std::ptr::null_mut();
        let _g = self.lock();
        // SAFETY: `raw` is a live context (the team owns it); `mem` is a
        // host range valid while the collective that registers it runs
        // (MemRef's promise), and the handle is released before that ends
        // (or leaked if the request is abandoned).
        let rc = unsafe { (self.api.reg_mr)(self.raw, mem.addr().cast(), mem.len(), &mut mr) };
        self.api.check(rc, &format!("sharp_coll_reg_mr of {} bytes", mem.len()))?;
        Ok(mr)
    }

    /// Release a registration.
    pub(crate) fn dereg(&self, mr: *mut c_void) -> Result<()> {
        if self.abandoned.load(Ordering::Relaxed) {
            return Ok(()); // the library may still use it: leak
        }
        let _g = self.lock();
        // SAFETY: `mr` came from reg_mr on this context and is released once.
        let rc = unsafe { (self.api.dereg_mr)(self.raw, mr) };
        self.api.check(rc, "sharp_coll_dereg_mr")
    }

    /// Mark a request abandoned (timed out or cancelled in flight).
    pub(crate) fn abandon(&self) {
        self.abandoned.store(true, Ordering::Relaxed);
    }

    /// Whether the caps allow `dtype` × `op` (SHARP codes).
    pub(crate) fn allows(&self, dtype: c_int, op: c_int) -> bool {
        let m = &self.caps.support_mask;
        (m.dtypes >> dtype) & 1 == 1 && (m.reduce_ops >> op) & 1 == 1
    }

    /// Whether the library streams (SAT), which its reduce_scatter needs.
    pub(crate) fn has_sat(&self) -> bool {
        self.caps.support_mask.feature_mask & sys::FEATURE_SAT != 0
    }
}

impl Drop for Lib {
    fn drop(&mut self) {
        if self.abandoned.load(Ordering::Relaxed) {
            ferrocoll_core::log_warn!(
                "sharp: a request was abandoned; its SHARP context, groups and registrations are left to the process"
            );
            // Leak the OOB contexts too: the library may call them.
            if let Some(g) = self.flat.take() {
                std::mem::forget(g);
            }
            if let Some(g) = self.leaders.take() {
                std::mem::forget(g);
            }
            if let Some(w) = self.world.take() {
                std::mem::forget(w);
            }
            return;
        }
        for mr in self.cache.drain() {
            // SAFETY: a cached registration of this context, no longer used by any collective.
            let rc = unsafe { (self.api.dereg_mr)(self.raw, mr) };
            if let Err(e) = self.api.check(rc, "sharp_coll_dereg_mr") {
                ferrocoll_core::log_warn!("sharp: {e}");
            }
        }
        for g in [self.leaders.take(), self.flat.take()].into_iter().flatten() {
            // SAFETY: a group of this context with no request outstanding (none was abandoned).
            let rc = unsafe { (self.api.comm_destroy)(g.raw) };
            if let Err(e) = self.api.check(rc, "sharp_coll_comm_destroy") {
                ferrocoll_core::log_warn!("sharp: {e}");
            }
        }
        // SAFETY: the context is released once, after its groups.
        let rc = unsafe { (self.api.finalize)(self.raw) };
        if let Err(e) = self.api.check(rc, "sharp_coll_finalize") {
            ferrocoll_core::log_warn!("sharp: {e}");
        }
    }
}

/// The SHARP TL's team.
pub(crate) struct SharpTeam {
    pub lib: Arc<Lib>,
    pub p2p: Arc<TeamShared>,
    pub config: SharpConfig,
    /// Whether a node holds several ranks and there are several nodes.
    pub hierarchical: bool,
    /// `UCC_COLL_TRACE` is on: runtime fallbacks are traced.
    pub trace: bool,
}

impl SharpTeam {
    /// Make the library context and groups (blocking in the OOB callbacks),
    /// and agree with every member that they worked.
    pub(crate) fn create(
        api: Arc<sys::Api>,
        p2p: Arc<TeamShared>,
        config: SharpConfig,
        trace: bool,
    ) -> Result<Arc<dyn TlTeam>> {
        let (rank, size) = (p2p.rank, p2p.size);
        if size < 2 {
            return Err(Error::not_supported("sharp serves teams of two ranks or more"));
        }
        let all: Vec<usize> = (0..size).collect();
        let world = Box::new(Oob::new(p2p.clone(), all.clone(), FLAT_SEQ, config.oob_timeout)?);
        let sub = p2p.layout.subgroups(rank, None)?;
        let leaders: Vec<usize> = p2p.layout.nodes().iter().filter_map(|n| n.first().copied()).collect();
        let hierarchical = leaders.len() > 1 && leaders.len() < size;

        let made = init(&api, &p2p, &world);
        let agreed = world.agree(made.is_ok());
        let (raw, caps) = match (made, agreed) {
            (Ok(m), Ok(true)) => m,
            (made, agreed) => {
                let why = match made {
                    Err(e) => e.context().to_string(),
                    Ok((raw, _)) => {
                        // SAFETY: the context just made here, with no group, released once.
                        unsafe { (api.finalize)(raw) };
                        "another member could not initialise SHARP".to_string()
                    }
                };
                // Not agreed at all (a member gone): an error; agreed off: the TL is left out.
                agreed?;
                return Err(Error::not_supported(format!("sharp is off for this team: {why}")));
            }
        };
        let mut lib = Lib {
            api: api.clone(),
            raw,
            world: Some(world),
            caps,
            flat: None,
            leaders: None,
            has_leaders: false,
            cache: RegCache::new(config.reg_cache),
            lock: Mutex::new(()),
            abandoned: AtomicBool::new(false),
        };
        // The flat group; then the leaders' (made by leaders only). Each is
        // kept only if it was made everywhere; `lib` owns what is kept, so an
        // error below releases it.
        let flat = comm_init(&lib, Oob::new(p2p.clone(), all, FLAT_SEQ + (1 << 40), config.oob_timeout)?);
        let flat_agreed = agree(&lib, flat.is_ok());
        lib.flat = keep(&api, flat, &flat_agreed, "the team's group");
        flat_agreed?;
        let leaders_group = if hierarchical && sub.node_leader == rank {
            Some(comm_init(&lib, Oob::new(p2p.clone(), leaders.clone(), LEADERS_SEQ, config.oob_timeout)?))
        } else {
            None
        };
        let leaders_agreed = agree(&lib, leaders_group.as_ref().is_none_or(|g| g.is_ok()));
        if let Some(g) = leaders_group {
            lib.leaders = keep(&api, g, &leaders_agreed, "the node leaders' group");
        }
        let leaders_ok = leaders_agreed? && hierarchical;
        lib.has_leaders = leaders_ok;
        if lib.flat.is_none() && !lib.has_leaders {
            return Err(Error::not_supported("sharp is off for this team: no SHARP group could be made"));
        }
        let team = SharpTeam { lib: Arc::new(lib), p2p, config, hierarchical: hierarchical && leaders_ok, trace };
        Ok(Arc::new(TeamOf(Arc::new(team))))
    }
}

/// `sharp_coll_init` with the team as its world, and the caps.
fn init(api: &sys::Api, p2p: &TeamShared, world: &Oob) -> Result<(*mut sys::RawContext, sys::Caps)> {
    let to_int = |v: usize, what: &str| {
        c_int::try_from(v).map_err(|_| Error::invalid_param(format!("{what} {v} is too large for SHARP")))
    };
    let local = p2p.layout.subgroups(p2p.rank, None)?.node.iter().position(|&r| r == p2p.rank).unwrap_or(0);
    let mut spec = sys::InitSpec {
        job_id: p2p.id,
        world_rank: to_int(p2p.rank, "rank")?,
        world_size: to_int(p2p.size, "team size")?,
        progress_func: None,
        group_channel_idx: 0,
        config: api.default_config,
        oob_colls: sys::OobColls {
            bcast: Some(oob::oob_bcast),
            barrier: Some(oob::oob_barrier),
            gather: Some(oob::oob_gather),
        },
        world_local_rank: to_int(local, "local rank")?,
        enable_thread_support: 0,
        oob_ctx: std::ptr::from_ref(world).cast_mut().cast(),
        reserved: [0; 4],
    };
    // SHARP's own timeout would abort a collective we time out ourselves: leave it off.
    spec.config.coll_timeout = -1;
    let mut raw = std::ptr::null_mut();
    // SAFETY: `spec` is a complete init spec whose OOB context (`world`,
    // boxed by the caller and kept by the team) outlives the library
    // context; the callbacks match SHARP's prototypes.
    let rc = unsafe { (api.init)(&mut spec, &mut raw) };
    api.check(rc, "sharp_coll_init").map_err(|e| with_oob(e, world))?;
    if raw.is_null() {
        return Err(Error::internal("sharp_coll_init succeeded without a context"));
    }
    let mut caps = sys::Caps::default();
    // SAFETY: `raw` is the live context just made; `caps` is ours to fill.
    let rc = unsafe { (api.caps_query)(raw, &mut caps) };
    if let Err(e) = api.check(rc, "sharp_coll_caps_query") {
        // SAFETY: the context just made, released once on this failure path.
        unsafe { (api.finalize)(raw) };
        return Err(e);
    }
    Ok((raw, caps))
}

/// Whether `ok` holds on every member, over the team's OOB.
fn agree(lib: &Lib, ok: bool) -> Result<bool> {
    match &lib.world {
        Some(w) => w.agree(ok),
        None => Err(Error::internal("a SHARP team without its OOB")),
    }
}

/// Add what the OOB saw to a library error.
fn with_oob(e: Error, oob: &Oob) -> Error {
    match oob.take_error() {
        Some(o) => e.prefixed(format!("{o}; then")),
        None => e,
    }
}

/// `sharp_coll_comm_init` over `oob`'s members.
fn comm_init(lib: &Lib, oob: Oob) -> Result<Group> {
    let oob = Box::new(oob);
    let ranks = oob
        .members()
        .iter()
        .map(|&r| u32::try_from(r).map_err(|_| Error::invalid_param(format!("team rank {r} too large for SHARP"))))
        .collect::<Result<Vec<u32>>>()?;
    let int = |v: usize| c_int::try_from(v).map_err(|_| Error::invalid_param(format!("group size {v} too large")));
    let mut spec = sys::CommInitSpec {
        rank: int(oob.rank())?,
        size: int(oob.size())?,
        oob_ctx: std::ptr::from_ref(&*oob).cast_mut().cast(),
        group_world_ranks: ranks.as_ptr(),
        reserved: [0; 2],
    };
    let mut raw = std::ptr::null_mut();
    // SAFETY: a live context; the spec's member list lives through the call
    // and its OOB context (boxed) as long as the group.
    let rc = unsafe { (lib.api.comm_init)(lib.raw, &mut spec, &mut raw) };
    lib.api.check(rc, &format!("sharp_coll_comm_init of {} ranks", oob.size())).map_err(|e| with_oob(e, &oob))?;
    Ok(Group { raw, oob })
}

/// `made`, if it was made on every member (`agreed`); else released.
fn keep(api: &sys::Api, made: Result<Group>, agreed: &Result<bool>, what: &str) -> Option<Group> {
    match (made, agreed) {
        (Ok(g), Ok(true)) => Some(g),
        (Ok(g), _) => {
            destroy(api, g);
            None
        }
        (Err(e), _) => {
            ferrocoll_core::log_debug!("sharp: {what} is off: {}", e.context());
            None
        }
    }
}

fn destroy(api: &sys::Api, g: Group) {
    // SAFETY: a group just made, with no request, destroyed once.
    let rc = unsafe { (api.comm_destroy)(g.raw) };
    if let Err(e) = api.check(rc, "sharp_coll_comm_destroy") {
        ferrocoll_core::log_warn!("sharp: {e}");
    }
}

/// What a SHARP algorithm runs with, per execution.
#[derive(Clone)]
pub(crate) struct Exec {
    pub team: Arc<SharpTeam>,
    /// p2p over the TL's router, for this post (node phases).
    pub comm: Comm,
    /// Set once a SHARP request of this execution was posted: from then on
    /// a refusal is an error, not a fallback (buffers may be half written).
    pub posted: Arc<AtomicBool>,
    pub what: Arc<str>,
}

impl Exec {
    /// Register `mem` for this execution.
    pub(crate) fn reg(&self, mem: MemRef) -> Result<Arc<Reg>> {
        self.team.lib.cache.get(&self.team.lib, mem).map(Arc::new)
    }
}

impl AlgTeam for SharpTeam {
    type Exec = Exec;
    const TL: &'static str = "sharp";

    fn registry(&self) -> &'static Registry<Exec> {
        alg::registry()
    }

    fn mem_types(&self) -> &[MemType] {
        &[MemType::Host]
    }

    fn score(&self) -> Score {
        SCORE
    }

    fn defaults(&self) -> Vec<DefaultAlg> {
        alg::defaults(self)
    }

    fn accepts(&self, init: &CollInit) -> Result<()> {
        if init.active_set.is_some() {
            return Err(Error::not_supported("sharp runs no active-set collectives"));
        }
        Ok(())
    }

    fn task(self: &Arc<Self>, alg: &'static Alg<Exec>, init: &Arc<CollInit>) -> Result<Arc<dyn CollTask>> {
        alg::supports(self, alg, init)?;
        let fallback = alg::p2p_fallback(init)?;
        let what: Arc<str> = format!("{}:@{}", init.coll, alg.info.name).into();
        Ok(Arc::new(SharpTask { team: self.clone(), init: init.clone(), run: alg.run, fallback, what }))
    }
}

struct SharpTask {
    team: Arc<SharpTeam>,
    init: Arc<CollInit>,
    run: Run<Exec>,
    fallback: &'static Alg<Comm>,
    what: Arc<str>,
}

impl CollTask for SharpTask {
    fn start(&self, post: &PostInfo) -> Result<TaskFuture> {
        let sig = Signature::of(&self.init);
        let comm = Comm::new(self.team.p2p.clone(), post.seq, sig, post.diag.clone());
        let posted = Arc::new(AtomicBool::new(false));
        let exec =
            Exec { team: self.team.clone(), comm: comm.clone(), posted: posted.clone(), what: self.what.clone() };
        let run = self.run.start(exec, &self.init)?;
        let (init, fallback, team, what) = (self.init.clone(), self.fallback, self.team.clone(), self.what.clone());
        Ok(Box::pin(async move {
            match run.await {
                Err(e) if sys::is_refusal(&e) && !posted.load(Ordering::Relaxed) => {
                    if team.trace {
                        ferrocoll_core::log::write(
                            ferrocoll_core::log::Level::Info,
                            format_args!(
                                "sharp: {what} refused at post ({}); running p2p {}:@{} instead",
                                e.context(),
                                init.coll,
                                fallback.info.name
                            ),
                        );
                    }
                    // A fresh tag range: nothing of the refused attempt can match it.
                    fallback.run.start(comm.phase(7), &init)?.await
                }
                r => r,
            }
        }))
    }
}
