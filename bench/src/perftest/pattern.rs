//! Deterministic inputs for `--check`: what rank r holds at element k, so
//! that every rank can compute what any output element must be.
//!
//! Collectives that move data get pseudo-random bytes (any bit pattern,
//! compared exactly). Reductions get small integers chosen per operation so
//! that results stay exact or nearly so in every datatype: −5..5 (0..10
//! unsigned) for sum, avg, max, min and the loc operations (index = rank);
//! 1, 2 and −1 for prod; 0..3 for the logical operations; random bits for
//! the bitwise ones.

use ferrocoll::{DataType, ReduceOp};

use super::codec::{Class, class, put_int, put_real};

/// SplitMix64's finaliser: a cheap, well-mixed hash.
pub fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn mix(rank: usize, k: u64, salt: u64) -> u64 {
    splitmix((rank as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93) ^ splitmix(k ^ salt))
}

/// The inputs of one benchmark.
#[derive(Clone, Copy, Debug)]
pub struct Inputs {
    /// Element type.
    pub dtype: DataType,
    /// Reduction (`None` for collectives that only move data).
    pub op: Option<ReduceOp>,
}

impl Inputs {
    /// Bytes per element (a (value, index) pair for maxloc/minloc).
    pub fn elem_size(&self) -> usize {
        match self.op {
            Some(op) => op.element_size(self.dtype),
            None => self.dtype.size(),
        }
    }

    /// The small integer rank `rank` reduces at element `k` (`salt` picks
    /// the imaginary part of complex values).
    pub fn value(&self, rank: usize, k: u64, salt: u64) -> i64 {
        let h = mix(rank, k, salt);
        let signed = !matches!(class(self.dtype), Class::Int { signed: false, .. });
        match self.op.unwrap_or(ReduceOp::Sum) {
            ReduceOp::Prod if signed => [1, 2, 1, -1][(h % 4) as usize],
            ReduceOp::Prod => [1, 2, 1, 1][(h % 4) as usize],
            ReduceOp::Land | ReduceOp::Lor | ReduceOp::Lxor => (h % 4) as i64,
            ReduceOp::Band | ReduceOp::Bor | ReduceOp::Bxor => h as i64,
            _ if signed => (h % 11) as i64 - 5,
            _ => (h % 11) as i64,
        }
    }

    /// Write rank `rank`'s elements `first..first + out.len() / elem_size` into `out`.
    pub fn fill(&self, rank: usize, first: u64, out: &mut [u8]) {
        let es = self.elem_size();
        let Some(op) = self.op.filter(|_| class(self.dtype) != Class::Opaque) else {
            return fill_bytes(rank, first * es as u64, out);
        };
        for (i, e) in out.chunks_exact_mut(es).enumerate() {
            let k = first + i as u64;
            self.encode(rank, k, op, e);
        }
    }

    fn encode(&self, rank: usize, k: u64, op: ReduceOp, e: &mut [u8]) {
        let v = self.value(rank, k, 0);
        let size = self.dtype.size();
        match class(self.dtype) {
            Class::Int { .. } => put_int(&mut e[..size], i128::from(v)),
            Class::Real => put_real(&mut e[..size], self.dtype, v as f64),
            Class::Complex(part) => {
                let h = part.size();
                put_real(&mut e[..h], part, v as f64);
                put_real(&mut e[h..2 * h], part, self.value(rank, k, 1) as f64);
            }
            Class::Opaque => {}
        }
        if op.is_loc() {
            e[size..].fill(0);
            let at = self.dtype.loc_index_offset();
            e[at..at + 4].copy_from_slice(&(rank as i32).to_le_bytes());
        }
    }
}

/// Pseudo-random bytes of rank `rank` starting at byte `offset` of its input.
pub fn fill_bytes(rank: usize, offset: u64, out: &mut [u8]) {
    let salt = 0x5eed_0000_0000_0000;
    let mut word_index = offset / 8;
    let mut word = mix(rank, word_index, salt);
    let mut at = (offset % 8) as u32;
    for b in out.iter_mut() {
        if at == 8 {
            word_index += 1;
            word = mix(rank, word_index, salt);
            at = 0;
        }
        *b = (word >> (8 * at)) as u8;
        at += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_do_not_depend_on_where_a_fill_starts() {
        let mut whole = vec![0u8; 64];
        fill_bytes(3, 0, &mut whole);
        let mut part = vec![0u8; 29];
        fill_bytes(3, 13, &mut part);
        assert_eq!(&whole[13..42], &part[..]);
        let mut other = vec![0u8; 64];
        fill_bytes(4, 0, &mut other);
        assert_ne!(whole, other);
    }

    #[test]
    fn values_depend_on_rank_and_element() {
        let inp = Inputs { dtype: DataType::Int32, op: Some(ReduceOp::Sum) };
        let vals: Vec<i64> = (0..64).map(|k| inp.value(0, k, 0)).collect();
        assert!(vals.iter().all(|v| (-5..=5).contains(v)));
        assert!(vals.iter().collect::<std::collections::BTreeSet<_>>().len() > 5);
        let mut a = vec![0u8; 16];
        let mut b = vec![0u8; 8];
        inp.fill(2, 0, &mut a);
        inp.fill(2, 2, &mut b);
        assert_eq!(&a[8..], &b[..]);
    }

    #[test]
    fn loc_pairs_carry_the_rank() {
        let inp = Inputs { dtype: DataType::Float32, op: Some(ReduceOp::Maxloc) };
        let mut e = vec![0xffu8; 8];
        inp.fill(7, 5, &mut e);
        assert_eq!(i32::from_le_bytes([e[4], e[5], e[6], e[7]]), 7);
    }
}
