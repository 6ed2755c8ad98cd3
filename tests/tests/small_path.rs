//! The small-message path (issue 10): what it gave up nothing for. A
//! persistent post allocates a fixed, small number of blocks (counted here
//! with a counting allocator); a mismatched call is still caught after the
//! selection table and the inline poll of `wait`; a timeout still fires in
//! `wait`, which now polls its own task before the rest of the context.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::Duration;

use ferrocoll::{Coll, Config, ReduceOp, Status};
use ferrocoll_tests::world;

/// Counts the allocations of the calling thread.
struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards every call to the system allocator unchanged; the count
// is a const-initialised thread-local Cell, which allocates nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: forwarded with the caller's arguments.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocs() -> u64 {
    ALLOCS.with(Cell::get)
}

/// Allocations per call of `f` on this thread, once 100 calls warmed it up.
fn allocations_per_call(f: &mut dyn FnMut()) -> f64 {
    for _ in 0..100 {
        f();
    }
    let before = allocs();
    let n = 1000;
    for _ in 0..n {
        f();
    }
    (allocs() - before) as f64 / n as f64
}

/// The blocks a persistent post of a team of one allocates: none. The slot
/// in the progress queue is the one of the post before, re-armed; the diag
/// is the request's, made once; the self TL writes the post's outcome into
/// the future of the post before (`CollTask::restart`). More means
/// something crept onto the path.
const PER_PERSISTENT_POST: u64 = 0;

/// The blocks a one-shot allreduce allocates when the call repeats: none.
/// It takes the plan the last request with the same call parked on the
/// team (arguments, task, diag, slot and its finished future) and
/// allocates what a persistent post does.
const PER_ONE_SHOT: u64 = 0;

/// Whether the counting allocator counts on this thread (a test that
/// expects no allocation would otherwise pass with a broken counter).
fn counter_counts() -> bool {
    let before = allocs();
    drop(std::hint::black_box(Box::new(7u64)));
    allocs() > before
}

/// The blocks a one-shot allreduce on buffers not seen lately allocates
/// (6 measured): the validated arguments, the task, the request's diag, the
/// plan that holds them (one box, so that parking it and taking it back
/// moves a pointer), the slot and the algorithm's future. Selection
/// allocates nothing.
const PER_FRESH_ONE_SHOT: u64 = 6;

#[test]
fn a_persistent_post_allocates_a_fixed_small_number_of_blocks() {
    let out = world::run(1, &Config::new(), |team, _| {
        let (src, mut dst) = ([1.0f32; 2], [0.0f32; 2]);
        let mut req = Coll::allreduce(&src, &mut dst, ReduceOp::Sum).persistent().init(team).expect("init");
        for _ in 0..100 {
            req.run().expect("warm-up post");
        }
        let before = allocs();
        let n = 1000;
        for _ in 0..n {
            req.run().expect("post");
        }
        let per_post = (allocs() - before) as f64 / n as f64;
        drop(req);
        assert_eq!(dst, [1.0, 1.0]);
        (per_post, counter_counts())
    });
    let (per_post, counted) = out[0];
    assert!(per_post <= PER_PERSISTENT_POST as f64, "{per_post} allocations per persistent post");
    assert!(counted, "the counting allocator saw no allocation on the rank's thread");
}

#[test]
fn a_one_shot_collective_allocates_a_fixed_small_number_of_blocks() {
    let out = world::run(1, &Config::new(), |team, _| {
        let (src, mut dst) = ([1.0f32; 2], [0.0f32; 2]);
        for _ in 0..100 {
            Coll::allreduce(&src, &mut dst, ReduceOp::Sum).run(team).expect("warm-up");
        }
        let before = allocs();
        let n = 1000;
        for _ in 0..n {
            Coll::allreduce(&src, &mut dst, ReduceOp::Sum).run(team).expect("allreduce");
        }
        ((allocs() - before) as f64 / n as f64, counter_counts())
    });
    let (per_call, counted) = out[0];
    assert!(per_call <= PER_ONE_SHOT as f64, "{per_call} allocations per one-shot allreduce");
    assert!(counted, "the counting allocator saw no allocation on the rank's thread");
}

