//! `ferrocoll-reduce-bench`: the reduction kernels of a memory component
//! against a plain copy in the same memory, measured in one run.
//!
//! A reduction of `n` sources of `size` bytes reads `n * size` bytes and
//! writes `size`; a copy reads `size` and writes `size`. Both rates count
//! bytes read plus bytes written, so "of copy" is the reduction's share of
//! the memory bandwidth the device shows for the simplest kernel it has.
//!
//! ```text
//! ferrocoll-reduce-bench [-m host|cuda] [-s SIZE] [-n ITERS] [-w WARMUP]
//!                        [-t f32,f16,bf16,e4m3,e5m2] [-k 2,4,8]
//! ```
//!
//! Each operation is timed over `ITERS` calls with the host clock: the
//! memory component's `copy` and `reduce` return when the device is done, so
//! a call's launch and synchronisation are inside the time (a few µs, under
//! 2 % of a 256 MiB operand on a 3 TB/s device). Inputs are random values
//! of the datatype (never zeros), written once before timing.

use std::sync::Arc;
use std::time::Instant;

use ferrocoll::core::backend::{Mc, ReduceSpec, Scratch};
use ferrocoll::{DataType, Error, MemRef, MemType, ReduceOp, Result};
use ferrocoll_mc::{CudaMc, HostMc};

use crate::perftest::codec::put_real;
use crate::perftest::units::{human_bytes, parse_count};

/// What to measure.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// Memory the operands live in.
    pub mem: MemType,
    /// Bytes of each operand.
    pub size: usize,
    /// Timed calls per measurement.
    pub iters: usize,
    /// Untimed calls first.
    pub warmup: usize,
    /// Datatypes reduced (sum).
    pub dtypes: Vec<DataType>,
    /// Source counts.
    pub sources: Vec<usize>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            mem: MemType::Cuda,
            size: 256 << 20,
            iters: 20,
            warmup: 3,
            dtypes: vec![
                DataType::Float32,
                DataType::Float16,
                DataType::Bfloat16,
                DataType::Float8E4M3,
                DataType::Float8E5M2,
            ],
            sources: vec![2, 4, 8],
        }
    }
}

const USAGE: &str = "usage: ferrocoll-reduce-bench [-m host|cuda] [-s SIZE] [-n ITERS] [-w WARMUP] \
                     [-t f32,f16,bf16,e4m3,e5m2] [-k 2,4,8]";

fn dtype_named(name: &str) -> Option<DataType> {
    Some(match name {
        "f32" | "float32" => DataType::Float32,
        "f64" | "float64" => DataType::Float64,
        "f16" | "float16" => DataType::Float16,
        "bf16" | "bfloat16" => DataType::Bfloat16,
        "e4m3" | "fp8_e4m3" => DataType::Float8E4M3,
        "e5m2" | "fp8_e5m2" => DataType::Float8E5M2,
        _ => return None,
    })
}

/// Parse the command line (without the program name); `Ok(None)` for `--help`.
pub fn parse(args: &[String]) -> Result<Option<Options>> {
    let mut o = Options::default();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| Error::invalid_param(format!("{flag} needs a value; {USAGE}")));
        let bad = |v: &str| Error::invalid_param(format!("{flag} {v:?} is not valid; {USAGE}"));
        match flag.as_str() {
            "-m" => {
                let v = value()?;
                o.mem = match v.as_str() {
                    "host" => MemType::Host,
                    "cuda" => MemType::Cuda,
                    _ => return Err(bad(v)),
                };
            }
            "-s" => {
                let v = value()?;
                o.size =
                    parse_count(v).and_then(|n| usize::try_from(n).ok()).filter(|&n| n > 0).ok_or_else(|| bad(v))?;
            }
            "-n" | "-w" => {
                let v = value()?;
                let n: usize = v.parse().map_err(|_| bad(v))?;
                if flag == "-n" {
                    o.iters = if n == 0 { return Err(bad(v)) } else { n };
                } else {
                    o.warmup = n;
                }
            }
            "-t" => {
                let v = value()?;
                o.dtypes = v.split(',').map(|t| dtype_named(t).ok_or_else(|| bad(t))).collect::<Result<_>>()?;
            }
            "-k" => {
                let v = value()?;
                o.sources = v
                    .split(',')
                    .map(|k| k.parse().ok().filter(|&k: &usize| (1..=64).contains(&k)).ok_or_else(|| bad(k)))
                    .collect::<Result<_>>()?;
            }
            // An answer, not a mistake: stdout and exit code 0, as the other tools.
            "-h" | "--help" => return Ok(None),
            other => return Err(Error::invalid_param(format!("unknown option {other:?}; {USAGE}"))),
        }
    }
    // The copy moves the float32 elements an operand holds and each reduction
    // the elements of its datatype: an operand too small for one of them made
    // a copy of 0 bytes (rates of 0 and "inf" times the copy) or stopped the
    // run halfway with "holds no float32".
    let least = o.dtypes.iter().map(|d| d.size()).fold(DataType::Float32.size(), usize::max);
    if o.size < least {
        return Err(Error::invalid_param(format!(
            "-s {}: an operand must hold one float32 (for the copy) and one element of each -t datatype: at \
             least {least} bytes",
            o.size
        )));
    }
    Ok(Some(o))
}

