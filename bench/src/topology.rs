//! `ferrocoll-info -T`'s report: the hosts and switch groups of a team,
//! and the ranks on each host, as every rank computed them.

use std::fmt::Write;

use ferrocoll::ProcInfo;
use ferrocoll::core::topo::Layout;

/// Describe a team whose rank r runs as `procs[r]`, laid out as `layout`.
pub fn describe(procs: &[ProcInfo], layout: &Layout) -> String {
    let mut out = String::new();
    let hosts = layout.nodes().len();
    let groups = layout.groups().len();
    let even = if layout.is_even() { "even" } else { "uneven" };
    let _ = writeln!(
        out,
        "team of {} ranks: {hosts} host{}, {groups} switch group{}, {even} ranks per host",
        layout.size(),
        if hosts == 1 { "" } else { "s" },
        if groups == 1 { "" } else { "s" },
    );
    for group in layout.groups() {
        let first = group.first().and_then(|n| layout.nodes().get(*n)).and_then(|r| r.first());
        let name = first.and_then(|r| procs.get(*r)).map_or("", |p| p.switch.as_str());
        let shown = if name.is_empty() { "(default)".to_string() } else { format!("{name:?}") };
        let _ = writeln!(out, "switch group {shown}: {} host{}", group.len(), if group.len() == 1 { "" } else { "s" });
        for ranks in group.iter().filter_map(|n| layout.nodes().get(*n)) {
            let host = ranks.first().and_then(|r| procs.get(*r)).map_or("", |p| p.host.as_str());
            let list: Vec<String> = ranks.iter().map(usize::to_string).collect();
            let numa: Vec<String> = ranks
                .iter()
                .map(|r| procs.get(*r).and_then(|p| p.numa).map_or("?".into(), |n| n.to_string()))
                .collect();
            let _ = writeln!(
                out,
                "  host {host:?}: {} rank{} [{}], NUMA nodes [{}]",
                ranks.len(),
                if ranks.len() == 1 { "" } else { "s" },
                list.join(", "),
                numa.join(", ")
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_groups_and_ranks() {
        let p = |host: &str, switch: &str, numa| ProcInfo { host: host.into(), pid: 1, switch: switch.into(), numa };
        let procs = [p("a", "s0", Some(0)), p("a", "s0", Some(1)), p("b", "s1", None)];
        let places: Vec<(&str, &str)> = procs.iter().map(|p| (p.host.as_str(), p.switch.as_str())).collect();
        let text = describe(&procs, &Layout::new(&places));
        assert!(text.starts_with("team of 3 ranks: 2 hosts, 2 switch groups, uneven"), "{text}");
        assert!(text.contains("switch group \"s1\": 1 host\n"), "{text}");
        assert!(text.contains("host \"a\": 2 ranks [0, 1], NUMA nodes [0, 1]"), "{text}");
        assert!(text.contains("host \"b\": 1 rank [2], NUMA nodes [?]"), "{text}");
    }
}
