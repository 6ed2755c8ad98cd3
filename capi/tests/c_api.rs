//! The C tests of `libucc.so.1`: programs written like UCC's consumers
//! (`tests/c/*.c`), compiled with the system C compiler against the
//! header and library that `ferrocoll-ucc-install` puts in a prefix (as a
//! user builds against an installed UCC), and run as 2 and 4 ranks
//! (fork()ed processes with a shared-memory OOB); where `mpicc` and
//! `mpirun` exist, Open MPI's life cycle also runs under `mpirun` with an
//! MPI OOB.
//!
//! Without a C compiler (or MPI) the tests print that they skipped and why;
//! `REQUIRE_CC=1` (`REQUIRE_MPI=1`) makes that a failure, as `.ci/run` sets.

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

/// Whether `REQUIRE_<what>=1` asks that a test never skip for want of a tool.
fn required(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| v == "1")
}

fn runs(cmd: &str) -> bool {
    let ok = Command::new(cmd).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status();
    ok.is_ok_and(|s| s.success())
}

fn compiler(var: &str, default: &str) -> Option<String> {
    let cc = std::env::var(var).unwrap_or_else(|_| default.to_string());
    runs(&cc).then_some(cc)
}

/// Say that `what` skipped and why, or fail under `REQUIRE_<var>=1`.
fn skip(var: &str, what: &str, why: &str) {
    assert!(!required(var), "{var}=1 but {what} cannot run: {why}");
    println!("skipped {what}: {why}");
}

/// The C compiler, or `None` after saying why the test skips.
fn cc() -> Option<String> {
    let cc = compiler("CC", "cc");
    if cc.is_none() {
        skip("REQUIRE_CC", "the C tests of libucc.so.1", "no C compiler (cc, or $CC)");
    }
    cc
}

/// A prefix made by `ferrocoll-ucc-install` from the library cargo built
/// (`lib/libucc.so.1`, `lib/libucc.so`, `include/ucc/api/*.h`), once per
/// test binary: the programs are built against what a user would install.
fn prefix() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("capi-c-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        // Where the test binary was moved away from cargo's tree (scripts/gpu-check.sh
        // carries it to a GPU machine), the installer is named by FERROCOLL_UCC_INSTALL.
        let installer = std::env::var_os("FERROCOLL_UCC_INSTALL")
            .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_ferrocoll-ucc-install")), PathBuf::from);
        let out = Command::new(installer)
            .arg("--prefix")
            .arg(&dir)
            .arg("--lib")
            .arg(built_lib())
            .output()
            .expect("run ferrocoll-ucc-install");
        assert!(out.status.success(), "ferrocoll-ucc-install failed: {}", String::from_utf8_lossy(&out.stderr));
        dir
    })
}

/// Compile `tests/c/<name>.c` (C11, warnings as errors) and link it
/// against the installed library, once per test binary (tests share programs).
fn build(cc: &str, name: &str) -> PathBuf {
    build_as(cc, name, name, &[])
}

/// [`build`] into the program `exe` with extra compiler arguments.
fn build_as(cc: &str, name: &str, exe: &str, extra: &[&str]) -> PathBuf {
    static BUILT: Mutex<Vec<(String, PathBuf)>> = Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, path)) = built.iter().find(|(n, _)| n == exe) {
        return path.clone();
    }
    let path = compile(cc, name, exe, extra);
    built.push((exe.to_string(), path.clone()));
    path
}

fn compile(cc: &str, name: &str, exe: &str, extra: &[&str]) -> PathBuf {
    let prefix = prefix();
    let lib = prefix.join("lib");
    let src = crate_dir().join("tests/c").join(format!("{name}.c"));
    let exe = prefix.join(exe);
    let out = Command::new(cc)
        .args(["-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror", "-O1", "-g"])
        .args(extra)
        .arg("-I")
        .arg(prefix.join("include"))
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .arg("-L")
        .arg(&lib)
        .arg(format!("-Wl,-rpath,{}", lib.display()))
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
    run_or_skip_with_stderr(exe, ranks, env).map(|(stdout, _)| stdout)
}

