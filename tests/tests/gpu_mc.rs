//! The CUDA memory component on a GPU: scratch allocation, pinned memory,
//! the pointer query, copies in every direction, and device reductions of
//! every dtype × op with 1 to 9 sources against the host kernels.
//!
//! Where there is no GPU every test runs on the fake CUDA driver
//! (`ferrocoll_tests::gpu::skip_unless_gpu`: the kernels compiled for the
//! CPU), or prints that it skipped where the fake cannot be built; under
//! `REQUIRE_GPU=1` a missing GPU fails instead.

mod gpu_support;

use ferrocoll::core::backend::{Mc, McSet, ReduceSpec};
use ferrocoll::{DataType, MemRef, MemType, ReduceOp, Status};
use ferrocoll_mc::{CudaMc, HostMc};
use ferrocoll_tests::dtypes::{device_reduction_pairs, elem_size};
use ferrocoll_tests::gpu::{skip_unless_gpu, skip_unless_nvrtc};
use ferrocoll_tests::rng::{Rng, hash};
use gpu_support::reduce::{COUNTS, check_reduction, mem};
use gpu_support::{DevBuf, Kind, bind};

/// The component, after the gate said there is a GPU.
fn mc() -> CudaMc {
    CudaMc::probe().expect("a GPU is present, so the probe must succeed")
}

/// A fresh seed per run (printed, so a failure can be replayed by hand).
fn fresh_seed(test: &str) -> u64 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let seed = hash(&[t, u64::from(std::process::id())]);
    eprintln!("{test}: seed {seed}");
    seed
}

fn kind_type(k: Kind) -> MemType {
    match k {
        Kind::Device => MemType::Cuda,
        Kind::Managed => MemType::CudaManaged,
        Kind::Pinned => MemType::Host,
    }
}

#[test]
fn probe_finds_the_device_and_joins_the_default_set() {
    if skip_unless_gpu("probe_finds_the_device_and_joins_the_default_set") {
        return;
    }
    let mc = mc();
    assert!(mc.device_count() >= 1);
    let (major, minor) = mc.compute_capability(0).unwrap();
    assert!(major >= 7, "compute capability {major}.{minor}");
    let names: Vec<_> = ferrocoll_mc::default_mcs().iter().map(|m| m.name()).collect();
    assert_eq!(names, ["host", "cuda", "cuda_managed"]);
    assert_eq!(mc.managed().mem_type(), MemType::CudaManaged);
    let bad = mc.compute_capability(1 << 20).unwrap_err();
    assert_eq!(bad.status(), Status::InvalidParam, "{bad}");
}

#[test]
fn scratch_is_device_memory_from_a_pool() {
    if skip_unless_gpu("scratch_is_device_memory_from_a_pool") {
        return;
    }
    let mc = mc();
    for len in [1usize, 255, 4096, 1 << 20, (1 << 20) + 3] {
        let s = mc.alloc(len).unwrap();
        let m = s.mem();
        assert_eq!((m.len(), m.mem_type()), (len, MemType::Cuda));
        assert_eq!(m.addr() as usize % 256, 0, "driver alignment");
        assert_eq!(mc.resolve(m.addr()), MemType::Cuda);
        assert_eq!(mc.device_of(m.addr()), Some(0));
        // The last byte is inside the allocation: the query still says device.
        assert_eq!(mc.resolve(m.addr().wrapping_add(len - 1)), MemType::Cuda);
        let addr = m.addr();
        drop(s);
        assert!(mc.cached_bytes().unwrap() >= len, "freed scratch is cached");
        let again = mc.alloc(len).unwrap();
        assert_eq!(again.mem().addr(), addr, "the same size class reuses the block");
    }
    assert!(mc.alloc(0).unwrap().mem().is_empty());
    let managed = mc.managed();
    let s = managed.alloc(1000).unwrap();
    assert_eq!(s.mem().mem_type(), MemType::CudaManaged);
    assert_eq!(mc.resolve(s.mem().addr()), MemType::CudaManaged);
    assert!(managed.owns(s.mem().addr()) && !mc.owns(s.mem().addr()));
    let staging = mc.alloc_host(4096).unwrap();
    assert_eq!(staging.mem().mem_type(), MemType::Host);
    assert_eq!(mc.resolve(staging.mem().addr()), MemType::Host, "pinned staging is host memory");
}

