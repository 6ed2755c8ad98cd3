//! The measurement, run by every rank: per size, a barrier, `w` warm-ups
//! and `n` timed iterations (each one timed on its own from init to
//! completion, with an untimed barrier after it, as ucc_perftest does), then
//! an allgather of every rank's mean time over ferrocoll itself.

use std::time::Instant;

use ferrocoll::{Coll, CollType, Error, Request, Result, Team};

use super::buffers::SizeBuffers;
use super::check::{Shape, Verifier};
use super::device::DeviceMirror;
use super::layout::{Layout, busbw_bytes, gbps, has_data, layout, printed_count};
use super::options::Options;
use super::pattern::Inputs;
use super::report::Row;
use super::spread::{self, Spread};
use super::units::sweep;

/// From this many bytes per buffer on, ucc_perftest's "large" iteration counts apply.
pub const LARGE: usize = 64 * 1024;

/// The block counts of the sweep (one for collectives without data).
pub fn counts(o: &Options) -> Vec<u64> {
    if has_data(o.coll) { sweep(o.min, o.max, o.factor) } else { vec![0] }
}

/// (iterations, warm-ups) for buffers of `bytes`.
fn iterations(o: &Options, bytes: usize) -> (usize, usize) {
    let large = bytes >= LARGE;
    (o.iters.unwrap_or(if large { 200 } else { 1000 }), o.warmups.unwrap_or(if large { 20 } else { 100 }))
}

/// The longest buffer any rank of `p` holds at block count `c`, in bytes:
/// what decides the iteration counts, so that every rank runs as many
/// calls (a rank's own buffers would not do: gather's and scatter's root
/// holds P blocks, the others one, and ranks that run different numbers
/// of calls fail at the first that differs).
fn largest_buffer(o: &Options, c: usize, p: usize, elem_size: usize) -> usize {
    let longest = |l: Layout| l.src.unwrap_or(0).max(l.dst.unwrap_or(0));
    let elems = (0..p).map(|r| longest(layout(o.coll, c, p, r, o.root, o.in_place))).max().unwrap_or(0);
    elems.saturating_mul(elem_size)
}

/// How the sweep ended on this rank.
#[derive(Debug, Default)]
pub struct SweepEnd {
    /// Rows (complete on rank 0).
    pub rows: Vec<Row>,
    /// Whether some rank found a wrong result (the sweep stops at that size).
    pub check_failed: bool,
}

fn barrier(team: &Team) -> Result<()> {
    Coll::barrier().run(team)
}

fn usize_of(v: u64, what: &str) -> Result<usize> {
    usize::try_from(v).map_err(|_| Error::invalid_param(format!("{what} {v} does not fit this machine's usize")))
}

/// What rank 0 is told during the sweep.
pub trait Observer {
    /// Size `index` (0-based), whose source holds `bytes` bytes per rank, starts.
    fn start(&mut self, index: usize, bytes: u64);
    /// Size `index` is done.
    fn row(&mut self, index: usize, row: &Row);
}

/// Run the sweep on `team`; `observer` hears from rank 0 only.
pub fn run_sweep(team: &Team, o: &Options, observer: &mut dyn Observer) -> Result<SweepEnd> {
    let (p, rank) = (team.size(), team.rank());
    if o.coll.is_rooted() && o.root >= p {
        return Err(Error::invalid_param(format!("-r {}: the root is outside the team of {p} ranks", o.root)));
    }
    let inputs = Inputs { dtype: o.dtype, op: o.coll.is_reduction().then_some(o.op) };
    let es = inputs.elem_size() as u64;
    let mut end = SweepEnd::default();
    for (index, &c64) in counts(o).iter().enumerate() {
        let c = usize_of(c64, "count")?;
        c.checked_mul(p)
            .and_then(|n| n.checked_mul(es as usize))
            .ok_or_else(|| Error::invalid_param(format!("count {c} × {p} ranks × {es} bytes overflows")))?;
        let count = printed_count(o.coll, c64, p as u64);
        if rank == 0 {
            observer.start(index, count.unwrap_or(0) * es);
        }
        let shape = Shape { coll: o.coll, c, p, rank, root: o.root, in_place: o.in_place };
        let lay = layout(o.coll, c, p, rank, o.root, o.in_place);
        let mut bufs = SizeBuffers::new(&shape, lay, inputs, o.check).map_err(|e| e.prefixed(format!("count {c}")))?;
        let mut verifier = o.check.then(|| Verifier::new(&shape, inputs));
        let (iters, warmups) = iterations(o, largest_buffer(o, c, p, es as usize));
        let mirror = DeviceMirror::new(o.mem, &bufs).map_err(|e| e.prefixed(format!("count {c}")))?;
        let timed = run_size(team, o, &shape, &mut bufs, mirror.as_ref(), verifier.as_mut(), (iters, warmups))?;
        // Every rank's (wrong, spread of times) reaches every rank, over ferrocoll.
        const PER_RANK: usize = 1 + spread::WIRE_LEN;
        let mut mine = [0.0f64; PER_RANK];
        mine[0] = if timed.wrong { 1.0 } else { 0.0 };
        mine[1..].copy_from_slice(&timed.spread.to_wire());
        let mut all = vec![0.0f64; PER_RANK * p];
        Coll::allgather(&mine, &mut all).run(team).map_err(|e| e.prefixed("gathering the timings"))?;
        let any_wrong = all.chunks_exact(PER_RANK).any(|m| m[0] != 0.0);
        let per_rank: Vec<Spread> = all
            .chunks_exact(PER_RANK)
            .map(|m| m[1..].try_into().map(Spread::from_wire))
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| Error::internal("a rank's timings have the wrong length"))?;
        let means: Vec<f64> = per_rank.iter().map(|s| s.mean).collect();
        let avg = means.iter().sum::<f64>() / p as f64;
        let min = means.iter().copied().fold(f64::INFINITY, f64::min);
        let max = means.iter().copied().fold(0.0, f64::max);
        let bw = busbw_bytes(o.coll, c64, es, p as u64).map(|b| [gbps(b, avg), gbps(b, min), gbps(b, max)]);
        let row = Row {
            block_count: c64,
            count,
            bytes: count.map(|n| n * es),
            iters,
            warmups,
            time_avg: avg,
            time_min: min,
            time_max: max,
            busbw: bw,
            algorithm: timed.selected,
            checked: o.check,
            per_rank,
        };
        if rank == 0 {
            observer.row(index, &row);
        }
        end.rows.push(row);
        if any_wrong {
            end.check_failed = true;
            break;
        }
    }
    Ok(end)
}

