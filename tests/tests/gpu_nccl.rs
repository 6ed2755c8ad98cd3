//! TL/NCCL on a GPU (collected by `scripts/gpu-check.sh`, run there with
//! `REQUIRE_GPU=1`, where a skip is a failure).
//!
//! Without a GPU, the tests that the fakes can run re-run themselves in a
//! child process on the fake CUDA driver and the fake NCCL
//! (`ferrocoll_tests::fake_nccl`) — a check of the code paths, not of NCCL —
//! and the others print that they skipped and why:
//! - every collective and datatype on a one-rank NCCL team (fakes: yes);
//! - two ranks on one GPU falling back from TL/NCCL to another TL, as
//!   threads and as processes, with the reason logged (fakes: yes);
//! - a host-driven collective refused on a capturing stream (fakes: yes);
//! - a TL/NCCL allreduce captured into a CUDA graph and replayed 100 times,
//!   results checked (GPU only: the fake has no graphs);
//! - the overhead TL/NCCL adds to a one-rank allreduce over calling NCCL
//!   directly, printed (GPU only; no timing is asserted).

mod gpu_support;
mod nccl_support;

use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::task::Poll;
use std::time::{Duration, Instant};

use ferrocoll::{
    CollType, Config, Context, ContextParams, CudaStreamEe, Event, EventType, Status, TcpOob, Team, TeamParams,
};
use ferrocoll_cuda::sys::driver as sys;
use ferrocoll_tests::cases::device_matrix;
use ferrocoll_tests::gpu::gpu_status;
use ferrocoll_tests::native::required;
use ferrocoll_tests::procs::{Job, ROLE, free_port};
use ferrocoll_tests::{fake_cuda, fake_nccl, world};
use gpu_support::{DevBuf, Kind};
use nccl_support::{allreduce, allreduce_on_two_ranks, f32_bytes, f32s, run_case};

/// Whether `test` must skip its body here. On a GPU with NCCL: no. On a
/// GPU without NCCL: skips (a failure under `REQUIRE_GPU=1`). Without a
/// GPU: the test runs in a child on the fake driver and the fake NCCL (it
/// panics if it fails there) and this says skip; a failure under `REQUIRE_GPU=1`.
fn skip_unless_nccl(test: &str) -> bool {
    match gpu_status() {
        Ok(_) if fake_cuda::is_child() => false,
        Ok(_) => match ferrocoll::tl::nccl::available() {
            Ok(_) => false,
            Err(e) if required("REQUIRE_GPU") => panic!("{test}: REQUIRE_GPU=1, but TL/NCCL cannot run: {e}"),
            Err(e) => {
                eprintln!("{test}: skipped: a GPU but no usable NCCL: {e}");
                true
            }
        },
        Err(why) => {
            assert!(!fake_cuda::is_child(), "{test}: the fake CUDA driver did not load in its child: {why}");
            assert!(!required("REQUIRE_GPU"), "{test}: REQUIRE_GPU=1, but {why}");
            let dir = match fake_cuda::fake().and_then(|_| fake_nccl::build(&[])) {
                Ok(d) => d,
                Err(e) => {
                    fake_cuda::skip(test, &e);
                    return true;
                }
            };
            let run = fake_nccl::run(test, Some(&dir), &[]).unwrap_or_else(|e| panic!("{e}"));
            let problems = run.report.teardown_problems();
            assert!(problems.is_empty(), "{test}: {}\n{}", problems.join(", "), run.output);
            eprintln!("{test}: no GPU ({why}): ran on the fake CUDA driver and the fake NCCL, not on NCCL");
            true
        }
    }
}

/// Whether a test that needs a real GPU and NCCL must skip (printing why).
fn skip_unless_real_nccl(test: &str, what: &str) -> bool {
    let status = gpu_status().and_then(|_| ferrocoll::tl::nccl::available().map_err(|e| e.to_string()));
    match status {
        Ok(_) => false,
        Err(why) => {
            assert!(!required("REQUIRE_GPU"), "{test}: REQUIRE_GPU=1, but {why}");
            eprintln!("{test}: skipped: {what} needs a GPU and NCCL ({why})");
            true
        }
    }
}

