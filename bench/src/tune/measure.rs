//! One perftest sweep in a child process (`ferrocoll-perftest --np N ...
//! --csv FILE`), optionally with one algorithm pinned through its TL's tune
//! variable, and its rows read back.

use std::path::{Path, PathBuf};
use std::process::Command;

use ferrocoll::CollType;

use super::choose::Candidate;

/// One row of the perftest's CSV that the tuner uses.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Each rank's source bytes.
    pub size_bytes: u64,
    /// Average time per iteration, µs.
    pub time_avg_us: f64,
    /// `tl/alg` that ran.
    pub algorithm: String,
}

/// What one sweep runs.
#[derive(Clone, Debug)]
pub struct Sweep {
    /// The perftest binary.
    pub perftest: PathBuf,
    /// Ranks (processes).
    pub ranks: usize,
    /// Collective.
    pub coll: CollType,
    /// Perftest's `-b`, `-e`, `-f`, `-n`, `-w` values, as given to it.
    pub counts: (String, String, String),
    /// Iterations and warm-ups (`-n`, `-w`; None: the perftest's defaults).
    pub iters: Option<(u64, u64)>,
}

/// The tune variable that pins `c` (`UCC_TL_SHM_TUNE`, value `allreduce:@rsag:inf`).
pub fn pin_env(coll: CollType, c: &Candidate) -> (String, String) {
    (format!("UCC_TL_{}_TUNE", c.tl.to_ascii_uppercase()), format!("{coll}:@{}:inf", c.alg))
}

/// Run the sweep (with `c` pinned, or untuned) and return its rows; `csv`
/// is a scratch file path. Untuned runs clear every `UCC_TL_*_TUNE` and
/// `UCC_CONFIG_FILE` so that the defaults are what is measured.
pub fn run(s: &Sweep, pinned: Option<&Candidate>, csv: &Path) -> Result<Vec<Row>, String> {
    let pin = pinned.map(|c| pin_env(s.coll, c));
    let env: Vec<(&str, &str)> = pin.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    run_env(s, &pinned.map_or_else(|| "untuned".to_string(), Candidate::label), &env, csv)
}

/// Run the sweep untuned but for the variables `env`, `label` naming them
/// in errors; as [`run`].
pub fn run_env(s: &Sweep, label: &str, env: &[(&str, &str)], csv: &Path) -> Result<Vec<Row>, String> {
    let mut cmd = Command::new(&s.perftest);
    cmd.args(["--np", &s.ranks.to_string(), "-c", &s.coll.to_string()]);
    cmd.args(["-b", &s.counts.0, "-e", &s.counts.1, "-f", &s.counts.2]);
    if let Some((n, w)) = s.iters {
        cmd.args(["-n", &n.to_string(), "-w", &w.to_string()]);
    }
    cmd.arg("--csv").arg(csv);
    for (k, _) in std::env::vars() {
        if (k.starts_with("UCC_TL_") && k.ends_with("_TUNE")) || k == "UCC_CONFIG_FILE" {
            cmd.env_remove(&k);
        }
    }
    // No file: neither $HOME/ucc.conf nor an earlier tune result skews the measurement.
    cmd.env("UCC_CONFIG_FILE", "");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let what = || format!("{} --np {} -c {} ({label})", s.perftest.display(), s.ranks, s.coll);
    let out = cmd.output().map_err(|e| format!("{}: {e}", what()))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(5).collect();
        return Err(format!(
            "{} failed ({}): {}",
            what(),
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        ));
    }
    let text = std::fs::read_to_string(csv).map_err(|e| format!("{}: {}: {e}", what(), csv.display()))?;
    parse_csv(&text).map_err(|e| format!("{}: {e}", what()))
}

/// The rows of a perftest CSV (columns found by name in the header).
pub fn parse_csv(text: &str) -> Result<Vec<Row>, String> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().ok_or("empty CSV")?.split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).ok_or(format!("no {name} column in the CSV"));
    let (size, time, alg) = (col("size_bytes")?, col("time_avg_us")?, col("algorithm")?);
    let mut rows = Vec::new();
    for (n, line) in lines.enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split(',').collect();
        let get = |i: usize| f.get(i).copied().ok_or(format!("CSV line {}: too few fields", n + 2));
        let Ok(size_bytes) = get(size)?.parse::<u64>() else { continue }; // barrier: no size
        let time_avg_us = get(time)?
            .parse::<f64>()
            .map_err(|_| format!("CSV line {}: time {:?} is not a number", n + 2, get(time)))?;
        rows.push(Row { size_bytes, time_avg_us, algorithm: get(alg)?.to_string() });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_rows_by_header() {
        let text =
            "collective,size_bytes,time_avg_us,algorithm\nallreduce,8,1.5,shm/onestep\nallreduce,16,2.25,shm/rsag\n";
        let rows = parse_csv(text).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1], Row { size_bytes: 16, time_avg_us: 2.25, algorithm: "shm/rsag".into() });
        assert!(parse_csv("a,b\n1,2\n").unwrap_err().contains("size_bytes"));
        assert!(parse_csv("size_bytes,time_avg_us,algorithm\n8,x,a\n").unwrap_err().contains("line 2"));
        assert!(parse_csv("").is_err());
    }

    #[test]
    fn the_pin_is_the_tls_tune_variable() {
        let c = Candidate { tl: "shm".into(), alg: "rsag".into() };
        assert_eq!(pin_env(CollType::Allreduce, &c), ("UCC_TL_SHM_TUNE".into(), "allreduce:@rsag:inf".into()));
        ferrocoll::core::score::parse_tune(&pin_env(CollType::Bcast, &c).1).unwrap();
    }
}
