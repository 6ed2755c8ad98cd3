//! What each rank is told: the environment variables of a job, computed as a
//! pure function of the job's shape, plus the two values drawn at launch (a
//! free port and a secret token).

use std::io::Read;

/// The host identity variable read by ferrocoll's topology code.
pub const HOST_ID_VAR: &str = "FERROCOLL_HOST_ID";

/// The switch group variable read by ferrocoll's topology code.
pub const SWITCH_ID_VAR: &str = "FERROCOLL_SWITCH_ID";

/// The variable that carries the job's secret to the TCP bootstrap.
pub const TOKEN_VAR: &str = "FERROCOLL_JOB_TOKEN";

/// Variables of other launchers that a child must not inherit: a bootstrap
/// that reads them before `RANK` would join the outer job instead of ours.
pub const FOREIGN_RANK_VARS: &[&str] = &[
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "PMI_RANK",
    "PMI_SIZE",
    "PMIX_RANK",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_NPROCS",
    "SLURM_LOCALID",
];

/// Where one rank sits in the job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Global rank.
    pub rank: usize,
    /// Number of ranks.
    pub world_size: usize,
    /// Rank within its (emulated) host.
    pub local_rank: usize,
    /// Ranks on its (emulated) host.
    pub local_world_size: usize,
    /// Emulated host index, when hosts are emulated.
    pub host: Option<usize>,
    /// Emulated switch group index, when switches are emulated.
    pub switch: Option<usize>,
}

/// The emulated host of `rank` when `ranks` ranks are spread over `hosts`
/// hosts in contiguous blocks: `rank · hosts / ranks`.
///
/// Blocks differ in size by at most one rank, and every host gets at least
/// one rank when `hosts <= ranks`.
pub fn host_of(rank: usize, ranks: usize, hosts: usize) -> usize {
    if ranks == 0 {
        return 0;
    }
    // u128: rank · hosts cannot overflow for any usize inputs.
    ((rank as u128 * hosts as u128) / ranks as u128) as usize
}

/// The sizes of `hosts` contiguous blocks of `ranks` ranks as [`host_of`]
/// cuts them (they differ by at most one).
pub fn even_blocks(ranks: usize, hosts: usize) -> Vec<usize> {
    let mut sizes = vec![0; hosts];
    for r in 0..ranks {
        if let Some(s) = sizes.get_mut(host_of(r, ranks, hosts)) {
            *s += 1;
        }
    }
    sizes
}

/// The placement of every rank of a job of `ranks` ranks, on one host
/// (`hosts == None`) or on emulated hosts of `hosts[h]` contiguous ranks
/// each, and these hosts under `switches` emulated switch groups: hosts go
/// to switches in contiguous blocks as [`host_of`] sends ranks to hosts
/// (host h is under switch `h · switches / hosts.len()`).
pub fn placements(ranks: usize, hosts: Option<&[usize]>, switches: Option<usize>) -> Vec<Placement> {
    let host: Vec<Option<usize>> = match hosts {
        None => vec![None; ranks],
        Some(sizes) => {
            let mut v: Vec<Option<usize>> =
                sizes.iter().enumerate().flat_map(|(h, n)| std::iter::repeat_n(Some(h), *n)).collect();
            v.resize(ranks, sizes.len().checked_sub(1));
            v
        }
    };
    let switch_of = |h: Option<usize>| Some(host_of(h?, hosts?.len(), switches?));
    (0..ranks)
        .map(|r| {
            let same = |o: &usize| host[*o] == host[r];
            let local_rank = (0..r).filter(same).count();
            let local_world_size = (0..ranks).filter(same).count();
            let switch = switch_of(host[r]);
            Placement { rank: r, world_size: ranks, local_rank, local_world_size, host: host[r], switch }
        })
        .collect()
}

/// What every rank of one job shares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobEnv {
    /// Rank 0's store address.
    pub master_addr: String,
    /// Rank 0's store port.
    pub master_port: u16,
    /// The job's secret.
    pub token: String,
}

impl JobEnv {
    /// The variables for one rank, in a fixed order.
    pub fn vars(&self, p: &Placement) -> Vec<(String, String)> {
        let mut v = vec![
            ("RANK".to_string(), p.rank.to_string()),
            ("WORLD_SIZE".to_string(), p.world_size.to_string()),
            ("LOCAL_RANK".to_string(), p.local_rank.to_string()),
            ("LOCAL_WORLD_SIZE".to_string(), p.local_world_size.to_string()),
            ("MASTER_ADDR".to_string(), self.master_addr.clone()),
            ("MASTER_PORT".to_string(), self.master_port.to_string()),
            (TOKEN_VAR.to_string(), self.token.clone()),
        ];
        if let Some(h) = p.host {
            v.push((HOST_ID_VAR.to_string(), format!("host{h}")));
        }
        if let Some(g) = p.switch {
            v.push((SWITCH_ID_VAR.to_string(), format!("switch{g}")));
        }
        v
    }
}

