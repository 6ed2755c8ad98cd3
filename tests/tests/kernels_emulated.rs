//! The device kernels, run on the CPU: the same CUDA C text that NVRTC
//! compiles (`ferrocoll_kernels::source()`) is compiled with g++ behind a
//! shim of the CUDA built-ins and launched on a serial grid
//! (`ferrocoll_tests::kernels_emu`, loaded by `emu.rs`),
//! then every reduce kernel is held against the host memory component
//! (`ferrocoll_mc::reduce_slices`) on random operands: bit for bit, except
//! NaN payloads. This checks the kernels' arithmetic (conversions, rounding,
//! avg, loc ties, wrapping), their vector/scalar/byte paths and tails, and
//! their entry-point names without a GPU; the device-only parts (inline
//! PTX for f16 conversion and global vector accesses) are checked on a GPU
//! by the mc CUDA tests. Skips (printing why) when g++ is missing.

#[path = "kernels_emulated/emu.rs"]
mod emu;
#[path = "kernels_emulated/inputs.rs"]
mod inputs;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ferrocoll::core::backend::ReduceSpec;
use ferrocoll::{DataType, ReduceOp};
use ferrocoll_kernels::{MAX_SOURCES, ReduceArgs, all_kernel_names, reduce_kernel, reduce_strided_kernel};
use ferrocoll_tests::rng::Rng;

use emu::{Emu, emu};

/// Where the operands lie.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// Every buffer 16-byte aligned: the vector path, then the tail.
    Aligned,
    /// Every buffer offset by the element size (at most 8): element loads.
    ElemOffset,
    /// Every buffer offset by one byte: byte loads (except 1-byte elements).
    ByteOffset,
    /// Sources packed in one buffer at a 16-byte multiple stride (strided kernel).
    Strided,
    /// Sources packed back to back (strided kernel; alignment varies per source).
    StridedTight,
    /// dst is source 0 (plain kernel).
    InPlace,
}

const LAYOUTS: [Layout; 6] =
    [Layout::Aligned, Layout::ElemOffset, Layout::ByteOffset, Layout::Strided, Layout::StridedTight, Layout::InPlace];

/// Guard bytes around every buffer, checked after the kernel ran.
const GUARD: usize = 32;
const POISON: u8 = 0xa5;

/// A byte buffer whose data starts `offset` bytes past a 16-byte boundary,
/// between poisoned guard bytes.
struct Buffer {
    backing: Vec<u8>,
    start: usize,
    len: usize,
}

impl Buffer {
    fn new(len: usize, offset: usize) -> Buffer {
        let backing = vec![POISON; len + 2 * GUARD + 32];
        let misalign = (backing.as_ptr() as usize + GUARD) % 16;
        let start = GUARD + (16 - misalign) % 16 + offset;
        Buffer { backing, start, len }
    }
    fn addr(&self) -> u64 {
        self.backing.as_ptr() as u64 + self.start as u64
    }
    fn bytes(&self) -> &[u8] {
        &self.backing[self.start..self.start + self.len]
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.backing[self.start..self.start + self.len]
    }
    /// Whether everything outside the data is still poison.
    fn guards_intact(&self) -> bool {
        self.backing[..self.start].iter().chain(&self.backing[self.start + self.len..]).all(|&b| b == POISON)
    }
}

/// Addresses the kernel must never dereference (sources past nsrcs).
fn garbage(i: usize) -> u64 {
    0xdead_0000_0000 + i as u64 * 0x1000
}

