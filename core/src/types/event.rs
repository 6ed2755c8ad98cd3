//! Execution-engine vocabulary: engine types and events, with UCC's names
//! and values (`ucc_ee_type_t`, `ucc_ev_type_t`, `ucc_ev_t`).

use std::fmt;

/// The kind of an execution engine (`ucc_ee_type_t`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EeType {
    /// A CUDA stream (`UCC_EE_CUDA_STREAM`).
    CudaStream = 0,
    /// A CPU thread (`UCC_EE_CPU_THREAD`).
    CpuThread = 1,
    /// A ROCm stream (`UCC_EE_ROCM_STREAM`); named for UCC's sake, not implemented.
    RocmStream = 2,
}

impl fmt::Display for EeType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EeType::CudaStream => "cuda_stream",
            EeType::CpuThread => "cpu_thread",
            EeType::RocmStream => "rocm_stream",
        })
    }
}

/// What an event announces (`ucc_ev_type_t`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    /// A collective was posted: its trigger fired and it started (`UCC_EVENT_COLLECTIVE_POST`).
    CollectivePost = 1,
    /// A collective ended, successfully or not (`UCC_EVENT_COLLECTIVE_COMPLETE`).
    CollectiveComplete = 2,
    /// The user's computation finished; collectives waiting on it may start (`UCC_EVENT_COMPUTE_COMPLETE`).
    ComputeComplete = 4,
    /// The engine's queue overflowed; events were lost (`UCC_EVENT_OVERFLOW`).
    Overflow = 8,
}

impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EventType::CollectivePost => "CollectivePost",
            EventType::CollectiveComplete => "CollectiveComplete",
            EventType::ComputeComplete => "ComputeComplete",
            EventType::Overflow => "Overflow",
        })
    }
}

/// An event (`ucc_ev_t`): its type and the request it concerns.
///
/// Events that ferrocoll produces (`CollectivePost`, `CollectiveComplete`)
/// carry the [`Request::id`](crate::Request::id) of their collective. In an
/// event the user sets, `request` is a tag of the user's choice that a
/// triggered post may select on (0: no tag).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Event {
    /// Type.
    pub ev_type: EventType,
    /// Request the event is about, or the user's tag (0: none).
    pub request: u64,
}

impl Event {
    /// An event of type `ev_type` with no request or tag.
    pub const fn new(ev_type: EventType) -> Event {
        Event { ev_type, request: 0 }
    }

    /// An event of type `ev_type` about request (or tag) `request`.
    pub const fn with_request(ev_type: EventType, request: u64) -> Event {
        Event { ev_type, request }
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.request {
            0 => write!(f, "{}", self.ev_type),
            r => write!(f, "{} (request {r})", self.ev_type),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_ucc_s() {
        assert_eq!(EeType::CudaStream as u32, 0);
        assert_eq!(EeType::CpuThread as u32, 1);
        assert_eq!(EventType::CollectivePost as u32, 1);
        assert_eq!(EventType::CollectiveComplete as u32, 2);
        assert_eq!(EventType::ComputeComplete as u32, 4);
        assert_eq!(EventType::Overflow as u32, 8);
    }

    #[test]
    fn display_names_the_request() {
        assert_eq!(Event::new(EventType::ComputeComplete).to_string(), "ComputeComplete");
        assert_eq!(Event::with_request(EventType::CollectivePost, 9).to_string(), "CollectivePost (request 9)");
    }
}
