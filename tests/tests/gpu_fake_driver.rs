//! ferrocoll's CUDA paths on the fake CUDA driver (`tests/fake_cuda/`), with
//! driver settings and failures that a GPU cannot be asked for: what the
//! GPU tests (`gpu_mc.rs`, `gpu_colls.rs`, `gpu_stream.rs`, which run on the
//! fake by themselves where there is no GPU) cannot check.
//!
//! Each test is a scenario: the test binary re-runs itself in a child
//! process whose `libcuda.so.1` is the fake (`ferrocoll_tests::fake_cuda`),
//! with `FAKE_CUDA_*` settings; the child runs the scenario's body and may
//! read the fake's counters as it goes ([`counter`]); the parent then checks
//! what the fake counted at the child's exit (its report).
//!
//! - here: the fake itself (a stream really waits, work runs in order), the
//!   memory component's and the stream engine's teardown (every block,
//!   stream, event, flag and context reference accounted for), stream
//!   ordering with 32-bit waits and a slow stream, with either input
//!   dependency of the engine (`UCC_EE_CUDA_STREAM_INPUT`), and no event
//!   query by a trigger whose input is `write`;
//! - `errors.rs`: out of memory, a missing entry point, no device, a failing
//!   `cuInit`, no unified addressing, refused stream waits, failing event
//!   queries and copies — each an error that names the call, nothing left
//!   behind;
//! - `kernels.rs`: device reductions in rounds on a slow stream, a module
//!   the driver refuses, a failed launch, a device fault, two devices.
//!
//! None of this says that ferrocoll works on a GPU (see the fake's header
//! for what it does not emulate); it says that ferrocoll drives a driver
//! that follows CUDA's rules in a sound order, and handles its errors.
//! Without gcc/g++ every scenario prints that it skipped (a failure under
//! `REQUIRE_FAKE_CUDA=1`); scenarios that compile kernels need NVRTC
//! (`scripts/fetch-nvrtc.sh`; a skip, or a failure under `REQUIRE_NVRTC=1`).

#[path = "gpu_fake_driver/errors.rs"]
mod errors;
mod gpu_support;
#[path = "gpu_fake_driver/kernels.rs"]
mod kernels;

use std::ffi::{CString, c_char, c_longlong};
use std::sync::atomic::Ordering;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use ferrocoll::core::backend::Mc;
use ferrocoll::ee::cuda::{StreamInput, StreamWait};
use ferrocoll::{
    BufferInfo, CollArgs, CollBuffer, CollFlags, CollType, Config, CudaStreamEe, DataType, MemRef, MemType, ReduceOp,
    Status,
};
use ferrocoll_cuda::sys::driver::{self as sys, CUstream, cudaError_enum as E};
use ferrocoll_mc::{CudaMc, DEFAULT_DEVICE_CACHE_LIMIT};
use ferrocoll_tests::fake_cuda::{self, Report};
use ferrocoll_tests::native::required;
use ferrocoll_tests::world;
use gpu_support::stream::{Requests, ok, ordered_rounds, ordered_rounds_on, ordered_rounds_with};
use gpu_support::{DevBuf, Kind};

/// The driver settings of one scenario.
#[derive(Default)]
struct Knobs {
    env: Vec<(&'static str, String)>,
    /// Entry points the fake leaves out.
    hidden: &'static [&'static str],
    /// Whether the scenario compiles kernels (NVRTC).
    nvrtc: bool,
}

fn knobs() -> Knobs {
    Knobs::default()
}

impl Knobs {
    fn env(mut self, key: &'static str, value: impl ToString) -> Knobs {
        self.env.push((key, value.to_string()));
        self
    }

    fn without(mut self, symbols: &'static [&'static str]) -> Knobs {
        self.hidden = symbols;
        self
    }

    fn nvrtc(mut self) -> Knobs {
        self.nvrtc = true;
        self
    }
}