/// One measured line.
#[derive(Clone, Debug)]
pub struct Row {
    /// `copy` or the datatype reduced.
    pub what: String,
    /// Sources (1 for the copy).
    pub sources: usize,
    /// Median-free mean time of one call, seconds.
    pub seconds: f64,
    /// Bytes read plus written per second.
    pub bytes_per_second: f64,
}

fn component(mem: MemType) -> Result<Arc<dyn Mc>> {
    Ok(match mem {
        MemType::Host => Arc::new(HostMc::new()),
        MemType::Cuda => Arc::new(CudaMc::probe()?),
        other => return Err(Error::not_supported(format!("-m {other}: only host and cuda"))),
    })
}

/// `len` bytes of `mc`'s memory holding random values of `dt` (in [-1, 1),
/// never all zeros): a table of 4099 random elements, tiled from a
/// seed-dependent start so that sources differ (filling 256 MiB element by
/// element took longer than the timing itself).
fn random_operand(mc: &dyn Mc, host: &HostMc, dt: DataType, len: usize, seed: u64) -> Result<Scratch> {
    const TABLE: usize = 4099;
    let elem = dt.size();
    let mut table = vec![0u8; TABLE * elem];
    let mut x = seed | 1;
    for chunk in table.chunks_exact_mut(elem) {
        // xorshift64: cheap, and never zero.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let v = (x >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
        put_real(chunk, dt, v);
    }
    let s = mc.alloc(len)?;
    let staging = host.alloc(len)?;
    // SAFETY: staging is a fresh host allocation of len bytes that nothing else refers to.
    let bytes = unsafe { std::slice::from_raw_parts_mut(staging.mem().addr(), len) };
    let mut from = (seed as usize % TABLE) * elem;
    for chunk in bytes.chunks_mut(table.len()) {
        // Each piece continues the table where the last one stopped.
        let (len, n) = (chunk.len(), chunk.len().min(table.len() - from));
        chunk[..n].copy_from_slice(&table[from..from + n]);
        chunk[n..].copy_from_slice(&table[..len - n]);
        from = (from + len) % table.len();
    }
    mc.copy(s.mem(), staging.mem())?;
    Ok(s)
}

/// Mean seconds per call of `f` over `iters` calls after `warmup` untimed ones.
fn time(iters: usize, warmup: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    for _ in 0..warmup {
        f()?;
    }
    let t = Instant::now();
    for _ in 0..iters {
        f()?;
    }
    Ok(t.elapsed().as_secs_f64() / iters as f64)
}

/// Measure the copy, then every datatype × source count.
pub fn measure(o: &Options, mut report: impl FnMut(&Row)) -> Result<Vec<Row>> {
    let mc = component(o.mem)?;
    let host = HostMc::new();
    let most = o.sources.iter().copied().max().unwrap_or(1);
    let mut rows = Vec::new();
    let mut push = |row: Row| {
        report(&row);
        rows.push(row);
    };
    let dst = mc.alloc(o.size)?;
    let src = random_operand(&*mc, &host, DataType::Float32, o.size - o.size % 4, 1)?;
    let copy_len = src.mem().len();
    // SAFETY: dst holds o.size >= copy_len bytes of mc's memory.
    let dst_part = unsafe { MemRef::new(dst.mem().addr(), copy_len, o.mem) };
    let secs = time(o.iters, o.warmup, || mc.copy(dst_part, src.mem()))?;
    push(Row { what: "copy".into(), sources: 1, seconds: secs, bytes_per_second: 2.0 * copy_len as f64 / secs });
    drop(src);
    for &dt in &o.dtypes {
        let count = o.size / dt.size();
        let len = count * dt.size();
        if count == 0 {
            return Err(Error::invalid_param(format!("-s {} holds no {dt}", o.size)));
        }
        let srcs: Vec<Scratch> =
            (0..most).map(|i| random_operand(&*mc, &host, dt, len, 0x9e37_79b9 + i as u64)).collect::<Result<_>>()?;
        // SAFETY: dst holds o.size >= len bytes of mc's memory.
        let out = unsafe { MemRef::new(dst.mem().addr(), len, o.mem) };
        for &k in &o.sources {
            let refs: Vec<MemRef> = srcs[..k].iter().map(|s| s.mem()).collect();
            let spec = ReduceSpec { dtype: dt, op: ReduceOp::Sum, count, avg_divisor: None };
            let secs = time(o.iters, o.warmup, || mc.reduce(out, &refs, &spec))?;
            let moved = (k + 1) as f64 * len as f64;
            push(Row { what: dt.to_string(), sources: k, seconds: secs, bytes_per_second: moved / secs });
        }
    }
    Ok(rows)
}

