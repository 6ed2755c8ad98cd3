//! Binding ranks to cores (`--bind-to none|core|numa`), as `mpirun
//! --bind-to` does: a rank that stays on one core keeps its caches and is
//! not moved under a peer that spins waiting for it.
//!
//! The launcher computes each rank's CPU set from its own (the CPUs it may
//! use: `taskset` and cgroups are respected) before starting anyone, and the
//! child applies it with `sched_setaffinity` between fork and exec, so the
//! program starts bound. The default binds to cores when every rank gets
//! one, and binds nothing when ranks outnumber cores (then the scheduler
//! must be free to move them).

use std::fmt;

/// The variable that tells each rank its binding: `core:3`, `numa:0-7` or `none`.
pub const BIND_VAR: &str = "FERROCOLL_BIND";

/// What `--bind-to` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindTo {
    /// No binding: each rank may run on every CPU the launcher may.
    None,
    /// Rank i on the i-th CPU the launcher may use.
    Core,
    /// Rank i on the CPUs of NUMA node i mod (number of nodes).
    Numa,
}

impl BindTo {
    /// Parse `none`, `core` or `numa`.
    pub fn parse(v: &str) -> Result<BindTo, String> {
        match v.trim().to_ascii_lowercase().as_str() {
            "none" => Ok(BindTo::None),
            "core" | "cores" => Ok(BindTo::Core),
            "numa" => Ok(BindTo::Numa),
            _ => Err(format!("--bind-to {v:?}: expected none, core or numa")),
        }
    }
}

impl fmt::Display for BindTo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BindTo::None => "none",
            BindTo::Core => "core",
            BindTo::Numa => "numa",
        })
    }
}

/// A set of CPUs, as the kernel takes it.
#[derive(Clone, Copy)]
pub struct CpuSet(pub libc::cpu_set_t);

impl CpuSet {
    fn empty() -> CpuSet {
        // SAFETY: cpu_set_t is a plain bit array; all zeros is the empty set.
        CpuSet(unsafe { std::mem::zeroed() })
    }

    /// A set of the given CPUs (those past the set's capacity are left out).
    pub fn of(cpus: &[usize]) -> CpuSet {
        let mut s = CpuSet::empty();
        for &c in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
            // SAFETY: c is below CPU_SETSIZE, the set's capacity in bits.
            unsafe { libc::CPU_SET(c, &mut s.0) };
        }
        s
    }

    /// The CPUs in the set, ascending.
    pub fn cpus(&self) -> Vec<usize> {
        // SAFETY: every index is below CPU_SETSIZE, the set's capacity in bits.
        (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &self.0) }).collect()
    }

    /// The CPUs this process may run on.
    pub fn of_this_process() -> std::io::Result<CpuSet> {
        let mut s = CpuSet::empty();
        // SAFETY: the size passed is the size of the set written to.
        let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut s.0) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(s)
    }

    /// Bind the calling process to this set. Async-signal-safe (one system
    /// call), so it may run between fork and exec.
    pub fn apply(&self) -> std::io::Result<()> {
        // SAFETY: the size passed is the size of the set read.
        let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &self.0) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}

/// "0-3,8" for CPUs [0, 1, 2, 3, 8].
pub fn cpu_list(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if i == j { cpus[i].to_string() } else { format!("{}-{}", cpus[i], cpus[j]) });
        i = j + 1;
    }
    out.join(",")
}

/// Parse a kernel CPU list ("0-3,8"); `None` if malformed.
fn parse_cpu_list(s: &str) -> Option<Vec<usize>> {
    let mut v = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (usize, usize) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
        if b < a || b >= libc::CPU_SETSIZE as usize {
            return None;
        }
        v.extend(a..=b);
    }
    Some(v)
}

/// The CPUs of each NUMA node of this host (empty if the host says nothing).
fn numa_nodes() -> Vec<Vec<usize>> {
    let mut nodes = Vec::new();
    for n in 0.. {
        let path = format!("/sys/devices/system/node/node{n}/cpulist");
        match std::fs::read_to_string(path).ok().and_then(|s| parse_cpu_list(&s)) {
            Some(cpus) => nodes.push(cpus),
            None => break,
        }
    }
    nodes
}

