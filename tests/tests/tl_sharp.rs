//! TL/SHARP against the SHARP test double (`tests/fake_sharp/`): every
//! algorithm, every datatype and operation the caps allow, refusals that
//! fall back (at init and at post), a request that never completes, the
//! registration cache, and a library that is absent or old.
//!
//! Ranks are threads of this process; each test loads its own copy of the
//! double (`UCC_TL_SHARP_LIB`), so their caps, errors and counters are apart.

use ferrocoll::{Coll, Config, Element, ReduceOp, Status};
use ferrocoll_tests::fake_sharp::{Instance, instance_or_skip};
use ferrocoll_tests::world::{self, TEST_TIMEOUT};

/// Configuration: the double at `inst`, `tune` for the SHARP TL, and small timeouts.
fn config(inst: &Instance, tune: &str) -> Config {
    let mut c = Config::new();
    c.set("TL_SHARP_LIB", inst.path.to_string_lossy().into_owned());
    c.set("TL_SHARP_TUNE", tune);
    c.set("TL_SHARP_OOB_TIMEOUT", "20s");
    c.set("TL_SELF_TUNE", "0");
    c
}

/// Values that every datatype holds exactly, and whose sums over a few ranks too.
trait Val: Element + Copy + Send + Sync + 'static {
    const FLOAT: bool;
    const SIGNED: bool;
    fn from_i(v: i64) -> Self;
    fn to_f(self) -> f64;
}

macro_rules! int_val {
    ($($t:ty, $signed:expr);*) => {$(
        impl Val for $t {
            const FLOAT: bool = false;
            const SIGNED: bool = $signed;
            fn from_i(v: i64) -> Self { v as $t }
            fn to_f(self) -> f64 { self as f64 }
        }
    )*};
}
int_val!(i8, true; u8, false; i16, true; u16, false; i32, true; u32, false; i64, true; u64, false);

impl Val for f32 {
    const FLOAT: bool = true;
    const SIGNED: bool = true;
    fn from_i(v: i64) -> Self {
        v as f32
    }
    fn to_f(self) -> f64 {
        self as f64
    }
}
impl Val for f64 {
    const FLOAT: bool = true;
    const SIGNED: bool = true;
    fn from_i(v: i64) -> Self {
        v as f64
    }
    fn to_f(self) -> f64 {
        self
    }
}
impl Val for half::f16 {
    const FLOAT: bool = true;
    const SIGNED: bool = true;
    fn from_i(v: i64) -> Self {
        half::f16::from_f64(v as f64)
    }
    fn to_f(self) -> f64 {
        self.to_f64()
    }
}
impl Val for half::bf16 {
    const FLOAT: bool = true;
    const SIGNED: bool = true;
    fn from_i(v: i64) -> Self {
        half::bf16::from_f64(v as f64)
    }
    fn to_f(self) -> f64 {
        self.to_f64()
    }
}

/// Rank `r`'s element `i`: small, signed where the type is, varied by op-friendly patterns.
fn input(r: usize, i: usize, signed: bool) -> i64 {
    let v = ((r * 7 + i * 3) % 9) as i64;
    if signed { v - 4 } else { v }
}

fn combine(op: ReduceOp, a: i64, b: i64) -> i64 {
    match op {
        ReduceOp::Sum => a + b,
        ReduceOp::Max => a.max(b),
        ReduceOp::Min => a.min(b),
        ReduceOp::Land => i64::from(a != 0 && b != 0),
        ReduceOp::Lor => i64::from(a != 0 || b != 0),
        ReduceOp::Lxor => i64::from((a != 0) != (b != 0)),
        ReduceOp::Band => a & b,
        ReduceOp::Bor => a | b,
        ReduceOp::Bxor => a ^ b,
        _ => unreachable!("not a SHARP operation"),
    }
}

/// The reduction of element `i` over `p` ranks, as f64 of the type's value.
fn expected<T: Val>(op: ReduceOp, p: usize, i: usize) -> f64 {
    let mut acc = input(0, i, T::SIGNED);
    for r in 1..p {
        acc = combine(op, acc, input(r, i, T::SIGNED));
    }
    T::from_i(acc).to_f()
}

