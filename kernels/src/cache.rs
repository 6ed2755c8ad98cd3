//! PTX and CUBIN per architecture, compiled once per process (and kept on
//! disk between processes, best effort).
//!
//! The disk cache lives under `$FERROCOLL_KERNEL_CACHE` if set (the value
//! `off` disables it), else `$XDG_CACHE_HOME/ferrocoll/kernels`, else
//! `~/.cache/ferrocoll/kernels`. A file is named after the architecture and
//! a hash of the source, the compile options and the NVRTC version, so a
//! changed source or compiler never reuses a stale file. A file is only
//! accepted when it names every entry point; writes go through a temporary
//! file and a rename. Any disk error just means compiling again.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use ferrocoll_core::{Result, hash::fnv1a};
use ferrocoll_cuda::Ptx;
use ferrocoll_cuda::nvrtc::version as nvrtc_version;

use crate::compile::{compile_cubin, compile_options, compile_source};
use crate::names::all_kernel_names;
use crate::source::source;

type Cache<T> = Mutex<HashMap<(u32, u32), Arc<T>>>;

/// What is compiled: PTX (`compute_XY`, JIT-compiled by the driver at load)
/// or CUBIN (`sm_XY`, machine code).
#[derive(Clone, Copy)]
enum Kind {
    Ptx,
    Cubin,
}

impl Kind {
    fn file_name(self, major: u32, minor: u32, key: u64) -> String {
        match self {
            Kind::Ptx => format!("compute_{major}{minor}-{key:016x}.ptx"),
            Kind::Cubin => format!("sm_{major}{minor}-{key:016x}.cubin"),
        }
    }
}

/// `build()` once per architecture per process, through the disk cache.
fn cached<T>(
    cache: &'static OnceLock<Cache<T>>,
    kind: Kind,
    major: u32,
    minor: u32,
    from_disk: impl FnOnce(Vec<u8>) -> Option<T>,
    to_disk: impl FnOnce(&T) -> Vec<u8>,
    build: impl FnOnce(&str) -> Result<T>,
) -> Result<Arc<T>> {
    // One compilation at a time: two threads asking for the same architecture
    // wait for one compilation rather than doing two.
    let mut map = cache.get_or_init(Default::default).lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(done) = map.get(&(major, minor)) {
        return Ok(Arc::clone(done));
    }
    let version = nvrtc_version()?;
    let src = source();
    let file = disk_path(kind, major, minor, version, &src);
    let value = match file.as_deref().and_then(|f| std::fs::read(f).ok()).and_then(from_disk) {
        Some(v) => v,
        None => {
            let v = build(&src)?;
            if let Some(f) = &file {
                write_cached(f, &to_disk(&v));
            }
            v
        }
    };
    let value = Arc::new(value);
    map.insert((major, minor), Arc::clone(&value));
    Ok(value)
}

/// PTX of every kernel for compute capability `major.minor` (`compute_XY`),
/// compiled with NVRTC the first time an architecture is asked for and then
/// shared. Load it with [`Module::load_ptx`](ferrocoll_cuda::Module::load_ptx)
/// and look the entries up by the names of
/// [`all_kernel_names`](crate::all_kernel_names).
///
/// Errors: `NotSupported` naming `libnvrtc.so.13` when NVRTC cannot be
/// loaded (never a panic), or an error carrying NVRTC's log when the
/// compilation fails (an architecture NVRTC does not know is `NotSupported`).
pub fn ptx_for_arch(major: u32, minor: u32) -> Result<Arc<Ptx>> {
    static CACHE: OnceLock<Cache<Ptx>> = OnceLock::new();
    cached(
        &CACHE,
        Kind::Ptx,
        major,
        minor,
        |bytes| String::from_utf8(bytes).ok().filter(|t| has_every_entry(t)).and_then(|t| Ptx::from_src(t).ok()),
        |ptx| ptx.as_str().as_bytes().to_vec(),
        |src| compile_source(src, major, minor),
    )
}

