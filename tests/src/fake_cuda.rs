//! The fake CUDA driver: how the GPU tests run on machines without a GPU.
//!
//! `tests/fake_cuda/` is a `libcuda.so.1` written in C (its header says
//! what it emulates and what it does not: no real device concurrency, no
//! separate memory spaces, no PTX execution). This module builds it with
//! gcc (and the kernels for the CPU with g++, [`crate::kernels_emu`], which
//! its launches run), and re-runs one test of the current test binary in a
//! child process with the fake first on `LD_LIBRARY_PATH` — cudarc dlopens
//! the driver by name, so only a process started with that path loads it —
//! with NVRTC's folder too when it is found (the kernels are compiled with
//! the real NVRTC; the fake checks the PTX's entries and runs the same-named
//! CPU kernels). The child writes the fake's counts at exit ([`Report`]).
//!
//! A run on the fake is not a GPU run: it checks the order and pairing of
//! driver calls, stream ordering, error paths and results computed by the
//! kernels' C source on the CPU; what only a GPU shows (the memory model,
//! real concurrency, PTX, performance) it cannot.
//!
//! Without gcc or g++ the tests that need the fake print that they skipped;
//! `REQUIRE_FAKE_CUDA=1` (set by `.ci/run`) makes that a failure.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::native::{Unavailable, required, shared_library};

/// Set in a child (to the fake's folder) so that it runs the test body.
pub const CHILD: &str = "FERROCOLL_FAKE_CUDA_CHILD";

/// `REQUIRE_FAKE_CUDA=1`: a test that would skip for want of the fake fails.
pub const REQUIRE: &str = "REQUIRE_FAKE_CUDA";

/// How long one child may run before it is killed and its test fails.
const CHILD_TIMEOUT: Duration = Duration::from_secs(120);

/// The fake's sources, compiled into one library.
const SOURCES: [(&str, &str); 6] = [
    ("fake_cuda.h", include_str!("../fake_cuda/fake_cuda.h")),
    ("core.c", include_str!("../fake_cuda/core.c")),
    ("memory.c", include_str!("../fake_cuda/memory.c")),
    ("ipc.c", include_str!("../fake_cuda/ipc.c")),
    ("stream.c", include_str!("../fake_cuda/stream.c")),
    ("module.c", include_str!("../fake_cuda/module.c")),
];

const CFLAGS: [&str; 9] =
    ["-std=gnu11", "-O2", "-g", "-Wall", "-Wextra", "-fPIC", "-shared", "-pthread", "-Wl,-soname,libcuda.so.1"];

/// The library's file name, as ferrocoll names the driver; a `libcuda.so`
/// link beside it (cudarc tries that name first).
const LIBRARY: &str = "libcuda.so.1";

/// Build the fake into a cached folder; `hidden` entry points are left out
/// of its exports (a version script), to test a driver that lacks them.
fn build(hidden: &[&str]) -> Result<PathBuf, Unavailable> {
    shared_library("fake-cuda", LIBRARY, &SOURCES, &CFLAGS, hidden, |dir| {
        let link = dir.join("libcuda.so");
        std::os::unix::fs::symlink(LIBRARY, &link)
            .map_err(|e| Unavailable::Fail(format!("link {}: {e}", link.display())))
    })
}

/// The fake driver and the kernel library its launches run.
#[derive(Debug)]
pub struct FakeCuda {
    dir: PathBuf,
    kernels: PathBuf,
}