/// Run scenario `test` (its path as the harness names it): in the child,
/// `child` on the fake with `knobs`; in the parent, `parent` on the fake's
/// report and the child's output. Prints that it skipped where the fake (or
/// NVRTC, if needed) is missing; the `REQUIRE_*` switches make that a failure.
fn scenario(test: &str, knobs: Knobs, child: impl FnOnce(), parent: impl FnOnce(&Report, &str)) {
    if fake_cuda::is_child() {
        child();
        fake_cuda::assert_fake_loaded(test);
        return;
    }
    let lib = if knobs.hidden.is_empty() {
        fake_cuda::fake().map(|f| f.dir().to_path_buf())
    } else {
        fake_cuda::fake_without(knobs.hidden)
    };
    let lib = match lib {
        Ok(lib) => lib,
        Err(why) => return fake_cuda::skip(test, &why),
    };
    if knobs.nvrtc && !fake_cuda::nvrtc_reachable() {
        assert!(!required("REQUIRE_NVRTC"), "{test}: REQUIRE_NVRTC=1, but no libnvrtc.so.13 (scripts/fetch-nvrtc.sh)");
        eprintln!("{test}: skipped: it compiles kernels, and no libnvrtc.so.13 is found (scripts/fetch-nvrtc.sh)");
        return;
    }
    // One kernel-compiling child at a time: with a cold NVRTC disk cache the
    // first compiles (seconds) and the others then read its PTX.
    static COMPILING: Mutex<()> = Mutex::new(());
    let _one = knobs.nvrtc.then(|| COMPILING.lock().unwrap_or_else(|p| p.into_inner()));
    let env: Vec<(&str, &str)> = knobs.env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let run = fake_cuda::run(test, &lib, &env).unwrap_or_else(|e| panic!("{e}"));
    parent(&run.report, &run.output);
}

/// A counter of the fake driver of this (child) process, now: a key of its
/// report (`fake_cuda_counter`, see `fake_cuda.h`).
fn counter(key: &str) -> i64 {
    type Counter = unsafe extern "C" fn(*const c_char) -> c_longlong;
    static LIB: OnceLock<libloading::Library> = OnceLock::new();
    assert!(fake_cuda::is_child(), "fake driver counters exist only in a child on the fake");
    // SAFETY: in a child the loader path starts with the fake, which is
    // already loaded (under its soname): this takes one more reference to it
    // and runs no initialiser again.
    let lib = LIB.get_or_init(|| unsafe { libloading::Library::new("libcuda.so.1") }.expect("the fake driver"));
    // SAFETY: core.c defines fake_cuda_counter with exactly this C signature.
    let f = unsafe { lib.get::<Counter>(b"fake_cuda_counter\0") }.expect("fake_cuda_counter");
    let key = CString::new(key).expect("a key without NUL");
    // SAFETY: key is NUL-terminated and outlives the call, which only reads it.
    unsafe { f(key.as_ptr()) }
}

/// The primary context references of device `d` the process holds now.
fn held(d: usize) -> i64 {
    counter(&format!("primary.{d}.retains")) - counter(&format!("primary.{d}.releases"))
}

/// Panic unless the report shows nothing left unbalanced (see `Report::teardown_problems`).
fn balanced(test: &str, report: &Report, output: &str) {
    let problems = report.teardown_problems();
    assert!(problems.is_empty(), "{test}: {}\n{output}", problems.join(", "));
}