/// What one size measured on this rank.
struct Timed {
    spread: Spread,
    selected: String,
    wrong: bool,
}

fn run_size(
    team: &Team,
    o: &Options,
    shape: &Shape,
    bufs: &mut SizeBuffers,
    mirror: Option<&DeviceMirror>,
    mut verifier: Option<&mut Verifier>,
    (iters, warmups): (usize, usize),
) -> Result<Timed> {
    bufs.prepare(o.coll, 0);
    if let Some(m) = mirror {
        m.upload(bufs)?;
    }
    // The collective's arguments: over the host buffers, or their device mirrors.
    let args_for = |bufs: &mut SizeBuffers, persistent: bool| {
        let mut args = bufs.args(shape, o.dtype, o.op, persistent);
        if let Some(m) = mirror {
            m.retarget(&mut args);
        }
        args
    };
    barrier(team)?;
    let mut selected = String::new();
    // Filled outside the timed span of each iteration; allocated here, not in the loop.
    let mut samples: Vec<f64> = Vec::with_capacity(iters);
    let mut wrong = false;
    let mut persistent: Option<Request<'static>> = None;
    // The arguments are built once per size, outside the timed loop, as
    // ucc_perftest builds its `ucc_coll_args_t` once and passes it to every
    // `ucc_collective_init`: each iteration times init, post, wait and
    // finalize of the collective, not the benchmark's own bookkeeping. The
    // buffers they point into keep their addresses for the whole size
    // (refilled in place by `prepare`).
    let args = args_for(bufs, o.persistent);
    if o.persistent {
        // SAFETY: `args` points into `bufs` (or `mirror`), which outlives the request
        // (dropped at the end of this function, before `bufs` can move or
        // be freed). Between posts the buffers are touched only after
        // wait() returned, when the request no longer accesses them.
        let req = unsafe { team.collective_init(&args)? };
        selected = req.selected().to_string();
        persistent = Some(req);
    }
    for i in 0..warmups + iters {
        if verifier.is_some() && i > 0 {
            bufs.prepare(o.coll, i);
            if let Some(m) = mirror {
                m.upload(bufs)?;
            }
        }
        let t0 = Instant::now();
        match persistent.as_mut() {
            Some(req) => {
                req.post()?;
                req.wait()?;
            }
            None => {
                // SAFETY: `args` points into `bufs` (or `mirror`), which is neither moved,
                // read nor written until this request is dropped at the end
                // of the block, after wait() returned.
                let mut req = unsafe { team.collective_init(&args)? };
                req.post()?;
                req.wait()?;
                if selected.is_empty() {
                    selected = req.selected().to_string();
                }
            }
        }
        let dt = t0.elapsed().as_secs_f64() * 1e6;
        if i >= warmups {
            samples.push(dt);
        }
        if let Some(v) = verifier.as_deref_mut().filter(|_| !wrong) {
            if let Some(m) = mirror {
                m.download(bufs)?;
            }
            if let Err(m) = v.check(bufs.src.bytes(), bufs.dst.bytes()) {
                wrong = true;
                crate::errln!(
                    "ferrocoll-perftest: rank {}: {} {} count {} iteration {i}: {m}",
                    shape.rank,
                    o.coll,
                    o.dtype,
                    shape.c
                );
            }
        }
        barrier(team)?;
        // The rank that arrives last at a barrier leaves it first (it finds
        // everyone's flag already set), so it arrives first at the next
        // collective and waits there for the other: with one barrier per
        // iteration the same rank was always the one that waits, and every
        // delay of the other (a preemption on a busy host) landed in its
        // time only (one rank 3 µs, the other 8 µs). A second barrier on
        // every other iteration swaps the roles, so each rank waits in half
        // of the timed collectives.
        if i % 2 == 1 {
            barrier(team)?;
        }
    }
    drop(persistent);
    Ok(Timed { spread: Spread::of(&mut samples), selected, wrong })
}

/// Whether `coll` has nothing to check (barrier and friends).
pub fn nothing_to_check(coll: CollType) -> bool {
    coll.is_synchronisation()
}
