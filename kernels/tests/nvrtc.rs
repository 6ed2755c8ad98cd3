//! Compile every kernel with NVRTC (no GPU needed) and check the PTX.
//!
//! NVRTC is dlopened by bare name, so `LD_LIBRARY_PATH` must hold its folder
//! when the process starts. When this process cannot load it but the wheel
//! fetched by `scripts/fetch-nvrtc.sh` is there (or `FERROCOLL_NVRTC_DIR`
//! names a folder), each test re-runs itself in a child process with that
//! folder on `LD_LIBRARY_PATH` and passes when the child passes. With no
//! NVRTC at all a test prints "skipped: ..." — and fails when
//! `REQUIRE_NVRTC=1` (as CI sets it).

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use ferrocoll_core::Status;
use ferrocoll_kernels::{
    all_kernel_names, compile_source, entry_names, nvrtc_probe, nvrtc_version, ptx_for_arch, source,
};

/// Set in the child so that it runs the test instead of spawning again.
const CHILD_MARKER: &str = "FERROCOLL_NVRTC_CHILD";

/// The folder holding the fetched `libnvrtc.so.13`, if there is one built
/// for this CPU (a cross run, under qemu, may find the host's wheel: that
/// one cannot load, so the test skips as without NVRTC).
fn wheel_lib_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("FERROCOLL_NVRTC_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/nvrtc/site/nvidia/cu13/lib"),
    };
    built_for_this_cpu(&dir.join("libnvrtc.so.13")).then_some(dir)
}

/// Whether `lib` is an ELF file for this CPU (its header's `e_machine`).
fn built_for_this_cpu(lib: &std::path::Path) -> bool {
    const EM_X86_64: u16 = 62;
    const EM_AARCH64: u16 = 183;
    let this = if cfg!(target_arch = "x86_64") {
        EM_X86_64
    } else if cfg!(target_arch = "aarch64") {
        EM_AARCH64
    } else {
        return false;
    };
    let mut head = [0u8; 20];
    let read = std::fs::File::open(lib).and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head));
    read.is_ok() && head[..4] == *b"\x7fELF" && u16::from_le_bytes([head[18], head[19]]) == this
}