/// The fake is only worth its tests if its streams really run behind the
/// host and really wait: a 64-bit and a (cyclic) 32-bit wait hold back the
/// work queued after them, and the event recorded after them, until the
/// host raises the value; work on a non-blocking stream does not hold back
/// the legacy stream's copies.
#[test]
fn the_fake_holds_stream_work_behind_a_wait_until_the_value_is_reached() {
    const TEST: &str = "the_fake_holds_stream_work_behind_a_wait_until_the_value_is_reached";
    scenario(
        TEST,
        knobs(),
        || {
            let driver = ferrocoll_cuda::driver().expect("the fake passes the probe");
            gpu_support::bind();
            let flag = ferrocoll_cuda::HostAlloc::new(driver.device(0).unwrap().context(), 64).expect("flag");
            let buf = DevBuf::from_host(&[0u8; 4096], Kind::Device);
            let mut stream: CUstream = std::ptr::null_mut();
            let mut event = std::ptr::null_mut();
            // SAFETY: valid out-pointers; device 0's context is current (bind).
            unsafe {
                ok(sys::cuStreamCreate(&mut stream, 1), "cuStreamCreate");
                ok(sys::cuEventCreate(&mut event, 2), "cuEventCreate");
            }
            let query = || {
                // SAFETY: the stream and the event are live until destroyed at the end.
                unsafe { (sys::cuStreamQuery(stream), sys::cuEventQuery(event)) }
            };
            let word = |w: usize| flag.atomic_u64(w).expect("a word of the flag");
            // (64-bit wait, value), then (32-bit wait at word 1, which starts just below wrapping).
            word(1).store(0xffff_fff0, Ordering::Release);
            let mut before = vec![0u8; 4096];
            for (wide, start, wait_for, raise_to) in [(true, 0u64, 1u64, 1u64), (false, 0xffff_fff0, 5, 6)] {
                let fill = if wide { 7u32 } else { 9 };
                let addr = flag.device_ptr() + if wide { 0 } else { 8 };
                // SAFETY: addr maps the live flag; buf holds 1024 u32; stream and event are live.
                unsafe {
                    let r = if wide {
                        sys::cuStreamWaitValue64_v2(stream, addr, wait_for, 0)
                    } else {
                        sys::cuStreamWaitValue32_v2(stream, addr, wait_for as u32, 0)
                    };
                    ok(r, "cuStreamWaitValue");
                    ok(sys::cuMemsetD32Async(buf.addr() as u64, fill, 1024, stream), "cuMemsetD32Async");
                    ok(sys::cuEventRecord(event, stream), "cuEventRecord");
                }
                let start_at = Instant::now();
                while start_at.elapsed() < Duration::from_millis(30) {
                    assert_eq!(query(), (E::CUDA_ERROR_NOT_READY, E::CUDA_ERROR_NOT_READY), "wide {wide}");
                    // A copy on the legacy stream does not wait for a
                    // non-blocking stream (cuCtxSynchronize would: as on a GPU).
                    let mut now = [0xffu8; 4096];
                    // SAFETY: buf holds 4096 bytes; now is ours; the copy is synchronous.
                    ok(unsafe { sys::cuMemcpyDtoH_v2(now.as_mut_ptr().cast(), buf.addr() as u64, 4096) }, "copy");
                    assert!(now[..] == before[..], "wide {wide}: the memset ran before the wait");
                    std::thread::sleep(Duration::from_millis(5));
                }
                let w = if wide { 0 } else { 1 };
                assert_eq!(word(w).load(Ordering::Acquire), start);
                word(w).store(raise_to, Ordering::Release);
                // SAFETY: the stream is live.
                ok(unsafe { sys::cuStreamSynchronize(stream) }, "cuStreamSynchronize");
                assert_eq!(query(), (E::CUDA_SUCCESS, E::CUDA_SUCCESS), "wide {wide}");
                let want: Vec<u8> = std::iter::repeat_n(fill.to_le_bytes(), 1024).flatten().collect();
                assert_eq!(buf.read(), want, "wide {wide}: the memset after the wait");
                before = want;
            }
            // SAFETY: both are idle (synchronised) and used no more.
            unsafe {
                ok(sys::cuEventDestroy_v2(event), "cuEventDestroy");
                ok(sys::cuStreamDestroy_v2(stream), "cuStreamDestroy");
            }
        },
        |report, output| {
            assert!(report.get("waits.blocked") >= 2, "{output}");
            assert!(report.get("events.not_ready") >= 2, "{output}");
            balanced(TEST, report, output);
        },
    );
}

