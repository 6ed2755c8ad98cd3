//! Gating for GPU tests: they compile everywhere and run where a CUDA device
//! is. Without one, a GPU test prints that it skipped and why; with
//! `REQUIRE_GPU=1` (set by `scripts/gpu-check.sh` on the GPU machine) a skip
//! is a failure, so a broken driver set-up cannot pass silently.

/// Why no GPU test can run here (ferrocoll-cuda's driver probe: the
/// library, its entry points, `cuInit`, a device), or the number of CUDA
/// devices. Once this is `Ok`, calling the driver cannot panic.
pub fn gpu_status() -> Result<usize, String> {
    ferrocoll_cuda::driver().map(|d| d.count()).map_err(|e| e.context().to_string())
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