const INT_OPS: [ReduceOp; 9] = [
    ReduceOp::Sum,
    ReduceOp::Max,
    ReduceOp::Min,
    ReduceOp::Land,
    ReduceOp::Lor,
    ReduceOp::Lxor,
    ReduceOp::Band,
    ReduceOp::Bor,
    ReduceOp::Bxor,
];
const FLOAT_OPS: [ReduceOp; 3] = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min];

fn ops<T: Val>() -> &'static [ReduceOp] {
    if T::FLOAT { &FLOAT_OPS } else { &INT_OPS }
}

/// Allreduce of `count` elements on `p` ranks with every op of T; each rank
/// checks every element and which algorithm ran.
fn allreduce_all_ops<T: Val>(cfg: &Config, p: usize, count: usize, want: &'static str) {
    world::run(p, cfg, move |team, _| {
        let r = team.rank();
        for &op in ops::<T>() {
            let src: Vec<T> = (0..count).map(|i| T::from_i(input(r, i, T::SIGNED))).collect();
            let mut dst = vec![T::from_i(99); count];
            let mut req = Coll::allreduce(&src, &mut dst, op).timeout(TEST_TIMEOUT).init(team).expect("init");
            assert_eq!(req.selected(), want, "{op:?} on {:?}", T::DTYPE);
            req.run().expect("allreduce");
            drop(req);
            for (i, v) in dst.iter().enumerate() {
                assert_eq!(v.to_f(), expected::<T>(op, p, i), "{op:?} {:?} element {i} on rank {r}", T::DTYPE);
            }
        }
    });
}

#[test]
fn allreduce_every_dtype_and_op_the_caps_allow() {
    let Some(inst) = instance_or_skip("allreduce_every_dtype_and_op_the_caps_allow", "", false) else { return };
    let cfg = config(&inst, "allreduce:@sharp:inf");
    allreduce_all_ops::<i8>(&cfg, 3, 37, "sharp/sharp");
    allreduce_all_ops::<u8>(&cfg, 3, 37, "sharp/sharp");
    allreduce_all_ops::<i16>(&cfg, 3, 37, "sharp/sharp");
    allreduce_all_ops::<u16>(&cfg, 3, 37, "sharp/sharp");
    allreduce_all_ops::<i32>(&cfg, 3, 37, "sharp/sharp");
    allreduce_all_ops::<u32>(&cfg, 3, 37, "sharp/sharp");
    allreduce_all_ops::<i64>(&cfg, 3, 37, "sharp/sharp");
    allreduce_all_ops::<u64>(&cfg, 3, 37, "sharp/sharp");
    allreduce_all_ops::<f32>(&cfg, 3, 37, "sharp/sharp");
    allreduce_all_ops::<f64>(&cfg, 3, 37, "sharp/sharp");
    allreduce_all_ops::<half::f16>(&cfg, 3, 37, "sharp/sharp");
    allreduce_all_ops::<half::bf16>(&cfg, 3, 37, "sharp/sharp");
    // Every one went through the double: (9 × 8 + 3 × 4) ops × 3 ranks.
    assert_eq!(inst.stat("allreduce"), (9 * 8 + 3 * 4) * 3);
}

#[test]
fn what_the_caps_exclude_falls_back_at_init() {
    // Caps: only int32 (bit 1) and only sum (bit 2).
    let Some(inst) = instance_or_skip("what_the_caps_exclude_falls_back_at_init", "dtypes=0x2\nops=0x4\n", false)
    else {
        return;
    };
    let cfg = config(&inst, "allreduce:@sharp:inf");
    world::run(2, &cfg, |team, _| {
        let r = team.rank() as i32;
        let src = [r + 1; 5];
        let mut dst = [0i32; 5];
        let mut req = Coll::allreduce(&src, &mut dst, ReduceOp::Sum).init(team).expect("init");
        assert_eq!(req.selected(), "sharp/sharp");
        req.run().expect("sum");
        drop(req);
        assert_eq!(dst, [3; 5]);
        let mut req = Coll::allreduce(&src, &mut dst, ReduceOp::Max).init(team).expect("init");
        assert_ne!(req.selected(), "sharp/sharp", "max is outside the caps");
        req.run().expect("max");
        drop(req);
        assert_eq!(dst, [2; 5]);
        let fsrc = [r as f32 + 0.5; 4];
        let mut fdst = [0f32; 4];
        let mut req = Coll::allreduce(&fsrc, &mut fdst, ReduceOp::Sum).init(team).expect("init");
        assert_ne!(req.selected(), "sharp/sharp", "float32 is outside the caps");
        req.run().expect("float sum");
        drop(req);
        assert_eq!(fdst, [2.0; 4]);
        // SHARP has no product and no average at all.
        let mut req = Coll::allreduce(&src, &mut dst, ReduceOp::Prod).init(team).expect("init");
        assert_ne!(req.selected(), "sharp/sharp");
        req.run().expect("prod");
        drop(req);
        assert_eq!(dst, [2; 5]);
    });
    assert_eq!(inst.stat("allreduce"), 2, "only the int32 sum reached the double");
}

