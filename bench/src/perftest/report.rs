//! What rank 0 prints and writes: ucc_perftest's header and table, a
//! progress line on stderr for long sweeps, and the CSV and JSON files.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use ferrocoll::core::json::json_str;

use super::spread::Spread;

use super::layout::has_in_place;
use super::options::Options;
use super::units::human_bytes;

/// One row of the table: one size.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The `-b`/`-e` count of this size.
    pub block_count: u64,
    /// The printed count (each rank's source count; `None` for barrier & co).
    pub count: Option<u64>,
    /// The printed size in bytes.
    pub bytes: Option<u64>,
    /// Timed iterations.
    pub iters: usize,
    /// Warm-up iterations.
    pub warmups: usize,
    /// Average over ranks of each rank's mean time per iteration, µs.
    pub time_avg: f64,
    /// Smallest rank mean, µs.
    pub time_min: f64,
    /// Largest rank mean, µs.
    pub time_max: f64,
    /// Bus bandwidth (GB/s) from the average, min and max times.
    pub busbw: Option<[f64; 3]>,
    /// The TL and algorithm rank 0's requests used.
    pub algorithm: String,
    /// Whether every iteration was verified.
    pub checked: bool,
    /// Each rank's spread of times (shown with `--per-rank`).
    pub per_rank: Vec<Spread>,
}

/// What the header says about the team.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TeamInfo {
    /// Ranks.
    pub size: usize,
    /// How the ranks run (`threads of one process`, `4 processes on 2 hosts (...)`).
    pub layout: String,
    /// TLs of the team.
    pub tls: Vec<String>,
    /// Each rank's CPUs (see `binding.rs`).
    pub binding: String,
}

/// Ranks grouped by host: `host0: 0-1; host1: 2-3`.
pub fn hosts_summary(hosts: &[String], pids: &[u32]) -> String {
    let mut distinct: Vec<&String> = Vec::new();
    for h in hosts {
        if !distinct.contains(&h) {
            distinct.push(h);
        }
    }
    let mut procs: Vec<(&String, u32)> = hosts.iter().zip(pids.iter().copied()).collect();
    procs.sort();
    procs.dedup();
    let n = hosts.len();
    if procs.len() == 1 {
        return if n == 1 { "1 process".into() } else { "threads of one process".into() };
    }
    let mut s =
        format!("{} processes on {} host{}", procs.len(), distinct.len(), if distinct.len() == 1 { "" } else { "s" });
    if distinct.len() > 1 {
        let parts: Vec<String> = distinct
            .iter()
            .map(|h| {
                let ranks: Vec<usize> = (0..n).filter(|&r| &&hosts[r] == h).collect();
                format!("{h}: {}", ranges(&ranks))
            })
            .collect();
        let _ = write!(s, " ({})", parts.join("; "));
    }
    s
}

/// `0-3,5,7-8`.
fn ranges(v: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        out.push(if i == j { v[i].to_string() } else { format!("{}-{}", v[i], v[j]) });
        i = j + 1;
    }
    out.join(",")
}

fn yes_no(b: bool) -> &'static str {
    if b { "1" } else { "0" }
}

/// ucc_perftest's header, with ferrocoll's additions (team, TLs, check).
pub fn header(o: &Options, team: &TeamInfo) -> String {
    let mut s = String::new();
    let mut line = |k: &str, v: &dyn std::fmt::Display| {
        let _ = writeln!(s, "{:<24}{v}", format!("{k}:"));
    };
    line("Collective", &o.coll);
    line("Memory type", &o.mem);
    line("Datatype", &o.dtype);
    line("Reduction", &if o.coll.is_reduction() { o.op.to_string() } else { "N/A".into() });
    line("Inplace", &if has_in_place(o.coll) { yes_no(o.in_place) } else { "N/A" });
    line("Persistent", &yes_no(o.persistent));
    line("Root", &if o.coll.is_rooted() { o.root.to_string() } else { "N/A".into() });
    line("Team", &format!("{} ranks, {}", team.size, team.layout));
    line("TLs", &team.tls.join(", "));
    line("Binding", &team.binding);
    line("Check", &yes_no(o.check));
    let (ws, wl) = o.warmups.map_or((100, 20), |w| (w, w));
    let (is, il) = o.iters.map_or((1000, 200), |n| (n, n));
    let _ = writeln!(s, "Warmup:\n{:<24}{ws}\n{:<24}{wl}", "  small", "  large");
    let _ = writeln!(s, "Iterations:\n{:<24}{is}\n{:<24}{il}\n", "  small", "  large");
    let (bw, width) = if o.full { ("Bus bandwidth, GB/s", 36) } else { ("Bus bw, GB/s", 24) };
    let _ = writeln!(s, "{:>12}{:>12}{:>24}{bw:>width$}  Algorithm", "Count", "Size", "Time, us");
    let _ = write!(s, "{:>36}{:>12}{:>12}{:>12}", "avg", "min", "max", "avg");
    if o.full {
        let _ = write!(s, "{:>12}{:>12}", "max", "min");
    }
    s
}

