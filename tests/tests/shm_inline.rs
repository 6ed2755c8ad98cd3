//! The shm TL's small-message protocol (`tl/src/shm/inline.rs`, issue 10):
//! payloads of up to ~8 KiB travel beside their epoch's tag in an inline
//! region, larger ones through the data halves, and a rank skips reading a
//! peer's `done` when that peer's earlier counters already proved it
//! (`epoch.rs`). Sizes on both sides of the inline capacity, collectives
//! that read every rank and ones that read only the root (alltoall,
//! scatter and reduce-scatter with a whole buffer inline), in place and
//! not, and barriers in
//! between, one after the other on the same team: a half reused too early
//! or a payload read before it is there gives wrong values here.

use std::time::Duration;

use ferrocoll::core::args::{block_count, block_offset};
use ferrocoll::{Coll, Config, ReduceOp, Status, Team};
use ferrocoll_tests::world;

/// Long enough never to fire in a healthy run; a regression fails instead of hanging.
const T: Duration = Duration::from_secs(30);

/// Bytes per rank: below, at and above the inline capacity (8 288 bytes
/// today, 4 192 before; the test checks values, whichever path each size
/// takes).
const SIZES: [usize; 8] = [4, 8, 256, 4192, 8288, 8292, 8320, 16384];

fn on_shm<R: Send + 'static>(ranks: usize, f: impl Fn(&Team) -> R + Send + Sync + 'static) -> Vec<R> {
    let mut c = Config::new();
    c.set("TLS", "shm,self");
    world::run(ranks, &c, move |team, _| f(team))
}

/// What rank `r` contributes in iteration `i` at element `k`.
fn value(r: usize, i: usize, k: usize) -> u32 {
    (r as u32 + 1) * 1000 + (i as u32 % 97) * 7 + k as u32 % 13
}