/// As [`ptx_for_arch`], but machine code for `sm_XY` ([`compile_cubin`]):
/// loading it skips the driver's JIT compilation of the PTX (seconds for
/// all kernels), at the price of running only on that exact architecture.
pub fn cubin_for_arch(major: u32, minor: u32) -> Result<Arc<Vec<u8>>> {
    static CACHE: OnceLock<Cache<Vec<u8>>> = OnceLock::new();
    cached(
        &CACHE,
        Kind::Cubin,
        major,
        minor,
        |bytes| cubin_has_every_entry(&bytes).then_some(bytes),
        |cubin| cubin.clone(),
        |src| compile_cubin(src, major, minor),
    )
}

/// The disk cache folder, or `None` when disabled or no home is known.
pub fn disk_cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("FERROCOLL_KERNEL_CACHE") {
        return if dir == "off" || dir.is_empty() { None } else { Some(PathBuf::from(dir)) };
    }
    let base = match std::env::var_os("XDG_CACHE_HOME") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(std::env::var_os("HOME")?).join(".cache"),
    };
    Some(base.join("ferrocoll").join("kernels"))
}

fn disk_path(kind: Kind, major: u32, minor: u32, version: (u32, u32), src: &str) -> Option<PathBuf> {
    let options = compile_options(major, minor).join(" ");
    let nvrtc = format!("nvrtc {}.{}", version.0, version.1);
    let key = fnv1a(&[src.as_bytes(), b"\0", options.as_bytes(), b"\0", nvrtc.as_bytes()]);
    Some(disk_cache_dir()?.join(kind.file_name(major, minor, key)))
}

/// Whether `ptx` declares every kernel of [`all_kernel_names`] as an `.entry`.
pub(crate) fn has_every_entry(ptx: &str) -> bool {
    let entries = entry_names(ptx);
    all_kernel_names().iter().all(|n| entries.contains(n))
}

/// Whether `cubin` is an ELF image naming every kernel of [`all_kernel_names`].
fn cubin_has_every_entry(cubin: &[u8]) -> bool {
    cubin.starts_with(b"\x7fELF")
        && all_kernel_names().iter().all(|n| {
            let needle: Vec<u8> = [n.as_bytes(), b"\0"].concat();
            cubin.windows(needle.len()).any(|w| w == needle.as_slice())
        })
}

/// The names of the `.entry` directives of a PTX text.
pub fn entry_names(ptx: &str) -> std::collections::HashSet<&str> {
    ptx.lines()
        .filter_map(|l| {
            let l = l.trim_start();
            l.strip_prefix(".visible .entry ").or_else(|| l.strip_prefix(".entry "))
        })
        .filter_map(|rest| rest.split(|c: char| c == '(' || c.is_whitespace()).next())
        .collect()
}

fn write_cached(file: &Path, bytes: &[u8]) {
    let (Some(dir), Some(name)) = (file.parent(), file.file_name()) else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let tmp = dir.join(format!(".{}.{}.tmp", std::process::id(), name.to_string_lossy()));
    if std::fs::write(&tmp, bytes).is_err() || std::fs::rename(&tmp, file).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_names_are_parsed_from_ptx() {
        let ptx = "//\n.version 9.0\n.visible .entry fc_copy(\n\t.param .u64 a\n)\n.entry fc_flag_wait (\n.func foo(\n";
        let names = entry_names(ptx);
        assert!(names.contains("fc_copy") && names.contains("fc_flag_wait"), "{names:?}");
        assert!(!names.contains("foo"));
        assert!(!has_every_entry(ptx));
        assert!(!cubin_has_every_entry(b"\x7fELF fc_copy\0"));
        assert!(!cubin_has_every_entry(b"not an elf"));
    }

    #[test]
    fn cache_files_are_keyed_by_kind_arch_and_content() {
        let a = Kind::Ptx.file_name(9, 0, 0xabc);
        assert_eq!(a, "compute_90-0000000000000abc.ptx");
        assert_eq!(Kind::Cubin.file_name(8, 6, 1), "sm_86-0000000000000001.cubin");
        let dir = PathBuf::from("/x");
        let key = |src: &str, v| {
            let opts = compile_options(9, 0).join(" ");
            let nv = format!("nvrtc {}.{}", v, 0);
            dir.join(Kind::Ptx.file_name(9, 0, fnv1a(&[src.as_bytes(), b"\0", opts.as_bytes(), b"\0", nv.as_bytes()])))
        };
        assert_ne!(key("a", 13), key("b", 13), "source in the key");
        assert_ne!(key("a", 13), key("a", 14), "NVRTC version in the key");
    }
}
