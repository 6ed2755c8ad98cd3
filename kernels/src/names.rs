//! Entry-point names of the kernels: one reduce kernel (and one strided
//! variant) per meaningful (datatype, operation), plus copy and the stream
//! flag kernels. The names are generated here by macros and in the CUDA
//! source by macros, from the same `fc_reduce_<dtype>_<op>` pattern with
//! [`DataType::name`] and [`ReduceOp::name`]; the tests check that both agree.

use ferrocoll_core::{DataType, ReduceOp, Result};

/// Device-to-device (or any two device-accessible addresses) byte copy:
/// `extern "C" __global__ void fc_copy(u64 dst, u64 src, u64 bytes)`.
/// The buffers must not overlap.
pub const COPY_KERNEL: &str = "fc_copy";

/// `extern "C" __global__ void fc_flag_write(u64 flag_addr, u64 value)`:
/// one thread stores `value` to the 8-byte flag with a volatile store between
/// two `__threadfence_system()`, so that everything the stream did before is
/// visible to the host (or another device) before the flag.
pub const FLAG_WRITE_KERNEL: &str = "fc_flag_write";

/// `extern "C" __global__ void fc_flag_wait(u64 flag_addr, u64 value)`: one
/// thread spins until `*(volatile u64*)flag_addr >= value`, then fences, so
/// that the stream's later work sees what the writer published before the flag.
pub const FLAG_WAIT_KERNEL: &str = "fc_flag_wait";

/// One row of names: the 13 operations of one datatype, in [`ReduceOp::ALL`] order.
macro_rules! row {
    ($prefix:literal, $dt:literal) => {
        [
            concat!($prefix, $dt, "_sum"),
            concat!($prefix, $dt, "_prod"),
            concat!($prefix, $dt, "_max"),
            concat!($prefix, $dt, "_min"),
            concat!($prefix, $dt, "_land"),
            concat!($prefix, $dt, "_lor"),
            concat!($prefix, $dt, "_lxor"),
            concat!($prefix, $dt, "_band"),
            concat!($prefix, $dt, "_bor"),
            concat!($prefix, $dt, "_bxor"),
            concat!($prefix, $dt, "_maxloc"),
            concat!($prefix, $dt, "_minloc"),
            concat!($prefix, $dt, "_avg"),
        ]
    };
}

/// Every (datatype, operation) name, rows in [`DataType::ALL`] order; only
/// the entries that [`ReduceOp::check_device_dtype`] accepts exist in the source.
macro_rules! table {
    ($prefix:literal) => {
        [
            row!($prefix, "int8"),
            row!($prefix, "int16"),
            row!($prefix, "int32"),
            row!($prefix, "int64"),
            row!($prefix, "int128"),
            row!($prefix, "uint8"),
            row!($prefix, "uint16"),
            row!($prefix, "uint32"),
            row!($prefix, "uint64"),
            row!($prefix, "uint128"),
            row!($prefix, "float16"),
            row!($prefix, "float32"),
            row!($prefix, "float64"),
            row!($prefix, "bfloat16"),
            row!($prefix, "float128"),
            row!($prefix, "float32_complex"),
            row!($prefix, "float64_complex"),
            row!($prefix, "float128_complex"),
            row!($prefix, "float8_e4m3"),
            row!($prefix, "float8_e5m2"),
        ]
    };
}

const NAMES: [[&str; ReduceOp::ALL.len()]; DataType::ALL.len()] = table!("fc_reduce_");
const STRIDED_NAMES: [[&str; ReduceOp::ALL.len()]; DataType::ALL.len()] = table!("fc_reduce_strided_");

fn lookup(
    table: &'static [[&'static str; ReduceOp::ALL.len()]; DataType::ALL.len()],
    dtype: DataType,
    op: ReduceOp,
) -> Result<&'static str> {
    op.check_device_dtype(dtype)
        .map_err(|e| e.prefixed(format_args!("no device reduce kernel for {op} on {dtype}")))?;
    Ok(table[dtype as usize][op as usize])
}

/// The entry point that reduces `nsrcs` sources of `dtype` with `op` into
/// the destination (a kernel taking one [`ReduceArgs`](crate::ReduceArgs)).
///
/// Errors (naming both) when the pair is meaningless: the same cases as
/// [`ReduceOp::check_device_dtype`] (bitwise or logical on floats, an
/// ordering of complex numbers, any float128 arithmetic).
///
/// ```
/// use ferrocoll_core::{DataType, ReduceOp};
/// assert_eq!(ferrocoll_kernels::reduce_kernel(DataType::Bfloat16, ReduceOp::Sum)?, "fc_reduce_bfloat16_sum");
/// assert!(ferrocoll_kernels::reduce_kernel(DataType::Float32, ReduceOp::Bxor).is_err());
/// # Ok::<(), ferrocoll_core::Error>(())
/// ```
pub fn reduce_kernel(dtype: DataType, op: ReduceOp) -> Result<&'static str> {
    lookup(&NAMES, dtype, op)
}

