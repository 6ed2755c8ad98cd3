//! The crate graph is the one ARCHITECTURE.md draws: every dependency a
//! workspace crate declares is allowed by the table between the
//! `<!-- crates:begin -->` and `<!-- crates:end -->` markers, arrows between
//! ferrocoll's crates only point to crates listed above, no crate
//! declares a dependency its code never names (comments do not count), a
//! row allows no dependency its crate does not declare (the table is the
//! graph, not a wish list), and the workspace declares no dependency that
//! no member uses.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// One row of the table: the crate, its folder, what it may depend on (normal
/// and build dependencies) and what its tests and benches may add.
#[derive(Debug)]
struct Row {
    folder: String,
    deps: BTreeSet<String>,
    dev: BTreeSet<String>,
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the tests crate lives in the workspace").to_path_buf()
}

/// `` `a`, `b` `` or `—` → {a, b}.
fn names(cell: &str) -> BTreeSet<String> {
    cell.split(',').map(|s| s.trim().trim_matches('`').to_string()).filter(|s| !s.is_empty() && s != "—").collect()
}

/// The crate table of ARCHITECTURE.md, in order.
fn table() -> Vec<(String, Row)> {
    let text = std::fs::read_to_string(workspace_root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md exists");
    let (start, end) = (text.find("<!-- crates:begin -->"), text.find("<!-- crates:end -->"));
    let (Some(start), Some(end)) = (start, end) else { panic!("ARCHITECTURE.md has no crates:begin/end markers") };
    text[start..end]
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
            assert!(cells.len() >= 4, "a crate row needs crate | folder | depends on | tests add: {l}");
            let name = cells[0].trim_matches('`').to_string();
            let row =
                Row { folder: cells[1].trim_matches('`').to_string(), deps: names(cells[2]), dev: names(cells[3]) };
            (name, row)
        })
        .collect()
}

/// A declared dependency of a workspace crate.
#[derive(Debug)]
struct Dep {
    name: String,
    /// The name the code uses (`ferrocoll-core` → `ferrocoll_core`, or its rename).
    lib: String,
    dev: bool,
}

/// Every workspace crate's name, folder and declared dependencies, from `cargo metadata`.
fn packages() -> Vec<(String, PathBuf, Vec<Dep>)> {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(workspace_root())
        .output()
        .expect("cargo metadata runs");
    assert!(out.status.success(), "cargo metadata failed: {}", String::from_utf8_lossy(&out.stderr));
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON");
    let packages = meta["packages"].as_array().expect("packages");
    packages
        .iter()
        .map(|p| {
            let name = p["name"].as_str().expect("name").to_string();
            let dir =
                Path::new(p["manifest_path"].as_str().expect("manifest_path")).parent().expect("dir").to_path_buf();
            let deps = p["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                .map(|d| {
                    let name = d["name"].as_str().expect("dependency name").to_string();
                    let lib = d["rename"].as_str().unwrap_or(&name).replace('-', "_");
                    Dep { name, lib, dev: d["kind"].as_str() == Some("dev") }
                })
                .collect();
            (name, dir, deps)
        })
        .collect()
}

/// The Rust sources of a crate: its folder without `target/` (the root
/// package: only `src/` and `examples/`, the rest are other crates).
fn sources(dir: &Path, root_package: bool) -> String {
    fn walk(p: &Path, out: &mut String) {
        let Ok(entries) = std::fs::read_dir(p) else { return };
        for e in entries.flatten() {
            let path = e.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "target" && n != ".git") {
                    walk(&path, out);
                }
            } else if path.extension().is_some_and(|x| x == "rs") {
                // A name in a comment is not a use.
                for line in std::fs::read_to_string(&path).unwrap_or_default().lines() {
                    if !line.trim_start().starts_with("//") {
                        out.push_str(line);
                        out.push('\n');
                    }
                }
            }
        }
    }
    let mut out = String::new();
    if root_package {
        walk(&dir.join("src"), &mut out);
        walk(&dir.join("examples"), &mut out);
    } else {
        walk(dir, &mut out);
    }
    out
}

