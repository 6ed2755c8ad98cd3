//! The library: `ucc_init_version`, `ucc_finalize`, attributes, version
//! and status strings.

use std::ffi::CString;
use std::ffi::{c_char, c_uint};
use std::sync::atomic::AtomicU64;
use std::sync::{LazyLock, Mutex};

use ferrocoll::{Error, Lib, LibParams as FcLibParams, Result, Status, ThreadMode};

use crate::abi::*;
use crate::config::{self, LibConfigHandle, lock};
use crate::guard::{ffi, non_null};
use crate::handle::{Handle, borrow, publish, retire};
use crate::types::{ALL_COLLS, ALL_OPS};

/// The UCC interface version this library provides (also in `ucc_version.h`).
pub(crate) const API_MAJOR: u32 = 1;
/// Minor version.
pub(crate) const API_MINOR: u32 = 4;
/// Release number.
pub(crate) const API_RELEASE: u32 = 0;

/// What a `ucc_lib_h` points to.
#[repr(C)]
pub struct LibHandle {
    magic: AtomicU64,
    /// Taken by `ucc_finalize`.
    pub(crate) lib: Mutex<Option<Lib>>,
    /// `ucc_thread_mode_t` asked for (and reported).
    thread_mode: u32,
}

// SAFETY: `magic` is the AtomicU64 at offset 0.
unsafe impl Handle for LibHandle {
    const WHAT: &'static str = "ucc_lib_h";
    const LIVE: u64 = 0xfe77_0c0c_0000_0003;
    const MAGIC_OFFSET: usize = 0;
    fn magic(&self) -> &AtomicU64 {
        &self.magic
    }
}

impl LibHandle {
    /// The library, or why it is gone.
    pub(crate) fn lib(&self) -> Result<Lib> {
        self.lib
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| Error::invalid_param("the library was finalized"))
    }
}

/// Write `v` to `*p` (a C out-parameter already checked non-null).
///
/// # Safety
/// `p` is valid for a write of `T`.
pub(crate) unsafe fn put<T>(p: *mut T, v: T) {
    // SAFETY: forwarded; write_unaligned because C structs of callers need not be aligned for us.
    unsafe { p.write_unaligned(v) }
}

/// The thread mode and checks of `params` (read by mask).
///
/// # Safety
/// `params` is NULL or points to a `ucc_lib_params_t` whose masked fields are set.
unsafe fn lib_params(params: *const LibParams) -> Result<u32> {
    if params.is_null() {
        return Ok(0);
    }
    // SAFETY: the caller's struct; each field is read only when its mask bit says it is set.
    let mask = unsafe { (&raw const (*params).mask).read_unaligned() };
    let mut mode = 0;
    if mask & LIB_FIELD_THREAD_MODE != 0 {
        // SAFETY: masked field.
        mode = unsafe { (&raw const (*params).thread_mode).read_unaligned() };
        if mode > UCC_THREAD_MULTIPLE {
            return Err(Error::invalid_param(format!("params.thread_mode {mode} is not a UCC thread mode")));
        }
    }
    if mask & LIB_FIELD_COLL_TYPES != 0 {
        // SAFETY: masked field.
        let c = unsafe { (&raw const (*params).coll_types).read_unaligned() };
        if c & !ALL_COLLS != 0 {
            return Err(Error::invalid_param(format!("params.coll_types {c:#x} has bits that are not collectives")));
        }
    }
    if mask & LIB_FIELD_REDUCTION_TYPES != 0 {
        // SAFETY: masked field.
        let r = unsafe { (&raw const (*params).reduction_types).read_unaligned() };
        if r & !((1 << 13) - 1) != 0 {
            return Err(Error::invalid_param(format!(
                "params.reduction_types {r:#x} has bits that are not reductions"
            )));
        }
    }
    if mask & LIB_FIELD_SYNC_TYPE != 0 {
        // SAFETY: masked field.
        let s = unsafe { (&raw const (*params).sync_type).read_unaligned() };
        if s != UCC_NO_SYNC_COLLECTIVES {
            return Err(Error::not_supported(format!(
                "params.sync_type {s}: ferrocoll's collectives are non-synchronous only"
            )));
        }
    }
    Ok(mode)
}