/// Stream memory writes run in stream order: a 64-bit and a 32-bit write
/// queued behind a wait leave their words alone until the wait passes, and
/// then hold their values (the 32-bit one only its 4 bytes).
#[test]
fn the_fake_writes_stream_values_only_when_the_stream_reaches_them() {
    const TEST: &str = "the_fake_writes_stream_values_only_when_the_stream_reaches_them";
    scenario(
        TEST,
        knobs(),
        || {
            let driver = ferrocoll_cuda::driver().expect("the fake passes the probe");
            gpu_support::bind();
            let flag = ferrocoll_cuda::HostAlloc::new(driver.device(0).unwrap().context(), 64).expect("flag");
            let word = |w: usize| flag.atomic_u64(w).expect("a word of the flag");
            word(2).store(0xaaaa_aaaa_0000_0000, Ordering::Release);
            let mut stream: CUstream = std::ptr::null_mut();
            // SAFETY: valid out-pointer; device 0's context is current (bind);
            // the addresses map the live flag, which outlives the stream's work
            // (synchronised below).
            unsafe {
                ok(sys::cuStreamCreate(&mut stream, 1), "cuStreamCreate");
                ok(sys::cuStreamWaitValue64_v2(stream, flag.device_ptr(), 1, 0), "cuStreamWaitValue64");
                ok(sys::cuStreamWriteValue64_v2(stream, flag.device_ptr() + 8, 0x1234_5678_9abc, 0), "write64");
                ok(sys::cuStreamWriteValue32_v2(stream, flag.device_ptr() + 16, 7, 0), "write32");
            }
            std::thread::sleep(Duration::from_millis(30));
            assert_eq!((word(1).load(Ordering::Acquire), word(2).load(Ordering::Acquire)), (0, 0xaaaa_aaaa_0000_0000));
            word(0).store(1, Ordering::Release);
            // SAFETY: the stream is live; destroyed once idle.
            unsafe {
                ok(sys::cuStreamSynchronize(stream), "cuStreamSynchronize");
                ok(sys::cuStreamDestroy_v2(stream), "cuStreamDestroy");
            }
            assert_eq!(word(1).load(Ordering::Acquire), 0x1234_5678_9abc);
            assert_eq!(word(2).load(Ordering::Acquire), 0xaaaa_aaaa_0000_0007, "a 32-bit write wrote 4 bytes");
        },
        |report, output| {
            assert_eq!(report.calls("cuStreamWriteValue64_v2"), 1, "{output}");
            assert_eq!(report.calls("cuStreamWriteValue32_v2"), 1, "{output}");
            balanced(TEST, report, output);
        },
    );
}

/// Scratch, pinned memory and copies of the memory component: afterwards
/// the only device and managed blocks alive are those its pools keep (as
/// designed: pools live for the process), a pinned block is unregistered
/// when dropped and the pinned pool keeps at most its cap, and device 0's
/// primary context is held once (the driver probe's, kept to the end).
#[test]
fn the_memory_component_leaves_only_its_pools_blocks() {
    const TEST: &str = "the_memory_component_leaves_only_its_pools_blocks";
    scenario(
        TEST,
        knobs().env("FAKE_CUDA_STREAM_DELAY_US", 50),
        || {
            let mc = CudaMc::probe().expect("the fake passes the probe");
            let managed = mc.managed();
            let data: Vec<u8> = (0..5000u32).map(|i| (i * 31 % 251) as u8).collect();
            {
                let (a, b, m) = (mc.alloc(5000).unwrap(), mc.alloc(1000).unwrap(), managed.alloc(5000).unwrap());
                let h = mc.alloc_host(5000).unwrap();
                let mut back = vec![0u8; 5000];
                // SAFETY: data and back outlive the copies, which are synchronous.
                let (src, dst) = unsafe { (MemRef::from_slice(&data), MemRef::from_mut_slice(&mut back)) };
                mc.copy(a.mem(), src).unwrap();
                mc.copy(m.mem(), a.mem()).unwrap();
                mc.copy(h.mem(), m.mem()).unwrap();
                mc.copy(b.mem(), h.mem().range(4000, 1000).unwrap()).unwrap();
                // Overlapping ranges of one block (memmove semantics through scratch).
                mc.copy(a.mem().range(10, 4000).unwrap(), a.mem().range(0, 4000).unwrap()).unwrap();
                mc.copy(dst.range(0, 4000).unwrap(), a.mem().range(10, 4000).unwrap()).unwrap();
                mc.copy(dst.range(4000, 1000).unwrap(), b.mem()).unwrap();
                assert_eq!(&back[..4000], &data[..4000]);
                assert_eq!(&back[4000..], &data[4000..]);
            }
            assert_eq!(counter("live.device_bytes"), mc.cached_bytes().unwrap() as i64, "device blocks");
            assert_eq!(counter("live.managed_bytes"), managed.cached_bytes().unwrap() as i64, "managed blocks");
            let before = counter("live.registered");
            let pinned = mc.alloc_pinned(5000).unwrap();
            assert_eq!(counter("live.registered"), before + 1);
            drop(pinned);
            assert_eq!(counter("live.registered"), before, "a dropped PinnedHost is unregistered");
            assert!(counter("live.registered_bytes") as usize <= DEFAULT_DEVICE_CACHE_LIMIT);
            assert_eq!(held(0), 1, "the driver's reference on device 0's primary context");
        },
        |report, output| {
            assert_eq!(report.get("copies.overlapping"), 0, "an overlapping copy reached the driver");
            assert!(report.calls("cuMemcpyAsync") >= 7, "{output}");
            balanced(TEST, report, output);
        },
    );
}