/// On the shm TL a small collective is one epoch, whose task runs each
/// post in the box of the post before (`CollTask::restart`): once warm,
/// persistent posts and repeated one-shot calls allocate nothing at all.
#[test]
fn a_small_shm_collective_allocates_nothing_once_warm() {
    let mut c = Config::new();
    c.set("TLS", "shm");
    let out = world::run(1, &c, |team, _| {
        let (src, mut dst) = ([1.0f32; 2], [0.0f32; 2]);
        let per_call = allocations_per_call;
        let mut req = Coll::allreduce(&src, &mut dst, ReduceOp::Sum).persistent().init(team).expect("init");
        assert!(req.selected().starts_with("shm/"), "selected {}", req.selected());
        let persistent = per_call(&mut || req.run().expect("post"));
        drop(req);
        let one_shot = per_call(&mut || Coll::allreduce(&src, &mut dst, ReduceOp::Sum).run(team).expect("allreduce"));
        let barrier = per_call(&mut || Coll::barrier().run(team).expect("barrier"));
        assert_eq!(dst, [1.0, 1.0]);
        let mut swapped = [0.0f32; 2];
        let alltoall = per_call(&mut || Coll::alltoall(&src, &mut swapped).run(team).expect("alltoall"));
        let in_place = per_call(&mut || Coll::alltoall_in_place(&mut swapped).run(team).expect("alltoall in place"));
        assert_eq!(swapped, [1.0, 1.0]);
        let mut mine = [0.0f32; 2];
        let rs = per_call(&mut || Coll::reduce_scatter(&src, &mut mine, ReduceOp::Sum).run(team).expect("rs"));
        assert_eq!(mine, [1.0, 1.0]);
        // The v-variants run their size round in the same box each call (`meta.rs`).
        let (counts, displs) = ([2u64], [0u64]);
        let v = (&counts[..], &displs[..]);
        let mut got = [0.0f32; 2];
        let sv = per_call(&mut || Coll::scatterv(Some((&src[..], v.0, v.1)), &mut got, 0).run(team).expect("scatterv"));
        let gv = per_call(&mut || Coll::gatherv(&src, Some((&mut got, v.0, v.1)), 0).run(team).expect("gatherv"));
        let av = per_call(&mut || Coll::alltoallv(&src, v.0, v.1, &mut got, v.0, v.1).run(team).expect("a2av"));
        assert_eq!(got, [1.0, 1.0]);
        [persistent, one_shot, barrier, alltoall, in_place, rs, sv, gv, av]
    });
    assert_eq!(
        out[0], [0.0; 9],
        "allocations per persistent post, one-shot allreduce, barrier, alltoall, alltoall in place, reduce_scatter, \
         scatterv, gatherv and alltoallv"
    );
}

/// The plan cache takes with one atomic operation and parks back into the
/// entry it took from with a plain store (the entry held meanwhile): threads
/// that run one-shot calls on one team at once, each on its own buffers
/// (more calls than the cache holds), all get their own results.
#[test]
fn threads_sharing_a_team_take_and_park_plans_without_mixing_them() {
    let out = world::run(1, &Config::new(), |team, _| {
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..6)
                .map(|t| {
                    s.spawn(move || {
                        let mut dst = [0.0f32; 3];
                        for i in 0..2000 {
                            let src = [t as f32, i as f32, -1.0];
                            let mut req = Coll::allreduce(&src, &mut dst, ReduceOp::Sum).init(team)?;
                            req.post()?;
                            req.wait()?;
                            drop(req);
                            if dst != src {
                                return Err(ferrocoll::Error::internal(format!("thread {t}, call {i}: {dst:?}")));
                            }
                        }
                        Ok(())
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().expect("worker panicked")).collect::<Result<Vec<()>, _>>()
        })
    });
    out.into_iter().for_each(|r| r.map(|_| ()).unwrap_or_else(|e| panic!("{e}")));
}

