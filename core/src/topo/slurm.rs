//! Slurm's ways of naming switch groups: the `topology.conf` of the tree
//! plugin, and the dotted `SLURM_TOPOLOGY_ADDR`.
//!
//! The subset of `topology.conf` read here:
//! - blank lines and `#` comments (to the end of the line);
//! - `SwitchName=<name> [Nodes=<hostlist>] [Switches=<hostlist>] [LinkSpeed=<n>]`,
//!   keys in any case, fields separated by spaces or tabs. A switch with
//!   `Nodes=` is a leaf switch, and its nodes form one switch group; upper
//!   switches (`Switches=`) are accepted and not used (two levels: within a
//!   group, between groups);
//! - hostlists as Slurm writes them: comma-separated names, each with
//!   bracketed ranges and lists, zero padding kept (`node[01-04,07]`,
//!   `r[1-2]n[1-3]`).
//!
//! Anything else — another key (`BlockName=` of the block plugin, a typo),
//! a field without `=`, a malformed hostlist, a node under two leaf
//! switches, more than [`MAX_NAMES`] names — is an error naming the file,
//! the line number and the line's text.

use std::collections::HashMap;

use crate::error::{Error, Result};

/// The most names one hostlist may expand to (a typo like `n[0-99999999]`
/// must fail, not allocate gigabytes).
pub const MAX_NAMES: usize = 1 << 20;

/// The leaf switch of every node listed in a topology file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TopologyFile {
    leaf: HashMap<String, String>,
}

impl TopologyFile {
    /// Read and parse the file at `path`.
    pub fn read(path: &str) -> Result<TopologyFile> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::invalid_param(format!("topology file {path:?} cannot be read: {e}")))?;
        TopologyFile::parse(path, &text)
    }

    /// Parse `text`, read from `path` (named in errors).
    pub fn parse(path: &str, text: &str) -> Result<TopologyFile> {
        let mut leaf = HashMap::new();
        for (i, raw) in text.lines().enumerate() {
            let bad =
                |why: String| Error::invalid_param(format!("topology file {path:?} line {}: {why}: {raw:?}", i + 1));
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let (mut name, mut nodes) = (None, None);
            for field in line.split_whitespace() {
                let (key, value) = field.split_once('=').ok_or_else(|| bad(format!("{field:?} is not key=value")))?;
                match key.to_ascii_lowercase().as_str() {
                    "switchname" if name.is_none() && !value.is_empty() => name = Some(value),
                    "nodes" if nodes.is_none() => nodes = Some(value),
                    "switches" => {
                        expand_hostlist(value).map_err(|e| bad(e.context().to_string()))?;
                    }
                    "linkspeed" => {}
                    _ => {
                        return Err(bad(format!(
                            "field {field:?} is not read here (SwitchName= once, Nodes=, Switches=, LinkSpeed=)"
                        )));
                    }
                }
            }
            let name = name.ok_or_else(|| bad("the line has no SwitchName=".into()))?;
            let Some(nodes) = nodes else { continue };
            for node in expand_hostlist(nodes).map_err(|e| bad(e.context().to_string()))? {
                if let Some(other) = leaf.insert(node.clone(), name.to_string()) {
                    return Err(bad(format!("node {node:?} is already under switch {other:?}")));
                }
            }
        }
        Ok(TopologyFile { leaf })
    }

    /// The leaf switch that lists `node`.
    pub fn leaf_of(&self, node: &str) -> Option<&str> {
        self.leaf.get(node).map(String::as_str)
    }
}

/// The leaf switch in Slurm's dotted topology address (`s0.s1.node01` →
/// `s1`); `None` for an address of one component (a node under no switch).
pub fn leaf_of_addr(addr: &str) -> Result<Option<&str>> {
    let parts: Vec<&str> = addr.trim().split('.').collect();
    if parts.iter().any(|p| p.trim().is_empty()) {
        return Err(Error::invalid_param(format!(
            "SLURM_TOPOLOGY_ADDR={addr:?} has an empty component (expected e.g. s0.s1.node01)"
        )));
    }
    Ok(parts.len().checked_sub(2).and_then(|i| parts.get(i)).copied())
}

