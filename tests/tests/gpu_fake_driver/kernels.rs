//! Device reductions on the fake: the NVRTC-compiled PTX is loaded (the
//! fake checks its version, target and entries) and each launch runs the
//! same-named kernel compiled for the CPU. Rounds of launches on a slow
//! stream, a module the driver refuses, a launch that fails halfway, a
//! device fault, and two devices.

use ferrocoll::core::backend::{Mc, ReduceSpec};
use ferrocoll::{DataType, MemRef, MemType, ReduceOp, Status};
use ferrocoll_cuda::{Context, DeviceId, PrimaryContext};
use ferrocoll_kernels::MAX_SOURCES;
use ferrocoll_mc::CudaMc;

use super::{balanced, counter, held, knobs, scenario};
use crate::gpu_support::reduce::check_reduction;
use crate::gpu_support::{DevBuf, Kind};

/// Kernel launches of one reduction of `n` sources: 8 in the first, 7 in each later one.
fn launches(n: usize) -> i64 {
    1 + n.saturating_sub(MAX_SOURCES).div_ceil(MAX_SOURCES - 1) as i64
}

/// (dtype, op, sources, in place) of the rounds scenario.
const ROUNDS: [(DataType, ReduceOp, usize, bool); 8] = [
    (DataType::Float32, ReduceOp::Sum, 16, false),
    (DataType::Int32, ReduceOp::Prod, 17, true),
    (DataType::Bfloat16, ReduceOp::Avg, 9, false),
    (DataType::Float16, ReduceOp::Max, 23, false),
    (DataType::Float64, ReduceOp::Minloc, 10, true),
    (DataType::Uint8, ReduceOp::Bxor, 8, false),
    (DataType::Float32Complex, ReduceOp::Prod, 15, false),
    (DataType::Float8E4M3, ReduceOp::Avg, 30, false),
];

/// Reductions beyond 8 sources take several launches on one stream, each
/// later one reading what the one before wrote; on a stream slower than the
/// host, results still match the host kernels (bit for bit where one
/// rounding is promised) and the float64 reference.
#[test]
fn reductions_in_rounds_on_a_slow_stream_match_the_host() {
    const TEST: &str = "kernels::reductions_in_rounds_on_a_slow_stream_match_the_host";
    scenario(
        TEST,
        knobs().nvrtc().env("FAKE_CUDA_STREAM_DELAY_US", 300),
        || {
            let mc = CudaMc::probe().unwrap();
            crate::gpu_support::bind();
            for (k, (dt, op, n, in_place)) in ROUNDS.into_iter().enumerate() {
                check_reduction(&mc, dt, op, n, 1000 + k, 0x5eed + k as u64, k % 3, in_place);
            }
        },
        |report, output| {
            let want: i64 = ROUNDS.iter().map(|(_, _, n, _)| launches(*n)).sum();
            assert_eq!(report.get("kernels.run"), want, "launches (rounds of 8, then 7): {output}");
            assert_eq!(report.calls("cuModuleLoadData"), 1, "the kernels are loaded once: {output}");
            balanced(TEST, report, output);
        },
    );
}

fn sum_spec(count: usize) -> ReduceSpec {
    ReduceSpec { dtype: DataType::Float32, op: ReduceOp::Sum, count, avg_divisor: None }
}

/// `n` device blocks of `count` f32, block i holding i + 1 everywhere, and a poisoned destination.
fn operands(n: usize, count: usize) -> (Vec<DevBuf>, DevBuf) {
    let blocks = (0..n)
        .map(|i| {
            let bytes: Vec<u8> = std::iter::repeat_n((i as f32 + 1.0).to_le_bytes(), count).flatten().collect();
            DevBuf::from_host(&bytes, Kind::Device)
        })
        .collect();
    let dst = DevBuf::new(count * 4, Kind::Device);
    dst.fill(0xa5);
    (blocks, dst)
}

fn cuda(b: &DevBuf) -> MemRef {
    // SAFETY: the blocks outlive every use of the MemRef in these scenarios.
    unsafe { MemRef::new(b.addr(), b.len(), MemType::Cuda) }
}

fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// PTX newer than the driver takes: every reduction is `NotSupported`
/// naming the load, the device and the driver's code, and the failure is
/// kept (the driver is not asked again).
#[test]
fn kernels_the_driver_refuses_are_not_supported_and_kept() {
    const TEST: &str = "kernels::kernels_the_driver_refuses_are_not_supported_and_kept";
    scenario(
        TEST,
        knobs().nvrtc().env("FAKE_CUDA_PTX_ISA", "8.0"),
        || {
            let mc = CudaMc::probe().unwrap();
            crate::gpu_support::bind();
            let (srcs, dst) = operands(2, 64);
            let srcs: Vec<MemRef> = srcs.iter().map(cuda).collect();
            for _ in 0..2 {
                let e = mc.reduce(cuda(&dst), &srcs, &sum_spec(64)).unwrap_err();
                assert_eq!(e.status(), Status::NotSupported, "{e}");
                for n in ["loading the kernels on CUDA device 0 (sm_90)", "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"] {
                    assert!(e.to_string().contains(n), "`{n}` is not in: {e}");
                }
            }
        },
        |report, output| {
            assert_eq!(report.calls("cuModuleLoadData"), 1, "{output}");
            assert_eq!(report.calls("cuLaunchKernel"), 0, "{output}");
            balanced(TEST, report, output);
        },
    );
}

/// The second launch of a 9-source reduction fails: the error names the
/// kernel and the call, the first launch has finished before the error is
/// returned (the caller may free the operands at once), and the next
/// reduction works.
#[test]
fn a_launch_that_fails_in_a_later_round_names_the_kernel_and_leaves_nothing_running() {
    const TEST: &str = "kernels::a_launch_that_fails_in_a_later_round_names_the_kernel_and_leaves_nothing_running";
    scenario(
        TEST,
        knobs().nvrtc().env("FAKE_CUDA_FAIL", "cuLaunchKernel:2").env("FAKE_CUDA_STREAM_DELAY_US", 20_000),
        || {
            let mc = CudaMc::probe().unwrap();
            crate::gpu_support::bind();
            {
                let (srcs, dst) = operands(9, 100);
                let refs: Vec<MemRef> = srcs.iter().map(cuda).collect();
                let e = mc.reduce(cuda(&dst), &refs, &sum_spec(100)).unwrap_err();
                assert_eq!(e.status(), Status::NoMessage, "{e}");
                for n in ["fc_reduce_float32_sum over 100 elements", "cuLaunchKernel failed", "CUDA_ERROR_UNKNOWN"] {
                    assert!(e.to_string().contains(n), "`{n}` is not in: {e}");
                }
                // The operands are freed here, at once.
            }
            let (srcs, dst) = operands(9, 100);
            let refs: Vec<MemRef> = srcs.iter().map(cuda).collect();
            mc.reduce(cuda(&dst), &refs, &sum_spec(100)).expect("the next reduction");
            assert!(floats(&dst.read()).iter().all(|&v| v == 45.0), "1 + 2 + ... + 9");
        },
        |report, output| {
            assert_eq!(report.get("injected.cuLaunchKernel"), 1, "{output}");
            balanced(TEST, report, output);
        },
    );
}

/// A kernel given memory the device cannot reach (pageable host memory
/// passed as `cuda`) faults on the device: the reduction fails with the
/// driver's illegal-address error naming the kernel, not a crash.
#[test]
fn a_device_fault_fails_the_reduction_naming_the_kernel() {
    const TEST: &str = "kernels::a_device_fault_fails_the_reduction_naming_the_kernel";
    scenario(
        TEST,
        knobs().nvrtc(),
        || {
            let mc = CudaMc::probe().unwrap();
            let (mut a, mut b) = (vec![1.0f32; 16], vec![2.0f32; 16]);
            // SAFETY: only the fake's device-accessibility check looks at them: the kernel never runs.
            let (ra, rb) = unsafe {
                (
                    MemRef::new(a.as_mut_ptr().cast(), 64, MemType::Cuda),
                    MemRef::new(b.as_mut_ptr().cast(), 64, MemType::Cuda),
                )
            };
            let e = mc.reduce(ra, &[ra, rb], &sum_spec(16)).unwrap_err();
            assert_eq!(e.status(), Status::NoMessage, "{e}");
            for n in ["fc_reduce_float32_sum over 16 elements", "CUDA_ERROR_ILLEGAL_ADDRESS"] {
                assert!(e.to_string().contains(n), "`{n}` is not in: {e}");
            }
            assert_eq!(a, vec![1.0; 16], "the faulting kernel wrote");
        },
        |report, output| assert_eq!(report.get("faults.illegal_address"), 1, "{output}"),
    );
}