/// One iteration of every data collective at `bytes` per rank, checked.
fn round(team: &Team, i: usize, bytes: usize) -> ferrocoll::Result<()> {
    let (p, me) = (team.size(), team.rank());
    let n = bytes / 4;
    let root = i % p;
    let mine: Vec<u32> = (0..n).map(|k| value(me, i, k)).collect();
    let sum = |k: usize| (0..p).map(|r| value(r, i, k)).sum::<u32>();
    let wrong = |what: &str| Err(ferrocoll::Error::internal(format!("iteration {i}, {bytes} B: wrong {what}")));

    let mut out = vec![0u32; n];
    Coll::allreduce(&mine, &mut out, ReduceOp::Sum).timeout(T).run(team)?;
    if (0..n).any(|k| out[k] != sum(k)) {
        return wrong("allreduce");
    }
    let mut buf: Vec<u32> = if me == root { mine.clone() } else { vec![0; n] };
    Coll::bcast(&mut buf, root).timeout(T).run(team)?;
    if (0..n).any(|k| buf[k] != value(root, i, k)) {
        return wrong("bcast");
    }
    let mut red = vec![0u32; n];
    Coll::reduce(&mine, (me == root).then_some(&mut red[..]), ReduceOp::Sum, root).timeout(T).run(team)?;
    if me == root && (0..n).any(|k| red[k] != sum(k)) {
        return wrong("reduce");
    }
    if i.is_multiple_of(3) {
        Coll::barrier().timeout(T).run(team)?;
    }
    let mut all = vec![0u32; n * p];
    Coll::allgather(&mine, &mut all).timeout(T).run(team)?;
    if (0..p).any(|r| (0..n).any(|k| all[r * n + k] != value(r, i, k))) {
        return wrong("allgather");
    }
    // Alltoall and scatter publish a giver's whole buffer, one n-element
    // block per rank: inline up to a smaller n. Every other iteration in place.
    let block = |r: usize, j: usize| (0..n).map(move |k| value(r, i, k) + j as u32 * 100_000);
    let given: Vec<u32> = (0..p).flat_map(|j| block(me, j)).collect();
    let mut swapped = if i.is_multiple_of(2) { given.clone() } else { vec![0u32; n * p] };
    if i.is_multiple_of(2) {
        Coll::alltoall_in_place(&mut swapped).timeout(T).run(team)?;
    } else {
        Coll::alltoall(&given, &mut swapped).timeout(T).run(team)?;
    }
    if !(0..p).flat_map(|g| block(g, me)).eq(swapped.iter().copied()) {
        return wrong("alltoall");
    }
    let mut scattered = vec![0u32; n];
    if me == root && i.is_multiple_of(2) {
        Coll::scatter_in_place_at_root(&given, root).timeout(T).run(team)?;
        scattered.copy_from_slice(&given[me * n..(me + 1) * n]);
    } else {
        Coll::scatter((me == root).then_some(&given[..]), &mut scattered, root).timeout(T).run(team)?;
    }
    if !block(root, me).eq(scattered.iter().copied()) {
        return wrong("scatter");
    }
    // Reduce-scatter publishes a rank's whole vector: block r of the sum
    // lands on rank r; in place (every other iteration) the vector may not
    // split evenly.
    let total = if i.is_multiple_of(2) { n * p + i % p } else { n * p };
    let vector: Vec<u32> = (0..total).map(|k| value(me, i, k)).collect();
    let (off, len) = (block_offset(total, p, me), block_count(total, p, me));
    let mut reduced = vector.clone();
    if i.is_multiple_of(2) {
        Coll::reduce_scatter_in_place(&mut reduced, ReduceOp::Sum).timeout(T).run(team)?;
    } else {
        Coll::reduce_scatter(&vector, &mut reduced[off..off + len], ReduceOp::Sum).timeout(T).run(team)?;
    }
    if (0..len).any(|k| reduced[off + k] != sum(off + k)) {
        return wrong("reduce_scatter");
    }
    // Reduce-scatterv: the same, with counts uneven on purpose (rank r's
    // block 2rn/p elements, rank 0's empty; inline up to a smaller n).
    let counts: Vec<u32> = (0..p).map(|r| (2 * r * n / p) as u32).collect();
    let starts: Vec<usize> = counts.iter().scan(0, |at, &c| Some(std::mem::replace(at, *at + c as usize))).collect();
    let total_v = counts.iter().sum::<u32>() as usize;
    let (off, len) = (starts[me], counts[me] as usize);
    let vector: Vec<u32> = (0..total_v).map(|k| value(me, i, k)).collect();
    let mut reduced = vector.clone();
    if i.is_multiple_of(2) {
        Coll::reduce_scatterv_in_place(&mut reduced, &counts, ReduceOp::Sum).timeout(T).run(team)?;
    } else {
        Coll::reduce_scatterv(&vector, &mut reduced[off..off + len], &counts, ReduceOp::Sum).timeout(T).run(team)?;
    }
    if (0..len).any(|k| reduced[off + k] != sum(off + k)) {
        return wrong("reduce_scatterv");
    }
    let mut gathered = vec![0u32; n * p];
    Coll::gather(&mine, (me == root).then_some(&mut gathered[..]), root).timeout(T).run(team)?;
    if me == root && (0..p).any(|r| (0..n).any(|k| gathered[r * n + k] != value(r, i, k))) {
        return wrong("gather");
    }
    Ok(())
}

#[test]
fn sizes_on_both_sides_of_the_inline_capacity_in_turn_give_right_values() {
    for ranks in [2, 3, 4] {
        let out = on_shm(ranks, |team| {
            for i in 0..120 {
                round(team, i, SIZES[i % SIZES.len()])?;
            }
            Ok::<(), ferrocoll::Error>(())
        });
        for (rank, r) in out.iter().enumerate() {
            assert!(r.is_ok(), "{ranks} ranks, rank {rank}: {r:?}");
        }
    }
}

#[test]
fn a_call_that_fits_inline_against_one_that_does_not_fails_naming_both() {
    // 100 floats go inline, 2000 through the data halves: each rank waits on
    // a different counter of the other, and both must still say the calls
    // differ, not wait for their timeout.
    let out = on_shm(2, |team| {
        let n = if team.rank() == 0 { 100 } else { 2000 };
        let (src, mut dst) = (vec![1.0f32; n], vec![0.0f32; n]);
        Coll::allreduce(&src, &mut dst, ReduceOp::Sum).timeout(T).run(team)
    });
    for (rank, r) in out.iter().enumerate() {
        let e = r.as_ref().expect_err("mismatched counts must not succeed");
        assert_eq!(e.status(), Status::InvalidParam, "rank {rank}: {e}");
        let text = e.to_string();
        assert!(text.contains("calls differ"), "rank {rank}: {text}");
        assert!(text.contains("of 100 elements") && text.contains("of 2000 elements"), "rank {rank}: {text}");
    }
}

