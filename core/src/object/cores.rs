//! How many cores this process's ranks may count on: whether a host has a
//! core per rank decides how waiting ranks spin or yield.

/// The cores the ranks of this host may use: the CPUs this process may run
/// on (affinity, cgroup quota), unless its affinity is a single CPU on a
/// host with more online. A process bound to one CPU was, in practice,
/// bound by its launcher (`ferrocoll-run --bind-to core`, `mpirun --bind-to
/// core`) to a core of its own, one per rank; counting its one CPU would
/// call every job of two ranks or more oversubscribed and make its ranks
/// yield on every wait. A cgroup quota of one CPU (affinity wider) still
/// counts as one. A job squeezed onto one CPU by hand sets `UCC_SPIN_COUNT`.
pub(crate) fn usable_cores() -> usize {
    let allowed = std::thread::available_parallelism().map_or(1, |n| n.get());
    if allowed == 1 && affinity_cpus() == Some(1) { online_cpus().unwrap_or(1) } else { allowed }
}

/// The CPUs of this process's affinity, from `Cpus_allowed_list` in `/proc/self/status`.
fn affinity_cpus() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_cpu_list(status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?.trim())
}

/// The host's online CPUs, from `/sys/devices/system/cpu/online` ("0-3,8-11").
fn online_cpus() -> Option<usize> {
    parse_cpu_list(std::fs::read_to_string("/sys/devices/system/cpu/online").ok()?.trim())
}

/// The number of CPUs in a kernel CPU list ("0-3,8,10-11" → 7); `None` if malformed.
pub(crate) fn parse_cpu_list(list: &str) -> Option<usize> {
    list.split(',').try_fold(0usize, |n, part| {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (usize, usize) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
        n.checked_add(b.checked_sub(a)?.checked_add(1)?)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-1"), Some(2));
        assert_eq!(parse_cpu_list("0"), Some(1));
        assert_eq!(parse_cpu_list("0-3,8,10-11"), Some(7));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
        assert_eq!(parse_cpu_list(""), None);
        assert!(usable_cores() >= 1);
        assert!(affinity_cpus().is_none_or(|n| n >= 1));
    }
}
