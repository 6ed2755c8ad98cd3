//! The chunked driver shared by every kernel.
//!
//! A reduction is cut into chunks of [`CHUNK_BYTES`] of accumulator (1024
//! `f64`, 2048 `f32`, ...). For each chunk the first operand is loaded into
//! an accumulator on the stack, every other source is folded into it while it
//! stays in L1, and the result is stored into dst once. A [`Kernel`] only
//! sees typed, equal-length, aligned slices, so its loops are plain indexed
//! loops that LLVM vectorises.
//!
//! Sources are folded two at a time where the kernel can (`fold2`), which
//! halves the passes over the accumulator and keeps two streams in flight.
//! Exactly two aligned sources skip the accumulator where the kernel can
//! (`combine2`: `dst = op(a, b)` in one pass, no staging to zero).
//!
//! Users hand ferrocoll raw pointers, so an operand may be unaligned for its
//! type. Alignment is a property of the buffer (chunk offsets are multiples
//! of the alignment), checked by `try_cast_slice` at each chunk: aligned
//! chunks are used in place, unaligned ones are copied through an aligned
//! staging buffer, allocated only when a call first needs one.

use std::mem::size_of;

use bytemuck::Pod;
use ferrocoll_core::{Error, Result};

/// Bytes of accumulator (and of staging) per chunk: small enough for L1.
pub(crate) const CHUNK_BYTES: usize = 8192;

/// A chunk buffer aligned for every element type (the widest needs 16 bytes).
#[repr(C, align(64))]
struct Stage([u8; CHUNK_BYTES]);

/// Accumulator bytes of a small reduction (a few hundred bytes): zeroing the
/// full chunk buffer would cost more than the reduction itself.
const SMALL_BYTES: usize = 256;

/// The accumulator of a small reduction.
#[repr(C, align(64))]
struct SmallStage([u8; SMALL_BYTES]);

/// One reduction, monomorphised for a datatype and an operation.
///
/// Per chunk, the driver calls `load` with the first operand, `fold2` per
/// pair of further sources and `fold` for an odd one out, then `store`; all
/// slices of one chunk have the same length.
pub(crate) trait Kernel {
    /// The element as it lies in memory.
    type Elem: Pod;
    /// The accumulator element (`f32` for the narrow floats, else `Elem`).
    type Acc: Pod;
    /// `acc = first operand`.
    fn load(&self, acc: &mut [Self::Acc], src: &[Self::Elem]);
    /// `acc = op(acc, src)`.
    fn fold(&self, acc: &mut [Self::Acc], src: &[Self::Elem]);
    /// `acc = op(op(acc, a), b)`; kernels override it to make one pass instead of two.
    #[inline(always)]
    fn fold2(&self, acc: &mut [Self::Acc], a: &[Self::Elem], b: &[Self::Elem]) {
        self.fold(acc, a);
        self.fold(acc, b);
    }
    /// Finish (avg division, rounding) and write; `acc` may be used as scratch.
    fn store(&self, dst: &mut [Self::Elem], acc: &mut [Self::Acc]);
    /// `dst = op(a, b)` in one pass, for kernels whose accumulator is the
    /// element and whose `store` only copies; returns false (writing
    /// nothing) where the kernel cannot, and the driver then goes through
    /// the accumulator. Two sources are the common case (two ranks, and
    /// every pairwise step of a tree): one pass instead of three.
    #[inline(always)]
    fn combine2(&self, _dst: &mut [Self::Elem], _a: &[Self::Elem], _b: &[Self::Elem]) -> bool {
        false
    }

    /// A reduction of a few elements ([`TINY_BYTES`] of destination at
    /// most) straight from the operands' bytes, one element at a time, for
    /// kernels that can (`None` where the kernel cannot: the driver then
    /// goes element by element through `load`, `fold` and `store`). The
    /// same operations in the same order as `load`, `fold` and `store`, so
    /// the same bits. The driver checked that every operand is as long as
    /// dst, and that dst holds whole elements.
    #[inline(always)]
    fn in_registers(&self, _ops: &mut Operands<'_>) -> Option<Result<()>> {
        None
    }
}

/// The operands of one reduction, as bytes of equal length.
pub(crate) struct Operands<'a> {
    /// The destination.
    pub dst: &'a mut [u8],
    /// The first operand; `None` when dst holds it (in place).
    pub first: Option<&'a [u8]>,
    /// The other operands.
    pub rest: &'a [&'a [u8]],
}

/// Bytes of destination up to which a reduction goes element by element
/// ([`tiny`]): a small collective's usual payload (the 32 bytes an inline
/// head's line carries in TL/shm). Setting up the chunk loop (accumulator,
/// staging, the vector loops' prologues) cost ~190 instructions for two
/// `f32`; one element at a time costs ~15 per element and source.
const TINY_BYTES: usize = 32;

/// Bytes of destination up to which two aligned sources still go element
/// by element rather than by [`Kernel::combine2`] (see [`run`]).
const PAIR_IN_REGISTERS_BYTES: usize = 8;

