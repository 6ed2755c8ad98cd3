//! Backend traits implemented by the component crates (`mc`, `tl`, `ee`):
//! core knows these traits, never the components themselves.

mod mc;
mod tl;

pub use mc::{Mc, McSet, ReduceSpec, Scratch, ScratchOwner};
pub use tl::{
    AlgInfo, CollTask, PostInfo, TlComponent, TlContext, TlContextParams, TlPeer, TlTeam, TlTeamFuture, TlTeamParams,
};
