//! Single copy's agreements (`alg/single_copy.rs`), on teams of threads
//! made directly: a read the kernel cannot do sends every rank through the
//! segment for that call, a peer that cannot be proved turns single copy
//! off on every rank, lengths that differ fail every rank alike.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use ferrocoll_core::CollType::{Alltoall, Bcast};
use ferrocoll_core::args::Blocks;
use ferrocoll_core::{MemRef, MemType, Result};
use ferrocoll_transport::cma;

use super::alg::single_copy::{Offer, Outcome, single_copy};
use super::team::ShmTeam;
use super::test_support::poll_to_end;

/// A team of `size` threads of this process, one `ShmTeam` per rank.
fn teams(test: &str, size: usize) -> Vec<Arc<ShmTeam>> {
    super::test_support::threads(&format!("sc-{test}"), size)
}

/// Run `f(rank, team)` on every rank at once; each rank's result.
fn on_every_rank<T: Send>(teams: &[Arc<ShmTeam>], f: impl Fn(usize, &ShmTeam) -> T + Sync) -> Vec<T> {
    std::thread::scope(|s| {
        let handles: Vec<_> = teams
            .iter()
            .enumerate()
            .map(|(r, t)| {
                let f = &f;
                s.spawn(move || f(r, t))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn mem(v: &mut [u8]) -> MemRef {
    // SAFETY: the vector outlives every collective of the test that uses it.
    unsafe { MemRef::from_mut_slice(v) }
}

/// Whether this host lets a process read itself with `process_vm_readv`
/// (qemu-user and some seccomp filters do not).
fn cma_here() -> bool {
    let word = 0x5eed_u64;
    cma::probe(std::process::id(), &word as *const u64 as u64, word).is_ok()
}

/// A bcast of 64 bytes from rank 0: what each rank's epoch came to, and its buffer.
fn bcast(teams: &[Arc<ShmTeam>], root_buf: impl Fn(MemRef) -> MemRef + Sync) -> Vec<(Result<Outcome>, Vec<u8>)> {
    on_every_rank(teams, |rank, team| {
        let mut buf = if rank == 0 { (0..64u8).collect() } else { vec![0u8; 64] };
        let m = mem(&mut buf);
        let (give, take) = if rank == 0 { (Some(Offer::One(root_buf(m))), None) } else { (None, Some((0, m))) };
        let outcome = poll_to_end(single_copy(team, Bcast, give, take.as_slice(), false, None));
        (outcome, buf)
    })
}

#[test]
fn every_rank_reads_its_block_straight_from_the_givers() {
    if !cma_here() {
        eprintln!("skipped: this host refuses process_vm_readv (every rank would go through the segment)");
        return;
    }
    let teams = teams("all", 3);
    let results = on_every_rank(&teams, |rank, team| {
        // Rank g's block for rank j: 100 * g + j, j + 1 bytes long.
        let blocks = Blocks::back_to_back(&[1, 2, 3], 1);
        let mut src: Vec<u8> = (0..3).flat_map(|j| vec![(100 * rank + j) as u8; j + 1]).collect();
        let mut dst: Vec<Vec<u8>> = (0..3).map(|_| vec![0u8; rank + 1]).collect();
        let take: Vec<_> = (0..3).filter(|&g| g != rank).map(|g| (g, mem(&mut dst[g]))).collect();
        // Its own block, copied while the others read (`agree`).
        let src_mem = mem(&mut src);
        let own = Some((mem(&mut dst[rank]), blocks.of(src_mem, rank).expect("own block")));
        let outcome =
            poll_to_end(single_copy(team, Alltoall, Some(Offer::PerRank(src_mem, &blocks)), &take, true, own));
        (outcome.expect("single copy"), dst)
    });
    for (rank, (outcome, dst)) in results.into_iter().enumerate() {
        assert_eq!(outcome, Outcome::Done, "rank {rank}");
        for (g, block) in dst.iter().enumerate() {
            assert_eq!(*block, vec![(100 * g + rank) as u8; rank + 1], "rank {rank}'s block from {g}");
        }
    }
}

#[test]
fn a_buffer_the_kernel_cannot_read_sends_every_rank_through_the_segment_for_that_call() {
    let teams = teams("unreadable", 2);
    let on = cma_here();
    // The root offers an address nothing is mapped at.
    let bogus = |m: MemRef| {
        // SAFETY: nothing dereferences it: the root only writes the address
        // into its table, and the reader's kernel refuses to read it.
        unsafe { MemRef::new(8 as *mut u8, m.len(), MemType::Host) }
    };
    for (rank, (outcome, _)) in bcast(&teams, bogus).into_iter().enumerate() {
        assert_eq!(outcome.expect("no error"), Outcome::Staged, "rank {rank}");
    }
    assert!(teams.iter().all(|t| t.reach.on() == on), "one unreadable buffer does not turn single copy off");
    if !on {
        eprintln!("skipped the second half: this host refuses process_vm_readv");
        return;
    }
    let results = bcast(&teams, |m| m);
    for (rank, (outcome, buf)) in results.into_iter().enumerate() {
        assert_eq!(outcome.expect("no error"), Outcome::Done, "rank {rank}: the next call copies once");
        assert_eq!(buf, (0..64u8).collect::<Vec<_>>(), "rank {rank}");
    }
}

#[test]
fn a_peer_that_cannot_be_proved_turns_single_copy_off_on_every_rank() {
    let teams = teams("unproved", 2);
    // Rank 0 says its cookie lies where nothing is mapped: rank 1 cannot
    // prove that the pid is rank 0's process.
    teams[0].seg.ctrl(0).unwrap().cookie_at.store(8, Ordering::Relaxed);
    for (rank, (outcome, _)) in bcast(&teams, |m| m).into_iter().enumerate() {
        assert_eq!(outcome.expect("no error"), Outcome::Staged, "rank {rank}");
    }
    assert!(teams.iter().all(|t| !t.reach.on()), "off on every rank, the giver's too");
}

#[test]
fn lengths_that_differ_fail_every_rank_alike() {
    let teams = teams("differ", 2);
    let results = on_every_rank(&teams, |rank, team| {
        let mut buf = vec![0u8; if rank == 0 { 64 } else { 32 }];
        let m = mem(&mut buf);
        let (give, take) = if rank == 0 { (Some(Offer::One(m)), None) } else { (None, Some((0, m))) };
        poll_to_end(single_copy(team, Bcast, give, take.as_slice(), false, None))
    });
    for (rank, r) in results.into_iter().enumerate() {
        let e = r.expect_err("lengths differ").to_string();
        assert!(e.contains("rank 1 takes 32 bytes from rank 0, which gives 64"), "rank {rank}: {e}");
    }
}

#[test]
fn a_giver_that_stopped_taking_part_fails_the_ranks_that_read_it() {
    let teams = teams("stopped", 2);
    // Rank 0's collective timed out or was cancelled as rank 1 read its
    // buffer: it marked itself failed before its caller could reuse it.
    teams[0].seg.ctrl(0).unwrap().left.store(super::segment::FAILED, Ordering::Release);
    let results = on_every_rank(&teams, |rank, team| {
        let mut buf = vec![rank as u8; 64];
        let m = mem(&mut buf);
        let (give, take) = if rank == 0 { (Some(Offer::One(m)), None) } else { (None, Some((0, m))) };
        let r = poll_to_end(single_copy(team, Bcast, give, take.as_slice(), false, None));
        if r.is_err() {
            team.break_team(); // what the post's turn does with a failure
        }
        r
    });
    let e = results[1].as_ref().expect_err("what rank 1 read is not rank 0's data").to_string();
    assert!(e.contains("rank 0 stopped taking part"), "{e}");
    assert!(results[0].is_err(), "rank 0 learns that rank 1 failed");
}