/// A CUDA graph capture in global mode (PyTorch's default) forbids the
/// process's other threads the driver calls NCCL makes while it creates a
/// communicator: on an H200 (driver 580.159.04, NCCL 2.28.9) one test's
/// creation crashed inside `cuStreamSynchronize` (NCCL's `initChannel`)
/// while another test captured. Tests that capture hold this for writing,
/// those that make communicators in this process for reading.
static CAPTURE: RwLock<()> = RwLock::new(());

fn capturing() -> RwLockWriteGuard<'static, ()> {
    CAPTURE.write().unwrap_or_else(PoisonError::into_inner)
}

fn not_capturing() -> RwLockReadGuard<'static, ()> {
    CAPTURE.read().unwrap_or_else(PoisonError::into_inner)
}

fn one_rank<R: Send + 'static>(f: impl Fn(&Team) -> R + Send + Sync + 'static) -> R {
    world::run(1, &Config::new(), move |team, _| {
        gpu_support::bind();
        f(team)
    })
    .pop()
    .expect("one rank")
}

fn ok(r: sys::CUresult, call: &str) {
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS, "{call}");
}

#[test]
fn a_one_rank_nccl_team_runs_every_collective_and_datatype() {
    if skip_unless_nccl("a_one_rank_nccl_team_runs_every_collective_and_datatype") {
        return;
    }
    let _capture = not_capturing();
    let every = if fake_cuda::is_child() { 5 } else { 1 };
    one_rank(move |team| {
        for coll in CollType::ALL.into_iter().filter(|c| !c.is_synchronisation()) {
            let (mut served, mut elsewhere) = (0, 0);
            for case in device_matrix(coll, 1, 1400 + coll.index() as u64).iter().step_by(every) {
                match run_case(team, case) {
                    Ok(true) => served += 1,
                    Ok(false) => elsewhere += 1,
                    Err(e) => panic!("{e}"),
                }
            }
            // Only reductions NCCL lacks (types, operations) and
            // reduce_scatterv (NCCL has no call for it) go elsewhere.
            if coll == CollType::ReduceScatterv {
                assert_eq!(served, 0, "TL/NCCL has no reduce_scatterv");
            } else {
                assert!(served > 0, "{coll}: TL/NCCL served no case ({elsewhere} went to other TLs)");
            }
            eprintln!("{coll}: {served} cases on TL/NCCL, {elsewhere} on other TLs");
        }
    });
}

#[test]
fn two_ranks_on_one_gpu_fall_back_from_nccl() {
    if skip_unless_nccl("two_ranks_on_one_gpu_fall_back_from_nccl") {
        return;
    }
    let _capture = not_capturing();
    let selected = allreduce_on_two_ranks([0, 0]);
    assert!(selected.iter().all(|s| !s.starts_with("nccl/")), "{selected:?}");
}

#[test]
fn a_host_driven_post_on_a_capturing_stream_is_refused_and_the_capture_survives() {
    if skip_unless_nccl("a_host_driven_post_on_a_capturing_stream_is_refused_and_the_capture_survives") {
        return;
    }
    let _capture = capturing();
    let mut config = Config::new();
    config.set("TL_NCCL_TUNE", "0");
    world::run(1, &config, |team, _| {
        gpu_support::bind();
        let ee = CudaStreamEe::new_stream(0).expect("engine");
        let stream: sys::CUstream = ee.stream().cast();
        let src = DevBuf::from_host(&f32_bytes(&[1.0; 16]), Kind::Device);
        let dst = DevBuf::new(64, Kind::Device);
        // SAFETY: 16 f32 each, outliving the request.
        let mut req = unsafe { allreduce(team, &src, &dst, 16, None) }.expect("init");
        assert!(!req.selected().starts_with("nccl/"), "{}", req.selected());
        // SAFETY: the engine's stream, live.
        ok(
            unsafe { sys::cuStreamBeginCapture_v2(stream, sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL) },
            "begin",
        );
        let e = req.triggered_post(&ee, &Event::new(EventType::ComputeComplete)).expect_err("refused");
        assert_eq!(e.status(), Status::NotSupported, "{e}");
        assert!(e.context().contains("captured into a CUDA graph"), "{e}");
        let mut graph: sys::CUgraph = std::ptr::null_mut();
        // SAFETY: as above; the refusal enqueued nothing, so the capture is still valid.
        ok(unsafe { sys::cuStreamEndCapture(stream, &mut graph) }, "cuStreamEndCapture after the refusal");
        if !graph.is_null() {
            // SAFETY: the graph the capture made, destroyed once.
            ok(unsafe { sys::cuGraphDestroy(graph) }, "cuGraphDestroy");
        }
    });
}

