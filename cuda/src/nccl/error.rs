//! NCCL's results as ferrocoll errors, chosen once here:
//!
//! | `ncclResult_t` | status |
//! |---|---|
//! | `ncclInvalidArgument` (4), `ncclInvalidUsage` (5) | `InvalidParam` |
//! | `ncclSystemError` (2) (sockets, shared memory, a peer's host) | `NoResource` |
//! | `ncclRemoteError` (6) (a peer failed) | `IoError` |
//! | `ncclUnhandledCudaError` (1), `ncclInternalError` (3), anything else | `NoMessage` |
//!
//! The message names the call, the code, NCCL's text for it and, where the
//! library has `ncclGetLastError`, its last message (which names what
//! failed: "Duplicate GPU detected", a socket error, a peer).

use std::ffi::{CStr, c_char};

use ferrocoll_core::{Error, Status};

use super::sys::NcclResult;

/// The name of an `ncclResult_t` code.
pub fn result_name(r: NcclResult) -> &'static str {
    match r {
        0 => "ncclSuccess",
        1 => "ncclUnhandledCudaError",
        2 => "ncclSystemError",
        3 => "ncclInternalError",
        4 => "ncclInvalidArgument",
        5 => "ncclInvalidUsage",
        6 => "ncclRemoteError",
        7 => "ncclInProgress",
        _ => "an unknown ncclResult_t",
    }
}

/// The status of a failed NCCL call (see the table in the module docs).
pub fn nccl_status(r: NcclResult) -> Status {
    match r {
        4 | 5 => Status::InvalidParam,
        2 => Status::NoResource,
        6 => Status::IoError,
        _ => Status::NoMessage,
    }
}

/// The error of NCCL call `call` that returned `r`; `text` is NCCL's text
/// for the code, `last` its last error message, when known.
pub fn nccl_error(call: &str, r: NcclResult, text: Option<String>, last: Option<String>) -> Error {
    let mut msg = format!("{call} failed: {} ({r})", result_name(r));
    if let Some(text) = text.filter(|t| !t.is_empty()) {
        msg.push_str(&format!(": {text}"));
    }
    if let Some(last) = last.filter(|t| !t.trim().is_empty()) {
        msg.push_str(&format!("; NCCL's last error: {}", last.trim()));
    }
    Error::new(nccl_status(r), msg)
}

/// A library string (static or per-communicator, NUL-terminated) as text.
pub(crate) fn text(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: NCCL documents its error strings as NUL-terminated text that
    // stays valid (static, or the communicator's buffer, read before the
    // next call on it); null was excluded above.
    Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nccl_table() {
        for (r, status) in [
            (1, Status::NoMessage),
            (2, Status::NoResource),
            (3, Status::NoMessage),
            (4, Status::InvalidParam),
            (5, Status::InvalidParam),
            (6, Status::IoError),
            (42, Status::NoMessage),
        ] {
            assert_eq!(nccl_status(r), status, "{r}");
        }
        let e = nccl_error(
            "ncclCommInitRankConfig",
            5,
            Some("invalid usage".into()),
            Some("Duplicate GPU detected\n".into()),
        );
        assert_eq!(e.status(), Status::InvalidParam);
        assert_eq!(
            e.context(),
            "ncclCommInitRankConfig failed: ncclInvalidUsage (5): invalid usage; NCCL's last error: Duplicate GPU detected"
        );
        assert_eq!(
            nccl_error("ncclAllReduce", 99, None, Some(" ".into())).context(),
            "ncclAllReduce failed: an unknown ncclResult_t (99)"
        );
    }
}
