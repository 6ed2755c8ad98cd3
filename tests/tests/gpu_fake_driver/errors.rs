//! Driver failures on the fake: each must come back as an `Error` whose
//! status is the error table's and whose message names the call (and the
//! size, device or kernel), never a panic or a hang, and leave nothing
//! behind.

use std::time::Duration;

use ferrocoll::core::backend::Mc;
use ferrocoll::ee::cuda::StreamInput;
use ferrocoll::{
    BufferInfo, CollArgs, CollBuffer, CollType, Config, CudaStreamEe, DataType, EventType, MemRef, MemType, ReduceOp,
    Status,
};
use ferrocoll_mc::CudaMc;
use ferrocoll_tests::world::{self, TEST_TIMEOUT};

use super::{balanced, counter, held, knobs, scenario};
use crate::gpu_support::stream::{Buf, COMPUTE, allreduce, drains_within, engine, engine_with};
use crate::gpu_support::{DevBuf, Kind};

/// Panic unless `e` has `status` and its message contains every one of `needles`.
fn expect(e: &ferrocoll::Error, status: Status, needles: &[&str]) {
    assert_eq!(e.status(), status, "{e}");
    for n in needles {
        assert!(e.to_string().contains(n), "`{n}` is not in: {e}");
    }
}

#[test]
fn out_of_device_or_managed_memory_is_no_memory_naming_the_call_and_the_size() {
    const TEST: &str = "errors::out_of_device_or_managed_memory_is_no_memory_naming_the_call_and_the_size";
    scenario(
        TEST,
        knobs().env("FAKE_CUDA_FAIL", "cuMemAlloc_v2:2,cuMemAllocManaged:1"),
        || {
            let mc = CudaMc::probe().unwrap();
            let first = mc.alloc(1000).expect("the first allocation succeeds");
            let e = mc.alloc(100_000).expect_err("the second cuMemAlloc fails");
            expect(&e, Status::NoMemory, &["cuMemAlloc", "CUDA_ERROR_OUT_OF_MEMORY", "131072 bytes on CUDA device 0"]);
            let again = mc.alloc(100_000).expect("a failure is not kept: the next allocation is tried");
            let e = mc.managed().alloc(10).expect_err("cuMemAllocManaged fails");
            expect(&e, Status::NoMemory, &["cuMemAllocManaged", "out of memory", "256 bytes from CUDA device 0"]);
            drop((first, again));
            assert_eq!(counter("live.device_bytes"), mc.cached_bytes().unwrap() as i64);
        },
        |report, output| {
            assert_eq!((report.get("injected.cuMemAlloc_v2"), report.get("injected.cuMemAllocManaged")), (1, 1));
            balanced(TEST, report, output);
        },
    );
}

/// A collective on device memory needs pinned staging memory; when the
/// driver cannot pin any, the collective's init fails with `NoMemory`
/// naming `cuMemHostRegister`, on every rank, and nothing hangs.
#[test]
fn out_of_pinned_memory_fails_a_staged_collective_at_init() {
    const TEST: &str = "errors::out_of_pinned_memory_fails_a_staged_collective_at_init";
    scenario(
        TEST,
        knobs().env("FAKE_CUDA_FAIL", "cuMemHostRegister_v2:1+"),
        || {
            world::run(2, &Config::new(), |team, _| {
                let (src, dst) = (DevBuf::new(400, Kind::Device), DevBuf::new(400, Kind::Device));
                let info = |b: &DevBuf| {
                    CollBuffer::Info(BufferInfo {
                        buffer: b.addr(),
                        count: 100,
                        datatype: DataType::Float32,
                        mem_type: MemType::Cuda,
                    })
                };
                let mut a = CollArgs::new(CollType::Allreduce);
                a.op = ReduceOp::Sum;
                a.src = info(&src);
                a.dst = info(&dst);
                // SAFETY: the buffers outlive the (failing) init.
                let e = unsafe { team.collective_init(&a) }.err().expect("no pinned memory for staging");
                expect(&e, Status::NoMemory, &["cuMemHostRegister", "CUDA_ERROR_OUT_OF_MEMORY", "staging"]);
            });
        },
        |report, output| {
            assert!(report.get("injected.cuMemHostRegister_v2") >= 2, "{output}");
            assert_eq!(report.get("live.registered"), 0, "{output}");
            balanced(TEST, report, output);
        },
    );
}

