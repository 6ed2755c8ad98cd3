//! The raw layer: cudarc's `sys` bindings of the CUDA driver and of NVRTC,
//! and the only module of ferrocoll that names `cudarc`.
//!
//! cudarc loads `libcuda.so.1` and `libnvrtc.so.13` with `dlopen` the first
//! time one of their functions is called, and resolves each function on its
//! first call. Both steps **panic** when the library or the symbol is
//! missing, so nothing may call into [`driver`] or [`nvrtc`] before the
//! probe ([`crate::driver()`], [`crate::nvrtc::version`]) has said that the
//! library loads and has every symbol ferrocoll calls. That check is
//! `load` here: it asks cudarc whether the library loads, then looks each
//! symbol up without calling anything, and keeps the answer.
//!
//! Outside this crate the bindings are for tests (which call a few driver
//! functions ferrocoll itself never needs, once a GPU test's gate has run
//! the probe); library code uses the checked wrappers of the other modules.

pub use cudarc::driver::sys as driver;
pub use cudarc::nvrtc::sys as nvrtc;

use ferrocoll_core::{Error, Result};

use crate::Kept;

/// The driver library, as named in messages (cudarc finds it under this name).
pub const DRIVER_LIBRARY: &str = "libcuda.so.1";

/// The NVRTC library, as named in messages (cudarc finds it under this name).
pub const NVRTC_LIBRARY: &str = "libnvrtc.so.13";

/// The two libraries cudarc loads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Library {
    /// The CUDA driver.
    Driver,
    /// The runtime compiler.
    Nvrtc,
}

impl Library {
    /// The name used in messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Library::Driver => DRIVER_LIBRARY,
            Library::Nvrtc => NVRTC_LIBRARY,
        }
    }

    /// Whether [`load`] succeeded for this library (never loads it).
    pub(crate) fn ready(self) -> bool {
        self.kept().is_ok()
    }

    fn kept(self) -> &'static Kept<()> {
        static DRIVER: Kept<()> = Kept::new();
        static NVRTC: Kept<()> = Kept::new();
        match self {
            Library::Driver => &DRIVER,
            Library::Nvrtc => &NVRTC,
        }
    }

    /// Why the library cannot be loaded, and where to look.
    fn absent(self) -> String {
        match self {
            Library::Driver => format!(
                "the CUDA driver library {DRIVER_LIBRARY} cannot be loaded (no NVIDIA driver on this machine, \
                 or not on the loader path)"
            ),
            Library::Nvrtc => format!(
                "NVRTC ({NVRTC_LIBRARY}) cannot be loaded: put the folder holding it on LD_LIBRARY_PATH \
                 (a CUDA 13 toolkit's lib64, or the nvidia-cuda-nvrtc wheel's nvidia/cu13/lib; \
                 scripts/fetch-nvrtc.sh fetches the wheel)"
            ),
        }
    }
}

/// Check once per process that `lib` loads and exports every one of
/// `symbols` (the entry points ferrocoll calls in it); after `Ok`, calling
/// those entry points through cudarc cannot panic. `NotSupported` naming the
/// library or the first missing symbol otherwise; the answer is kept (the
/// first caller's `symbols` decide it: each library has one list).
pub(crate) fn load(lib: Library, symbols: &[&'static str]) -> Result<()> {
    lib.kept()
        .get_or_init(|| {
            if !library_present(lib) {
                return Err(Error::not_supported(lib.absent()));
            }
            match missing_symbol(lib, symbols) {
                Some(name) => Err(Error::not_supported(format!(
                    "{} has no {name}: the library is older than ferrocoll needs (CUDA 12 or newer)",
                    lib.name()
                ))),
                None => Ok(()),
            }
        })
        .copied()
}

/// Check once per process (the answer kept in `kept`) that the driver,
/// which already passed [`load`], also exports `symbols`: an optional group
/// of entry points (`group` names it in messages, e.g. "CUDA IPC") that
/// the probe does not require, so that a driver without them still serves
/// everything else. After `Ok`, calling those entry points cannot panic;
/// `NotSupported` naming the first missing one otherwise.
pub(crate) fn load_group(kept: &'static Kept<()>, group: &str, symbols: &[&'static str]) -> Result<()> {
    load(Library::Driver, crate::probe::SYMBOLS)?;
    kept.get_or_init(|| match missing_symbol(Library::Driver, symbols) {
        Some(name) => {
            Err(Error::not_supported(format!("{DRIVER_LIBRARY} has no {name}: this driver does not offer {group}")))
        }
        None => Ok(()),
    })
    .copied()
}

/// Whether cudarc can `dlopen` `lib` (under any of the names it tries).
/// Calls nothing in it, so this never panics; tests use it to tell "no
/// driver here" from other probe failures.
pub fn library_present(lib: Library) -> bool {
    match lib {
        // SAFETY: is_culib_present only tries to dlopen the library under
        // its usual names and reports whether one loaded; it calls no CUDA
        // function, so it is sound whether or not the library exists.
        Library::Driver => unsafe { driver::is_culib_present() },
        // SAFETY: as above, for NVRTC's names.
        Library::Nvrtc => unsafe { nvrtc::is_culib_present() },
    }
}

/// The first of `names` that `lib` does not export, if any.
///
/// Must only be called once [`library_present`] said `lib` loads: cudarc's
/// accessor of the loaded library panics otherwise.
fn missing_symbol(lib: Library, names: &[&'static str]) -> Option<&'static str> {
    let loaded = match lib {
        // SAFETY: the caller checked that the library loads (see above), so
        // culib() returns it instead of panicking; loading it runs only the
        // library's initialisers, as the first call would.
        Library::Driver => unsafe { driver::culib() },
        // SAFETY: as above, for NVRTC.
        Library::Nvrtc => unsafe { nvrtc::culib() },
    };
    names.iter().copied().find(|name| {
        // SAFETY: looking a symbol up calls nothing; the pointer is dropped
        // at once, never called through this (deliberately wrong) type.
        unsafe { loaded.get::<unsafe extern "C" fn()>(name.as_bytes()) }.is_err()
    })
}

/// Assert that the functions called as `<module>::<prefix>Name(` (`Name`
/// capitalised, as the libraries' entry points are) in
/// `sources` are exactly `listed`: the tests that hold the probes' symbol
/// lists against the code.
#[cfg(test)]
pub(crate) fn assert_calls_listed(sources: &[&str], prefix: &str, listed: &[&str]) {
    let mut called = std::collections::BTreeSet::new();
    for src in sources {
        for (at, _) in src.match_indices(&format!("::{prefix}")) {
            let name: String = src[at + 2..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            let entry_point = name[prefix.len()..].starts_with(|c: char| c.is_ascii_uppercase());
            if entry_point && src[at + 2 + name.len()..].starts_with('(') {
                called.insert(name);
            }
        }
    }
    let listed: std::collections::BTreeSet<String> = listed.iter().map(|s| s.to_string()).collect();
    assert_eq!(called, listed, "the calls written in the sources and the probe's list differ");
}