/// reduce_scatter with `alg` on `p` ranks, `count` elements in all, in place or not.
fn reduce_scatter_with(cfg: &Config, p: usize, count: usize, in_place: bool, want: &'static str) {
    world::run(p, cfg, move |team, _| {
        let r = team.rank();
        let block = |_: usize| count / p;
        let start: usize = (0..r).map(block).sum();
        let src: Vec<i32> = (0..count).map(|i| input(r, i, true) as i32).collect();
        let mut out;
        if in_place {
            out = src.clone();
            let mut req =
                Coll::reduce_scatter_in_place(&mut out, ReduceOp::Sum).timeout(TEST_TIMEOUT).init(team).expect("init");
            assert_eq!(req.selected(), want);
            req.run().expect("reduce_scatter in place");
            drop(req);
            out = out[start..start + block(r)].to_vec();
        } else {
            out = vec![-99; block(r)];
            let mut req =
                Coll::reduce_scatter(&src, &mut out, ReduceOp::Sum).timeout(TEST_TIMEOUT).init(team).expect("init");
            assert_eq!(req.selected(), want);
            req.run().expect("reduce_scatter");
        }
        for (j, v) in out.iter().enumerate() {
            assert_eq!(f64::from(*v), expected::<i32>(ReduceOp::Sum, p, start + j), "{want} element {j} of rank {r}");
        }
    });
}

#[test]
fn reduce_scatter_three_ways() {
    let Some(inst) = instance_or_skip("reduce_scatter_three_ways", "", false) else { return };
    for (alg, counts) in [("sat", &[12usize, 6006][..]), ("allreduce", &[6, 6006]), ("reduces", &[6, 6006])] {
        let cfg = config(&inst, &format!("reduce_scatter:@{alg}:inf"));
        let want: &'static str = Box::leak(format!("sharp/{alg}").into_boxed_str());
        for &count in counts {
            for p in [2, 3] {
                for in_place in [false, true] {
                    reduce_scatter_with(&cfg, p, count, in_place, want);
                }
            }
        }
    }
    assert!(inst.stat("reduce_scatter") > 0 && inst.stat("reduce") > 0 && inst.stat("allreduce") > 0);
}

#[test]
fn reduce_scatter_pipeline_windows() {
    let Some(inst) = instance_or_skip("reduce_scatter_pipeline_windows", "", false) else { return };
    for window in ["1", "2", "64"] {
        let mut cfg = config(&inst, "reduce_scatter:@reduces:inf");
        cfg.set("TL_SHARP_RS_PIPELINE", window);
        reduce_scatter_with(&cfg, 4, 4 * 50, false, "sharp/reduces");
    }
    // One reduce per root per run on every rank.
    assert_eq!(inst.stat("reduce"), 3 * 4 * 4);
}