/// One reduction on the emulated device and on the host; Err describes a mismatch.
fn run_case(
    emu: &Emu,
    dtype: DataType,
    op: ReduceOp,
    nsrcs: usize,
    count: usize,
    layout: Layout,
) -> Result<(), String> {
    let mut rng = Rng::from_parts(&[dtype as u64, op as u64, nsrcs as u64, count as u64, layout as u64]);
    let esize = op.element_size(dtype);
    let bytes = count * esize;
    let operands: Vec<Vec<u8>> = (0..nsrcs).map(|_| inputs::operand(&mut rng, dtype, op, count)).collect();
    // avg with every kind of divisor (0: a plain sum); other kernels get a divisor they must ignore.
    let divisor: u32 =
        if op == ReduceOp::Avg { [0, 1, 2, 3, 7, 300, 70_000, 3_000_000_000][rng.below(8) as usize] } else { 7 };
    let spec =
        ReduceSpec { dtype, op, count, avg_divisor: (op == ReduceOp::Avg && divisor != 0).then_some(divisor as usize) };
    let mut want = vec![0u8; bytes];
    let refs: Vec<&[u8]> = operands.iter().map(Vec::as_slice).collect();
    ferrocoll_mc::reduce_slices(&mut want, &refs, &spec).map_err(|e| format!("host: {e}"))?;

    let offset = match layout {
        Layout::ElemOffset => esize.min(8),
        Layout::ByteOffset => 1,
        _ => 0,
    };
    let strided = matches!(layout, Layout::Strided | Layout::StridedTight);
    let mut args = ReduceArgs {
        count: count as u64,
        nsrcs: nsrcs as u32,
        avg_divisor: divisor,
        src_stride: 12345,
        ..ReduceArgs::default()
    };
    for (i, s) in args.srcs.iter_mut().enumerate() {
        *s = garbage(i);
    }
    let mut sources: Vec<Buffer> = Vec::new();
    if strided {
        let stride = if layout == Layout::Strided { bytes.div_ceil(16) * 16 + 16 } else { bytes };
        let mut packed = Buffer::new(stride * nsrcs, 0);
        for (i, op_bytes) in operands.iter().enumerate() {
            packed.bytes_mut()[i * stride..i * stride + bytes].copy_from_slice(op_bytes);
        }
        args.srcs[0] = packed.addr();
        args.src_stride = stride as u64;
        sources.push(packed);
    } else {
        for (i, op_bytes) in operands.iter().enumerate() {
            let mut b = Buffer::new(bytes, offset);
            b.bytes_mut().copy_from_slice(op_bytes);
            args.srcs[i] = b.addr();
            sources.push(b);
        }
    }
    let mut dst = Buffer::new(bytes, offset);
    args.dst = if layout == Layout::InPlace { sources[0].addr() } else { dst.addr() };

    let name = if strided { reduce_strided_kernel(dtype, op) } else { reduce_kernel(dtype, op) };
    let name = name.map_err(|e| format!("no kernel: {e}"))?;
    let (grid, block) = [(1, 1), (2, 3), (3, 32)][rng.below(3) as usize];
    // SAFETY: every address in args is a live buffer of `bytes` bytes (sources
    // and dst, or stride * nsrcs bytes for the packed sources); the garbage
    // addresses sit past nsrcs, which the kernels never read.
    unsafe { emu.reduce(name, &args, grid, block) };

    let got = if layout == Layout::InPlace { sources[0].bytes() } else { dst.bytes_mut() };
    inputs::compare(dtype, op, got, &want).map_err(|e| format!("{name} grid {grid}x{block}: {e}"))?;
    if !dst.guards_intact() || !sources.iter().all(Buffer::guards_intact) {
        return Err(format!("{name} wrote outside its operands"));
    }
    Ok(())
}

/// Every meaningful (dtype, op) that `pick` selects, over source counts, counts and layouts.
fn check_matrix(test: &str, pick: impl Fn(DataType, ReduceOp) -> bool) {
    let Some(emu) = emu(test) else { return };
    let mut failures = Vec::new();
    let mut cases = 0;
    for dtype in DataType::ALL {
        for op in ReduceOp::ALL {
            if op.check_device_dtype(dtype).is_err() || !pick(dtype, op) {
                continue;
            }
            for nsrcs in [1, 2, 3, MAX_SOURCES] {
                for count in [0, 1, 5, 37, 300] {
                    for layout in LAYOUTS {
                        cases += 1;
                        if let Err(e) = run_case(emu, dtype, op, nsrcs, count, layout) {
                            failures
                                .push(format!("{op} on {dtype}, {nsrcs} sources, {count} elements, {layout:?}: {e}"));
                        }
                    }
                }
            }
        }
    }
    assert!(cases > 0, "{test}: no case selected");
    assert!(failures.is_empty(), "{} of {cases} cases differ from the host:\n{}", failures.len(), failures.join("\n"));
    eprintln!("{test}: {cases} cases match the host");
}

