//! TL/NCCL against the fake NCCL (`tests/fake_nccl/`, a test double of
//! `libnccl.so.2`) over the fake CUDA driver: the probe's refusals, the
//! communicator's life (created non-blocking and polled, finalized and
//! destroyed at team destruction, aborted only after an error), errors
//! naming the call and the rank, a collective that never completes timing
//! out with a message, the grouped send/receive fallback, the unique id
//! shared over the team's out-of-band path, the fallback to other TLs when
//! two ranks share a device, and graph capture (refused on the host-driven
//! path, captured on TL/NCCL's).
//!
//! Each test re-runs itself in a child process whose loader path starts
//! with the fakes (`ferrocoll_tests::fake_nccl`). None of this says that
//! TL/NCCL works with NCCL on a GPU (`gpu_nccl.rs` is for that); without
//! gcc the tests print that they skipped (a failure under `REQUIRE_FAKE_CUDA=1`).

mod gpu_support;
mod nccl_support;

use std::path::PathBuf;
use std::time::Duration;

use ferrocoll::{CollType, Config, CudaStreamEe, Event, EventType, Status, Team};
use ferrocoll_cuda::sys::driver as sys;
use ferrocoll_tests::cases::device_matrix;
use ferrocoll_tests::fake_cuda;
use ferrocoll_tests::fake_nccl::{self, counter};
use ferrocoll_tests::world;
use gpu_support::{DevBuf, Kind};
use nccl_support::{allreduce, allreduce_on_two_ranks, f32_bytes, f32s, run_case, two_ranks};

/// Which NCCL a scenario runs with.
enum Nccl {
    /// None on the loader path.
    Absent,
    /// The fake, without these entry points.
    Fake(&'static [&'static str]),
}

/// Run `child` in a child process on the fake driver and `nccl`, with `env`.
fn scenario(test: &str, nccl: Nccl, env: &[(&str, &str)], child: impl FnOnce()) {
    if fake_cuda::is_child() {
        child();
        fake_cuda::assert_fake_loaded(test);
        // A refused library is unloaded again; the refusal's message names the fake's version or gap.
        if let (Some(dir), Ok(_)) = (std::env::var_os("FAKE_NCCL_DIR"), ferrocoll::tl::nccl::available()) {
            fake_nccl::assert_fake_loaded(&PathBuf::from(dir));
        }
        return;
    }
    if let Err(why) = fake_cuda::fake() {
        return fake_cuda::skip(test, &why);
    }
    let dir = match nccl {
        Nccl::Absent => None,
        Nccl::Fake(hidden) => match fake_nccl::build(hidden) {
            Ok(d) => Some(d),
            Err(why) => return fake_cuda::skip(test, &why),
        },
    };
    let dir_s = dir.as_ref().map(|d| d.display().to_string());
    let mut env = env.to_vec();
    if let Some(d) = &dir_s {
        env.push(("FAKE_NCCL_DIR", d));
    }
    let run = fake_nccl::run(test, dir.as_deref(), &env).unwrap_or_else(|e| panic!("{e}"));
    let problems = run.report.teardown_problems();
    assert!(problems.is_empty(), "{test}: the fake driver was left with {}\n{}", problems.join(", "), run.output);
}

/// A one-rank world on device 0 (bound on its thread).
fn one_rank<R: Send + 'static>(f: impl Fn(&Team) -> R + Send + Sync + 'static) -> R {
    world::run(1, &Config::new(), move |team, _| {
        gpu_support::bind();
        f(team)
    })
    .pop()
    .expect("one rank")
}

