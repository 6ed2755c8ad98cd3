//! The C tests of `libucc.so.1`: programs written like UCC's consumers
//! (`tests/c/*.c`), compiled with the system C compiler against this
//! crate's headers and the library cargo built, and run as 2 and 4 ranks
//! (fork()ed processes with a shared-memory OOB).
//!
//! Without a C compiler the tests print that they skipped and why
//! (`REQUIRE_CC=1` makes that a failure).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// A run longer than this is a hang (each rank also has its own alarm).
const RUN_LIMIT: Duration = Duration::from_secs(180);

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The library cargo built with this test: `target/<profile>/deps/libucc.so`
/// (a test build does not copy it up to `target/<profile>/` as `cargo build` does).
fn built_lib() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary has a path");
    let deps = exe.parent().expect("tests run from target/<profile>/deps");
    let lib = deps.join("libucc.so");
    assert!(lib.exists(), "{} is missing: cargo builds it with this crate", lib.display());
    lib
}

fn compiler(var: &str, default: &str) -> Option<String> {
    let cc = std::env::var(var).unwrap_or_else(|_| default.to_string());
    let ok = Command::new(&cc).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status();
    ok.is_ok_and(|s| s.success()).then_some(cc)
}

/// The C compiler, or `None` after saying why the test skips.
fn cc() -> Option<String> {
    let cc = compiler("CC", "cc");
    if cc.is_none() {
        assert!(std::env::var("REQUIRE_CC").is_err(), "REQUIRE_CC is set but no C compiler runs (cc, or $CC)");
        println!("skipped: no C compiler (cc, or $CC) to build the C tests of libucc.so.1");
    }
    cc
}

/// A directory with `libucc.so.1` and `libucc.so` naming the built library, as an install would.
fn lib_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let lib = built_lib();
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("capi-c-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("make the test directory");
        for name in ["libucc.so.1", "libucc.so"] {
            let link = dir.join(name);
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(&lib, &link).expect("link the library");
        }
        dir
    })
}

/// Compile `tests/c/<name>.c` (C11, warnings as errors) and link it
/// against the library, once per test binary (tests share programs).
fn build(cc: &str, name: &str) -> PathBuf {
    static BUILT: Mutex<Vec<(String, PathBuf)>> = Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, exe)) = built.iter().find(|(n, _)| n == name) {
        return exe.clone();
    }
    let exe = compile(cc, name);
    built.push((name.to_string(), exe.clone()));
    exe
}

fn compile(cc: &str, name: &str) -> PathBuf {
    let dir = lib_dir();
    let src = crate_dir().join("tests/c").join(format!("{name}.c"));
    let exe = dir.join(name);
    let out = Command::new(cc)
        .args(["-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror", "-O1", "-g"])
        .arg("-I")
        .arg(crate_dir().join("include"))
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .arg("-L")
        .arg(dir)
        .arg(format!("-Wl,-rpath,{}", dir.display()))
        .args(["-lucc", "-lpthread", "-ldl"])
        .output()
        .expect("run the C compiler");
    assert!(out.status.success(), "{} does not compile:\n{}", src.display(), String::from_utf8_lossy(&out.stderr));
    exe
}

