//! The configuration file (`UCC_CONFIG_FILE`) as the perftest's library
//! reads it, and `ferrocoll-tune` end to end on a tiny sweep.

use std::path::PathBuf;
use std::process::{Command, Output};

const PERFTEST: &str = env!("CARGO_BIN_EXE_ferrocoll-perftest");
const TUNE: &str = env!("CARGO_BIN_EXE_ferrocoll-tune");

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn scratch(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("ferrocoll-tune-test-{}-{name}", std::process::id()))
}

/// A 2-thread-rank allreduce of 8 bytes with `env`; its output.
fn allreduce_with(env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(PERFTEST);
    c.args(["--threads", "2", "-c", "allreduce", "-b", "2", "-e", "2", "-n", "3", "-w", "1", "--check"]);
    c.env_remove("UCC_TL_SHM_TUNE").env_remove("UCC_CONFIG_FILE");
    c.envs(env.iter().copied());
    c.output().expect("start ferrocoll-perftest")
}

/// The algorithm column of the one result row.
fn algorithm(o: &Output) -> String {
    let out = text(&o.stdout);
    assert!(o.status.success(), "exit {:?}\n{out}\n{}", o.status.code(), text(&o.stderr));
    let row = out.lines().rev().find(|l| l.trim_start().starts_with('2')).unwrap_or_else(|| panic!("no row in\n{out}"));
    row.split_whitespace().last().unwrap_or_default().to_string()
}

#[test]
fn the_config_file_pins_an_algorithm_and_the_environment_wins_over_it() {
    let file = scratch("pin.conf");
    std::fs::write(&file, "# pinned\nUCC_TL_SHM_TUNE=allreduce:@rsag:inf\n").unwrap();
    let path = file.display().to_string();
    assert_eq!(algorithm(&allreduce_with(&[])), "shm/onestep", "the default for 8 bytes");
    assert_eq!(algorithm(&allreduce_with(&[("UCC_CONFIG_FILE", &path)])), "shm/rsag");
    let both = allreduce_with(&[("UCC_CONFIG_FILE", &path), ("UCC_TL_SHM_TUNE", "allreduce:@onestep:inf")]);
    assert_eq!(algorithm(&both), "shm/onestep", "the environment replaces the file's line");
    assert_eq!(algorithm(&allreduce_with(&[("UCC_CONFIG_FILE", "")])), "shm/onestep", "empty: no file");
    std::fs::remove_file(&file).unwrap();
}

#[test]
fn a_malformed_config_file_is_refused_naming_file_and_line() {
    let file = scratch("bad.conf");
    std::fs::write(&file, "UCC_COLL_TRACE=n\nthis line has no equals sign\n").unwrap();
    let o = allreduce_with(&[("UCC_CONFIG_FILE", &file.display().to_string())]);
    let err = text(&o.stderr);
    assert!(!o.status.success(), "a malformed file was accepted");
    assert!(err.contains(&format!("config file {} line 2", file.display())), "{err}");
    std::fs::remove_file(&file).unwrap();
}

#[test]
fn ferrocoll_tune_writes_a_file_the_library_loads() {
    let conf = scratch("tuned.conf");
    // Margin 0: any candidate measured faster than the default is pinned, so
    // the file usually holds tune lines to load (which ones is the machine's call).
    let o = Command::new(TUNE)
        .args(["--np", "2", "-c", "allreduce", "-b", "2", "-e", "8", "-f", "4", "-n", "20", "-w", "2", "-r", "1"])
        .args(["--margin", "0", "-o", &conf.display().to_string()])
        .output()
        .expect("start ferrocoll-tune");
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "exit {:?}\n{out}\n{err}", o.status.code());
    assert!(out.contains("allreduce, 2 ranks (median µs):"), "{out}");
    let written = std::fs::read_to_string(&conf).expect("the file");
    assert!(written.contains("# allreduce, 2 ranks"), "{written}");
    let pairs = ferrocoll::core::config_file::parse_config_text(&written, "tuned").expect("a valid file");
    for (name, value) in &pairs {
        assert!(name.starts_with("UCC_TL_") && name.ends_with("_TUNE"), "{name}");
        ferrocoll::core::score::parse_tune(value).unwrap_or_else(|e| panic!("{name}={value}: {e}"));
    }
    // The library takes the file: a run with it succeeds and checks its results.
    let path = conf.display().to_string();
    let loaded = allreduce_with(&[("UCC_CONFIG_FILE", &path)]);
    assert!(loaded.status.success(), "{}", text(&loaded.stderr));
    std::fs::remove_file(&conf).unwrap();
}

