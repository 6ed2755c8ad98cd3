//! What every TL is built on, so that each TL holds only what is its own:
//!
//! - [`registry`]: its algorithms, typed by collective ([`Run`] hands each
//!   algorithm exactly its collective's operands), with names, ids and
//!   descriptions for `ferrocoll-info` and tune strings;
//! - [`team`]: the team shape — a TL's team implements [`AlgTeam`] (what it
//!   runs with, its memory types, its default selection, how it makes a
//!   task) and [`TeamOf`] is the engine's `TlTeam` over it;
//! - [`knobs`]: its `UCC_TL_<NAME>_*` settings as a typed table;
//! - [`local`]: a collective among one rank.
//!
//! A new TL adds a folder next to `self_`, `shm` and `p2p` with a
//! `TlComponent`, a context, an `AlgTeam` and a [`Registry`] of its algorithms.

pub(crate) mod knobs;
pub(crate) mod local;
pub(crate) mod registry;
pub(crate) mod team;

pub(crate) use registry::{Alg, AlgFuture, Registry, Run};
pub(crate) use team::{AlgTeam, DefaultAlg, TeamOf, defaults_of};
