//! `--check`: where each rank's inputs go before an iteration, which output
//! elements must hold what after it, and the comparison.
//!
//! The first iteration of a size is checked element by element against the
//! inputs and the reference (see [`super::reference`]); its output bytes are
//! then kept, and later iterations that produce the same bytes pass with one
//! comparison. Any difference is checked element by element again (float
//! results may legitimately vary in the last bits between iterations).

use ferrocoll::CollType;

use super::pattern::{Inputs, fill_bytes};
use super::reference::{Reference, Wrong};

/// One of the two buffers of a rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The source buffer.
    Src,
    /// The destination buffer.
    Dst,
}

/// A run of elements of one buffer: `len` elements from element `at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// Which buffer.
    pub side: Side,
    /// First element.
    pub at: usize,
    /// Number of elements.
    pub len: usize,
}

/// Where an input goes: rank's input elements `first..` fill `span`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Put {
    /// Where.
    pub span: Span,
    /// The input element written first.
    pub first: u64,
}

/// What an output span must hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Want {
    /// Rank `rank`'s input elements from `first` on.
    Copy {
        /// Whose input.
        rank: usize,
        /// From which element.
        first: u64,
    },
    /// The reduction of every rank's input elements from `first` on.
    Reduced {
        /// From which element.
        first: u64,
    },
}

/// The shape of one benchmark on one rank.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Collective.
    pub coll: CollType,
    /// Block count.
    pub c: usize,
    /// Team size.
    pub p: usize,
    /// This rank.
    pub rank: usize,
    /// Root of rooted collectives.
    pub root: usize,
    /// In place (where it applies).
    pub in_place: bool,
}

impl Shape {
    fn ip(&self) -> bool {
        self.in_place && super::layout::has_in_place(self.coll)
    }

    /// Where this rank's input goes.
    pub fn inputs(&self) -> Vec<Put> {
        use CollType::*;
        let (c, p, r, ip, is_root) = (self.c, self.p, self.rank, self.ip(), self.rank == self.root);
        let put = |side, at, len| vec![Put { span: Span { side, at, len }, first: 0 }];
        match self.coll {
            Barrier | Fanin | Fanout => vec![],
            Bcast if is_root => put(Side::Src, 0, c),
            Bcast => vec![],
            Allreduce if ip => put(Side::Dst, 0, c),
            Reduce if ip && is_root => put(Side::Dst, 0, c),
            Allreduce | Reduce => put(Side::Src, 0, c),
            Allgather | Allgatherv if ip => put(Side::Dst, r * c, c),
            Gather | Gatherv if ip && is_root => put(Side::Dst, r * c, c),
            Allgather | Allgatherv | Gather | Gatherv => put(Side::Src, 0, c),
            Alltoall | Alltoallv | ReduceScatter | ReduceScatterv if ip => put(Side::Dst, 0, c * p),
            Alltoall | Alltoallv | ReduceScatter | ReduceScatterv => put(Side::Src, 0, c * p),
            Scatter | Scatterv if is_root => put(Side::Src, 0, c * p),
            Scatter | Scatterv => vec![],
        }
    }

