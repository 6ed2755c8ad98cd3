//! Backend traits implemented by the component crates (`mc`, `tl`, `ee`):
//! core knows these traits, never the components themselves.

mod ee;
mod mc;
mod posted_via;
mod tl;

pub(crate) use ee::{Armed, StartFn, triggered_task};
pub use ee::{Ee, EeTrigger, EngineCopies};
pub use mc::{
    CopyInFlight, Mc, McSet, PAIR_BYTES, PairKernel, PendingCopy, PreparedReduce, ReduceKernel, ReduceSpec, Scratch,
    ScratchOwner,
};
pub use posted_via::{NO_TL, PostedVia};
pub use tl::{
    ACTIVE_SET_SEQ, AlgInfo, CollTask, PostInfo, TlComponent, TlContext, TlContextParams, TlPeer, TlTeam, TlTeamFuture,
    TlTeamParams,
};
