//! Per-rank buffers of a case: inputs, poisoned outputs, and what the
//! output must hold afterwards (UCC's semantics, written out independently).

use ferrocoll::core::args::{block_count, block_offset};
use ferrocoll::{CollType, ReduceOp};

use crate::cases::Case;
use crate::dtypes::{elem_size, input};
use crate::rng::hash;

/// Byte written into outputs before a run: an element left unwritten shows up.
pub const POISON: u8 = 0xa5;

/// Element-index stride of alltoallv inputs: block j of rank i holds input(i, j·M + k).
const M: usize = 1 << 24;

/// What part of the destination must hold what.
#[derive(Clone, Debug)]
pub enum Expect {
    /// `dst[offset..offset + bytes.len()] == bytes`.
    Bytes {
        /// Byte offset in dst.
        offset: usize,
        /// Exact content.
        bytes: Vec<u8>,
    },
    /// Element e of `dst` (from byte `offset`) is the reduction over ranks of
    /// their input element `base + e`.
    Reduced {
        /// Byte offset in dst.
        offset: usize,
        /// Elements.
        count: usize,
        /// Input index of the first element.
        base: usize,
    },
}

/// A rank's buffers for one case.
#[derive(Clone, Debug, Default)]
pub struct Setup {
    /// Source bytes (`None`: this rank passes no source).
    pub src: Option<Vec<u8>>,
    /// Destination bytes (`None`: no destination).
    pub dst: Option<Vec<u8>>,
    /// Elements in src (plain buffers).
    pub src_count: usize,
    /// Elements in dst (plain buffers).
    pub dst_count: usize,
    /// (counts, displacements) of a v-variant source.
    pub src_v: Option<(Vec<usize>, Vec<usize>)>,
    /// (counts, displacements) of a v-variant destination.
    pub dst_v: Option<(Vec<usize>, Vec<usize>)>,
    /// What dst must hold afterwards.
    pub expect: Vec<Expect>,
}

struct Gen<'a> {
    case: &'a Case,
    es: usize,
}

impl Gen<'_> {
    fn op(&self) -> Option<ReduceOp> {
        self.case.coll.is_reduction().then_some(self.case.op)
    }

    /// `count` input elements of `rank` starting at input index `base`.
    fn data(&self, rank: usize, base: usize, count: usize) -> Vec<u8> {
        let mut v = vec![0u8; count * self.es];
        for (e, chunk) in v.chunks_exact_mut(self.es).enumerate() {
            input(self.case.dtype, self.op(), self.case.seed, rank, base + e, chunk);
        }
        v
    }

    fn poison(&self, count: usize) -> Vec<u8> {
        vec![POISON; count * self.es]
    }
}

/// Irregular per-rank counts (some zero) for v-variants.
pub fn v_counts(case: &Case, size: usize) -> Vec<usize> {
    (0..size)
        .map(|b| {
            let h = hash(&[case.seed, b as u64, 11]);
            if h.is_multiple_of(4) { 0 } else { case.count + (h % 3) as usize }
        })
        .collect()
}

/// Displacements with a one-element gap before every block (gaps must stay poisoned).
pub fn gapped_displs(counts: &[usize]) -> (Vec<usize>, usize) {
    let mut at = 1;
    let displs = counts
        .iter()
        .map(|&c| {
            let d = at;
            at += c + 1;
            d
        })
        .collect();
    (displs, at)
}

/// Elements rank `i` sends rank `j` in alltoallv (symmetric for in-place cases).
pub fn a2av_count(case: &Case, i: usize, j: usize) -> usize {
    let (a, b) = if case.in_place { (i.min(j), i.max(j)) } else { (i, j) };
    let h = hash(&[case.seed, a as u64, b as u64, 13]);
    if h.is_multiple_of(5) { 0 } else { case.count / 2 + (h % 4) as usize }
}

/// Place `blocks` (element offset, bytes) into a poisoned image of `len` elements.
fn image(g: &Gen<'_>, len: usize, blocks: &[(usize, Vec<u8>)]) -> Vec<u8> {
    let mut img = g.poison(len);
    for (off, b) in blocks {
        img[off * g.es..off * g.es + b.len()].copy_from_slice(b);
    }
    img
}