/// The names under `[workspace.dependencies]` of the root Cargo.toml.
fn workspace_dependencies() -> Vec<String> {
    let text = std::fs::read_to_string(workspace_root().join("Cargo.toml")).expect("the root Cargo.toml");
    text.lines()
        .skip_while(|l| l.trim() != "[workspace.dependencies]")
        .skip(1)
        .take_while(|l| !l.trim_start().starts_with('['))
        .filter_map(|l| l.split_once('=').map(|(k, _)| k.trim().trim_matches('"').to_string()))
        .filter(|k| !k.is_empty() && !k.starts_with('#'))
        .collect()
}

/// Whether `word` stands in `text` as an identifier of its own.
fn names_word(text: &str, word: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back().is_none_or(|c| !ident(c));
        let after = text[i + word.len()..].chars().next().is_none_or(|c| !ident(c));
        before && after
    })
}

#[test]
fn every_dependency_is_allowed_points_up_and_is_used() {
    let table = table();
    let order: BTreeMap<&str, usize> = table.iter().enumerate().map(|(i, (n, _))| (n.as_str(), i)).collect();
    let rows: BTreeMap<&str, &Row> = table.iter().map(|(n, r)| (n.as_str(), r)).collect();
    let root = workspace_root();
    let mut problems = Vec::new();
    let packages = packages();
    for (name, dir, deps) in &packages {
        let Some(row) = rows.get(name.as_str()) else {
            problems.push(format!("crate {name} has no row in ARCHITECTURE.md's crate table"));
            continue;
        };
        let folder = dir.strip_prefix(&root).map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
        let folder = if folder.is_empty() { "." } else { folder.as_str() };
        if row.folder.trim_end_matches('/') != folder.trim_end_matches('/') {
            problems.push(format!("crate {name} lives in {folder}/, ARCHITECTURE.md says {}", row.folder));
        }
        let code = sources(dir, dir == &root);
        for d in deps {
            let allowed = row.deps.contains(&d.name) || (d.dev && row.dev.contains(&d.name));
            if !allowed {
                let kind = if d.dev { "dev-dependency" } else { "dependency" };
                problems.push(format!("{name} declares {kind} {}, which ARCHITECTURE.md does not allow it", d.name));
            }
            if let (Some(&from), Some(&to)) = (order.get(name.as_str()), order.get(d.name.as_str())) {
                if to >= from {
                    problems.push(format!(
                        "{name} → {}: arrows between ferrocoll's crates point up the table, to crates listed above",
                        d.name
                    ));
                }
            }
            if !names_word(&code, &d.lib) {
                problems.push(format!("{name} declares {} but its code never names {}", d.name, d.lib));
            }
        }
        for allowed in &row.deps {
            if !deps.iter().any(|d| !d.dev && &d.name == allowed) {
                problems.push(format!("ARCHITECTURE.md lets {name} depend on {allowed}, which it does not declare"));
            }
        }
    }
    for dep in workspace_dependencies() {
        if !packages.iter().any(|(_, _, deps)| deps.iter().any(|d| d.name == dep)) {
            problems.push(format!("the workspace declares dependency {dep}, which no member uses"));
        }
    }
    for (name, _) in &table {
        if !packages.iter().any(|(n, ..)| n == name) {
            problems.push(format!("ARCHITECTURE.md lists {name}, which is not a workspace crate"));
        }
    }
    assert!(problems.is_empty(), "the crate graph differs from ARCHITECTURE.md:\n- {}", problems.join("\n- "));
}

#[test]
fn word_search_needs_whole_identifiers() {
    assert!(names_word("use ferrocoll_core::X;", "ferrocoll_core"));
    assert!(!names_word("use ferrocoll_core::X;", "ferrocoll"));
    assert!(names_word("ferrocoll::Lib", "ferrocoll"));
    assert!(!names_word("halfway", "half"));
}
