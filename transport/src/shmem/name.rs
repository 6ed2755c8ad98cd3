//! Segment names, and recognising them: what the creators of segments and
//! the launcher that removes a crashed job's leftovers must agree on.

#![forbid(unsafe_code)]

use std::path::PathBuf;

use ferrocoll_core::hash::fnv1a;

/// Where POSIX shared memory lives on Linux: `shm_open("/x")` is `/dev/shm/x`.
pub const SHM_DIR: &str = "/dev/shm";

/// The start of every ferrocoll segment's file name (its `shm_open` name
/// without the leading `/`).
pub const NAME_PREFIX: &str = "ferrocoll-";

/// Longest job part of a segment name.
const MAX_JOB: usize = 64;

/// `[A-Za-z0-9-]` kept, anything else `_`: names stay one path component
/// without spaces (which is how [`segment_path`] tells an unlinked one).
fn clean(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect()
}

/// `/ferrocoll-<job>-<suffix>`, with `job` (and `suffix`) reduced to
/// `[A-Za-z0-9_-]` and, when the job is longer than 64 characters, cut and
/// suffixed with a hash of the whole, so that distinct long jobs keep
/// distinct names. The job id stays whole in the name when it is short (a
/// launcher finds a job's segments by it).
///
/// ```
/// use ferrocoll_transport::shmem::segment_name;
///
/// assert_eq!(segment_name("0123abcd", "3"), "/ferrocoll-0123abcd-3");
/// assert_eq!(segment_name("a/b c", "s1f"), "/ferrocoll-a_b_c-s1f");
/// ```
pub fn segment_name(job: &str, suffix: &str) -> String {
    let cleaned = clean(job);
    let job = if cleaned.len() <= MAX_JOB {
        cleaned
    } else {
        // `cleaned` is ASCII, so any byte index is a character boundary.
        format!("{}-{:016x}", &cleaned[..MAX_JOB - 17], fnv1a(&[job.as_bytes()]))
    };
    format!("/{NAME_PREFIX}{job}-{}", clean(suffix))
}

/// Whether `file_name`, an entry of [`SHM_DIR`], is a ferrocoll segment.
pub fn is_segment_file(file_name: &str) -> bool {
    file_name.starts_with(NAME_PREFIX) && !file_name.contains('/')
}

/// `path` as `/proc/<pid>/fd` links and `/proc/<pid>/maps` show it, if it
/// is a ferrocoll segment that is still linked (the kernel appends
/// ` (deleted)` to unlinked ones; segment names hold no spaces).
pub fn segment_path(path: &str) -> Option<PathBuf> {
    let name = path.strip_prefix(SHM_DIR)?.strip_prefix('/')?;
    (is_segment_file(name) && !path.ends_with(" (deleted)")).then(|| PathBuf::from(path))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn names_keep_their_shapes() {
        // The shm transport's and the shm TL's names, as the launcher looks for them.
        assert_eq!(segment_name("t1a-2", "3"), "/ferrocoll-t1a-2-3");
        assert_eq!(segment_name("0123456789abcdef", "s2a"), "/ferrocoll-0123456789abcdef-s2a");
        assert_eq!(segment_name("a/b c", "0"), "/ferrocoll-a_b_c-0");
        let long = "x".repeat(300);
        let n = segment_name(&long, "12");
        assert!(n.len() < 90, "{n}");
        assert_ne!(n, segment_name(&format!("{long}y"), "12"));
    }

    #[test]
    fn recognises_segment_paths() {
        assert!(segment_path("/dev/shm/ferrocoll-abc-1").is_some());
        assert!(segment_path("/dev/shm/ferrocoll-abc-1 (deleted)").is_none());
        assert!(segment_path("/dev/shm/other").is_none());
        assert!(segment_path("/dev/shm/sub/ferrocoll-x").is_none());
        assert!(segment_path("/tmp/ferrocoll-x").is_none());
        assert!(is_segment_file("ferrocoll-j-s1") && !is_segment_file("ferrocoll"));
    }

    proptest! {
        #[test]
        fn any_job_gives_one_recognised_component(job in ".{0,200}", ep in 0usize..1 << 20) {
            let name = segment_name(&job, &ep.to_string());
            prop_assert!(name.len() <= 1 + NAME_PREFIX.len() + MAX_JOB + 1 + 7, "{}", name);
            prop_assert!(name[1..].chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'), "{}", name);
            let full = format!("{SHM_DIR}{name}");
            let tail = format!("-{ep}");
            prop_assert!(segment_path(&full).is_some(), "{}", full);
            prop_assert!(name.ends_with(&tail), "{}", name);
        }
    }
}