#[test]
fn reduce_scatterv_one_reduce_per_root() {
    let Some(inst) = instance_or_skip("reduce_scatterv_one_reduce_per_root", "", false) else { return };
    let cfg = config(&inst, "reduce_scatterv:@reduces:inf");
    let p = 3;
    world::run(p, &cfg, move |team, _| {
        let r = team.rank();
        let counts = [5u64, 0, 9];
        let total = counts.iter().sum::<u64>() as usize;
        let start = counts[..r].iter().sum::<u64>() as usize;
        let src: Vec<i64> = (0..total).map(|i| input(r, i, true)).collect();
        let mut dst = vec![-99i64; counts[r] as usize];
        let mut req = Coll::reduce_scatterv(&src, &mut dst, &counts, ReduceOp::Max).init(team).expect("init");
        assert_eq!(req.selected(), "sharp/reduces");
        req.run().expect("reduce_scatterv");
        drop(req);
        for (j, v) in dst.iter().enumerate() {
            assert_eq!(*v as f64, expected::<i64>(ReduceOp::Max, p, start + j));
        }
    });
    assert_eq!(inst.stat("reduce"), 2 * 3, "the empty block is skipped by every rank");
}

#[test]
fn reduce_bcast_barrier_allgather() {
    let Some(inst) = instance_or_skip("reduce_bcast_barrier_allgather", "", false) else { return };
    let cfg = config(&inst, "reduce:@sharp:inf#bcast:@sharp:inf#barrier:@sharp:inf#allgather:@sharp:inf");
    let p = 3;
    world::run(p, &cfg, move |team, _| {
        let r = team.rank();
        for root in 0..p {
            let src: Vec<u16> = (0..21).map(|i| input(r, i, false) as u16).collect();
            let mut dst = [0u16; 21];
            let mut req =
                Coll::reduce(&src, (r == root).then_some(&mut dst[..]), ReduceOp::Bor, root).init(team).expect("init");
            assert_eq!(req.selected(), "sharp/sharp");
            req.run().expect("reduce");
            drop(req);
            if r == root {
                for (i, v) in dst.iter().enumerate() {
                    assert_eq!(*v as f64, expected::<u16>(ReduceOp::Bor, p, i));
                }
            }
            let mut buf: Vec<f64> = if r == root { (0..9).map(|i| i as f64 * 1.5).collect() } else { vec![-1.0; 9] };
            let mut req = Coll::bcast(&mut buf, root).init(team).expect("init");
            assert_eq!(req.selected(), "sharp/sharp");
            req.run().expect("bcast");
            drop(req);
            assert_eq!(buf, (0..9).map(|i| i as f64 * 1.5).collect::<Vec<_>>());
        }
        let mut req = Coll::barrier().init(team).expect("init");
        assert_eq!(req.selected(), "sharp/sharp");
        req.run().expect("barrier");
        drop(req);
        let src = [r as u32 * 10, r as u32 * 10 + 1];
        let mut dst = vec![0u32; 2 * p];
        let mut req = Coll::allgather(&src, &mut dst).init(team).expect("init");
        assert_eq!(req.selected(), "sharp/sharp");
        req.run().expect("allgather");
        drop(req);
        assert_eq!(dst, (0..p as u32).flat_map(|q| [q * 10, q * 10 + 1]).collect::<Vec<_>>());
    });
    assert_eq!(inst.stat("reduce"), 3 * 3);
    assert_eq!(inst.stat("bcast"), 3 * 3);
    assert_eq!(inst.stat("barrier"), 3);
    assert_eq!(inst.stat("allgather"), 3);
}

/// Allreduce sums on 3 ranks, `runs` times, checking results; returns what each rank saw selected.
fn sums(cfg: &Config, runs: usize) -> Vec<Vec<String>> {
    world::run(3, cfg, move |team, _| {
        let r = team.rank() as i32;
        (0..runs)
            .map(|k| {
                let src = vec![r + k as i32; 1000];
                let mut dst = vec![0i32; 1000];
                let mut req =
                    Coll::allreduce(&src, &mut dst, ReduceOp::Sum).timeout(TEST_TIMEOUT).init(team).expect("init");
                let sel = req.selected().to_string();
                req.run().expect("allreduce");
                drop(req);
                assert_eq!(dst, vec![3 + 3 * k as i32; 1000], "run {k}");
                sel
            })
            .collect()
    })
}

