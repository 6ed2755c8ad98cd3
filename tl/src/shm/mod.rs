//! # TL/SHM: host collectives through one shared segment per team
//!
//! On one host, every rank can read every other rank's data: this TL gives
//! each team a shared segment (POSIX shared memory, mode 0600, unlinked as
//! soon as every member has mapped it) with a control line per rank and two
//! halves of data per rank, and runs collectives as *epochs* of
//! publish / wait / read (see `epoch.rs`), with sequence-numbered flags that
//! are never reset, no system calls on the fast path, and waits that are
//! plain polls (the engine's spin-then-yield lets more ranks than cores progress).
//!
//! Small messages are one-step exchanges (each rank publishes, then reads what
//! it needs); large ones go in rounds of half a rank's area, and reductions
//! split each round's work by slices (reduce-scatter + allgather), with the
//! memory component reducing peers' data in place in the segment.
//!
//! Limits: host memory, teams whose ranks all share a host (threads or
//! processes), no active sets (the p2p TL serves those). A rank runs its shm
//! collectives in post order, one at a time; a collective cancelled halfway
//! breaks the team (later ones fail at once, saying so).

mod alg;
mod context;
mod epoch;
mod layout;
mod segment;
mod team;

use std::sync::Arc;

use ferrocoll_core::backend::{AlgInfo, TlComponent, TlContext, TlContextParams};
use ferrocoll_core::config::{Config, ConfigField};
use ferrocoll_core::score::Score;
use ferrocoll_core::{Error, Result};

/// The shm TL's score: above p2p (10), below self (50) for teams of one.
pub(crate) const SCORE: Score = Score(40);

/// The shm TL component.
#[derive(Debug, Default)]
pub struct ShmTl;

/// Settings of the shm TL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ShmConfig {
    /// Bytes of one half of a rank's data area.
    pub data_size: usize,
    /// Allreduce/reduce messages from this size up use `rsag`.
    pub rsag_threshold: usize,
}

const FIELDS: &[ConfigField] = &[
    ConfigField {
        name: "UCC_TL_SHM_DATA_SIZE",
        default: "256K",
        doc: "Bytes of each of the two halves of a rank's area in a team segment: the chunk of a large message per round.",
    },
    ConfigField {
        name: "UCC_TL_SHM_RSAG_THRESHOLD",
        default: "16K",
        doc: "Allreduce and reduce messages from this size up use rsag (reduce-scatter + allgather) instead of onestep.",
    },
    ConfigField { name: "UCC_TL_SHM_TUNE", default: "", doc: "Score-map overrides for the shm TL." },
];

impl ShmConfig {
    pub(crate) fn from_config(c: &Config) -> Result<ShmConfig> {
        let size = |name: &str, default: &str| -> Result<usize> {
            let v = c.get(name).unwrap_or(default);
            let n = ferrocoll_core::config::parse_size(v).map_err(|e| e.prefixed(format!("UCC_{name}")))?;
            usize::try_from(n).map_err(|_| Error::invalid_param(format!("UCC_{name}={v} is too large")))
        };
        let data_size = size("TL_SHM_DATA_SIZE", "256K")?;
        if data_size < 4096 {
            return Err(Error::invalid_param(format!("UCC_TL_SHM_DATA_SIZE={data_size} is below the minimum of 4K")));
        }
        Ok(ShmConfig { data_size, rsag_threshold: size("TL_SHM_RSAG_THRESHOLD", "16K")? })
    }
}

impl TlComponent for ShmTl {
    fn name(&self) -> &'static str {
        "shm"
    }

    fn description(&self) -> &'static str {
        "collectives through a shared segment per team, for ranks on one host"
    }

    fn default_score(&self) -> Score {
        SCORE
    }

    fn config_fields(&self) -> Vec<ConfigField> {
        FIELDS.to_vec()
    }

    fn algorithms(&self) -> &'static [AlgInfo] {
        alg::infos()
    }

    fn context_create(&self, params: &TlContextParams<'_>) -> Result<Arc<dyn TlContext>> {
        Ok(Arc::new(context::ShmContext::new(params)?))
    }
}
