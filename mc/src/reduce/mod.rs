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
//! - float128 and float128 complex have no arithmetic (Rust has no stable
//!   binary128): `check_dtype` refuses them with `NotSupported`.

mod driver;
mod elementwise;
#[cfg(target_arch = "x86_64")]
mod f16c;
mod loc;
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
    PreparedReduce::new(*spec, kernel_of(spec)?).ok_or_else(|| {
        Error::invalid_param(format!(
            "count {} of {}-byte {} elements for {} overflows the address space",
            spec.count,
            spec.op.element_size(spec.dtype),
            spec.dtype,
            spec.op
        ))
    })
}

/// The kernel of `spec`'s (dtype, op): the one dispatch on them, made
/// once per prepared reduction.
fn kernel_of(spec: &ReduceSpec) -> Result<ReduceKernel> {
    use DataType as D;
    if spec.op.is_loc() {
        return Ok(loc_kernel);
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
        D::Float32Complex => elementwise::complex::<f32>(spec),
        D::Float64Complex => elementwise::complex::<f64>(spec),
        D::Float16 => Ok(narrow_kernel::<f16>),
        D::Bfloat16 => Ok(narrow_kernel::<bf16>),
        D::Float8E4M3 => Ok(narrow_kernel::<Float8E4M3>),
        D::Float8E5M2 => Ok(narrow_kernel::<Float8E5M2>),
        D::Float128 | D::Float128Complex => {
            Err(Error::not_supported(format!("reduction {} on {} is not supported", spec.op, spec.dtype)))
        }
    }
}

/// The pair kernel of `spec`'s (dtype, op), where its kernel is an
/// element-wise fold without a divisor (see `elementwise::pair_of`): for
/// reductions prepared once and run at every post (a one-off reduction
/// would spend on this dispatch what the pair kernel saves).
pub(crate) fn pair_of(spec: &ReduceSpec) -> Option<PairKernel> {
    use DataType as D;
    match spec.dtype {
        D::Int8 => elementwise::int_pair_of::<i8>(spec.op),
        D::Int16 => elementwise::int_pair_of::<i16>(spec.op),
        D::Int32 => elementwise::int_pair_of::<i32>(spec.op),
        D::Int64 => elementwise::int_pair_of::<i64>(spec.op),
        D::Int128 => elementwise::int_pair_of::<i128>(spec.op),
        D::Uint8 => elementwise::int_pair_of::<u8>(spec.op),
        D::Uint16 => elementwise::int_pair_of::<u16>(spec.op),
        D::Uint32 => elementwise::int_pair_of::<u32>(spec.op),
        D::Uint64 => elementwise::int_pair_of::<u64>(spec.op),
        D::Uint128 => elementwise::int_pair_of::<u128>(spec.op),
        D::Float32 => elementwise::pair_of::<f32>(spec.op),
        D::Float64 => elementwise::pair_of::<f64>(spec.op),
        _ => None,
    }
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
