//! The main job until the perftest exists: an allreduce over N ranks that
//! are threads of this process. Prints whether every rank got the right
//! result and the time per call.
//!
//! ```text
//! cargo run --release --example allreduce_threads -- --ranks 8 --count 1048576 --iters 20
//! ```

use std::time::Instant;

use ferrocoll::{Coll, Context, ContextParams, Lib, ReduceOp, Team, TeamParams, ThreadOob};

struct Opts {
    ranks: usize,
    count: usize,
    iters: usize,
    warmup: usize,
}

fn parse() -> Result<Opts, String> {
    let mut o = Opts { ranks: 4, count: 1 << 20, iters: 20, warmup: 3 };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = |name: &str| -> Result<usize, String> {
            let v = args.next().ok_or(format!("{name} needs a value"))?;
            v.parse().map_err(|_| format!("{name}: {v:?} is not a number"))
        };
        match a.as_str() {
            "--ranks" | "-n" => o.ranks = val("--ranks")?,
            "--count" | "-c" => o.count = val("--count")?,
            "--iters" | "-i" => o.iters = val("--iters")?,
            "--warmup" | "-w" => o.warmup = val("--warmup")?,
            "--help" | "-h" => {
                return Err("usage: allreduce_threads [--ranks N] [--count ELEMS] [--iters N] [--warmup N]".into());
            }
            other => return Err(format!("unknown option {other:?} (try --help)")),
        }
    }
    if o.ranks == 0 || o.iters == 0 {
        return Err("--ranks and --iters must be at least 1".into());
    }
    Ok(o)
}

/// One rank: allreduce (sum) of f32 vectors whose exact sum is known.
fn rank(oob: ThreadOob, lib: Lib, o: &Opts) -> ferrocoll::Result<(bool, f64, String)> {
    let ctx = Context::new(&lib, ContextParams::with_oob(oob))?;
    let team = Team::create(&ctx, TeamParams::default())?;
    let (r, n) = (team.rank(), team.size());
    // Small integers: the f32 sum is exact, so the check is exact.
    let src: Vec<f32> = (0..o.count).map(|i| ((i + r) % 7) as f32).collect();
    let mut dst = vec![0.0f32; o.count];
    let mut req = Coll::allreduce(&src, &mut dst, ReduceOp::Sum).persistent().init(&team)?;
    let selected = req.selected().to_string();
    for _ in 0..o.warmup {
        req.run()?;
    }
    Coll::barrier().run(&team)?;
    let start = Instant::now();
    for _ in 0..o.iters {
        req.run()?;
    }
    let per_call = start.elapsed().as_secs_f64() / o.iters as f64;
    drop(req);
    let ok = dst.iter().enumerate().all(|(i, &v)| v == (0..n).map(|q| ((i + q) % 7) as f32).sum::<f32>());
    Ok((ok, per_call, selected))
}

fn main() {
    let o = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let lib = match Lib::new() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("ferrocoll: {e}");
            std::process::exit(1);
        }
    };
    let o = std::sync::Arc::new(o);
    let handles: Vec<_> = ThreadOob::group(o.ranks)
        .into_iter()
        .map(|oob| {
            let (lib, o) = (lib.clone(), o.clone());
            std::thread::spawn(move || rank(oob, lib, &o))
        })
        .collect();
    let mut all_ok = true;
    let mut worst = 0.0f64;
    let mut selected = String::new();
    for (r, h) in handles.into_iter().enumerate() {
        match h.join() {
            Ok(Ok((ok, t, sel))) => {
                all_ok &= ok;
                worst = worst.max(t);
                selected = sel;
            }
            Ok(Err(e)) => {
                eprintln!("rank {r}: {e}");
                all_ok = false;
            }
            Err(_) => {
                eprintln!("rank {r} panicked");
                all_ok = false;
            }
        }
    }
    let bytes = o.count * 4;
    let busbw =
        if o.ranks > 1 { 2.0 * (o.ranks - 1) as f64 / o.ranks as f64 * bytes as f64 / worst / 1e9 } else { 0.0 };
    println!(
        "allreduce float32 sum: {} ranks (threads), {} elements ({} bytes), {} via {selected}",
        o.ranks,
        o.count,
        bytes,
        if all_ok { "result check PASSED" } else { "result check FAILED" }
    );
    println!(
        "time per call: {:.1} us (slowest rank, mean of {} calls); bus bandwidth {busbw:.2} GB/s",
        worst * 1e6,
        o.iters
    );
    if !all_ok {
        std::process::exit(1);
    }
}