#[test]
fn every_entry_point_is_in_the_source() {
    let Some(emu) = emu("every_entry_point_is_in_the_source") else { return };
    let missing: Vec<_> = all_kernel_names().into_iter().filter(|n| emu.kernel(n).is_none()).collect();
    assert!(missing.is_empty(), "entry points missing from the compiled source: {missing:?}");
}

#[test]
fn integer_reductions_match_the_host() {
    check_matrix("integer_reductions_match_the_host", |dt, op| dt.is_integer() && !op.is_loc());
}

#[test]
fn f32_f64_reductions_match_the_host() {
    check_matrix("f32_f64_reductions_match_the_host", |dt, op| {
        matches!(dt, DataType::Float32 | DataType::Float64) && !op.is_loc()
    });
}

#[test]
fn narrow_float_reductions_match_the_host() {
    check_matrix("narrow_float_reductions_match_the_host", |dt, op| dt.is_narrow_float() && !op.is_loc());
}

#[test]
fn complex_reductions_match_the_host() {
    check_matrix("complex_reductions_match_the_host", |dt, _| dt.is_complex());
}

#[test]
fn maxloc_minloc_match_the_host() {
    check_matrix("maxloc_minloc_match_the_host", |_, op| op.is_loc());
}

#[test]
fn every_float8_code_converts_as_on_the_host() {
    // One source: each code is widened to f32 and narrowed again; avg by 1
    // to 3 sends every code through a division and a rounding.
    let Some(emu) = emu("every_float8_code_converts_as_on_the_host") else { return };
    let codes: Vec<u8> = (0..=255).collect();
    for dtype in [DataType::Float8E4M3, DataType::Float8E5M2, DataType::Float16, DataType::Bfloat16] {
        let input: Vec<u8> =
            if dtype.size() == 1 { codes.clone() } else { (0..=u16::MAX).flat_map(u16::to_le_bytes).collect() };
        let count = input.len() / dtype.size();
        for divisor in [0u32, 1, 3, 10] {
            let spec =
                ReduceSpec { dtype, op: ReduceOp::Avg, count, avg_divisor: (divisor != 0).then_some(divisor as usize) };
            let mut want = vec![0u8; input.len()];
            ferrocoll_mc::reduce_slices(&mut want, &[&input], &spec).unwrap();
            let src = {
                let mut b = Buffer::new(input.len(), 0);
                b.bytes_mut().copy_from_slice(&input);
                b
            };
            let mut dst = Buffer::new(input.len(), 0);
            let mut args = ReduceArgs {
                dst: dst.addr(),
                count: count as u64,
                nsrcs: 1,
                avg_divisor: divisor,
                ..Default::default()
            };
            args.srcs[0] = src.addr();
            let name = reduce_kernel(dtype, ReduceOp::Avg).unwrap();
            // SAFETY: src and dst hold count elements each.
            unsafe { emu.reduce(name, &args, 4, 64) };
            if let Err(e) = inputs::compare(dtype, ReduceOp::Avg, dst.bytes_mut(), &want) {
                panic!("{dtype} divided by {divisor}: {e}");
            }
        }
    }
}

#[test]
fn large_counts_spread_over_the_grid() {
    let Some(emu) = emu("large_counts_spread_over_the_grid") else { return };
    for (dtype, op) in [
        (DataType::Float32, ReduceOp::Sum),
        (DataType::Bfloat16, ReduceOp::Avg),
        (DataType::Float8E4M3, ReduceOp::Max),
        (DataType::Int64, ReduceOp::Prod),
        (DataType::Uint8, ReduceOp::Lxor),
        (DataType::Float16, ReduceOp::Minloc),
    ] {
        for count in [10_000usize, 12_347] {
            let mut rng = Rng::from_parts(&[dtype as u64, op as u64, count as u64]);
            let esize = op.element_size(dtype);
            let bytes = count * esize;
            let operands: Vec<Vec<u8>> =
                (0..MAX_SOURCES).map(|_| inputs::operand(&mut rng, dtype, op, count)).collect();
            let refs: Vec<&[u8]> = operands.iter().map(Vec::as_slice).collect();
            let spec = ReduceSpec { dtype, op, count, avg_divisor: (op == ReduceOp::Avg).then_some(8) };
            let mut want = vec![0u8; bytes];
            ferrocoll_mc::reduce_slices(&mut want, &refs, &spec).unwrap();
            let bufs: Vec<Buffer> = operands
                .iter()
                .map(|o| {
                    let mut b = Buffer::new(bytes, 0);
                    b.bytes_mut().copy_from_slice(o);
                    b
                })
                .collect();
            let mut dst = Buffer::new(bytes, 0);
            let mut args = ReduceArgs {
                dst: dst.addr(),
                count: count as u64,
                nsrcs: MAX_SOURCES as u32,
                avg_divisor: 8,
                ..Default::default()
            };
            for (s, b) in args.srcs.iter_mut().zip(&bufs) {
                *s = b.addr();
            }
            let name = reduce_kernel(dtype, op).unwrap();
            let (grid, block) = ferrocoll_kernels::launch_dims(count as u64, esize);
            for (g, b) in [(grid, block), (2, 3)] {
                dst.bytes_mut().fill(POISON);
                // SAFETY: every source and dst hold `bytes` bytes.
                unsafe { emu.reduce(name, &args, g, b) };
                if let Err(e) = inputs::compare(dtype, op, dst.bytes_mut(), &want) {
                    panic!("{name}, {count} elements, grid {g}x{b}: {e}");
                }
            }
        }
    }
}