#[test]
fn pinned_memory_is_mapped_for_the_device() {
    if skip_unless_gpu("pinned_memory_is_mapped_for_the_device") {
        return;
    }
    let mc = mc();
    let p = mc.alloc_pinned(4096).unwrap();
    assert_eq!(p.len(), 4096);
    assert_ne!(p.device_ptr(), 0);
    assert_eq!(mc.resolve(p.host_ptr()), MemType::Host);
    let pattern: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 3) as u8).collect();
    // SAFETY: the block has 4096 bytes and nothing else uses it now.
    unsafe { std::ptr::copy_nonoverlapping(pattern.as_ptr(), p.host_ptr(), 4096) };
    // Copy from the device view into device memory, and back through the host view.
    let dev = DevBuf::new(4096, Kind::Device);
    // SAFETY: device_ptr maps the same 4096 bytes, live while p is.
    let via_device = unsafe { MemRef::new(p.device_ptr() as *mut u8, 4096, MemType::Cuda) };
    mc.copy(mem(&dev, MemType::Cuda), via_device).unwrap();
    assert_eq!(dev.read(), pattern);
    dev.fill(0x5a);
    // SAFETY: p outlives the MemRef.
    mc.copy(unsafe { p.mem() }, mem(&dev, MemType::Cuda)).unwrap();
    // SAFETY: the copy has finished (synchronous) and nothing writes the block.
    let back = unsafe { std::slice::from_raw_parts(p.host_ptr(), 4096) };
    assert!(back.iter().all(|&b| b == 0x5a));
}

#[test]
fn the_pointer_query_tells_every_kind_of_memory_apart() {
    if skip_unless_gpu("the_pointer_query_tells_every_kind_of_memory_apart") {
        return;
    }
    let mc = mc();
    let mcs = McSet::new(ferrocoll_mc::default_mcs());
    let host = [1u8; 64];
    let dev = DevBuf::new(1 << 16, Kind::Device);
    let managed = DevBuf::new(1 << 16, Kind::Managed);
    let pinned = DevBuf::new(1 << 16, Kind::Pinned);
    let cases: [(&str, *const u8, MemType); 6] = [
        ("pageable host", host.as_ptr(), MemType::Host),
        ("null", std::ptr::null(), MemType::Host),
        ("device", dev.addr(), MemType::Cuda),
        ("inside device", dev.addr().wrapping_add(1000), MemType::Cuda),
        ("managed", managed.addr(), MemType::CudaManaged),
        ("pinned host", pinned.addr(), MemType::Host),
    ];
    for (what, p, want) in cases {
        assert_eq!(mc.resolve(p), want, "{what}");
        assert_eq!(mcs.resolve(p), want, "{what} through the library's set");
    }
    // From a thread that has no current context.
    let addr = dev.addr() as usize;
    let got = std::thread::spawn(move || CudaMc::probe().unwrap().resolve(addr as *const u8)).join().unwrap();
    assert_eq!(got, MemType::Cuda);
}