/// A driver that lacks an entry point ferrocoll calls is refused by the
/// probe, naming the entry point, before any driver function is called;
/// the library then runs with host memory only.
#[test]
fn a_driver_without_an_entry_point_is_not_supported_naming_it() {
    const TEST: &str = "errors::a_driver_without_an_entry_point_is_not_supported_naming_it";
    scenario(
        TEST,
        knobs().without(&["cuStreamWaitValue64_v2"]),
        || {
            let needles = ["libcuda.so.1 has no cuStreamWaitValue64_v2"];
            expect(&CudaMc::probe().unwrap_err(), Status::NotSupported, &needles);
            expect(&CudaStreamEe::new_stream(0).unwrap_err(), Status::NotSupported, &needles);
            expect(&ferrocoll::ee::cuda::available().unwrap_err(), Status::NotSupported, &needles);
            let names: Vec<_> = ferrocoll_mc::default_mcs().iter().map(|m| m.name()).collect();
            assert_eq!(names, ["host"]);
            ferrocoll::Lib::new().expect("a library without the CUDA components");
        },
        |report, output| {
            assert_eq!(report.calls("cuInit"), 0, "the driver was called although the probe refused it: {output}");
        },
    );
}

#[test]
fn no_device_is_not_supported_naming_the_count() {
    const TEST: &str = "errors::no_device_is_not_supported_naming_the_count";
    scenario(
        TEST,
        knobs().env("FAKE_CUDA_DEVICES", 0),
        || {
            let e = CudaMc::probe().unwrap_err();
            expect(&e, Status::NotSupported, &["0 devices", "cuDeviceGetCount"]);
            expect(&CudaStreamEe::new_stream(0).unwrap_err(), Status::NotSupported, &["0 devices"]);
        },
        |report, output| {
            assert_eq!(
                (report.calls("cuInit"), report.calls("cuDeviceGetCount")),
                (1, 1),
                "kept, not retried: {output}"
            );
            assert_eq!(report.calls("cuDevicePrimaryCtxRetain"), 0, "{output}");
        },
    );
}

#[test]
fn a_failing_cu_init_is_not_supported_naming_it_and_kept() {
    const TEST: &str = "errors::a_failing_cu_init_is_not_supported_naming_it_and_kept";
    scenario(
        TEST,
        knobs().env("FAKE_CUDA_FAIL", "cuInit:1:100"),
        || {
            let e = CudaMc::probe().unwrap_err();
            expect(&e, Status::NotSupported, &["cuInit failed", "CUDA_ERROR_NO_DEVICE"]);
            assert_eq!(CudaMc::probe().unwrap_err().to_string(), e.to_string(), "the same answer again");
        },
        |report, output| assert_eq!(report.calls("cuInit"), 1, "the probe was retried: {output}"),
    );
}

/// A device without unified addressing is refused when first used, before
/// its primary context is retained.
#[test]
fn a_device_without_unified_addressing_is_refused_before_its_context() {
    const TEST: &str = "errors::a_device_without_unified_addressing_is_refused_before_its_context";
    scenario(
        TEST,
        knobs().env("FAKE_CUDA_UVA", 0),
        || {
            let mc = CudaMc::probe().expect("the probe opens no device");
            expect(&mc.alloc(16).unwrap_err(), Status::NotSupported, &["CUDA device 0", "unified addressing"]);
            expect(&mc.compute_capability(0).unwrap_err(), Status::NotSupported, &["unified addressing"]);
        },
        |report, output| assert_eq!(report.calls("cuDevicePrimaryCtxRetain"), 0, "{output}"),
    );
}

