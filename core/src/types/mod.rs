//! The vocabulary shared by every crate: datatypes, reduction operations,
//! memory types and collective types, with UCC's names and values.

mod coll_type;
mod datatype;
mod event;
mod mem_type;
mod reduce_op;

pub use coll_type::{CollType, CollTypeSet};
pub use datatype::DataType;
pub use event::{EeType, Event, EventType};
pub use mem_type::MemType;
pub use reduce_op::{HOST_FLOAT128, ReduceOp};
