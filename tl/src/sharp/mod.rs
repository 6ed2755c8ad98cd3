//! # TL/SHARP: in-network reductions through libsharp_coll
//!
//! NVIDIA's SHARP aggregates in the InfiniBand switches; its library,
//! `libsharp_coll.so`, is loaded at run time (`UCC_TL_SHARP_LIB`, default
//! `libsharp_coll.so` on the loader's path) and never linked. Where it is
//! absent the TL is off for the context, said at debug level, and the other
//! TLs serve as before.
//!
//! Design decisions:
//! - **Its own router.** A SHARP team needs point-to-point messages: the
//!   OOB collectives the library calls back (`oob.rs`), the node phases of
//!   the hierarchical algorithms, and the fallback when the library
//!   refuses a collective. The TL's context therefore holds a p2p context
//!   of its own (in-process, shared-memory and TCP transports) and runs
//!   p2p algorithms over it; the p2p TL is not asked.
//! - **Creation agrees.** The library context (`sharp_coll_init`, one per
//!   team: its world is the team), the caps query and the groups
//!   (`sharp_coll_comm_init`: all ranks, and the node leaders when nodes hold
//!   several ranks) are made at team creation, blocking in the OOB
//!   callbacks (bounded by `UCC_TL_SHARP_OOB_TIMEOUT`); then every rank
//!   says whether its part worked and the team is served only if all did
//!   (else `NotSupported`: the TL is left out of the team, alike everywhere).
//! - **Refusals fall back, never fail.** At init, what the caps exclude
//!   (datatype, operation, SAT for the native reduce_scatter, a library
//!   without the entry point, non-host memory, active sets) is
//!   `NotSupported`, and selection takes the next candidate. At post, "not
//!   supported" and "no resource" (and a SAT lock still busy after
//!   `UCC_TL_SHARP_LOCK_RETRIES` retries) before any SHARP request of the
//!   execution was posted run the p2p default algorithm for the collective
//!   instead (traced at info level with `UCC_COLL_TRACE`). That relies on
//!   the library refusing alike on every rank (its resources are the
//!   group's); a rank refused alone leaves the others to the timeout.
//! - **No hang.** A request the library never completes fails after
//!   `UCC_TL_SHARP_REQ_TIMEOUT` with a `TimedOut` error naming the
//!   collective, the group and the library; the request and its
//!   registrations are then abandoned (leaked), never freed under the
//!   library's feet.
//! - **Registrations** (`reg.rs`): buffers are registered with
//!   `sharp_coll_reg_mr` per execution, or kept in a cache of
//!   `UCC_TL_SHARP_REG_CACHE` entries (default 0: off). Without memory
//!   hooks (UCC has them), a cached registration of memory that the program
//!   frees and maps again at the same address would be stale, so the cache
//!   is opt-in.
//!
//! Algorithms: allreduce `sharp` and `hier` (node reduce, SHARP among node
//! leaders, node bcast); reduce_scatter `sat` (native,
//! `sharp_coll_do_reduce_scatter_nb`, needs SAT), `allreduce` (one allreduce
//! into registered scratch, then the own block copied out), `reduces` (one
//! SHARP reduce per root, `UCC_TL_SHARP_RS_PIPELINE` in flight; the method
//! for libraries without reduce_scatter) and `hier`; reduce_scatterv
//! `reduces`; reduce, bcast, barrier and allgather `sharp`.
//!
//! Limits: host memory only; nothing here has run on SHARP hardware — the
//! tests run against a test double (`tests/fake_sharp/`), which computes
//! on the ranks through the OOB callbacks.

pub(crate) mod alg;
mod context;
pub(crate) mod oob;
mod reg;
mod req;
pub(crate) mod sys;
mod team;

use std::sync::Arc;
use std::time::Duration;

use ferrocoll_core::Result;
use ferrocoll_core::backend::{AlgInfo, TlComponent, TlContext, TlContextParams};
use ferrocoll_core::config::{Config, ConfigField};
use ferrocoll_core::score::Score;

use crate::base::knobs::{self, Knob, Unit};

/// The SHARP TL component.
#[derive(Debug, Default)]
pub struct SharpTl;

/// Above p2p (10), below shm (40): a team on one host keeps its shared
/// segment; a team across hosts goes through the switches.
pub(crate) const SCORE: Score = Score(30);

/// The TL's settings.
#[derive(Clone, Debug)]
pub(crate) struct SharpConfig {
    /// Library to load.
    pub lib: String,
    /// OOB calls' bound.
    pub oob_timeout: Duration,
    /// A request's bound (`None`: wait forever).
    pub req_timeout: Option<Duration>,
    /// Registrations kept (0: none).
    pub reg_cache: usize,
    /// Retries of a post refused with "lock failed".
    pub lock_retries: usize,
    /// Reduces in flight in reduce_scatter `reduces`.
    pub rs_pipeline: usize,
    /// reduce_scatter at most this many bytes in all: `allreduce` by default.
    pub rs_allreduce_max: usize,
}