#[test]
fn source_counts_out_of_range_do_nothing() {
    let Some(emu) = emu("source_counts_out_of_range_do_nothing") else { return };
    let src = Buffer::new(64, 0);
    let mut dst = Buffer::new(64, 0);
    for nsrcs in [0u32, MAX_SOURCES as u32 + 1, u32::MAX] {
        let mut args = ReduceArgs { dst: dst.addr(), count: 16, nsrcs, ..Default::default() };
        args.srcs = [src.addr(); MAX_SOURCES];
        // SAFETY: all addresses are live 64-byte buffers (16 f32).
        unsafe { emu.reduce("fc_reduce_float32_sum", &args, 1, 4) };
        assert!(dst.bytes_mut().iter().all(|&b| b == POISON), "nsrcs {nsrcs} wrote dst");
    }
}

#[test]
fn copy_handles_every_alignment_and_tail() {
    let Some(emu) = emu("copy_handles_every_alignment_and_tail") else { return };
    let mut rng = Rng::new(7);
    for bytes in [0usize, 1, 3, 4, 15, 16, 17, 100, 1000, 4099] {
        for (so, d_o) in [(0, 0), (4, 4), (1, 1), (0, 1), (4, 0), (8, 12)] {
            let mut src = Buffer::new(bytes, so);
            rng.fill(src.bytes_mut());
            let mut dst = Buffer::new(bytes, d_o);
            for (grid, block) in [(1, 1), (2, 3), ferrocoll_kernels::launch_dims(bytes as u64, 1)] {
                dst.bytes_mut().fill(POISON);
                // SAFETY: both buffers hold `bytes` bytes and do not overlap.
                unsafe { emu.copy(dst.addr(), src.addr(), bytes as u64, grid, block) };
                assert_eq!(dst.bytes(), src.bytes(), "{bytes} bytes, offsets {so}/{d_o}, grid {grid}x{block}");
                assert!(dst.guards_intact(), "copy of {bytes} bytes wrote outside dst");
            }
        }
    }
}

#[test]
fn flag_write_publishes_and_flag_wait_waits() {
    let Some(emu) = emu("flag_write_publishes_and_flag_wait_waits") else { return };
    let flag = AtomicU64::new(0);
    let addr = flag.as_ptr() as u64;
    // SAFETY: addr is a live, aligned AtomicU64 for the whole test.
    unsafe { emu.flag(ferrocoll_kernels::FLAG_WRITE_KERNEL, addr, 42) };
    assert_eq!(flag.load(Ordering::SeqCst), 42);
    // Already reached: returns at once.
    // SAFETY: as above.
    unsafe { emu.flag(ferrocoll_kernels::FLAG_WAIT_KERNEL, addr, 42) };
    let start = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            flag.store(43, Ordering::SeqCst);
        });
        // SAFETY: as above; the flag outlives the scope.
        unsafe { emu.flag(ferrocoll_kernels::FLAG_WAIT_KERNEL, addr, 43) };
    });
    assert!(start.elapsed() >= Duration::from_millis(40), "flag wait returned before the flag was raised");
}