/// One table row, ucc_perftest's columns (`%12` wide, two decimals).
pub fn table_row(r: &Row, full: bool) -> String {
    let na = || "N/A".to_string();
    let mut s = format!(
        "{:>12}{:>12}{:>12.2}{:>12.2}{:>12.2}",
        r.count.map_or_else(na, |c| c.to_string()),
        r.bytes.map_or_else(na, |b| b.to_string()),
        r.time_avg,
        r.time_min,
        r.time_max
    );
    let cols = if full { 3 } else { 1 };
    for i in 0..cols {
        match r.busbw {
            Some(b) => {
                let _ = write!(s, "{:>12.2}", b[i]);
            }
            None => {
                let _ = write!(s, "{:>12}", "N/A");
            }
        }
    }
    let _ = write!(s, "  {}", r.algorithm);
    s
}

/// The progress line on stderr: before a size starts, once the sweep has
/// been quiet for [`Progress::EVERY`] (`allreduce: 8 of 25 sizes, 16 MiB…`).
pub struct Progress {
    last: Instant,
    /// Collective name.
    pub name: String,
    /// Number of sizes.
    pub total: usize,
}

impl Progress {
    /// How long the sweep stays quiet.
    pub const EVERY: Duration = Duration::from_secs(2);

    /// A progress reporter for `total` sizes of `name`.
    pub fn new(name: &str, total: usize) -> Progress {
        Progress { last: Instant::now(), name: name.into(), total }
    }

    /// Size `index` (0-based) of `bytes` bytes starts.
    pub fn start(&mut self, index: usize, bytes: u64) {
        if index > 0 && self.last.elapsed() >= Self::EVERY {
            crate::errln!("{}: {} of {} sizes, {}…", self.name, index + 1, self.total, human_bytes(bytes));
            self.last = Instant::now();
        }
    }
}

/// The benchmark's parameters, as the files record them.
fn meta(o: &Options, team: &TeamInfo) -> Vec<(&'static str, String)> {
    vec![
        ("collective", o.coll.to_string()),
        ("datatype", o.dtype.to_string()),
        ("op", if o.coll.is_reduction() { o.op.to_string() } else { String::new() }),
        ("mem_type", o.mem.to_string()),
        ("in_place", o.in_place.to_string()),
        ("persistent", o.persistent.to_string()),
        ("root", o.root.to_string()),
        ("ranks", team.size.to_string()),
    ]
}

/// The CSV header line.
pub const CSV_HEADER: &str = "collective,datatype,op,ranks,block_count,count,size_bytes,iterations,warmups,\
time_avg_us,time_min_us,time_max_us,busbw_avg_gbs,busbw_max_gbs,busbw_min_gbs,algorithm,checked";

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(String::new, |x| x.to_string())
}

/// The results as CSV (empty fields where a value does not apply).
pub fn csv(o: &Options, team: &TeamInfo, rows: &[Row]) -> String {
    let mut s = format!("{CSV_HEADER}\n");
    for r in rows {
        let bw = |i: usize| opt(r.busbw.map(|b| format!("{:.4}", b[i])));
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{:.3},{:.3},{:.3},{},{},{},{},{}",
            o.coll,
            o.dtype,
            if o.coll.is_reduction() { o.op.to_string() } else { String::new() },
            team.size,
            r.block_count,
            opt(r.count),
            opt(r.bytes),
            r.iters,
            r.warmups,
            r.time_avg,
            r.time_min,
            r.time_max,
            bw(0),
            bw(1),
            bw(2),
            r.algorithm.replace(',', ";"),
            r.checked
        );
    }
    s
}

fn json_num(v: f64) -> String {
    if v.is_finite() { format!("{v}") } else { "null".into() }
}