/// Stream engines over their own stream and over a user's: created, posted
/// on, dropped — their streams, events and flags are destroyed, their
/// context references released, and nothing they queued is left running.
#[test]
fn stream_engines_leave_no_stream_event_flag_or_context_behind() {
    const TEST: &str = "stream_engines_leave_no_stream_event_flag_or_context_behind";
    scenario(
        TEST,
        knobs(),
        || {
            ferrocoll_cuda::driver().expect("the fake passes the probe");
            // Two engines in turn over their own streams (made and dropped by ordered_rounds).
            world::run(1, &Config::new(), |team, _| ordered_rounds(team, MemType::Host, 5, 4096));
            assert_eq!(held(0), 0, "the engine released its reference");
            // Staging device memory opens device 0 for the memory component,
            // whose reference is kept to the end of the process (by design).
            world::run(2, &Config::new(), |team, _| ordered_rounds(team, MemType::Cuda, 5, 4096));
            assert_eq!(held(0), 1, "the engines released their references; the component's is kept");
            assert_eq!((counter("live.streams"), counter("live.events")), (0, 0));
            assert_eq!(counter("live.host_alloc"), 0, "the engines' flags and the tests' buffers are freed");
            // An engine over a user's stream leaves the stream to its user.
            let ctx = {
                let ee = CudaStreamEe::new_stream(0).unwrap();
                ee.context()
            };
            gpu_support::bind();
            let mut stream: CUstream = std::ptr::null_mut();
            // SAFETY: valid out-pointer, a context is current.
            ok(unsafe { sys::cuStreamCreate(&mut stream, 1) }, "cuStreamCreate");
            // SAFETY: the stream stays valid until after the engine is dropped.
            let ee = unsafe { CudaStreamEe::from_raw(stream.cast()) }.unwrap();
            assert_eq!(ee.context(), ctx, "the user's stream is in the same primary context");
            drop(ee);
            assert_eq!((counter("live.streams"), counter("live.events")), (1, 0));
            // SAFETY: the engine is gone and synchronised the stream.
            ok(unsafe { sys::cuStreamDestroy_v2(stream) }, "cuStreamDestroy");
        },
        |report, output| {
            assert!(report.calls("cuStreamWaitValue64_v2") > 0, "{output}");
            assert!(report.calls("cuEventRecord") >= 15, "{output}");
            balanced(TEST, report, output);
        },
    );
}

