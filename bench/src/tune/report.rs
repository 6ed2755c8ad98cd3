//! What `ferrocoll-tune` prints and writes: a table per case, and the
//! configuration file (`NAME=value` lines, the measurements as comments).

use std::collections::BTreeMap;
use std::fmt::Write;

use ferrocoll::CollType;

use super::choose::{Verdict, pins, tokens};
use super::options::Options;
use super::stream::{self, Point};

/// One case's table: size, the library's choice, the fastest candidate, pinned or not.
pub fn table(coll: CollType, ranks: usize, verdicts: &[Verdict]) -> String {
    let mut s = format!("{coll}, {ranks} ranks (median µs):\n");
    let _ =
        writeln!(s, "  {:>10}  {:>22} {:>10}  {:>22} {:>10}  pinned", "bytes", "default", "time", "fastest", "time");
    for v in verdicts {
        let (da, dt) = v.default.as_ref().map_or(("-".to_string(), f64::NAN), |(a, t)| (a.clone(), *t));
        let (ba, bt) = v.best.as_ref().map_or(("-".to_string(), f64::NAN), |(c, t)| (c.label(), *t));
        let _ = writeln!(
            s,
            "  {:>10}  {da:>22} {dt:>10.2}  {ba:>22} {bt:>10.2}  {}",
            v.size_bytes,
            if v.pinned { "yes" } else { "" }
        );
    }
    s
}

/// The configuration file: a header saying where and how it was measured,
/// each case's table as comments, and one `UCC_TL_<TL>_TUNE` line per TL
/// that has pins.
/// With `streaming` (its points, on how many ranks), the streaming
/// threshold's table and, where streaming wins, its line.
pub fn conf_file(o: &Options, cases: &[(usize, CollType, &[Verdict])], streaming: Option<(&[Point], usize)>) -> String {
    let mut s = String::from("# Written by ferrocoll-tune: algorithms measured faster on this machine than\n");
    s.push_str("# the library's default choice (UCC tune-string grammar). Load with\n");
    s.push_str("# UCC_CONFIG_FILE=<this file>; a UCC_TL_<TL>_TUNE set in the environment replaces the line here.\n");
    let _ = writeln!(s, "# machine: {}", machine());
    let _ = writeln!(
        s,
        "# sweep: -b {} -e {} -f {}, {} round(s), margin {:.0} %",
        o.counts.0,
        o.counts.1,
        o.counts.2,
        o.reps,
        o.margin * 100.0
    );
    let mut per_tl: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for &(ranks, coll, verdicts) in cases {
        s.push_str("#\n");
        for line in super::report::table(coll, ranks, verdicts).lines() {
            let _ = writeln!(s, "# {line}");
        }
        let p = pins(coll, ranks, verdicts);
        for tl in p.iter().map(|p| p.candidate.tl.clone()).collect::<std::collections::BTreeSet<_>>() {
            per_tl.entry(tl.clone()).or_default().extend(tokens(coll, ranks, &tl, &p));
        }
    }
    if per_tl.is_empty() {
        s.push_str("#\n# No algorithm beat the default choice by the margin: nothing to pin.\n");
    }
    for (tl, toks) in per_tl {
        let _ = writeln!(s, "UCC_TL_{}_TUNE={}", tl.to_ascii_uppercase(), toks.join("#"));
    }
    if let Some((points, ranks)) = streaming {
        s.push_str("#\n");
        for line in stream::table(points, ranks, o.margin).lines() {
            let _ = writeln!(s, "# {line}");
        }
        if let Some(t) = stream::threshold(points, o.margin) {
            let _ = writeln!(s, "{}={t}", stream::VAR);
        }
    }
    s
}

/// The CPU model and the number of online CPUs, for the file's header.
fn machine() -> String {
    let model = cpu_model(&std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{model}, {cpus} CPUs available")
}

/// The CPU model as `/proc/cpuinfo` says it.
fn cpu_model(cpuinfo: &str) -> String {
    let field = |name: &str| {
        cpuinfo.lines().find_map(|l| {
            let (key, value) = l.split_once(':')?;
            (key.trim() == name).then(|| value.trim().to_string())
        })
    };
    // x86 names its model; arm64 gives implementer and part numbers only.
    field("model name")
        .or_else(|| Some(format!("CPU implementer {}, part {}", field("CPU implementer")?, field("CPU part")?)))
        .unwrap_or_else(|| "unknown CPU".into())
}

#[cfg(test)]
mod tests {
    use super::super::choose::Candidate;
    use super::super::options;
    use super::*;

    #[test]
    fn the_cpu_is_named_on_x86_and_arm64() {
        let x86 = "processor\t: 0\nmodel name\t: AMD EPYC 9B45\nflags\t\t: fpu\n";
        assert_eq!(cpu_model(x86), "AMD EPYC 9B45");
        let arm =
            "processor\t: 0\nBogoMIPS\t: 2000.00\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU part\t: 0xd4f\n";
        assert_eq!(cpu_model(arm), "CPU implementer 0x41, part 0xd4f");
        assert_eq!(cpu_model(""), "unknown CPU");
    }

    #[test]
    fn the_file_parses_back_into_the_library_config() {
        let o = options::parse(&[]).unwrap().unwrap();
        let v = vec![
            Verdict { size_bytes: 8, default: Some(("shm/onestep".into(), 1.0)), best: None, pinned: false },
            Verdict {
                size_bytes: 32,
                default: Some(("shm/onestep".into(), 4.0)),
                best: Some((Candidate { tl: "p2p".into(), alg: "ring".into() }, 1.0)),
                pinned: true,
            },
        ];
        let text = conf_file(&o, &[(2, CollType::Allreduce, &v)], None);
        let pairs = ferrocoll::core::config_file::parse_config_text(&text, "tuned").unwrap();
        assert_eq!(pairs.len(), 1, "{text}");
        assert_eq!(pairs[0].0, "UCC_TL_P2P_TUNE");
        assert_eq!(pairs[0].1, "allreduce:32-64:host:[2]:inf:@ring");
        ferrocoll::core::score::parse_tune(&pairs[0].1).unwrap();
        let none = conf_file(&o, &[(2, CollType::Allreduce, &v[..1])], None);
        assert!(none.contains("nothing to pin"), "{none}");
        assert!(ferrocoll::core::config_file::parse_config_text(&none, "t").unwrap().is_empty());
        // Streaming that wins from 64 MiB of destination up: its line; that loses at the top: none.
        let wins = [
            Point { coll: CollType::Bcast, dest_bytes: 32 << 20, streamed: 5000.0, cached: 5050.0 },
            Point { coll: CollType::Bcast, dest_bytes: 64 << 20, streamed: 5100.0, cached: 7300.0 },
        ];
        let text = conf_file(&o, &[(2, CollType::Allreduce, &v[..1])], Some((&wins, 2)));
        let pairs = ferrocoll::core::config_file::parse_config_text(&text, "tuned").unwrap();
        assert_eq!(pairs, [("UCC_TL_SHM_STREAM_THRESHOLD".to_string(), (64u64 << 20).to_string())], "{text}");
        assert!(text.contains("# streaming destinations"), "{text}");
        let text = conf_file(&o, &[(2, CollType::Allreduce, &v[..1])], Some((&wins[..1], 2)));
        assert!(ferrocoll::core::config_file::parse_config_text(&text, "t").unwrap().is_empty(), "{text}");
    }
}
