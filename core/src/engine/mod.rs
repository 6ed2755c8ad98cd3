//! The engine: tasks are futures, polled by each context's progress queue
//! with a no-op waker (no runtime, no threads of ours); schedules are async
//! compositions of tasks (`.await` for dependencies, [`try_join_all`] for
//! parallel branches).

mod backoff;
pub mod board;
mod diag;
mod future;
mod join;
mod queue;
pub mod recorder;
mod slot_lock;
mod task;

pub use backoff::{Backoff, FruitlessProgress, SPINS_DEDICATED, SPINS_OVERSUBSCRIBED, YIELD_EVERY_DEDICATED};
pub use board::{BoardWatch, CallBoard, Posted};
pub use diag::TaskDiag;
pub use future::{PostFuture, TaskFuture, downcast_spent};
pub use join::{BoxFuture, TryJoinAll, block_on, try_join_all, try_join2, yield_now};
pub use queue::{Holds, ProgressQueue};
pub use recorder::{FlightRecorder, TeamIdentity};
pub use slot_lock::{SlotGuard, SlotLock};
pub use task::{Call, Polled, SlotPost, TaskDesc, TaskSlot, WatchdogConfig};
