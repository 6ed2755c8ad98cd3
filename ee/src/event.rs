//! Events, with UCC's `ucc_ev_type_t` values. They live in `ferrocoll-core`
//! (a triggered post names them); this module keeps their old path.

pub use ferrocoll_core::{EeType, Event, EventType};
