//! PTX per compute capability, compiled once per process (and kept on disk
//! between processes, best effort).
//!
//! The disk cache lives under `$FERROCOLL_KERNEL_CACHE` if set (the value
//! `off` disables it), else `$XDG_CACHE_HOME/ferrocoll/kernels`, else
//! `~/.cache/ferrocoll/kernels`. A file is named after the architecture and
//! a hash of the source, the compile options and the NVRTC version, so a
//! changed source or compiler never reuses stale PTX. A file is only
//! accepted when it has every entry point; writes go through a temporary
//! file and a rename. Any disk error just means compiling again.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::nvrtc::Ptx;
use ferrocoll_core::{Result, hash::fnv1a};

use crate::compile::{compile_options, compile_source, nvrtc_version};
use crate::names::all_kernel_names;
use crate::source::source;

type Cache = Mutex<HashMap<(u32, u32), Arc<Ptx>>>;

fn cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// PTX of every kernel for compute capability `major.minor` (`compute_XY`),
/// compiled with NVRTC the first time an architecture is asked for and then
/// shared. Load it with cudarc's `CudaContext::load_module` and look the
/// entries up by the names of [`all_kernel_names`](crate::all_kernel_names).
///
/// Errors: `NotSupported` naming `libnvrtc.so.13` when NVRTC cannot be
/// loaded (never a panic), or an error carrying NVRTC's log when the
/// compilation fails (an architecture NVRTC does not know is `NotSupported`).
pub fn ptx_for_arch(major: u32, minor: u32) -> Result<Arc<Ptx>> {
    // One compilation at a time: two threads asking for the same architecture
    // wait for one compilation rather than doing two.
    let mut map = cache().lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(ptx) = map.get(&(major, minor)) {
        return Ok(Arc::clone(ptx));
    }
    let version = nvrtc_version()?;
    let src = source();
    let file = disk_path(major, minor, version, &src);
    let ptx = match file.as_ref().and_then(read_cached) {
        Some(text) => Ptx::from_src(text),
        None => {
            let ptx = compile_source(&src, major, minor)?;
            if let Some(f) = &file {
                write_cached(f, &ptx.to_src());
            }
            ptx
        }
    };
    let ptx = Arc::new(ptx);
    map.insert((major, minor), Arc::clone(&ptx));
    Ok(ptx)
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

fn disk_path(major: u32, minor: u32, version: (u32, u32), src: &str) -> Option<PathBuf> {
    let options = compile_options(major, minor).join(" ");
    let nvrtc = format!("nvrtc {}.{}", version.0, version.1);
    let key = fnv1a(&[src.as_bytes(), b"\0", options.as_bytes(), b"\0", nvrtc.as_bytes()]);
    Some(disk_cache_dir()?.join(format!("compute_{major}{minor}-{key:016x}.ptx")))
}

/// The cached PTX text, if the file exists and declares every entry point.
fn read_cached(file: &PathBuf) -> Option<String> {
    let text = std::fs::read_to_string(file).ok()?;
    has_every_entry(&text).then_some(text)
}

/// Whether `ptx` declares every kernel of [`all_kernel_names`] as an `.entry`.
pub(crate) fn has_every_entry(ptx: &str) -> bool {
    let entries = entry_names(ptx);
    all_kernel_names().iter().all(|n| entries.contains(n))
}

/// The names of the `.entry` directives of a PTX text.
pub fn entry_names(ptx: &str) -> std::collections::HashSet<&str> {
    ptx.lines()
        .filter_map(|l| {
            l.trim_start().strip_prefix(".visible .entry ").or_else(|| l.trim_start().strip_prefix(".entry "))
        })
        .filter_map(|rest| rest.split(|c: char| c == '(' || c.is_whitespace()).next())
        .collect()
}

fn write_cached(file: &PathBuf, text: &str) {
    let Some(dir) = file.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        std::process::id(),
        file.file_name().map_or_else(|| "ptx".into(), |n| n.to_string_lossy().into_owned(),)
    ));
    if std::fs::write(&tmp, text).is_ok() && std::fs::rename(&tmp, file).is_err() {
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
    }
}
