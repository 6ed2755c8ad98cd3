//! Algorithm selection: score maps and UCC's tune strings.

mod map;
mod range;
mod tune;

pub use map::{AlgId, Candidate, ScoreEntry, ScoreMap, TuneTarget, apply_tune};
pub use range::{MsgRange, Score};
pub use tune::{AlgSpec, TuneToken, parse_tune};