/// Run `kernel` over the operands, on the widest vector unit the CPU has.
pub(crate) fn run<K: Kernel>(kernel: &K, mut ops: Operands<'_>) -> Result<()> {
    if ops.dst.len() <= TINY_BYTES {
        // Two aligned sources and a kernel that combines them in one pass
        // (`drive`'s first choice too): that pass, ahead of the element-wise
        // loop, from 8 bytes up. The loop costs ~30 instructions an element
        // and the pass ~10 after a set-up of ~30 (callgrind, allreduce on 2
        // ranks, a whole `HostMc::reduce`: 8 `f32` 529 → 406 instructions,
        // 4 `f32` 437 → 412, 2 `f32` 391 against 407, which stays in the loop).
        if ops.dst.len() > PAIR_IN_REGISTERS_BYTES && pair(kernel, &mut ops)? {
            return Ok(());
        }
        if let Some(done) = kernel.in_registers(&mut ops) {
            return done;
        }
        return tiny(kernel, ops);
    }
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2, checked just above.
        return unsafe { drive_avx2(kernel, ops) };
    }
    drive_plain(kernel, ops)
}

/// [`drive`] without AVX2, not inlined into [`run`]: its 8 KiB chunk
/// buffers would make every call's frame that large (stack probes and all),
/// a tiny reduction's too.
#[inline(never)]
fn drive_plain<K: Kernel>(kernel: &K, ops: Operands<'_>) -> Result<()> {
    drive(kernel, ops)
}

/// [`drive`] compiled for AVX2 (the kernels are inlined into it).
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn drive_avx2<K: Kernel>(kernel: &K, ops: Operands<'_>) -> Result<()> {
    drive(kernel, ops)
}

#[inline(always)]
fn drive<K: Kernel>(kernel: &K, mut ops: Operands<'_>) -> Result<()> {
    let esz = elem_size::<K>(ops.dst.len())?;
    let asz = size_of::<K::Acc>();
    if pair(kernel, &mut ops)? {
        return Ok(());
    }
    if ops.dst.len() / esz * asz <= SMALL_BYTES {
        let mut acc = SmallStage([0; SMALL_BYTES]);
        chunks(kernel, ops, &mut acc.0)
    } else {
        let mut acc = Stage([0; CHUNK_BYTES]);
        chunks(kernel, ops, &mut acc.0)
    }
}

/// The kernel's element size, if a destination of `dst_len` bytes holds
/// whole elements (and neither element nor accumulator is zero-sized).
fn elem_size<K: Kernel>(dst_len: usize) -> Result<usize> {
    let esz = size_of::<K::Elem>();
    if esz == 0 || size_of::<K::Acc>() == 0 || !dst_len.is_multiple_of(esz) {
        return Err(Error::internal(format!(
            "reduce kernel with {esz}-byte elements given a {dst_len}-byte destination"
        )));
    }
    Ok(esz)
}

/// A reduction of a few elements, one at a time: each operand's element
/// read unaligned into a one-element slice, then the kernel's `load`,
/// `fold2` per pair, `fold` for an odd one out and `store`, as [`chunks`]
/// calls them, so the same operations in the same order and the same bits.
fn tiny<K: Kernel>(kernel: &K, ops: Operands<'_>) -> Result<()> {
    let esz = elem_size::<K>(ops.dst.len())?;
    let Operands { dst, first, rest } = ops;
    let elem =
        |src: &[u8], off: usize| -> Result<[K::Elem; 1]> { Ok([bytemuck::pod_read_unaligned(sub(src, off, esz)?)]) };
    for (i, d) in dst.chunks_exact_mut(esz).enumerate() {
        let off = i * esz;
        let mut acc = [<K::Acc as bytemuck::Zeroable>::zeroed()];
        let head = match first {
            Some(src) => elem(src, off)?,
            None => [bytemuck::pod_read_unaligned(d)],
        };
        kernel.load(&mut acc, &head);
        let mut pairs = rest.chunks_exact(2);
        for pair in &mut pairs {
            if let [a, b] = pair {
                kernel.fold2(&mut acc, &elem(a, off)?, &elem(b, off)?);
            }
        }
        for src in pairs.remainder() {
            kernel.fold(&mut acc, &elem(src, off)?);
        }
        let mut out = [<K::Elem as bytemuck::Zeroable>::zeroed()];
        kernel.store(&mut out, &mut acc);
        d.copy_from_slice(bytemuck::bytes_of(&out[0]));
    }
    Ok(())
}

/// `dst = src` (same length), through `host_copy::memmove`: a chunk's
/// copies run at any distance from the user's buffers, including those at
/// which glibc's `rep movsb` is slow on AMD Zen (`ferrocoll_core::host_copy`).
#[inline(always)]
pub(crate) fn copy_pod<T: Pod>(dst: &mut [T], src: &[T]) {
    debug_assert_eq!(dst.len(), src.len());
    let (d, s) = (bytemuck::cast_slice_mut::<T, u8>(dst), bytemuck::cast_slice::<T, u8>(src));
    let n = d.len().min(s.len());
    // SAFETY: `d` and `s` are live slices of at least `n` bytes, `d` borrowed
    // mutably, so they do not overlap.
    unsafe { ferrocoll_core::host_copy::memmove(d.as_mut_ptr(), s.as_ptr(), n) };
}