/// `ucc_init_version` (reached through the header's inline `ucc_init`).
///
/// # Safety
/// `params` NULL or a `ucc_lib_params_t`; `config` NULL or a handle; `lib_p` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_init_version(
    api_major_version: c_uint,
    api_minor_version: c_uint,
    params: *const LibParams,
    config: *const LibConfigHandle,
    lib_p: *mut *mut LibHandle,
) -> UccStatus {
    ffi("ucc_init_version", || {
        non_null(lib_p, "lib_p")?;
        if api_major_version != API_MAJOR {
            return Err(Error::not_supported(format!(
                "the caller was built for UCC API {api_major_version}.{api_minor_version}; this library provides \
                 {API_MAJOR}.{API_MINOR}"
            )));
        }
        // SAFETY: the caller's struct or NULL.
        let thread_mode = unsafe { lib_params(params) }?;
        let config = if config.is_null() {
            config::read(None, None)?
        } else {
            // SAFETY: see handle::borrow.
            let h = unsafe { borrow(config, "config") }?;
            lock(&h.config).clone()
        };
        let mode = match thread_mode {
            0 => ThreadMode::Single,
            1 => ThreadMode::Funneled,
            _ => ThreadMode::Multiple,
        };
        let lib = Lib::with_params(FcLibParams { thread_mode: mode, config })?;
        let h = LibHandle { magic: AtomicU64::new(0), lib: Mutex::new(Some(lib)), thread_mode };
        // SAFETY: checked non-null.
        unsafe { put(lib_p, publish(h)) };
        Ok(UCC_OK)
    })
}

/// `ucc_finalize`.
///
/// # Safety
/// `lib_p` is a handle from `ucc_init`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_finalize(lib_p: *mut LibHandle) -> UccStatus {
    ffi("ucc_finalize", || {
        // SAFETY: see handle::retire.
        let h = unsafe { retire(lib_p, "lib_p") }?;
        drop(h.lib.lock().unwrap_or_else(|p| p.into_inner()).take());
        Ok(UCC_OK)
    })
}

/// `ucc_lib_get_attr`.
///
/// # Safety
/// `lib_p` is a handle; `lib_attr` a `ucc_lib_attr_t` with its mask set.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_lib_get_attr(lib_p: *const LibHandle, lib_attr: *mut LibAttr) -> UccStatus {
    ffi("ucc_lib_get_attr", || {
        // SAFETY: see handle::borrow.
        let h = unsafe { borrow(lib_p, "lib_p") }?;
        non_null(lib_attr, "lib_attr")?;
        h.lib()?;
        // SAFETY: the caller's struct; only the fields its mask asks for are written.
        unsafe {
            let mask = (&raw const (*lib_attr).mask).read_unaligned();
            if mask & LIB_FIELD_THREAD_MODE != 0 {
                put(&raw mut (*lib_attr).thread_mode, h.thread_mode);
            }
            if mask & LIB_FIELD_COLL_TYPES != 0 {
                put(&raw mut (*lib_attr).coll_types, ALL_COLLS);
            }
            if mask & LIB_FIELD_REDUCTION_TYPES != 0 {
                put(&raw mut (*lib_attr).reduction_types, ALL_OPS);
            }
            if mask & LIB_FIELD_SYNC_TYPE != 0 {
                put(&raw mut (*lib_attr).sync_type, UCC_NO_SYNC_COLLECTIVES);
            }
        }
        Ok(UCC_OK)
    })
}

/// `ucc_get_version`.
///
/// # Safety
/// Each pointer is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ucc_get_version(major: *mut c_uint, minor: *mut c_uint, release: *mut c_uint) {
    for (p, v) in [(major, API_MAJOR), (minor, API_MINOR), (release, API_RELEASE)] {
        if !p.is_null() {
            // SAFETY: non-null, and the caller promises writable.
            unsafe { put(p, v) };
        }
    }
}

/// `ucc_get_version_string`: `"major.minor.release"`.
#[unsafe(no_mangle)]
pub extern "C" fn ucc_get_version_string() -> *const c_char {
    c"1.4.0".as_ptr()
}

/// `ucc_status_string`: a static text for every code (UCC's words).
#[unsafe(no_mangle)]
pub extern "C" fn ucc_status_string(status: UccStatus) -> *const c_char {
    status_text(status).as_ptr()
}

/// The texts of `Status::as_str` (the one place they are written) as C strings, made once.
fn status_text(status: UccStatus) -> &'static std::ffi::CStr {
    static TEXTS: LazyLock<Vec<(i32, CString)>> =
        LazyLock::new(|| Status::ALL.iter().filter_map(|s| Some((s.code(), CString::new(s.as_str()).ok()?))).collect());
    TEXTS.iter().find(|(code, _)| *code == status).map_or(c"Unknown error", |(_, text)| text.as_c_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrocoll::Status;

    #[test]
    fn status_texts_are_ferrocolls() {
        for s in Status::ALL {
            assert_eq!(status_text(s.code()).to_str().unwrap(), s.as_str());
        }
        assert_eq!(status_text(UCC_ERR_TIMED_OUT).to_str().unwrap(), "Timeout expired");
        assert_eq!(status_text(-42).to_str().unwrap(), "Unknown error");
    }
}