#[test]
fn copies_work_between_every_pair_of_memory_kinds() {
    if skip_unless_gpu("copies_work_between_every_pair_of_memory_kinds") {
        return;
    }
    let mc = mc();
    let mut rng = Rng::new(fresh_seed("copies_work_between_every_pair_of_memory_kinds"));
    let kinds = [None, Some(Kind::Pinned), Some(Kind::Device), Some(Kind::Managed)];
    for len in [1usize, 4099, 3 << 20] {
        for src_kind in kinds {
            for dst_kind in kinds {
                let mut data = vec![0u8; len];
                rng.fill(&mut data);
                let mut host_src = data.clone();
                let mut host_dst = vec![0xa5u8; len];
                let src_dev = src_kind.map(|k| DevBuf::from_host(&data, k));
                let dst_dev = dst_kind.map(|k| DevBuf::from_host(&host_dst, k));
                let src = match (&src_dev, src_kind) {
                    (Some(b), Some(k)) => mem(b, kind_type(k)),
                    // SAFETY: host_src lives to the end of the iteration and is not touched meanwhile.
                    _ => unsafe { MemRef::from_mut_slice(&mut host_src) },
                };
                let dst = match (&dst_dev, dst_kind) {
                    (Some(b), Some(k)) => mem(b, kind_type(k)),
                    // SAFETY: as above.
                    _ => unsafe { MemRef::from_mut_slice(&mut host_dst) },
                };
                mc.copy(dst, src).unwrap_or_else(|e| panic!("{src_kind:?} -> {dst_kind:?}, {len} bytes: {e}"));
                let got = dst_dev.as_ref().map_or_else(|| host_dst.clone(), DevBuf::read);
                assert!(got == data, "{src_kind:?} -> {dst_kind:?}, {len} bytes: wrong data");
            }
        }
    }
    // Overlapping device ranges behave as memmove.
    let data: Vec<u8> = (0..8192u32).map(|i| (i % 251) as u8).collect();
    let b = DevBuf::from_host(&data, Kind::Device);
    let whole = mem(&b, MemType::Cuda);
    mc.copy(whole.range(100, 8000).unwrap(), whole.range(0, 8000).unwrap()).unwrap();
    let got = b.read();
    assert_eq!(&got[100..8100], &data[..8000]);
    assert_eq!(&got[..100], &data[..100]);
    // Errors name the problem.
    let e = mc.copy(whole.range(0, 10).unwrap(), whole.range(100, 11).unwrap()).unwrap_err();
    assert!(e.to_string().contains("11 source bytes"), "{e}");
    // SAFETY: never dereferenced: the memory type is refused first.
    let rocm = unsafe { MemRef::new(b.addr(), 16, MemType::Rocm) };
    assert_eq!(mc.copy(rocm, whole.range(0, 16).unwrap()).unwrap_err().status(), Status::InvalidParam);
}

#[test]
fn device_reductions_match_the_host_for_every_dtype_and_op() {
    let name = "device_reductions_match_the_host_for_every_dtype_and_op";
    if skip_unless_gpu(name) || skip_unless_nvrtc(name) {
        return;
    }
    let mc = mc();
    bind();
    let base = fresh_seed("device_reductions_match_the_host_for_every_dtype_and_op");
    let mut k = 0u64;
    for (dt, op) in device_reduction_pairs() {
        for nsrcs in 1..=9 {
            k += 1;
            let count = COUNTS[(k as usize) % COUNTS.len()];
            let offset = [0, elem_size(dt, Some(op)), 1][(k as usize / 4) % 3];
            let in_place = k.is_multiple_of(5);
            check_reduction(&mc, dt, op, nsrcs, count, hash(&[base, k]), offset, in_place);
        }
    }
}

#[test]
fn device_reduction_errors_name_the_problem() {
    if skip_unless_gpu("device_reduction_errors_name_the_problem") {
        return;
    }
    let mc = mc();
    let a = DevBuf::new(64, Kind::Device);
    let b = DevBuf::new(64, Kind::Device);
    let spec = ReduceSpec { dtype: DataType::Float32, op: ReduceOp::Bxor, count: 16, avg_divisor: None };
    let e = mc.reduce(mem(&a, MemType::Cuda), &[mem(&b, MemType::Cuda)], &spec).unwrap_err();
    assert!(e.to_string().contains("float32") && e.to_string().contains("bxor"), "{e}");
    let host = vec![0u8; 64];
    // SAFETY: never dereferenced: host memory is refused first.
    let h = unsafe { MemRef::from_slice(&host) };
    let sum = ReduceSpec { op: ReduceOp::Sum, ..spec };
    let e = mc.reduce(mem(&a, MemType::Cuda), &[h], &sum).unwrap_err();
    assert!(e.to_string().contains("host memory"), "{e}");
    // The host component refuses device memory just as clearly.
    let e = HostMc::new().reduce(mem(&a, MemType::Cuda), &[mem(&b, MemType::Cuda)], &sum).unwrap_err();
    assert!(e.to_string().contains("cuda memory"), "{e}");
    // Zero elements is a no-op, not a launch.
    let zero = ReduceSpec { count: 0, ..sum };
    let empty = MemRef::empty(MemType::Cuda);
    mc.reduce(empty, &[empty], &zero).unwrap();
}