#[test]
fn refusals_at_post_fall_back_to_p2p() {
    for (conf, sharp_calls) in [
        // The first allreduce of each rank is refused: it runs on p2p, the second on SHARP.
        ("fail=allreduce:no_resource:1\n", 2 * 3),
        ("fail=allreduce:not_supported:1\n", 2 * 3),
        // Refused for good: every run falls back.
        ("fail=allreduce:no_resource:inf\n", 2 * 3),
        // A SAT lock busy three times: retried, then SHARP runs (5 calls per rank).
        ("fail=allreduce:lock_failed:3\n", 5 * 3),
    ] {
        let Some(inst) = instance_or_skip("refusals_at_post_fall_back_to_p2p", conf, false) else { return };
        let seen = sums(&config(&inst, "allreduce:@sharp:inf"), 2);
        assert!(seen.iter().flatten().all(|s| s == "sharp/sharp"), "{conf}: {seen:?}");
        assert_eq!(inst.stat("allreduce"), sharp_calls, "{conf}");
    }
    // A busy lock past the retries falls back too.
    let Some(inst) = instance_or_skip("refusals_at_post_fall_back_to_p2p", "fail=allreduce:lock_failed:inf\n", false)
    else {
        return;
    };
    let mut cfg = config(&inst, "allreduce:@sharp:inf");
    cfg.set("TL_SHARP_LOCK_RETRIES", "2");
    sums(&cfg, 1);
    assert_eq!(inst.stat("allreduce"), 3 * 3);
}

#[test]
fn reduce_scatter_refused_natively_falls_back() {
    let Some(inst) = instance_or_skip(
        "reduce_scatter_refused_natively_falls_back",
        "fail=reduce_scatter:not_supported:inf\n",
        false,
    ) else {
        return;
    };
    let cfg = config(&inst, "reduce_scatter:@sat:inf");
    reduce_scatter_with(&cfg, 3, 3 * 100, false, "sharp/sat");
    reduce_scatter_with(&cfg, 3, 3 * 100, true, "sharp/sat");
    // Without SAT in the caps the native one is refused at init.
    let Some(inst) = instance_or_skip("reduce_scatter_refused_natively_falls_back", "features=0\n", false) else {
        return;
    };
    world::run(2, &config(&inst, "reduce_scatter:@sat:inf"), |team, _| {
        let src = [1i32; 8];
        let mut dst = [0i32; 4];
        let mut req = Coll::reduce_scatter(&src, &mut dst, ReduceOp::Sum).init(team).expect("init");
        assert_ne!(req.selected(), "sharp/sat");
        req.run().expect("reduce_scatter");
        drop(req);
        assert_eq!(dst, [2; 4]);
    });
    assert_eq!(inst.stat("reduce_scatter"), 0);
}

#[test]
fn an_older_library_without_reduce_scatter() {
    let Some(inst) = instance_or_skip("an_older_library_without_reduce_scatter", "", true) else { return };
    // By default: one reduce per root above UCC_TL_SHARP_RS_ALLREDUCE_MAX, allreduce below.
    let mut cfg = config(&inst, "");
    cfg.set("TLS", "sharp,p2p");
    reduce_scatter_with(&cfg, 3, 3 * 10_000, false, "sharp/reduces");
    reduce_scatter_with(&cfg, 3, 3 * 16, false, "sharp/allreduce");
    // Named: refused at init for want of the entry point, and served by the next candidate.
    world::run(2, &config(&inst, "reduce_scatter:@sat:inf"), |team, _| {
        let src = [2i32; 8];
        let mut dst = [0i32; 4];
        let mut req = Coll::reduce_scatter(&src, &mut dst, ReduceOp::Sum).init(team).expect("init");
        assert_ne!(req.selected(), "sharp/sat");
        req.run().expect("reduce_scatter");
        drop(req);
        assert_eq!(dst, [4; 4]);
        let src = [1u8; 3];
        let mut dst = [0u8; 6];
        let req = Coll::allgather(&src, &mut dst).init(team).expect("init");
        assert_ne!(req.selected(), "sharp/sharp", "no sharp_coll_do_allgather_nb");
    });
}

