//! The FFI boundary: every exported function runs its body through
//! [`ffi`], which turns a `Result` into a `ucc_status_t`, logs every error
//! once with the function's name, and stops panics from unwinding into C
//! (a panic becomes `UCC_ERR_NO_MESSAGE` and a log line).

use std::panic::{AssertUnwindSafe, catch_unwind};

use ferrocoll::core::log::{self, Level};
use ferrocoll::{Error, Status};

use crate::abi::{UCC_ERR_NO_MESSAGE, UccStatus};

/// The C value of a ferrocoll status. ferrocoll's `IoError` (-9) is not a
/// UCC code: C callers get `UCC_ERR_NO_MESSAGE`, and the log line says what failed.
pub(crate) fn status_code(s: Status) -> UccStatus {
    match s {
        Status::IoError => UCC_ERR_NO_MESSAGE,
        s => s.code(),
    }
}

/// The level an error of `status` is logged at: refusals that callers probe
/// for and fall back from (Open MPI asks for what it may not get) are debug
/// lines; everything else is an error.
fn level_of(status: Status) -> Level {
    match status {
        Status::NotSupported | Status::NotImplemented | Status::NotFound => Level::Debug,
        _ => Level::Error,
    }
}

/// Log `e` as the failure of `func`.
pub(crate) fn log_error(func: &str, e: &Error) {
    let level = level_of(e.status());
    if log::enabled(level) {
        log::write(level, format_args!("{func}: {e}"));
    }
}

/// Run an exported function's body: `Ok(status)` is returned as it is, an
/// error is logged and returned as its code, a panic is caught.
pub(crate) fn ffi(func: &str, body: impl FnOnce() -> Result<UccStatus, Error>) -> UccStatus {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(code)) => code,
        Ok(Err(e)) => {
            log_error(func, &e);
            status_code(e.status())
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            log::write(Level::Error, format_args!("{func}: internal error (caught at the C boundary): {what}"));
            UCC_ERR_NO_MESSAGE
        }
    }
}

/// Run a body that returns nothing to C (`void` functions): errors and
/// panics are logged only.
pub(crate) fn ffi_void(func: &str, body: impl FnOnce() -> Result<(), Error>) {
    ffi(func, || body().map(|()| 0));
}

/// `InvalidParam` for a NULL pointer argument `name`.
pub(crate) fn null(name: &str) -> Error {
    Error::invalid_param(format!("{name} is NULL"))
}

/// Fail with `InvalidParam` when `p` is NULL.
pub(crate) fn non_null<T>(p: *const T, name: &str) -> Result<(), Error> {
    if p.is_null() { Err(null(name)) } else { Ok(()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_become_codes_and_panics_are_caught() {
        assert_eq!(ffi("t", || Ok(1)), 1);
        assert_eq!(ffi("t", || Err(Error::invalid_param("x is bad"))), -3);
        assert_eq!(ffi("t", || Err(Error::io("peer 3 is gone"))), UCC_ERR_NO_MESSAGE);
        assert_eq!(ffi("t", || panic!("boom")), UCC_ERR_NO_MESSAGE);
        assert_eq!(non_null(std::ptr::null::<u8>(), "params").unwrap_err().context(), "params is NULL");
    }
}
