//! Gating for GPU tests: they compile everywhere and run where a CUDA
//! device is. Without one, a GPU test runs on the fake CUDA driver
//! ([`crate::fake_cuda`]) in a child process, where gcc and g++ can build
//! it; where they cannot, it prints that it skipped and why (a failure
//! under `REQUIRE_FAKE_CUDA=1`). With `REQUIRE_GPU=1` (set by
//! `scripts/gpu-check.sh` on the GPU machine) the fake is never used and a
//! missing GPU is a failure, so a broken driver set-up cannot pass silently.

use crate::fake_cuda;
use crate::native::required;

/// Why no GPU test can run here (ferrocoll-cuda's driver probe: the
/// library, its entry points, `cuInit`, a device), or the number of CUDA
/// devices. Once this is `Ok`, calling the driver cannot panic.
pub fn gpu_status() -> Result<usize, String> {
    ferrocoll_cuda::driver().map(|d| d.count()).map_err(|e| e.context().to_string())
}

/// Whether the GPU test `test` must skip its body here: false where a
/// driver is loaded (a GPU, or the fake in a child process). Where there is
/// none, the test has run on the fake in a child (and passed, or this
/// panics), or it prints that it skipped — true either way; panics instead
/// under `REQUIRE_GPU=1`. Start every GPU test with
/// `if ferrocoll_tests::gpu::skip_unless_gpu("name") { return; }`, where
/// `name` is the test's path as the harness names it (`--exact`).
pub fn skip_unless_gpu(test: &str) -> bool {
    match gpu_status() {
        Ok(_) => {
            fake_cuda::assert_fake_loaded(test);
            false
        }
        Err(why) => {
            if fake_cuda::is_child() {
                panic!("{test}: the fake CUDA driver did not load in its child process: {why}");
            }
            if required("REQUIRE_GPU") {
                panic!("{test}: REQUIRE_GPU=1, but {why}");
            }
            fake_cuda::run_gpu_test(test, &why);
            true
        }
    }
}

/// Whether this process runs on the fake CUDA driver: GPU tests may then
/// pick lighter workloads (the fake runs kernels and copies on the CPU).
pub fn on_fake_driver() -> bool {
    fake_cuda::is_child()
}

/// Whether the GPU test `test`, which compiles kernels, must skip for want
/// of NVRTC: prints why and returns true; panics instead under
/// `REQUIRE_GPU=1` or `REQUIRE_NVRTC=1`. Call after [`skip_unless_gpu`].
pub fn skip_unless_nvrtc(test: &str) -> bool {
    match ferrocoll_kernels::nvrtc_probe() {
        Ok(()) => false,
        Err(e) => {
            if required("REQUIRE_GPU") || required("REQUIRE_NVRTC") {
                panic!("{test}: NVRTC is required here, but {e}");
            }
            eprintln!("{test}: skipped: {e}");
            true
        }
    }
}