#[test]
fn ferrocoll_tune_measures_streaming_and_writes_a_threshold_the_library_loads() {
    let conf = scratch("stream.conf");
    // Tiny sizes both for the algorithms and for streaming: this checks the
    // plumbing (the sweeps run, the table is written, any threshold line
    // loads), not where streaming wins on this machine.
    let o = Command::new(TUNE)
        .args(["--np", "2", "-c", "bcast", "-b", "2", "-e", "2", "-n", "10", "-w", "1", "-r", "1"])
        .args(["--stream-b", "1k", "--stream-e", "2k", "--margin", "0", "-o", &conf.display().to_string()])
        .output()
        .expect("start ferrocoll-tune");
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "exit {:?}\n{out}\n{err}", o.status.code());
    assert!(out.contains("streaming destinations (UCC_TL_SHM_STREAM_THRESHOLD), 2 ranks"), "{out}");
    for coll in ["bcast", "allgather"] {
        assert!(err.contains(&format!("streaming, {coll}, 2 ranks, round 1 of 1")), "{err}");
    }
    let written = std::fs::read_to_string(&conf).expect("the file");
    assert!(written.contains("# streaming destinations"), "{written}");
    let pairs = ferrocoll::core::config_file::parse_config_text(&written, "tuned").expect("a valid file");
    for (name, value) in &pairs {
        if name == "UCC_TL_SHM_STREAM_THRESHOLD" {
            let bytes: u64 = value.parse().unwrap_or_else(|_| panic!("{name}={value}: not a size"));
            assert!((4096..=2 * 2048 * 4).contains(&bytes), "{name}={value}: not a destination size measured");
        }
    }
    let loaded = allreduce_with(&[("UCC_CONFIG_FILE", &conf.display().to_string())]);
    assert!(loaded.status.success(), "{}", text(&loaded.stderr));
    std::fs::remove_file(&conf).unwrap();
}

/// An -o that cannot be written is refused before anything is measured (it
/// was found out after the whole sweep, hours for a full one).
#[test]
fn ferrocoll_tune_refuses_an_unwritable_output_first() {
    let conf = scratch("no-such-dir").join("tune.conf");
    let o = Command::new(TUNE)
        .args(["-c", "allreduce", "--no-stream", "--perftest", "/nonexistent/ferrocoll-perftest", "-o"])
        .arg(&conf)
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("-o {}", conf.display())), "{err}");
    assert!(!err.contains("round 1"), "measured before checking -o: {err}");
    // A writable -o whose run fails is not left behind empty.
    let conf = scratch("failed-run.conf");
    let o = Command::new(TUNE)
        .args(["-c", "allreduce", "--no-stream", "--perftest", "/nonexistent/ferrocoll-perftest", "-o"])
        .arg(&conf)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(!conf.exists(), "{} was left behind", conf.display());
}

#[test]
fn ferrocoll_tune_usage() {
    let o = Command::new(TUNE).arg("--help").output().unwrap();
    assert!(o.status.success() && text(&o.stdout).contains("UCC_CONFIG_FILE"));
    let o = Command::new(TUNE).args(["--np", "1"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("--np"), "{}", text(&o.stderr));
}