#[test]
fn a_request_that_never_completes_times_out_naming_it() {
    let Some(inst) = instance_or_skip("a_request_that_never_completes_times_out_naming_it", "hang=allreduce\n", false)
    else {
        return;
    };
    let mut cfg = config(&inst, "allreduce:@sharp:inf");
    cfg.set("TL_SHARP_REQ_TIMEOUT", "300ms");
    let errs = world::run(2, &cfg, |team, _| {
        let src = [1i32; 4];
        let mut dst = [0i32; 4];
        let e = Coll::allreduce(&src, &mut dst, ReduceOp::Sum).run(team).expect_err("it never completes");
        (e.status(), e.to_string())
    });
    for (status, msg) in errs {
        assert_eq!(status, Status::TimedOut, "{msg}");
        for says in ["allreduce:@sharp", "sharp_coll_do_allreduce_nb", "UCC_TL_SHARP_REQ_TIMEOUT", "libsharp_coll.so"] {
            assert!(msg.contains(says), "{says:?} not in {msg}");
        }
    }
}

#[test]
fn registration_cache() {
    // Off (the default): every run registers and releases its buffers.
    let Some(inst) = instance_or_skip("registration_cache", "", false) else { return };
    sums(&config(&inst, "allreduce:@sharp:inf"), 4);
    assert_eq!(inst.stat("reg_mr"), 4 * 2 * 3);
    assert_eq!(inst.stat("dereg_mr"), 4 * 2 * 3);
    assert_eq!(inst.stat("live_mrs"), 0);
    // On: the same buffers are registered once per rank, and released at team destruction.
    let Some(inst) = instance_or_skip("registration_cache", "", false) else { return };
    let mut cfg = config(&inst, "allreduce:@sharp:inf");
    cfg.set("TL_SHARP_REG_CACHE", "8");
    world::run(3, &cfg, |team, _| {
        let src = vec![team.rank() as i64; 512];
        let mut dst = vec![0i64; 512];
        for _ in 0..5 {
            Coll::allreduce(&src, &mut dst, ReduceOp::Sum).run(team).expect("allreduce");
            assert_eq!(dst, vec![3; 512]);
        }
        // A part of a cached buffer is covered by its registration.
        Coll::allreduce(&src[100..200], &mut dst[..100], ReduceOp::Sum).run(team).expect("allreduce");
    });
    assert_eq!(inst.stat("reg_mr"), 2 * 3);
    assert_eq!(inst.stat("live_mrs"), 0, "released when the teams went");
    // A cache of one entry evicts: buffers A, B, A (all alive, in place) are registered three times.
    let Some(inst) = instance_or_skip("registration_cache", "", false) else { return };
    let mut cfg = config(&inst, "allreduce:@sharp:inf");
    cfg.set("TL_SHARP_REG_CACHE", "1");
    world::run(2, &cfg, |team, _| {
        let mut a = vec![1u32; 64];
        let mut b = vec![2u32; 128];
        Coll::allreduce_in_place(&mut a, ReduceOp::Sum).run(team).expect("a");
        Coll::allreduce_in_place(&mut b, ReduceOp::Sum).run(team).expect("b");
        Coll::allreduce_in_place(&mut a, ReduceOp::Sum).run(team).expect("a again");
        assert_eq!((a[0], b[0]), (4, 4));
    });
    assert_eq!(inst.stat("reg_mr"), 3 * 2);
    assert_eq!(inst.stat("live_mrs"), 0);
}

#[test]
fn an_absent_library_leaves_the_tl_off() {
    let mut cfg = Config::new();
    cfg.set("TL_SHARP_LIB", "/nonexistent/libsharp_coll.so");
    cfg.set("TL_SHARP_TUNE", "allreduce:@sharp:inf");
    let seen = sums(&cfg, 1);
    assert!(seen.iter().flatten().all(|s| !s.starts_with("sharp/")), "{seen:?}");
}

#[test]
fn a_failed_creation_is_agreed_and_leaves_the_tl_off() {
    for conf in ["fail=init:error:inf\n", "fail=comm_init:no_resource:inf\n"] {
        let Some(inst) = instance_or_skip("a_failed_creation_is_agreed_and_leaves_the_tl_off", conf, false) else {
            return;
        };
        let seen = sums(&config(&inst, "allreduce:@sharp:inf"), 1);
        assert!(seen.iter().flatten().all(|s| !s.starts_with("sharp/")), "{conf}: {seen:?}");
    }
}

