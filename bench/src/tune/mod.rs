//! `ferrocoll-tune`: measure this machine's crossovers between algorithms
//! and write them as UCC tune strings in a configuration file.
//!
//! For each team size and collective: one untuned perftest sweep (what the
//! library picks, and how fast) and one sweep per candidate algorithm with
//! that algorithm pinned through its TL's `UCC_TL_<TL>_TUNE`, repeated and
//! interleaved so that a slow spell of the machine hits every candidate
//! alike; medians are compared ([`choose`]). Only sizes where a candidate
//! beats the library's own choice by the margin are pinned, so the file
//! says where this machine differs from the shipped score map, nothing more.
//! Then, with bcast or allgather among the collectives, the size from which
//! their destinations are best written past the cache ([`stream`]).

pub mod choose;
pub mod measure;
pub mod options;
mod report;
pub mod stream;

use std::collections::BTreeMap;
use std::path::PathBuf;

use ferrocoll::{CollType, Lib};

use choose::{Candidate, Times, Verdict};
use measure::Sweep;
use options::Options;

/// The algorithms that could run `coll` on a team of several ranks on one host.
pub fn candidates(lib: &Lib, coll: CollType) -> Vec<Candidate> {
    lib.tls()
        .iter()
        .filter(|tl| tl.name() != "self")
        .flat_map(|tl| {
            tl.algorithms()
                .iter()
                .filter(|a| a.coll == coll)
                .map(|a| Candidate { tl: tl.name().to_string(), alg: a.name.to_string() })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The measurements of one (team size, collective).
struct Case {
    ranks: usize,
    coll: CollType,
    verdicts: Vec<Verdict>,
}

/// Run the whole tuning; the exit code.
pub fn main(args: &[String]) -> i32 {
    let o = match options::parse(args) {
        Ok(Some(o)) => o,
        Ok(None) => {
            println!("{}", options::USAGE);
            return 0;
        }
        Err(e) => {
            eprintln!("ferrocoll-tune: {e}");
            return 2;
        }
    };
    match tune(&o) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("ferrocoll-tune: {e}");
            1
        }
    }
}

fn tune(o: &Options) -> Result<(), String> {
    // The file is written at the end of a sweep that may take hours: an -o
    // that cannot be written is found out now, not after it (the check
    // leaves a file there as it was, and removes one it made).
    crate::perftest::report::check_writable(&o.output).map_err(|e| format!("-o {e}"))?;
    let lib = Lib::new().map_err(|e| e.to_string())?;
    let perftest = match &o.perftest {
        Some(p) => p.clone(),
        None => sibling("ferrocoll-perftest")?,
    };
    if let Some(warning) = busy_warning() {
        eprintln!("ferrocoll-tune: {warning}");
    }
    let scratch = std::env::temp_dir().join(format!("ferrocoll-tune-{}.csv", std::process::id()));
    let mut cases = Vec::new();
    for &ranks in &o.ranks {
        for &coll in &o.colls {
            let cands = candidates(&lib, coll);
            if cands.len() < 2 {
                println!("{coll}, {ranks} ranks: {} candidate(s), nothing to choose", cands.len());
                continue;
            }
            let sweep = Sweep { perftest: perftest.clone(), ranks, coll, counts: o.counts.clone(), iters: o.iters };
            let verdicts = measure_case(&sweep, &cands, o, &scratch)?;
            print!("{}", report::table(coll, ranks, &verdicts));
            cases.push(Case { ranks, coll, verdicts });
        }
    }
    let streaming = match &o.stream {
        Some((b, e)) if o.colls.iter().any(|c| stream::COLLS.contains(c)) => {
            let ranks = o.ranks[0];
            let counts = (b.clone(), e.clone(), "2".to_string());
            let points = stream::measure(&perftest, ranks, counts, o.iters, o.reps, &scratch)?;
            print!("{}", stream::table(&points, ranks, o.margin));
            Some((points, ranks))
        }
        _ => None,
    };
    let _ = std::fs::remove_file(&scratch);
    let text = report::conf_file(
        o,
        &cases.iter().map(|c| (c.ranks, c.coll, c.verdicts.as_slice())).collect::<Vec<_>>(),
        streaming.as_ref().map(|(p, r)| (p.as_slice(), *r)),
    );
    std::fs::write(&o.output, text).map_err(|e| format!("{}: {e}", o.output.display()))?;
    println!("wrote {} (use it with UCC_CONFIG_FILE={})", o.output.display(), o.output.display());
    Ok(())
}

/// Every sweep of one case, `reps` times, candidates in a rotating order.
fn measure_case(s: &Sweep, cands: &[Candidate], o: &Options, csv: &std::path::Path) -> Result<Vec<Verdict>, String> {
    let mut default: BTreeMap<u64, (String, Vec<f64>)> = BTreeMap::new();
    let mut measured: BTreeMap<Candidate, Times> = BTreeMap::new();
    for rep in 0..o.reps {
        eprintln!("ferrocoll-tune: {}, {} ranks, round {} of {}", s.coll, s.ranks, rep + 1, o.reps);
        for row in measure::run(s, None, csv)? {
            let e = default.entry(row.size_bytes).or_insert_with(|| (row.algorithm.clone(), Vec::new()));
            e.1.push(row.time_avg_us);
        }
        for k in 0..cands.len() {
            let c = &cands[(k + rep) % cands.len()];
            match measure::run(s, Some(c), csv) {
                // Only rows where the pinned algorithm itself ran (it may refuse some sizes).
                Ok(rows) => {
                    for row in rows.into_iter().filter(|r| r.algorithm == c.label()) {
                        measured.entry(c.clone()).or_default().entry(row.size_bytes).or_default().push(row.time_avg_us);
                    }
                }
                Err(e) => eprintln!("ferrocoll-tune: {} left out this round: {e}", c.label()),
            }
        }
    }
    Ok(choose::verdicts(&default, &measured, o.margin))
}

/// A warning when the machine is already busy: ranks that share cores with
/// other work measure the sharing, and the pins would follow the noise.
fn busy_warning() -> Option<String> {
    let load: f64 = std::fs::read_to_string("/proc/loadavg").ok()?.split_whitespace().next()?.parse().ok()?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    (load >= 0.5 * cpus).then(|| {
        format!("the machine is busy (load average {load:.2} on {cpus} CPUs): the measurements, and the pins, will reflect that")
    })
}

/// A program installed beside this one.
fn sibling(name: &str) -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let p = exe.with_file_name(name);
    if p.is_file() { Ok(p) } else { Err(format!("{} not found (give --perftest PATH)", p.display())) }
}