/// An allreduce of 64 f32 on device memory: what served it, and the result or the error.
fn sum_once(team: &Team, timeout: Option<Duration>) -> (String, ferrocoll::Result<Vec<f32>>) {
    let input: Vec<f32> = (0..64).map(|i| i as f32 * 0.5).collect();
    let src = DevBuf::from_host(&f32_bytes(&input), Kind::Device);
    let dst = DevBuf::new(64 * 4, Kind::Device);
    dst.fill(0xcd);
    // SAFETY: both buffers hold 64 f32 and outlive the request (dropped at the end of this function).
    let mut req = unsafe { allreduce(team, &src, &dst, 64, timeout) }.expect("allreduce init");
    let selected = req.selected().to_string();
    let res = req.post().and_then(|()| req.wait()).map(|()| f32s(&dst.read()));
    (selected, res)
}

#[test]
fn without_nccl_the_tl_is_left_out_naming_the_library() {
    scenario("without_nccl_the_tl_is_left_out_naming_the_library", Nccl::Absent, &[], || {
        let e = ferrocoll::tl::nccl::available().expect_err("no libnccl on the child's path");
        assert_eq!(e.status(), Status::NotSupported);
        assert!(e.context().contains("libnccl.so.2"), "{e}");
        let (selected, res) = one_rank(|team| sum_once(team, None));
        assert!(selected.starts_with("p2p/"), "{selected}");
        assert_eq!(res.expect("p2p staging serves it")[3], 1.5);
    });
}

#[test]
fn an_old_nccl_is_refused_naming_its_version() {
    scenario("an_old_nccl_is_refused_naming_its_version", Nccl::Fake(&[]), &[("FAKE_NCCL_VERSION", "21212")], || {
        let e = ferrocoll::tl::nccl::available().expect_err("2.12 is too old");
        assert_eq!(e.status(), Status::NotSupported);
        assert!(e.context().contains("NCCL 2.12.12") && e.context().contains("2.14 or newer"), "{e}");
        let (selected, _) = one_rank(|team| sum_once(team, None));
        assert!(selected.starts_with("p2p/"), "{selected}");
    });
}

#[test]
fn a_missing_entry_point_is_refused_naming_it() {
    scenario("a_missing_entry_point_is_refused_naming_it", Nccl::Fake(&["ncclCommInitRankConfig"]), &[], || {
        let e = ferrocoll::tl::nccl::available().expect_err("no ncclCommInitRankConfig");
        assert!(e.context().contains("has no ncclCommInitRankConfig"), "{e}");
    });
}

#[test]
fn the_communicator_is_made_lazily_polled_and_finalized_at_team_destruction() {
    let env = [("FAKE_NCCL_INIT_POLLS", "5")];
    scenario("the_communicator_is_made_lazily_polled_and_finalized_at_team_destruction", Nccl::Fake(&[]), &env, || {
        assert_eq!(ferrocoll::tl::nccl::available().expect("the fake NCCL"), "2.30.7");
        one_rank(|team| {
            assert_eq!(counter("calls.ncclCommInitRankConfig"), 0, "no communicator before the first collective");
            let (selected, res) = sum_once(team, None);
            assert_eq!(selected, "nccl/nccl");
            let got = res.expect("allreduce through the fake NCCL");
            assert_eq!(got, (0..64).map(|i| i as f32 * 0.5).collect::<Vec<_>>());
            assert_eq!(counter("calls.ncclCommInitRankConfig"), 1);
            assert_eq!(counter("init.nonblocking"), 1, "created non-blocking");
            assert!(counter("calls.ncclCommGetAsyncError") >= 6, "creation polled");
            // A second collective reuses the communicator.
            sum_once(team, None).1.expect("again");
            assert_eq!(counter("calls.ncclCommInitRankConfig"), 1);
            assert_eq!(counter("comms.finalized"), 0);
        });
        // The team is gone: finalized and destroyed, never aborted.
        assert_eq!((counter("comms.finalized"), counter("comms.destroyed"), counter("comms.aborted")), (1, 1, 0));
        assert_eq!(counter("comms.live"), 0);
        assert_eq!(counter("comms.used_after_release"), 0);
    });
}