#[test]
fn bad_settings_are_errors_naming_them() {
    let Some(inst) = instance_or_skip("bad_settings_are_errors_naming_them", "", false) else { return };
    for (name, value) in [("TL_SHARP_RS_PIPELINE", "0"), ("TL_SHARP_REQ_TIMEOUT", "0"), ("TL_SHARP_REG_CACHE", "x")] {
        let mut cfg = config(&inst, "");
        cfg.set(name, value);
        let lib = ferrocoll::Lib::with_params(ferrocoll::LibParams { config: cfg, ..Default::default() }).expect("lib");
        let oob = ferrocoll::ThreadOob::group(1).pop().expect("one");
        let e = ferrocoll::Context::new(&lib, ferrocoll::ContextParams::with_oob(oob)).err().expect("refused");
        assert!(e.to_string().contains(&format!("UCC_{name}")), "{e}");
    }
}

/// A rank process of the hierarchical jobs below (`FERROCOLL_TEST_ROLE=sharp`):
/// default selection must be SHARP's hierarchical algorithms; results are checked.
#[test]
fn sharp_rank_body() {
    use ferrocoll_tests::procs::ROLE;
    if std::env::var(ROLE).as_deref() != Ok("sharp") {
        return;
    }
    let run = || -> ferrocoll::Result<()> {
        let lib = ferrocoll::Lib::new()?;
        let ctx = ferrocoll::Context::new(&lib, ferrocoll::ContextParams::with_oob(ferrocoll::TcpOob::from_env()?))?;
        let team = ferrocoll::Team::create(&ctx, ferrocoll::TeamParams::default())?;
        let (r, p) = (team.rank(), team.size());
        for count in [1usize, 1000] {
            let src: Vec<i32> = (0..count).map(|i| (r * 3 + i) as i32).collect();
            let mut dst = vec![-1i32; count];
            let mut req = Coll::allreduce(&src, &mut dst, ReduceOp::Sum).timeout(TEST_TIMEOUT).init(&team)?;
            println!("SELECTED allreduce {}", req.selected());
            req.run()?;
            drop(req);
            for (i, v) in dst.iter().enumerate() {
                let want: i32 = (0..p).map(|q| (q * 3 + i) as i32).sum();
                if *v != want {
                    println!("FAIL allreduce element {i}: {v} != {want}");
                }
            }
            let block = count;
            let src: Vec<i32> = (0..block * p).map(|i| (r + i) as i32).collect();
            let mut dst = vec![-1i32; block];
            let mut req = Coll::reduce_scatter(&src, &mut dst, ReduceOp::Max).timeout(TEST_TIMEOUT).init(&team)?;
            println!("SELECTED reduce_scatter {}", req.selected());
            req.run()?;
            drop(req);
            for (j, v) in dst.iter().enumerate() {
                let want = (p - 1 + r * block + j) as i32;
                if *v != want {
                    println!("FAIL reduce_scatter element {j}: {v} != {want}");
                }
            }
        }
        // This process's copy of the double: how often this rank asked it for an allreduce.
        let path = std::env::var("UCC_TL_SHARP_LIB").unwrap_or_default();
        // SAFETY: the copy the TL loaded (same path: the loader hands out the same one).
        let calls = unsafe {
            let lib = libloading::Library::new(&path).map_err(|e| ferrocoll::Error::not_found(e.to_string()))?;
            let f = lib
                .get::<unsafe extern "C" fn(*const std::ffi::c_char) -> std::ffi::c_long>(b"fake_sharp_stat\0")
                .map_err(|e| ferrocoll::Error::not_found(e.to_string()))?;
            f(c"allreduce".as_ptr())
        };
        println!("STAT allreduce {calls}");
        Ok(())
    };
    let code = match run() {
        Ok(()) => {
            println!("DONE");
            0
        }
        Err(e) => {
            println!("FAIL {e}");
            1
        }
    };
    std::process::exit(code);
}