#[test]
fn a_one_shot_collective_on_new_buffers_allocates_a_fixed_small_number_of_blocks() {
    let out = world::run(1, &Config::new(), |team, _| {
        // More buffer sets than the team parks plans for: every call is new to it.
        let mut bufs: Vec<([f32; 2], [f32; 2])> = (0..8).map(|k| ([k as f32; 2], [0.0; 2])).collect();
        let before = allocs();
        let n = 1000;
        for i in 0..n {
            let (src, dst) = &mut bufs[i % 8];
            Coll::allreduce(&src[..], &mut dst[..], ReduceOp::Sum).run(team).expect("allreduce");
        }
        (allocs() - before) as f64 / n as f64
    });
    // A few one-off blocks (the team's plan cache itself) spread over the calls.
    assert!(out[0] < PER_FRESH_ONE_SHOT as f64 + 0.1, "{} allocations per fresh one-shot allreduce", out[0]);
    assert!(out[0] > PER_ONE_SHOT as f64, "these calls never repeat within four, yet reused a plan: {}", out[0]);
}

#[test]
fn a_mismatched_persistent_call_is_caught_on_every_rank() {
    let mut c = Config::new();
    c.set("TLS", "shm,self");
    let out = world::run(2, &c, |team, _| {
        let n = if team.rank() == 0 { 2 } else { 3 };
        let (src, mut dst) = (vec![1.0f32; n], vec![0.0f32; n]);
        let mut req = Coll::allreduce(&src, &mut dst, ReduceOp::Sum)
            .persistent()
            .timeout(Duration::from_secs(30))
            .init(team)
            .expect("init");
        req.run()
    });
    for (rank, r) in out.iter().enumerate() {
        let e = r.as_ref().expect_err("mismatched counts must not succeed");
        assert_eq!(e.status(), Status::InvalidParam, "rank {rank}: {e}");
        assert!(e.to_string().contains("calls differ"), "rank {rank}: {e}");
    }
}

#[test]
fn a_timeout_still_fires_in_wait() {
    let out = world::run(2, &Config::new(), |team, _| {
        if team.rank() == 1 {
            // Never posts: rank 0's barrier can only end by its timeout.
            std::thread::sleep(Duration::from_millis(300));
            return Ok(());
        }
        let mut req = Coll::barrier().timeout(Duration::from_millis(50)).init(team).expect("init");
        req.post().expect("post");
        req.wait()
    });
    let e = out[0].as_ref().expect_err("a barrier nobody joins must time out");
    assert_eq!(e.status(), Status::TimedOut, "{e}");
    assert!(e.to_string().contains("barrier"), "{e}");
}

/// A one-shot call repeated on the same buffers takes the plan the last
/// such request parked on its team (see `core/src/object/plan_cache.rs`):
/// it allocates no more than a persistent post, and still reads the data
/// the buffers hold at each post.
#[test]
fn a_repeated_one_shot_call_reuses_its_plan_and_reads_fresh_data() {
    let out = world::run(1, &Config::new(), |team, _| {
        let (mut src, mut dst) = ([0.0f32; 2], [0.0f32; 2]);
        for i in 0..100 {
            src = [i as f32, -(i as f32)];
            Coll::allreduce(&src, &mut dst, ReduceOp::Sum).run(team).expect("warm-up");
            assert_eq!(dst, src, "iteration {i}");
        }
        let before = allocs();
        let n = 1000;
        for _ in 0..n {
            Coll::allreduce(&src, &mut dst, ReduceOp::Sum).run(team).expect("allreduce");
        }
        (allocs() - before) as f64 / n as f64
    });
    assert!(out[0] <= PER_ONE_SHOT as f64, "{} allocations per repeated one-shot allreduce", out[0]);
}

