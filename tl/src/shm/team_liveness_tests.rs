//! A member that dies while the team is made, or before it wrote its pid
//! into its control line, is found by the pid its context announced
//! (`TeamSetup::pids`), and named, instead of being waited for until a
//! timeout (none by default).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use ferrocoll_core::Result;
use ferrocoll_core::backend::McSet;
use ferrocoll_core::config::Config;

use super::ShmConfig;
use super::epoch::Flag;
use super::segment::Segment;
use super::team::{ShmTeam, TeamSetup};
use super::test_support::poll_to_end;

/// The pid of a process that has exited (and been reaped).
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().expect("spawn true");
    let pid = child.id();
    child.wait().expect("wait for true");
    pid
}

fn setup(test: &str, pids: Vec<u32>) -> TeamSetup {
    let name = Segment::name(&format!("shmtl-{test}{}", std::process::id()), 0x2a, 0xcd, "p1t2n3");
    TeamSetup { name, cookie: 0xcd, oversubscribed: false, pids, probed: Default::default() }
}

fn create(test: &str, pids: Vec<u32>, rank: usize) -> impl Future<Output = Result<Arc<ShmTeam>>> {
    let size = pids.len();
    let config = ShmConfig::from_config(&Config::new()).expect("default config");
    ShmTeam::create_shared(setup(test, pids), rank, size, McSet::default(), config)
}

/// Rank 0's creation of the team `test`, polled once: its segment exists
/// when this returns, before the creator has looked at any member's
/// liveness. (Left to a thread, the creator could check before the test
/// had mapped the segment as a member: on a loaded machine it then failed
/// naming a member that had not attached yet, and unlinked the segment.)
fn creator_with_segment(test: &str, pids: Vec<u32>) -> Pin<Box<dyn Future<Output = Result<Arc<ShmTeam>>> + Send + '_>> {
    let mut creator = Box::pin(create(test, pids, 0));
    let first = creator.as_mut().poll(&mut Context::from_waker(Waker::noop()));
    assert!(matches!(first, Poll::Pending), "the creator finished at its first poll");
    creator
}

/// The segment of team `test` of `size` ranks, mapped as a member would
/// (counted as attached).
fn map_as_member(test: &str, size: usize) -> Segment {
    let name = setup(test, vec![]).name;
    Segment::open(&name, size, 0xcd).expect("open").expect("the creator made the segment")
}

#[test]
fn a_member_that_died_after_attaching_but_before_writing_its_pid_is_named() {
    let (me, dead) = (std::process::id(), dead_pid());
    let pids = vec![me, me, dead];
    let creator = creator_with_segment("nopid", pids.clone());
    // Rank 2 maps the segment (counted as attached) and is gone before it
    // writes its pid.
    drop(map_as_member("nopid", 3));
    let (t0, t1) = std::thread::scope(|s| {
        let r0 = s.spawn(|| poll_to_end(creator));
        let r1 = s.spawn(|| poll_to_end(create("nopid", pids.clone(), 1)));
        (r0.join().unwrap().expect("rank 0"), r1.join().unwrap().expect("rank 1"))
    });
    for t in [t0, t1] {
        let e = poll_to_end(t.wait(Flag::Arrive, &[2], 1)).expect_err("rank 2 never arrives").to_string();
        assert!(e.contains(&format!("rank 2 (pid {dead}) died")), "{e}");
    }
}

#[test]
fn a_member_that_died_before_attaching_fails_the_creator_naming_it() {
    let (me, dead) = (std::process::id(), dead_pid());
    let e = poll_to_end(create("noattach", vec![me, dead], 0)).err().expect("rank 1 never attaches").to_string();
    assert!(e.contains(&format!("rank 1 (pid {dead}) died before attaching")), "{e}");
}

#[test]
fn a_creator_that_died_fails_the_members_naming_it() {
    let (me, dead) = (std::process::id(), dead_pid());
    let e = poll_to_end(create("nocreator", vec![dead, me], 1)).err().expect("rank 0 never creates").to_string();
    assert!(e.contains(&format!("rank 0 (pid {dead}) died before creating")), "{e}");
}

