//! The transport's configuration variables.

use ferrocoll_core::config::{Config, ConfigField, parse_size};
use ferrocoll_core::{Error, Result};

use super::wire::{MAX_RING, MIN_RING};

const EAGER: ConfigField = ConfigField {
    name: "UCC_TL_P2P_SHM_EAGER_SIZE",
    default: "8k",
    doc: "Shared-memory transport: messages up to this size are copied through the receiver's ring; larger \
          ones are read by the receiver straight from the sender's buffer (CMA) or streamed in fragments. \
          At most a quarter of UCC_TL_P2P_SHM_RING_SIZE (when unset, lowered to fit a smaller ring).",
};

const RING: ConfigField = ConfigField {
    name: "UCC_TL_P2P_SHM_RING_SIZE",
    default: "256k",
    doc: "Shared-memory transport: bytes of each receive ring (one per sender and receiver; a power of two \
          from 4k to 1G). Pages are allocated in /dev/shm as they are first used.",
};

const CMA: ConfigField = ConfigField {
    name: "UCC_TL_P2P_SHM_CMA",
    default: "y",
    doc: "Shared-memory transport: copy large messages once with cross-memory attach (process_vm_readv) \
          where the kernel allows it; n streams them through the ring instead.",
};

/// The variables, for `ferrocoll-info -c`.
pub const FIELDS: &[ConfigField] = &[EAGER, RING, CMA];

/// Parsed settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ShmConfig {
    /// Largest eager message.
    pub eager: usize,
    /// Data bytes per ring.
    pub ring: u64,
    /// Whether to use CMA.
    pub cma: bool,
}

fn size_or(config: &Config, f: &ConfigField) -> Result<u64> {
    let v = config.get(f.name).unwrap_or(f.default);
    parse_size(v).map_err(|e| e.prefixed(format!("{}={v:?}", f.name)))
}

impl ShmConfig {
    /// Read the variables, checking their ranges.
    pub fn from_config(config: &Config) -> Result<ShmConfig> {
        let ring = size_or(config, &RING)?;
        if !ring.is_power_of_two() || !(MIN_RING..=MAX_RING).contains(&ring) {
            return Err(Error::invalid_param(format!(
                "{}={ring} is not a power of two between {MIN_RING} and {MAX_RING}",
                RING.name
            )));
        }
        // Unset, the eager limit follows a small ring down; set, it must fit.
        let eager = match config.get(EAGER.name) {
            None => size_or(config, &EAGER)?.min(ring / 4),
            Some(_) => size_or(config, &EAGER)?,
        };
        if eager > ring / 4 {
            return Err(Error::invalid_param(format!(
                "{}={eager} exceeds a quarter of {}={ring}",
                EAGER.name, RING.name
            )));
        }
        let cma = config.bool_or(CMA.name, true)?;
        Ok(ShmConfig { eager: eager as usize, ring, cma })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config_with(pairs: &[(&str, &str)]) -> Config {
        let mut c = Config::new();
        pairs.iter().for_each(|(k, v)| {
            c.set(k, *v);
        });
        c
    }

    #[test]
    fn defaults_and_errors_name_the_variable() {
        let d = ShmConfig::from_config(&Config::new()).unwrap();
        assert_eq!(d, ShmConfig { eager: 8192, ring: 256 * 1024, cma: true });
        let mut c = Config::new();
        c.set("TL_P2P_SHM_RING_SIZE", "64k").set("TL_P2P_SHM_CMA", "n").set("TL_P2P_SHM_EAGER_SIZE", "1024");
        assert_eq!(ShmConfig::from_config(&c).unwrap(), ShmConfig { eager: 1024, ring: 65536, cma: false });
        c.set("TL_P2P_SHM_RING_SIZE", "3000");
        let small_ring = config_with(&[("TL_P2P_SHM_RING_SIZE", "16k")]);
        assert_eq!(ShmConfig::from_config(&small_ring).unwrap().eager, 4096, "the default follows the ring");
        let e = ShmConfig::from_config(&c).unwrap_err().to_string();
        assert!(e.contains("UCC_TL_P2P_SHM_RING_SIZE=3000"), "{e}");
        c.set("TL_P2P_SHM_RING_SIZE", "4k").set("TL_P2P_SHM_EAGER_SIZE", "2k");
        let e = ShmConfig::from_config(&c).unwrap_err().to_string();
        assert!(e.contains("UCC_TL_P2P_SHM_EAGER_SIZE=2048"), "{e}");
        c.set("TL_P2P_SHM_EAGER_SIZE", "lots");
        let e = ShmConfig::from_config(&c).unwrap_err().to_string();
        assert!(e.contains("UCC_TL_P2P_SHM_EAGER_SIZE=\"lots\""), "{e}");
        c.set("TL_P2P_SHM_EAGER_SIZE", "1k").set("TL_P2P_SHM_CMA", "maybe");
        let e = ShmConfig::from_config(&c).unwrap_err().to_string();
        assert!(e.contains("UCC_TL_P2P_SHM_CMA"), "{e}");
    }
}
