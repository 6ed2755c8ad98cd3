//! Native libraries the tests build with the system's C and C++ compilers
//! (the kernels for the CPU, the fake CUDA driver), built once and kept
//! under the target folder, named after a hash of everything that goes
//! into them, so that test binaries and the child processes they start
//! share one build and a changed source is never served stale.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

/// Why a native library is not available.
#[derive(Clone, Debug)]
pub enum Unavailable {
    /// The compiler is missing: tests that need the library print that they
    /// skipped (or fail where a `REQUIRE_*` variable asks for it).
    Skip(String),
    /// The sources do not build, or the build cannot be stored: a bug, and a failure.
    Fail(String),
}

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unavailable::Skip(why) | Unavailable::Fail(why) => f.write_str(why),
        }
    }
}

/// The folder of cached builds: `<target>/<profile>/native-test-libs`, next
/// to the test binaries (`<target>/<profile>/deps/…`), else the temporary folder.
fn root() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.join("native-test-libs")))
        .unwrap_or_else(|| std::env::temp_dir().join("ferrocoll-native-test-libs"))
}

/// The folder `<root>/<name>-<key>`, made by `build` (which fills the
/// folder it is given) unless an earlier build is there. Concurrent
/// builders each build into their own folder and the first rename wins.
pub fn cached(
    name: &str,
    key: u64,
    build: impl FnOnce(&Path) -> Result<(), Unavailable>,
) -> Result<PathBuf, Unavailable> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let root = root();
    let dir = root.join(format!("{name}-{key:016x}"));
    if dir.join(".complete").is_file() {
        return Ok(dir);
    }
    let fail = |what: &str, p: &Path, e: std::io::Error| Unavailable::Fail(format!("{what} {}: {e}", p.display()));
    std::fs::create_dir_all(&root).map_err(|e| fail("create", &root, e))?;
    let tmp = root.join(format!(".{name}-{key:016x}-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(|e| fail("create", &tmp, e))?;
    let built = build(&tmp).and_then(|()| {
        std::fs::write(tmp.join(".complete"), b"").map_err(|e| fail("write in", &tmp, e))?;
        match std::fs::rename(&tmp, &dir) {
            Ok(()) => Ok(()),
            // Another process stored the same build first: use it.
            Err(_) if dir.join(".complete").is_file() => Ok(()),
            Err(e) => Err(fail("rename to", &dir, e)),
        }
    });
    let _ = std::fs::remove_dir_all(&tmp);
    built.map(|()| dir)
}

/// A test double's shared library `lib`, built by gcc from the C files
/// among `sources` (name, text; headers are written beside them) with
/// `cflags` and `-ldl`, into the cached folder `name-<key>`; the entry
/// points in `hidden` are left out of its exports (a version script), to
/// test a program against a library that lacks them. `finish` runs in the
/// folder after the build (e.g. to add a link under another name).
pub fn shared_library(
    name: &str,
    lib: &str,
    sources: &[(&str, &str)],
    cflags: &[&str],
    hidden: &[&str],
    finish: impl FnOnce(&Path) -> Result<(), Unavailable>,
) -> Result<PathBuf, Unavailable> {
    let flags = cflags.join(" ");
    let hidden_list = hidden.join(" ");
    let mut parts: Vec<&[u8]> = sources.iter().flat_map(|(n, t)| [n.as_bytes(), t.as_bytes()]).collect();
    parts.extend([flags.as_bytes(), hidden_list.as_bytes()]);
    cached(name, key(&parts), |dir: &Path| {
        let io = |what: &str, p: &Path, e: std::io::Error| Unavailable::Fail(format!("{what} {}: {e}", p.display()));
        for (file, text) in sources {
            std::fs::write(dir.join(file), text).map_err(|e| io("write", &dir.join(file), e))?;
        }
        let so = dir.join(lib);
        let script = dir.join("hidden.map");
        let script_arg = format!("-Wl,--version-script={}", script.display());
        let mut args: Vec<&OsStr> = cflags.iter().map(OsStr::new).collect();
        if !hidden.is_empty() {
            std::fs::write(&script, format!("{{ local: {}; }};\n", hidden.join("; ")))
                .map_err(|e| io("write", &script, e))?;
            args.push(OsStr::new(&script_arg));
        }
        let c_files: Vec<PathBuf> =
            sources.iter().filter(|(n, _)| n.ends_with(".c")).map(|(n, _)| dir.join(n)).collect();
        args.extend([OsStr::new("-o"), so.as_os_str()]);
        args.extend(c_files.iter().map(|p| p.as_os_str()));
        args.push(OsStr::new("-ldl"));
        compile("gcc", &args)?;
        finish(dir)
    })
}

/// Run a compiler; `Skip` when it cannot be started, `Fail` with its
/// output when it fails. Warnings are printed.
pub fn compile(compiler: &str, args: &[&std::ffi::OsStr]) -> Result<(), Unavailable> {
    let out = Command::new(compiler)
        .args(args)
        .output()
        .map_err(|e| Unavailable::Skip(format!("{compiler} cannot be run: {e}")))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(Unavailable::Fail(format!("{compiler} failed ({}):\n{stderr}", out.status)));
    }
    if !stderr.trim().is_empty() {
        eprintln!("{compiler} warnings:\n{stderr}");
    }
    Ok(())
}

/// The cache key of a build's inputs (stable for a toolchain: a new one
/// at worst rebuilds).
pub fn key(parts: &[&[u8]]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    parts.hash(&mut h);
    h.finish()
}

/// Whether the environment variable `name` is `1` (the `REQUIRE_*` switches).
pub fn required(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v == "1")
}
