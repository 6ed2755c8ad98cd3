//! # TL/P2P: collectives from point-to-point messages
//!
//! The generic algorithms (knomial, recursive k-ing, Rabenseifner, ring,
//! Bruck, pairwise, linear) written once as `async fn`s over [`Comm`]'s
//! tagged send/receive, and run over the pluggable transports of
//! [`ferrocoll_transport`]. This is
//! UCC's TL/UCP: the TL that works for every team, every collective, every
//! size, and the fallback of the others. `UCC_TL_UCP_*` users will find the
//! same algorithm names under `UCC_TL_P2P_*` (and `UCC_TL_UCP_TUNE` is read,
//! its tokens for algorithms this TL lacks skipped: `score::map::apply_tune`).
//!
//! Design decisions:
//! - Messages are matched by (team, sequence number, step tag, source), so
//!   any number of collectives of any teams may be in flight.
//! - Receivers pull: a receive is a future that asks the transport for its
//!   message when polled; nothing is registered, so cancelling is dropping.
//! - Ranks that combine the same partial results do it in rank order, so
//!   allreduce gives identical bits on every rank.
//! - Averages are divided on the step that writes final values, so
//!   half-precision results are rounded once there.
//! - Ranks whose calls differ fail naming each other, never hang: every
//!   message carries its sender's call; a rank that fails on another call
//!   tells every member; waiting operations look for such notices, for
//!   stray messages of another call, and probe a peer they waited on for
//!   a second ([`Comm`]'s module docs). Team creation compares the
//!   members' agreed settings, per-team overrides included.
//!
//! Transports, one per peer, chosen by where the peer runs ([`ferrocoll_transport::Router`]):
//! in-process (threads of one process), shared memory (processes of one
//! host: rings for eager messages, single-copy CMA for large ones) and TCP
//! (other hosts). A peer whose process dies is noticed by its transport and
//! fails every collective of its teams, naming it.
//!
//! CUDA device and managed memory are served when the library has the CUDA
//! memory component: the host algorithms run on pinned host copies of the
//! buffers (`staging.rs`), so reductions run on the host for now.
//!
//! Limits: CUDA memory is staged whole and reduced on the host (kernel
//! reductions and pipelined staging are the follow-up); no RDMA (ibverbs)
//! transport yet.

pub(crate) mod alg;
pub(crate) mod comm;
mod config;
pub(crate) mod context;
pub mod pattern;
mod staging;
pub(crate) mod team;

use std::sync::Arc;

use ferrocoll_core::Result;
use ferrocoll_core::backend::{AlgInfo, TlComponent, TlContext, TlContextParams};
use ferrocoll_core::config::ConfigField;
use ferrocoll_core::score::Score;

pub use comm::{Comm, RecvFuture, SendFuture};
pub use config::P2pConfig;

/// The p2p TL component.
#[derive(Debug, Default)]
pub struct P2pTl;

impl TlComponent for P2pTl {
    fn name(&self) -> &'static str {
        "p2p"
    }

    fn description(&self) -> &'static str {
        "point-to-point algorithms over in-process, shared-memory and TCP transports"
    }

    fn default_score(&self) -> Score {
        Score(10)
    }

    fn config_fields(&self) -> Vec<ConfigField> {
        P2pConfig::fields()
    }

    fn algorithms(&self) -> &'static [AlgInfo] {
        alg::registry().infos()
    }

    fn agreed_fields(&self) -> Vec<&'static str> {
        P2pConfig::agreed_fields()
    }

    fn context_create(&self, params: &TlContextParams<'_>) -> Result<Arc<dyn TlContext>> {
        P2pConfig::from_config(params.config)?;
        Ok(Arc::new(context::P2pContext::new(params, self.default_score())?))
    }
}