/// Expand a Slurm hostlist (`node[01-03,07],login`) into names.
pub fn expand_hostlist(list: &str) -> Result<Vec<String>> {
    let bad = |why: &str| Error::invalid_param(format!("hostlist {list:?}: {why}"));
    let mut out = Vec::new();
    // Split at the commas outside brackets.
    let (mut depth, mut start) = (0usize, 0usize);
    let mut items = Vec::new();
    for (i, c) in list.char_indices() {
        match c {
            '[' if depth == 0 => depth = 1,
            '[' => return Err(bad("nested '['")),
            ']' if depth == 1 => depth = 0,
            ']' => return Err(bad("']' without '['")),
            ',' if depth == 0 => {
                items.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(bad("'[' without ']'"));
    }
    items.push(&list[start..]);
    for item in items {
        if item.is_empty() {
            return Err(bad("an empty name"));
        }
        expand_item(item, &mut out).map_err(|why| bad(&why))?;
    }
    Ok(out)
}

/// Expand one name with brackets, appending to `out`.
fn expand_item(item: &str, out: &mut Vec<String>) -> std::result::Result<(), String> {
    let Some(open) = item.find('[') else {
        if out.len() >= MAX_NAMES {
            return Err(format!("more than {MAX_NAMES} names"));
        }
        out.push(item.to_string());
        return Ok(());
    };
    let close = open + item[open..].find(']').ok_or("'[' without ']'")?;
    let (head, body, tail) = (&item[..open], &item[open + 1..close], &item[close + 1..]);
    for part in body.split(',') {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(lo) || !digits(hi) {
            return Err(format!("{part:?} is not a number or a range lo-hi"));
        }
        let (a, b): (u64, u64) = (
            lo.parse().map_err(|_| format!("{lo:?} is too large"))?,
            hi.parse().map_err(|_| format!("{hi:?} is too large"))?,
        );
        if a > b {
            return Err(format!("range {part:?} runs backwards"));
        }
        if b - a >= MAX_NAMES as u64 {
            return Err(format!("range {part:?} has more than {MAX_NAMES} names"));
        }
        for n in a..=b {
            expand_item(&format!("{head}{n:0width$}{tail}", width = lo.len()), out)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostlists() {
        assert_eq!(expand_hostlist("node[01-03,07],login").unwrap(), ["node01", "node02", "node03", "node07", "login"]);
        assert_eq!(expand_hostlist("r[1-2]n[8-9]").unwrap(), ["r1n8", "r1n9", "r2n8", "r2n9"]);
        assert_eq!(expand_hostlist("n[9-10]").unwrap(), ["n9", "n10"]);
        for bad in ["n[1-", "n1]", "n[3-1]", "n[a-b]", "a,,b", "n[[1]]", "n[]", "n[0-99999999]", ""] {
            let e = expand_hostlist(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
    }

    #[test]
    fn a_tree_topology() {
        let text = "# a two-level tree\nSwitchName=s0 Nodes=node[01-02]\n\n\
                    switchname=s1\tnodes=node[03-04] LinkSpeed=100 # leaf\nSwitchName=top Switches=s[0-1]\n";
        let t = TopologyFile::parse("topo.conf", text).unwrap();
        assert_eq!(t.leaf_of("node02"), Some("s0"));
        assert_eq!(t.leaf_of("node03"), Some("s1"));
        assert_eq!(t.leaf_of("node05"), None);
    }

    #[test]
    fn malformed_lines_name_file_line_and_text() {
        for (text, line, why) in [
            ("SwitchName=s0 Nodes=n[1-2]\nBlockName=b1 Nodes=n3", "line 2", "BlockName=b1"),
            ("SwitchName=s0 Nodes=n[1-2\n", "line 1", "without ']'"),
            ("Nodes=n1\n", "line 1", "no SwitchName"),
            ("SwitchName=s0 Nodes=n1\nSwitchName=s1 Nodes=n[1-2]", "line 2", "already under switch \"s0\""),
            ("SwitchName=s0 n1", "line 1", "not key=value"),
            ("SwitchName=s0 SwitchName=s1", "line 1", "SwitchName=s1"),
        ] {
            let e = TopologyFile::parse("/etc/t.conf", text).unwrap_err().to_string();
            assert!(e.contains("/etc/t.conf") && e.contains(line) && e.contains(why), "{e}");
        }
        let e = TopologyFile::read("/nonexistent/topo.conf").unwrap_err().to_string();
        assert!(e.contains("/nonexistent/topo.conf"), "{e}");
    }

    #[test]
    fn slurm_addresses() {
        assert_eq!(leaf_of_addr("s0.s1.node01").unwrap(), Some("s1"));
        assert_eq!(leaf_of_addr("s3.node01").unwrap(), Some("s3"));
        assert_eq!(leaf_of_addr("node01").unwrap(), None);
        assert!(leaf_of_addr("s0..node01").unwrap_err().to_string().contains("s0..node01"));
    }

    proptest::proptest! {
        #[test]
        fn parsing_never_panics(text in ".{0,60}") {
            let _ = TopologyFile::parse("f", &text);
            let _ = expand_hostlist(&text);
        }
    }
}
