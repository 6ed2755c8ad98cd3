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

use ferrocoll_core::backend::ReduceSpec;
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
    check(spec, dst.len(), srcs)?;
    dispatch(Operands { dst, first: Some(first), rest }, spec)
}

/// `dst = op(dst, srcs[0], srcs[1], ...)`: as [`reduce_slices`] with dst as
/// the first operand. `srcs` may be empty (then dst is only finished: avg
/// divides it, the logical operations turn it into 0/1).
pub fn reduce_slices_in_place(dst: &mut [u8], srcs: &[&[u8]], spec: &ReduceSpec) -> Result<()> {
    check(spec, dst.len(), srcs)?;
    dispatch(Operands { dst, first: None, rest: srcs }, spec)
}

/// Operand bytes of `spec`, or an error naming what overflowed.
fn operand_bytes(spec: &ReduceSpec) -> Result<usize> {
    let size = spec.op.element_size(spec.dtype);
    spec.count.checked_mul(size).ok_or_else(|| {
        Error::invalid_param(format!(
            "count {} of {}-byte {} elements for {} overflows the address space",
            spec.count, size, spec.dtype, spec.op
        ))
    })
}

fn check(spec: &ReduceSpec, dst_len: usize, srcs: &[&[u8]]) -> Result<()> {
    spec.op.check_dtype(spec.dtype)?;
    if spec.op == ReduceOp::Avg && spec.avg_divisor == Some(0) {
        return Err(Error::invalid_param(format!("avg on {} with divisor 0", spec.dtype)));
    }
    let bytes = operand_bytes(spec)?;
    let what = |name: &str, len: usize| {
        Error::invalid_param(format!(
            "{name} has {len} bytes but {} {} elements for {} need {bytes}",
            spec.count, spec.dtype, spec.op
        ))
    };
    if dst_len != bytes {
        return Err(what("destination", dst_len));
    }
    if let Some((i, s)) = srcs.iter().enumerate().find(|(_, s)| s.len() != bytes) {
        return Err(what(&format!("source {i}"), s.len()));
    }
    Ok(())
}

/// The one dispatch on (dtype, op) of a call.
fn dispatch(ops: Operands<'_>, spec: &ReduceSpec) -> Result<()> {
    use DataType as D;
    if ops.dst.is_empty() {
        return Ok(());
    }
    if spec.op.is_loc() {
        return loc::reduce(ops, spec);
    }
    match spec.dtype {
        D::Int8 => elementwise::int::<i8>(ops, spec),
        D::Int16 => elementwise::int::<i16>(ops, spec),
        D::Int32 => elementwise::int::<i32>(ops, spec),
        D::Int64 => elementwise::int::<i64>(ops, spec),
        D::Int128 => elementwise::int::<i128>(ops, spec),
        D::Uint8 => elementwise::int::<u8>(ops, spec),
        D::Uint16 => elementwise::int::<u16>(ops, spec),
        D::Uint32 => elementwise::int::<u32>(ops, spec),
        D::Uint64 => elementwise::int::<u64>(ops, spec),
        D::Uint128 => elementwise::int::<u128>(ops, spec),
        D::Float32 => elementwise::float::<f32>(ops, spec),
        D::Float64 => elementwise::float::<f64>(ops, spec),
        D::Float32Complex => elementwise::complex::<f32>(ops, spec),
        D::Float64Complex => elementwise::complex::<f64>(ops, spec),
        D::Float16 => narrow::reduce::<f16>(ops, spec),
        D::Bfloat16 => narrow::reduce::<bf16>(ops, spec),
        D::Float8E4M3 => narrow::reduce::<Float8E4M3>(ops, spec),
        D::Float8E5M2 => narrow::reduce::<Float8E5M2>(ops, spec),
        D::Float128 | D::Float128Complex => {
            Err(Error::not_supported(format!("reduction {} on {} is not supported", spec.op, spec.dtype)))
        }
    }
}