/// Calls on other buffers, and more distinct calls than the cache holds,
/// each get a plan of their own: on two shm ranks, six buffer sets in turn,
/// with data that changes every round, all right.
#[test]
fn one_shot_calls_on_other_buffers_get_plans_of_their_own() {
    let mut c = Config::new();
    c.set("TLS", "shm,self");
    let out = world::run(2, &c, |team, _| {
        let me = team.rank() as f32;
        let mut bufs: Vec<([f32; 3], [f32; 3])> = (0..6).map(|_| ([0.0; 3], [0.0; 3])).collect();
        for round in 0..20 {
            for (k, (src, dst)) in bufs.iter_mut().enumerate() {
                let x = (round * 10 + k) as f32;
                *src = [x + me, 2.0 * x, me];
                Coll::allreduce(&src[..], &mut dst[..], ReduceOp::Sum).run(team)?;
                // Ranks 0 and 1: (x + 0) + (x + 1), 2x + 2x, 0 + 1.
                if *dst != [2.0 * x + 1.0, 4.0 * x, 1.0] {
                    return Err(ferrocoll::Error::internal(format!("round {round} set {k}: {dst:?}")));
                }
                Coll::barrier().run(team)?;
            }
        }
        Ok(())
    });
    for (rank, r) in out.into_iter().enumerate() {
        r.unwrap_or_else(|e| panic!("rank {rank}: {e}"));
    }
}

/// A persistent request's posts share one queue slot; the flight record
/// still lists each post with its own sequence number.
#[test]
fn the_flight_record_lists_every_post_of_a_persistent_request() {
    let out = world::run(1, &Config::new(), |team, _| {
        let (src, mut dst) = ([1.0f32; 2], [0.0f32; 2]);
        let mut req = Coll::allreduce(&src, &mut dst, ReduceOp::Sum).persistent().init(team).expect("init");
        for _ in 0..3 {
            req.run().expect("post");
        }
        drop(req);
        team.flight_record()
    });
    let json = &out[0];
    let seqs: Vec<u64> = json
        .split("\"seq\":")
        .skip(1)
        .map(|rest| rest.chars().take_while(char::is_ascii_digit).collect::<String>().parse().expect("a number"))
        .collect();
    assert_eq!(seqs.len(), 3, "{json}");
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "each post has its own sequence number: {json}");
    assert_eq!(json.matches("\"state\":\"ok\"").count(), 3, "{json}");
}

/// A call whose raw arguments match a parked request's skips validation
/// (it would give the same answer); one that differs in anything is
/// validated: after good calls on the same buffer, a bad root is refused.
#[test]
fn a_call_that_differs_from_a_parked_one_is_still_validated() {
    let out = world::run(1, &Config::new(), |team, _| {
        let mut buf = [1.0f32; 4];
        for _ in 0..3 {
            Coll::bcast(&mut buf, 0).run(team).expect("a good bcast");
        }
        let bad = Coll::bcast(&mut buf, 1).run(team).expect_err("root 1 in a team of one");
        Coll::bcast(&mut buf, 0).run(team).expect("a good bcast again");
        bad
    });
    assert_eq!(out[0].status(), Status::InvalidParam, "{}", out[0]);
    assert!(out[0].to_string().contains("root 1"), "{}", out[0]);
}

/// A completion set on the request (how the C interface reports every
/// request) fires once per post, and is not part of the call: repeated
/// requests keep reusing their plan (one block more per call: the callback).
#[test]
fn a_completion_set_on_the_request_fires_once_per_post_and_keeps_the_plan() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let out = world::run(1, &Config::new(), |team, _| {
        let fired = Arc::new(AtomicUsize::new(0));
        let (src, mut dst) = ([2.0f32; 2], [0.0f32; 2]);
        let mut run_once = || {
            let mut req = Coll::allreduce(&src, &mut dst, ReduceOp::Sum).init(team).expect("init");
            let f = fired.clone();
            req.set_completion(Arc::new(move |s| {
                assert_eq!(s, Status::Ok);
                f.fetch_add(1, Ordering::Relaxed);
            }));
            req.run().expect("allreduce");
        };
        let per_call = allocations_per_call(&mut run_once);
        (per_call, fired.load(Ordering::Relaxed))
    });
    let (per_call, fired) = out[0];
    assert_eq!(fired, 1100, "one completion per post");
    assert!(per_call <= (PER_ONE_SHOT + 1) as f64, "{per_call} allocations per one-shot allreduce with a completion");
}

