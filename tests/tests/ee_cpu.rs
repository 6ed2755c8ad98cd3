//! Triggered post on the CPU execution engine: a collective posted with
//! `triggered_post(ee, ComputeComplete)` must not start before the user
//! sets that event, starts after, and reports `CollectivePost` then
//! `CollectiveComplete`; persistent requests are triggered again; a
//! trigger that never comes is a timeout that names it; bad inputs are
//! errors that name the value.

use std::time::Duration;

use ferrocoll::{
    BufferInfo, CollArgs, CollBuffer, CollFlags, CollType, Config, Context, CpuEe, DataType, Ee, Event, EventType,
    MemType, ReduceOp, Request, Status, Team,
};
use ferrocoll_tests::world::{self, TEST_TIMEOUT};

const N: usize = 1000;
const POISON: i64 = i64::MIN + 12345;
const COMPUTE: Event = Event::new(EventType::ComputeComplete);

/// An allreduce (sum of i64) over raw buffers, so that the test can look at
/// the output between progress calls (which run on this thread only).
///
/// # Safety
/// `src` and `dst` must hold `N` elements and outlive the request.
unsafe fn allreduce(
    team: &Team,
    src: *const i64,
    dst: *mut i64,
    persistent: bool,
    timeout: Duration,
) -> Request<'static> {
    let info = |p: *const i64| {
        CollBuffer::Info(BufferInfo {
            buffer: p.cast_mut().cast(),
            count: N as u64,
            datatype: DataType::Int64,
            mem_type: MemType::Host,
        })
    };
    let mut args = CollArgs::new(CollType::Allreduce);
    args.src = info(src);
    args.dst = info(dst);
    args.op = ReduceOp::Sum;
    args.flags = CollFlags::TIMEOUT;
    if persistent {
        args.flags |= CollFlags::PERSISTENT;
    }
    args.timeout = timeout.as_secs_f64();
    // SAFETY: forwarded to our caller.
    unsafe { team.collective_init(&args) }.expect("allreduce init")
}

/// Rank `rank`'s input of round `round`, and the sum over `size` ranks.
fn input(rank: usize, round: usize, i: usize) -> i64 {
    (rank as i64 + 1) * 1_000_000 + (i * 7 + round) as i64
}

fn expected(size: usize, round: usize, i: usize) -> i64 {
    (0..size).map(|r| input(r, round, i)).sum()
}

/// Buffers that the test reads and writes only through raw pointers while a request uses them.
struct Bufs {
    src: Vec<i64>,
    dst: Vec<i64>,
}

impl Bufs {
    fn new() -> Bufs {
        Bufs { src: vec![0; N], dst: vec![POISON; N] }
    }

    /// Fill the input of `round` and poison the output (no request may be running).
    fn prepare(&mut self, rank: usize, round: usize) {
        for (i, s) in self.src.iter_mut().enumerate() {
            *s = input(rank, round, i);
        }
        self.dst.fill(POISON);
    }

    fn dst_now(&self) -> Vec<i64> {
        // SAFETY: N elements; progress (and with it the collective) runs only
        // on this thread, so nothing writes them while we read.
        (0..N).map(|i| unsafe { std::ptr::read_volatile(self.dst.as_ptr().add(i)) }).collect()
    }
}

