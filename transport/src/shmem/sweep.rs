//! Removing what dead processes left in `/dev/shm`.
//!
//! A segment is unlinked as soon as every rank has mapped it, so only a
//! process killed during setup leaves one behind — and, outside
//! `ferrocoll-run` (which removes a failed job's segments), nothing else
//! would remove it. Every ferrocoll process therefore sweeps when it sets
//! up shared memory and when it tears it down: it removes the segments of
//! this user whose creator (named at the end of the name, see [`Owner`])
//! no longer runs.

use std::os::unix::fs::MetadataExt;

use super::name::{SHM_DIR, is_segment_file};
use super::owner::Owner;

/// Remove the segments in `/dev/shm` that this user owns and whose creator
/// no longer runs (in this pid namespace); returns their names. Best
/// effort: what cannot be read or removed is left alone.
pub fn sweep_stale() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(SHM_DIR) else { return Vec::new() };
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let mut removed = Vec::new();
    for entry in dir.flatten() {
        let Some(name) = entry.file_name().to_str().map(str::to_string) else { continue };
        if !is_segment_file(&name) {
            continue;
        }
        let Some(owner) = Owner::of_name(&name) else { continue };
        let Ok(meta) = entry.path().symlink_metadata() else { continue };
        if !meta.file_type().is_file() || meta.uid() != me || owner.gone() != Some(true) {
            continue;
        }
        // Gone already is fine: another process swept it first.
        match std::fs::remove_file(entry.path()) {
            Ok(()) => {
                ferrocoll_core::log_info!(
                    "removed {SHM_DIR}/{name}: a shared-memory segment left by process {}, which no longer runs",
                    owner.pid
                );
                removed.push(name);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => ferrocoll_core::log_debug!("could not remove stale {SHM_DIR}/{name}: {e}"),
        }
    }
    removed
}
