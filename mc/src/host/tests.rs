//! `HostMc` through the `Mc` trait: copies, scratch, and reduce's checks on `MemRef`s.

use std::sync::Arc;

use ferrocoll_core::backend::{Mc, PreparedReduce, ReduceSpec};
use ferrocoll_core::{DataType, MemRef, MemType, ReduceOp, Status};

use super::HostMc;

fn mref(v: &mut [u8]) -> MemRef {
    // SAFETY: every caller keeps `v` alive and untouched while the MemRef is used.
    unsafe { MemRef::from_mut_slice(v) }
}

fn spec(dtype: DataType, op: ReduceOp, count: usize) -> ReduceSpec {
    ReduceSpec { dtype, op, count, avg_divisor: None }
}

#[test]
fn identity() {
    let mc = HostMc::new();
    assert_eq!(mc.name(), "host");
    assert_eq!(mc.mem_type(), MemType::Host);
    let x = 0u8;
    assert!(!mc.owns(&x));
    // Host comes first everywhere; where a CUDA driver is present the CUDA
    // components follow (cuda/tests.rs checks which).
    let all = crate::default_mcs();
    assert_eq!(all[0].mem_type(), MemType::Host);
    assert_eq!(all.iter().filter(|m| m.mem_type() == MemType::Host).count(), 1);
}

#[test]
fn copy_is_memmove_of_equal_lengths() {
    let mc = HostMc::new();
    let mut v: Vec<u8> = (0..32).collect();
    let m = mref(&mut v);
    mc.copy(m.range(4, 16).unwrap(), m.range(0, 16).unwrap()).unwrap();
    assert_eq!(&v[4..20], &(0..16).collect::<Vec<u8>>()[..], "overlapping forward copy");
    let mut w: Vec<u8> = (0..32).collect();
    let m = mref(&mut w);
    mc.copy(m.range(0, 16).unwrap(), m.range(4, 16).unwrap()).unwrap();
    assert_eq!(&w[..16], &(4..20).collect::<Vec<u8>>()[..], "overlapping backward copy");
    let err = mc.copy(m.range(0, 8).unwrap(), m.range(8, 9).unwrap()).unwrap_err();
    assert_eq!(err.status(), Status::InvalidParam);
    assert!(err.to_string().contains('9') && err.to_string().contains('8'), "{err}");
    mc.copy(MemRef::empty(MemType::Host), MemRef::empty(MemType::Host)).unwrap();
    let err = mc.copy(MemRef::empty(MemType::Cuda), MemRef::empty(MemType::Host)).unwrap_err();
    assert!(err.to_string().contains("cuda"), "{err}");
}

#[test]
fn scratch_is_aligned_reused_and_capped() {
    let mc = HostMc::with_cache_limit(8192);
    let a = mc.alloc(3000).unwrap();
    let addr = a.mem().addr();
    assert_eq!(addr as usize % 64, 0);
    assert_eq!(a.mem().len(), 3000);
    // The block is usable over its whole length.
    // SAFETY: the scratch is live and only this test uses it.
    unsafe { a.mem().as_mut_slice().fill(7) };
    drop(a);
    assert_eq!(mc.pool().cached_bytes(), 4096);
    let b = mc.alloc(2049).unwrap();
    assert_eq!(b.mem().addr(), addr, "a freed block of the same class is reused");
    let c = mc.alloc(8192).unwrap();
    let d = mc.alloc(8192).unwrap();
    drop(b);
    drop(c);
    assert_eq!(mc.pool().cached_bytes(), 4096, "caching c would exceed the cap, so it was freed");
    let e = mc.alloc(4000).unwrap();
    assert_eq!(e.mem().addr(), addr);
    drop(d);
    assert_eq!(mc.pool().cached_bytes(), 8192);
    drop(e);
    assert_eq!(mc.pool().cached_bytes(), 8192, "never more than the cap");
    assert!(mc.alloc(0).unwrap().mem().is_empty());
    let err = mc.alloc(usize::MAX - 10).unwrap_err();
    assert_eq!(err.status(), Status::NoMemory);
    assert!(err.to_string().contains(&(usize::MAX - 10).to_string()), "{err}");
}