#[test]
fn an_nccl_allreduce_captured_in_a_graph_replays_100_times() {
    if skip_unless_real_nccl("an_nccl_allreduce_captured_in_a_graph_replays_100_times", "graph replay") {
        return;
    }
    let _capture = capturing();
    one_rank(|team| {
        let n = 1 << 16;
        let input: Vec<f32> = (0..n).map(|i| (i % 977) as f32).collect();
        let src = DevBuf::from_host(&f32_bytes(&input), Kind::Device);
        let dst = DevBuf::new(n * 4, Kind::Device);
        let ee = CudaStreamEe::new_stream(0).expect("engine");
        let stream: sys::CUstream = ee.stream().cast();
        // SAFETY: n f32 each, outliving the request.
        let mut req = unsafe { allreduce(team, &src, &dst, n, None) }.expect("init");
        assert_eq!(req.selected(), "nccl/nccl");
        req.post().and_then(|()| req.wait()).expect("a first plain post makes the communicator");
        // SAFETY: the engine's stream, live.
        ok(
            unsafe { sys::cuStreamBeginCapture_v2(stream, sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL) },
            "begin",
        );
        req.triggered_post(&ee, &Event::new(EventType::ComputeComplete)).expect("captured");
        let mut graph: sys::CUgraph = std::ptr::null_mut();
        // SAFETY: as above.
        ok(unsafe { sys::cuStreamEndCapture(stream, &mut graph) }, "cuStreamEndCapture");
        assert_eq!(req.test().expect("status"), Status::Ok);
        let mut exec: sys::CUgraphExec = std::ptr::null_mut();
        // SAFETY: the captured graph; exec is ours.
        ok(unsafe { sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0) }, "cuGraphInstantiateWithFlags");
        for i in 0..100 {
            // SAFETY: dst is device memory of n*4 bytes; the stream is live.
            ok(unsafe { sys::cuMemsetD8Async(dst.addr() as u64, (i % 200) as u8 + 1, n * 4, stream) }, "poison");
            // SAFETY: the instantiated graph on the engine's stream.
            ok(unsafe { sys::cuGraphLaunch(exec, stream) }, "cuGraphLaunch");
            gpu_support::stream::sync(stream);
            assert_eq!(f32s(&dst.read()), input, "replay {i}");
        }
        // SAFETY: made above, destroyed once, after the last launch completed.
        ok(unsafe { sys::cuGraphExecDestroy(exec) }, "cuGraphExecDestroy");
        // SAFETY: as above.
        ok(unsafe { sys::cuGraphDestroy(graph) }, "cuGraphDestroy");
    });
}

/// Microseconds per iteration of `f`, after a warm-up.
fn per_iter(iters: u32, mut f: impl FnMut()) -> f64 {
    for _ in 0..100 {
        f();
    }
    let t = Instant::now();
    for _ in 0..iters {
        f();
    }
    t.elapsed().as_secs_f64() * 1e6 / f64::from(iters)
}