/// Progress for a while and check that the triggered request has not started.
fn assert_not_started(req: &Request<'_>, ctx: &Context, ee: &CpuEe, bufs: &Bufs, what: &str) {
    for i in 0..400 {
        ctx.progress().expect("progress");
        assert_eq!(req.test().expect("test"), Status::InProgress, "{what}: finished before its trigger");
        if i % 100 == 0 {
            // Give the other ranks time to run ahead with their own collectives.
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    assert!(bufs.dst_now().iter().all(|&v| v == POISON), "{what}: output written before the trigger");
    assert_eq!(ee.get_event(), None, "{what}: an event before the trigger");
}

/// The two events of one triggered post, in order, acknowledged.
fn assert_events(ee: &CpuEe, id: u64, what: &str) {
    let post = ee.get_event().unwrap_or_else(|| panic!("{what}: no CollectivePost"));
    assert_eq!(post, Event::with_request(EventType::CollectivePost, id), "{what}");
    ee.ack_event(&post).expect("ack post");
    let done = ee.wait(Duration::from_secs(5)).unwrap_or_else(|e| panic!("{what}: no CollectiveComplete: {e}"));
    assert_eq!(done, Event::with_request(EventType::CollectiveComplete, id), "{what}");
    ee.ack_event(&done).expect("ack complete");
    assert_eq!(ee.get_event(), None, "{what}: a third event");
}

fn check_output(bufs: &Bufs, size: usize, round: usize, what: &str) {
    for (i, &v) in bufs.dst.iter().enumerate() {
        assert_eq!(v, expected(size, round, i), "{what}: element {i}");
    }
}

/// One triggered allreduce per rank (persistent: `rounds` of them).
fn triggered_rounds(team: &Team, ctx: &Context, rounds: usize, what: &str) {
    let (rank, size) = (team.rank(), team.size());
    let ee = CpuEe::new();
    let mut bufs = Bufs::new();
    let (src, dst) = (bufs.src.as_ptr(), bufs.dst.as_mut_ptr());
    // SAFETY: the buffers outlive the request (dropped at the end of this function, before `bufs`).
    let mut req = unsafe { allreduce(team, src, dst, rounds > 1, TEST_TIMEOUT) };
    for round in 0..rounds {
        let what = format!("{what}, rank {rank} of {size}, round {round}");
        bufs.prepare(rank, round);
        req.triggered_post(&ee, &COMPUTE).expect("triggered_post");
        assert_not_started(&req, ctx, &ee, &bufs, &what);
        ee.set_event(COMPUTE).expect("set_event");
        req.wait().unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_events(&ee, req.id(), &what);
        check_output(&bufs, size, round, &what);
    }
    assert_eq!(ee.pending_events(), 0);
}

#[test]
fn a_triggered_allreduce_starts_only_after_set_event() {
    for size in [1, 2, 3] {
        world::run(size, &Config::new(), |team, ctx| triggered_rounds(team, ctx, 1, "default TLs"));
    }
    for size in [2, 3] {
        let c = world::pin(CollType::Allreduce, "knomial");
        world::run(size, &c, |team, ctx| triggered_rounds(team, ctx, 1, "p2p knomial"));
    }
}

#[test]
fn a_persistent_request_is_triggered_again() {
    for size in [1, 2, 4] {
        world::run(size, &Config::new(), |team, ctx| triggered_rounds(team, ctx, 3, "persistent"));
    }
    world::run(3, &world::pin(CollType::Allreduce, "ring"), |team, ctx| triggered_rounds(team, ctx, 3, "p2p ring"));
}

#[test]
fn an_event_set_before_the_post_starts_it_at_once_and_tags_select() {
    world::run(2, &Config::new(), |team, ctx| {
        let ee = CpuEe::new();
        let mut bufs = Bufs::new();
        bufs.prepare(team.rank(), 0);
        let (src, dst) = (bufs.src.as_ptr(), bufs.dst.as_mut_ptr());
        // Kept, then taken by the post below: tag 0 in the post takes any tag.
        ee.set_event(Event::with_request(EventType::ComputeComplete, 99)).expect("set");
        // SAFETY: the buffers outlive the request.
        let mut req = unsafe { allreduce(team, src, dst, true, TEST_TIMEOUT) };
        req.triggered_post(&ee, &COMPUTE).expect("triggered_post");
        req.wait().expect("wait");
        assert_events(&ee, req.id(), "event set first");
        check_output(&bufs, 2, 0, "event set first");
        // A post waiting for tag 7 ignores tag 8 and other types.
        bufs.prepare(team.rank(), 1);
        req.triggered_post(&ee, &Event::with_request(EventType::ComputeComplete, 7)).expect("triggered_post");
        ee.set_event(Event::with_request(EventType::ComputeComplete, 8)).expect("set");
        ee.set_event(Event::with_request(EventType::CollectivePost, 7)).expect("set");
        assert_not_started(&req, ctx, &ee, &bufs, "tag 7");
        ee.set_event(Event::with_request(EventType::ComputeComplete, 7)).expect("set");
        req.wait().expect("wait");
        assert_events(&ee, req.id(), "tag 7");
        check_output(&bufs, 2, 1, "tag 7");
        assert_eq!(ee.pending_events(), 2, "the two events nobody waited for are kept");
    });
}

#[test]
fn a_trigger_that_never_comes_times_out_and_names_it() {
    let results = world::run(2, &Config::new(), |team, _| {
        let ee = CpuEe::new();
        let mut bufs = Bufs::new();
        let (src, dst) = (bufs.src.as_ptr(), bufs.dst.as_mut_ptr());
        // SAFETY: the buffers outlive the request.
        let mut req = unsafe { allreduce(team, src, dst, false, Duration::from_millis(300)) };
        req.triggered_post(&ee, &Event::with_request(EventType::ComputeComplete, 42)).expect("triggered_post");
        let err = req.wait().expect_err("a trigger never set must time out");
        // The end is reported, without a post.
        let ev = ee.get_event();
        let id = req.id();
        drop(req);
        bufs.dst.fill(0);
        (err.status(), err.to_string(), ev, id, ee.describe())
    });
    for (status, msg, ev, id, ee) in results {
        assert_eq!(status, Status::TimedOut, "{msg}");
        assert!(msg.contains("timed out after 0.300 s") && msg.contains("allreduce"), "{msg}");
        assert!(
            msg.contains("waiting for its trigger")
                && msg.contains("a ComputeComplete event with tag 42")
                && msg.contains(&ee),
            "{msg}"
        );
        assert_eq!(ev, Some(Event::with_request(EventType::CollectiveComplete, id)));
    }
}

#[test]
fn dropping_a_waiting_triggered_request_reports_it_and_gives_up_its_place() {
    world::run(1, &Config::new(), |team, ctx| {
        let ee = CpuEe::new();
        let mut bufs = Bufs::new();
        let (src, dst) = (bufs.src.as_ptr(), bufs.dst.as_mut_ptr());
        // SAFETY: the buffers outlive the request.
        let mut req = unsafe { allreduce(team, src, dst, false, TEST_TIMEOUT) };
        req.triggered_post(&ee, &COMPUTE).expect("triggered_post");
        assert_not_started(&req, ctx, &ee, &bufs, "dropped request");
        let id = req.id();
        drop(req);
        assert_eq!(ee.get_event(), Some(Event::with_request(EventType::CollectiveComplete, id)));
        // The dropped post no longer takes events.
        ee.set_event(COMPUTE).expect("set");
        assert_eq!(ee.pending_events(), 1);
        bufs.dst.fill(0);
    });
}

#[test]
fn bad_inputs_are_errors_that_name_the_value() {
    world::run(2, &Config::new(), |team, ctx| {
        let ee = CpuEe::new();
        let mut bufs = Bufs::new();
        bufs.prepare(team.rank(), 0);
        let (src, dst) = (bufs.src.as_ptr(), bufs.dst.as_mut_ptr());
        // SAFETY: the buffers outlive the request.
        let mut req = unsafe { allreduce(team, src, dst, false, TEST_TIMEOUT) };

        // An event no engine can trigger on; only rank 0 tries it, so a
        // sequence number taken by the refused post would make the next
        // allreduce mismatch and time out.
        if team.rank() == 0 {
            let e = req.triggered_post(&ee, &Event::new(EventType::Overflow)).expect_err("Overflow cannot trigger");
            assert_eq!(e.status(), Status::InvalidParam);
            assert!(e.context().contains("Overflow") && e.context().contains(&ee.describe()), "{e}");
            assert_eq!(req.test().expect("test"), Status::OperationInitialized);
        }
        req.triggered_post(&ee, &COMPUTE).expect("triggered_post");
        let e = req.triggered_post(&ee, &COMPUTE).expect_err("in progress");
        assert_eq!(e.status(), Status::InvalidParam);
        assert!(e.context().contains("still in progress") && e.context().contains("allreduce seq"), "{e}");
        ee.set_event(COMPUTE).expect("set");
        req.wait().expect("wait");
        check_output(&bufs, 2, 0, "after refused posts");
        let e = req.triggered_post(&ee, &COMPUTE).expect_err("not persistent");
        assert!(e.context().contains("not persistent"), "{e}");
        req.finalize().expect("finalize");
        let e = req.triggered_post(&ee, &COMPUTE).expect_err("finalized");
        assert!(e.context().contains("finalized"), "{e}");

        // Events: Overflow cannot be set; an ack needs an event to ack.
        let e = ee.set_event(Event::new(EventType::Overflow)).expect_err("Overflow cannot be set");
        assert_eq!(e.status(), Status::InvalidParam);
        assert!(e.context().contains("Overflow"), "{e}");
        while let Some(ev) = ee.get_event() {
            ee.ack_event(&ev).expect("ack");
        }
        let stray = Event::with_request(EventType::CollectiveComplete, 5);
        let e = ee.ack_event(&stray).expect_err("nothing to ack");
        assert!(e.context().contains("CollectiveComplete (request 5)"), "{e}");
        let e = ee.wait(Duration::from_millis(20)).expect_err("no event");
        assert_eq!(e.status(), Status::TimedOut);
        ctx.progress().expect("progress");
    });
}