/// Slots are re-armed while the progress queue may still hold them: with
/// another thread progressing the context all along, persistent posts and
/// repeated one-shot calls (which re-arm parked slots) on two shm ranks
/// all complete, with the right results, and none is lost from the queue
/// (a lost one would leave its wait to poll alone, which still ends it; a
/// doubly queued one would be harmless): what is checked is results and
/// that every call returns.
#[test]
fn slots_rearmed_while_another_thread_progresses_the_context_complete_right() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let mut c = Config::new();
    c.set("TLS", "shm,self");
    let out = world::run(2, &c, |team, ctx| {
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    let _ = ctx.progress();
                }
            });
            let result = (|| {
                let me = team.rank() as f32;
                let (mut src, mut dst) = ([0.0f32; 2], [0.0f32; 2]);
                let (mut src2, mut dst2) = ([0.0f32; 3], [0.0f32; 3]);
                for i in 0..500 {
                    let x = i as f32;
                    src.copy_from_slice(&[x + me, me]);
                    {
                        let mut req = Coll::allreduce(&src, &mut dst, ReduceOp::Sum).persistent().init(team)?;
                        for _ in 0..3 {
                            req.run()?;
                        }
                    }
                    if dst != [2.0 * x + 1.0, 1.0] {
                        return Err(ferrocoll::Error::internal(format!("persistent, iteration {i}: {dst:?}")));
                    }
                    src2.copy_from_slice(&[x, me, 1.0]);
                    Coll::allreduce(&src2, &mut dst2, ReduceOp::Max).run(team)?;
                    if dst2 != [x, 1.0, 1.0] {
                        return Err(ferrocoll::Error::internal(format!("one-shot, iteration {i}: {dst2:?}")));
                    }
                }
                Ok(())
            })();
            stop.store(true, Ordering::Relaxed);
            result
        })
    });
    for (rank, r) in out.into_iter().enumerate() {
        r.unwrap_or_else(|e| panic!("rank {rank}: {e}"));
    }
}

/// A v-collective repeated on the same buffers and arrays takes its parked
/// plan too, but only while the arrays hold what they held: on two shm
/// ranks, the counts and displacements are rewritten in place between
/// calls (same addresses, same totals, and for most calls the same buffer
/// lengths: nothing but the arrays' contents tells the calls apart), and
/// every call lands its blocks where the arrays say at that call.
#[test]
fn a_v_call_whose_arrays_were_rewritten_gets_a_plan_of_its_own() {
    for tls in ["shm,self", "p2p,self"] {
        v_calls_with_rewritten_arrays(tls);
    }
}

