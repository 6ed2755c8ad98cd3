//! The p2p TL's settings (`UCC_TL_P2P_*`), typed and documented.

use ferrocoll_core::config::{Config, ConfigField};
use ferrocoll_core::{Error, Result};

use crate::base::knobs::{self, Knob, Unit};

/// Tuning knobs of the p2p algorithms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct P2pConfig {
    /// Radix of knomial allreduce.
    pub allreduce_kn_radix: usize,
    /// Radix of the reduce-scatter/allgather of sra_knomial allreduce.
    pub allreduce_sra_kn_radix: usize,
    /// Radix of knomial bcast.
    pub bcast_kn_radix: usize,
    /// Radix of the scatter/allgather of sag_knomial bcast.
    pub bcast_sag_kn_radix: usize,
    /// Radix of knomial reduce.
    pub reduce_kn_radix: usize,
    /// Radix of the reduce-scatter of srg_knomial reduce.
    pub reduce_srg_kn_radix: usize,
    /// Radix of knomial barrier.
    pub barrier_kn_radix: usize,
    /// Radix of knomial fanin.
    pub fanin_kn_radix: usize,
    /// Radix of knomial fanout.
    pub fanout_kn_radix: usize,
    /// Radix of knomial allgather.
    pub allgather_kn_radix: usize,
    /// Radix of knomial reduce_scatter.
    pub reduce_scatter_kn_radix: usize,
    /// Radix of knomial gather.
    pub gather_kn_radix: usize,
    /// Radix of knomial scatter.
    pub scatter_kn_radix: usize,
    /// Exchanges kept in flight by pairwise alltoall(v).
    pub alltoall_pairwise_num_posts: usize,
}

/// Largest radix (or window) accepted: far above any team a radix helps.
const MAX_RADIX: usize = 1 << 20;

macro_rules! knob {
    ($name:literal, $default:literal, $min:literal, $field:ident, $doc:literal) => {
        Knob {
            field: ConfigField { name: concat!("UCC_TL_P2P_", $name), default: stringify!($default), doc: $doc },
            unit: Unit::Count,
            min: $min,
            max: MAX_RADIX,
            slot: |c| &mut c.$field,
        }
    };
}

const KNOBS: &[Knob<P2pConfig>] = &[
    knob!("ALLREDUCE_KN_RADIX", 4, 2, allreduce_kn_radix, "Radix of knomial allreduce."),
    knob!("ALLREDUCE_SRA_KN_RADIX", 2, 2, allreduce_sra_kn_radix, "Radix of sra_knomial allreduce (Rabenseifner)."),
    knob!("BCAST_KN_RADIX", 4, 2, bcast_kn_radix, "Radix of knomial bcast."),
    knob!("BCAST_SAG_KN_RADIX", 2, 2, bcast_sag_kn_radix, "Radix of sag_knomial (scatter-allgather) bcast."),
    knob!("REDUCE_KN_RADIX", 4, 2, reduce_kn_radix, "Radix of knomial reduce."),
    knob!("REDUCE_SRG_KN_RADIX", 2, 2, reduce_srg_kn_radix, "Radix of the reduce-scatter of srg_knomial reduce."),
    knob!("BARRIER_KN_RADIX", 4, 2, barrier_kn_radix, "Radix of knomial barrier."),
    knob!("FANIN_KN_RADIX", 4, 2, fanin_kn_radix, "Radix of knomial fanin."),
    knob!("FANOUT_KN_RADIX", 4, 2, fanout_kn_radix, "Radix of knomial fanout."),
    knob!("ALLGATHER_KN_RADIX", 4, 2, allgather_kn_radix, "Radix of knomial allgather."),
    knob!("REDUCE_SCATTER_KN_RADIX", 2, 2, reduce_scatter_kn_radix, "Radix of knomial reduce_scatter."),
    knob!("GATHER_KN_RADIX", 4, 2, gather_kn_radix, "Radix of knomial gather."),
    knob!("SCATTER_KN_RADIX", 4, 2, scatter_kn_radix, "Radix of knomial scatter."),
    knob!(
        "ALLTOALL_PAIRWISE_NUM_POSTS",
        4,
        1,
        alltoall_pairwise_num_posts,
        "Exchanges in flight in pairwise alltoall(v)."
    ),
];

