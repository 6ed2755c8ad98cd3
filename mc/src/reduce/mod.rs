//! Host reduction kernels: `dst = op(src0, src1, ...)` element-wise over byte slices.
//!
//! Design:
//! - Validation ([`ReduceOp::check_dtype`], lengths, avg divisor) happens once,
//!   here; then one `match` on (dtype, op) picks a kernel monomorphised for
//!   both, so no loop dispatches per element.
//! - Every kernel runs through one chunked driver (`driver.rs`) that keeps a
//!   chunk of accumulator in L1 while all sources are folded into it, stages
//!   unaligned operands through aligned buffers, and uses AVX2 when the CPU has it.
//! - Integers, `f32`, `f64` and complex reduce in their own arithmetic
//!   (`elementwise.rs`); f16, bf16 and float8 are accumulated in `f32` and
//!   rounded once (`narrow.rs`); maxloc/minloc work on C-layout pairs (`loc.rs`).
//! - float128 and float128 complex are C's `long double` and its complex
//!   (`long_double.rs`: the x87's arithmetic on x86-64, binary128 soft-float
//!   on aarch64), reduced by the same element-wise kernels; other targets
//!   have none, and `check_dtype` refuses them with `NotSupported`.

mod driver;
mod elementwise;
#[cfg(target_arch = "x86_64")]
mod f16c;
mod loc;
#[cfg(any(all(target_arch = "x86_64", target_os = "linux"), all(target_arch = "aarch64", target_os = "linux")))]
mod long_double;
mod narrow;
mod num;

#[cfg(test)]
mod tests;

use ferrocoll_core::backend::{PairKernel, PreparedReduce, ReduceKernel, ReduceSpec};
use ferrocoll_core::{DataType, Error, Float8E4M3, Float8E5M2, ReduceOp, Result};
use half::{bf16, f16};

use driver::Operands;

/// `dst = op(srcs[0], srcs[1], ...)` element-wise, as described by `spec`.
///
/// Every slice must be `spec.count` elements long (pairs for maxloc/minloc);
/// slices may be unaligned for the datatype. For avg, the sum is divided by
/// `spec.avg_divisor` when it is set. Errors: no source, a length that does
/// not match, a zero divisor, or an operation `spec.op.check_dtype` refuses.
///
/// ```
/// use ferrocoll_core::{backend::ReduceSpec, DataType, ReduceOp};
/// let (a, b) = ([1i32, 2, 3], [10i32, 20, 30]);
/// let mut out = [0u8; 12];
/// let spec = ReduceSpec { dtype: DataType::Int32, op: ReduceOp::Sum, count: 3, avg_divisor: None };
/// ferrocoll_mc::reduce_slices(&mut out, &[bytemuck::cast_slice(&a), bytemuck::cast_slice(&b)], &spec)?;
/// assert_eq!(bytemuck::cast_slice::<u8, i32>(&out), [11, 22, 33]);
/// # Ok::<(), ferrocoll_core::Error>(())
/// ```
pub fn reduce_slices(dst: &mut [u8], srcs: &[&[u8]], spec: &ReduceSpec) -> Result<()> {
    let Some((first, rest)) = srcs.split_first() else {
        return Err(Error::invalid_param(format!(
            "reduction {} on {} needs at least one source, got none",
            spec.op, spec.dtype
        )));
    };
    reduce_operands(dst, Some(first), rest, spec)
}

/// `dst = op(dst, srcs[0], srcs[1], ...)`: as [`reduce_slices`] with dst as
/// the first operand. `srcs` may be empty (then dst is only finished: avg
/// divides it, the logical operations turn it into 0/1).
pub fn reduce_slices_in_place(dst: &mut [u8], srcs: &[&[u8]], spec: &ReduceSpec) -> Result<()> {
    reduce_operands(dst, None, srcs, spec)
}

/// `dst = op(first, rest...)`, or `op(dst, rest...)` without `first`.
pub(crate) fn reduce_operands(dst: &mut [u8], first: Option<&[u8]>, rest: &[&[u8]], spec: &ReduceSpec) -> Result<()> {
    prepare(spec)?.run(dst, first, rest)
}