#[test]
fn an_alltoall_that_fits_inline_against_one_that_does_not_fails_on_both_ranks() {
    // 2 floats a block go inline, 1200 through the data halves: rank 0 waits
    // for an inline tag that never comes, rank 1 for rank 0's part in the
    // halves; both must fail saying the calls differ, not wait for their timeout.
    let out = on_shm(2, |team| {
        let n = if team.rank() == 0 { 2 } else { 1200 };
        let (src, mut dst) = (vec![1.0f32; 2 * n], vec![0.0f32; 2 * n]);
        let started = std::time::Instant::now();
        let r = Coll::alltoall(&src, &mut dst).timeout(T).run(team);
        (r, started.elapsed())
    });
    for (rank, (r, took)) in out.iter().enumerate() {
        let e = r.as_ref().expect_err("mismatched counts must not succeed");
        assert!(*took < T / 2, "rank {rank} waited {took:?}: {e}");
        assert_eq!(e.status(), Status::InvalidParam, "rank {rank}: {e}");
        let text = e.to_string();
        assert!(text.contains("calls differ"), "rank {rank}: {text}");
        assert!(
            text.contains("alltoall of 16 bytes") && text.contains("alltoall of 9600 bytes"),
            "rank {rank}: {text}"
        );
    }
}

/// A giver that reads nobody's payload (a bcast's root, a reduce's or a
/// gather's other ranks) completes its calls while its readers have not
/// posted theirs yet, up to the inline regions' depth (8 per rank,
/// `tl/src/shm/layout.rs::INLINE_DEPTH`; this test goes 4 ahead); the
/// readers then find every payload, each its own. With two regions, as
/// before, the giver's third call waited for the reader, and timed out here.
#[test]
fn givers_run_ahead_of_readers_that_have_not_posted_yet() {
    const AHEAD: usize = 4;
    const GIVER_T: Duration = Duration::from_secs(10);
    let posted = std::sync::Arc::new(std::sync::Barrier::new(2));
    let out = on_shm(2, move |team| {
        let me = team.rank();
        let wrong = |what: &str, i: usize| Err(ferrocoll::Error::internal(format!("{what} {i}: wrong values")));
        let give = |phase: usize, i: usize| {
            let mine: Vec<u32> = (0..8).map(|k| value(0, i, k)).collect();
            match phase {
                0 => Coll::bcast(&mut mine.clone(), 0).timeout(GIVER_T).run(team),
                1 => Coll::reduce(&mine, None, ReduceOp::Sum, 1).timeout(GIVER_T).run(team),
                _ => Coll::gather(&mine, None, 1).timeout(GIVER_T).run(team),
            }
        };
        let read = |phase: usize, i: usize| {
            let mine: Vec<u32> = (0..8).map(|k| value(1, i, k)).collect();
            let mut got = [0u32; 16];
            let ok = match phase {
                0 => {
                    Coll::bcast(&mut got[..8], 0).timeout(T).run(team)?;
                    (0..8).all(|k| got[k] == value(0, i, k))
                }
                1 => {
                    Coll::reduce(&mine, Some(&mut got[..8]), ReduceOp::Sum, 1).timeout(T).run(team)?;
                    (0..8).all(|k| got[k] == value(0, i, k) + value(1, i, k))
                }
                _ => {
                    Coll::gather(&mine, Some(&mut got[..]), 1).timeout(T).run(team)?;
                    (0..2).all(|r| (0..8).all(|k| got[r * 8 + k] == value(r, i, k)))
                }
            };
            if ok { Ok(()) } else { wrong(["bcast", "reduce", "gather"][phase], i) }
        };
        // Bcast from rank 0, then reduce and gather to rank 1: rank 0 gives
        // AHEAD calls of each, then rank 1 reads them.
        for phase in 0..3 {
            let r = if me == 0 { (0..AHEAD).try_for_each(|i| give(phase, i)) } else { Ok(()) };
            // Reached whatever happened above, so that no rank waits here forever.
            posted.wait();
            r?;
            if me == 1 {
                (0..AHEAD).try_for_each(|i| read(phase, i))?;
            }
            posted.wait();
        }
        Ok::<(), ferrocoll::Error>(())
    });
    for (rank, r) in out.iter().enumerate() {
        assert!(r.is_ok(), "rank {rank}: {r:?}");
    }
}

