//! Configuration handles (`ucc_lib_config_h`, `ucc_context_config_h`):
//! UCC's variable names read from the environment under the caller's
//! prefix, modified by name, and printed like `ferrocoll-info -c`.
//!
//! Reading follows UCC: the lines `NAME=value` of the optional file, then
//! every `UCC_<NAME>` variable, then every `<PREFIX>_UCC_<NAME>` variable
//! (Open MPI passes the prefix `OMPI`, PyTorch `TORCH`), later ones winning.

use std::collections::BTreeSet;
use std::ffi::{CStr, c_char};
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::{Mutex, OnceLock};

use ferrocoll::core::config::{CORE_FIELDS, ConfigField};
use ferrocoll::core::config_file::read_config_file;
use ferrocoll::{Config, Error, Result};

use crate::handle::Handle;

/// UCC's core variables that ferrocoll accepts and that change nothing in
/// it (callers set them routinely: Open MPI sets `ESTIMATED_NUM_EPS` and
/// `ESTIMATED_NUM_PPN`, and may set `CLS`).
const ACCEPTED_WITHOUT_EFFECT: &[&str] = &[
    "CLS",
    "ESTIMATED_NUM_EPS",
    "ESTIMATED_NUM_PPN",
    "NODE_LOCAL_ID",
    "LOCK_FREE_PROGRESS_Q",
    "TEAM_IDS_POOL_SIZE",
    "INTERNAL_OOB",
    "THROTTLE_PROGRESS",
    "PROFILE_MODE",
    "PROFILE_FILE",
    "PROFILE_LOG_SIZE",
    "LOG_FILE",
    "MEMTYPE_CACHE",
];

/// Prefixes of component variables (UCC's TLs, CLs, MCs, ECs): stored as
/// given; ferrocoll reads those of its own TLs and UCC's `TL_UCP_TUNE`.
const COMPONENT_PREFIXES: &[&str] = &["TL_", "CL_", "MC_", "EC_"];

/// UCC's `CLS`, which every print of a UCC library configuration lists
/// (UCC's gtest `test_lib_config.print` looks for it): accepted, and
/// without effect.
const CLS: ConfigField = ConfigField {
    name: "UCC_CLS",
    default: "basic",
    doc: "UCC's list of collective layers (basic, hier, all): accepted without effect; ferrocoll chooses flat or hierarchical algorithms itself, by the team's topology.",
};

/// Every documented variable: the core's, UCC's `CLS`, the execution
/// engines' and those of every TL of this build.
pub(crate) fn fields() -> &'static [ConfigField] {
    static FIELDS: OnceLock<Vec<ConfigField>> = OnceLock::new();
    FIELDS.get_or_init(|| {
        let mut f = CORE_FIELDS.to_vec();
        f.push(CLS);
        f.extend_from_slice(ferrocoll::ee::cuda::CONFIG_FIELDS);
        for tl in ferrocoll::default_components().tls {
            f.extend(tl.config_fields());
        }
        f
    })
}

/// `NAME` or `UCC_NAME` as the full `UCC_NAME`, checked to be a variable name.
pub(crate) fn full_name(name: &str) -> Result<String> {
    let bare = name.strip_prefix("UCC_").unwrap_or(name);
    if bare.is_empty() || !bare.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_') {
        return Err(Error::invalid_param(format!("{name:?} is not a configuration variable name (A-Z, 0-9, _)")));
    }
    Ok(format!("UCC_{bare}"))
}

/// Whether ferrocoll accepts variable `full` (`UCC_…`) in a modify call.
fn known(full: &str) -> bool {
    let bare = &full[4..];
    fields().iter().any(|f| f.name == full)
        || ACCEPTED_WITHOUT_EFFECT.contains(&bare)
        || COMPONENT_PREFIXES.iter().any(|p| bare.starts_with(p))
}

/// Set `name` (with or without `UCC_`) to `value` after checking the name.
pub(crate) fn modify(config: &mut Config, name: &str, value: &str) -> Result<()> {
    let full = full_name(name)?;
    if !known(&full) {
        return Err(Error::not_found(format!(
            "{full} is not a configuration variable of ferrocoll (ucc_lib_config_print lists them)"
        )));
    }
    config.set(&full, value);
    Ok(())
}

/// The configuration UCC would read: `file`'s lines, `UCC_*`, then `<prefix>_UCC_*`.
pub(crate) fn read(prefix: Option<&str>, file: Option<&Path>) -> Result<Config> {
    let mut c = Config::new();
    // UCC ignores a missing file; one that exists but cannot be read or parsed is an error.
    if let Some(pairs) = file.map(read_config_file).transpose()?.flatten() {
        for (name, value) in pairs {
            c.set(&full_name(&name)?, value);
        }
    }
    let vars: Vec<(String, String)> = std::env::vars().collect();
    for (k, v) in &vars {
        if k.starts_with("UCC_") {
            c.set(k, v.clone());
        }
    }
    if let Some(p) = prefix.filter(|p| !p.is_empty()) {
        let pre = format!("{p}_UCC_");
        for (k, v) in &vars {
            if let Some(rest) = k.strip_prefix(&pre) {
                c.set(&format!("UCC_{rest}"), v.clone());
            }
        }
    }
    Ok(c)
}