#[test]
fn every_collective_of_one_rank_runs_on_the_fake() {
    scenario("every_collective_of_one_rank_runs_on_the_fake", Nccl::Fake(&[]), &[], || {
        one_rank(|team| {
            let mut served = 0;
            for coll in CollType::ALL.into_iter().filter(|c| !c.is_synchronisation()) {
                for case in device_matrix(coll, 1, 900 + coll.index() as u64).iter().step_by(7) {
                    if run_case(team, case).unwrap_or_else(|e| panic!("{e}")) {
                        served += 1;
                    }
                }
            }
            assert!(served > 20, "TL/NCCL served only {served} cases");
        });
        assert_eq!(counter("comms.aborted"), 0);
        assert!(counter("calls.ncclAlltoAll") > 0 && counter("calls.ncclGather") > 0, "2.30 has them");
    });
}

#[test]
fn before_2_28_alltoall_runs_as_grouped_send_recv() {
    scenario(
        "before_2_28_alltoall_runs_as_grouped_send_recv",
        Nccl::Fake(&[]),
        &[("FAKE_NCCL_VERSION", "22707")],
        || {
            one_rank(|team| {
                for coll in [CollType::Alltoall, CollType::Gather, CollType::Scatter, CollType::Alltoallv] {
                    for case in device_matrix(coll, 1, 77).iter().filter(|c| !c.in_place).take(3) {
                        assert!(run_case(team, case).unwrap_or_else(|e| panic!("{e}")), "{case}: not TL/NCCL");
                    }
                }
            });
            assert_eq!(
                (counter("calls.ncclAlltoAll"), counter("calls.ncclGather"), counter("calls.ncclScatter")),
                (0, 0, 0)
            );
            assert!(
                counter("calls.ncclSend") > 0 && counter("calls.ncclGroupEnd") > 0 && counter("groups.matched") > 0
            );
        },
    );
}

#[test]
fn a_failed_creation_aborts_and_names_the_call_and_rank() {
    scenario(
        "a_failed_creation_aborts_and_names_the_call_and_rank",
        Nccl::Fake(&[]),
        &[("FAKE_NCCL_INIT_ERROR", "5")],
        || {
            one_rank(|team| {
                let (selected, res) = sum_once(team, None);
                assert_eq!(selected, "nccl/nccl");
                let e = res.expect_err("the creation fails");
                assert_eq!(e.status(), Status::InvalidParam, "{e}");
                for part in ["ncclCommInitRankConfig", "ncclInvalidUsage", "NCCL rank 0 of 1", "injected init failure"]
                {
                    assert!(e.context().contains(part), "{part}: {e}");
                }
                assert_eq!(counter("comms.aborted"), 1, "aborted at once");
                // Later collectives fail with the same error, without a new communicator.
                let again = sum_once(team, None).1.expect_err("still failed");
                assert!(again.context().contains("ncclCommInitRankConfig"), "{again}");
                assert_eq!(counter("calls.ncclCommInitRankConfig"), 1);
            });
            assert_eq!((counter("comms.finalized"), counter("comms.destroyed"), counter("comms.aborted")), (0, 0, 1));
            assert_eq!(counter("comms.used_after_release"), 0);
        },
    );
}

#[test]
fn a_failed_collective_aborts_and_names_the_call() {
    scenario(
        "a_failed_collective_aborts_and_names_the_call",
        Nccl::Fake(&[]),
        &[("FAKE_NCCL_COLL_ERROR", "6")],
        || {
            one_rank(|team| {
                let e = sum_once(team, None).1.expect_err("the collective fails");
                assert_eq!(e.status(), Status::IoError, "{e}");
                assert!(
                    e.context().contains("ncclAllReduce failed: ncclRemoteError")
                        && e.context().contains("rank 0 of 1"),
                    "{e}"
                );
            });
            assert_eq!((counter("comms.finalized"), counter("comms.aborted")), (0, 1));
        },
    );
}

