//! Gating for GPU tests: they compile everywhere and run where a CUDA device
//! is. Without one, a GPU test prints that it skipped and why; with
//! `REQUIRE_GPU=1` (set by `scripts/gpu-check.sh` on the GPU machine) a skip
//! is a failure, so a broken driver set-up cannot pass silently.

/// Why no GPU test can run here, or the number of CUDA devices.
pub fn gpu_status() -> Result<usize, String> {
    // SAFETY: is_culib_present only tries to dlopen the driver library and
    // reports whether it loaded; it calls no CUDA function.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err("the CUDA driver library (libcuda.so.1) cannot be loaded".to_string());
    }
    cudarc::driver::result::init().map_err(|e| format!("cuInit failed: {e:?}"))?;
    match cudarc::driver::result::device::get_count() {
        Ok(0) => Err("the CUDA driver sees no device".to_string()),
        Ok(n) => Ok(n as usize),
        Err(e) => Err(format!("cuDeviceGetCount failed: {e:?}")),
    }
}

/// Whether the GPU test `test` must skip: prints `test: skipped: why` and
/// returns true when there is no usable GPU; panics instead under
/// `REQUIRE_GPU=1`. Start every GPU test with
/// `if ferrocoll_tests::gpu::skip_unless_gpu("name") { return; }`.
pub fn skip_unless_gpu(test: &str) -> bool {
    match gpu_status() {
        Ok(_) => false,
        Err(why) => {
            if std::env::var("REQUIRE_GPU").is_ok_and(|v| v == "1") {
                panic!("{test}: REQUIRE_GPU=1, but {why}");
            }
            eprintln!("{test}: skipped: {why}");
            true
        }
    }
}