/// [`run_or_skip`], with what the program wrote on stderr too.
fn run_or_skip_with_stderr(exe: &Path, ranks: usize, env: &[(&str, &std::ffi::OsStr)]) -> Option<(String, String)> {
    let mut cmd = Command::new(exe);
    cmd.arg(ranks.to_string()).envs(env.iter().copied());
    run_command(cmd, &exe.display().to_string(), ranks, "ranks passed")
}

/// Run `cmd` (the program `what` on `ranks` ranks) and check that it said
/// "`<ranks> <passed>`"; its stdout and stderr, or `None` when every rank skipped.
fn run_command(mut cmd: Command, what: &str, ranks: usize, passed: &str) -> Option<(String, String)> {
    // One multi-process run at a time: they compete for the same cores.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start the test program");
    let (out, killed) = wait_limited(child);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if !killed && out.status.code() == Some(SKIPPED) {
        println!("{what}: {}", stdout.trim());
        return None;
    }
    let passed = format!("{ranks} {passed}");
    assert!(
        !killed && out.status.success() && stdout.contains(&passed),
        "{what} with {ranks} ranks {}:\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        if killed { "hung (killed)" } else { "failed" }
    );
    Some((stdout.into_owned(), stderr.into_owned()))
}

/// [`run_or_skip`] for programs that never skip.
fn run(exe: &Path, ranks: usize, env: &[(&str, &std::ffi::OsStr)]) -> String {
    run_or_skip(exe, ranks, env).unwrap_or_else(|| panic!("{} skipped", exe.display()))
}

/// Build and run the program `name` on `ranks` ranks at UCC's default log
/// level, which prints nothing below a warning: what a consumer's users see
/// is their own output (a debug line on every collective with a hint, which
/// Open MPI sets on each, would bury it).
fn program(name: &str, ranks: usize) {
    let Some(cc) = cc() else { return };
    let exe = build(&cc, name);
    let env = [("UCC_LOG_LEVEL", std::ffi::OsStr::new("warn"))];
    let (stdout, stderr) =
        run_or_skip_with_stderr(&exe, ranks, &env).unwrap_or_else(|| panic!("{} skipped", exe.display()));
    let chatty: Vec<&str> = stderr.lines().filter(|l| l.contains("] Debug: ") || l.contains("] Info: ")).collect();
    assert!(chatty.is_empty(), "{name} at UCC_LOG_LEVEL=warn printed:\n{}", chatty.join("\n"));
    print!("{stdout}");
}