#[test]
fn a_creator_names_the_member_that_never_attached_before_one_that_left_after() {
    // Rank 2 was killed at start-up and never attached; rank 1 attached,
    // then failed because of rank 2 and exited. Rank 0 names rank 2, the
    // cause, though rank 1 is gone too and comes first by number.
    let (me, left, killed) = (std::process::id(), dead_pid(), dead_pid());
    let pids = vec![me, left, killed];
    let creator = creator_with_segment("cause", pids);
    let seg = map_as_member("cause", 3);
    seg.ctrl(1).expect("rank 1's control line").pid.store(u64::from(left), std::sync::atomic::Ordering::Relaxed);
    let e = poll_to_end(creator).err().expect("rank 2 never attaches").to_string();
    assert!(e.contains(&format!("rank 2 (pid {killed}) died before attaching")), "{e}");
}

#[test]
fn a_member_that_died_while_timing_staging_is_named_by_the_creator_and_the_others() {
    // Rank 1 attached and died before it timed staging's copies out with
    // rank 0 ("auto" single-copy threshold, `staging_probe.rs`): rank 0
    // names it, and rank 2, waiting for the threshold, learns it from rank 0.
    if !staging_is_timed_here() {
        return;
    }
    let (me, dead) = (std::process::id(), dead_pid());
    let pids = vec![me, dead, me];
    let creator = creator_with_segment("probe-dead", pids.clone());
    let rank_1 = map_as_member("probe-dead", 3);
    let (e0, e2) = std::thread::scope(|s| {
        let r0 = s.spawn(|| poll_to_end(creator));
        let r2 = s.spawn(|| poll_to_end(create("probe-dead", pids.clone(), 2)));
        (r0.join().unwrap().err().expect("rank 0"), r2.join().unwrap().err().expect("rank 2"))
    });
    assert!(e0.to_string().contains(&format!("rank 1 (pid {dead}) died before timing staging")), "{e0}");
    assert!(e2.to_string().contains("rank 0 stopped taking part because of rank 1"), "{e2}");
    let left = rank_1.ctrl(0).expect("rank 0's control line").left.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(left, super::segment::FAILED | 2 << super::segment::CAUSE_SHIFT, "rank 0 blames rank 1");
}

/// Whether rank 0 times staging with rank 1 on this host: only where it
/// may read memory by cross-memory attach (single copy is never chosen
/// elsewhere, so neither is staging timed); else says the test skipped.
fn staging_is_timed_here() -> bool {
    let here = super::crossover::measure(4096).is_some();
    if !here {
        eprintln!("skipped: this host refuses process_vm_readv, so rank 0 times no staging with rank 1");
    }
    here
}

/// Poll `creator` until it has handed rank 1 its first round to time (the
/// probe's turn, seen through `view`).
fn until_timing(creator: &mut Pin<Box<dyn Future<Output = Result<Arc<ShmTeam>>> + Send + '_>>, view: &Segment) {
    let turn = &view.probe_cells().expect("the probe's cells").turn;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while turn.load(std::sync::atomic::Ordering::Acquire) == 0 {
        assert!(std::time::Instant::now() < deadline, "rank 0 never started timing");
        let polled = creator.as_mut().poll(&mut Context::from_waker(Waker::noop()));
        assert!(matches!(polled, Poll::Pending), "rank 0 finished without rank 1's rounds");
    }
}

#[test]
fn a_creation_given_up_while_timing_staging_stops_the_others() {
    use std::sync::atomic::Ordering;
    // Rank 0's creation dropped (its team destroyed, or failed on another
    // TL) while it times staging: the member waiting for its threshold
    // stops, instead of waiting for a figure that never comes.
    if !staging_is_timed_here() {
        return;
    }
    let me = std::process::id();
    let mut creator = creator_with_segment("probe-drop0", vec![me, me]);
    let mut rank_1 = map_as_member("probe-drop0", 2);
    until_timing(&mut creator, &rank_1);
    drop(creator);
    assert_eq!(rank_1.ctrl(0).unwrap().left.load(Ordering::Relaxed), super::segment::LEFT, "marked as it went");
    let e = poll_to_end(super::staging_probe::await_threshold(&mut rank_1, 1, me)).expect_err("no threshold comes");
    assert!(e.to_string().contains("rank 0 left the team"), "{e}");

    // Rank 1's given up (marked LEFT as above) while rank 0 waits for its
    // copy out: rank 0 stops, naming it.
    let mut creator = creator_with_segment("probe-drop1", vec![me, me]);
    let rank_1 = map_as_member("probe-drop1", 2);
    until_timing(&mut creator, &rank_1);
    rank_1.ctrl(1).unwrap().left.store(super::segment::LEFT, Ordering::Release);
    let e = poll_to_end(creator).err().expect("rank 1 never answers").to_string();
    assert!(e.contains("rank 1 left the team"), "{e}");
}