/// Staging copies of a collective on device memory run behind the thread
/// that progresses it: with every stream operation taking seconds, posting
/// and testing return at once, and the collective ends in its timeout with
/// a message that names what it waited for (the copies used to be waited
/// for with `cuStreamSynchronize` inside the post: a copy stuck behind
/// other stream work hung the rank with no message).
#[test]
fn staging_copies_never_block_the_progress_thread() {
    const TEST: &str = "staging_copies_never_block_the_progress_thread";
    const DELAY: Duration = Duration::from_secs(4);
    scenario(
        TEST,
        knobs().env("FAKE_CUDA_STREAM_DELAY_US", DELAY.as_micros()),
        || {
            world::run(1, &Config::new(), |team, _| {
                let (src, dst) = (DevBuf::new(4096, Kind::Device), DevBuf::new(4096, Kind::Device));
                let info = |b: &DevBuf| {
                    CollBuffer::Info(BufferInfo {
                        buffer: b.addr().cast(),
                        count: 1024,
                        datatype: DataType::Float32,
                        mem_type: MemType::Cuda,
                    })
                };
                let mut a = CollArgs::new(CollType::Allreduce);
                a.op = ReduceOp::Sum;
                (a.src, a.dst) = (info(&src), info(&dst));
                a.flags = CollFlags::TIMEOUT;
                a.timeout = 0.3;
                let started = Instant::now();
                // SAFETY: src and dst outlive the request (declared before it).
                let mut req = unsafe { team.collective_init(&a) }.expect("init");
                req.post().expect("post");
                assert_eq!(req.test().expect("test"), Status::InProgress);
                let took = started.elapsed();
                assert!(took < DELAY / 2, "init, post and test took {took:?}: they waited for the device");
                let e = req.wait().expect_err("a collective whose copies take seconds must time out");
                assert_eq!(e.status(), Status::TimedOut, "{e}");
                assert!(e.to_string().contains("staging copies"), "the timeout does not say what it waited for: {e}");
            });
        },
        |report, output| {
            assert!(report.calls("cuEventQuery") > 0, "the copy was not polled: {output}");
            balanced(TEST, report, output);
        },
    );
}

/// A one-shot collective on device memory triggered on a stream hands its
/// staging copies to the stream engine: they run on the engine's stream
/// around the collective (none on a default stream, where they could queue
/// behind the engine's own wait), the results are in stream order, and
/// the host copies outlive the copies back (freed memory in use would be
/// counted by the fake), also when the request is dropped at once.
#[test]
fn one_shot_triggered_collectives_stage_on_the_engine_stream() {
    const TEST: &str = "one_shot_triggered_collectives_stage_on_the_engine_stream";
    scenario(
        TEST,
        knobs().env("FAKE_CUDA_STREAM_DELAY_US", 100),
        || {
            for input in [StreamInput::Event, StreamInput::Write] {
                world::run(2, &Config::new(), move |team, _| {
                    ordered_rounds_with(team, Some(input.into()), MemType::Cuda, 6, 1 << 16, Requests::OneShot)
                });
            }
            assert_eq!(counter("copies.async_on_default_stream"), 0, "a staging copy went to a default stream");
        },
        |report, output| {
            assert!(
                report.calls("cuMemcpyAsync") >= 2 * 2 * 6 * 2,
                "the staging copies did not reach the driver: {output}"
            );
            assert!(report.calls("cuStreamWriteValue64_v2") >= 2 * 6, "the write input was not used: {output}");
            balanced(TEST, report, output);
        },
    );
}

/// The ordering check of `gpu_stream.rs` on a device without 64-bit
/// stream memory operations (the engine waits with `cuStreamWaitValue32` on
/// the flag's low half) and with a stream slower than the host, so that
/// every post finds its input event pending.
#[test]
fn triggered_posts_keep_stream_order_with_32_bit_waits_on_a_slow_stream() {
    const TEST: &str = "triggered_posts_keep_stream_order_with_32_bit_waits_on_a_slow_stream";
    scenario(
        TEST,
        knobs().env("FAKE_CUDA_WIDE", 0).env("FAKE_CUDA_STREAM_DELAY_US", 200),
        || {
            assert!(!CudaStreamEe::new_stream(0).unwrap().wide_waits(), "64-bit waits on a device without them");
            ten_rounds_on_two_ranks_on_both_memories();
        },
        |report, output| {
            assert_eq!(report.calls("cuStreamWaitValue64_v2"), 0, "{output}");
            assert!(report.calls("cuStreamWaitValue32_v2") >= 40, "{output}");
            assert!(report.get("events.not_ready") > 0, "no post found its stream busy: {output}");
            balanced(TEST, report, output);
        },
    );
}