#[test]
fn a_creation_that_never_ends_times_out_with_a_message() {
    scenario(
        "a_creation_that_never_ends_times_out_with_a_message",
        Nccl::Fake(&[]),
        &[("FAKE_NCCL_INIT_HANG", "1")],
        || {
            one_rank(|team| {
                let e = sum_once(team, Some(Duration::from_millis(300))).1.expect_err("times out");
                assert_eq!(e.status(), Status::TimedOut, "{e}");
                assert!(e.context().contains("communicator to be created"), "{e}");
                assert_eq!(counter("comms.aborted"), 0, "not aborted while the team lives");
            });
            // The timeout was an error: the team's destruction aborts the communicator.
            assert_eq!((counter("comms.finalized"), counter("comms.aborted")), (0, 1));
        },
    );
}

/// The first triggered post waits for the communicator before touching the
/// stream; a creation that never ends fails that post at the collective's
/// timeout, naming what it waited for, with nothing left on the stream.
#[test]
fn a_triggered_post_whose_communicator_never_comes_fails_at_its_timeout() {
    scenario(
        "a_triggered_post_whose_communicator_never_comes_fails_at_its_timeout",
        Nccl::Fake(&[]),
        &[("FAKE_NCCL_INIT_HANG", "1")],
        || {
            one_rank(|team| {
                let (ee, stream, src, dst) = engine_and_buffers();
                // SAFETY: 16 f32 each, outliving the request.
                let mut req =
                    unsafe { allreduce(team, &src, &dst, 16, Some(Duration::from_millis(300))) }.expect("init");
                let (waits, records) =
                    (fake_cuda_counter("calls.cuStreamWaitValue64_v2"), fake_cuda_counter("calls.cuEventRecord"));
                let start = std::time::Instant::now();
                let e = req.triggered_post(&ee, &Event::new(EventType::ComputeComplete)).expect_err("times out");
                assert_eq!(e.status(), Status::TimedOut, "{e}");
                assert!(e.context().contains("waited") && e.context().contains("NCCL communicator"), "{e}");
                assert!(start.elapsed() >= Duration::from_millis(300), "bounded by the collective's timeout");
                assert_eq!(fake_cuda_counter("calls.cuStreamWaitValue64_v2"), waits, "the stream was never held");
                assert_eq!(fake_cuda_counter("calls.cuEventRecord"), records, "nothing recorded on the stream");
                assert!(gpu_support::stream::drains_within(stream, Duration::from_secs(5)));
            });
            // The creation never ended: the team's destruction aborts it.
            assert_eq!((counter("comms.finalized"), counter("comms.aborted")), (0, 1));
        },
    );
}

#[test]
fn two_ranks_share_one_unique_id_and_errors_name_each_rank() {
    scenario(
        "two_ranks_share_one_unique_id_and_errors_name_each_rank",
        Nccl::Fake(&[]),
        &[("FAKE_CUDA_DEVICES", "2")],
        || {
            let errors = two_ranks([0, 1], |team| {
                let primary = ferrocoll_cuda::driver().expect("driver").current_ordinal();
                let _ = primary;
                let input = f32_bytes(&[1.0; 8]);
                let src = DevBuf::from_host(&input, Kind::Device);
                let dst = DevBuf::new(32, Kind::Device);
                // SAFETY: 8 f32 each, outliving the request.
                let mut req = unsafe { allreduce(team, &src, &dst, 8, None) }.expect("init");
                assert_eq!(req.selected(), "nccl/nccl");
                req.post().and_then(|()| req.wait()).expect_err("the fake runs one-rank communicators only").to_string()
            });
            for (rank, e) in errors.iter().enumerate() {
                assert!(
                    e.contains("ncclAllReduce")
                        && e.contains(&format!("NCCL rank {rank} of 2"))
                        && e.contains("one-rank"),
                    "{e}"
                );
            }
            assert_eq!(counter("ids.made"), 1, "rank 0 made the id");
            assert_eq!(counter("init.same_id"), 2, "both ranks created their communicator with it");
            assert_eq!(counter("comms.aborted"), 2);
        },
    );
}

