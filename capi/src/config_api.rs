//! The configuration calls: `ucc_lib_config_*` and `ucc_context_config_*`
//! (read under the caller's prefix, modify by name, print like
//! `ferrocoll-info -c`); what they read and accept is in [`crate::config`].

use std::ffi::c_char;
use std::path::Path;

use ferrocoll::{Config, Error, Result};

use crate::abi::*;
use crate::config::{self, ContextConfigHandle, LibConfigHandle, lock, opt_str, req_str};
use crate::guard::{ffi, ffi_void, non_null};
use crate::handle::{borrow, publish, retire_quietly};
use crate::lib_api::{LibHandle, put};

/// `ucc_lib_config_read`.
///
/// # Safety
/// `env_prefix` and `filename` are NULL or NUL-terminated; `config` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_lib_config_read(
    env_prefix: *const c_char,
    filename: *const c_char,
    config: *mut *mut LibConfigHandle,
) -> UccStatus {
    ffi("ucc_lib_config_read", || {
        non_null(config, "config")?;
        // SAFETY: the caller passes NULL or C strings.
        let prefix = unsafe { opt_str(env_prefix, "env_prefix") }?;
        // SAFETY: as above.
        let file = unsafe { opt_str(filename, "filename") }?;
        let c = config::read(prefix, file.map(Path::new))?;
        // SAFETY: checked non-null; the caller passes a writable pointer.
        unsafe { put(config, publish(LibConfigHandle::new(c))) };
        Ok(UCC_OK)
    })
}

/// `ucc_lib_config_release`.
///
/// # Safety
/// `config` is NULL or a handle from `ucc_lib_config_read`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_lib_config_release(config: *mut LibConfigHandle) {
    ffi_void("ucc_lib_config_release", || {
        // SAFETY: see handle::retire_quietly.
        unsafe { retire_quietly(config, "config") }
    })
}

/// `ucc_lib_config_modify`.
///
/// # Safety
/// `config` is a handle; `name` and `value` are C strings.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_lib_config_modify(
    config: *mut LibConfigHandle,
    name: *const c_char,
    value: *const c_char,
) -> UccStatus {
    ffi("ucc_lib_config_modify", || {
        // SAFETY: see handle::borrow.
        let h = unsafe { borrow(config, "config") }?;
        // SAFETY: C strings from the caller.
        let (name, value) = unsafe { (req_str(name, "name")?, req_str(value, "value")?) };
        config::modify(&mut lock(&h.config), name, value)?;
        Ok(UCC_OK)
    })
}

/// Write `text` to a C stream.
///
/// # Safety
/// `stream` is a valid `FILE*`.
unsafe fn write_stream(stream: *mut libc::FILE, text: &str) -> Result<()> {
    non_null(stream, "stream")?;
    // SAFETY: the caller's FILE*, and a buffer of text.len() bytes.
    let n = unsafe { libc::fwrite(text.as_ptr().cast(), 1, text.len(), stream) };
    // SAFETY: as above.
    unsafe { libc::fflush(stream) };
    if n != text.len() {
        return Err(Error::io(format!("wrote {n} of {} bytes of the configuration", text.len())));
    }
    Ok(())
}

/// The `ucc_config_print_flags_t` bits: (header, values, docs).
fn print_flags(flags: u32) -> (bool, bool, bool) {
    (flags & 2 != 0, flags & 1 != 0, flags & 4 != 0)
}

/// What both `*_config_print` functions do with their handle's configuration.
///
/// # Safety
/// `stream` is a valid `FILE*`; `title` NULL or a C string.
unsafe fn print(config: &Config, stream: *mut libc::FILE, title: *const c_char, flags: u32) -> Result<()> {
    // SAFETY: C string or NULL.
    let title = unsafe { opt_str(title, "title") }?;
    let (header, values, doc) = print_flags(flags);
    let text = config::describe(config, title, header, values, doc);
    // SAFETY: the caller's stream.
    unsafe { write_stream(stream, &text) }
}

/// `ucc_lib_config_print`.
///
/// # Safety
/// `config` is a handle, `stream` a `FILE*`, `title` NULL or a C string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_lib_config_print(
    config: *const LibConfigHandle,
    stream: *mut libc::FILE,
    title: *const c_char,
    print_flags: u32,
) {
    ffi_void("ucc_lib_config_print", || {
        // SAFETY: see handle::borrow.
        let h = unsafe { borrow(config, "config") }?;
        // SAFETY: forwarded from our caller.
        unsafe { print(&lock(&h.config), stream, title, print_flags) }
    })
}