#[test]
fn layout_matches_ucc_abi_in_c_and_cxx() {
    let Some(cc) = cc() else { return };
    // Compiling is the test: every size and offset is a static assertion.
    build(&cc, "layout");
    match compiler("CXX", "c++") {
        None => skip("REQUIRE_CC", "the C++ half", "no C++ compiler (c++, or $CXX)"),
        Some(cxx) => {
            let out = Command::new(cxx)
                .args(["-std=c++17", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", "-x", "c++", "-I"])
                .arg(prefix().join("include"))
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

/// `mpicc` and `mpirun`, or `None` after saying why the MPI tests skip.
fn mpi() -> Option<(String, String)> {
    match (compiler("MPICC", "mpicc"), runs("mpirun")) {
        (Some(mpicc), true) => Some((mpicc, "mpirun".to_string())),
        _ => {
            let why = "no mpicc or mpirun (Open MPI: apt-get install libopenmpi-dev openmpi-bin)";
            skip("REQUIRE_MPI", "the MPI run of ompi_like.c", why);
            None
        }
    }
}

/// Open MPI's coll/ucc as it really bootstraps: `ompi_like.c` built with
/// mpicc (`-DHARNESS_MPI`: the OOB is `MPI_Iallgather` + `MPI_Test` on
/// MPI_COMM_WORLD) and started by `mpirun -np ranks`.
fn open_mpi_under_mpirun(ranks: usize) {
    if cc().is_none() {
        return;
    }
    let Some((mpicc, mpirun)) = mpi() else { return };
    let exe = build_as(&mpicc, "ompi_like", "ompi_like_mpi", &["-DHARNESS_MPI"]);
    let mut cmd = Command::new(mpirun);
    // Oversubscribed (CI machines have few cores) and allowed to run as
    // root (containers): both are mpirun's refusals, not the test's.
    cmd.args(["--oversubscribe", "-np", &ranks.to_string()])
        .arg(&exe)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    let out = run_command(cmd, &format!("mpirun {}", exe.display()), ranks, "ranks passed (MPI)");
    print!("{}", out.unwrap_or_else(|| panic!("{} skipped under mpirun", exe.display())).0);
}

#[test]
fn open_mpi_life_cycle_under_mpirun_on_2_ranks() {
    open_mpi_under_mpirun(2);
}

#[test]
fn open_mpi_life_cycle_under_mpirun_on_4_ranks() {
    open_mpi_under_mpirun(4);
}

#[test]
fn pytorch_process_group_on_2_ranks() {
    program("torch_like", 2);
}

#[test]
fn pytorch_process_group_on_4_ranks() {
    program("torch_like", 4);
}

/// A completion callback that destroys its own context from inside
/// `ucc_context_progress` is refused, and the context goes on working.
#[test]
fn a_callback_that_destroys_its_context_inside_progress_is_refused() {
    program("callbacks", 2);
}

/// Hostile arguments (types, masks, flags, datatypes, counts that
/// overflow, NULL arrays, NaN and infinite timeouts, ...): each init is
/// refused with an error status or runs to completion; no crash, no hang.
/// A team of one, so that a call one rank refuses and another takes cannot
/// leave the latter waiting; the library's error log is off (30 000 lines).
#[test]
fn hostile_collective_arguments_are_refused_or_run() {
    let Some(cc) = cc() else { return };
    let exe = build(&cc, "hostile_args");
    print!("{}", run(&exe, 1, &[("UCC_LOG_LEVEL", std::ffi::OsStr::new("n"))]));
}

/// The same on several ranks: each rank refuses and takes calls of its
/// own, so the ranks post collectives that differ, which must fail naming
/// the calls within seconds (the program's `HOSTILE_WAIT_S`), whatever
/// their timeouts. With the shm TL (its call board shows every post), and
/// on ranks of hosts of their own (the p2p TL over TCP), where ranks whose
/// calls differ meet through stray messages, notices, probes and answers
/// to probes (each ~1 s).
#[test]
fn hostile_collective_arguments_on_ranks_whose_calls_differ() {
    let Some(cc) = cc() else { return };
    let exe = build(&cc, "hostile_args");
    let os = std::ffi::OsStr::new;
    let quiet = ("UCC_LOG_LEVEL", os("n"));
    print!("{}", run(&exe, 4, &[quiet, ("HOSTILE_N", os("3000"))]));
    print!("{}", run(&exe, 3, &[quiet, ("HOSTILE_N", os("300")), ("HARNESS_HOSTS", os("3"))]));
}

/// What an H200 found, on the fake CUDA driver and the fake NCCL: ranks on
/// three hosts take and refuse calls on CUDA memory differently, so some
/// wait in TL/NCCL for a communicator that never comes (a creation that
/// needs every rank), while others wait for them in p2p collectives; every
/// call must still end within `HOSTILE_WAIT_S`.
#[test]
fn hostile_collective_arguments_on_gpu_memory_across_hosts_on_the_fakes() {
    const TEST: &str = "hostile_collective_arguments_on_gpu_memory_across_hosts_on_the_fakes";
    let Some(cc) = cc() else { return };
    let cuda = match ferrocoll_tests::fake_cuda::fake() {
        Ok(f) => f,
        Err(why) => return ferrocoll_tests::fake_cuda::skip(TEST, &why),
    };
    let nccl = match ferrocoll_tests::fake_nccl::fake() {
        Ok(d) => d,
        Err(why) => return ferrocoll_tests::fake_cuda::skip(TEST, &why),
    };
    let exe = build(&cc, "hostile_args");
    let path = std::env::join_paths([cuda.dir(), nccl]).expect("a loader path");
    let os = std::ffi::OsStr::new;
    let env = [
        ("LD_LIBRARY_PATH", path.as_os_str()),
        ("FAKE_NCCL_INIT_HANG", os("1")),
        ("HARNESS_HOSTS", os("3")),
        ("HOSTILE_N", os("300")),
        ("UCC_LOG_LEVEL", os("n")),
    ];
    print!("{}", run(&exe, 3, &env));
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
        return skip("REQUIRE_CC", "the symbol check", "no nm to list the library's symbols");
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
        Err(_) => skip("REQUIRE_CC", "the soname check", "no readelf"),
    }
}