/// Without the call board (no shm TL), a rank waiting in a TL/NCCL
/// collective answers a p2p probe of that collective: the prober's call
/// differs from this rank's, which went to another TL, though it is this
/// rank's newest post (the p2p TL's own log could not tell it from "not
/// posted yet"). Seen on an H200: the prober waited until its timeout.
#[test]
fn a_rank_waiting_in_an_nccl_collective_answers_a_p2p_probe_of_it() {
    scenario(
        "a_rank_waiting_in_an_nccl_collective_answers_a_p2p_probe_of_it",
        Nccl::Fake(&[]),
        &[("FAKE_CUDA_DEVICES", "2"), ("FAKE_NCCL_INIT_HANG", "1"), ("UCC_TLS", "p2p,nccl")],
        || {
            let out = two_ranks([0, 1], |team| {
                let started = std::time::Instant::now();
                let e = if team.rank() == 1 {
                    // Its communicator never comes (rank 0 posts no CUDA collective).
                    let (src, dst) =
                        (DevBuf::from_host(&f32_bytes(&[1.0; 8]), Kind::Device), DevBuf::new(32, Kind::Device));
                    // SAFETY: 8 f32 each, outliving the request.
                    let mut req =
                        unsafe { allreduce(team, &src, &dst, 8, Some(Duration::from_secs(3))) }.expect("init");
                    assert_eq!(req.selected(), "nccl/nccl");
                    req.post().and_then(|()| req.wait()).expect_err("no communicator")
                } else {
                    let mut buf = [0u8; 16];
                    ferrocoll::Coll::bcast(&mut buf, 1).timeout(Duration::from_secs(60)).run(team).expect_err("differs")
                };
                (e.status(), e.to_string(), started.elapsed())
            });
            let (status, text, took) = &out[0];
            assert_eq!(*status, Status::InvalidParam, "rank 0 must learn that the calls differ: {text}");
            assert!(text.contains("calls differ") && text.contains("rank 1"), "{text}");
            assert!(*took < Duration::from_secs(60), "before its timeout: {took:?}");
            assert_eq!(out[1].0, Status::TimedOut, "rank 1 waits for the communicator until its timeout: {}", out[1].1);
        },
    );
}

#[test]
fn two_ranks_on_one_device_fall_back_to_other_tls() {
    scenario("two_ranks_on_one_device_fall_back_to_other_tls", Nccl::Fake(&[]), &[], || {
        let selected = allreduce_on_two_ranks([0, 0]);
        assert!(selected.iter().all(|s| s.starts_with("p2p/")), "{selected:?}");
        assert_eq!(counter("calls.ncclCommInitRankConfig"), 0);
    });
}