impl FakeCuda {
    /// The folder holding `libcuda.so.1` (and `libcuda.so`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// The fake driver with every entry point, built once (cached across test
/// binaries): `Skip` without gcc or g++, `Fail` when a source does not build.
pub fn fake() -> Result<&'static FakeCuda, Unavailable> {
    static FAKE: OnceLock<Result<FakeCuda, Unavailable>> = OnceLock::new();
    FAKE.get_or_init(|| {
        let kernels = crate::kernels_emu::library()?.to_path_buf();
        Ok(FakeCuda { dir: build(&[])?, kernels })
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// The folder of a fake driver that lacks the entry points `symbols`.
pub fn fake_without(symbols: &[&str]) -> Result<PathBuf, Unavailable> {
    fake()?;
    build(symbols)
}

/// Whether this process is a child running on the fake.
pub fn is_child() -> bool {
    std::env::var_os(CHILD).is_some()
}

/// In a child: panic unless every `libcuda` mapped into this process is the
/// fake's (so a real driver on the path cannot pass for the fake, nor the
/// reverse). Call after the driver was loaded (the probe).
pub fn assert_fake_loaded(test: &str) {
    let Some(dir) = std::env::var_os(CHILD) else { return };
    let dir = PathBuf::from(dir);
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let cuda: Vec<&str> =
        maps.lines().filter_map(|l| l.split_whitespace().nth(5)).filter(|p| p.contains("/libcuda.so")).collect();
    assert!(!cuda.is_empty(), "{test}: no libcuda is loaded in the fake-driver child");
    for path in cuda {
        assert!(Path::new(path).starts_with(&dir), "{test}: {path} is loaded, not the fake from {}", dir.display());
    }
}

/// The folder holding `libnvrtc.so.13` fetched by `scripts/fetch-nvrtc.sh`
/// (or named by `FERROCOLL_NVRTC_DIR`), if there is one.
pub fn nvrtc_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("FERROCOLL_NVRTC_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/nvrtc/site/nvidia/cu13/lib"),
    };
    dir.join("libnvrtc.so.13").is_file().then_some(dir)
}

/// Whether a child will be able to load NVRTC (the kernels are compiled
/// with it): it is on this process's loader path, or [`nvrtc_dir`] found it.
pub fn nvrtc_reachable() -> bool {
    nvrtc_dir().is_some() || ferrocoll_kernels::nvrtc_probe().is_ok()
}

/// The counts the fake wrote at the child's exit (`key=value` lines; see
/// `fake_cuda.h`). Absent keys read as 0.
#[derive(Clone, Debug, Default)]
pub struct Report(BTreeMap<String, i64>);

impl Report {
    fn parse(text: &str) -> Report {
        Report(
            text.lines()
                .filter_map(|l| l.split_once('='))
                .filter_map(|(k, v)| Some((k.to_string(), v.trim().parse().ok()?)))
                .collect(),
        )
    }

    /// The value of `key`, 0 if absent.
    pub fn get(&self, key: &str) -> i64 {
        self.0.get(key).copied().unwrap_or(0)
    }

    /// Calls of the entry point `sym`.
    pub fn calls(&self, sym: &str) -> i64 {
        self.get(&format!("calls.{sym}"))
    }

    /// Failed calls of the entry point `sym` (injected ones included).
    pub fn errors(&self, sym: &str) -> i64 {
        self.get(&format!("errors.{sym}"))
    }

    /// What any test must leave balanced: no device fault, no block freed
    /// under queued work, no overlapping driver copy, every push popped,
    /// every created stream and event destroyed (idle), every
    /// `cuMemHostAlloc` block freed, every peer allocation opened through
    /// CUDA IPC closed. Empty when all hold.
    pub fn teardown_problems(&self) -> Vec<String> {
        let mut problems: Vec<String> = [
            "faults.illegal_address",
            "faults.freed_in_use",
            "copies.overlapping",
            "streams.destroyed_busy",
            "live.streams",
            "live.events",
            "live.host_alloc",
            "live.ipc_mappings",
        ]
        .iter()
        .filter(|k| self.get(k) != 0)
        .map(|k| format!("{k}={}", self.get(k)))
        .collect();
        if self.get("ctx.pushes") != self.get("ctx.pops") {
            problems.push(format!("{} pushes but {} pops", self.get("ctx.pushes"), self.get("ctx.pops")));
        }
        problems
    }

