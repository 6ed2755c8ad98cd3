//! One NVRTC compilation: create the program, compile it with options
//! (the log becomes part of the error on failure), take the PTX or the
//! CUBIN, destroy the program.

use std::ffi::{CString, c_char};

use ferrocoll_core::{Error, Result};

use super::{Ptx, probe};
use crate::error::{nvrtc_check, nvrtc_error};
use crate::sys::nvrtc as sys;

/// An NVRTC program, destroyed on drop.
struct Program {
    prog: sys::nvrtcProgram,
    /// Kept alive while the program lives: NVRTC may refer to it.
    _src: CString,
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: prog was created in `new` and is destroyed only here.
        let r = unsafe { sys::nvrtcDestroyProgram(&mut self.prog) };
        if let Err(e) = nvrtc_check("nvrtcDestroyProgram", r) {
            ferrocoll_core::log_warn!("{e}");
        }
    }
}

/// A sized output of a compiled program.
#[derive(Clone, Copy)]
enum Output {
    Log,
    Ptx,
    Cubin,
}

impl Program {
    /// Probe NVRTC, then create a program from `src` (`InvalidParam` for a NUL byte).
    fn new(src: &str) -> Result<Program> {
        probe()?;
        let c_src = CString::new(src)
            .map_err(|e| Error::invalid_param(format!("CUDA source has a NUL byte at offset {}", e.nul_position())))?;
        let mut prog: sys::nvrtcProgram = std::ptr::null_mut();
        // SAFETY: NVRTC passed the probe; c_src is NUL-terminated and lives
        // as long as the program (kept in it); no name and no headers.
        let r = unsafe {
            sys::nvrtcCreateProgram(&mut prog, c_src.as_ptr(), std::ptr::null(), 0, std::ptr::null(), std::ptr::null())
        };
        nvrtc_check("nvrtcCreateProgram", r)?;
        Ok(Program { prog, _src: c_src })
    }

    /// Compile with `options`; on failure the error carries the options and NVRTC's log.
    fn compile(&self, options: &[String]) -> Result<()> {
        let c_opts = options
            .iter()
            .map(|o| CString::new(o.as_str()))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|_| Error::invalid_param(format!("an NVRTC option has a NUL byte: {options:?}")))?;
        let ptrs: Vec<*const c_char> = c_opts.iter().map(|o| o.as_ptr()).collect();
        let n = i32::try_from(ptrs.len())
            .map_err(|_| Error::invalid_param(format!("{} NVRTC options are too many", ptrs.len())))?;
        // SAFETY: prog is live; ptrs holds n NUL-terminated strings that
        // outlive the call (c_opts).
        let r = unsafe { sys::nvrtcCompileProgram(self.prog, n, ptrs.as_ptr()) };
        if r == sys::nvrtcResult::NVRTC_SUCCESS {
            return Ok(());
        }
        let e = nvrtc_error("nvrtcCompileProgram", r);
        let context = format!("{}; options {options:?}; log:\n{}", e.context(), self.log());
        Err(Error::new(e.status(), context))
    }

    /// Output `what`: its size first, then the bytes.
    fn output(&self, what: Output) -> Result<Vec<u8>> {
        let mut n = 0usize;
        let (call, r) = match what {
            // SAFETY: prog is a live program (destroyed only on drop); n is ours to write.
            Output::Log => ("nvrtcGetProgramLogSize", unsafe { sys::nvrtcGetProgramLogSize(self.prog, &mut n) }),
            // SAFETY: as for the log.
            Output::Ptx => ("nvrtcGetPTXSize", unsafe { sys::nvrtcGetPTXSize(self.prog, &mut n) }),
            // SAFETY: as for the log.
            Output::Cubin => ("nvrtcGetCUBINSize", unsafe { sys::nvrtcGetCUBINSize(self.prog, &mut n) }),
        };
        nvrtc_check(call, r)?;
        let mut out = vec![0u8; n];
        let buf = out.as_mut_ptr().cast::<c_char>();
        let (call, r) = match what {
            // SAFETY: buf has the length NVRTC just reported for this output of this live program.
            Output::Log => ("nvrtcGetProgramLog", unsafe { sys::nvrtcGetProgramLog(self.prog, buf) }),
            // SAFETY: as above.
            Output::Ptx => ("nvrtcGetPTX", unsafe { sys::nvrtcGetPTX(self.prog, buf) }),
            // SAFETY: as above.
            Output::Cubin => ("nvrtcGetCUBIN", unsafe { sys::nvrtcGetCUBIN(self.prog, buf) }),
        };
        nvrtc_check(call, r)?;
        Ok(out)
    }

    /// The program's log as text.
    fn log(&self) -> String {
        match self.output(Output::Log) {
            Ok(mut raw) => {
                if let Some(end) = raw.iter().position(|&b| b == 0) {
                    raw.truncate(end);
                }
                String::from_utf8_lossy(&raw).into_owned()
            }
            Err(e) => format!("(no log: {e})"),
        }
    }
}