/// Two devices: a thread whose user made device 1 current allocates,
/// copies and reduces there without ever touching device 0; a thread on
/// device 0 that reduces device-1 memory runs the kernel in device 1's
/// context (pushed, then popped: the thread keeps device 0 current), and
/// copies between the devices.
#[test]
fn a_process_on_device_1_leaves_device_0_alone_and_reductions_follow_the_destination() {
    const TEST: &str = "kernels::a_process_on_device_1_leaves_device_0_alone_and_reductions_follow_the_destination";
    scenario(
        TEST,
        knobs().nvrtc().env("FAKE_CUDA_DEVICES", 2),
        || {
            let _ = ferrocoll::Lib::new().expect("library");
            let user1 = PrimaryContext::retain(DeviceId::get(1).unwrap()).unwrap();
            user1.context().make_current().unwrap();
            let mc = CudaMc::probe().unwrap();
            let count = 256;
            let blocks: Vec<_> = (0..3).map(|_| mc.alloc(count * 4).unwrap()).collect();
            for (i, b) in blocks.iter().enumerate() {
                let v: Vec<u8> = std::iter::repeat_n((i as f32 + 1.0).to_le_bytes(), count).flatten().collect();
                // SAFETY: v outlives the synchronous copy.
                mc.copy(b.mem(), unsafe { MemRef::from_slice(&v) }).unwrap();
                assert_eq!(mc.device_of(b.mem().addr()), Some(1));
            }
            let dst = blocks[0].mem();
            let srcs: Vec<MemRef> = blocks.iter().map(|b| b.mem()).collect();
            mc.reduce(dst, &srcs, &sum_spec(count)).unwrap();
            assert_eq!(held(0), 0, "device 0's context was retained by a process that only uses device 1");
            let (d, addrs) = (dst.addr() as usize, srcs.iter().map(|m| m.addr() as usize).collect::<Vec<_>>());
            std::thread::spawn(move || {
                let user0 = PrimaryContext::retain(DeviceId::get(0).unwrap()).unwrap();
                user0.context().make_current().unwrap();
                let mc = CudaMc::probe().unwrap();
                // SAFETY: the blocks of the first thread live until it drops them after this join.
                let on1 = |a: usize| unsafe { MemRef::new(a as *mut u8, count * 4, MemType::Cuda) };
                let srcs: Vec<MemRef> = addrs.iter().map(|&a| on1(a)).collect();
                let pushes = counter("ctx.pushes");
                mc.reduce(on1(d), &srcs, &sum_spec(count)).unwrap();
                assert!(counter("ctx.pushes") > pushes, "device 1's context was not pushed");
                assert_eq!(counter("ctx.pushes"), counter("ctx.pops"));
                assert_eq!(Context::current().unwrap(), Some(user0.context()), "the thread's context changed");
                let here = mc.alloc(count * 4).unwrap();
                assert_eq!(mc.device_of(here.mem().addr()), Some(0));
                mc.copy(here.mem(), on1(d)).unwrap();
                let mut out = vec![0u8; count * 4];
                // SAFETY: out outlives the synchronous copy.
                mc.copy(unsafe { MemRef::from_mut_slice(&mut out) }, here.mem()).unwrap();
                // (1 + 2 + 3) on device 1, then that plus 2 + 3 again.
                assert!(floats(&out).iter().all(|&v| v == 11.0), "{:?}", &floats(&out)[..4]);
            })
            .join()
            .unwrap();
        },
        |report, output| {
            assert_eq!(
                report.calls("cuModuleLoadData"),
                1,
                "reductions of device-1 memory all ran on device 1: {output}"
            );
            balanced(TEST, report, output);
        },
    );
}
