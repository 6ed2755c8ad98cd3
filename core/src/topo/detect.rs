//! Learning this process's place once, at context creation: its switch
//! group from the sources listed in the module documentation, and its NUMA
//! node from the CPU it runs on.
//!
//! The environment and the file system are passed in ([`Env`]) so the
//! rules are tested without touching the process's environment.

use crate::error::{Error, Result};

use super::proc::{NAME_MAX, ProcInfo};
use super::slurm::{TopologyFile, leaf_of_addr};
use super::{HOST_ID_VAR, SLURM_ADDR_VAR, SLURM_NODE_VAR, SWITCH_ID_VAR, TOPO_FILE_VAR};

/// What detection reads: variables and files.
pub struct Env<'a> {
    /// An environment variable's value (unset and blank are both `None`).
    pub var: &'a dyn Fn(&str) -> Option<String>,
    /// A file's text, `None` when absent.
    pub file: &'a dyn Fn(&str) -> Option<String>,
}

impl Env<'static> {
    /// The process's own environment and file system.
    pub fn process() -> Env<'static> {
        Env {
            var: &|k| std::env::var(k).ok().filter(|v| !v.trim().is_empty()),
            file: &|p| std::fs::read_to_string(p).ok(),
        }
    }
}

/// This process: host and pid as [`ProcInfo::local`], its switch group and
/// NUMA node from `env`. A bad topology source is an error naming it.
pub fn detect_with(env: &Env<'_>) -> Result<ProcInfo> {
    let mut me = ProcInfo::local();
    if let Some(h) = (env.var)(HOST_ID_VAR) {
        me.host = h;
    }
    me.switch = switch_group(env, &me.host)?;
    me.numa = numa_node(env);
    Ok(me)
}

fn switch_group(env: &Env<'_>, host: &str) -> Result<String> {
    let name = if let Some(id) = (env.var)(SWITCH_ID_VAR) {
        id.trim().to_string()
    } else if let Some(path) = (env.var)(TOPO_FILE_VAR) {
        let text = (env.file)(&path)
            .ok_or_else(|| Error::invalid_param(format!("{TOPO_FILE_VAR}={path:?} cannot be read")))?;
        let topo = TopologyFile::parse(&path, &text)?;
        let node = (env.var)(SLURM_NODE_VAR).unwrap_or_else(|| short_name(host).to_string());
        topo.leaf_of(&node)
            .ok_or_else(|| {
                Error::invalid_param(format!(
                    "node {node:?} is under no leaf switch of {TOPO_FILE_VAR}={path:?} \
                     (the node name is {SLURM_NODE_VAR}, else {HOST_ID_VAR}, else the host name)"
                ))
            })?
            .to_string()
    } else if let Some(addr) = (env.var)(SLURM_ADDR_VAR) {
        leaf_of_addr(&addr)?.unwrap_or_default().to_string()
    } else {
        String::new()
    };
    if name.len() > NAME_MAX {
        return Err(Error::invalid_param(format!("switch group {name:?} is over {NAME_MAX} bytes")));
    }
    Ok(name)
}

/// The host name without the boot id `ProcInfo::local` appends, and
/// without a domain (Slurm's node names are short).
fn short_name(host: &str) -> &str {
    let host = host.split(':').next().unwrap_or(host);
    host.split('.').next().unwrap_or(host)
}

/// The NUMA node of the CPU this thread runs on: the CPU from
/// `/proc/self/stat` (field 39), the node whose `cpulist` holds it. `None`
/// where either is unknown (no sysfs node directory: one node, or not Linux).
fn numa_node(env: &Env<'_>) -> Option<u16> {
    let stat = (env.file)("/proc/thread-self/stat").or_else(|| (env.file)("/proc/self/stat"))?;
    // Fields after the command name (which may hold spaces) start at field 3.
    let cpu: u32 = stat.rsplit_once(')')?.1.split_whitespace().nth(36)?.parse().ok()?;
    // Only the nodes online are looked at (a few reads, not one per possible node).
    let online = (env.file)("/sys/devices/system/node/online")?;
    (0..1024u16).filter(|n| cpu_in_list(u32::from(*n), &online)).find(|n| {
        (env.file)(&format!("/sys/devices/system/node/node{n}/cpulist")).is_some_and(|l| cpu_in_list(cpu, &l))
    })
}