/// The overhead of TL/NCCL over calling NCCL directly, for an allreduce of
/// 8 bytes on a one-rank communicator: printed, not asserted (timing lives
/// in benchmarks). Target of the issue: ≤ 1 µs per collective.
#[test]
fn nccl_overhead_benchmark_one_rank() {
    if skip_unless_real_nccl("nccl_overhead_benchmark_one_rank", "the overhead benchmark") {
        return;
    }
    let _capture = not_capturing();
    const ITERS: u32 = 20_000;
    one_rank(|team| {
        let src = DevBuf::from_host(&f32_bytes(&[1.0, 2.0]), Kind::Device);
        let dst = DevBuf::new(8, Kind::Device);
        let ee = CudaStreamEe::new_stream(0).expect("engine");
        let stream: sys::CUstream = ee.stream().cast();
        // Direct: our checked wrapper around ncclAllReduce, one communicator of one rank.
        let nccl = ferrocoll_cuda::nccl::nccl().expect("NCCL");
        let id = nccl.unique_id().expect("id");
        let mut comm = ferrocoll_cuda::nccl::Comm::start(nccl, &id, 1, 0).expect("init");
        let t0 = Instant::now();
        loop {
            match comm.poll_ready() {
                Poll::Pending => assert!(t0.elapsed() < Duration::from_secs(60), "NCCL init took over 60 s"),
                Poll::Ready(r) => break r.expect("NCCL init"),
            }
        }
        let (s, d) = (src.addr() as u64, dst.addr() as u64);
        let direct = per_iter(ITERS, || {
            // SAFETY: 2 f32 device buffers, live; the engine's stream.
            unsafe { comm.all_reduce(s, d, 2, 7, 0, stream.cast()) }.expect("ncclAllReduce");
        });
        gpu_support::stream::sync(stream);
        // TL/NCCL, triggered on the stream: the post enqueues (as a trainer's
        // step would); batches of requests, each waited for after its batch.
        // SAFETY: 2 f32 each, outliving the requests.
        let mut reqs: Vec<_> =
            (0..1000).map(|_| unsafe { allreduce(team, &src, &dst, 2, None) }.expect("init")).collect();
        reqs[0].post().and_then(|()| reqs[0].wait()).expect("first post makes the communicator");
        let compute = Event::new(EventType::ComputeComplete);
        let mut posting = Duration::ZERO;
        for _ in 0..(ITERS / 1000) {
            let t = Instant::now();
            for r in reqs.iter_mut() {
                r.triggered_post(&ee, &compute).expect("triggered");
            }
            posting += t.elapsed();
            for r in reqs.iter_mut() {
                r.wait().expect("wait");
            }
            while let Some(ev) = ee.get_event() {
                let _ = ee.ack_event(&ev);
            }
        }
        let triggered = posting.as_secs_f64() * 1e6 / f64::from(ITERS / 1000 * 1000);
        gpu_support::stream::sync(stream);
        // The driver calls a warm triggered post makes besides NCCL's (as the
        // fake driver counts them), each timed alone on the same stream.
        let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
        // SAFETY: the engine's stream, live; `status` is ours.
        let is_capturing =
            per_iter(ITERS, || ok(unsafe { sys::cuStreamIsCapturing(stream, &mut status) }, "capturing"));
        let mut ev: sys::CUevent = std::ptr::null_mut();
        let no_timing = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as std::ffi::c_uint;
        // SAFETY: the engine's context is current on this thread; `ev` is ours.
        ok(unsafe { sys::cuEventCreate(&mut ev, no_timing) }, "cuEventCreate");
        // SAFETY: the event made above and the engine's stream, both live.
        let record = per_iter(ITERS, || ok(unsafe { sys::cuEventRecord(ev, stream) }, "cuEventRecord"));
        gpu_support::stream::sync(stream);
        // SAFETY: made above, its records done (the stream was synchronised).
        ok(unsafe { sys::cuEventDestroy_v2(ev) }, "cuEventDestroy");
        // TL/NCCL plain post + wait (its own stream, an event queried until done)
        // against direct enqueue + stream synchronisation.
        let req = &mut reqs[0];
        let plain = per_iter(ITERS / 10, || {
            req.post().and_then(|()| req.wait()).expect("post");
        });
        let direct_synced = per_iter(ITERS / 10, || {
            // SAFETY: as above.
            unsafe { comm.all_reduce(s, d, 2, 7, 0, stream.cast()) }.expect("ncclAllReduce");
            gpu_support::stream::sync(stream);
        });
        eprintln!(
            "TL/NCCL overhead, one rank, 8-byte allreduce, NCCL {}:\n  enqueue: direct ncclAllReduce {direct:.2} µs, \
             TL/NCCL triggered_post on a stream engine {triggered:.2} µs (overhead {:.2} µs)\n  to completion: direct + \
             stream sync {direct_synced:.2} µs, TL/NCCL post + wait {plain:.2} µs (overhead {:.2} µs)\n  pieces of a \
             triggered post, alone: cuStreamIsCapturing {is_capturing:.2} µs, cuEventRecord {record:.2} µs",
            nccl.version_string(),
            triggered - direct,
            plain - direct_synced
        );
        comm.release(Duration::from_secs(30)).expect("release");
    });
}

