//! The objects of UCC's model: library, context, team, request.

mod agreement;
mod context;
mod cores;
mod endpoint;
mod library;
mod plan_cache;
mod request;
mod selection;
mod settings;
mod spare_team;
mod team;

pub use context::{Context, ContextParams, ContextType};
pub use library::{Components, Lib, LibParams, ThreadMode};
pub use request::Request;
pub use team::{EpMap, Team, TeamParams};