#[test]
fn scratch_from_many_threads() {
    let mc = Arc::new(HostMc::with_cache_limit(1 << 20));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let mc = mc.clone();
            std::thread::spawn(move || {
                for i in 0..2000usize {
                    let s = mc.alloc(1 + (i * 37 + t) % 5000).unwrap();
                    // SAFETY: the scratch is live and owned by this thread alone.
                    let bytes = unsafe { s.mem().as_mut_slice() };
                    bytes.fill(t as u8);
                    assert!(bytes.iter().all(|&b| b == t as u8), "no one else writes our block");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(mc.pool().cached_bytes() <= 1 << 20);
}

#[test]
fn reduce_through_memrefs_in_place_and_not() {
    let mc = HostMc::new();
    let mut a: Vec<u8> = bytemuck::cast_slice(&[1i32, 2, 3]).to_vec();
    let mut b: Vec<u8> = bytemuck::cast_slice(&[10i32, 20, 30]).to_vec();
    let mut out = vec![0xa5u8; 12];
    let (ma, mb, mo) = (mref(&mut a), mref(&mut b), mref(&mut out));
    let s = spec(DataType::Int32, ReduceOp::Sum, 3);
    mc.reduce(mo, &[ma, mb], &s).unwrap();
    mc.reduce(ma, &[ma, mb, mb], &s).unwrap();
    assert_eq!(bytemuck::cast_slice::<u8, i32>(&out), [11, 22, 33]);
    assert_eq!(bytemuck::cast_slice::<u8, i32>(&a), [21, 42, 63]);
    // count 0 is a no-op.
    mc.reduce(MemRef::empty(MemType::Host), &[MemRef::empty(MemType::Host)], &spec(DataType::Int32, ReduceOp::Sum, 0))
        .unwrap();
}

/// Every number of sources, across the stack arrays' sizes (4 and 16) and
/// onto the heap, in place and not: each source counted once, in order.
#[test]
fn reduce_through_memrefs_of_any_number_of_sources() {
    let mc = HostMc::new();
    for n in [1usize, 2, 4, 5, 16, 17, 40] {
        // Source i holds i + 1 in each element, (i + 1) * 1000 in the last.
        let mut srcs: Vec<Vec<u8>> =
            (0..n).map(|i| bytemuck::cast_slice(&[i as i64 + 1, (i as i64 + 1) * 1000]).to_vec()).collect();
        let want = |n: usize| {
            let t = (n * (n + 1) / 2) as i64;
            [t, t * 1000]
        };
        let mut out = vec![0u8; 16];
        let mo = mref(&mut out);
        let ms: Vec<MemRef> = srcs.iter_mut().map(|v| mref(v)).collect();
        let s = spec(DataType::Int64, ReduceOp::Sum, 2);
        mc.reduce(mo, &ms, &s).unwrap();
        assert_eq!(bytemuck::cast_slice::<u8, i64>(&out), want(n), "{n} sources");
        mc.reduce(ms[0], &ms, &s).unwrap();
        assert_eq!(bytemuck::cast_slice::<u8, i64>(&srcs[0]), want(n), "{n} sources, in place");
    }
}

#[test]
fn reduce_refuses_overlap_other_memory_and_bad_shapes() {
    let mc = HostMc::new();
    let mut v = vec![0u8; 64];
    let m = mref(&mut v);
    let s = spec(DataType::Float32, ReduceOp::Sum, 4);
    let (lo, mid, hi) = (m.range(0, 16).unwrap(), m.range(8, 16).unwrap(), m.range(32, 16).unwrap());
    for srcs in [vec![mid, hi], vec![lo, lo], vec![hi, mid, lo], vec![lo, hi, mid]] {
        let err = mc.reduce(lo, &srcs, &s).unwrap_err();
        assert_eq!(err.status(), Status::NoMessage, "{err}");
        assert!(err.to_string().contains("overlaps"), "{err}");
    }
    mc.reduce(lo, &[lo, hi, hi], &s).unwrap();
    let err = mc.reduce(lo, &[], &s).unwrap_err();
    assert_eq!(err.status(), Status::InvalidParam);
    let err = mc.reduce(lo, &[hi.range(0, 12).unwrap()], &s).unwrap_err();
    assert!(err.to_string().contains("12"), "{err}");
    let err = mc.reduce(m.range(0, 20).unwrap(), &[hi], &s).unwrap_err();
    assert!(err.to_string().contains("20"), "{err}");
    // SAFETY: the reduce refuses CUDA memory before touching it.
    let cuda = unsafe { MemRef::new(hi.addr(), 16, MemType::Cuda) };
    let err = mc.reduce(lo, &[cuda], &s).unwrap_err();
    assert!(err.to_string().contains("cuda"), "{err}");
    let err = mc.reduce(lo, &[hi], &spec(DataType::Float128, ReduceOp::Minloc, 1)).unwrap_err();
    assert_eq!(err.status(), Status::NotSupported);
}

#[test]
fn reduce_with_many_sources_spills_to_the_heap() {
    let mc = HostMc::new();
    let mut srcs: Vec<Vec<u8>> = (0..20u64).map(|i| bytemuck::cast_slice(&[i, 2 * i]).to_vec()).collect();
    let mut out = vec![0u8; 16];
    let refs: Vec<MemRef> = srcs.iter_mut().map(|s| mref(s)).collect();
    mc.reduce(mref(&mut out), &refs, &spec(DataType::Uint64, ReduceOp::Sum, 2)).unwrap();
    assert_eq!(bytemuck::cast_slice::<u8, u64>(&out), [190, 380]);
}

/// `prepared` reduces `a` and `b` to `reduce`'s bits for spec `s`, into
/// another buffer and in place (dst is source 0).
fn prepared_as_reduce(mc: &HostMc, s: &ReduceSpec, prepared: &PreparedReduce, a: &mut [u8], b: &mut [u8]) {
    let what = format!("{} {} count {}", s.dtype, s.op, s.count);
    let (mut want, mut got) = (vec![0u8; a.len()], vec![0u8; a.len()]);
    mc.reduce(mref(&mut want), &[mref(a), mref(b)], s).unwrap();
    mc.reduce_prepared(mref(&mut got), &[mref(a), mref(b)], prepared).unwrap();
    assert_eq!(got, want, "{what}");
    let mut in_place = a.to_vec();
    let whole = mref(&mut in_place);
    mc.reduce_prepared(whole, &[whole, mref(b)], prepared).unwrap();
    assert_eq!(in_place, want, "{what} in place");
}

#[test]
fn a_prepared_reduction_gives_the_same_bits_and_checks_each_call() {
    let mc = HostMc::new();
    // Every kind of kernel (integer, float with avg's division, complex,
    // narrow float, maxloc pairs), in place and not, at a tiny size and a
    // size past the element-wise path.
    let cases = [
        (DataType::Int32, ReduceOp::Bxor, None),
        (DataType::Float32, ReduceOp::Avg, Some(3)),
        (DataType::Float64, ReduceOp::Max, None),
        (DataType::Float32Complex, ReduceOp::Prod, None),
        (DataType::Bfloat16, ReduceOp::Sum, None),
        (DataType::Int64, ReduceOp::Maxloc, None),
    ];
    for (dtype, op, avg_divisor) in cases {
        for count in [2, 37] {
            let s = ReduceSpec { dtype, op, count, avg_divisor };
            let bytes = s.bytes().unwrap();
            let prepared = mc.prepare_reduce(&s).expect("the host component reduces it");
            assert_eq!(prepared.spec(), &s);
            let mut a: Vec<u8> = (0..bytes).map(|i| (i * 7 + 3) as u8).collect();
            let mut b: Vec<u8> = (0..bytes).map(|i| (i * 13 + 1) as u8).collect();
            prepared_as_reduce(&mc, &s, &prepared, &mut a, &mut b);
            let mut got = vec![0u8; bytes];
            // A source of another length is refused, named, at every call.
            let err = mc.reduce_prepared(mref(&mut got), &[mref(&mut a), mref(&mut b[1..])], &prepared).unwrap_err();
            assert_eq!(err.status(), Status::InvalidParam);
            assert!(err.to_string().contains("source 1"), "{err}");
        }
    }
    // A spec the component cannot reduce has no prepared path; reduce says why.
    let s = spec(DataType::Float128, ReduceOp::Maxloc, 1);
    assert!(mc.prepare_reduce(&s).is_none());
    let (mut d, mut x) = (vec![0u8; 32], vec![0u8; 32]);
    assert_eq!(mc.reduce(mref(&mut d), &[mref(&mut x)], &s).unwrap_err().status(), Status::NotSupported);
}

/// Two short sources go by the pair kernel (every real and integer type,
/// every operation but avg and the logical ones), with the full kernel's
/// bits at every length up to `PAIR_BYTES`, special floats included (in
/// place, the full kernel's, as before); the
/// others, and longer operands, keep the full kernel; an overlap is still
/// refused, named.
#[test]
fn two_short_sources_go_by_the_pair_kernel_with_the_same_bits() {
    use ferrocoll_core::backend::PAIR_BYTES;
    let mc = HostMc::new();
    let reals = [DataType::Float32, DataType::Float64];
    let ints: Vec<DataType> = DataType::ALL.into_iter().filter(|d| d.is_integer()).collect();
    let arithmetic = [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min];
    let bitwise = [ReduceOp::Band, ReduceOp::Bor, ReduceOp::Bxor];
    let cases = reals
        .iter()
        .flat_map(|&d| arithmetic.map(|op| (d, op)))
        .chain(ints.iter().flat_map(|&d| arithmetic.iter().chain(&bitwise).map(move |&op| (d, op))));
    // Bytes that make NaNs, infinities, signed zeros and denormals among
    // the floats, and overflows among the integers.
    let pattern = [0x00, 0x80, 0xff, 0x7f, 0x7f, 0x80, 0x01, 0xc0, 0x00, 0x00, 0x80, 0xff, 0x3f, 0x12];
    for (dtype, op) in cases {
        let size = op.element_size(dtype);
        for count in 0..=PAIR_BYTES / size + 1 {
            let s = spec(dtype, op, count);
            let bytes = count * size;
            let prepared = mc.prepare_reduce(&s).expect("the host component reduces it");
            assert_eq!(prepared.has_pair(), bytes <= PAIR_BYTES, "{dtype} {op} count {count}");
            let mut a: Vec<u8> = (0..bytes).map(|i| pattern[i % pattern.len()]).collect();
            let mut b: Vec<u8> = (0..bytes).map(|i| pattern[(i * 5 + 3) % pattern.len()] ^ (i as u8)).collect();
            prepared_as_reduce(&mc, &s, &prepared, &mut a, &mut b);
        }
    }
    // Avg, the logical operations, the complex and narrow types: no pair kernel.
    for (dtype, op) in [
        (DataType::Float32, ReduceOp::Avg),
        (DataType::Int32, ReduceOp::Land),
        (DataType::Float32Complex, ReduceOp::Sum),
        (DataType::Float16, ReduceOp::Sum),
        (DataType::Bfloat16, ReduceOp::Max),
        (DataType::Int32, ReduceOp::Maxloc),
    ] {
        assert!(!mc.prepare_reduce(&spec(dtype, op, 2)).unwrap().has_pair(), "{dtype} {op}");
    }
    // A source that overlaps dst is refused as before, named.
    let s = spec(DataType::Float32, ReduceOp::Sum, 2);
    let prepared = mc.prepare_reduce(&s).unwrap();
    let mut buf = vec![0u8; 16];
    let whole = mref(&mut buf);
    let (dst, src1) = (whole.range(0, 8).unwrap(), whole.range(4, 8).unwrap());
    let mut other = vec![0u8; 8];
    let err = mc.reduce_prepared(dst, &[mref(&mut other), src1], &prepared).unwrap_err();
    assert!(err.to_string().contains("source 1 overlaps"), "{err}");
    // Source 0 over part of dst (not dst itself) too.
    let err = mc.reduce_prepared(dst, &[src1, mref(&mut other)], &prepared).unwrap_err();
    assert!(err.to_string().contains("source 0 overlaps"), "{err}");
}