/// Compile CUDA C `src` to PTX with `options` (which name a virtual
/// architecture, `--gpu-architecture=compute_XY`).
///
/// Errors: `NotSupported` when NVRTC cannot be loaded or rejects an option
/// (an architecture it does not know); `InvalidParam` for a NUL byte in the
/// source; otherwise the error of the failed call, carrying NVRTC's log
/// for a compilation error.
pub fn compile_ptx(src: &str, options: &[String]) -> Result<Ptx> {
    let prog = Program::new(src)?;
    prog.compile(options)?;
    Ptx::from_image(prog.output(Output::Ptx)?)
}

/// Compile CUDA C `src` to a CUBIN (device machine code) with `options`,
/// which name a real architecture (`--gpu-architecture=sm_XY`): NVRTC runs
/// its built-in ptxas, so the inline PTX is checked without a GPU. Errors
/// as for [`compile_ptx`].
pub fn compile_cubin(src: &str, options: &[String]) -> Result<Vec<u8>> {
    let prog = Program::new(src)?;
    prog.compile(options)?;
    prog.output(Output::Cubin)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrocoll_core::Status;

    const KERNEL: &str = "extern \"C\" __global__ void fc_test(int* p) { *p = 42; }\n";

    fn arch(a: &str) -> Vec<String> {
        vec![format!("--gpu-architecture={a}")]
    }

    #[test]
    fn compiles_to_ptx_and_cubin_or_says_why_not() {
        if let Err(e) = probe() {
            // CI runs the NVRTC tests in ferrocoll-kernels, which find the wheel themselves.
            eprintln!("compiles_to_ptx_and_cubin_or_says_why_not: skipped: {e}");
            let e = compile_ptx(KERNEL, &arch("compute_80")).unwrap_err();
            assert_eq!(e.status(), Status::NotSupported, "{e}");
            return;
        }
        let ptx = compile_ptx(KERNEL, &arch("compute_80")).unwrap();
        assert!(ptx.as_str().contains(".entry fc_test"), "{}", ptx.as_str());
        let cubin = compile_cubin(KERNEL, &arch("sm_80")).unwrap();
        assert!(cubin.starts_with(b"\x7fELF"));
        let e = compile_ptx("__global__ void f() { nope; }", &arch("compute_80")).unwrap_err();
        assert!(e.context().contains("NVRTC_ERROR_COMPILATION") && e.context().contains("nope"), "{e}");
        let e = compile_ptx(KERNEL, &arch("compute_10")).unwrap_err();
        assert_eq!(e.status(), Status::NotSupported, "{e}");
        let e = compile_cubin("a\0b", &arch("sm_80")).unwrap_err();
        assert_eq!(e.status(), Status::InvalidParam, "{e}");
    }
}
