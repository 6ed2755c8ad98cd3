//! Tests of the host reduction kernels: helpers (seeded RNG, aligned and
//! unaligned buffers, operand generation) shared by the test files.

mod edge;
mod matrix;
mod reference;

use ferrocoll_core::backend::ReduceSpec;
use ferrocoll_core::{DataType, ReduceOp};
use half::{bf16, f16};

use crate::fp8;

/// splitmix64: tiny, seedable, good enough for test inputs.
pub(super) struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5851_f42d_4c95_7f2d)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Uniform in `[-r, r)`.
    pub fn float(&mut self, r: f64) -> f64 {
        ((self.next() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) * r
    }

    pub fn bytes(&mut self, out: &mut [u8]) {
        for b in out {
            *b = self.next() as u8;
        }
    }
}

/// A seed for one test case, from whatever identifies it.
pub(super) fn seed_of(parts: &[u64]) -> u64 {
    parts.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &p| (h ^ p).wrapping_mul(0x0100_0000_01b3))
}

/// Bytes at a chosen misalignment from a 16-byte-aligned base.
pub(super) struct Buf {
    store: Vec<u128>,
    off: usize,
    len: usize,
}

impl Buf {
    pub fn new(len: usize, misalign: usize) -> Buf {
        Buf { store: vec![0; (len + misalign).div_ceil(16) + 1], off: misalign, len }
    }

    pub fn from_bytes(bytes: &[u8], misalign: usize) -> Buf {
        let mut b = Buf::new(bytes.len(), misalign);
        b.bytes_mut().copy_from_slice(bytes);
        b
    }

    pub fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.store)[self.off..self.off + self.len]
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut(&mut self.store)[self.off..self.off + self.len]
    }
}

/// Poison written into every destination before a run.
pub(super) const POISON: u8 = 0xa5;

pub(super) fn spec(dtype: DataType, op: ReduceOp, count: usize, avg_divisor: Option<usize>) -> ReduceSpec {
    ReduceSpec { dtype, op, count, avg_divisor }
}

/// Every (dtype, op) pair that `check_dtype` accepts.
pub(super) fn supported() -> Vec<(DataType, ReduceOp)> {
    let mut v = Vec::new();
    for dt in DataType::ALL {
        for op in ReduceOp::ALL {
            if op.check_dtype(dt).is_ok() {
                v.push((dt, op));
            }
        }
    }
    v
}

/// The bytes of `x` rounded to a real float type (narrow ones included).
pub(super) fn float_bytes(dt: DataType, x: f64) -> Vec<u8> {
    match dt {
        DataType::Float16 => f16::from_f64(x).to_bits().to_le_bytes().to_vec(),
        DataType::Bfloat16 => bf16::from_f64(x).to_bits().to_le_bytes().to_vec(),
        DataType::Float32 => (x as f32).to_le_bytes().to_vec(),
        DataType::Float64 => x.to_le_bytes().to_vec(),
        #[cfg(any(
            all(target_arch = "x86_64", target_os = "linux"),
            all(target_arch = "aarch64", target_os = "linux")
        ))]
        DataType::Float128 => crate::long_double::from_f64(x).to_vec(),
        DataType::Float8E4M3 => vec![fp8::f32_to_e4m3(x as f32)],
        DataType::Float8E5M2 => vec![fp8::f32_to_e5m2(x as f32)],
        _ => panic!("{dt} is not a real float"),
    }
}

/// One random element (or pair) of `dt` for `op`.
fn element(dt: DataType, op: ReduceOp, rng: &mut Rng) -> Vec<u8> {
    if op.is_loc() {
        // Few distinct values so that ties are common; garbage in the padding.
        let mut pair = vec![0u8; dt.loc_pair_size()];
        rng.bytes(&mut pair);
        let v = rng.below(5) as i64 - 2;
        let value = if dt.is_integer() {
            int_bytes(dt, if dt.is_signed_integer() { v as i128 as u128 } else { v.unsigned_abs() as u128 })
        } else {
            float_bytes(dt, [-1.5, 0.0, 1.0, 2.5, -0.0][(v + 2) as usize])
        };
        pair[..dt.size()].copy_from_slice(&value);
        let index = (rng.next() as i32) >> rng.below(31);
        pair[dt.loc_index_offset()..dt.loc_index_offset() + 4].copy_from_slice(&index.to_le_bytes());
        return pair;
    }
    if dt.is_integer() {
        // A quarter zeros (for the logical ops), else full-width random bits.
        let bits = if rng.below(4) == 0 { 0 } else { (u128::from(rng.next()) << 64) | u128::from(rng.next()) };
        return int_bytes(dt, bits);
    }
    match dt {
        // Values on a 2^-8 grid within ±16: every partial sum of 8 is exact in
        // f32, so sums are rounded exactly once and match the f64 reference.
        DataType::Float16 | DataType::Bfloat16 | DataType::Float8E4M3 | DataType::Float8E5M2 => {
            float_bytes(dt, (rng.float(16.0) * 256.0).round() / 256.0)
        }
        DataType::Float32 | DataType::Float64 | DataType::Float128 => float_bytes(dt, rng.float(4.0)),
        DataType::Float32Complex => {
            [rng.float(2.0) as f32, rng.float(2.0) as f32].iter().flat_map(|p| p.to_le_bytes()).collect()
        }
        DataType::Float64Complex => [rng.float(2.0), rng.float(2.0)].iter().flat_map(|p| p.to_le_bytes()).collect(),
        DataType::Float128Complex => {
            [rng.float(2.0), rng.float(2.0)].iter().flat_map(|&p| float_bytes(DataType::Float128, p)).collect()
        }
        _ => panic!("no generator for {dt}"),
    }
}

/// The low `dt.size()` bytes of `bits`.
pub(super) fn int_bytes(dt: DataType, bits: u128) -> Vec<u8> {
    bits.to_le_bytes()[..dt.size()].to_vec()
}

/// `count` random elements of `dt` for `op`, as bytes.
pub(super) fn operand(dt: DataType, op: ReduceOp, count: usize, rng: &mut Rng) -> Vec<u8> {
    (0..count).flat_map(|_| element(dt, op, rng)).collect()
}
