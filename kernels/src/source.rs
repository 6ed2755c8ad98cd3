//! The CUDA C text: a few files under `kernels/cuda/`, embedded at build
//! time and concatenated in dependency order (NVRTC gets one translation
//! unit and no include path, so the files `#include` nothing, not even CUDA's
//! own headers).

/// `(file name, text)` of every part of the source, in compilation order.
pub const PARTS: &[(&str, &str)] = &[
    ("prelude.cuh", include_str!("../cuda/prelude.cuh")),
    ("convert.cuh", include_str!("../cuda/convert.cuh")),
    ("ops.cuh", include_str!("../cuda/ops.cuh")),
    ("loc.cuh", include_str!("../cuda/loc.cuh")),
    ("reduce.cuh", include_str!("../cuda/reduce.cuh")),
    ("reduce.cu", include_str!("../cuda/reduce.cu")),
    ("copy.cu", include_str!("../cuda/copy.cu")),
    ("flag.cu", include_str!("../cuda/flag.cu")),
];

/// The full CUDA C text that [`ptx_for_arch`](crate::ptx_for_arch) compiles:
/// every part of [`PARTS`], each preceded by a `#line` directive so that
/// compiler messages name the file and line under `kernels/cuda/`.
pub fn source() -> String {
    let mut text = String::with_capacity(PARTS.iter().map(|(_, t)| t.len() + 32).sum());
    for (name, part) in PARTS {
        text.push_str(&format!("#line 1 \"{name}\"\n"));
        text.push_str(part);
        if !part.ends_with('\n') {
            text.push('\n');
        }
    }
    text
}