/// Whether `cpu` is in a sysfs CPU (or node) list (`0-3,8-11`).
fn cpu_in_list(cpu: u32, list: &str) -> bool {
    list.trim().split(',').filter(|s| !s.is_empty()).any(|r| {
        let (lo, hi) = r.split_once('-').unwrap_or((r, r));
        matches!((lo.parse::<u32>(), hi.parse::<u32>()), (Ok(lo), Ok(hi)) if lo <= cpu && cpu <= hi)
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn detect(vars: &[(&str, &str)], files: &[(&str, &str)]) -> Result<ProcInfo> {
        let vars: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let files: HashMap<String, String> = files.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        detect_with(&Env { var: &|k| vars.get(k).cloned(), file: &|p| files.get(p).cloned() })
    }

    const TOPO: &str = "SwitchName=s0 Nodes=node[01-02]\nSwitchName=s1 Nodes=node[03-04]\n";

    #[test]
    fn sources_in_order() {
        let file = [("/t.conf", TOPO)];
        let all = [
            (SWITCH_ID_VAR, "mine"),
            (TOPO_FILE_VAR, "/t.conf"),
            (SLURM_NODE_VAR, "node03"),
            (SLURM_ADDR_VAR, "top.s9.node03"),
        ];
        assert_eq!(detect(&all, &file).unwrap().switch, "mine");
        assert_eq!(detect(&all[1..], &file).unwrap().switch, "s1");
        assert_eq!(detect(&all[3..], &file).unwrap().switch, "s9");
        assert_eq!(detect(&[], &file).unwrap().switch, "");
        // Without SLURMD_NODENAME the host identity is looked up.
        let p = detect(&[(TOPO_FILE_VAR, "/t.conf"), (HOST_ID_VAR, "node02")], &file).unwrap();
        assert_eq!((p.host.as_str(), p.switch.as_str()), ("node02", "s0"));
    }

    #[test]
    fn bad_sources_are_errors_naming_them() {
        let file = [("/t.conf", TOPO), ("/bad.conf", "SwitchName=s0 Nodes=n[1-\n")];
        for (vars, needle) in [
            (vec![(TOPO_FILE_VAR, "/missing.conf")], "/missing.conf"),
            (vec![(TOPO_FILE_VAR, "/bad.conf")], "line 1"),
            (vec![(TOPO_FILE_VAR, "/t.conf"), (SLURM_NODE_VAR, "node09")], "node09"),
            (vec![(SLURM_ADDR_VAR, "a..b")], "a..b"),
        ] {
            let e = detect(&vars, &file).unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
        }
        let long = "s".repeat(NAME_MAX + 1);
        assert!(detect(&[(SWITCH_ID_VAR, &long)], &[]).is_err());
    }

    #[test]
    fn numa_node_of_the_cpu() {
        // Field 39 (the CPU) is 5; the command name holds spaces and a ')'.
        let stat = format!("1 (a b) c) S {} 5 0", "0 ".repeat(35));
        let files = [
            ("/proc/self/stat", stat.as_str()),
            ("/sys/devices/system/node/online", "0-1\n"),
            ("/sys/devices/system/node/node0/cpulist", "0-3\n"),
            ("/sys/devices/system/node/node1/cpulist", "4-7,12\n"),
        ];
        assert_eq!(detect(&[], &files).unwrap().numa, Some(1));
        assert_eq!(detect(&[], &files[..1]).unwrap().numa, None);
        assert!(cpu_in_list(12, "4-7,12") && !cpu_in_list(8, "4-7,12") && !cpu_in_list(0, ""));
        // The real thing, where there is one: whatever it says, it does not fail.
        let _ = detect_with(&Env::process());
    }
}