    /// One line: calls, kernels, blocked waits, events found not ready.
    pub fn summary(&self) -> String {
        let calls: i64 = self.0.iter().filter(|(k, _)| k.starts_with("calls.")).map(|(_, v)| v).sum();
        format!(
            "{calls} driver calls, {} kernels run, {} stream waits blocked, {} event queries not ready",
            self.get("kernels.run"),
            self.get("waits.blocked"),
            self.get("events.not_ready")
        )
    }
}

/// What a child run on the fake left: its report and its output.
#[derive(Debug)]
pub struct Run {
    /// The fake's counts at the child's exit.
    pub report: Report,
    /// The child's stdout and stderr.
    pub output: String,
}

/// Run test `test` of this binary in a child whose driver is the fake in
/// `lib_dir` (the full fake, or one from [`fake_without`]), with `env`
/// added (`FAKE_CUDA_*` knobs; inherited ones are removed). `Ok` when the
/// child ran exactly that one test and it passed.
pub fn run(test: &str, lib_dir: &Path, env: &[(&str, &str)]) -> Result<Run, String> {
    run_with(test, lib_dir, &[], env)
}

/// As [`run`], with `more_dirs` after the fake driver's folder on the
/// child's loader path (the fake NCCL's, `crate::fake_nccl`).
pub fn run_with(test: &str, lib_dir: &Path, more_dirs: &[&Path], env: &[(&str, &str)]) -> Result<Run, String> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let fake = fake().map_err(|e| e.to_string())?;
    let mut path = lib_dir.as_os_str().to_os_string();
    for dir in more_dirs {
        path.push(":");
        path.push(dir);
    }
    if let Some(nvrtc) = nvrtc_dir() {
        path.push(":");
        path.push(nvrtc);
    }
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|o| !o.is_empty()) {
        path.push(":");
        path.push(old);
    }
    let base = std::env::temp_dir().join(format!(
        "ferrocoll-fake-cuda-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let (report_file, out_file) = (base.with_extension("report"), base.with_extension("out"));
    let out = std::fs::File::create(&out_file).map_err(|e| format!("create {}: {e}", out_file.display()))?;
    let err = out.try_clone().map_err(|e| format!("{e}"))?;
    let exe = std::env::current_exe().map_err(|e| format!("the test binary's path: {e}"))?;
    let mut cmd = Command::new(exe);
    cmd.args([test, "--exact", "--nocapture", "--test-threads=1"]);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("FAKE_CUDA_") || k.to_string_lossy().starts_with("FAKE_NCCL_") {
            cmd.env_remove(k);
        }
    }
    cmd.env(CHILD, lib_dir)
        .env("LD_LIBRARY_PATH", path)
        .env("FAKE_CUDA_KERNELS", &fake.kernels)
        .env("FAKE_CUDA_REPORT", &report_file)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    let mut child = cmd.spawn().map_err(|e| format!("spawn the test binary again: {e}"))?;
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if start.elapsed() < CHILD_TIMEOUT => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let output = std::fs::read_to_string(&out_file).unwrap_or_default();
    let report = std::fs::read_to_string(&report_file).ok().map(|t| Report::parse(&t));
    let _ = std::fs::remove_file(&out_file);
    let _ = std::fs::remove_file(&report_file);
    let what = format!("{test} on the fake CUDA driver ({})", lib_dir.display());
    match status {
        None => Err(format!("{what}: killed after {CHILD_TIMEOUT:?}:\n{output}")),
        Some(s) if !s.success() => Err(format!("{what}: the child failed ({s}):\n{output}")),
        Some(_) if !output.contains("test result: ok. 1 passed") => {
            Err(format!("{what}: the child did not run exactly that one test:\n{output}"))
        }
        Some(_) => {
            let report = report.ok_or_else(|| format!("{what}: the fake wrote no report:\n{output}"))?;
            Ok(Run { report, output })
        }
    }
}

/// Print that `test` skipped for want of the fake, or panic under `REQUIRE_FAKE_CUDA=1`.
pub fn skip(test: &str, why: &Unavailable) {
    match why {
        Unavailable::Fail(why) => panic!("{test}: the fake CUDA driver cannot be built: {why}"),
        Unavailable::Skip(why) if required(REQUIRE) => panic!("{test}: {REQUIRE}=1, but {why}"),
        Unavailable::Skip(why) => eprintln!("{test}: skipped: no fake CUDA driver ({why})"),
    }
}

/// Run the GPU test `test` on the full fake (no GPU here: `no_gpu` says
/// why): panics if it fails there or leaves the driver unbalanced
/// ([`Report::teardown_problems`]); prints that it skipped where the fake
/// cannot be built (a failure under `REQUIRE_FAKE_CUDA=1`).
pub fn run_gpu_test(test: &str, no_gpu: &str) {
    let fake = match fake() {
        Ok(f) => f,
        Err(why) => return skip(&format!("{test} (no GPU: {no_gpu})"), &why),
    };
    let run = run(test, fake.dir(), &[]).unwrap_or_else(|e| panic!("{e}"));
    let problems = run.report.teardown_problems();
    assert!(problems.is_empty(), "{test} on the fake CUDA driver left: {}\n{}", problems.join(", "), run.output);
    eprintln!("{test}: no GPU, ran on the fake CUDA driver (a CPU emulation): {}", run.report.summary());
}
