//! # ferrocoll-core
//!
//! The vocabulary and the engine of ferrocoll, a collective-communication
//! library modelled on UCC: the same objects ([`Lib`], [`Context`], [`Team`],
//! [`Request`]), the same collective semantics ([`args`]) and the same tuning
//! knobs (`UCC_*` variables, [`score`] maps and tune strings).
//!
//! Core knows no transport and no memory: those are components behind the
//! [`backend`] traits, supplied by the facade crate `ferrocoll`.
//!
//! A collective's life: [`CollArgs`] (or the typed [`Coll`]) are validated
//! into a [`CollInit`]; the team's score map picks a TL and algorithm; the TL
//! returns a task whose future the context's [`engine::ProgressQueue`] polls
//! on every [`Context::progress`].

#![deny(unsafe_op_in_unsafe_fn)]

pub mod args;
pub mod backend;
pub mod buffer;
mod coll;
pub mod config;
pub mod config_file;
mod element;
pub mod engine;
pub mod error;
pub mod hash;
pub mod host_copy;
pub mod json;
pub mod log;
pub mod object;
pub mod oob;
pub mod score;
pub mod topo;
pub mod types;
pub mod wire;

pub use args::{ActiveSet, BufferInfo, BufferInfoV, CollArgs, CollBuffer, CollFlags, CollInit};
pub use backend::{Ee, EeTrigger};
pub use buffer::MemRef;
pub use coll::{Coll, CountInt};
pub use config::Config;
pub use element::{Complex32, Complex64, Element, Float8E4M3, Float8E5M2, LocValue, ValueIndex};
pub use error::{Error, Result, Status};
pub use object::{
    Components, Context, ContextParams, ContextType, EpMap, Lib, LibParams, Request, Team, TeamParams, ThreadMode,
};
pub use oob::{Oob, OobRequest, ThreadOob};
pub use topo::ProcInfo;
pub use types::{CollType, CollTypeSet, DataType, EeType, Event, EventType, HOST_FLOAT128, MemType, ReduceOp};