/// `UCC_TL_P2P_KN_RADIX`: when set above 0, the radix of every knomial algorithm.
const KN_RADIX: ConfigField = ConfigField {
    name: "UCC_TL_P2P_KN_RADIX",
    default: "0",
    doc: "When above 0, sets the radix of every knomial algorithm (per-collective variables still win).",
};

/// `UCC_TL_P2P_TUNE` (also read from UCC's `UCC_TL_UCP_TUNE`).
const TUNE: ConfigField = ConfigField {
    name: "UCC_TL_P2P_TUNE",
    default: "",
    doc: "Score-map overrides, e.g. allreduce:0-4k:@knomial#allreduce:4k-inf:@ring (UCC_TL_UCP_TUNE is read when unset).",
};

impl P2pConfig {
    /// Read from a configuration; a bad value is an error naming the variable.
    pub fn from_config(config: &Config) -> Result<P2pConfig> {
        let all: usize = config.parse_or(KN_RADIX.name, 0)?;
        if all == 1 || all > MAX_RADIX {
            return Err(Error::invalid_param(format!("{}={all} is outside 2..={MAX_RADIX}", KN_RADIX.name)));
        }
        let mut c = P2pConfig {
            allreduce_kn_radix: 0,
            allreduce_sra_kn_radix: 0,
            bcast_kn_radix: 0,
            bcast_sag_kn_radix: 0,
            reduce_kn_radix: 0,
            reduce_srg_kn_radix: 0,
            barrier_kn_radix: 0,
            fanin_kn_radix: 0,
            fanout_kn_radix: 0,
            allgather_kn_radix: 0,
            reduce_scatter_kn_radix: 0,
            gather_kn_radix: 0,
            scatter_kn_radix: 0,
            alltoall_pairwise_num_posts: 0,
        };
        let default_of = |k: &Knob<P2pConfig>| (all > 0 && k.field.name.ends_with("_RADIX")).then_some(all);
        knobs::read(config, KNOBS, &mut c, &default_of)?;
        Ok(c)
    }

    /// The variables that change which algorithm runs, or how: every member
    /// of a team must set them alike (the transports' are each rank's own).
    pub fn agreed_fields() -> Vec<&'static str> {
        let mut f = vec![TUNE.name, "UCC_TL_UCP_TUNE", KN_RADIX.name];
        f.extend(knobs::fields(KNOBS).map(|k| k.name));
        f
    }

    /// The variables, for `ferrocoll-info -c`.
    pub fn fields() -> Vec<ConfigField> {
        let mut f = vec![TUNE, KN_RADIX];
        f.extend(knobs::fields(KNOBS));
        f.extend_from_slice(ferrocoll_transport::shm::CONFIG_FIELDS);
        f.extend_from_slice(ferrocoll_transport::tcp::CONFIG_FIELDS);
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        let d = P2pConfig::from_config(&Config::new()).unwrap();
        assert_eq!((d.allreduce_kn_radix, d.allreduce_sra_kn_radix, d.alltoall_pairwise_num_posts), (4, 2, 4));
        let mut c = Config::new();
        c.set("TL_P2P_KN_RADIX", "3").set("TL_P2P_BCAST_KN_RADIX", "8");
        let p = P2pConfig::from_config(&c).unwrap();
        assert_eq!((p.allreduce_kn_radix, p.bcast_kn_radix, p.alltoall_pairwise_num_posts), (3, 8, 4));
        c.set("TL_P2P_REDUCE_KN_RADIX", "1");
        let e = P2pConfig::from_config(&c).unwrap_err().to_string();
        assert!(e.contains("UCC_TL_P2P_REDUCE_KN_RADIX=1"), "{e}");
    }
}
