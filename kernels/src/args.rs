//! The argument block of the reduce kernels, shared bit for bit with the C
//! struct `ReduceArgs` of `cuda/prelude.cuh` (which `static_assert`s the same
//! size and offsets as the tests below).

/// The most sources one reduce kernel launch folds into its destination.
pub const MAX_SOURCES: usize = 8;

/// Kernel argument of every reduce kernel, passed **by value** as the only
/// parameter: `extern "C" __global__ void <name>(ReduceArgs args)`.
///
/// Addresses are device (or host-mapped) virtual addresses as `u64`.
/// `dst` may equal one of the sources (in place); other overlaps are not
/// allowed. Unused `srcs` entries are ignored.
///
/// ```
/// use ferrocoll_kernels::{ReduceArgs, MAX_SOURCES};
/// let args = ReduceArgs { dst: 0x1000, count: 64, nsrcs: 2, srcs: [0x2000, 0x3000, 0, 0, 0, 0, 0, 0], ..Default::default() };
/// assert_eq!(std::mem::size_of::<ReduceArgs>(), 96);
/// assert!(args.nsrcs as usize <= MAX_SOURCES);
/// ```
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReduceArgs {
    /// Destination address.
    pub dst: u64,
    /// Source addresses; the first `nsrcs` are used (the strided variant reads only `srcs[0]`).
    pub srcs: [u64; MAX_SOURCES],
    /// Bytes between consecutive sources; only the strided variant reads it
    /// (source `i` is at `srcs[0] + i * src_stride`).
    pub src_stride: u64,
    /// Elements to reduce (pairs for maxloc/minloc).
    pub count: u64,
    /// Number of sources, 1 to [`MAX_SOURCES`].
    pub nsrcs: u32,
    /// avg kernels divide the sum by this when it is non-zero (0 = plain sum);
    /// every other kernel ignores it.
    pub avg_divisor: u32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{align_of, offset_of, size_of};

    #[test]
    fn layout_matches_the_c_struct() {
        assert_eq!(size_of::<ReduceArgs>(), 96);
        assert_eq!(align_of::<ReduceArgs>(), 8);
        assert_eq!(offset_of!(ReduceArgs, dst), 0);
        assert_eq!(offset_of!(ReduceArgs, srcs), 8);
        assert_eq!(offset_of!(ReduceArgs, src_stride), 72);
        assert_eq!(offset_of!(ReduceArgs, count), 80);
        assert_eq!(offset_of!(ReduceArgs, nsrcs), 88);
        assert_eq!(offset_of!(ReduceArgs, avg_divisor), 92);
    }

    #[test]
    fn the_c_struct_asserts_the_same_layout() {
        let src = crate::source();
        for needle in [
            "sizeof(ReduceArgs) == 96",
            "alignof(ReduceArgs) == 8",
            "__builtin_offsetof(ReduceArgs, dst) == 0",
            "__builtin_offsetof(ReduceArgs, srcs) == 8",
            "__builtin_offsetof(ReduceArgs, src_stride) == 72",
            "__builtin_offsetof(ReduceArgs, count) == 80",
            "__builtin_offsetof(ReduceArgs, nsrcs) == 88",
            "__builtin_offsetof(ReduceArgs, avg_divisor) == 92",
            &format!("FC_MAX_SOURCES {MAX_SOURCES}"),
        ] {
            assert!(src.contains(needle), "the CUDA source lacks `{needle}`");
        }
    }
}
