//! POSIX shared memory: the one layer through which ferrocoll creates,
//! opens, maps and removes its segments in `/dev/shm` (the shm transport's
//! per-endpoint segment, the shm TL's team segment) and through which the
//! launcher recognises what a crashed job left.
//!
//! - [`segment_name`]: `/ferrocoll-<job>-<suffix>`, with the job reduced to
//!   `[A-Za-z0-9_-]` and cut and hashed when long; [`SHM_DIR`],
//!   [`NAME_PREFIX`], [`is_segment_file`] and [`segment_path`] let a
//!   launcher find them; users put a [`nonce`] in the suffix (and in their
//!   header), exchanged through the bootstrap, so that no other process can
//!   plant a segment under the name a job will use.
//! - [`Owner`]: every name ends with its creator's tag (pid, start time,
//!   pid namespace), so that [`sweep_stale`] can remove, without opening
//!   them, the segments of processes killed before they unlinked theirs.
//! - [`ShmFile::create`]: exclusive (`O_CREAT | O_EXCL`, mode 0600,
//!   `O_CLOEXEC`), after checking that `/dev/shm` has room for the whole
//!   segment (tmpfs allocates on first touch, and a touch past its capacity
//!   is a SIGBUS, not an error); sized with `ftruncate`. The name comes back
//!   as a [`ShmName`] that unlinks it when dropped, so no error path leaves
//!   a segment behind. A name that exists is replaced or refused as the
//!   caller says ([`IfExists`]).
//! - [`ShmFile::open`]: an existing segment, refused unless this effective
//!   uid owns it and its mode has no group or other bits: a file another
//!   user planted under a job's name is never mapped.
//! - [`Mapping`]: a shared read-write mapping of a range, unmapped on drop,
//!   with bounds- and alignment-checked atomic views ([`Mapping::view`]).
//!
//! Every size and offset here may come from configuration or from another
//! process's header, so all arithmetic on them is checked and an overflow
//! is an error naming the values.
//!
//! Limits: Linux (`/dev/shm`, `statvfs`); segments are never resized.

mod file;
mod mapping;
mod name;
mod nonce;
mod owner;
mod sweep;
#[cfg(test)]
mod tests;

pub use file::{IfExists, ShmFile, ShmName};
pub use mapping::{AtomicView, Mapping, page_size};
pub use name::{NAME_PREFIX, SHM_DIR, is_segment_file, segment_name, segment_path};
pub(crate) use nonce::fill_random;
pub use nonce::nonce;
pub use owner::Owner;
pub use sweep::sweep_stale;