/// A TCP port that was free on 127.0.0.1 a moment ago, where no
/// connection takes it meanwhile (`TcpOob::free_port`). A process binding
/// it by number still may; the bootstrap then fails with an error naming
/// the port.
pub fn free_port() -> std::io::Result<u16> {
    ferrocoll_transport::TcpOob::free_port()
}

/// A fresh secret: 16 bytes from `/dev/urandom`, in hex.
pub fn fresh_token() -> std::io::Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn four_ranks_on_two_hosts() {
        let p = placements(4, Some(&even_blocks(4, 2)), None);
        let got: Vec<_> = p.iter().map(|p| (p.host, p.local_rank, p.local_world_size)).collect();
        assert_eq!(got, vec![(Some(0), 0, 2), (Some(0), 1, 2), (Some(1), 0, 2), (Some(1), 1, 2)]);
    }

    #[test]
    fn one_host_is_everyone() {
        let p = placements(3, None, None);
        assert!(p.iter().all(|p| p.host.is_none() && p.local_world_size == 3 && p.local_rank == p.rank));
    }

    #[test]
    fn vars_name_the_host() {
        let job = JobEnv { master_addr: "127.0.0.1".into(), master_port: 29500, token: "ab".into() };
        let v = job.vars(&placements(5, Some(&even_blocks(5, 2)), None)[4]);
        assert!(v.contains(&("FERROCOLL_HOST_ID".into(), "host1".into())));
        assert!(v.contains(&("LOCAL_RANK".into(), "1".into())));
        assert!(v.contains(&("LOCAL_WORLD_SIZE".into(), "2".into())));
    }

    #[test]
    fn hosts_under_switches_in_blocks() {
        // 6 ranks, 3 hosts of 2, 2 switches: hosts 0 and 1 under switch 0, host 2 under switch 1.
        let p = placements(6, Some(&even_blocks(6, 3)), Some(2));
        let got: Vec<_> = p.iter().map(|p| (p.host, p.switch)).collect();
        let want = [(0, 0), (0, 0), (1, 0), (1, 0), (2, 1), (2, 1)];
        assert_eq!(got, want.map(|(h, s)| (Some(h), Some(s))));
        let job = JobEnv { master_addr: "127.0.0.1".into(), master_port: 1, token: "ab".into() };
        assert!(job.vars(&p[5]).contains(&("FERROCOLL_SWITCH_ID".into(), "switch1".into())));
        assert!(placements(2, None, None).iter().all(|p| p.switch.is_none()));
    }

    #[test]
    fn listed_host_sizes() {
        let p = placements(6, Some(&[1, 3, 2]), Some(2));
        let got: Vec<_> =
            p.iter().map(|p| (p.host.unwrap(), p.local_rank, p.local_world_size, p.switch.unwrap())).collect();
        assert_eq!(got, vec![(0, 0, 1, 0), (1, 0, 3, 0), (1, 1, 3, 0), (1, 2, 3, 0), (2, 0, 2, 1), (2, 1, 2, 1)]);
        assert_eq!(even_blocks(5, 2), vec![3, 2]);
    }

    #[test]
    fn tokens_differ() {
        let (a, b) = (fresh_token().unwrap(), fresh_token().unwrap());
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
    }

    proptest! {
        #[test]
        fn blocks_are_contiguous_and_balanced(ranks in 1usize..200, hosts in 1usize..50) {
            let hosts = hosts.min(ranks);
            let p = placements(ranks, Some(&even_blocks(ranks, hosts)), None);
            // contiguous and non-decreasing, every host used
            for w in p.windows(2) {
                let (a, b) = (w[0].host.unwrap(), w[1].host.unwrap());
                prop_assert!(b == a || b == a + 1);
            }
            prop_assert_eq!(p[0].host, Some(0));
            prop_assert_eq!(p[ranks - 1].host, Some(hosts - 1));
            let sizes: Vec<usize> = (0..hosts).map(|h| p.iter().filter(|x| x.host == Some(h)).count()).collect();
            let (lo, hi) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
            prop_assert!(hi - lo <= 1);
            for x in &p {
                prop_assert!(x.local_rank < x.local_world_size);
                prop_assert_eq!(x.local_world_size, sizes[x.host.unwrap()]);
            }
        }
    }
}
