//! Where a small collective's time goes, phase by phase, on a team of
//! thread ranks: `init` (validate, select, make the task), `post` (sequence
//! number, call board, start, first poll), `wait` (progress until done) and
//! `drop` (finalize); and, for a persistent request, `post` and `wait` only.
//! Each phase is timed with `Instant` around the public call, summed over
//! the iterations, and printed per rank as ns per collective (the clock
//! reads, ~20 ns each, are included in every phase).
//!
//! ```text
//! cargo run --release -p ferrocoll-bench --example phases -- [RANKS] [ITERS] [persistent]
//! ```
//!
//! With `persistent`, only the persistent allreduce runs, without the
//! barrier between iterations: what an instruction count (callgrind) of the
//! run then measures is one persistent post and wait, nothing else.

use std::time::{Duration, Instant};

use ferrocoll::{Coll, Lib, ReduceOp, Result, Team};
use ferrocoll_bench::threads::on_thread_team;

#[derive(Default, Clone, Copy)]
struct Phases {
    init: Duration,
    post: Duration,
    wait: Duration,
    drop: Duration,
}

fn timed<R>(acc: &mut Duration, f: impl FnOnce() -> R) -> R {
    let t = Instant::now();
    let r = f();
    *acc += t.elapsed();
    r
}

fn one_shot(team: &Team, iters: usize) -> Result<Phases> {
    let (src, mut dst) = ([1.0f32; 2], [0.0f32; 2]);
    let mut p = Phases::default();
    for _ in 0..iters {
        let mut req = timed(&mut p.init, || Coll::allreduce(&src, &mut dst, ReduceOp::Sum).init(team))?;
        timed(&mut p.post, || req.post())?;
        timed(&mut p.wait, || req.wait())?;
        timed(&mut p.drop, || drop(req));
        Coll::barrier().run(team)?;
    }
    Ok(p)
}

fn persistent(team: &Team, iters: usize, barrier: bool) -> Result<Phases> {
    let (src, mut dst) = ([1.0f32; 2], [0.0f32; 2]);
    let mut p = Phases::default();
    let mut req = Coll::allreduce(&src, &mut dst, ReduceOp::Sum).persistent().init(team)?;
    for _ in 0..iters {
        timed(&mut p.post, || req.post())?;
        timed(&mut p.wait, || req.wait())?;
        if barrier {
            Coll::barrier().run(team)?;
        }
    }
    Ok(p)
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let ranks = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let iters: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let only_persistent = args.next().is_some_and(|a| a == "persistent");
    let lib = Lib::new()?;
    let out = on_thread_team(&lib, ranks, move |team| {
        let warm = (iters / 10).max(1);
        let a = if only_persistent {
            Phases::default()
        } else {
            one_shot(team, warm)?;
            one_shot(team, iters)?
        };
        persistent(team, warm, !only_persistent)?;
        let b = persistent(team, iters, !only_persistent)?;
        Ok((a, b))
    })?;
    let ns = |d: Duration| d.as_nanos() as f64 / iters as f64;
    println!("allreduce 8 B, {ranks} thread rank(s), {iters} iterations, ns per collective");
    println!("rank  kind        init   post   wait   drop  total");
    for (r, (a, b)) in out.iter().enumerate() {
        for (kind, p) in [("one-shot", a), ("persistent", b)] {
            let total = ns(p.init) + ns(p.post) + ns(p.wait) + ns(p.drop);
            println!(
                "{r:>4}  {kind:<10} {:>5.0}  {:>5.0}  {:>5.0}  {:>5.0}  {total:>5.0}",
                ns(p.init),
                ns(p.post),
                ns(p.wait),
                ns(p.drop)
            );
        }
    }
    Ok(())
}