const KNOBS: &[Knob<SharpConfig>] = &[
    Knob {
        field: ConfigField {
            name: "UCC_TL_SHARP_REG_CACHE",
            default: "0",
            doc: "Registrations of user buffers kept for reuse (0: register per collective). Without memory \
                  hooks a freed and re-mapped buffer would reuse a stale registration: enable only if buffers \
                  are not freed while the context lives.",
        },
        unit: Unit::Count,
        min: 0,
        max: 1 << 16,
        slot: |c| &mut c.reg_cache,
    },
    Knob {
        field: ConfigField {
            name: "UCC_TL_SHARP_LOCK_RETRIES",
            default: "16",
            doc: "Times a post refused with SHARP's retryable \"lock failed\" is tried again before it falls back.",
        },
        unit: Unit::Count,
        min: 0,
        max: 1 << 20,
        slot: |c| &mut c.lock_retries,
    },
    Knob {
        field: ConfigField {
            name: "UCC_TL_SHARP_RS_PIPELINE",
            default: "4",
            doc: "SHARP reduces in flight in reduce_scatter:@reduces (one per root).",
        },
        unit: Unit::Count,
        min: 1,
        max: 1024,
        slot: |c| &mut c.rs_pipeline,
    },
    Knob {
        field: ConfigField {
            name: "UCC_TL_SHARP_RS_ALLREDUCE_MAX",
            default: "16K",
            doc: "reduce_scatter messages up to this size use one allreduce and a copy by default; larger ones \
                  the native SAT reduce_scatter, or one reduce per root without it.",
        },
        unit: Unit::Bytes,
        min: 0,
        max: usize::MAX >> 1,
        slot: |c| &mut c.rs_allreduce_max,
    },
];

const STRINGS: &[ConfigField] = &[
    ConfigField { name: "UCC_TL_SHARP_TUNE", default: "", doc: "Score-map overrides for the SHARP TL." },
    ConfigField {
        name: "UCC_TL_SHARP_LIB",
        default: sys::DEFAULT_LIBRARY,
        doc: "The SHARP library to load (a file name for the loader's search, or a path).",
    },
    ConfigField {
        name: "UCC_TL_SHARP_OOB_TIMEOUT",
        default: "60s",
        doc: "Bound on each out-of-band collective SHARP asks for (team creation).",
    },
    ConfigField {
        name: "UCC_TL_SHARP_REQ_TIMEOUT",
        default: "60s",
        doc: "A SHARP request not complete after this fails its collective as timed out (inf: wait).",
    },
];

impl SharpConfig {
    pub(crate) fn from_config(config: &Config) -> Result<SharpConfig> {
        let mut c = SharpConfig {
            lib: config.get("TL_SHARP_LIB").unwrap_or(sys::DEFAULT_LIBRARY).trim().to_string(),
            oob_timeout: config
                .positive_duration_or("TL_SHARP_OOB_TIMEOUT", Some(Duration::from_secs(60)))?
                .unwrap_or(Duration::MAX),
            req_timeout: config.positive_duration_or("TL_SHARP_REQ_TIMEOUT", Some(Duration::from_secs(60)))?,
            reg_cache: 0,
            lock_retries: 0,
            rs_pipeline: 0,
            rs_allreduce_max: 0,
        };
        knobs::read(config, KNOBS, &mut c, &|_| None)?;
        Ok(c)
    }

    fn fields() -> Vec<ConfigField> {
        STRINGS.iter().copied().chain(knobs::fields(KNOBS)).collect()
    }
}

impl TlComponent for SharpTl {
    fn name(&self) -> &'static str {
        "sharp"
    }

    fn description(&self) -> &'static str {
        "in-network reductions through libsharp_coll (loaded at run time), with p2p for its OOB and fallbacks"
    }

    fn default_score(&self) -> Score {
        SCORE
    }

    fn config_fields(&self) -> Vec<ConfigField> {
        SharpConfig::fields()
    }

    fn algorithms(&self) -> &'static [AlgInfo] {
        alg::registry().infos()
    }

    fn agreed_fields(&self) -> Vec<&'static str> {
        vec![
            "UCC_TL_SHARP_TUNE",
            "UCC_TL_SHARP_RS_PIPELINE",
            "UCC_TL_SHARP_RS_ALLREDUCE_MAX",
            "UCC_TL_SHARP_LOCK_RETRIES",
        ]
    }

    fn context_create(&self, params: &TlContextParams<'_>) -> Result<Arc<dyn TlContext>> {
        let config = SharpConfig::from_config(params.config)?;
        let api = sys::Api::load(&config.lib).inspect_err(|e| {
            ferrocoll_core::log_debug!("sharp: off: {}", e.context());
        })?;
        Ok(Arc::new(context::SharpContext::new(params, Arc::new(api))?))
    }
}