    /// What this rank's output must hold after a collective.
    pub fn outputs(&self) -> Vec<(Span, Want)> {
        use CollType::*;
        let (c, p, r, ip, is_root) = (self.c, self.p, self.rank, self.ip(), self.rank == self.root);
        let span = |side, at, len| Span { side, at, len };
        let blocks = |f: &dyn Fn(usize) -> Want| (0..p).map(|j| (span(Side::Dst, j * c, c), f(j))).collect();
        let first = |x: usize| x as u64;
        match self.coll {
            Barrier | Fanin | Fanout => vec![],
            Allreduce => vec![(span(Side::Dst, 0, c), Want::Reduced { first: 0 })],
            Reduce if is_root => vec![(span(Side::Dst, 0, c), Want::Reduced { first: 0 })],
            Reduce => vec![],
            Bcast => vec![(span(Side::Src, 0, c), Want::Copy { rank: self.root, first: 0 })],
            Allgather | Allgatherv => blocks(&|j| Want::Copy { rank: j, first: 0 }),
            Gather | Gatherv if is_root => blocks(&|j| Want::Copy { rank: j, first: 0 }),
            Gather | Gatherv => vec![],
            Alltoall | Alltoallv => blocks(&|j| Want::Copy { rank: j, first: first(r * c) }),
            ReduceScatter | ReduceScatterv if ip => {
                vec![(span(Side::Dst, r * c, c), Want::Reduced { first: first(r * c) })]
            }
            ReduceScatter | ReduceScatterv => vec![(span(Side::Dst, 0, c), Want::Reduced { first: first(r * c) })],
            Scatter | Scatterv if is_root && ip => vec![],
            Scatter | Scatterv => vec![(span(Side::Dst, 0, c), Want::Copy { rank: self.root, first: first(r * c) })],
        }
    }
}

/// The first wrong element found.
#[derive(Clone, Debug, PartialEq)]
pub struct Mismatch {
    /// Which buffer.
    pub side: Side,
    /// Element index in that buffer.
    pub elem: usize,
    /// What is wrong.
    pub wrong: Wrong,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let side = if self.side == Side::Src { "src" } else { "dst" };
        write!(f, "{side} element {} is {}, expected {}", self.elem, self.wrong.got, self.wrong.expected)
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().rev().map(|x| format!("{x:02x}")).collect::<String>()
}

/// Checks the outputs of one size on one rank.
pub struct Verifier {
    outputs: Vec<(Span, Want)>,
    inputs: Inputs,
    reference: Option<Reference>,
    /// Output bytes of the last iteration that passed the full check.
    verified: Option<Vec<u8>>,
    scratch: Vec<u8>,
}

impl Verifier {
    /// A verifier for `shape` with `inputs`.
    pub fn new(shape: &Shape, inputs: Inputs) -> Verifier {
        let reference = inputs.op.map(|op| Reference { inputs, ranks: shape.p, op });
        Verifier { outputs: shape.outputs(), inputs, reference, verified: None, scratch: Vec::new() }
    }

    fn bytes<'b>(span: &Span, es: usize, src: &'b [u8], dst: &'b [u8]) -> &'b [u8] {
        let buf = if span.side == Side::Src { src } else { dst };
        buf.get(span.at * es..(span.at + span.len) * es).unwrap_or(&[])
    }

