//! A device reduction checked against the host kernels and the float64
//! reference: `gpu_mc.rs`'s matrix, and the fake driver's reductions in
//! rounds on a slow stream.

use ferrocoll::core::backend::{Mc, ReduceSpec};
use ferrocoll::{DataType, MemRef, MemType, ReduceOp};
use ferrocoll_mc::{CudaMc, reduce_slices};
use ferrocoll_tests::dtypes::{Val, decode, elem_size, expected, input, matches};

use super::{DevBuf, Kind};

/// `MemRef` over a test block.
pub fn mem(b: &DevBuf, mt: MemType) -> MemRef {
    // SAFETY: the block outlives every use of the MemRef in these tests, and
    // nothing else touches it while ferrocoll does.
    unsafe { MemRef::new(b.addr(), b.len(), mt) }
}

/// Sources one kernel launch folds (more are reduced in rounds).
pub const LAUNCH_SOURCES: usize = 8;

/// Element counts of the reduce matrix: one, odd, past one block of vectors, large.
pub const COUNTS: [usize; 4] = [1, 37, 4099, 70_001];

/// The device result of one reduction against the host kernels (bit-exact
/// where the device promises it) and against the float64 reference.
#[allow(clippy::too_many_arguments)]
pub fn check_reduction(
    mc: &CudaMc,
    dt: DataType,
    op: ReduceOp,
    nsrcs: usize,
    count: usize,
    seed: u64,
    offset: usize,
    in_place: bool,
) {
    let es = elem_size(dt, Some(op));
    let bytes = count * es;
    let srcs: Vec<Vec<u8>> = (0..nsrcs)
        .map(|s| {
            let mut v = vec![0u8; bytes];
            for (i, e) in v.chunks_exact_mut(es).enumerate() {
                input(dt, Some(op), seed, s, i, e);
            }
            v
        })
        .collect();
    let divisor = (op == ReduceOp::Avg).then_some(nsrcs);
    let spec = ReduceSpec { dtype: dt, op, count, avg_divisor: divisor };
    let mut host = vec![0u8; bytes];
    let refs: Vec<&[u8]> = srcs.iter().map(Vec::as_slice).collect();
    reduce_slices(&mut host, &refs, &spec).unwrap();
    // Device operands, `offset` bytes into their blocks (misaligned when offset is not a multiple of 16).
    let blocks: Vec<DevBuf> = srcs
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut padded = vec![0x5au8; offset + bytes];
            padded[offset..].copy_from_slice(s);
            DevBuf::from_host(&padded, if i % 3 == 2 { Kind::Managed } else { Kind::Device })
        })
        .collect();
    let operand = |i: usize| {
        let mt = if i % 3 == 2 { MemType::CudaManaged } else { MemType::Cuda };
        mem(&blocks[i], mt).range(offset, bytes).unwrap()
    };
    let dst_block = (!in_place).then(|| DevBuf::new(offset + bytes, Kind::Device));
    let dst = match &dst_block {
        None => operand(0),
        Some(b) => {
            b.fill(0xa5); // poison: an unwritten element shows
            mem(b, MemType::Cuda).range(offset, bytes).unwrap()
        }
    };
    let operands: Vec<MemRef> = (0..nsrcs).map(operand).collect();
    let what =
        format!("{op} on {dt}, {nsrcs} sources, count {count}, offset {offset}, in place {in_place}, seed {seed}");
    mc.reduce(dst, &operands, &spec).unwrap_or_else(|e| panic!("{what}: {e}"));
    let whole = dst_block.as_ref().unwrap_or(&blocks[0]).read();
    let got = &whole[offset..offset + bytes];
    // Beyond 8 sources a narrow float is rounded between launches: only the reference applies.
    let exact = nsrcs <= LAUNCH_SOURCES || !dt.is_narrow_float();
    for (i, (g, h)) in got.chunks_exact(es).zip(host.chunks_exact(es)).enumerate() {
        let gv = decode(dt, op, g);
        let mut contrib: Vec<_> = refs.iter().map(|s| decode(dt, op, &s[i * es..(i + 1) * es])).collect();
        if let ([_], Some(neutral)) = (contrib.as_slice(), logical_neutral(op)) {
            // A memory component's reduction of one source still makes a
            // logical operation's value 0 or 1 (a team of one copies it
            // instead, which is what the reference describes): as with a
            // neutral second source.
            contrib.push(Val::Int(neutral));
        }
        let want = expected(dt, op, &contrib);
        assert!(
            matches(dt, op, &gv, &want),
            "{what}: element {i} is {gv:?} ({g:02x?}), the float64 reference {want:?}, the host kernels {:?}, from the sources {contrib:?}",
            decode(dt, op, h)
        );
        if exact && g != h {
            // NaN payloads are not promised (see the kernels' docs); NaN is.
            let both_nan =
                matches!((&gv, decode(dt, op, h)), (Val::Float(a), Val::Float(b)) if a.is_nan() && b.is_nan());
            assert!(both_nan, "{what}: element {i} is {g:02x?}, the host kernels give {h:02x?}");
        }
    }
}

/// The value that leaves a logical operation's other operand's truth as it is.
fn logical_neutral(op: ReduceOp) -> Option<u128> {
    match op {
        ReduceOp::Land => Some(1),
        ReduceOp::Lor | ReduceOp::Lxor => Some(0),
        _ => None,
    }
}