/// Whether `test` (this test's name) should run its body in this process.
/// Otherwise it has run in a child (and passed, or this panics), or it is skipped.
fn run_here(test: &str) -> bool {
    let why = match nvrtc_probe() {
        Ok(()) => return true,
        Err(e) => e,
    };
    if std::env::var_os(CHILD_MARKER).is_some() {
        panic!("{test}: NVRTC still cannot be loaded in the child with LD_LIBRARY_PATH: {why}");
    }
    if let Some(dir) = wheel_lib_dir() {
        let path = match std::env::var_os("LD_LIBRARY_PATH") {
            Some(old) if !old.is_empty() => {
                let mut p = dir.clone().into_os_string();
                p.push(":");
                p.push(old);
                p
            }
            _ => dir.clone().into_os_string(),
        };
        let exe = std::env::current_exe().expect("the test binary's path");
        eprintln!("{test}: NVRTC is not on the loader path; re-running with {}", dir.display());
        let status = Command::new(exe)
            .args([test, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_MARKER, "1")
            .env("LD_LIBRARY_PATH", path)
            .status()
            .expect("spawn the test binary again");
        assert!(status.success(), "{test} failed in the child with NVRTC from {}: {status}", dir.display());
        return false;
    }
    if std::env::var("REQUIRE_NVRTC").is_ok_and(|v| v == "1") {
        panic!("{test}: REQUIRE_NVRTC=1, but {why}; run scripts/fetch-nvrtc.sh");
    }
    eprintln!("{test}: skipped: {why}");
    false
}

#[test]
fn every_kernel_compiles_for_sm80_and_sm90() {
    if !run_here("every_kernel_compiles_for_sm80_and_sm90") {
        return;
    }
    let (major, minor) = nvrtc_version().unwrap();
    eprintln!("NVRTC {major}.{minor}");
    let expected: HashSet<&str> = all_kernel_names().into_iter().collect();
    for (arch_major, arch_minor) in [(8, 0), (8, 9), (9, 0)] {
        let start = Instant::now();
        let ptx = compile_source(&source(), arch_major, arch_minor).unwrap();
        let text = ptx.to_src();
        eprintln!("compute_{arch_major}{arch_minor}: {} bytes of PTX in {:.1?}", text.len(), start.elapsed());
        assert!(text.contains(&format!(".target sm_{arch_major}{arch_minor}")), "PTX for the wrong target");
        let entries = entry_names(&text);
        let missing: Vec<_> = expected.difference(&entries).collect();
        let extra: Vec<_> = entries.difference(&expected).collect();
        assert!(missing.is_empty(), "entries missing from the PTX: {missing:?}");
        assert!(extra.is_empty(), "entries in the PTX that all_kernel_names() does not list: {extra:?}");
        // Every reduce kernel takes the 96-byte ReduceArgs by value.
        assert!(text.contains(".param .align 8 .b8 fc_reduce_float16_sum_param_0[96]"), "ReduceArgs parameter");
        // From compute capability 8.9 float8 converts in hardware; before it, in software.
        let hardware_fp8 = text.contains("cvt.rn.satfinite.e4m3x2.f32") && text.contains("cvt.rn.f16x2.e4m3x2");
        assert_eq!(
            hardware_fp8,
            (arch_major, arch_minor) >= (8, 9),
            "float8 conversions on sm_{arch_major}{arch_minor}"
        );
    }
}

#[test]
fn ptx_for_arch_compiles_once_per_arch() {
    if !run_here("ptx_for_arch_compiles_once_per_arch") {
        return;
    }
    let a = ptx_for_arch(9, 0).unwrap();
    let b = ptx_for_arch(9, 0).unwrap();
    assert!(Arc::ptr_eq(&a, &b), "the second call compiled again");
    let entries: HashSet<String> = entry_names(&a.to_src()).into_iter().map(str::to_string).collect();
    for name in all_kernel_names() {
        assert!(entries.contains(name), "{name} missing");
    }
}

#[test]
fn a_broken_source_gives_the_compiler_log() {
    if !run_here("a_broken_source_gives_the_compiler_log") {
        return;
    }
    let broken = "extern \"C\" __global__ void broken(int* p) { *p = undeclared_thing; }\n";
    let err = compile_source(broken, 8, 0).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("undeclared_thing") && msg.contains("error"), "no compiler log in: {msg}");
    assert!(msg.contains("compute_80"), "{msg}");

    let err = compile_source(&source(), 1, 0).unwrap_err();
    assert_eq!(err.status(), Status::NotSupported, "{err}");
    assert!(err.to_string().contains("compute_10"), "{err}");

    let err = compile_source("a\0b", 8, 0).unwrap_err();
    assert_eq!(err.status(), Status::InvalidParam, "{err}");
}

#[test]
fn every_kernel_assembles_for_sm90() {
    // NVRTC's built-in ptxas: the inline PTX (f16 conversions, global vector
    // accesses) is only checked here, not by the PTX compilation above.
    if !run_here("every_kernel_assembles_for_sm90") {
        return;
    }
    let start = Instant::now();
    let cubin = ferrocoll_kernels::cubin_for_arch(9, 0).unwrap();
    assert!(Arc::ptr_eq(&cubin, &ferrocoll_kernels::cubin_for_arch(9, 0).unwrap()), "compiled twice");
    eprintln!("sm_90: {} bytes of CUBIN in {:.1?}", cubin.len(), start.elapsed());
    assert!(cubin.starts_with(b"\x7fELF"), "a CUBIN is an ELF image");
    for name in all_kernel_names() {
        let needle: Vec<u8> = [name.as_bytes(), b"\0"].concat();
        assert!(cubin.windows(needle.len()).any(|w| w == needle.as_slice()), "{name} missing from the CUBIN");
    }
}