/// The chunk loop, with `acc_bytes` (aligned for every type) as accumulator.
#[inline(always)]
fn chunks<K: Kernel>(kernel: &K, ops: Operands<'_>, acc_bytes: &mut [u8]) -> Result<()> {
    let (esz, asz) = (size_of::<K::Elem>(), size_of::<K::Acc>());
    let acc_all: &mut [K::Acc] = bytemuck::try_cast_slice_mut(acc_bytes)
        .map_err(|e| Error::internal(format!("accumulator staging for {asz}-byte elements: {e}")))?;
    // Two staging buffers, so that a pair of unaligned sources can be folded together.
    let (mut stage_a, mut stage_b) = (Staging::default(), Staging::default());
    let step = acc_all.len() * asz / esz.max(asz) * esz;
    let Operands { dst, first, rest } = ops;
    for (ci, dchunk) in dst.chunks_mut(step).enumerate() {
        let (off, len) = (ci * step, dchunk.len());
        let acc = acc_all.get_mut(..len / esz).ok_or_else(|| Error::internal("chunk exceeds the accumulator"))?;
        match first {
            Some(src) => kernel.load(acc, stage_a.view(sub(src, off, len)?)?),
            None => kernel.load(acc, stage_a.view(dchunk)?),
        }
        // Sources two at a time: one pass over the accumulator per pair.
        let mut pairs = rest.chunks_exact(2);
        for pair in &mut pairs {
            if let [a, b] = pair {
                kernel.fold2(acc, stage_a.view(sub(a, off, len)?)?, stage_b.view(sub(b, off, len)?)?);
            }
        }
        for src in pairs.remainder() {
            kernel.fold(acc, stage_a.view(sub(src, off, len)?)?);
        }
        match bytemuck::try_cast_slice_mut::<u8, K::Elem>(dchunk) {
            Ok(d) => kernel.store(d, acc),
            Err(_) => {
                let t = stage_a.buffer::<K::Elem>(len)?;
                kernel.store(t, acc);
                copy_pod(dchunk, bytemuck::cast_slice(t));
            }
        }
    }
    Ok(())
}

/// Two aligned sources, and a kernel that needs no accumulator: the one
/// pass of [`combine2`]; false (nothing written) where it does not apply.
#[inline(always)]
fn pair<K: Kernel>(kernel: &K, ops: &mut Operands<'_>) -> Result<bool> {
    let len = ops.dst.len();
    match (ops.first, ops.rest) {
        (Some(a), [b]) => Ok(combine2(kernel, ops.dst, sub(a, 0, len)?, sub(b, 0, len)?)),
        _ => Ok(false),
    }
}

/// [`Kernel::combine2`] over byte chunks that are all aligned for the
/// element (unaligned ones go through the staging buffers instead).
#[inline(always)]
fn combine2<K: Kernel>(kernel: &K, dst: &mut [u8], a: &[u8], b: &[u8]) -> bool {
    match (
        bytemuck::try_cast_slice_mut::<u8, K::Elem>(dst),
        bytemuck::try_cast_slice::<u8, K::Elem>(a),
        bytemuck::try_cast_slice::<u8, K::Elem>(b),
    ) {
        (Ok(d), Ok(a), Ok(b)) => kernel.combine2(d, a, b),
        _ => false,
    }
}

/// `len` bytes of `src` from `off`, or an error if the operands differ in length.
#[inline(always)]
pub(crate) fn sub(src: &[u8], off: usize, len: usize) -> Result<&[u8]> {
    src.get(off..off + len)
        .ok_or_else(|| Error::internal(format!("operand of {} bytes is shorter than the destination", src.len())))
}

/// An aligned chunk buffer for unaligned operands, allocated on first use
/// (aligned calls never pay for it).
#[derive(Default)]
struct Staging(Option<Box<Stage>>);

impl Staging {
    /// The first `len` bytes of the buffer as elements.
    #[inline(always)]
    fn buffer<T: Pod>(&mut self, len: usize) -> Result<&mut [T]> {
        let stage = self.0.get_or_insert_with(|| Box::new(Stage([0; CHUNK_BYTES])));
        stage
            .0
            .get_mut(..len)
            .and_then(|b| bytemuck::try_cast_slice_mut(b).ok())
            .ok_or_else(|| Error::internal(format!("{len}-byte chunk does not fit the staging buffer")))
    }

    /// `bytes` as elements: in place when aligned, else copied into the buffer.
    #[inline(always)]
    fn view<'a, T: Pod>(&'a mut self, bytes: &'a [u8]) -> Result<&'a [T]> {
        if let Ok(typed) = bytemuck::try_cast_slice(bytes) {
            return Ok(typed);
        }
        let t = self.buffer::<T>(bytes.len())?;
        copy_pod(bytemuck::cast_slice_mut::<T, u8>(t), bytes);
        Ok(t)
    }
}