/// A stream that takes neither 64-bit nor 32-bit memory waits: the engine
/// is refused naming the attribute, and what it made on the way (stream,
/// flag, context reference) is undone.
#[test]
fn an_engine_whose_stream_refuses_memory_waits_is_not_supported_and_undone() {
    const TEST: &str = "errors::an_engine_whose_stream_refuses_memory_waits_is_not_supported_and_undone";
    scenario(
        TEST,
        knobs().env("FAKE_CUDA_WIDE", 0).env("FAKE_CUDA_FAIL", "cuStreamWaitValue32_v2:1+:801"),
        || {
            let e = CudaStreamEe::new_stream(0).unwrap_err();
            expect(&e, Status::NotSupported, &["CAN_USE_64_BIT_STREAM_MEM_OPS", "cuStreamWaitValue32"]);
            assert_eq!(held(0), 0);
        },
        |report, output| {
            assert_eq!(report.calls("cuStreamCreate"), 1, "{output}");
            balanced(TEST, report, output);
        },
    );
}

/// An input event whose query fails (the stream's earlier work failed):
/// the triggered collective fails naming the event and the call, reports
/// its completion, and releases the stream.
#[test]
fn a_failing_input_event_fails_the_triggered_collective_and_releases_the_stream() {
    const TEST: &str = "errors::a_failing_input_event_fails_the_triggered_collective_and_releases_the_stream";
    scenario(
        TEST,
        knobs().env("FAKE_CUDA_FAIL", "cuEventQuery:1+:719"),
        || {
            world::run(1, &Config::new(), |team, _| {
                let (ee, stream) = engine();
                let (src, dst) = (Buf::pinned(16), Buf::pinned(16));
                // SAFETY: the buffers outlive the request.
                let mut req = unsafe { allreduce(team, &src, &dst, TEST_TIMEOUT) };
                req.triggered_post(&ee, &COMPUTE).expect("triggered_post");
                let e = req.wait().expect_err("the input event fails");
                expect(&e, Status::NoMessage, &["input event", "cuEventQuery", "CUDA_ERROR_LAUNCH_FAILED"]);
                assert!(drains_within(stream, Duration::from_secs(10)), "the stream stayed blocked");
                let events: Vec<_> = std::iter::from_fn(|| ee.get_event()).collect();
                assert_eq!(events.last().map(|e| e.ev_type), Some(EventType::CollectiveComplete), "{events:?}");
            });
        },
        |report, output| {
            assert!(report.get("injected.cuEventQuery") >= 1, "{output}");
            balanced(TEST, report, output);
        },
    );
}

/// With `UCC_EE_CUDA_STREAM_INPUT=write`, a stream that refuses memory
/// writes: the engine is refused naming the knob and the call, and undone.
#[test]
fn an_engine_whose_stream_refuses_memory_writes_is_not_supported_with_the_write_input() {
    const TEST: &str = "errors::an_engine_whose_stream_refuses_memory_writes_is_not_supported_with_the_write_input";
    scenario(
        TEST,
        knobs().env("UCC_EE_CUDA_STREAM_INPUT", "write").env("FAKE_CUDA_FAIL", "cuStreamWriteValue64_v2:1+:801"),
        || {
            let e = CudaStreamEe::new_stream(0).unwrap_err();
            expect(&e, Status::NotSupported, &["UCC_EE_CUDA_STREAM_INPUT=write", "cuStreamWriteValue64"]);
            assert_eq!(held(0), 0);
            let ee = CudaStreamEe::new_stream_with(0, StreamInput::Event).expect("the event input needs no write");
            drop(ee);
        },
        |report, output| {
            assert_eq!(report.calls("cuStreamCreate"), 2, "{output}");
            balanced(TEST, report, output);
        },
    );
}

