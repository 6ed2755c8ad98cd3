//! Host reduce throughput against memcpy of the same operand size.
//!
//! For each operand size (64 KiB, 1 MiB, 16 MiB): `sum` over 2, 4 and 8
//! sources for f32, f64, f16, bf16, float8 E4M3 and i32, and a `memcpy`.
//! Throughput counts bytes moved: (sources + 1) x operand bytes for a reduce,
//! 2 x bytes for memcpy, so the two compare directly against memory bandwidth.
//!
//! `cargo bench -p ferrocoll-mc --bench reduce` (a few minutes on 2 cores).

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput};
use ferrocoll_core::backend::ReduceSpec;
use ferrocoll_core::{DataType, ReduceOp};
use ferrocoll_mc::{fp8, reduce_slices};

const SIZES: [(usize, &str); 3] = [(64 << 10, "64KiB"), (1 << 20, "1MiB"), (16 << 20, "16MiB")];
const SOURCES: [usize; 3] = [2, 4, 8];
const DTYPES: [DataType; 6] = [
    DataType::Float32,
    DataType::Float64,
    DataType::Float16,
    DataType::Bfloat16,
    DataType::Float8E4M3,
    DataType::Int32,
];

/// `bytes` of ordinary values of `dt` (small, finite, no subnormals).
fn operand(dt: DataType, bytes: usize, seed: usize) -> Vec<u8> {
    let value = |i: usize| ((i * 7 + seed * 13) % 100) as f32 / 16.0 + 1.0;
    (0..bytes / dt.size())
        .flat_map(|i| -> Vec<u8> {
            match dt {
                DataType::Float32 => value(i).to_le_bytes().to_vec(),
                DataType::Float64 => f64::from(value(i)).to_le_bytes().to_vec(),
                DataType::Float16 => half::f16::from_f32(value(i)).to_le_bytes().to_vec(),
                DataType::Bfloat16 => half::bf16::from_f32(value(i)).to_le_bytes().to_vec(),
                DataType::Float8E4M3 => vec![fp8::f32_to_e4m3(value(i))],
                _ => ((i * 7 + seed) as i32).to_le_bytes().to_vec(),
            }
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let max_srcs = SOURCES[SOURCES.len() - 1];
    for (bytes, label) in SIZES {
        let mut group = c.benchmark_group(format!("sum/{label}"));
        let mut dst = vec![0u8; bytes];
        for dt in DTYPES {
            let srcs: Vec<Vec<u8>> = (0..max_srcs).map(|s| operand(dt, bytes, s)).collect();
            let refs: Vec<&[u8]> = srcs.iter().map(Vec::as_slice).collect();
            for n in SOURCES {
                let spec = ReduceSpec { dtype: dt, op: ReduceOp::Sum, count: bytes / dt.size(), avg_divisor: None };
                group.throughput(Throughput::Bytes(((n + 1) * bytes) as u64));
                group.bench_function(BenchmarkId::new(dt.name(), n), |b| {
                    b.iter(|| reduce_slices(black_box(&mut dst), black_box(&refs[..n]), &spec))
                });
            }
        }
        let src = operand(DataType::Int32, bytes, 1);
        group.throughput(Throughput::Bytes((2 * bytes) as u64));
        group.bench_function("memcpy", |b| b.iter(|| black_box(&mut dst).copy_from_slice(black_box(&src))));
        group.finish();
    }
}

fn main() {
    // What criterion_group!/criterion_main! expand to, minus their undocumented pub fn.
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .configure_from_args();
    bench(&mut c);
    c.final_summary();
}