#[test]
fn a_capturing_stream_refuses_host_driven_posts_and_captures_nccl_ones() {
    scenario("a_capturing_stream_refuses_host_driven_posts_and_captures_nccl_ones", Nccl::Fake(&[]), &[], || {
        one_rank(|team| {
            let (ee, stream, src, dst) = engine_and_buffers();
            let compute = Event::new(EventType::ComputeComplete);
            // SAFETY: 16 f32 each, outliving the request.
            let mut req = unsafe { allreduce(team, &src, &dst, 16, None) }.expect("init");
            assert_eq!(req.selected(), "nccl/nccl");
            let capture = |on: bool| {
                let r = if on {
                    // SAFETY: the engine's stream, live; relaxed mode.
                    unsafe {
                        sys::cuStreamBeginCapture_v2(stream, sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)
                    }
                } else {
                    let mut g: sys::CUgraph = std::ptr::null_mut();
                    // SAFETY: as above; g is ours.
                    unsafe { sys::cuStreamEndCapture(stream, &mut g) }
                };
                assert_eq!(r, sys::CUresult::CUDA_SUCCESS);
            };
            // Before the communicator exists, a triggered post is host-driven: refused while capturing.
            capture(true);
            let e = req.triggered_post(&ee, &compute).expect_err("host-driven under capture");
            assert_eq!(e.status(), Status::NotSupported, "{e}");
            assert!(e.context().contains("captured into a CUDA graph"), "{e}");
            capture(false);
            // A plain post makes the communicator.
            req.post().and_then(|()| req.wait()).expect("plain post");
            // Now a triggered post enqueues on the capturing stream and completes at once.
            let records = fake_cuda_counter("calls.cuEventRecord");
            capture(true);
            req.triggered_post(&ee, &compute).expect("captured");
            assert_eq!(req.test().expect("status"), Status::Ok, "complete at post: the graph runs it");
            assert_eq!(fake_cuda_counter("calls.cuEventRecord"), records, "no event recorded into the capture");
            capture(false);
            // The stream engine reports both events.
            let mut seen = Vec::new();
            while let Some(ev) = ee.get_event() {
                ee.ack_event(&ev).expect("ack");
                seen.push(ev.ev_type);
            }
            assert!(
                seen.contains(&EventType::CollectivePost) && seen.contains(&EventType::CollectiveComplete),
                "{seen:?}"
            );
            gpu_support::stream::sync(stream);
        });
        assert_eq!(counter("comms.aborted"), 0);
    });
}

/// The first triggered post on a stream (outside a capture) makes the
/// communicator before the engine touches the stream, and is then
/// stream-native: no event, no flag wait on the stream. A host-driven post
/// there would hold the stream while NCCL makes the communicator, and NCCL
/// loads its kernels then: under CUDA's lazy module loading that load
/// waits behind the held stream (the deadlock seen on an H100).
#[test]
fn the_first_triggered_post_makes_the_communicator_and_never_holds_the_stream() {
    scenario(
        "the_first_triggered_post_makes_the_communicator_and_never_holds_the_stream",
        Nccl::Fake(&[]),
        &[],
        || {
            one_rank(|team| {
                let (ee, stream, src, dst) = engine_and_buffers();
                let compute = Event::new(EventType::ComputeComplete);
                // SAFETY: 16 f32 each, outliving the request.
                let mut req = unsafe { allreduce(team, &src, &dst, 16, None) }.expect("init");
                assert_eq!(req.selected(), "nccl/nccl");
                assert_eq!(counter("calls.ncclCommInitRankConfig"), 0, "lazy: no communicator before the first post");
                let waits = || {
                    fake_cuda_counter("calls.cuStreamWaitValue64_v2")
                        + fake_cuda_counter("calls.cuStreamWaitValue32_v2")
                };
                let waits_before = waits();
                req.triggered_post(&ee, &compute).expect("the first triggered post");
                assert_eq!(counter("calls.ncclCommInitRankConfig"), 1, "made by the post");
                assert_eq!(waits(), waits_before, "the stream was never held on a flag");
                req.wait().expect("completed");
                // Later posts are stream-native at once, and do not query the
                // completion event they have just recorded (three driver calls).
                let queries = fake_cuda_counter("calls.cuEventQuery");
                req.triggered_post(&ee, &compute).expect("a later triggered post");
                assert_eq!(fake_cuda_counter("calls.cuEventQuery"), queries, "queried at post");
                req.wait().expect("completed");
                assert!(fake_cuda_counter("calls.cuEventQuery") > queries, "the wait never queried the event");
                gpu_support::stream::sync(stream);
                assert_eq!(f32s(&dst.read()), vec![3.0; 16]);
            });
            assert_eq!(counter("comms.aborted"), 0);
        },
    );
}