    /// Check the buffers after an iteration.
    pub fn check(&mut self, src: &[u8], dst: &[u8]) -> Result<(), Mismatch> {
        let es = self.inputs.elem_size();
        if let Some(v) = &self.verified {
            let mut at = 0;
            let same = self.outputs.iter().all(|(span, _)| {
                let got = Self::bytes(span, es, src, dst);
                let ok = v.get(at..at + got.len()) == Some(got);
                at += got.len();
                ok
            });
            if same {
                return Ok(());
            }
        }
        for (span, want) in &self.outputs {
            let got = Self::bytes(span, es, src, dst);
            let mismatch = |i: usize, wrong: Wrong| Mismatch { side: span.side, elem: span.at + i, wrong };
            if got.len() != span.len * es {
                return Err(mismatch(0, Wrong { got: "a short buffer".into(), expected: format!("{}", span.len) }));
            }
            match *want {
                Want::Copy { rank, first } => {
                    self.scratch.resize(got.len(), 0);
                    fill_bytes(rank, first * es as u64, &mut self.scratch);
                    if got != &self.scratch[..] {
                        let i = got.iter().zip(&self.scratch).position(|(a, b)| a != b).unwrap_or(0) / es.max(1);
                        let (g, w) = (&got[i * es..(i + 1) * es], &self.scratch[i * es..(i + 1) * es]);
                        return Err(mismatch(
                            i,
                            Wrong {
                                got: format!("0x{}", hex(g)),
                                expected: format!("0x{} (rank {rank}'s element {})", hex(w), first + i as u64),
                            },
                        ));
                    }
                }
                Want::Reduced { first } => {
                    let Some(reference) = &self.reference else { continue };
                    for (i, e) in got.chunks_exact(es).enumerate() {
                        reference.check(first + i as u64, e).map_err(|w| mismatch(i, w))?;
                    }
                }
            }
        }
        let mut v = self.verified.take().unwrap_or_default();
        v.clear();
        for (span, _) in &self.outputs {
            v.extend_from_slice(Self::bytes(span, es, src, dst));
        }
        self.verified = Some(v);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrocoll::{DataType, ReduceOp};

    /// Simulate a correct collective: every rank's inputs, then the outputs.
    fn simulate(coll: CollType, p: usize, c: usize, in_place: bool, inputs: Inputs) {
        let es = inputs.elem_size();
        for rank in 0..p {
            let shape = Shape { coll, c, p, rank, root: 1 % p, in_place };
            let lay = super::super::layout::layout(coll, c, p, rank, shape.root, in_place);
            let mut src = vec![0u8; lay.src.unwrap_or(0) * es];
            let mut dst = vec![0u8; lay.dst.unwrap_or(0) * es];
            for (span, want) in shape.outputs() {
                let buf = if span.side == Side::Src { &mut src } else { &mut dst };
                let out = &mut buf[span.at * es..(span.at + span.len) * es];
                match want {
                    Want::Copy { rank, first } => fill_bytes(rank, first * es as u64, out),
                    Want::Reduced { first } => {
                        // Integer sums: add every rank's inputs.
                        for (i, e) in out.chunks_exact_mut(es).enumerate() {
                            let s: i64 = (0..p).map(|j| inputs.value(j, first + i as u64, 0)).sum();
                            e.copy_from_slice(&(s as i32).to_le_bytes());
                        }
                    }
                }
            }
            let mut v = Verifier::new(&shape, inputs);
            assert!(v.check(&src, &dst).is_ok(), "{coll} rank {rank}");
            assert!(v.check(&src, &dst).is_ok(), "{coll} rank {rank} (fast path)");
            if let Some((span, _)) = shape.outputs().first() {
                let buf = if span.side == Side::Src { &mut src } else { &mut dst };
                buf[span.at * es] ^= 1;
                let m = v.check(&src, &dst).unwrap_err();
                assert_eq!(m.elem, span.at, "{coll} rank {rank}: {m}");
            }
        }
    }

    #[test]
    fn every_collective_checks_what_it_should() {
        let moves = Inputs { dtype: DataType::Uint8, op: None };
        let sums = Inputs { dtype: DataType::Int32, op: Some(ReduceOp::Sum) };
        for coll in CollType::ALL {
            let inputs = if coll.is_reduction() { sums } else { moves };
            for ip in [false, true] {
                simulate(coll, 3, 5, ip, inputs);
            }
        }
    }

    #[test]
    fn inputs_fit_the_layout() {
        for coll in CollType::ALL {
            for ip in [false, true] {
                for rank in 0..3 {
                    let shape = Shape { coll, c: 4, p: 3, rank, root: 1, in_place: ip };
                    let lay = super::super::layout::layout(coll, 4, 3, rank, 1, ip);
                    for put in shape.inputs() {
                        let len = if put.span.side == Side::Src { lay.src } else { lay.dst };
                        assert!(put.span.at + put.span.len <= len.unwrap_or(0), "{coll} {ip} {rank}");
                    }
                    for (span, _) in shape.outputs() {
                        let len = if span.side == Side::Src { lay.src } else { lay.dst };
                        assert!(span.at + span.len <= len.unwrap_or(0), "{coll} {ip} {rank}");
                    }
                }
            }
        }
    }
}
