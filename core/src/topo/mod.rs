//! Where every endpoint runs: its host, its switch group and, within the
//! host, its NUMA node — learned once per process (`detect.rs`), exchanged
//! with the context's addresses (`proc.rs`), and turned into the subgroups
//! of a team (`subgroups.rs`) that hierarchical algorithms build on.
//!
//! A **switch group** is the set of hosts under one leaf switch: traffic
//! between two of its hosts crosses one switch, traffic between groups
//! crosses the fabric above. Sources of an endpoint's group, first match
//! wins:
//!
//! 1. `FERROCOLL_SWITCH_ID` — an explicit name (what `ferrocoll-run
//!    --emulate-switches` sets). It comes first because it is the override:
//!    a launcher that emulates switches inside a Slurm job must not be
//!    outvoted by the allocation's real topology.
//! 2. `FERROCOLL_TOPO_FILE` — a Slurm `topology.conf` (the subset read is
//!    documented in `slurm.rs`); the group is the leaf switch that lists
//!    this node.
//! 3. `SLURM_TOPOLOGY_ADDR` — Slurm's dotted path `s0.s1.node01`; the
//!    second-to-last component is the leaf switch.
//! 4. Otherwise every endpoint is in one group (the empty name).
//!
//! The node name looked up in a topology file is `SLURMD_NODENAME`, else
//! `FERROCOLL_HOST_ID`, else the short host name.

mod detect;
mod proc;
mod slurm;
pub mod subgroups;

pub use detect::{Env, detect_with};
pub use proc::{NAME_MAX, ProcInfo, WIRE_VERSION};
pub use slurm::{TopologyFile, expand_hostlist, leaf_of_addr};
pub use subgroups::{Layout, Subgroups};

/// The environment variable that overrides the host identity, so that one
/// machine can emulate several hosts (ranks with different values talk as
/// if over a network).
pub const HOST_ID_VAR: &str = "FERROCOLL_HOST_ID";

/// The explicit switch group of this endpoint (wins over every other source).
pub const SWITCH_ID_VAR: &str = "FERROCOLL_SWITCH_ID";

/// A Slurm `topology.conf` to read switch groups from.
pub const TOPO_FILE_VAR: &str = "FERROCOLL_TOPO_FILE";

/// Slurm's dotted topology address of this node (`s0.s1.node01`).
pub const SLURM_ADDR_VAR: &str = "SLURM_TOPOLOGY_ADDR";

/// Slurm's name of this node, looked up in a topology file.
pub const SLURM_NODE_VAR: &str = "SLURMD_NODENAME";