/// A stream engine on device 0 and its stream; 16 f32 of 3.0 in device
/// memory and 64 bytes for their sum.
fn engine_and_buffers() -> (CudaStreamEe, sys::CUstream, DevBuf, DevBuf) {
    let ee = CudaStreamEe::new_stream(0).expect("engine");
    let stream: sys::CUstream = ee.stream().cast();
    let src = DevBuf::from_host(&f32_bytes(&[3.0; 16]), Kind::Device);
    (ee, stream, src, DevBuf::new(64, Kind::Device))
}

/// A counter of the fake CUDA driver in this child.
fn fake_cuda_counter(key: &str) -> i64 {
    type Counter = unsafe extern "C" fn(*const std::ffi::c_char) -> std::ffi::c_longlong;
    // SAFETY: in a child the fake driver is loaded under this name; one more reference.
    let lib = unsafe { libloading::Library::new("libcuda.so.1") }.expect("the fake driver");
    // SAFETY: core.c defines fake_cuda_counter with this C signature.
    let f = unsafe { lib.get::<Counter>(b"fake_cuda_counter\0") }.expect("fake_cuda_counter");
    let key = std::ffi::CString::new(key).expect("key");
    // SAFETY: NUL-terminated, outlives the call.
    unsafe { f(key.as_ptr()) }
}

/// A collective in flight while the user captures another stream in global
/// mode: its progress queries its event in relaxed mode, so neither fails
/// nor breaks the capture — where a plain query (the control) would.
#[test]
fn progress_during_a_global_capture_leaves_it_intact() {
    let env = [("FAKE_CUDA_STREAM_DELAY_US", "20000")];
    scenario("progress_during_a_global_capture_leaves_it_intact", Nccl::Fake(&[]), &env, || {
        one_rank(|team| {
            let ee = CudaStreamEe::new_stream(0).expect("engine");
            let stream: sys::CUstream = ee.stream().cast();
            let begin = || {
                // SAFETY: the engine's stream, live.
                let r = unsafe {
                    sys::cuStreamBeginCapture_v2(stream, sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL)
                };
                assert_eq!(r, sys::CUresult::CUDA_SUCCESS);
            };
            let end = || {
                let mut g: sys::CUgraph = std::ptr::null_mut();
                // SAFETY: as above; g is ours.
                unsafe { sys::cuStreamEndCapture(stream, &mut g) }
            };
            let src = DevBuf::from_host(&f32_bytes(&[5.0; 16]), Kind::Device);
            let dst = DevBuf::new(64, Kind::Device);
            // SAFETY: 16 f32 each, outliving the request.
            let mut req = unsafe { allreduce(team, &src, &dst, 16, None) }.expect("init");
            req.post().and_then(|()| req.wait()).expect("the communicator");
            req.post().expect("post");
            begin();
            assert_eq!(req.test().expect("status"), Status::InProgress, "the slow stream keeps it in flight");
            req.wait().expect("waited during the capture");
            assert_eq!(end(), sys::CUresult::CUDA_SUCCESS, "the capture survived the progress");
            assert_eq!(f32s(&dst.read()), vec![5.0; 16]);
            // The control: the fake does enforce CUDA's rule.
            let mut ev: sys::CUevent = std::ptr::null_mut();
            // SAFETY: a context is current (bound); ev is ours, destroyed below.
            assert_eq!(unsafe { sys::cuEventCreate(&mut ev, 0) }, sys::CUresult::CUDA_SUCCESS);
            begin();
            // SAFETY: ev is live.
            let r = unsafe { sys::cuEventQuery(ev) };
            assert_eq!(r, sys::CUresult::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "a plain query breaks the capture");
            assert_eq!(end(), sys::CUresult::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
            // SAFETY: created above, no longer used.
            assert_eq!(unsafe { sys::cuEventDestroy_v2(ev) }, sys::CUresult::CUDA_SUCCESS);
        });
    });
}