/// The results as JSON: `{"collective": ..., "results": [{...}, ...]}`.
pub fn json(o: &Options, team: &TeamInfo, rows: &[Row]) -> String {
    let mut s = String::from("{\n  \"tool\": \"ferrocoll-perftest\",\n");
    for (k, v) in meta(o, team) {
        let val = match k {
            "in_place" | "persistent" | "root" | "ranks" => v,
            _ => json_str(&v),
        };
        let _ = writeln!(s, "  {}: {val},", json_str(k));
    }
    let _ = writeln!(s, "  \"check\": {},\n  \"team\": {},\n  \"results\": [", o.check, json_str(&team.layout));
    for (i, r) in rows.iter().enumerate() {
        let bw = |i: usize| r.busbw.map_or_else(|| "null".into(), |b| json_num(b[i]));
        let _ = writeln!(
            s,
            "    {{\"block_count\": {}, \"count\": {}, \"size_bytes\": {}, \"iterations\": {}, \"warmups\": {}, \
             \"time_avg_us\": {}, \"time_min_us\": {}, \"time_max_us\": {}, \"busbw_avg_gbs\": {}, \
             \"busbw_max_gbs\": {}, \"busbw_min_gbs\": {}, \"algorithm\": {}, \"checked\": {}{}}}{}",
            r.block_count,
            r.count.map_or_else(|| "null".into(), |c| c.to_string()),
            r.bytes.map_or_else(|| "null".into(), |c| c.to_string()),
            r.iters,
            r.warmups,
            json_num(r.time_avg),
            json_num(r.time_min),
            json_num(r.time_max),
            bw(0),
            bw(1),
            bw(2),
            json_str(&r.algorithm),
            r.checked,
            per_rank_json(o, r),
            if i + 1 < rows.len() { "," } else { "" }
        );
    }
    s.push_str("  ]\n}\n");
    s
}

/// With `--per-rank`, a result's `"per_rank"` member (after a comma).
fn per_rank_json(o: &Options, r: &Row) -> String {
    if !o.per_rank {
        return String::new();
    }
    let ranks: Vec<String> = r.per_rank.iter().enumerate().map(|(rank, s)| s.json(rank, json_num)).collect();
    format!(", \"per_rank\": [{}]", ranks.join(", "))
}

/// Write `text` to `path`, saying which file failed.
pub fn write_file(path: &Path, text: &str) -> Result<(), String> {
    std::fs::File::create(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Whether `path` can be written, found by opening it as [`write_file`]
/// will (without truncating it); a file made only for the check is removed.
pub fn check_writable(path: &Path) -> Result<(), String> {
    let existed = path.exists();
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| format!("{}: cannot write it: {e}", path.display()))?;
    if !existed {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> Row {
        Row {
            block_count: 4,
            count: Some(4),
            bytes: Some(16),
            iters: 10,
            warmups: 1,
            time_avg: 1.5,
            time_min: 1.0,
            time_max: 2.0,
            busbw: Some([0.01, 0.02, 0.005]),
            algorithm: "p2p/knomial".into(),
            checked: true,
            per_rank: vec![Spread { mean: 1.0, ..Spread::default() }, Spread { mean: 2.0, ..Spread::default() }],
        }
    }

    #[test]
    fn rows_and_files() {
        let o = Options::default();
        let team = TeamInfo { size: 2, layout: "threads".into(), tls: vec!["p2p".into()], binding: "none".into() };
        let line = table_row(&row(), false);
        assert!(line.contains("        1.50") && line.ends_with("p2p/knomial"), "{line}");
        let c = csv(&o, &team, &[row()]);
        assert_eq!(c.lines().count(), 2);
        assert_eq!(c.lines().nth(1).unwrap().split(',').count(), CSV_HEADER.split(',').count());
        let j = json(&o, &team, &[row(), Row { busbw: None, count: None, bytes: None, ..row() }]);
        assert!(j.contains("\"busbw_avg_gbs\": null") && !j.contains("per_rank"));
        let with_ranks = json(&Options { per_rank: true, ..Options::default() }, &team, &[row()]);
        assert!(with_ranks.contains("\"per_rank\": [{\"rank\": 0, \"mean_us\": 1, "), "{with_ranks}");
        assert!(with_ranks.contains("{\"rank\": 1, \"mean_us\": 2, "), "{with_ranks}");
        assert!(header(&o, &team).contains("Collective:             allreduce"));
    }

    #[test]
    fn host_summaries() {
        let h = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(hosts_summary(&h(&["a", "a"]), &[7, 7]), "threads of one process");
        assert_eq!(hosts_summary(&h(&["a", "a", "b", "b"]), &[1, 2, 3, 4]), "4 processes on 2 hosts (a: 0-1; b: 2-3)");
        assert_eq!(hosts_summary(&h(&["a", "a"]), &[1, 2]), "2 processes on 1 host");
        assert_eq!(ranges(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert_eq!(json_str("a\"b\n"), "\"a\\\"b\\n\"");
    }
}
