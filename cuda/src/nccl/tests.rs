//! The probe's decisions against fake symbol tables: versions, missing
//! entry points, and the fallbacks for the optional ones.

use std::collections::BTreeSet;
use std::ffi::{c_int, c_void};

use ferrocoll_core::Status;

use super::sys::{self, Lookup, OPTIONAL, REQUIRED};
use super::*;

/// A library that exports `names` (every one the same dummy function, but
/// `ncclGetVersion`, which reports the table's version).
struct FakeTable {
    names: BTreeSet<&'static str>,
    version: sys::GetVersionFn,
}

extern "C" fn never_called() {}

macro_rules! version_fn {
    ($name:ident, $code:expr) => {
        unsafe extern "C" fn $name(v: *mut c_int) -> sys::NcclResult {
            // SAFETY: Nccl::check passes a pointer to its own int.
            unsafe { *v = $code };
            sys::SUCCESS
        }
    };
}
version_fn!(v2_12_12, 21212);
version_fn!(v2_27_7, 22707);
version_fn!(v2_28_3, 22803);
version_fn!(v2_30_7, 23007);

unsafe extern "C" fn failing_version(_: *mut c_int) -> sys::NcclResult {
    3
}

impl FakeTable {
    fn all(version: sys::GetVersionFn) -> FakeTable {
        let mut names: BTreeSet<&'static str> = REQUIRED.into_iter().collect();
        names.extend(OPTIONAL.iter().map(|(n, _)| *n));
        FakeTable { names, version }
    }

    fn without(mut self, name: &str) -> FakeTable {
        self.names.remove(name);
        self
    }
}

impl Lookup for FakeTable {
    fn find(&self, name: &str) -> Option<*const c_void> {
        if name == "ncclGetVersion" && self.names.contains(name) {
            return Some(self.version as *const c_void);
        }
        self.names.contains(name).then_some(never_called as *const c_void)
    }
}

#[test]
fn a_complete_new_library_has_every_native_call() {
    let (version, symbols) = Nccl::check(&FakeTable::all(v2_30_7), "libnccl.so.2").unwrap();
    assert_eq!(version, 23007);
    assert_eq!(sys::decode_version(version), (2, 30, 7));
    let f = symbols.fallbacks();
    assert!(f.alltoall_native && f.gather_native && f.scatter_native, "{f:?}");
    assert!(symbols.last_error.is_some());
}

#[test]
fn before_2_28_alltoall_gather_and_scatter_fall_back_to_grouped_send_recv() {
    // Even a library that exports the names (a fork, a preview) is not trusted below 2.28.
    let (_, symbols) = Nccl::check(&FakeTable::all(v2_27_7), "libnccl.so.2").unwrap();
    let f = symbols.fallbacks();
    assert!(!f.alltoall_native && !f.gather_native && !f.scatter_native, "{f:?}");
    // And from 2.28, a library that lacks one falls back for that one only.
    let (_, symbols) = Nccl::check(&FakeTable::all(v2_28_3).without("ncclAlltoAll"), "libnccl.so.2").unwrap();
    let f = symbols.fallbacks();
    assert!(!f.alltoall_native && f.gather_native && f.scatter_native, "{f:?}");
}

#[test]
fn an_old_or_incomplete_library_is_refused_naming_why() {
    let e = Nccl::check(&FakeTable::all(v2_12_12), "libnccl.so.2").unwrap_err();
    assert_eq!(e.status(), Status::NotSupported);
    assert!(e.context().contains("NCCL 2.12.12") && e.context().contains("2.14 or newer"), "{e}");
    for name in REQUIRED {
        if name == "ncclGetVersion" {
            continue;
        }
        let e = Nccl::check(&FakeTable::all(v2_30_7).without(name), "libnccl.so.2").unwrap_err();
        assert_eq!(e.status(), Status::NotSupported);
        assert!(e.context().contains(&format!("has no {name}")) && e.context().contains("2.30.7"), "{e}");
    }
    let e = Nccl::check(&FakeTable::all(v2_30_7).without("ncclGetVersion"), "libfoo.so").unwrap_err();
    assert!(e.context().contains("libfoo.so has no ncclGetVersion"), "{e}");
    let e = Nccl::check(&FakeTable::all(failing_version), "libnccl.so.2").unwrap_err();
    assert!(e.context().contains("ncclGetVersion failed: ncclInternalError"), "{e}");
    // ncclGetLastError is optional: its absence only shortens messages.
    let (_, symbols) = Nccl::check(&FakeTable::all(v2_30_7).without("ncclGetLastError"), "libnccl.so.2").unwrap();
    assert!(symbols.last_error.is_none());
}

#[test]
fn versions_decode_in_both_schemes() {
    assert_eq!(sys::decode_version(2708), (2, 7, 8));
    assert_eq!(sys::decode_version(21400), (2, 14, 0));
    assert_eq!(sys::decode_version(23007), (2, 30, 7));
}

#[test]
fn the_config_is_the_2_14_layout() {
    let c = sys::ConfigV21400::non_blocking();
    assert_eq!(std::mem::size_of::<sys::ConfigV21400>(), 24);
    assert_eq!(std::mem::offset_of!(sys::ConfigV21400, blocking), 16);
    assert_eq!((c.size, c.magic, c.version, c.blocking), (24, 0xcafe_beef, 21400, 0));
}

#[test]
fn types_and_operations() {
    use ferrocoll_core::{DataType, ReduceOp};
    assert_eq!(datatype(DataType::Float32), Some(7));
    assert_eq!(datatype(DataType::Bfloat16), Some(9));
    assert_eq!(datatype(DataType::Int16), None, "NCCL has no 16-bit integers");
    assert_eq!(datatype(DataType::Float64Complex), None);
    assert_eq!(reduce_op(ReduceOp::Avg), Some(4));
    assert_eq!(reduce_op(ReduceOp::Band), None);
}

#[test]
fn the_probe_never_panics_and_names_what_is_missing() {
    match nccl() {
        Ok(n) => assert!(n.version() >= sys::MIN_VERSION),
        Err(e) => {
            assert_eq!(e.status(), Status::NotSupported, "{e}");
            assert!(e.context().contains("libnccl.so"), "{e}");
            assert_eq!(nccl().unwrap_err().to_string(), e.to_string(), "kept");
        }
    }
}