/// Wait for `child` at most RUN_LIMIT, killing it past that.
fn wait_limited(mut child: std::process::Child) -> (Output, bool) {
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait for the test program").is_some() {
            return (child.wait_with_output().expect("collect the output"), false);
        }
        if start.elapsed() > RUN_LIMIT {
            let _ = child.kill();
            return (child.wait_with_output().expect("collect the output"), true);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Exit status of a program whose ranks all skipped (what they need is missing).
const SKIPPED: i32 = 77;

/// Run `exe` as `ranks` ranks (with `env` added) and check that every rank
/// passed; `None` when they all skipped (the program said why on stdout).
fn run_or_skip(exe: &Path, ranks: usize, env: &[(&str, &std::ffi::OsStr)]) -> Option<String> {
    // One multi-process run at a time: they compete for the same cores.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let child = Command::new(exe)
        .arg(ranks.to_string())
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the test program");
    let (out, killed) = wait_limited(child);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if !killed && out.status.code() == Some(SKIPPED) {
        println!("{}: {}", exe.display(), stdout.trim());
        return None;
    }
    let passed = format!("{ranks} ranks passed");
    assert!(
        !killed && out.status.success() && stdout.contains(&passed),
        "{} with {ranks} ranks {}:\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        exe.display(),
        if killed { "hung (killed)" } else { "failed" }
    );
    Some(stdout.into_owned())
}

/// [`run_or_skip`] for programs that never skip.
fn run(exe: &Path, ranks: usize, env: &[(&str, &std::ffi::OsStr)]) -> String {
    run_or_skip(exe, ranks, env).unwrap_or_else(|| panic!("{} skipped", exe.display()))
}

fn program(name: &str, ranks: usize) {
    let Some(cc) = cc() else { return };
    let exe = build(&cc, name);
    print!("{}", run(&exe, ranks, &[]));
}

#[test]
fn layout_matches_ucc_abi_in_c_and_cxx() {
    let Some(cc) = cc() else { return };
    // Compiling is the test: every size and offset is a static assertion.
    build(&cc, "layout");
    match compiler("CXX", "c++") {
        None => println!("skipped the C++ half: no C++ compiler (c++, or $CXX)"),
        Some(cxx) => {
            let out = Command::new(cxx)
                .args(["-std=c++17", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", "-x", "c++", "-I"])
                .arg(crate_dir().join("include"))
                .arg(crate_dir().join("tests/c/layout.c"))
                .output()
                .expect("run the C++ compiler");
            assert!(out.status.success(), "ucc.h does not compile as C++:\n{}", String::from_utf8_lossy(&out.stderr));
        }
    }
}

#[test]
fn open_mpi_life_cycle_on_2_ranks() {
    program("ompi_like", 2);
}

#[test]
fn open_mpi_life_cycle_on_4_ranks() {
    program("ompi_like", 4);
}

#[test]
fn pytorch_process_group_on_2_ranks() {
    program("torch_like", 2);
}

#[test]
fn pytorch_process_group_on_4_ranks() {
    program("torch_like", 4);
}

#[test]
fn perftest_helpers_and_persistent_collectives_on_2_ranks() {
    program("bench_like", 2);
}

#[test]
fn perftest_helpers_and_persistent_collectives_on_4_ranks() {
    program("bench_like", 4);
}

/// PyTorch's CUDA path (device buffers, a triggered post on its stream) on
/// the fake CUDA driver: call order and stream ordering, emulated on the CPU.
#[test]
fn cuda_stream_engine_on_the_fake_driver() {
    let Some(cc) = cc() else { return };
    let fake = match ferrocoll_tests::fake_cuda::fake() {
        Ok(f) => f,
        Err(why) => return ferrocoll_tests::fake_cuda::skip("cuda_stream_engine_on_the_fake_driver", &why),
    };
    let exe = build(&cc, "cuda_like");
    let path = std::env::join_paths([fake.dir()]).expect("a loader path");
    let out = run_or_skip(&exe, 2, &[("LD_LIBRARY_PATH", &path)]);
    assert!(out.is_some(), "the fake CUDA driver in {} was not usable", fake.dir().display());
    println!("ran on the fake CUDA driver (a CPU emulation, not a GPU)");
}

/// The same on this machine's driver: a GPU run where there is one, else it skips.
#[test]
fn cuda_stream_engine_on_this_machines_driver() {
    let Some(cc) = cc() else { return };
    let exe = build(&cc, "cuda_like");
    if let Some(out) = run_or_skip(&exe, 2, &[]) {
        print!("{out}");
    }
}

/// UCC's consumers, linked against UCC, find every function they call and
/// both data objects at UCC's sizes (a copy relocation copies exactly that
/// many bytes), under UCC's soname.
#[test]
fn exports_ucc_symbols_under_its_soname() {
    let lib = built_lib();
    let Ok(out) = Command::new("nm").args(["-D", "-S", "--defined-only"]).arg(&lib).output() else {
        println!("skipped: no nm to list the library's symbols");
        return;
    };
    assert!(out.status.success(), "nm failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let size_of = |name: &str| {
        text.lines().find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 4 && f[3] == name).then(|| u64::from_str_radix(f[1], 16).unwrap_or(0))
        })
    };
    let exported = |name: &str| text.lines().any(|l| l.split_whitespace().last() == Some(name));
    let consumers = [
        "ucc_get_version",
        "ucc_init_version",
        "ucc_finalize",
        "ucc_lib_config_read",
        "ucc_lib_config_modify",
        "ucc_lib_config_release",
        "ucc_lib_get_attr",
        "ucc_context_config_read",
        "ucc_context_config_modify",
        "ucc_context_config_release",
        "ucc_context_create",
        "ucc_context_destroy",
        "ucc_context_progress",
        "ucc_context_get_attr",
        "ucc_team_create_post",
        "ucc_team_create_test",
        "ucc_team_destroy",
        "ucc_collective_init",
        "ucc_collective_post",
        "ucc_collective_finalize",
        "ucc_collective_triggered_post",
        "ucc_ee_create",
        "ucc_ee_destroy",
        "ucc_ee_get_event",
        "ucc_ee_ack_event",
        "ucc_status_string",
        "ucc_mc_available",
        "ucc_mc_alloc",
        "ucc_mc_free",
        "ucc_mc_memset",
        "ucc_mc_memcpy",
        "ucc_str_to_memunits",
        "ucc_ee_executor_init",
        "ucc_ee_executor_start",
        "ucc_ee_executor_stop",
        "ucc_ee_executor_finalize",
        "ucc_ee_executor_task_post",
        "ucc_ee_executor_task_test",
        "ucc_ee_executor_task_finalize",
    ];
    let rest_of_ucc_h = [
        "ucc_get_version_string",
        "ucc_lib_config_print",
        "ucc_context_config_print",
        "ucc_collective_init_and_post",
        "ucc_team_get_attr",
        "ucc_team_create_from_parent",
        "ucc_ee_set_event",
        "ucc_ee_wait",
        "ucc_mem_map",
        "ucc_mem_unmap",
        "ucc_dt_create_generic",
        "ucc_dt_destroy",
        "ucc_ee_executor_status",
    ];
    let missing: Vec<&str> = consumers.iter().chain(&rest_of_ucc_h).copied().filter(|n| !exported(n)).collect();
    assert!(missing.is_empty(), "libucc.so does not export {missing:?}");
    assert_eq!(size_of("ucc_dt_predefined_sizes"), Some(18 * 8), "size_t[18]");
    assert_eq!(size_of("ucc_memory_type_names"), Some(8 * 8), "const char *[8]");
    // Nothing but UCC's names leaks out (Rust's own symbols stay hidden).
    let foreign: Vec<&str> =
        text.lines().filter_map(|l| l.split_whitespace().last()).filter(|n| !n.starts_with("ucc_")).collect();
    assert!(foreign.is_empty(), "exports beyond ucc_*: {foreign:?}");
    match Command::new("readelf").arg("-d").arg(&lib).output() {
        Ok(o) => assert!(String::from_utf8_lossy(&o.stdout).contains("[libucc.so.1]"), "soname is not libucc.so.1"),
        Err(_) => println!("skipped the soname check: no readelf"),
    }
}