/// The configuration as text: with `doc`, each documented variable's
/// meaning (`# …`) before its `NAME=value` line, `(default)` marking the
/// unset ones, like `ferrocoll-info -c`; then the variables set that no
/// component documents.
pub(crate) fn describe(config: &Config, title: Option<&str>, header: bool, values: bool, doc: bool) -> String {
    let mut out = String::new();
    if header {
        out.push_str(&format!("#\n# {}\n#\n", title.unwrap_or("ferrocoll configuration")));
    }
    if !values && !doc {
        return out;
    }
    for f in fields() {
        if doc {
            out.push_str(&format!("# {}\n", f.doc));
        }
        if values {
            let set = config.get(f.name);
            out.push_str(&format!(
                "{}={}{}\n",
                f.name,
                set.unwrap_or(f.default),
                if set.is_some() { "" } else { "  (default)" }
            ));
        }
        if doc {
            out.push('\n');
        }
    }
    if values {
        let documented: BTreeSet<&str> = fields().iter().map(|f| f.name).collect();
        for (k, v) in config.iter().filter(|(k, _)| !documented.contains(k)) {
            out.push_str(&format!("{k}={v}  (set; not a documented ferrocoll variable)\n"));
        }
    }
    out
}

/// A C string argument that may be NULL.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string.
pub(crate) unsafe fn opt_str<'a>(p: *const c_char, field: &str) -> Result<Option<&'a str>> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller promises a NUL-terminated string.
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str().map(Some).map_err(|_| Error::invalid_param(format!("{field} is not UTF-8")))
}

/// A C string argument that must be set.
///
/// # Safety
/// As [`opt_str`].
pub(crate) unsafe fn req_str<'a>(p: *const c_char, field: &str) -> Result<&'a str> {
    // SAFETY: forwarded.
    unsafe { opt_str(p, field) }?.ok_or_else(|| crate::guard::null(field))
}

/// What a `ucc_lib_config_h` points to.
#[repr(C)]
pub struct LibConfigHandle {
    magic: AtomicU64,
    pub(crate) config: Mutex<Config>,
}

impl LibConfigHandle {
    pub(crate) fn new(config: Config) -> LibConfigHandle {
        LibConfigHandle { magic: AtomicU64::new(0), config: Mutex::new(config) }
    }
}

// SAFETY: `magic` is the AtomicU64 at offset 0 (repr(C), first field).
unsafe impl Handle for LibConfigHandle {
    const WHAT: &'static str = "ucc_lib_config_h";
    const LIVE: u64 = 0xfe77_0c0c_0000_0001;
    const MAGIC_OFFSET: usize = 0;
    fn magic(&self) -> &AtomicU64 {
        &self.magic
    }
}

/// What a `ucc_context_config_h` points to.
#[repr(C)]
pub struct ContextConfigHandle {
    magic: AtomicU64,
    pub(crate) config: Mutex<Config>,
}

impl ContextConfigHandle {
    pub(crate) fn new(config: Config) -> ContextConfigHandle {
        ContextConfigHandle { magic: AtomicU64::new(0), config: Mutex::new(config) }
    }
}

// SAFETY: as for LibConfigHandle.
unsafe impl Handle for ContextConfigHandle {
    const WHAT: &'static str = "ucc_context_config_h";
    const LIVE: u64 = 0xfe77_0c0c_0000_0002;
    const MAGIC_OFFSET: usize = 0;
    fn magic(&self) -> &AtomicU64 {
        &self.magic
    }
}

/// Lock a config, ignoring poisoning (a `Config` is a map: always whole).
pub(crate) fn lock(m: &Mutex<Config>) -> std::sync::MutexGuard<'_, Config> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_modify() {
        assert_eq!(full_name("TLS").unwrap(), "UCC_TLS");
        assert_eq!(full_name("UCC_TLS").unwrap(), "UCC_TLS");
        assert!(full_name("tls").is_err());
        assert!(full_name("").is_err());
        let mut c = Config::new();
        modify(&mut c, "COLL_TIMEOUT", "5s").unwrap();
        modify(&mut c, "ESTIMATED_NUM_EPS", "4").unwrap();
        modify(&mut c, "TL_UCP_TUNE", "allreduce:@ring").unwrap();
        assert_eq!(c.get("COLL_TIMEOUT"), Some("5s"));
        let e = modify(&mut c, "NO_SUCH_THING", "1").unwrap_err();
        assert_eq!(e.status(), ferrocoll::Status::NotFound);
        assert!(e.context().contains("UCC_NO_SUCH_THING"), "{e}");
    }

    #[test]
    fn file_then_env_then_prefix() {
        let dir = std::env::temp_dir().join(format!("ferrocoll-capi-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("ucc.conf");
        std::fs::write(&file, "# comment\nUCC_COLL_TRACE = info\nWATCHDOG_TIMEOUT=7s\n").unwrap();
        let c = read(Some("FERROCOLL_CAPI_TEST_PREFIX"), Some(&file)).unwrap();
        assert_eq!(c.get("COLL_TRACE"), Some("info"));
        assert_eq!(c.get("WATCHDOG_TIMEOUT"), Some("7s"));
        std::fs::write(&file, "no equals sign\n").unwrap();
        assert!(read(None, Some(&file)).unwrap_err().context().contains("line 1"));
        assert!(read(None, Some(&dir.join("missing.conf"))).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn description_marks_defaults_and_extras() {
        let mut c = Config::new();
        c.set("UCC_COLL_TIMEOUT", "9s");
        c.set("UCC_TL_UCP_TUNE", "x");
        let text = describe(&c, Some("lib"), true, true, true);
        assert!(text.starts_with("#\n# lib\n#\n"), "{text}");
        assert!(text.contains("UCC_COLL_TIMEOUT=9s\n"), "{text}");
        assert!(text.contains("UCC_LOG_LEVEL=warn  (default)"), "{text}");
        assert!(text.contains("UCC_CLS=basic  (default)"), "UCC lists it, and UCC's tests look for it: {text}");
        assert!(text.contains("UCC_TL_UCP_TUNE=x  (set;"), "{text}");
        assert!(text.contains("# Log level"), "{text}");
        assert!(!describe(&c, None, false, true, false).contains("# Log level"));
    }
}
