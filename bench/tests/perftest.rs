//! `ferrocoll-perftest` end to end: checked sweeps over thread ranks, the
//! CSV and JSON files, bad options, and processes through the launcher.

use std::path::PathBuf;
use std::process::{Command, Output};

const PERFTEST: &str = env!("CARGO_BIN_EXE_ferrocoll-perftest");
const RUN: &str = env!("CARGO_BIN_EXE_ferrocoll-run");

fn perftest(args: &[&str]) -> Output {
    Command::new(PERFTEST).args(args).output().expect("start ferrocoll-perftest")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn out_file(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("ferrocoll-perftest-test-{}-{name}", std::process::id()))
}

/// Run a checked sweep on 3 thread ranks and return the parsed JSON.
fn checked_sweep(args: &[&str]) -> serde_json::Value {
    let tag = args.join("_").replace([' ', '-', '/'], "");
    let (csv, json) = (out_file(&format!("{tag}.csv")), out_file(&format!("{tag}.json")));
    let mut all = vec!["--threads", "3", "--check", "-b", "1", "-e", "64", "-f", "4", "-n", "3", "-w", "1"];
    all.extend_from_slice(args);
    let (csv_s, json_s) = (csv.display().to_string(), json.display().to_string());
    all.extend_from_slice(&["--csv", &csv_s, "--json", &json_s]);
    let o = perftest(&all);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{args:?}: exit {:?}\n{out}\n{err}", o.status.code());
    assert!(out.contains("Collective:"), "{out}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).expect("json file")).expect("JSON");
    let rows = v["results"].as_array().expect("results").len();
    let csv_text = std::fs::read_to_string(&csv).expect("csv file");
    assert_eq!(csv_text.lines().count(), rows + 1, "{csv_text}");
    assert!(csv_text.starts_with("collective,datatype,op,ranks,"));
    let _ = (std::fs::remove_file(csv), std::fs::remove_file(json));
    v
}

#[test]
fn checked_sweeps_over_thread_ranks() {
    let cases: &[&[&str]] = &[
        &["-c", "allreduce"],
        &["-c", "allreduce", "-d", "int8", "-o", "max"],
        &["-c", "allreduce", "-d", "float64_complex", "-o", "prod"],
        &["-c", "allreduce", "-d", "int32", "-o", "maxloc", "-i"],
        &["-c", "allreduce", "-d", "float8_e4m3", "-p"],
        &["-c", "allreduce", "-d", "uint16", "-o", "bxor"],
        &["-c", "reduce", "-d", "float16", "-o", "avg", "-r", "2", "-i"],
        &["-c", "reduce_scatter", "-d", "bfloat16"],
        &["-c", "reduce_scatterv", "-d", "int64", "-o", "min", "-i"],
        &["-c", "bcast", "-d", "uint8", "-r", "1"],
        &["-c", "allgather", "-d", "float128"],
        &["-c", "allgatherv", "-d", "float64", "-i"],
        &["-c", "alltoall", "-d", "int32"],
        &["-c", "alltoallv", "-d", "int16"],
        &["-c", "gather", "-d", "int64", "-r", "1", "-i"],
        &["-c", "gatherv", "-d", "float32_complex"],
        &["-c", "scatter", "-d", "uint32", "-r", "2"],
        &["-c", "scatterv", "-d", "int128", "-p"],
    ];
    for args in cases {
        let v = checked_sweep(args);
        let rows = v["results"].as_array().expect("results");
        // -b 1 -e 64 -f 4: counts 1, 4, 16, 64
        let blocks: Vec<u64> = rows.iter().map(|r| r["block_count"].as_u64().unwrap_or(0)).collect();
        assert_eq!(blocks, vec![1, 4, 16, 64], "{args:?}");
        assert_eq!(v["ranks"], 3);
        for r in rows {
            assert_eq!(r["checked"], true);
            assert!(r["time_avg_us"].as_f64().is_some_and(|t| t > 0.0), "{args:?}: {r}");
            assert!(r["algorithm"].as_str().is_some_and(|a| a.contains('/')), "{args:?}: {r}");
        }
    }
}

#[test]
fn counts_and_sizes_follow_ucc_perftest() {
    let v = checked_sweep(&["-c", "alltoall", "-d", "int32"]);
    let first = &v["results"][0];
    // block 1 per peer: each rank's source holds 3 elements of 4 bytes
    assert_eq!((first["count"].as_u64(), first["size_bytes"].as_u64()), (Some(3), Some(12)));
    let v = checked_sweep(&["-c", "allreduce", "-d", "float64"]);
    let last = &v["results"][3];
    assert_eq!((last["count"].as_u64(), last["size_bytes"].as_u64()), (Some(64), Some(512)));
    // allreduce on 3 ranks: busbw = 2·2/3 · size / time
    let t = last["time_avg_us"].as_f64().unwrap_or(0.0);
    let bw = last["busbw_avg_gbs"].as_f64().unwrap_or(-1.0);
    assert!((bw - 512.0 * 4.0 / 3.0 / t / 1e3).abs() < 1e-9, "{last}");
}

/// `--per-rank`: a line per rank under each size, and in the JSON each
/// rank's spread, whose means average to the row's.
#[test]
fn per_rank_spreads_in_the_table_and_the_json() {
    let v = checked_sweep(&["-c", "gather", "-r", "1", "--per-rank"]);
    for r in v["results"].as_array().expect("results") {
        let ranks = r["per_rank"].as_array().expect("per_rank");
        assert_eq!(ranks.len(), 3, "{r}");
        let mut sum = 0.0;
        for (i, s) in ranks.iter().enumerate() {
            assert_eq!(s["rank"].as_u64(), Some(i as u64), "{r}");
            let q = |k: &str| s[k].as_f64().unwrap_or(-1.0);
            assert!(0.0 < q("p10_us") && q("p10_us") <= q("p50_us") && q("p50_us") <= q("p99_us"), "{s}");
            assert!(q("p99_us") <= q("max_us") && q("mean_us") <= q("max_us"), "{s}");
            sum += q("mean_us");
        }
        let avg = r["time_avg_us"].as_f64().unwrap_or(0.0);
        assert!((sum / 3.0 - avg).abs() <= 1e-9 * avg.max(1.0), "{r}");
    }
    let o = perftest(&["--threads", "2", "-c", "barrier", "-n", "5", "-w", "1", "--per-rank"]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    for rank in 0..2 {
        assert_eq!(out.lines().filter(|l| l.trim_start().starts_with(&format!("rank {rank} "))).count(), 1, "{out}");
    }
    let plain = text(&perftest(&["--threads", "2", "-c", "barrier", "-n", "5", "-w", "1"]).stdout);
    assert!(!plain.contains("rank 0 "), "without --per-rank: {plain}");
}

#[test]
fn collectives_without_data_print_one_row() {
    for coll in ["barrier", "fanin", "fanout"] {
        let o = perftest(&["--threads", "3", "-c", coll, "-n", "5", "-w", "1", "-r", "2"]);
        let out = text(&o.stdout);
        assert!(o.status.success(), "{coll}: {}", text(&o.stderr));
        let rows: Vec<&str> = out.lines().filter(|l| l.trim_start().starts_with("N/A")).collect();
        assert_eq!(rows.len(), 1, "{out}");
    }
}

#[test]
fn bad_options_are_usage_errors_naming_the_option() {
    for (args, names) in [
        (&["-c", "allreduc"][..], "allreduc"),
        (&["-d", "float33"][..], "float33"),
        (&["-o", "sump"][..], "sump"),
        (&["-b", "lots"][..], "-b"),
        (&["-n"][..], "-n"),
        (&["-q"][..], "-q"),
        (&["--frobnicate"][..], "--frobnicate"),
        (&["-f", "1"][..], "-f 1"),
        (&["--np", "2", "--threads", "2"][..], "--np"),
        (&["-b", "64", "-e", "8"][..], "-b 64"),
        // These panicked: allocating the ranks, and adding warm-ups to iterations.
        (&["--np", "18446744073709551615"][..], "--np 18446744073709551615"),
        (&["--threads", "18446744073709551615"][..], "--threads 18446744073709551615"),
        (&["-w", "18446744073709551615", "-n", "1"][..], "-w 18446744073709551615"),
    ] {
        let o = perftest(args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(names), "{args:?}: {err}");
        assert!(err.contains("usage: ferrocoll-perftest"), "{args:?}");
    }
}

/// A result file that cannot be written is refused before the sweep (it
/// was found out after it), and the check leaves no file behind.
#[test]
fn unwritable_result_files_are_refused_before_measuring() {
    for opt in ["--json", "--csv"] {
        let path = "/nonexistent/ferrocoll-perftest-results";
        let o = perftest(&["--threads", "2", "-b", "4", "-e", "4", "-n", "1", "-w", "0", opt, path]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{opt}: {err}");
        assert!(err.contains(&format!("{opt} {path}")), "{opt}: {err}");
        assert!(text(&o.stdout).is_empty(), "{opt}: measured first: {}", text(&o.stdout));
    }
    let fresh = out_file("checked-only.json");
    let _ = std::fs::remove_file(&fresh);
    let o = perftest(&["-c", "bcast", "-r", "1", "-n", "1", "-w", "0", "--json", &fresh.display().to_string()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(!fresh.exists(), "the check left {} behind", fresh.display());
}

#[test]
fn unsupported_requests_say_so() {
    for (args, says) in [
        (&["-m", "rocm"][..], "ROCm memory is not supported"),
        (&["-T"][..], "triggered post"),
        (&["-o", "band", "-d", "float32"][..], "band"),
    ] {
        let o = perftest(args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let o = perftest(&["--threads", "2", "-c", "bcast", "-r", "5", "-n", "1", "-w", "0"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("-r 5"), "{}", text(&o.stderr));
}

#[test]
fn cuda_memory_without_a_driver_is_refused_naming_it() {
    let o = perftest(&["--threads", "2", "-m", "cuda", "-b", "4", "-e", "4", "-n", "1", "-w", "0", "--check"]);
    let err = text(&o.stderr);
    if o.status.success() {
        // A machine with a CUDA driver and device: the run must have checked out.
        eprintln!("cuda_memory_without_a_driver_is_refused_naming_it: a CUDA device is present; the run passed");
        return;
    }
    assert!(err.contains("libcuda") || err.contains("CUDA"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// Whether the process bootstrap works yet; prints why not if it does not.
fn processes_work(o: &Output) -> bool {
    let err = text(&o.stderr);
    if err.contains("not implemented") || err.contains("NotImplemented") || err.contains("not written yet") {
        eprintln!("SKIPPED: process mode is not available yet (the TCP bootstrap says: {})", err.trim());
        return false;
    }
    true
}

#[test]
fn processes_through_the_launcher() {
    let csv = out_file("np.csv");
    let csv_s = csv.display().to_string();
    let o = perftest(&[
        "--np",
        "2",
        "-c",
        "allreduce",
        "-b",
        "1",
        "-e",
        "1024",
        "--check",
        "-n",
        "5",
        "-w",
        "1",
        "--csv",
        &csv_s,
    ]);
    if !processes_work(&o) {
        return;
    }
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{out}\n{err}");
    // rank 0's table is not prefixed; nobody else prints it
    assert!(out.contains("\nCollective:") || out.starts_with("Collective:"), "{out}");
    assert!(out.contains("2 processes on 1 host"), "{out}");
    assert!(!out.contains("[1] Collective"), "{out}");
    assert_eq!(out.lines().filter(|l| l.contains("  ") && l.trim_start().starts_with("1024 ")).count(), 1, "{out}");
    let rows = std::fs::read_to_string(&csv).expect("csv written by rank 0");
    assert_eq!(rows.lines().count(), 12, "{rows}");
    let _ = std::fs::remove_file(csv);
}

#[test]
fn processes_on_emulated_hosts() {
    let o = perftest(&[
        "--np",
        "3",
        "--emulate-hosts",
        "2",
        "-c",
        "alltoall",
        "-d",
        "int32",
        "-b",
        "1",
        "-e",
        "256",
        "-f",
        "16",
        "--check",
        "-n",
        "3",
        "-w",
        "1",
    ]);
    if !processes_work(&o) {
        return;
    }
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("3 processes on 2 hosts (host0: 0-1; host1: 2)"), "{out}");
}

/// The hierarchical allreduce, pinned by name, checked on 2 emulated hosts
/// of 2 ranks and on 3 hosts of 1, 2 and 3 ranks (through ferrocoll-run
/// --emulate-hosts).
#[test]
fn hierarchical_allreduce_on_emulated_hosts() {
    for (np, hosts) in [("4", "2"), ("6", "1,2,3")] {
        let o = Command::new(RUN)
            .args(["-n", np, "--emulate-hosts", hosts, "--timeout", "120", "--", PERFTEST, "-c", "allreduce"])
            .args(["-d", "float64", "-b", "1", "-e", "64k", "-f", "64", "--check", "-n", "3", "-w", "1"])
            .env("UCC_TL_P2P_TUNE", "allreduce:@hier")
            .env_remove("FERROCOLL_EMULATE_LINK")
            .output()
            .expect("start ferrocoll-run");
        let (out, err) = (text(&o.stdout), text(&o.stderr));
        assert!(o.status.success(), "{np} ranks on {hosts} hosts: {out}\n{err}");
        assert!(out.contains("p2p/hier"), "{out}");
        assert!((out + &err).contains("every result of every iteration was correct"), "{np} ranks on {hosts} hosts");
    }
}

/// The topology-aware gather and scatter (and their v forms), pinned by
/// name, checked with spans of several pieces (up to 1 MiB per rank, so the
/// levels pipeline) at a root in the middle: 6 ranks on hosts of 1, 2 and 3
/// under 2 switches, 8 ranks on 4 hosts under 2 switches.
#[test]
fn hierarchical_gather_and_scatter_of_large_blocks_on_emulated_switches() {
    for (np, hosts, root) in [("6", "1,2,3", "3"), ("8", "4", "5")] {
        for coll in ["gather", "gatherv", "scatter", "scatterv"] {
            let o = Command::new(RUN)
                .args(["-n", np, "--emulate-hosts", hosts, "--emulate-switches", "2", "--timeout", "120", "--"])
                .args([PERFTEST, "-c", coll, "-r", root, "-d", "float64", "-b", "5", "-e", "160k", "-f", "32"])
                .args(["--check", "-n", "2", "-w", "1"])
                .env("UCC_TL_P2P_TUNE", format!("{coll}:@hier"))
                .env_remove("FERROCOLL_EMULATE_LINK")
                .output()
                .expect("start ferrocoll-run");
            if !processes_work(&o) {
                return;
            }
            let (out, err) = (text(&o.stdout), text(&o.stderr));
            assert!(o.status.success(), "{coll}, {np} ranks on {hosts} hosts: {out}\n{err}");
            assert!(out.contains("p2p/hier"), "{out}");
            assert!((out + &err).contains("every result of every iteration was correct"), "{coll} on {hosts} hosts");
        }
    }
}

#[test]
fn runs_unchanged_under_a_launcher() {
    let o = Command::new(RUN)
        .args(["-n", "2", "--", PERFTEST, "-c", "bcast", "-b", "8", "-e", "8", "--check", "-n", "3", "-w", "1"])
        .output()
        .expect("start ferrocoll-run");
    if !processes_work(&o) {
        return;
    }
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("[0] Collective:             bcast"), "{out}");
    assert!(!out.lines().any(|l| l.starts_with("[1] ")), "only rank 0 prints: {out}");
}

/// Gather's and scatter's root holds P blocks, the other ranks one: with
/// the default warm-up count, blocks of 16 KiB on 4 ranks put the root's
/// buffer at the 64 KiB threshold and the others' below it. Every rank
/// must still run as many calls (they failed with "calls differ" when each
/// chose by its own buffer).
#[test]
fn rooted_collectives_run_as_many_calls_on_every_rank_across_the_large_threshold() {
    for coll in ["gather", "scatter", "gatherv", "scatterv"] {
        let o = perftest(&["--threads", "4", "-c", coll, "-b", "4096", "-e", "4096", "-n", "3", "--check"]);
        let (out, err) = (text(&o.stdout), text(&o.stderr));
        assert!(o.status.success(), "{coll}: exit {:?}\n{out}\n{err}", o.status.code());
        assert!(out.contains("16384"), "{coll}: the 16 KiB row is missing\n{out}");
    }
}

/// Allreduce, reduce and reduce-scatter(v) by single copy (pinned), checked
/// over vectors (blocks) of several scratch rounds (256 KiB) and with the
/// root in the middle, out of place and in place, on 3 processes and on 2
/// threads.
#[test]
fn reductions_by_single_copy_over_several_rounds() {
    for coll in ["allreduce", "reduce", "reduce_scatter", "reduce_scatterv"] {
        for in_place in [false, true] {
            let mut args = vec!["-c", coll, "-r", "1", "-d", "float64", "-b", "1", "-e", "200k", "-f", "50"];
            args.extend_from_slice(&["--check", "-n", "2", "-w", "1"]);
            if in_place {
                args.push("-i");
            }
            let tune = format!("{coll}:@cma:inf");
            let o = Command::new(RUN)
                .args(["-n", "3", "--timeout", "120", "--", PERFTEST])
                .args(&args)
                .env("UCC_TL_SHM_TUNE", &tune)
                .output()
                .expect("start ferrocoll-run");
            if processes_work(&o) {
                let (out, err) = (text(&o.stdout), text(&o.stderr));
                assert!(o.status.success(), "{coll} (in place: {in_place}): {out}\n{err}");
                assert!(out.contains("shm/cma"), "{out}");
                assert!((out + &err).contains("every result of every iteration was correct"), "{coll}");
            }
            let mut threads = vec!["--threads", "2"];
            threads.extend_from_slice(&args);
            let o = Command::new(PERFTEST).args(&threads).env("UCC_TL_SHM_TUNE", &tune).output().expect("perftest");
            let (out, err) = (text(&o.stdout), text(&o.stderr));
            assert!(o.status.success(), "{coll} (in place: {in_place}), threads: {out}\n{err}");
            assert!(out.contains("shm/cma"), "{out}");
        }
    }
}
