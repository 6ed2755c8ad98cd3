//! The fake NCCL (`tests/fake_nccl/nccl.c`, a test double of
//! `libnccl.so.2`): built with gcc into a cached folder, and put on the
//! loader path of a child process beside the fake CUDA driver
//! ([`crate::fake_cuda`]), whose stream copies it uses. Its header says
//! what it emulates (non-blocking creation polled, failures injected by
//! `FAKE_NCCL_*`, one-rank collectives as copies) and what it does not.
//!
//! A run on it is not an NCCL run: it checks the order of ferrocoll's calls
//! and its handling of NCCL's answers.

use std::ffi::{CString, c_char, c_longlong};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::fake_cuda::{self, Run};
use crate::native::{Unavailable, shared_library};

const SOURCE: &str = include_str!("../fake_nccl/nccl.c");

const CFLAGS: [&str; 8] =
    ["-std=gnu11", "-O2", "-Wall", "-Wextra", "-fPIC", "-shared", "-pthread", "-Wl,-soname,libnccl.so.2"];

/// The folder holding a fake `libnccl.so.2` without the entry points `hidden`.
pub fn build(hidden: &[&str]) -> Result<PathBuf, Unavailable> {
    shared_library("fake-nccl", "libnccl.so.2", &[("nccl.c", SOURCE)], &CFLAGS, hidden, |_| Ok(()))
}

/// The full fake, built once per process.
pub fn fake() -> Result<&'static Path, Unavailable> {
    static FAKE: OnceLock<Result<PathBuf, Unavailable>> = OnceLock::new();
    FAKE.get_or_init(|| build(&[])).as_ref().map(PathBuf::as_path).map_err(Clone::clone)
}

/// Run test `test` of this binary in a child on the fake CUDA driver and,
/// when `nccl_dir` is given, the fake NCCL in it, with `env` added.
pub fn run(test: &str, nccl_dir: Option<&Path>, env: &[(&str, &str)]) -> Result<Run, String> {
    let cuda = fake_cuda::fake().map_err(|e| e.to_string())?;
    let dirs: Vec<&Path> = nccl_dir.into_iter().collect();
    fake_cuda::run_with(test, cuda.dir(), &dirs, env)
}

/// A counter of the fake NCCL loaded in this (child) process: a key of its
/// header's list, or `calls.<entry point>`.
pub fn counter(key: &str) -> i64 {
    type Counter = unsafe extern "C" fn(*const c_char) -> c_longlong;
    static LIB: OnceLock<Option<libloading::Library>> = OnceLock::new();
    // SAFETY: in a child the fake is first on the loader path and already
    // loaded by the probe: this takes one more reference, no initialiser runs again.
    let lib = LIB.get_or_init(|| unsafe { libloading::Library::new("libnccl.so.2") }.ok());
    let Some(lib) = lib else { panic!("no libnccl.so.2 to read counters from") };
    // SAFETY: nccl.c defines fake_nccl_counter with exactly this C signature.
    let f = unsafe { lib.get::<Counter>(b"fake_nccl_counter\0") }.expect("fake_nccl_counter: not the fake NCCL");
    let key = CString::new(key).expect("a key without NUL");
    // SAFETY: key is NUL-terminated and outlives the call, which only reads it.
    unsafe { f(key.as_ptr()) }
}

/// Panic unless the `libnccl.so.2` mapped into this process is the fake
/// from `dir` (a real NCCL on the path must not pass for it).
pub fn assert_fake_loaded(dir: &Path) {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let nccl: Vec<&str> =
        maps.lines().filter_map(|l| l.split_whitespace().nth(5)).filter(|p| p.contains("/libnccl.so")).collect();
    assert!(!nccl.is_empty(), "no libnccl is loaded");
    for path in nccl {
        assert!(Path::new(path).starts_with(dir), "{path} is loaded, not the fake from {}", dir.display());
    }
}
