//! Pure pattern math of the point-to-point algorithms: who talks to whom at
//! each step. No I/O here, so every pattern is tested exhaustively or by property.

pub(crate) mod hier;
mod knomial;
mod ring;
pub(crate) mod subtree;

pub use knomial::{KnomialExchange, KnomialTree, Role, knomial_tree};
pub use ring::Ring;
