//! Tests of the CUDA component that run on any machine: without a driver
//! the probe is a clean `NotSupported` and the component stays out of the
//! default set. (With a GPU, `tests/tests/gpu_mc.rs` covers the rest.)

use ferrocoll_core::Status;

use super::CudaMc;

/// Whether the driver library loads here (then the no-driver tests have nothing to check).
fn driver_present() -> bool {
    ferrocoll_cuda::sys::library_present(ferrocoll_cuda::sys::Library::Driver)
}

#[test]
fn probe_without_a_driver_is_not_supported_naming_libcuda() {
    if driver_present() {
        // A machine with a driver: the probe must still not panic, and an
        // error (no device) must be NotSupported.
        if let Err(e) = CudaMc::probe() {
            assert_eq!(e.status(), Status::NotSupported, "{e}");
        }
        eprintln!("probe_without_a_driver_is_not_supported_naming_libcuda: skipped: a CUDA driver is present");
        return;
    }
    let e = CudaMc::probe().unwrap_err();
    assert_eq!(e.status(), Status::NotSupported, "{e}");
    assert!(e.to_string().contains("libcuda.so.1"), "{e}");
    // Probing again gives the same answer (the result is kept, not retried into a panic).
    let again = CudaMc::probe().unwrap_err();
    assert_eq!(again.to_string(), e.to_string());
}

#[test]
fn default_mcs_leave_cuda_out_without_a_driver() {
    let names: Vec<_> = crate::default_mcs().iter().map(|m| m.name()).collect();
    assert_eq!(names[0], "host");
    if driver_present() {
        eprintln!("default_mcs_leave_cuda_out_without_a_driver: skipped: a CUDA driver is present");
        return;
    }
    assert_eq!(names, ["host"]);
}
