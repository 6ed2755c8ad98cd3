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
//! it needs), up to 8 KiB beside the flag that announces them (`inline.rs`),
//! each post of one a single hand-written state machine (`one_epoch.rs`);
//! large ones go in rounds of half a rank's area, and reductions
//! split each round's work by slices (reduce-scatter + allgather), with the
//! memory component reducing peers' data in place in the segment. Bcast and
//! allgather/gather copy into destinations larger than the last-level cache
//! with non-temporal stores (`cache.rs`).
//!
//! Limits: host memory, teams whose ranks all share a host (threads or
//! processes), no active sets (the p2p TL serves those). A rank runs its shm
//! collectives in post order, one at a time; a collective cancelled halfway
//! breaks the team (later ones fail at once, saying so).

mod alg;
mod cache;
mod context;
mod copy_in;
#[cfg(test)]
mod copy_in_tests;
mod crossover;
mod demote;
mod epoch;
mod inline;
mod layout;
mod liveness_cadence;
mod one_epoch;
mod prefetch;
mod segment;
#[cfg(test)]
mod single_copy_tests;
mod staging_probe;
mod team;
#[cfg(test)]
mod team_liveness_tests;
#[cfg(test)]
mod test_support;

use std::sync::Arc;

use ferrocoll_core::Result;
use ferrocoll_core::backend::{AlgInfo, TlComponent, TlContext, TlContextParams};
use ferrocoll_core::config::{Config, ConfigField};
use ferrocoll_core::score::Score;

use crate::base::knobs::{self, Knob, Unit};

/// The shm TL's score: above p2p (10), below self (50) for teams of one.
pub(crate) const SCORE: Score = Score(40);

/// The shm TL component.
#[derive(Debug, Default)]
pub struct ShmTl;

/// Settings of the shm TL.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ShmConfig {
    /// Bytes of one half of a rank's data area: the round of allreduce and
    /// reduce.
    pub data_size: usize,
    /// Bytes a round of the copying collectives moves (at most `data_size`).
    pub pipeline_size: usize,
    /// Allreduce/reduce messages from this size up use `rsag`.
    pub rsag_threshold: usize,
    /// Destination buffers from this size up are written past the cache
    /// by bcast and allgather/gather (`cache.rs`).
    pub stream_threshold: usize,
    /// Messages from this size up of bcast, allgather(v), gather(v),
    /// scatter(v), alltoall(v) and (on two ranks) reduce go by single copy
    /// (`alg/single_copy.rs`) in the default selection; `usize::MAX`:
    /// never; [`CMA_MEASURED`]: "auto", measured by the team's first rank
    /// (with its second, `staging_probe.rs`) as it creates the segment
    /// (`crossover.rs`).
    pub cma_threshold: usize,
}

/// `cma_threshold` when `UCC_TL_SHM_CMA_THRESHOLD` is "auto": only a
/// team's first rank measures it (`ShmTeam::create_shared`), timing
/// staging's copies with the team's second rank once per context (where
/// ranks outnumber cores, or alone, it times only the read, once per
/// process), and writes the figure in the segment's header for the
/// others, so that a job's ranks do not all time their reads at once,
/// slowing each other's (25–35 % on a 2-core AMD EPYC VM).
pub(crate) const CMA_MEASURED: usize = usize::MAX - 1;

/// The variable whose default is read from the machine (the last-level cache, at most 64 MiB).
const STREAM: &str = "UCC_TL_SHM_STREAM_THRESHOLD";

/// The variable whose default is measured on the machine (`crossover.rs`).
const CMA: &str = "UCC_TL_SHM_CMA_THRESHOLD";

const KNOBS: &[Knob<ShmConfig>] = &[
    Knob {
        field: ConfigField {
            name: "UCC_TL_SHM_DATA_SIZE",
            default: "512K",
            doc: "Bytes of each of the two halves of a rank's area in a team segment: the chunk of a large allreduce or reduce per round (each round costs three synchronisations).",
        },
        unit: Unit::Bytes,
        min: 4096,
        max: 1 << 30,
        slot: |c| &mut c.data_size,
    },
    Knob {
        field: ConfigField {
            name: "UCC_TL_SHM_PIPELINE_SIZE",
            default: "256K",
            doc: "Bytes per round of the collectives that copy through the segment without reducing (bcast, allgather, gather, scatter, alltoall) and of reduce_scatter, at most UCC_TL_SHM_DATA_SIZE: smaller rounds overlap one rank's copy in with the others' copies out.",
        },
        unit: Unit::Bytes,
        min: 4096,
        max: 1 << 30,
        slot: |c| &mut c.pipeline_size,
    },
    Knob {
        field: ConfigField {
            name: "UCC_TL_SHM_RSAG_THRESHOLD",
            default: "16K",
            doc: "Allreduce and reduce messages from this size up use rsag (reduce-scatter + allgather) instead of onestep.",
        },
        unit: Unit::Bytes,
        min: 0,
        max: usize::MAX,
        slot: |c| &mut c.rsag_threshold,
    },
    Knob {
        field: ConfigField {
            name: STREAM,
            default: "auto",
            doc: "Bcast and allgather/gather write destination buffers from this size up with non-temporal stores, past the cache (auto: the size of the last-level cache, read at run time, at most 64M; inf: never).",
        },
        unit: Unit::Bytes,
        min: 0,
        max: usize::MAX,
        slot: |c| &mut c.stream_threshold,
    },
    Knob {
        field: ConfigField {
            name: CMA,
            default: "auto",
            doc: "Bcast, allgather(v), gather(v), scatter(v) and alltoall(v) messages from this size up (UCC's message size; for the v-variants, the longest block times the team size), and reduce on two ranks, are copied once, straight from the giving rank's buffer with cross-memory attach (process_vm_readv), instead of through the segment; inf: never; auto: where it pays on this machine, measured when a team is created by its first rank, which times the read and, with the team's second rank, staging's two copies (once per context; where ranks outnumber cores staging is taken to cost 0.11 ns a byte), and whose figure the whole team uses (8K-64K on the machines measured, 2M where staging wins at every size to 1M). Where ranks outnumber cores it starts 16 times later, at most 256K unless the threshold itself is later. Where the kernel refuses it (Yama, seccomp, containers) the team uses the segment.",
        },
        unit: Unit::Bytes,
        min: 0,
        max: usize::MAX,
        slot: |c| &mut c.cma_threshold,
    },
];

const TUNE: ConfigField =
    ConfigField { name: "UCC_TL_SHM_TUNE", default: "", doc: "Score-map overrides for the shm TL." };

impl ShmConfig {
    pub(crate) fn from_config(c: &Config) -> Result<ShmConfig> {
        let mut config = ShmConfig::default();
        // "auto" is not a size: unless the variable is set, the stream
        // threshold is the machine's last-level cache, at most 64 MiB, and
        // the single-copy threshold is measured when a team is created.
        knobs::read(c, KNOBS, &mut config, &|k| match k.field.name {
            STREAM => Some(cache::default_stream_threshold()),
            CMA => Some(CMA_MEASURED),
            _ => None,
        })?;
        Ok(config)
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
        knobs::fields(KNOBS).chain([TUNE]).collect()
    }

    fn algorithms(&self) -> &'static [AlgInfo] {
        alg::registry().infos()
    }

    fn agreed_fields(&self) -> Vec<&'static str> {
        knobs::fields(KNOBS).chain([TUNE]).map(|f| f.name).collect()
    }

    fn context_create(&self, params: &TlContextParams<'_>) -> Result<Arc<dyn TlContext>> {
        Ok(Arc::new(context::ShmContext::new(params)?))
    }
}