/// With the `write` input: a post whose write the driver refuses fails at
/// once naming it, leaves the stream free, and the next post works (its
/// number is passed by the flag as the failed one's was released).
#[test]
fn a_refused_input_write_fails_the_post_and_the_next_one_works() {
    const TEST: &str = "errors::a_refused_input_write_fails_the_post_and_the_next_one_works";
    scenario(
        TEST,
        // The first write is the engine's check at creation; the second, the first post's.
        knobs().env("FAKE_CUDA_FAIL", "cuStreamWriteValue64_v2:2:999"),
        || {
            world::run(1, &Config::new(), |team, _| {
                let (ee, stream) = engine_with(StreamInput::Write);
                let (src, dst) = (Buf::pinned(16), Buf::pinned(16));
                // SAFETY: the buffers outlive the request.
                let mut req = unsafe { allreduce(team, &src, &dst, TEST_TIMEOUT) };
                let e = req.triggered_post(&ee, &COMPUTE).expect_err("the input write is refused");
                expect(&e, Status::NoMessage, &["input write", "cuStreamWriteValue64", "CUDA_ERROR_UNKNOWN"]);
                assert!(drains_within(stream, Duration::from_secs(10)), "the stream stayed blocked");
                while ee.get_event().is_some() {}
                // SAFETY: as above.
                let mut req = unsafe { allreduce(team, &src, &dst, TEST_TIMEOUT) };
                req.triggered_post(&ee, &COMPUTE).expect("the next post");
                req.wait().expect("the next post completes");
                assert!(drains_within(stream, Duration::from_secs(10)), "the stream stayed blocked");
            });
        },
        |report, output| {
            assert_eq!(report.get("injected.cuStreamWriteValue64_v2"), 1, "{output}");
            balanced(TEST, report, output);
        },
    );
}

/// With the `write` input, a stream that fails while a post waits for its
/// write (the write never comes): the periodic `cuStreamQuery` reports it,
/// the collective fails naming it, and the stream is released.
#[test]
fn a_failing_stream_fails_a_post_waiting_for_its_input_write() {
    const TEST: &str = "errors::a_failing_stream_fails_a_post_waiting_for_its_input_write";
    scenario(
        TEST,
        // Every stream operation takes 300 ms: the post's write is reached
        // long after the first health check.
        knobs().env("FAKE_CUDA_STREAM_DELAY_US", 300_000).env("FAKE_CUDA_FAIL", "cuStreamQuery:1:719"),
        || {
            world::run(1, &Config::new(), |team, _| {
                let (ee, stream) = engine_with(StreamInput::Write);
                let (src, dst) = (Buf::pinned(16), Buf::pinned(16));
                // SAFETY: the buffers outlive the request.
                let mut req = unsafe { allreduce(team, &src, &dst, TEST_TIMEOUT) };
                req.triggered_post(&ee, &COMPUTE).expect("triggered_post");
                let e = req.wait().expect_err("the stream failed");
                expect(&e, Status::NoMessage, &["input write", "cuStreamQuery", "CUDA_ERROR_LAUNCH_FAILED"]);
                assert!(drains_within(stream, Duration::from_secs(10)), "the stream stayed blocked");
                let events: Vec<_> = std::iter::from_fn(|| ee.get_event()).collect();
                assert_eq!(events.last().map(|e| e.ev_type), Some(EventType::CollectiveComplete), "{events:?}");
            });
        },
        |report, output| {
            assert_eq!(report.get("injected.cuStreamQuery"), 1, "{output}");
            balanced(TEST, report, output);
        },
    );
}

#[test]
fn a_failing_copy_names_the_call_the_size_and_the_memory_types() {
    const TEST: &str = "errors::a_failing_copy_names_the_call_the_size_and_the_memory_types";
    scenario(
        TEST,
        knobs().env("FAKE_CUDA_FAIL", "cuMemcpyAsync:1"),
        || {
            let mc = CudaMc::probe().unwrap();
            let dev = mc.alloc(64).unwrap();
            let host = vec![1u8; 64];
            // SAFETY: host outlives the synchronous copies.
            let src = unsafe { MemRef::from_slice(&host) };
            let e = mc.copy(dev.mem(), src).unwrap_err();
            expect(&e, Status::NoMessage, &["copy of 64 bytes from host to cuda memory", "cuMemcpyAsync failed"]);
            mc.copy(dev.mem(), src).expect("the next copy works");
        },
        |report, output| balanced(TEST, report, output),
    );
}