/// `spec` checked (its type and operation, an avg's divisor, its operands'
/// bytes) and its kernel chosen, for [`PreparedReduce::run`], which checks
/// the operands' lengths.
pub(crate) fn prepare(spec: &ReduceSpec) -> Result<PreparedReduce> {
    spec.op.check_dtype(spec.dtype)?;
    if spec.op == ReduceOp::Avg && spec.avg_divisor == Some(0) {
        return Err(Error::invalid_param(format!("avg on {} with divisor 0", spec.dtype)));
    }
    let (kernel, pair) = kernels_of(spec)?;
    PreparedReduce::new(*spec, kernel).map(|p| p.with_pair(pair)).ok_or_else(|| {
        Error::invalid_param(format!(
            "count {} of {}-byte {} elements for {} overflows the address space",
            spec.count,
            spec.op.element_size(spec.dtype),
            spec.dtype,
            spec.op
        ))
    })
}

/// A reduction's kernel, and its pair kernel for two short sources where
/// it has one (`PreparedReduce::run_pair`).
type Kernels = (ReduceKernel, Option<PairKernel>);

/// The kernels of `spec`'s (dtype, op): the one dispatch on them, made
/// once per prepared reduction. Only the element-wise folds without a
/// divisor have a pair kernel (`elementwise::pair_of`).
fn kernels_of(spec: &ReduceSpec) -> Result<Kernels> {
    use DataType as D;
    let alone = |kernel: ReduceKernel| -> Result<Kernels> { Ok((kernel, None)) };
    if spec.op.is_loc() {
        return alone(loc_kernel);
    }
    match spec.dtype {
        D::Int8 => elementwise::int::<i8>(spec),
        D::Int16 => elementwise::int::<i16>(spec),
        D::Int32 => elementwise::int::<i32>(spec),
        D::Int64 => elementwise::int::<i64>(spec),
        D::Int128 => elementwise::int::<i128>(spec),
        D::Uint8 => elementwise::int::<u8>(spec),
        D::Uint16 => elementwise::int::<u16>(spec),
        D::Uint32 => elementwise::int::<u32>(spec),
        D::Uint64 => elementwise::int::<u64>(spec),
        D::Uint128 => elementwise::int::<u128>(spec),
        D::Float32 => elementwise::float::<f32>(spec),
        D::Float64 => elementwise::float::<f64>(spec),
        D::Float32Complex => alone(elementwise::complex::<f32>(spec)?),
        D::Float64Complex => alone(elementwise::complex::<f64>(spec)?),
        D::Float16 => alone(narrow_kernel::<f16>),
        D::Bfloat16 => alone(narrow_kernel::<bf16>),
        D::Float8E4M3 => alone(narrow_kernel::<Float8E4M3>),
        D::Float8E5M2 => alone(narrow_kernel::<Float8E5M2>),
        D::Float128 | D::Float128Complex => float128_kernels(spec),
    }
}

/// float128 as C's `long double` (`HOST_FLOAT128`, the cfg of `long_double.rs`).
#[cfg(any(all(target_arch = "x86_64", target_os = "linux"), all(target_arch = "aarch64", target_os = "linux")))]
fn float128_kernels(spec: &ReduceSpec) -> Result<Kernels> {
    use long_double::LongDouble;
    match spec.dtype {
        DataType::Float128Complex => Ok((elementwise::complex::<LongDouble>(spec)?, None)),
        _ => elementwise::float::<LongDouble>(spec),
    }
}

/// No `long double` arithmetic on this target (`check_dtype` refused it first).
#[cfg(not(any(all(target_arch = "x86_64", target_os = "linux"), all(target_arch = "aarch64", target_os = "linux"))))]
fn float128_kernels(spec: &ReduceSpec) -> Result<Kernels> {
    Err(Error::not_supported(format!("reduction {} on {} is not supported on this target", spec.op, spec.dtype)))
}

// Maxloc/minloc and the narrow floats dispatch on the spec in the kernel.

fn loc_kernel(dst: &mut [u8], first: Option<&[u8]>, rest: &[&[u8]], spec: &ReduceSpec) -> Result<()> {
    loc::reduce(Operands { dst, first, rest }, spec)
}

fn narrow_kernel<T: narrow::Narrow>(
    dst: &mut [u8],
    first: Option<&[u8]>,
    rest: &[&[u8]],
    spec: &ReduceSpec,
) -> Result<()> {
    narrow::reduce::<T>(Operands { dst, first, rest }, spec)
}