/// The body of a rank process of this binary (does nothing in a normal run).
#[test]
fn nccl_rank_body() {
    let Ok(role) = std::env::var(ROLE) else { return };
    let code = match role.as_str() {
        "same_gpu" => same_gpu_rank(),
        other => {
            println!("FAIL unknown role {other}");
            1
        }
    };
    std::process::exit(code);
}

/// One of two processes on device 0: an allreduce on device memory must
/// run, on another TL than TL/NCCL.
fn same_gpu_rank() -> i32 {
    gpu_support::bind();
    let run = || -> Result<String, String> {
        let lib = ferrocoll::Lib::new().map_err(|e| e.to_string())?;
        let oob = TcpOob::from_env().map_err(|e| e.to_string())?;
        let ctx = Context::new(&lib, ContextParams::with_oob(oob)).map_err(|e| format!("context: {e}"))?;
        let team = Team::create(&ctx, TeamParams::default()).map_err(|e| format!("team: {e}"))?;
        let mine = team.rank() as f32 + 1.0;
        let src = DevBuf::from_host(&f32_bytes(&[mine; 8]), Kind::Device);
        let dst = DevBuf::new(32, Kind::Device);
        // SAFETY: 8 f32 each, outliving the request.
        let mut req = unsafe { allreduce(&team, &src, &dst, 8, None) }.map_err(|e| format!("init: {e}"))?;
        req.post().and_then(|()| req.wait()).map_err(|e| format!("allreduce: {e}"))?;
        let got = f32s(&dst.read());
        if got != vec![3.0; 8] {
            return Err(format!("allreduce gave {got:?}"));
        }
        Ok(req.selected().to_string())
    };
    match run() {
        Ok(selected) => {
            println!("SELECTED {selected}");
            println!("DONE");
            0
        }
        Err(e) => {
            println!("FAIL {e}");
            1
        }
    }
}

#[test]
fn two_processes_on_one_gpu_fall_back_from_nccl_with_a_logged_reason() {
    if skip_unless_nccl("two_processes_on_one_gpu_fall_back_from_nccl_with_a_logged_reason") {
        return;
    }
    let token = format!("nccl-{:x}-{:x}", std::process::id(), free_port());
    let debug = |_| vec![("UCC_LOG_LEVEL".to_string(), "debug".to_string())];
    let job = Job::start("nccl_rank_body", "same_gpu", 2, 0..2, &token, free_port(), &debug);
    for o in job.finish(Duration::from_secs(300)) {
        let what = format!("rank {}: {:?}\n{}\n{}", o.rank, o.success, o.stdout, o.stderr);
        assert!(o.success == Some(true) && o.lines("FAIL").is_empty() && !o.lines("DONE").is_empty(), "{what}");
        assert!(o.lines("SELECTED").iter().all(|l| !l.contains("nccl/")), "{what}");
        assert!(
            o.stderr.contains("TL nccl is off for team") && o.stderr.contains("use the same CUDA device 0"),
            "the reason is not logged: {what}"
        );
    }
}