/// Rooted collectives back to back, in runs of 12 calls of one kind with
/// one root (so that the givers — the root of a bcast, the others of a
/// reduce or gather — run as far ahead as the inline regions let them,
/// past the readers that nap now and then), with bcasts too large for an
/// inline region (through the data halves) and barriers between runs: an
/// inline region or a signature slot written again before its last reader
/// finished gives wrong values or a false "calls differ" here.
#[test]
fn rooted_collectives_back_to_back_with_lagging_readers_give_right_values() {
    for ranks in [2, 3, 4] {
        let out = on_shm(ranks, move |team| {
            let (p, me) = (team.size(), team.rank());
            for i in 0..600 {
                let (run, root) = (i / 12, (i / 48) % p);
                let reads = match run % 4 {
                    0 => me != root,
                    _ => me == root,
                };
                if reads && i % 12 == 1 + me % 5 {
                    std::thread::sleep(Duration::from_micros(300));
                }
                let n = 1 + i % 40;
                let wrong =
                    |what: &str| Err(ferrocoll::Error::internal(format!("call {i}, {n} elements: wrong {what}")));
                let mine: Vec<u32> = (0..n).map(|k| value(me, i, k)).collect();
                match run % 4 {
                    0 => {
                        let mut buf = if me == root { mine.clone() } else { vec![0; n] };
                        Coll::bcast(&mut buf, root).timeout(T).run(team)?;
                        if (0..n).any(|k| buf[k] != value(root, i, k)) {
                            return wrong("bcast");
                        }
                    }
                    1 => {
                        let mut red = vec![0u32; n];
                        let out = (me == root).then_some(&mut red[..]);
                        Coll::reduce(&mine, out, ReduceOp::Sum, root).timeout(T).run(team)?;
                        if me == root && (0..n).any(|k| red[k] != (0..p).map(|r| value(r, i, k)).sum::<u32>()) {
                            return wrong("reduce");
                        }
                    }
                    2 => {
                        let mut all = vec![0u32; n * p];
                        Coll::gather(&mine, (me == root).then_some(&mut all[..]), root).timeout(T).run(team)?;
                        if me == root && (0..p).any(|r| (0..n).any(|k| all[r * n + k] != value(r, i, k))) {
                            return wrong("gather");
                        }
                    }
                    _ => {
                        // Between runs: through the halves, inline, and a barrier.
                        let n = if i % 2 == 0 { 1024 } else { n };
                        let mut buf: Vec<u32> =
                            if me == root { (0..n).map(|k| value(me, i, k)).collect() } else { vec![0; n] };
                        Coll::bcast(&mut buf, root).timeout(T).run(team)?;
                        if (0..n).any(|k| buf[k] != value(root, i, k)) {
                            return wrong("bcast between runs");
                        }
                        if i % 3 == 0 {
                            Coll::barrier().timeout(T).run(team)?;
                        }
                    }
                }
            }
            Ok::<(), ferrocoll::Error>(())
        });
        for (rank, r) in out.iter().enumerate() {
            assert!(r.is_ok(), "{ranks} ranks, rank {rank}: {r:?}");
        }
    }
}

