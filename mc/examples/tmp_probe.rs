//! temporary probe
use ferrocoll_core::{DataType, ReduceOp, backend::ReduceSpec};
use std::time::Instant;
fn main() {
    for (bytes, nsrc) in [(16usize << 20, 8usize), (16 << 20, 2), (1 << 20, 8), (64 << 10, 8)] {
        let dt = DataType::Float32;
        let n = bytes / 4;
        let srcs: Vec<Vec<u8>> =
            (0..nsrc).map(|s| (0..n).flat_map(|i| ((i + s) as f32).to_le_bytes()).collect()).collect();
        let refs: Vec<&[u8]> = srcs.iter().map(|v| v.as_slice()).collect();
        let mut d = vec![0u8; bytes];
        let spec = ReduceSpec { dtype: dt, op: ReduceOp::Sum, count: n, avg_divisor: None };
        let iters = (1usize << 30) / bytes / nsrc;
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t = Instant::now();
            for _ in 0..iters {
                ferrocoll_mc::reduce_slices(std::hint::black_box(&mut d), &refs, &spec).unwrap();
            }
            best = best.min(t.elapsed().as_secs_f64() / iters as f64);
        }
        let src = srcs[0].clone();
        let mut bestc = f64::MAX;
        for _ in 0..5 {
            let t = Instant::now();
            for _ in 0..iters {
                std::hint::black_box(&mut d).copy_from_slice(std::hint::black_box(&src));
            }
            bestc = bestc.min(t.elapsed().as_secs_f64() / iters as f64);
        }
        println!(
            "{bytes} x{nsrc}: reduce {:.1} GB/s, memcpy {:.1} GB/s",
            ((nsrc + 1) * bytes) as f64 / best / 1e9,
            2.0 * bytes as f64 / bestc / 1e9
        );
    }
}
