//! The SHARP test double: how TL/SHARP is tested without SHARP.
//!
//! `tests/fake_sharp/sharp_coll.c` is a `libsharp_coll.so` written for
//! these tests (its header says what it does: every collective computed
//! on the ranks through the OOB callbacks the TL gives it; caps and
//! injected errors from a file beside it). This module builds it with gcc
//! (cached, like the fake CUDA driver) and makes *instances*: a copy of
//! the library in a folder of its own with its configuration file, so that
//! tests running side by side in one process each load their own copy
//! (the loader keeps one copy per file) with their own caps, errors and counters.
//!
//! Nothing here says anything about SHARP hardware; see the README.
//!
//! Without gcc the tests print that they skipped; `REQUIRE_FAKE_SHARP=1`
//! (set by `.ci/run`) makes that a failure.

use std::ffi::{CString, c_char};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::native::{Unavailable, required, shared_library};

/// `REQUIRE_FAKE_SHARP=1`: a test that would skip for want of the double fails.
pub const REQUIRE: &str = "REQUIRE_FAKE_SHARP";

const SOURCE: &str = include_str!("../fake_sharp/sharp_coll.c");
const CFLAGS: [&str; 8] = ["-std=gnu11", "-O2", "-g", "-Wall", "-Wextra", "-fPIC", "-shared", "-pthread"];

/// Entry points that only newer libraries have.
pub const NEWER: [&str; 2] = ["sharp_coll_do_reduce_scatter_nb", "sharp_coll_do_allgather_nb"];

fn build(hidden: &[&str]) -> Result<PathBuf, Unavailable> {
    shared_library("fake-sharp", "libsharp_coll.so", &[("sharp_coll.c", SOURCE)], &CFLAGS, hidden, |_| Ok(()))
}

/// The double's library file: the full one, or (`older`) one without
/// [`NEWER`]'s entry points.
fn library(older: bool) -> Result<PathBuf, Unavailable> {
    static FULL: OnceLock<Result<PathBuf, Unavailable>> = OnceLock::new();
    static OLDER: OnceLock<Result<PathBuf, Unavailable>> = OnceLock::new();
    let cell = if older { &OLDER } else { &FULL };
    cell.get_or_init(|| build(if older { &NEWER } else { &[] }).map(|d| d.join("libsharp_coll.so"))).clone()
}

/// One loaded copy of the double with its configuration.
#[derive(Debug)]
pub struct Instance {
    /// The library file to name in `UCC_TL_SHARP_LIB`.
    pub path: PathBuf,
    stat: Option<libloading::Library>,
}

impl Instance {
    /// The double's counter `what` (`reg_mr`, `dereg_mr`, `live_mrs`,
    /// `allreduce`, `reduce`, `reduce_scatter`, …): calls across every rank
    /// of this process that used this instance.
    pub fn stat(&self, what: &str) -> i64 {
        let lib = match &self.stat {
            Some(l) => l,
            None => panic!("the instance at {} is not loaded", self.path.display()),
        };
        let name = CString::new(what).expect("no NUL in a counter name");
        // SAFETY: `fake_sharp_stat` is the double's `long (const char *)`; the
        // name is NUL-terminated and outlives the call.
        unsafe {
            let f = lib
                .get::<unsafe extern "C" fn(*const c_char) -> std::ffi::c_long>(b"fake_sharp_stat\0")
                .expect("the double exports fake_sharp_stat");
            f(name.as_ptr()) as i64
        }
    }
}

/// A fresh copy of the double (`older`: without reduce_scatter and
/// allgather) configured by `conf` (the lines of `fake_sharp.conf`).
pub fn instance(conf: &str, older: bool) -> Result<Instance, Unavailable> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let lib = library(older)?;
    let root = lib.parent().and_then(Path::parent).map(Path::to_path_buf).unwrap_or_else(std::env::temp_dir);
    let dir = root.join(format!("fake-sharp-instance-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
    let fail = |what: &str, p: &Path, e: std::io::Error| Unavailable::Fail(format!("{what} {}: {e}", p.display()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| fail("create", &dir, e))?;
    let path = dir.join("libsharp_coll.so");
    std::fs::copy(&lib, &path).map_err(|e| fail("copy to", &path, e))?;
    let conf_path = dir.join("fake_sharp.conf");
    std::fs::write(&conf_path, conf).map_err(|e| fail("write", &conf_path, e))?;
    // SAFETY: the double's initialisers only zero its own state.
    let stat = unsafe { libloading::Library::new(&path) }
        .map_err(|e| Unavailable::Fail(format!("load {}: {e}", path.display())))?;
    Ok(Instance { path, stat: Some(stat) })
}

/// The instance, or `None` after printing why the test skips (a failure
/// under [`REQUIRE`], or when the double does not build).
pub fn instance_or_skip(test: &str, conf: &str, older: bool) -> Option<Instance> {
    match instance(conf, older) {
        Ok(i) => Some(i),
        Err(Unavailable::Skip(why)) if !required(REQUIRE) => {
            eprintln!("{test}: skipped: the SHARP test double cannot be built here: {why}");
            None
        }
        Err(e) => panic!("{test}: the SHARP test double: {e}"),
    }
}