/// The binding chosen, and each rank's CPUs (`None`: not bound).
pub type Plan = (BindTo, Vec<Option<Vec<usize>>>);

/// The binding of every rank: `None` for no binding. `allowed` are the
/// launcher's CPUs, `nodes` the host's NUMA nodes; `asked` is `--bind-to`
/// (`None`: core when ranks ≤ allowed CPUs, else none).
pub fn plan(asked: Option<BindTo>, ranks: usize, allowed: &[usize], nodes: &[Vec<usize>]) -> Result<Plan, String> {
    let bind = asked.unwrap_or(if ranks <= allowed.len() { BindTo::Core } else { BindTo::None });
    let sets = match bind {
        BindTo::None => vec![None; ranks],
        BindTo::Core => {
            if ranks > allowed.len() {
                return Err(format!(
                    "--bind-to core: {ranks} ranks but {} CPUs to bind them to ({}); use --bind-to none",
                    allowed.len(),
                    cpu_list(allowed)
                ));
            }
            allowed.iter().take(ranks).map(|&c| Some(vec![c])).collect()
        }
        BindTo::Numa => {
            // Each node's CPUs that the launcher may use; nodes with none are skipped.
            let usable: Vec<Vec<usize>> = nodes
                .iter()
                .map(|n| n.iter().copied().filter(|c| allowed.contains(c)).collect::<Vec<_>>())
                .filter(|n| !n.is_empty())
                .collect();
            if usable.is_empty() {
                return Err("--bind-to numa: this host lists no NUMA node with a CPU this launcher may use".into());
            }
            (0..ranks).map(|r| Some(usable[r % usable.len()].clone())).collect()
        }
    };
    Ok((bind, sets))
}

/// [`plan`] on this host.
pub fn plan_here(asked: Option<BindTo>, ranks: usize) -> Result<Plan, String> {
    let allowed = CpuSet::of_this_process().map_err(|e| format!("reading the launcher's CPU affinity: {e}"))?.cpus();
    plan(asked, ranks, &allowed, &numa_nodes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_binds_to_cores_only_when_each_rank_gets_one() {
        let (b, sets) = plan(None, 2, &[0, 1, 2], &[]).unwrap();
        assert_eq!(b, BindTo::Core);
        assert_eq!(sets, vec![Some(vec![0]), Some(vec![1])]);
        let (b, sets) = plan(None, 4, &[0, 1], &[]).unwrap();
        assert_eq!(b, BindTo::None);
        assert_eq!(sets, vec![None; 4]);
    }

    #[test]
    fn core_follows_the_allowed_cpus_and_refuses_too_many_ranks() {
        let (_, sets) = plan(Some(BindTo::Core), 2, &[4, 6, 7], &[]).unwrap();
        assert_eq!(sets, vec![Some(vec![4]), Some(vec![6])]);
        let e = plan(Some(BindTo::Core), 3, &[0, 1], &[]).unwrap_err();
        assert!(e.contains("3 ranks but 2 CPUs") && e.contains("0-1"), "{e}");
    }

    #[test]
    fn numa_cycles_over_nodes_with_allowed_cpus() {
        let nodes = vec![vec![0, 1], vec![2, 3], vec![4, 5]];
        let (_, sets) = plan(Some(BindTo::Numa), 3, &[0, 1, 4], &nodes).unwrap();
        assert_eq!(sets, vec![Some(vec![0, 1]), Some(vec![4]), Some(vec![0, 1])]);
        assert!(plan(Some(BindTo::Numa), 1, &[0], &[]).is_err());
    }

    #[test]
    fn parsing_and_lists() {
        assert_eq!(BindTo::parse("CORE"), Ok(BindTo::Core));
        assert!(BindTo::parse("socket").unwrap_err().contains("socket"));
        assert_eq!(cpu_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(parse_cpu_list("0-3,8\n"), Some(vec![0, 1, 2, 3, 8]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(CpuSet::of(&[1, 5]).cpus(), vec![1, 5]);
    }
}