fn v_calls_with_rewritten_arrays(tls: &str) {
    let mut c = Config::new();
    // A rank that fails a check stops calling: the other's call then ends.
    c.set("TLS", tls).set("COLL_TIMEOUT", "30");
    let out = world::run(2, &c, |team, _| {
        let me = team.rank();
        let fail = |what: &str, round: usize, got: &[f32]| {
            Err(ferrocoll::Error::internal(format!("{what}, round {round}: {got:?}")))
        };
        // (counts, displacements) of the two ranks' blocks of 4 elements.
        let layouts: [([u32; 2], [u32; 2]); 3] = [([2, 2], [0, 2]), ([2, 2], [2, 0]), ([1, 3], [3, 0])];
        // Rewritten in place each round: the calls see the same addresses.
        let (mut counts, mut displs) = ([0u32; 2], [0u32; 2]);
        let mut src = [0.0f32; 4];
        let mut dst = [0.0f32; 4];
        for round in 0..30 {
            counts.copy_from_slice(&layouts[round % 3].0);
            displs.copy_from_slice(&layouts[round % 3].1);
            let value = |r: usize, k: usize| (100 * round + 10 * r + k) as f32;
            for (k, x) in src.iter_mut().enumerate() {
                *x = value(me, k);
            }
            let (n, at) = (counts.map(|c| c as usize), displs.map(|d| d as usize));

            // Allgatherv: rank r's first n[r] elements at at[r].
            Coll::allgatherv(&src[..n[me]], &mut dst, &counts, &displs).run(team)?;
            if (0..2).any(|r| (0..n[r]).any(|k| dst[at[r] + k] != value(r, k))) {
                return fail("allgatherv", round, &dst);
            }

            // Alltoallv: rank r sends its elements at[j].. (n[j] of them) to
            // rank j, which lays them out rank after rank.
            let (recv_counts, recv_displs) = ([counts[me]; 2], [0, counts[me]]);
            let mut got = [0.0f32; 6];
            Coll::alltoallv(&src, &counts, &displs, &mut got, &recv_counts, &recv_displs).run(team)?;
            if (0..2).any(|r| (0..n[me]).any(|k| got[r * n[me] + k] != value(r, at[me] + k))) {
                return fail("alltoallv", round, &got);
            }

            // Reduce-scatterv in place: block r of the sum (blocks back to
            // back, n[0] then n[1] elements) lands at its own offset.
            dst = src;
            Coll::reduce_scatterv_in_place(&mut dst, &counts, ReduceOp::Sum).run(team)?;
            let mine = if me == 0 { 0..n[0] } else { n[0]..4 };
            if mine.clone().any(|k| dst[k] != value(0, k) + value(1, k)) {
                return fail("reduce_scatterv", round, &dst);
            }
        }
        Ok(())
    });
    for (rank, r) in out.into_iter().enumerate() {
        r.unwrap_or_else(|e| panic!("{tls}, rank {rank}: {e}"));
    }
}

/// A v-call matched on its raw arguments skips validation only while its
/// arrays hold what validation read: after good calls, the same arguments
/// with a displacement rewritten to overflow are refused, naming it, and a
/// good call works again after.
#[test]
fn a_v_call_whose_arrays_turned_bad_is_refused() {
    use ferrocoll::{BufferInfo, BufferInfoV, CollArgs, CollBuffer, CollFlags, CollType, DataType, MemType};
    let out = world::run(1, &Config::new(), |team, _| {
        let src = [7u64; 2];
        let mut dst = [0u64; 2];
        let counts = [2u64];
        let mut displs = [0u64];
        let mut call = |displs: &[u64; 1]| {
            let mut a = CollArgs::new(CollType::Allgatherv);
            a.flags = CollFlags::COUNT_64BIT | CollFlags::DISPLACEMENTS_64BIT;
            a.src = CollBuffer::Info(BufferInfo {
                buffer: src.as_ptr().cast_mut().cast(),
                count: 2,
                datatype: DataType::Uint64,
                mem_type: MemType::Host,
            });
            a.dst = CollBuffer::InfoV(BufferInfoV {
                buffer: dst.as_mut_ptr().cast(),
                counts: counts.as_ptr().cast(),
                displacements: displs.as_ptr().cast(),
                datatype: DataType::Uint64,
                mem_type: MemType::Host,
            });
            // SAFETY: the buffers and arrays outlive the request, which ends
            // here; a good call's blocks lie in dst; a bad one fails at
            // validation, before anything is read or written.
            let mut req = unsafe { team.collective_init(&a) }?;
            req.post()?;
            req.wait()
        };
        for _ in 0..3 {
            call(&displs).expect("a good allgatherv");
        }
        displs[0] = u64::MAX;
        let bad = call(&displs).expect_err("a displacement that overflows");
        displs[0] = 0;
        call(&displs).expect("a good allgatherv again");
        bad
    });
    assert_eq!(out[0].status(), Status::InvalidParam, "{}", out[0]);
    assert!(out[0].to_string().contains("overflows"), "{}", out[0]);
}

