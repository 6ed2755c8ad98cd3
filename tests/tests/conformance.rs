//! The conformance matrix over teams of threads: every collective × every
//! algorithm × team sizes 1, 2, 3, 4, 5, 7, 8, 11, 16 × the cases of
//! `ferrocoll_tests::cases::matrix` (which documents how the datatype, op,
//! count, in-place, persistent, root and count-width axes are sampled).
//! Every result is checked against an independent reference; allreduce
//! results must also be bit-identical on every rank.

use std::collections::BTreeMap;

use ferrocoll::{CollType, Config, Lib, Team, TeamParams};
use ferrocoll_tests::cases::{Case, matrix};
use ferrocoll_tests::runner::{must_agree, run_case};
use ferrocoll_tests::world;

const SIZES: [usize; 9] = [1, 2, 3, 4, 5, 7, 8, 11, 16];

/// (TL, algorithm) pairs to run for a collective on a team of `size`.
fn algorithms(coll: CollType, size: usize) -> Vec<(&'static str, &'static str)> {
    let lib = Lib::new().expect("library");
    let mut out = Vec::new();
    for tl in lib.tls() {
        if tl.name() == "self" && size != 1 {
            continue;
        }
        // Host memory only here: TL/NCCL serves CUDA memory (its cases run in gpu_nccl.rs).
        if tl.name() == "nccl" {
            continue;
        }
        for a in tl.algorithms().iter().filter(|a| a.coll == coll) {
            out.push((tl.name(), a.name));
        }
    }
    out
}

/// Team parameters that make `tl/alg` the choice for `coll` (the self TL,
/// which would win teams of one, is switched off unless it is the one pinned).
fn pinned(tl: &str, coll: CollType, alg: &str) -> TeamParams {
    let mut p = TeamParams::default();
    if tl != "self" {
        p = p
            .set(&format!("TL_{}_TUNE", tl.to_ascii_uppercase()), format!("{coll}:@{alg}:inf"))
            .set("TL_SELF_TUNE", "0");
    }
    p
}

fn conformance(coll: CollType) {
    let mut failures = Vec::new();
    let mut total = 0;
    for size in SIZES {
        let started = std::time::Instant::now();
        let algs = algorithms(coll, size);
        let cases = matrix(coll, size, size as u64 * 7919 + coll.index() as u64);
        total += algs.len() * cases.len();
        let per_rank = world::run(size, &Config::new(), {
            let (algs, cases) = (algs.clone(), cases.clone());
            move |_team: &Team, ctx| -> Result<Vec<(String, u64)>, String> {
                let mut digests = Vec::new();
                for &(tl, alg) in &algs {
                    let team =
                        Team::create(ctx, pinned(tl, coll, alg)).map_err(|e| format!("{tl}/{alg}: team: {e}"))?;
                    for case in &cases {
                        let out = run_case(&team, case)
                            .map_err(|e| format!("size {size} {tl}/{alg}: {case}: rank {}: {e}", team.rank()))?;
                        // Zero-size collectives complete without an algorithm (UCC's short-cut).
                        if out.selected != format!("{tl}/{alg}") && out.selected != "none/zero-size" {
                            return Err(format!("{case}: pinned {tl}/{alg} but {} ran", out.selected));
                        }
                        digests.push((format!("{tl}/{alg}: {case}"), out.digest));
                    }
                }
                Ok(digests)
            }
        });
        let mut agreed: BTreeMap<String, u64> = BTreeMap::new();
        for (rank, r) in per_rank.into_iter().enumerate() {
            match r {
                Err(e) => failures.push(e),
                Ok(digests) => {
                    for (name, d) in digests {
                        let case_agrees = cases.iter().any(|c: &Case| must_agree(c) && name.ends_with(&c.to_string()));
                        if !case_agrees {
                            continue;
                        }
                        let first = *agreed.entry(name.clone()).or_insert(d);
                        if first != d {
                            failures.push(format!("size {size}: {name}: rank {rank}'s result differs from rank 0's"));
                        }
                    }
                }
            }
        }
        eprintln!(
            "{coll} size {size}: {} algorithms x {} cases in {:.1} s",
            algs.len(),
            cases.len(),
            started.elapsed().as_secs_f64()
        );
        if !failures.is_empty() {
            break;
        }
    }
    eprintln!("{coll}: {total} cases");
    assert!(
        failures.is_empty(),
        "{} failures, first ones:\n{}",
        failures.len(),
        failures[..failures.len().min(8)].join("\n")
    );
}

macro_rules! conformance_tests {
    ($($name:ident => $coll:ident),* $(,)?) => {
        $(#[test] fn $name() { conformance(CollType::$coll) })*
    };
}

conformance_tests!(
    allgather => Allgather,
    allgatherv => Allgatherv,
    allreduce => Allreduce,
    alltoall => Alltoall,
    alltoallv => Alltoallv,
    barrier => Barrier,
    bcast => Bcast,
    fanin => Fanin,
    fanout => Fanout,
    gather => Gather,
    gatherv => Gatherv,
    reduce => Reduce,
    reduce_scatter => ReduceScatter,
    reduce_scatterv => ReduceScatterv,
    scatter => Scatter,
    scatterv => Scatterv,
);
