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

/// The SHARP test double every conformance run loads (`None`: TL/SHARP is
/// off here, and its algorithms are left out, saying why).
fn sharp_double() -> Option<&'static std::path::Path> {
    static DOUBLE: std::sync::OnceLock<Option<ferrocoll_tests::fake_sharp::Instance>> = std::sync::OnceLock::new();
    DOUBLE
        .get_or_init(|| ferrocoll_tests::fake_sharp::instance_or_skip("conformance (TL/SHARP)", "", false))
        .as_ref()
        .map(|i| i.path.as_path())
}

/// Whether TL/SHARP runs `case` with `alg` rather than refusing it (its
/// datatypes and operations; `hier` needs several hosts, and `sat` equal
/// blocks, which in-place cases here do not always have: both are run by
/// tests/tests/tl_sharp.rs).
fn sharp_runs(case: &Case, alg: &str) -> bool {
    use ferrocoll::{DataType as D, ReduceOp as O};
    let dtype = matches!(
        case.dtype,
        D::Int8
            | D::Uint8
            | D::Int16
            | D::Uint16
            | D::Int32
            | D::Uint32
            | D::Int64
            | D::Uint64
            | D::Float16
            | D::Bfloat16
            | D::Float32
            | D::Float64
    );
    let op = !case.coll.is_reduction()
        || matches!(case.op, O::Sum | O::Max | O::Min | O::Land | O::Lor | O::Lxor | O::Band | O::Bor | O::Bxor);
    alg != "hier" && !(alg == "sat" && case.in_place) && (!case.coll.is_reduction() || dtype) && op
}

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
        // TL/SHARP serves teams of two or more, with its test double.
        if tl.name() == "sharp" && (size < 2 || sharp_double().is_none()) {
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
        let mut config = Config::new();
        if let Some(lib) = sharp_double() {
            config.set("TL_SHARP_LIB", lib.to_string_lossy().into_owned());
        }
        let per_rank = world::run(size, &config, {
            let (algs, cases) = (algs.clone(), cases.clone());
            move |_team: &Team, ctx| -> Result<Vec<(String, u64)>, String> {
                let mut digests = Vec::new();
                for &(tl, alg) in &algs {
                    let team =
                        Team::create(ctx, pinned(tl, coll, alg)).map_err(|e| format!("{tl}/{alg}: team: {e}"))?;
                    for case in cases.iter().filter(|c| tl != "sharp" || sharp_runs(c, alg)) {
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