/// What a repeated one-shot v-call allocates on a team of one, at most
/// (measured: 0 each, one epoch each: the size round of alltoallv, gatherv
/// and scatterv runs in the box of its last post, `shm/alg/meta.rs`;
/// before, alltoallv 2, the
/// algorithm's future and its list of blocks to take; 12, 14 and 21 before
/// v-calls were parked, the typed builder kept its checks' arrays without
/// copying them and the size round took its sizes without collecting them).
const PER_REPEATED_V: [f64; 5] = [0.0; 5];

#[test]
fn a_repeated_v_call_reuses_its_plan() {
    let mut c = Config::new();
    c.set("TLS", "shm");
    let out = world::run(1, &c, |team, _| {
        let per_call = allocations_per_call;
        let src = [1.0f32; 2];
        let mut dst = [0.0f32; 2];
        let (counts, displs) = ([2u32], [0u32]);
        let ag = per_call(&mut || Coll::allgatherv(&src, &mut dst, &counts, &displs).run(team).expect("allgatherv"));
        let rs =
            per_call(&mut || Coll::reduce_scatterv(&src, &mut dst, &counts, ReduceOp::Sum).run(team).expect("rsv"));
        let a2a = per_call(&mut || {
            Coll::alltoallv(&src, &counts, &displs, &mut dst, &counts, &displs).run(team).expect("alltoallv")
        });
        assert_eq!(dst, src);
        let gv = per_call(&mut || {
            Coll::gatherv(&src, Some((&mut dst[..], &counts[..], &displs[..])), 0).run(team).expect("gatherv")
        });
        let sv = per_call(&mut || {
            Coll::scatterv(Some((&src[..], &counts[..], &displs[..])), &mut dst, 0).run(team).expect("scatterv")
        });
        [ag, rs, a2a, gv, sv]
    });
    let names = ["allgatherv", "reduce_scatterv", "alltoallv", "gatherv", "scatterv"];
    for ((name, got), most) in names.iter().zip(out[0]).zip(PER_REPEATED_V) {
        assert!(got <= most, "{got} allocations per repeated one-shot {name} (at most {most})");
    }
}

/// A finished one-shot request renewed in place (what the C interface does
/// with a finalized handle whose call comes again) posts again and reads
/// the data its buffers hold then, on two shm ranks; a request that was
/// never posted is not renewed.
#[test]
fn a_renewed_request_posts_again_with_fresh_data() {
    use ferrocoll::{BufferInfo, CollArgs, CollBuffer, CollType, DataType, MemType};
    let mut c = Config::new();
    c.set("TLS", "shm,self");
    let out = world::run(2, &c, |team, _| {
        let me = team.rank() as f32;
        let (mut src, mut dst) = ([0.0f32; 3], [0.0f32; 3]);
        let info = |p: *mut f32| BufferInfo {
            buffer: p.cast(),
            count: 3,
            datatype: DataType::Float32,
            mem_type: MemType::Host,
        };
        let mut args = CollArgs::new(CollType::Allreduce);
        args.src = CollBuffer::Info(info(src.as_mut_ptr()));
        args.dst = CollBuffer::Info(info(dst.as_mut_ptr()));
        // SAFETY: both arrays outlive the request, and are only touched
        // here between its posts.
        let mut req = unsafe { team.collective_init(&args) }?;
        if req.renew() {
            return Err(ferrocoll::Error::internal("a request never posted was renewed"));
        }
        for round in 0..50 {
            let x = round as f32;
            src[0] = x + me;
            req.run()?;
            if dst[0] != 2.0 * x + 1.0 {
                return Err(ferrocoll::Error::internal(format!("round {round}: {}", dst[0])));
            }
            if !req.renew() {
                return Err(ferrocoll::Error::internal(format!("round {round}: not renewed")));
            }
            if req.test()? != Status::OperationInitialized {
                return Err(ferrocoll::Error::internal("a renewed request is not a new one"));
            }
        }
        drop(req);
        Ok(())
    });
    for (rank, r) in out.into_iter().enumerate() {
        r.unwrap_or_else(|e| panic!("rank {rank}: {e}"));
    }
}