/// As above with the `write` input (`UCC_EE_CUDA_STREAM_INPUT=write`, read
/// from the environment when the engine is created): the stream writes each
/// post's number with `cuStreamWriteValue32` on the low half of the
/// `started` word, which progress compares cyclically.
#[test]
fn triggered_posts_keep_stream_order_with_32_bit_writes_on_a_slow_stream() {
    const TEST: &str = "triggered_posts_keep_stream_order_with_32_bit_writes_on_a_slow_stream";
    scenario(
        TEST,
        knobs().env("FAKE_CUDA_WIDE", 0).env("FAKE_CUDA_STREAM_DELAY_US", 200).env("UCC_EE_CUDA_STREAM_INPUT", "write"),
        || {
            let ee = CudaStreamEe::new_stream(0).unwrap();
            assert_eq!(ee.input(), StreamInput::Write, "the knob of the environment");
            assert!(!ee.wide_waits(), "64-bit waits on a device without them");
            drop(ee);
            ten_rounds_on_two_ranks_on_both_memories();
        },
        |report, output| {
            assert_eq!(report.calls("cuStreamWaitValue64_v2") + report.calls("cuStreamWriteValue64_v2"), 0, "{output}");
            assert!(report.calls("cuStreamWriteValue32_v2") >= 40, "{output}");
            balanced(TEST, report, output);
        },
    );
}

/// With `UCC_EE_CUDA_STREAM_WAIT=kernel` (read from the environment when the
/// engine is created) the stream is held by `fc_flag_wait`, one thread
/// spinning on the flag, instead of a stream memory wait; stream order holds
/// on pinned and on device memory, no stream memory wait is enqueued, and
/// the kernel is loaded by the first engine of the context only.
#[test]
fn triggered_posts_keep_stream_order_with_the_kernel_wait() {
    const TEST: &str = "triggered_posts_keep_stream_order_with_the_kernel_wait";
    scenario(
        TEST,
        knobs().nvrtc().env("FAKE_CUDA_STREAM_DELAY_US", 200).env("UCC_EE_CUDA_STREAM_WAIT", "kernel"),
        || {
            let ee = CudaStreamEe::new_stream(0).unwrap();
            assert_eq!(ee.wait_kind(), StreamWait::Kernel, "the knob of the environment");
            // Kept to the end: the engines below share its context (a context
            // released by its last holder goes, and its modules with it).
            ten_rounds_on_two_ranks_on_both_memories();
            drop(ee);
        },
        |report, output| {
            let memops = report.calls("cuStreamWaitValue64_v2") + report.calls("cuStreamWaitValue32_v2");
            assert_eq!(memops, 0, "stream memory waits with the kernel wait\n{output}");
            // One wait kernel per post (2 ranks, 10 rounds, 2 memory types), and one per engine at creation.
            assert!(report.calls("cuLaunchKernel") >= 2 * 10 * 2, "{output}");
            // Five engines in one context load the wait kernel once (loading
            // may wait for a held stream); the reductions' kernels may be one more.
            let loads = report.calls("cuModuleLoadData");
            assert!(loads <= 2, "{loads} module loads: the wait kernel loaded per engine\n{output}");
            balanced(TEST, report, output);
        },
    );
}

/// [`ordered_rounds`]: 10 rounds on 2 ranks, on pinned host memory and on
/// device memory, with the engine the environment asks for.
fn ten_rounds_on_two_ranks_on_both_memories() {
    for mem_type in [MemType::Host, MemType::Cuda] {
        world::run(2, &Config::new(), move |team, _| ordered_rounds(team, mem_type, 10, 1 << 16));
    }
}

