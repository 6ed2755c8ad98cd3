//! Compilation straight to a CUBIN (device machine code) for one real
//! architecture: NVRTC runs its built-in ptxas, so inline PTX and register
//! allocation are checked on a machine without a GPU, and a caller may load
//! the result without the driver's JIT step.

use std::ffi::{CString, c_char};

use cudarc::nvrtc::{result, sys};
use ferrocoll_core::{Error, Result};

use crate::compile::{compile_options, nvrtc_probe};

/// An NVRTC program, destroyed on drop.
struct Program {
    prog: sys::nvrtcProgram,
    // Kept alive while the program lives: NVRTC may refer to it.
    _src: CString,
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: prog was created by create_program and is destroyed only here.
        if let Err(e) = unsafe { result::destroy_program(self.prog) } {
            eprintln!("ferrocoll-kernels: nvrtcDestroyProgram failed: {e:?}");
        }
    }
}

/// The program's log as text (empty if NVRTC cannot give it).
fn log(prog: &Program) -> String {
    // SAFETY: prog.prog is a live program (destroyed only on drop).
    match unsafe { result::get_program_log(prog.prog) } {
        Ok(raw) => {
            let bytes: Vec<u8> = raw.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
            String::from_utf8_lossy(&bytes).into_owned()
        }
        Err(e) => format!("(no log: {e:?})"),
    }
}

/// Compile CUDA C `src` to a CUBIN for `sm_<major><minor>`, with the options
/// of [`compile_options`] (the architecture made real). Errors as
/// [`compile_source`](crate::compile_source): `NotSupported` without NVRTC or
/// for an architecture NVRTC does not know, else an error carrying NVRTC's
/// (and ptxas') log.
pub fn compile_cubin(src: &str, major: u32, minor: u32) -> Result<Vec<u8>> {
    nvrtc_probe()?;
    let arch = format!("sm_{major}{minor}");
    let c_src = CString::new(src)
        .map_err(|e| Error::invalid_param(format!("CUDA source has a NUL byte at offset {}", e.nul_position())))?;
    let prog = result::create_program(&c_src, None)
        .map_err(|e| Error::internal(format!("nvrtcCreateProgram for {arch}: {e:?}")))?;
    let prog = Program { prog, _src: c_src };
    let options: Vec<String> = compile_options(major, minor)
        .into_iter()
        .map(|o| if o.starts_with("--gpu-architecture=") { format!("--gpu-architecture={arch}") } else { o })
        .collect();
    // SAFETY: prog.prog is a live program; the options are plain strings without NUL.
    if let Err(e) = unsafe { result::compile_program(prog.prog, &options) } {
        let why = format!("NVRTC failed to compile for {arch} ({e:?}, options {options:?}):\n{}", log(&prog));
        return Err(if e == result::NvrtcError(sys::nvrtcResult::NVRTC_ERROR_INVALID_OPTION) {
            Error::not_supported(why)
        } else {
            Error::internal(why)
        });
    }
    let mut size = 0usize;
    // SAFETY: prog.prog was compiled successfully; size is ours to write.
    let status = unsafe { sys::nvrtcGetCUBINSize(prog.prog, &mut size) };
    if status != sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(Error::internal(format!("nvrtcGetCUBINSize for {arch}: {status:?}")));
    }
    let mut cubin = vec![0u8; size];
    // SAFETY: cubin has the size NVRTC just reported for this program.
    let status = unsafe { sys::nvrtcGetCUBIN(prog.prog, cubin.as_mut_ptr().cast::<c_char>()) };
    if status != sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(Error::internal(format!("nvrtcGetCUBIN for {arch}: {status:?}")));
    }
    Ok(cubin)
}