/// A bcast's root, which waits for nobody, learns within its next two
/// calls that a reader's collective failed (here: the reader posted a
/// barrier), and fails naming it, rather than go on completing calls
/// nobody reads.
#[test]
fn a_root_running_ahead_fails_once_a_reader_failed() {
    let failed = std::sync::Arc::new(std::sync::Barrier::new(2));
    let out = on_shm(2, move |team| {
        let mut buf = [7u32; 4];
        if team.rank() == 1 {
            let r = Coll::barrier().timeout(T).run(team);
            failed.wait();
            return vec![r];
        }
        let first = Coll::bcast(&mut buf, 0).timeout(T).run(team);
        failed.wait();
        let mut out = vec![first];
        for _ in 0..2 {
            out.push(Coll::bcast(&mut buf, 0).timeout(T).run(team));
        }
        out
    });
    let reader = out[1][0].as_ref().expect_err("a barrier against a bcast must fail");
    assert!(reader.to_string().contains("calls differ"), "{reader}");
    let root = &out[0];
    assert!(root[0].is_ok(), "the first bcast's root read nothing: {:?}", root[0]);
    let e = root[1..].iter().find_map(|r| r.as_ref().err()).expect("the root must fail within two calls");
    assert!(e.to_string().contains("rank 1"), "{e}");
}

/// A rank that finished its calls and destroyed its team is no failure for
/// the ranks still running theirs: of a bcast's readers, which wait for
/// the root only, one starts its last call after another finished that
/// call and left. It used to fail, taking the leaver for a failed rank.
#[test]
fn a_reader_that_finished_and_left_is_no_failure_for_a_slower_one() {
    use ferrocoll::TeamParams;
    const CALLS: usize = 3;
    let left = std::sync::Arc::new(std::sync::Barrier::new(2));
    let mut c = Config::new();
    c.set("TLS", "shm,self");
    let out = world::run(3, &c, move |_world, ctx| {
        let team = Team::create(ctx, TeamParams::default())?;
        let me = team.rank();
        let bcast = |i: usize| {
            let mut buf: Vec<u32> = if me == 0 { (0..8).map(|k| value(0, i, k)).collect() } else { vec![0; 8] };
            Coll::bcast(&mut buf, 0).timeout(T).run(&team)?;
            if (0..8).any(|k| buf[k] != value(0, i, k)) {
                return Err(ferrocoll::Error::internal(format!("bcast {i}: wrong values")));
            }
            Ok(())
        };
        (0..CALLS - 1).try_for_each(bcast)?;
        match me {
            0 => bcast(CALLS - 1),
            1 => {
                left.wait();
                bcast(CALLS - 1)
            }
            _ => {
                let r = bcast(CALLS - 1);
                drop(team);
                left.wait();
                r
            }
        }
    });
    for (rank, r) in out.iter().enumerate() {
        assert!(r.is_ok(), "rank {rank}: {r:?}");
    }
}

/// Calls that differ after a long run of inline calls still fail: an
/// inline epoch leaves its control line alone, so a rank that waits on a
/// peer's control line (its call goes through the data halves) may find
/// a signature slot signed long ago — 256 epochs ago it would carry the
/// same epoch byte, and here the same call. The slot is signed again at
/// least every 128 epochs (`epoch.rs`), so the wait says the ranks are
/// out of step rather than read a half written 256 epochs ago.
#[test]
fn calls_that_differ_after_a_long_run_of_inline_calls_still_fail() {
    const SMALL: usize = 4;
    const LARGE: usize = 2048;
    let out = on_shm(2, |team| {
        let me = team.rank();
        let bcast = |n: usize, i: usize| {
            let mut buf: Vec<u32> = if me == 0 { (0..n).map(|k| value(0, i, k)).collect() } else { vec![0; n] };
            Coll::bcast(&mut buf, 0).timeout(T).run(team).map(|()| buf)
        };
        // One call through the halves, then 255 inline ones: the next
        // epoch is 256 after the one whose slot the large call signed.
        bcast(LARGE, 0)?;
        for i in 1..256 {
            bcast(SMALL, i)?;
        }
        if me == 0 {
            // An inline call here, then a call through the halves that
            // publishes `arrive` past the epoch rank 1 waits in.
            bcast(SMALL, 256)?;
            bcast(LARGE, 257).map(|_| None)
        } else {
            bcast(LARGE, 256).map(Some)
        }
    });
    let got = out[1].as_ref().map(|b| b.as_ref().map(|b| b[..4].to_vec()));
    let e = out[1].as_ref().expect_err(&format!("rank 1's call differs from rank 0's and must fail, got {got:?}"));
    assert_eq!(e.status(), Status::InvalidParam, "{e}");
    assert!(e.to_string().contains("out of step") || e.to_string().contains("calls differ"), "{e}");
}
