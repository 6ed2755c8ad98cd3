//! [`Reducer`]: a reduction collective's arithmetic, resolved once at
//! validation: datatype, operation, element size, and the one averaging rule.
//!
//! The rule: an average is a sum until the step that writes final values,
//! which divides by the number of ranks that contributed. Algorithms say
//! which kind of step they take — [`Reducer::partial`] for a combination of
//! partial results, [`Reducer::last`] for the one that produces final values
//! — and nothing else; narrow floats (f16, bf16, float8) are then rounded once
//! more only on the final write of an average.

use crate::backend::ReduceSpec;
use crate::types::{DataType, ReduceOp};

/// How the elements of a reduction collective combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reducer {
    /// Element type.
    pub dtype: DataType,
    /// Operation (already checked to be meaningful for `dtype`).
    pub op: ReduceOp,
    /// Bytes per element (the pair size for maxloc/minloc).
    pub elem_size: usize,
    /// Ranks whose contributions make a final value (the team size).
    pub ranks: usize,
}

impl Reducer {
    /// A combination of partial results: nothing is finished.
    pub fn partial(&self, count: usize) -> ReduceSpec {
        ReduceSpec { dtype: self.dtype, op: self.op, count, avg_divisor: None }
    }

    /// The combination that writes final values: an average is divided by
    /// [`Reducer::ranks`] here, and only here.
    pub fn last(&self, count: usize) -> ReduceSpec {
        let avg_divisor = (self.op == ReduceOp::Avg).then_some(self.ranks);
        ReduceSpec { dtype: self.dtype, op: self.op, count, avg_divisor }
    }

    /// [`Reducer::last`] when `last`, else [`Reducer::partial`].
    pub fn step(&self, count: usize, last: bool) -> ReduceSpec {
        if last { self.last(count) } else { self.partial(count) }
    }

    /// Bytes of `count` elements.
    pub fn bytes(&self, count: usize) -> usize {
        count * self.elem_size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_last_step_of_an_average_divides() {
        let r = Reducer { dtype: DataType::Float32, op: ReduceOp::Avg, elem_size: 4, ranks: 3 };
        assert_eq!(r.partial(5).avg_divisor, None);
        assert_eq!(r.last(5).avg_divisor, Some(3));
        assert_eq!(r.last(5).count, 5);
        assert_eq!((r.step(5, true), r.step(5, false)), (r.last(5), r.partial(5)));
        let s = Reducer { op: ReduceOp::Sum, ..r };
        assert_eq!(s.last(5).avg_divisor, None);
        assert_eq!(s.bytes(5), 20);
    }
}