/// Five processes on three emulated hosts (a: 0, 3; b: 1, 2; c: 4): SHARP
/// among the node leaders, selected by default; with the leaders' allreduce
/// refused by the library, the leaders fall back to p2p among themselves.
#[test]
fn hierarchical_sharp_on_emulated_hosts() {
    use ferrocoll_tests::procs::{Job, free_port};
    for conf in ["", "fail=allreduce:no_resource:inf\n"] {
        let Some(inst) = instance_or_skip("hierarchical_sharp_on_emulated_hosts", conf, false) else { return };
        let hosts = ["a", "b", "b", "a", "c"];
        let port = free_port();
        let token = format!("sharp-{}-{port}", std::process::id());
        let lib = inst.path.to_string_lossy().into_owned();
        let job = Job::start("sharp_rank_body", "sharp", 5, 0..5, &token, port, &|r| {
            vec![
                ("FERROCOLL_HOST_ID".to_string(), hosts[r].to_string()),
                ("UCC_TL_SHARP_LIB".to_string(), lib.clone()),
                ("UCC_TL_SHARP_OOB_TIMEOUT".to_string(), "30s".to_string()),
            ]
        });
        let outs = job.finish(std::time::Duration::from_secs(300));
        for o in &outs {
            let fails = o.lines("FAIL");
            assert!(
                o.success == Some(true) && fails.is_empty(),
                "{conf:?} rank {}: {}\n{}",
                o.rank,
                o.stdout,
                o.stderr
            );
            let sel = o.lines("SELECTED");
            assert_eq!(sel.len(), 4, "rank {}: {sel:?}", o.rank);
            assert!(sel.iter().all(|l| l.ends_with(" sharp/hier")), "rank {}: {sel:?}", o.rank);
        }
        // Leaders (0, 1, 4) ask SHARP for every allreduce and every
        // reduce_scatter (an allreduce among leaders): 4 calls; the others never.
        for o in &outs {
            let want = if [0, 1, 4].contains(&o.rank) { "STAT allreduce 4" } else { "STAT allreduce 0" };
            assert_eq!(o.lines("STAT"), vec![want.to_string()], "{conf:?} rank {}", o.rank);
        }
    }
}

#[test]
fn fallbacks_are_traced() {
    use std::sync::{Arc, Mutex};
    let Some(inst) = instance_or_skip("fallbacks_are_traced", "fail=allreduce:no_resource:1\n", false) else { return };
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = lines.clone();
    ferrocoll::core::log::set_sink(Some(Arc::new(move |_, l: &str| {
        if l.contains("sharp") {
            sink.lock().unwrap_or_else(|p| p.into_inner()).push(l.to_string());
        }
    })));
    let mut cfg = config(&inst, "allreduce:@sharp:inf");
    cfg.set("COLL_TRACE", "info");
    sums(&cfg, 2);
    ferrocoll::core::log::set_sink(None);
    let lines = lines.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let refused: Vec<_> = lines.iter().filter(|l| l.contains("refused at post")).collect();
    assert_eq!(refused.len(), 3, "one per rank, the first run only: {lines:#?}");
    for l in refused {
        for says in
            ["allreduce:@sharp", "sharp_coll_do_allreduce_nb", "Resource not available", "running p2p allreduce:@"]
        {
            assert!(l.contains(says), "{says:?} not in {l}");
        }
    }
    assert!(lines.iter().any(|l| l.contains("coll_init") && l.contains("sharp/sharp")), "{lines:#?}");
}

#[test]
fn a_member_missing_from_the_oob_times_out_and_the_tl_is_off_everywhere() {
    // Rank 1's sharp_coll_init fails before the double's job barrier: the
    // others wait for it in the OOB barrier until UCC_TL_SHARP_OOB_TIMEOUT,
    // then every rank agrees that SHARP is off for the team.
    let Some(inst) = instance_or_skip("a_member_missing_from_the_oob", "fail=init:error:inf@1\n", false) else {
        return;
    };
    let mut cfg = config(&inst, "allreduce:@sharp:inf");
    cfg.set("TL_SHARP_OOB_TIMEOUT", "500ms");
    let seen = sums(&cfg, 1);
    assert!(seen.iter().flatten().all(|s| !s.starts_with("sharp/")), "{seen:?}");
    assert_eq!(inst.stat("init"), 3);
    assert_eq!(inst.stat("comm_init"), 0, "no rank went on to make a group");
}
