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

/// The blocks a persistent post of a team of one allocates (3 measured):
/// the task's future and the algorithm's future inside it, and its slot in
/// the progress queue. The diag is the request's, made once (it was one
/// more per post). More means something crept onto the path.
const PER_PERSISTENT_POST: u64 = 3;

/// The blocks a one-shot allreduce allocates (6 measured): the validated
/// arguments, the task, the request's diag, then a post's three. Selection
/// allocates nothing (it made the candidate list, and the task was copied
/// from a box into an Arc: two more).
const PER_ONE_SHOT: u64 = 6;

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
        per_post
    });
    assert!(out[0] <= PER_PERSISTENT_POST as f64, "{} allocations per persistent post", out[0]);
    assert!(out[0] >= 1.0, "the counter saw nothing: {}", out[0]);
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
        (allocs() - before) as f64 / n as f64
    });
    assert!(out[0] <= PER_ONE_SHOT as f64, "{} allocations per one-shot allreduce", out[0]);
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