/// With the `write` input a trigger learns that its stream reached the post
/// from host memory: no `cuEventQuery` while posts wait for a slow stream
/// (on pinned host memory, where nothing else queries events), while the
/// `event` input queries on the same rounds.
#[test]
fn a_trigger_with_the_write_input_makes_no_event_query() {
    const TEST: &str = "a_trigger_with_the_write_input_makes_no_event_query";
    scenario(
        TEST,
        knobs().env("FAKE_CUDA_STREAM_DELAY_US", 200),
        || {
            let rounds = |input: StreamInput| {
                let (queries, writes) = (counter("calls.cuEventQuery"), counter("calls.cuStreamWriteValue64_v2"));
                for size in [1, 2] {
                    world::run(size, &Config::new(), move |team, _| {
                        ordered_rounds_on(team, Some(input.into()), MemType::Host, 10, 1 << 16)
                    });
                }
                (counter("calls.cuEventQuery") - queries, counter("calls.cuStreamWriteValue64_v2") - writes)
            };
            let (queries, writes) = rounds(StreamInput::Write);
            assert_eq!(queries, 0, "event queries with the write input");
            // One write per post (1 + 2 ranks, 10 rounds), and one per engine at creation.
            assert_eq!(writes, 3 * 10 + 3, "writes of the started word");
            let (queries, writes) = rounds(StreamInput::Event);
            assert!(queries > 0, "the event input made no event query: the check above proves nothing");
            assert_eq!(writes, 0, "writes with the event input");
        },
        |report, output| balanced(TEST, report, output),
    );
}

/// A host-driven triggered post does not query the event it has just
/// recorded (it has practically never completed by then, and the query is
/// three driver calls with its capture-mode exchange); progress and wait do.
#[test]
fn a_triggered_post_does_not_query_the_event_it_just_recorded() {
    const TEST: &str = "a_triggered_post_does_not_query_the_event_it_just_recorded";
    scenario(
        TEST,
        knobs(),
        || {
            world::run(1, &Config::new(), |team, _| {
                let (ee, stream) = gpu_support::stream::engine_with(StreamInput::Event);
                let (src, dst) = (gpu_support::stream::Buf::pinned(4), gpu_support::stream::Buf::pinned(4));
                // SAFETY: the buffers outlive the request (dropped first, below).
                let mut req = unsafe { gpu_support::stream::allreduce(team, &src, &dst, world::TEST_TIMEOUT) };
                for round in 0..3 {
                    let queries = counter("calls.cuEventQuery");
                    req.triggered_post(&ee, &gpu_support::stream::COMPUTE).expect("triggered_post");
                    assert_eq!(counter("calls.cuEventQuery"), queries, "round {round}: queried at post");
                    req.wait().expect("wait");
                    assert!(counter("calls.cuEventQuery") > queries, "round {round}: wait never queried the event");
                    while ee.get_event().is_some() {}
                }
                drop(req);
                gpu_support::stream::sync(stream);
            });
        },
        |report, output| balanced(TEST, report, output),
    );
}

/// A pointer query from a thread without a context, on a driver that
/// wants one for it: the component binds the device's context, asks
/// again, and gives the thread nothing to pop.
#[test]
fn the_pointer_query_binds_a_context_only_when_the_driver_wants_one() {
    const TEST: &str = "the_pointer_query_binds_a_context_only_when_the_driver_wants_one";
    scenario(
        TEST,
        knobs().env("FAKE_CUDA_QUERY_NEEDS_CTX", 1),
        || {
            let mc = CudaMc::probe().unwrap();
            let (dev, managed) = (mc.alloc(100).unwrap(), mc.managed().alloc(100).unwrap());
            let (d, m) = (dev.mem().addr() as usize, managed.mem().addr() as usize);
            let host = [0u8; 16];
            let h = host.as_ptr() as usize;
            let got = std::thread::spawn(move || {
                let mc = CudaMc::probe().unwrap();
                [d, m, h].map(|a| mc.resolve(a as *const u8))
            })
            .join()
            .unwrap();
            assert_eq!(got, [MemType::Cuda, MemType::CudaManaged, MemType::Host]);
        },
        |report, output| {
            assert!(report.errors("cuPointerGetAttributes") >= 1, "the driver never refused a query: {output}");
            balanced(TEST, report, output);
        },
    );
}