/// As [`reduce_kernel`], for the variant whose source `i` lies at
/// `srcs[0] + i * src_stride` bytes (sources packed in one buffer).
pub fn reduce_strided_kernel(dtype: DataType, op: ReduceOp) -> Result<&'static str> {
    lookup(&STRIDED_NAMES, dtype, op)
}

/// The name of every entry point in the source: each reduce kernel and its
/// strided variant, then copy and the two flag kernels.
pub fn all_kernel_names() -> Vec<&'static str> {
    let mut names = Vec::new();
    for dtype in DataType::ALL {
        for op in ReduceOp::ALL {
            if op.check_device_dtype(dtype).is_ok() {
                names.push(NAMES[dtype as usize][op as usize]);
                names.push(STRIDED_NAMES[dtype as usize][op as usize]);
            }
        }
    }
    names.extend([COPY_KERNEL, FLAG_WRITE_KERNEL, FLAG_WAIT_KERNEL]);
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrocoll_core::Status;

    #[test]
    fn every_meaningful_pair_has_a_kernel_named_after_it() {
        let mut count = 0;
        for dtype in DataType::ALL {
            for op in ReduceOp::ALL {
                match op.check_device_dtype(dtype) {
                    Ok(()) => {
                        count += 1;
                        assert_eq!(reduce_kernel(dtype, op).unwrap(), format!("fc_reduce_{dtype}_{op}"));
                        assert_eq!(
                            reduce_strided_kernel(dtype, op).unwrap(),
                            format!("fc_reduce_strided_{dtype}_{op}")
                        );
                    }
                    Err(why) => {
                        for e in [reduce_kernel(dtype, op).unwrap_err(), reduce_strided_kernel(dtype, op).unwrap_err()]
                        {
                            let msg = e.to_string();
                            assert!(msg.contains(dtype.name()) && msg.contains(op.name()), "{msg}");
                            assert_eq!(e.status(), why.status(), "{msg}");
                        }
                    }
                }
            }
        }
        // Integers: 10 x 13; real floats (f16, bf16, f32, f64, two float8): 6 x 7; complex: 2 x 3.
        assert_eq!(count, 130 + 42 + 6);
        let names = all_kernel_names();
        assert_eq!(names.len(), 2 * count + 3);
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "duplicate kernel names");
    }

    #[test]
    fn meaningless_pairs_are_refused_with_the_core_status() {
        let e = reduce_kernel(DataType::Float16, ReduceOp::Band).unwrap_err();
        assert_eq!(e.status(), Status::InvalidParam);
        let e = reduce_kernel(DataType::Float128, ReduceOp::Sum).unwrap_err();
        assert_eq!(e.status(), Status::NotSupported);
        assert!(e.to_string().contains("float128"), "{e}");
        let e = reduce_strided_kernel(DataType::Float32Complex, ReduceOp::Max).unwrap_err();
        assert!(e.to_string().contains("float32_complex") && e.to_string().contains("max"), "{e}");
    }

    /// The macro of `reduce.cu` that emits the entries of `dtype`'s family.
    fn family(dtype: DataType) -> Option<&'static str> {
        if dtype.is_float128() {
            None
        } else if dtype.is_integer() {
            Some("FC_INTEGER")
        } else if dtype.is_complex() {
            Some("FC_COMPLEX")
        } else if dtype.is_narrow_float() {
            Some("FC_NARROW")
        } else {
            Some("FC_FLOAT")
        }
    }

    #[test]
    fn every_name_is_an_entry_of_the_source() {
        // reduce.cu emits one family macro per datatype, and each family
        // macro one FC_REDUCE(dt, op, ...) per operation: check that both
        // agree with check_device_dtype (the NVRTC and emulation tests check the
        // compiled entry points themselves).
        let src = crate::source();
        for dtype in DataType::ALL {
            let Some(family) = family(dtype) else {
                assert!(!src.contains(&format!("({}, ", dtype.name())), "{dtype} has kernels");
                continue;
            };
            assert!(src.contains(&format!("\n{family}({}, ", dtype.name())), "no {family}({dtype}, ...)");
            let body = src.split(&format!("#define {family}(")).nth(1).and_then(|b| b.split("\n\n").next());
            let body = body.unwrap_or_else(|| panic!("no #define {family}"));
            for op in ReduceOp::ALL {
                let line = format!("FC_REDUCE(dt, {}, ", op.name());
                assert_eq!(body.contains(&line), op.check_device_dtype(dtype).is_ok(), "{family} and {op} on {dtype}");
            }
        }
        for name in [COPY_KERNEL, FLAG_WRITE_KERNEL, FLAG_WAIT_KERNEL] {
            assert!(src.contains(&format!("__global__ void {name}(")), "{name}");
        }
    }
}