/// The buffers of rank `r` in a team of `p` for `case`.
pub fn setup(case: &Case, r: usize, p: usize) -> Setup {
    use CollType::*;
    let op = case.coll.is_reduction().then_some(case.op);
    let g = Gen { case, es: elem_size(case.dtype, op) };
    let n = case.count;
    let is_root = r == case.root;
    let mut s = Setup::default();
    match case.coll {
        Barrier | Fanin | Fanout => {}
        Allreduce | Reduce => {
            let input = g.data(r, 0, n);
            let gets = case.coll == Allreduce || is_root;
            if case.in_place && gets {
                s.dst = Some(input);
            } else {
                s.src = Some(input);
                s.dst = gets.then(|| g.poison(n));
            }
            s.src_count = n;
            s.dst_count = n;
            if gets {
                s.expect.push(Expect::Reduced { offset: 0, count: n, base: 0 });
            }
        }
        Bcast => {
            // One buffer, the source (as UCC's bcast has it): every rank, the
            // root too, must end with the root's data in it.
            let data = g.data(case.root, 0, n);
            s.src = Some(if is_root { data.clone() } else { g.poison(n) });
            s.src_count = n;
            s.expect.push(Expect::Bytes { offset: 0, bytes: data });
        }
        Allgather | Gather => {
            let gets = case.coll == Allgather || is_root;
            let mine = g.data(r, 0, n);
            if gets {
                let full: Vec<(usize, Vec<u8>)> = (0..p).map(|b| (b * n, g.data(b, 0, n))).collect();
                s.expect.push(Expect::Bytes { offset: 0, bytes: image(&g, p * n, &full) });
                s.dst = Some(if case.in_place { image(&g, p * n, &[(r * n, mine.clone())]) } else { g.poison(p * n) });
                s.dst_count = p * n;
            }
            if !(case.in_place && gets) {
                s.src = Some(mine);
                s.src_count = n;
            }
        }
        Allgatherv | Gatherv => {
            let gets = case.coll == Allgatherv || is_root;
            let counts = v_counts(case, p);
            let mine = g.data(r, 0, counts[r]);
            if gets {
                let (displs, extent) = gapped_displs(&counts);
                let full: Vec<(usize, Vec<u8>)> = (0..p).map(|b| (displs[b], g.data(b, 0, counts[b]))).collect();
                s.expect.push(Expect::Bytes { offset: 0, bytes: image(&g, extent, &full) });
                s.dst = Some(if case.in_place {
                    image(&g, extent, &[(displs[r], mine.clone())])
                } else {
                    g.poison(extent)
                });
                s.dst_v = Some((counts, displs));
            }
            if !(case.in_place && gets) {
                s.src_count = mine.len() / g.es;
                s.src = Some(mine);
            }
        }
        Scatter => {
            let mine: Vec<u8> = g.data(case.root, r * n, n);
            if is_root {
                s.src = Some(g.data(case.root, 0, p * n));
                s.src_count = p * n;
            }
            if !(case.in_place && is_root) {
                s.dst = Some(g.poison(n));
                s.dst_count = n;
                s.expect.push(Expect::Bytes { offset: 0, bytes: mine });
            }
        }
        Scatterv => {
            let counts = v_counts(case, p);
            if is_root {
                let (displs, extent) = gapped_displs(&counts);
                let blocks: Vec<(usize, Vec<u8>)> =
                    (0..p).map(|b| (displs[b], g.data(case.root, b * M, counts[b]))).collect();
                s.src = Some(image(&g, extent, &blocks));
                s.src_v = Some((counts.clone(), displs));
            }
            if !(case.in_place && is_root) {
                s.dst = Some(g.poison(counts[r]));
                s.dst_count = counts[r];
                s.expect.push(Expect::Bytes { offset: 0, bytes: g.data(case.root, r * M, counts[r]) });
            }
        }
        Alltoall => {
            let input: Vec<u8> = (0..p).flat_map(|j| g.data(r, j * n, n)).collect();
            let expected: Vec<u8> = (0..p).flat_map(|i| g.data(i, r * n, n)).collect();
            s.expect.push(Expect::Bytes { offset: 0, bytes: expected });
            if case.in_place {
                s.dst = Some(input);
            } else {
                s.src = Some(input);
                s.dst = Some(g.poison(p * n));
            }
            s.src_count = p * n;
            s.dst_count = p * n;
        }
        Alltoallv => {
            let scounts: Vec<usize> = (0..p).map(|j| a2av_count(case, r, j)).collect();
            let rcounts: Vec<usize> = (0..p).map(|i| a2av_count(case, i, r)).collect();
            let (rdispls, rextent) = gapped_displs(&rcounts);
            let expected: Vec<(usize, Vec<u8>)> = (0..p).map(|i| (rdispls[i], g.data(i, r * M, rcounts[i]))).collect();
            s.expect.push(Expect::Bytes { offset: 0, bytes: image(&g, rextent, &expected) });
            if case.in_place {
                // dst is input and output, laid out by the receive counts (symmetric here).
                let input: Vec<(usize, Vec<u8>)> = (0..p).map(|j| (rdispls[j], g.data(r, j * M, rcounts[j]))).collect();
                s.dst = Some(image(&g, rextent, &input));
            } else {
                let (sdispls, sextent) = gapped_displs(&scounts);
                let input: Vec<(usize, Vec<u8>)> = (0..p).map(|j| (sdispls[j], g.data(r, j * M, scounts[j]))).collect();
                s.src = Some(image(&g, sextent, &input));
                s.src_v = Some((scounts, sdispls));
                s.dst = Some(g.poison(rextent));
            }
            s.dst_v = Some((rcounts, rdispls));
        }
        ReduceScatter => {
            if case.in_place {
                // UCC: dst holds the whole input (any total), the result lands at the own block.
                let total = p * n + n % p;
                s.dst = Some(g.data(r, 0, total));
                s.dst_count = total;
                let (off, cnt) = (block_offset(total, p, r), block_count(total, p, r));
                s.expect.push(Expect::Reduced { offset: off * g.es, count: cnt, base: off });
            } else {
                s.src = Some(g.data(r, 0, p * n));
                s.src_count = p * n;
                s.dst = Some(g.poison(n));
                s.dst_count = n;
                s.expect.push(Expect::Reduced { offset: 0, count: n, base: r * n });
            }
        }
        ReduceScatterv => {
            let counts = v_counts(case, p);
            let total: usize = counts.iter().sum();
            let off: usize = counts[..r].iter().sum();
            if case.in_place {
                s.dst = Some(g.data(r, 0, total));
                s.expect.push(Expect::Reduced { offset: off * g.es, count: counts[r], base: off });
            } else {
                s.src = Some(g.data(r, 0, total));
                s.src_count = total;
                s.dst = Some(g.poison(counts[r]));
                s.expect.push(Expect::Reduced { offset: 0, count: counts[r], base: off });
            }
            s.dst_v = Some((counts, vec![0; p]));
        }
    }
    s
}