/// The program: measure and print a table; the exit code.
pub fn main(args: &[String]) -> i32 {
    let o = match parse(args) {
        Ok(Some(o)) => o,
        Ok(None) => {
            println!("{USAGE}");
            return 0;
        }
        Err(e) => {
            eprintln!("ferrocoll-reduce-bench: {}", e.context());
            return 2;
        }
    };
    println!(
        "# {} memory, operands of {}, {} calls each after {} warm-up; GB/s count bytes read + written",
        o.mem,
        human_bytes(o.size as u64),
        o.iters,
        o.warmup
    );
    println!("{:<12} {:>7} {:>12} {:>10} {:>8}", "operation", "sources", "time (µs)", "GB/s", "of copy");
    let mut copy_rate = None;
    let result = measure(&o, |row| {
        let share = match copy_rate {
            None => {
                copy_rate = Some(row.bytes_per_second);
                String::from("1.00")
            }
            Some(c) => format!("{:.2}", row.bytes_per_second / c),
        };
        println!(
            "{:<12} {:>7} {:>12.1} {:>10.1} {:>8}",
            row.what,
            row.sources,
            row.seconds * 1e6,
            row.bytes_per_second / 1e9,
            share
        );
    });
    match result {
        Ok(_) => 0,
        Err(e) => {
            eprintln!("ferrocoll-reduce-bench: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn options_parse_and_bad_values_are_named() {
        let o = parse(&args("-m host -s 1m -n 3 -w 0 -t f16,e5m2 -k 2,3")).unwrap().unwrap();
        assert_eq!(o.mem, MemType::Host);
        assert_eq!((o.size, o.iters, o.warmup), (1 << 20, 3, 0));
        assert_eq!(o.dtypes, vec![DataType::Float16, DataType::Float8E5M2]);
        assert_eq!(o.sources, vec![2, 3]);
        for (bad, named) in
            [("-t f33", "f33"), ("-k 0", "0"), ("-s 0", "0"), ("-n 0", "0"), ("-m rocm", "rocm"), ("-q", "-q")]
        {
            let e = parse(&args(bad)).unwrap_err();
            assert!(e.context().contains(named), "{bad}: {e}");
        }
        assert!(parse(&args("-s")).unwrap_err().context().contains("needs a value"));
        assert_eq!(parse(&args("--help")).unwrap(), None);
        // Operands smaller than one element of the copy or of a datatype are
        // refused up front (-s 2 -t f16 measured a copy of 0 bytes).
        for (bad, says) in [
            ("-s 2 -t f16", "-s 2: an operand must hold one float32"),
            ("-s 7 -t f64", "at least 8 bytes"),
            ("-s 1", "-s 1:"),
        ] {
            let e = parse(&args(bad)).unwrap_err();
            assert!(e.context().contains(says), "{bad}: {e}");
        }
        assert_eq!(parse(&args("-s 4 -t f32,e4m3")).unwrap().unwrap().size, 4);
    }

    #[test]
    fn host_run_measures_the_copy_and_every_pair() {
        let o = Options {
            mem: MemType::Host,
            size: 64 << 10,
            iters: 2,
            warmup: 1,
            dtypes: vec![DataType::Float32, DataType::Bfloat16],
            sources: vec![2, 4],
        };
        let mut seen = 0;
        let rows = measure(&o, |_| seen += 1).unwrap();
        assert_eq!(rows.len(), 1 + 2 * 2);
        assert_eq!(seen, rows.len());
        assert_eq!(rows[0].what, "copy");
        assert_eq!((rows[4].what.as_str(), rows[4].sources), (DataType::Bfloat16.to_string().as_str(), 4));
        assert!(rows.iter().all(|r| r.seconds > 0.0 && r.bytes_per_second.is_finite()));
    }
}