/// `ucc_context_config_print`.
///
/// # Safety
/// As [`ucc_lib_config_print`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_context_config_print(
    config: *const ContextConfigHandle,
    stream: *mut libc::FILE,
    title: *const c_char,
    print_flags: u32,
) {
    ffi_void("ucc_context_config_print", || {
        // SAFETY: see handle::borrow.
        let h = unsafe { borrow(config, "config") }?;
        // SAFETY: forwarded from our caller.
        unsafe { print(&lock(&h.config), stream, title, print_flags) }
    })
}

/// `ucc_context_config_read`: the library's configuration (with its
/// prefix's variables), under the lines of `filename` if it exists.
///
/// # Safety
/// `lib_handle` is a handle; `filename` NULL or a C string; `config` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_context_config_read(
    lib_handle: *const LibHandle,
    filename: *const c_char,
    config: *mut *mut ContextConfigHandle,
) -> UccStatus {
    ffi("ucc_context_config_read", || {
        // SAFETY: see handle::borrow.
        let h = unsafe { borrow(lib_handle, "lib_handle") }?;
        non_null(config, "config")?;
        // SAFETY: C string or NULL.
        let file = unsafe { opt_str(filename, "filename") }?;
        let lib = h.lib()?;
        let base = match file {
            Some(f) => config::read(None, Some(Path::new(f)))?,
            None => Config::new(),
        };
        let c = base.merged(lib.config());
        // SAFETY: checked non-null.
        unsafe { put(config, publish(ContextConfigHandle::new(c))) };
        Ok(UCC_OK)
    })
}

/// `ucc_context_config_release`.
///
/// # Safety
/// `config` is a handle from `ucc_context_config_read`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_context_config_release(config: *mut ContextConfigHandle) {
    ffi_void("ucc_context_config_release", || {
        // SAFETY: see handle::retire_quietly.
        unsafe { retire_quietly(config, "config") }
    })
}

/// `ucc_context_config_modify`: `component` NULL for the core, or
/// `tl/<name>` / `cl/<name>` to prefix the variable with its component. A
/// component's field that ferrocoll does not document is accepted without
/// effect if it is spelled as a field (`A-Z`, then `A-Z0-9_`); anything
/// else is `UCC_ERR_NOT_FOUND`, as an unknown core field is.
///
/// # Safety
/// `config` is a handle; `component` NULL or a C string; `name`, `value` C strings.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_context_config_modify(
    config: *mut ContextConfigHandle,
    component: *const c_char,
    name: *const c_char,
    value: *const c_char,
) -> UccStatus {
    ffi("ucc_context_config_modify", || {
        // SAFETY: see handle::borrow.
        let h = unsafe { borrow(config, "config") }?;
        // SAFETY: C strings from the caller.
        let (component, name, value) =
            unsafe { (opt_str(component, "component")?, req_str(name, "name")?, req_str(value, "value")?) };
        let full = match component {
            None => name.to_string(),
            Some(c) => {
                let (kind, comp) = c.split_once('/').ok_or_else(|| {
                    Error::invalid_param(format!("component {c:?} is not \"tl/<name>\" or \"cl/<name>\""))
                })?;
                if !matches!(kind, "tl" | "cl") || comp.is_empty() {
                    return Err(Error::invalid_param(format!("component {c:?} is not \"tl/<name>\" or \"cl/<name>\"")));
                }
                // A field of a component ferrocoll does not document is
                // accepted without effect (the components differ from UCC's),
                // but only if it can be a field's name at all.
                let named = name.starts_with(|c: char| c.is_ascii_uppercase())
                    && name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
                if !named {
                    return Err(Error::not_found(format!(
                        "failed to modify {kind} {comp:?} configuration: {name:?} is not a configuration field"
                    )));
                }
                format!("{}_{}_{}", kind.to_ascii_uppercase(), comp.to_ascii_uppercase(), name)
            }
        };
        config::modify(&mut lock(&h.config), &full, value)?;
        Ok(UCC_OK)
    })
}
