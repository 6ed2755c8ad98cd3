//! The size of the CPU's last-level cache, read once at run time, and what
//! the shm algorithms do with it: decide when a copy out of the segment
//! into a user buffer should bypass the cache (`Mc::copy_streaming`).
//!
//! Linux describes every cache of a CPU under
//! `/sys/devices/system/cpu/cpu0/cache/index*/` (`level`, `type`, `size`);
//! the last level is the data or unified cache of the highest level. Where
//! that is not readable the answer is [`UNKNOWN_LLC`], a small server's L3,
//! so that only buffers far larger than any cache stream.

use std::path::Path;
use std::sync::OnceLock;

use ferrocoll_core::{Error, MemRef, Result};

use super::team::ShmTeam;

/// Bytes assumed when the cache sizes cannot be read.
pub(crate) const UNKNOWN_LLC: usize = 32 << 20;

/// Bytes of the last-level cache of CPU 0 (read once per process).
pub(crate) fn last_level_cache() -> usize {
    static LLC: OnceLock<usize> = OnceLock::new();
    *LLC.get_or_init(|| read_llc(Path::new("/sys/devices/system/cpu/cpu0/cache")).unwrap_or(UNKNOWN_LLC))
}

/// The most `UCC_TL_SHM_STREAM_THRESHOLD` defaults to, whatever sysfs
/// says: a virtual machine's sysfs may give its host socket's whole L3
/// (480 MiB on a 2-core AMD EPYC VM, of which a core's complex has 32; 260
/// MiB on a 2-core Intel Xeon VM), and then destinations were never
/// streamed. On both, `ferrocoll-tune` found bcast 64 MiB streamed ~20 %
/// faster (AMD 5.1 against 6.6 ms, Intel 9.0 against 11.2) and allgather's
/// 64 MiB destinations even, and below 64 MiB the two machines disagree
/// within their noise (BENCHMARKS.md, twelfth and thirteenth rounds).
pub(crate) const STREAM_DEFAULT_MAX: usize = 64 << 20;

/// `UCC_TL_SHM_STREAM_THRESHOLD`'s default: the last-level cache, at most
/// [`STREAM_DEFAULT_MAX`].
pub(crate) fn default_stream_threshold() -> usize {
    last_level_cache().min(STREAM_DEFAULT_MAX)
}

/// Copy `src` into `dst`, a piece of a destination buffer of `whole` bytes
/// (all the pieces the collective writes into it): past the cache from the
/// team's `stream_threshold` up (`UCC_TL_SHM_STREAM_THRESHOLD`, by default
/// [`default_stream_threshold`]), else as `ShmTeam::copy` does.
///
/// From the size of the last-level cache up, the destination cannot stay in
/// cache anyway; streaming stores leave the cache to the segment's halves
/// and the source. Measured on a 2-core AMD EPYC VM (BENCHMARKS.md "Large
/// messages"): bcast 32 and 64 MiB 10-20 % faster, allgather 32 and 64 MiB
/// destinations about 11 % faster, and below the cache size slower (the
/// destination would have stayed in cache for the next iteration).
/// Allreduce and alltoall measured slower with streaming at every size and
/// do not use it.
pub(crate) fn copy_out(team: &ShmTeam, dst: MemRef, src: MemRef, whole: usize) -> Result<()> {
    if whole < team.config.stream_threshold {
        return team.copy(dst, src);
    }
    if dst.len() != src.len() {
        return Err(Error::internal(format!("shm copy of {} bytes into {}", src.len(), dst.len())));
    }
    if dst.is_empty() || dst == src {
        return Ok(());
    }
    team.host()?.copy_streaming(dst, src)
}

/// The largest data or unified cache of `dir` (`index*/{level,type,size}`).
fn read_llc(dir: &Path) -> Option<usize> {
    let mut best: Option<(u32, usize)> = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let read = |f: &str| std::fs::read_to_string(entry.path().join(f)).ok();
        let (Some(level), Some(kind), Some(size)) = (read("level"), read("type"), read("size")) else { continue };
        if kind.trim() == "Instruction" {
            continue;
        }
        let (Ok(level), Some(size)) = (level.trim().parse::<u32>(), parse_size(size.trim())) else { continue };
        if best.is_none_or(|(l, _)| level > l) {
            best = Some((level, size));
        }
    }
    best.map(|(_, size)| size).filter(|&s| s > 0)
}

/// `"32768K"`, `"1M"`, `"512"` as sysfs writes cache sizes; checked arithmetic.
fn parse_size(s: &str) -> Option<usize> {
    let (digits, shift) = match s.as_bytes().last()? {
        b'K' | b'k' => (&s[..s.len() - 1], 10),
        b'M' | b'm' => (&s[..s.len() - 1], 20),
        b'G' | b'g' => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    digits.parse::<usize>().ok()?.checked_mul(1 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_as_sysfs_writes_them() {
        assert_eq!(parse_size("32768K"), Some(32 << 20));
        assert_eq!(parse_size("1M"), Some(1 << 20));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("K"), None);
        assert_eq!(parse_size("x"), None);
        assert_eq!(parse_size("99999999999999999999K"), None);
        assert_eq!(parse_size(&format!("{}G", usize::MAX)), None);
    }

    #[test]
    fn the_last_level_is_the_highest_data_or_unified_cache() {
        let dir = std::env::temp_dir().join(format!("ferrocoll-cache-test-{}", std::process::id()));
        let caches = [
            ("index0", "1", "Data", "48K"),
            ("index1", "1", "Instruction", "32K"),
            ("index2", "2", "Unified", "1024K"),
            ("index3", "3", "Unified", "32768K"),
        ];
        for (name, level, kind, size) in caches {
            let d = dir.join(name);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("level"), format!("{level}\n")).unwrap();
            std::fs::write(d.join("type"), format!("{kind}\n")).unwrap();
            std::fs::write(d.join("size"), format!("{size}\n")).unwrap();
        }
        assert_eq!(read_llc(&dir), Some(32 << 20));
        std::fs::remove_dir_all(dir.join("index3")).unwrap();
        assert_eq!(read_llc(&dir), Some(1 << 20));
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(read_llc(&dir), None, "no directory");
        assert!(last_level_cache() > 0);
        assert!(default_stream_threshold() <= STREAM_DEFAULT_MAX && default_stream_threshold() > 0);
    }
}
