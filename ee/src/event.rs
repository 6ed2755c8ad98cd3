//! Events, with UCC's `ucc_ev_type_t` values.

/// What an event announces (`ucc_ev_type_t`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    /// A collective was posted (`UCC_EVENT_COLLECTIVE_POST`).
    CollectivePost = 1,
    /// A collective completed (`UCC_EVENT_COLLECTIVE_COMPLETE`).
    CollectiveComplete = 2,
    /// The user's computation finished; collectives waiting on it may start (`UCC_EVENT_COMPUTE_COMPLETE`).
    ComputeComplete = 4,
    /// The engine's queue overflowed (`UCC_EVENT_OVERFLOW`).
    Overflow = 8,
}

/// An event: its type and the identity of the request it concerns (0: none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// Type.
    pub ev_type: EventType,
    /// Request the event is about (an opaque id chosen by the poster).
    pub request: u64,
}
