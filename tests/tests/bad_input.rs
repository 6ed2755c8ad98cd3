//! Bad input: every case gives an `Error` whose status is UCC's and whose
//! message names the offending value — never a panic, never a hang.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ferrocoll::{
    ActiveSet, BufferInfo, BufferInfoV, Coll, CollArgs, CollBuffer, CollFlags, CollType, Config, Context,
    ContextParams, DataType, EpMap, Error, Lib, LibParams, MemType, ReduceOp, Status, Team, TeamParams, ThreadOob,
};
use ferrocoll_tests::world;

/// Assert an error with `status` whose message contains every one of `words`.
fn expect_err<T>(r: ferrocoll::Result<T>, status: Status, words: &[&str]) -> Error {
    let Err(e) = r else { panic!("expected a {status:?} error mentioning {words:?}, got Ok") };
    assert_eq!(e.status(), status, "{e}");
    for w in words {
        assert!(e.to_string().contains(w), "{e:?} does not mention {w:?}");
    }
    e
}

fn info(buf: *mut u8, count: u64, datatype: DataType) -> CollBuffer {
    CollBuffer::Info(BufferInfo { buffer: buf, count, datatype, mem_type: MemType::Host })
}

/// Run `f` on a team of `n` thread ranks with default configuration.
fn on_team<F: Fn(&Team) + Send + Sync + 'static>(n: usize, f: F) {
    world::run(n, &Config::new(), move |team, _ctx| f(team));
}

#[test]
fn null_buffer_with_a_count() {
    on_team(2, |team| {
        let mut a = CollArgs::new(CollType::Allreduce);
        let mut src = vec![0f32; 5];
        a.src = info(src.as_mut_ptr().cast(), 5, DataType::Float32);
        a.dst = info(std::ptr::null_mut(), 5, DataType::Float32);
        // SAFETY: the only non-null buffer is `src`, alive for the call; init fails before any use.
        expect_err(unsafe { team.collective_init(&a) }, Status::InvalidParam, &["dst.buffer is null", "5"]);
    });
}

#[test]
fn root_outside_the_team() {
    on_team(3, |team| {
        let mut buf = vec![0u8; 4];
        expect_err(Coll::bcast(&mut buf, 3).init(team), Status::InvalidParam, &["root 3", "team size 3"]);
        expect_err(Coll::fanin(usize::MAX).init(team), Status::InvalidParam, &["root"]);
    });
}

#[test]
fn reduction_not_defined_for_the_datatype() {
    on_team(2, |team| {
        let src = vec![1.0f32; 4];
        let mut dst = vec![0.0f32; 4];
        expect_err(
            Coll::allreduce(&src, &mut dst, ReduceOp::Band).init(team),
            Status::InvalidParam,
            &["band", "float32"],
        );
        let c = vec![ferrocoll::Complex64::default(); 2];
        let mut d = c.clone();
        expect_err(
            Coll::allreduce(&c, &mut d, ReduceOp::Max).init(team),
            Status::InvalidParam,
            &["max", "float64_complex"],
        );
        let mut a = CollArgs::new(CollType::Allreduce);
        let mut s = vec![0u8; 32];
        let mut t = vec![0u8; 32];
        a.src = info(s.as_mut_ptr(), 1, DataType::Float128);
        a.dst = info(t.as_mut_ptr(), 1, DataType::Float128);
        a.op = ReduceOp::Maxloc;
        a.flags |= CollFlags::LOC_PAIRS;
        // SAFETY: s and t hold a float128 pair each and outlive the call, which fails at validation.
        expect_err(unsafe { team.collective_init(&a) }, Status::NotSupported, &["maxloc", "float128"]);
        let ints = vec![1i32; 4];
        let mut out = vec![0i32; 4];
        expect_err(
            Coll::allreduce(&ints, &mut out, ReduceOp::Maxloc).init(team),
            Status::InvalidParam,
            &["maxloc", "ValueIndex"],
        );
        let pairs = vec![ferrocoll::ValueIndex::new(1.0f32, 0); 4];
        let mut pout = pairs.clone();
        expect_err(
            Coll::allreduce(&pairs, &mut pout, ReduceOp::Sum).init(team),
            Status::InvalidParam,
            &["ValueIndex", "sum"],
        );
    });
}

#[test]
fn counts_that_disagree() {
    on_team(3, |team| {
        let src = vec![1u32; 4];
        let mut dst = vec![0u32; 11];
        expect_err(
            Coll::allgather(&src, &mut dst).init(team),
            Status::InvalidParam,
            &["dst.count 11", "team size 3", "src.count 4"],
        );
        let mut short = vec![0u32; 3];
        expect_err(
            Coll::allreduce(&src, &mut short, ReduceOp::Sum).init(team),
            Status::InvalidParam,
            &["src.count 4", "dst.count 3"],
        );
        let mut a2a = vec![0u32; 4];
        expect_err(
            Coll::alltoall(&a2a.clone(), &mut a2a).init(team),
            Status::InvalidParam,
            &["not divisible by team size 3"],
        );
        // allgatherv: this rank's src count must equal its dst count.
        let counts = [4u64, 4, 4];
        let displs = [0u64, 4, 8];
        let mut vdst = vec![0u32; 12];
        let three = vec![1u32; 3];
        expect_err(
            Coll::allgatherv(&three, &mut vdst, &counts, &displs).init(team),
            Status::InvalidParam,
            &["src.count 3", "dst.counts"],
        );
        // Wrong number of counts for the team.
        expect_err(
            Coll::allgatherv(&src, &mut vdst, &counts[..2], &displs[..2]).init(team),
            Status::InvalidParam,
            &["2 counts", "team of 3"],
        );
        // A block that reaches past the buffer.
        let far = [0u64, 4, 9];
        expect_err(
            Coll::allgatherv(&src, &mut vdst, &counts, &far).init(team),
            Status::InvalidParam,
            &["block 2", "12 elements"],
        );
        // reduce_scatterv: src must hold the sum of the counts.
        let mut out = vec![0u32; 4];
        expect_err(
            Coll::reduce_scatterv(&src, &mut out, &counts, ReduceOp::Sum).init(team),
            Status::InvalidParam,
            &["src.count 4", "12"],
        );
        // ... and dst this rank's count.
        let mut three = vec![0u32; 3];
        expect_err(
            Coll::reduce_scatterv(&vdst.clone(), &mut three, &counts, ReduceOp::Sum).init(team),
            Status::InvalidParam,
            &["dst has 3 elements", "this rank's count is Some(4)"],
        );
        // In place, the blocks follow each other: the last reaches past 11 elements.
        let mut eleven = vec![0u32; 11];
        expect_err(
            Coll::reduce_scatterv_in_place(&mut eleven, &counts, ReduceOp::Sum).init(team),
            Status::InvalidParam,
            &["block 2", "displacement Some(8)", "11 elements"],
        );
        // Counts of a width the flags do not say cannot be given: CountInt
        // is u32 or u64, and u32 counts are read as u32.
        let narrow = [4u32, 4, 4];
        let narrow_displs = [0u32, 4, 8];
        Coll::allgatherv(&src, &mut vdst, &narrow, &narrow_displs).init(team).expect("u32 counts");
    });
}

#[test]
fn alltoallv_counts_that_disagree_between_ranks_fail_on_both_sides() {
    // Rank 0 sends 5 elements to rank 1, which expects 4.
    let errors = world::run(2, &Config::new(), |team, _| {
        let r = team.rank();
        let src = vec![7u64; 10];
        let mut dst = vec![0u64; 10];
        let sc: [u64; 2] = if r == 0 { [1, 5] } else { [4, 1] };
        let rc: [u64; 2] = if r == 0 { [1, 4] } else { [4, 1] };
        let d = [0u64, 5];
        Coll::alltoallv(&src, &sc, &d, &mut dst, &rc, &d)
            .timeout(Duration::from_secs(2))
            .run(team)
            .err()
            .map(|e| e.to_string())
    });
    let rank1 = errors[1].as_deref().unwrap_or("no error");
    assert!(rank1.contains("40 bytes") && rank1.contains("32"), "rank 1: {rank1}");
}

/// Gatherv and scatterv: a rank whose block the root counts differently
/// fails, naming both sizes; so does gatherv's root, which reads every
/// rank's table. Scatterv's root waits for nobody (as a scatter's): its
/// next collective fails, naming that rank. A third rank, whose block
/// agrees, is not held up by the pair (it waits for the root only) and
/// completes or fails, but never hangs.
#[test]
fn rooted_v_counts_that_disagree_fail_on_the_rank_and_reach_the_root() {
    // Blocks carried in the size round, and blocks long enough for single
    // copy (read straight from the givers' buffers, where the kernel lets
    // it; else staged in rounds).
    for n in [2usize, 32 << 10] {
        for scatter in [false, true] {
            let out = world::run(3, &Config::new(), move |team, _| {
                let me = team.rank();
                let counts = [n as u64; 3];
                let displs = [0u64, n as u64, 2 * n as u64];
                // Rank 1 has one element more than the root counts.
                let mine = if me == 1 { n + 1 } else { n };
                let (mut a, mut b) = (vec![5u32; 3 * n + 2], vec![0u32; 3 * n + 2]);
                let coll = if scatter {
                    let src = (me == 0).then(|| (&a[..3 * n], &counts[..], &displs[..]));
                    Coll::scatterv(src, &mut b[..mine], 0)
                } else {
                    let dst = (me == 0).then(|| (&mut b[..3 * n], &counts[..], &displs[..]));
                    Coll::gatherv(&a[..mine], dst, 0)
                };
                let r = coll.timeout(Duration::from_secs(10)).run(team).err().map(|e| e.to_string());
                a.clear();
                let next = Coll::barrier().timeout(Duration::from_secs(10)).run(team).err().map(|e| e.to_string());
                (r, next)
            });
            let what = if scatter { "scatterv" } else { "gatherv" };
            let (root_bytes, rank_bytes) = (4 * n, 4 * (n + 1));
            let named = |e: &str| {
                e.contains("do the ranks' counts agree")
                    && e.contains(&root_bytes.to_string())
                    && e.contains(&rank_bytes.to_string())
            };
            let rank1 = out[1].0.as_deref().unwrap_or("no error");
            assert!(named(rank1), "{what} of {n}, rank 1: {rank1}");
            let root = &out[0];
            if scatter {
                let e = root.0.as_deref().or(root.1.as_deref()).unwrap_or("no error");
                assert!(
                    e.contains("rank 1") || named(e),
                    "{what} of {n}, root: its scatterv or the barrier after it must fail naming rank 1: {root:?}"
                );
            } else {
                let e = root.0.as_deref().unwrap_or("no error");
                assert!(named(e), "{what} of {n}, root: {e}");
            }
        }
    }
}

#[test]
fn in_place_where_it_is_not_allowed() {
    on_team(2, |team| {
        let mut a = CollArgs::new(CollType::Bcast);
        let mut b = vec![0u8; 4];
        a.src = info(b.as_mut_ptr(), 4, DataType::Uint8);
        a.flags = CollFlags::IN_PLACE;
        // SAFETY: b outlives the call, which fails at validation.
        expect_err(unsafe { team.collective_init(&a) }, Status::InvalidParam, &["in-place", "bcast"]);
        let mut a = CollArgs::new(CollType::Barrier);
        a.flags = CollFlags::IN_PLACE;
        // SAFETY: no buffers.
        expect_err(unsafe { team.collective_init(&a) }, Status::InvalidParam, &["in-place", "no buffers"]);
    });
}

#[test]
fn overlapping_buffers_without_in_place() {
    on_team(2, |team| {
        let mut v = vec![0f64; 8];
        let p = v.as_mut_ptr().cast::<u8>();
        let mut a = CollArgs::new(CollType::Allreduce);
        a.src = info(p, 4, DataType::Float64);
        // SAFETY: offset 16 bytes stays inside v.
        a.dst = info(unsafe { p.add(16) }, 4, DataType::Float64);
        // SAFETY: both ranges lie in v, alive for the call, which fails at validation.
        expect_err(unsafe { team.collective_init(&a) }, Status::InvalidParam, &["overlap"]);
    });
}

/// One buffer given as both source and destination, exactly (UCC accepts
/// it; Open MPI 4.1 makes such an allreduce at every communicator
/// creation): allreduce, alltoall and a root's reduce run in place; a
/// gather's root, whose source is one block of its destination, is still
/// refused.
#[test]
fn one_buffer_as_source_and_destination_runs_in_place() {
    on_team(2, |team| {
        let me = team.rank() as f64;
        let run = |coll: CollType, v: &mut Vec<f64>, root: u64| {
            let mut a = CollArgs::new(coll);
            let p = v.as_mut_ptr().cast::<u8>();
            (a.src, a.dst, a.root) =
                (info(p, v.len() as u64, DataType::Float64), info(p, v.len() as u64, DataType::Float64), root);
            // SAFETY: `v` outlives the request, which runs to completion here.
            let mut req = unsafe { team.collective_init(&a) }.unwrap_or_else(|e| panic!("{coll}: {e}"));
            req.run().unwrap_or_else(|e| panic!("{coll}: {e}"));
        };
        let mut v = vec![me + 1.0; 4];
        run(CollType::Allreduce, &mut v, 0);
        assert_eq!(v, [3.0; 4]);
        let mut v = vec![me * 10.0, me * 10.0 + 1.0];
        run(CollType::Alltoall, &mut v, 0);
        assert_eq!(v, [me, 10.0 + me]);
        let mut v = vec![me + 1.0; 3];
        run(CollType::Reduce, &mut v, 1);
        assert_eq!(v, if team.rank() == 1 { [3.0; 3] } else { [1.0; 3] });
        let mut v = vec![0f64; 4];
        let p = v.as_mut_ptr().cast::<u8>();
        let mut a = CollArgs::new(CollType::Gather);
        (a.src, a.dst) = (info(p, 2, DataType::Float64), info(p, 4, DataType::Float64));
        if team.rank() == 0 {
            // SAFETY: both ranges lie in v, alive for the call, which fails at validation on the root.
            expect_err(unsafe { team.collective_init(&a) }, Status::InvalidParam, &["overlap"]);
        }
    });
}

#[test]
fn other_bad_arguments() {
    on_team(2, |team| {
        let src = vec![1i32; 4];
        let mut dst = vec![0i32; 4];
        // Wrong buffer kind for the collective.
        let mut a = CollArgs::new(CollType::Allreduce);
        a.src = CollBuffer::InfoV(BufferInfoV {
            buffer: src.as_ptr().cast_mut().cast(),
            counts: std::ptr::null(),
            displacements: std::ptr::null(),
            datatype: DataType::Int32,
            mem_type: MemType::Host,
        });
        a.dst = info(dst.as_mut_ptr().cast(), 4, DataType::Int32);
        // SAFETY: buffers outlive the call, which fails at validation.
        expect_err(unsafe { team.collective_init(&a) }, Status::InvalidParam, &["src must be a plain buffer"]);
        // Datatypes that differ.
        let mut a = CollArgs::new(CollType::Allreduce);
        a.src = info(src.as_ptr().cast_mut().cast(), 4, DataType::Int32);
        a.dst = info(dst.as_mut_ptr().cast(), 4, DataType::Uint32);
        // SAFETY: as above.
        expect_err(unsafe { team.collective_init(&a) }, Status::InvalidParam, &["int32", "uint32"]);
        // ROCm memory.
        let mut a = CollArgs::new(CollType::Allreduce);
        a.src = CollBuffer::Info(BufferInfo {
            buffer: src.as_ptr().cast_mut().cast(),
            count: 4,
            datatype: DataType::Int32,
            mem_type: MemType::Rocm,
        });
        a.dst = info(dst.as_mut_ptr().cast(), 4, DataType::Int32);
        // SAFETY: as above.
        expect_err(unsafe { team.collective_init(&a) }, Status::NotSupported, &["rocm"]);
        // A timeout that is not a duration.
        let mut a = CollArgs::new(CollType::Barrier);
        a.flags = CollFlags::TIMEOUT;
        a.timeout = -1.0;
        // SAFETY: no buffers.
        expect_err(unsafe { team.collective_init(&a) }, Status::InvalidParam, &["timeout -1"]);
        for bad in [0.0, f64::NAN, f64::NEG_INFINITY] {
            a.timeout = bad;
            // SAFETY: no buffers.
            expect_err(unsafe { team.collective_init(&a) }, Status::InvalidParam, &["is not a positive number"]);
        }
        // (+inf is accepted: `timeouts_too_long_for_the_clock_mean_no_deadline`.)
        // Active sets are for bcast only.
        let set = ActiveSet { start: 0, stride: 1, size: 2 };
        expect_err(
            Coll::allreduce(&src, &mut dst, ReduceOp::Sum).active_set(set, 1).init(team),
            Status::NotSupported,
            &["active sets"],
        );
        let mut b = vec![0u8; 2];
        let outside = ActiveSet { start: 1, stride: 1, size: 2 };
        expect_err(
            Coll::bcast(&mut b, 1).active_set(outside, 1).init(team),
            Status::InvalidParam,
            &["outside team of 2"],
        );
    });
}

#[test]
fn request_lifecycle_misuse() {
    on_team(2, |team| {
        let src = vec![1u16; 8];
        let mut dst = vec![0u16; 8];
        let mut req = Coll::allreduce(&src, &mut dst, ReduceOp::Sum).init(team).expect("init");
        assert_eq!(req.test().expect("test"), Status::OperationInitialized);
        expect_err(req.wait(), Status::InvalidParam, &["never posted"]);
        req.run().expect("first run");
        expect_err(req.post(), Status::InvalidParam, &["not persistent"]);
        req.finalize().expect("finalize");
        expect_err(req.post(), Status::InvalidParam, &["finalized"]);
        expect_err(req.test(), Status::InvalidParam, &["finalized"]);
        expect_err(req.finalize(), Status::InvalidParam, &["already finalized"]);
    });
}

#[test]
fn posting_or_finalizing_a_request_in_progress() {
    // Rank 1 joins the bcast only after rank 0 has tried to re-post and
    // finalize it, so rank 0's request is certainly in progress then.
    let go = Arc::new(AtomicBool::new(false));
    world::run(2, &Config::new(), move |team, _| {
        if team.rank() == 0 {
            let mut b = vec![0u8; 4];
            let mut req = Coll::bcast(&mut b, 1).timeout(Duration::from_secs(30)).init(team).expect("init");
            req.post().expect("post");
            expect_err(req.post(), Status::InvalidParam, &["still in progress"]);
            expect_err(req.finalize(), Status::InvalidParam, &["in progress"]);
            go.store(true, Ordering::SeqCst);
            req.wait().expect("wait");
            drop(req);
            assert_eq!(b, vec![9; 4]);
        } else {
            while !go.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            let mut b = vec![9u8; 4];
            Coll::bcast(&mut b, 1).run(team).expect("bcast");
        }
    });
}

#[test]
fn team_used_after_its_context_is_gone() {
    let lib = Lib::new().expect("lib");
    let ctx = Context::new(&lib, ContextParams::default()).expect("ctx");
    let team = Team::create(&ctx, TeamParams::default()).expect("team");
    drop(ctx);
    expect_err(Coll::barrier().init(&team), Status::InvalidParam, &["context", "destroyed"]);
    expect_err(team.progress(), Status::InvalidParam, &["destroyed"]);
}

#[test]
fn request_outliving_its_team() {
    let lib = Lib::new().expect("lib");
    let ctx = Context::new(&lib, ContextParams::default()).expect("ctx");
    let team = Team::create(&ctx, TeamParams::default()).expect("team");
    let mut req = Coll::barrier().persistent().init(&team).expect("init");
    req.run().expect("run");
    drop(team);
    expect_err(req.post(), Status::InvalidParam, &["team", "destroyed"]);
}

#[test]
fn bad_endpoint_maps() {
    world::run(3, &Config::new(), |_team, ctx| {
        let me = ctx.ep() as u64;
        let others: Vec<u64> = (0..3).filter(|&e| e != me).collect();
        expect_err(
            Team::create_post(ctx, TeamParams::with_ep_map(EpMap::Array(others))),
            Status::NotFound,
            &["not in the team"],
        );
        expect_err(
            Team::create_post(ctx, TeamParams::with_ep_map(EpMap::Array(vec![me, me]))),
            Status::InvalidParam,
            &["twice"],
        );
        expect_err(
            Team::create_post(ctx, TeamParams::with_ep_map(EpMap::Array(vec![me, 7]))),
            Status::InvalidParam,
            &["endpoint 7"],
        );
    });
}

#[test]
fn a_member_that_never_creates_the_team_is_named() {
    let mut c = Config::new();
    c.set("TEAM_CREATE_TIMEOUT", "300ms");
    let results = world::run(3, &c, |_team, ctx| {
        // Endpoint 2 never creates the second team (but stays alive meanwhile).
        if ctx.ep() == 2 {
            std::thread::sleep(Duration::from_millis(1500));
            return Ok(Status::Ok);
        }
        let team = Team::create_post(ctx, TeamParams::default()).map_err(|e| e.to_string())?;
        loop {
            match team.create_test() {
                Ok(Status::InProgress) => std::thread::yield_now(),
                other => return other.map_err(|e| e.to_string()),
            }
        }
    });
    for r in &results[..2] {
        let e = r.as_ref().expect_err("creation must time out");
        assert!(e.contains("not created after 0.3 s") && e.contains("waiting for a message from rank"), "{e}");
    }
    // Rank 0 collects the others in the creation handshake: it names the missing one.
    assert!(results[0].as_ref().is_err_and(|e| e.contains("rank 2")), "{:?}", results[0]);
}

#[test]
fn bad_tune_strings_and_configuration() {
    world::run(2, &Config::new(), |_team, ctx| {
        let p = TeamParams::default().set("TL_P2P_TUNE", "allreduce:@no_such_alg");
        let e = Team::create(ctx, p).err().expect("unknown algorithm");
        assert!(e.to_string().contains("no_such_alg"), "{e}");
        let p = TeamParams::default().set("TL_P2P_TUNE", "allreduce:0-4k:huh");
        let e = Team::create(ctx, p).err().expect("bad token");
        assert!(e.to_string().contains("huh"), "{e}");
        let p = TeamParams::default().set("TL_P2P_ALLREDUCE_KN_RADIX", "1");
        let e = Team::create(ctx, p).err().expect("radix 1");
        assert!(e.to_string().contains("UCC_TL_P2P_ALLREDUCE_KN_RADIX=1"), "{e}");
        let p = TeamParams::default().set("CALL_BOARD", "maybe");
        let e = Team::create(ctx, p).err().expect("not a boolean");
        assert!(e.to_string().contains("UCC_CALL_BOARD") && e.to_string().contains("maybe"), "{e}");
    });
    let mut c = Config::new();
    c.set("COLL_TIMEOUT", "soon");
    let lib = Lib::with_params(LibParams { config: c, ..LibParams::default() }).expect("lib");
    let e = Context::new(&lib, ContextParams::default()).err().expect("bad timeout");
    assert!(e.to_string().contains("UCC_COLL_TIMEOUT") && e.to_string().contains("soon"), "{e}");
    let mut c = Config::new();
    c.set("TLS", "^p2p,self,shm,nccl,sharp");
    let e = Lib::with_params(LibParams { config: c, ..LibParams::default() }).err().expect("no TLs");
    assert!(e.to_string().contains("leaves no transport"), "{e}");
}

#[test]
fn collective_on_a_team_still_being_created() {
    let lib = Lib::new().expect("lib");
    let mut oobs = ThreadOob::group(2);
    let o1 = oobs.pop().expect("oob");
    let o0 = oobs.pop().expect("oob");
    let l1 = lib.clone();
    let other = std::thread::spawn(move || {
        let ctx = Context::new(&l1, ContextParams::with_oob(o1)).expect("ctx");
        std::thread::sleep(Duration::from_millis(300));
        Team::create(&ctx, TeamParams::default()).expect("team");
    });
    let ctx = Context::new(&lib, ContextParams::with_oob(o0)).expect("ctx");
    let team = Team::create_post(&ctx, TeamParams::default()).expect("post");
    assert_eq!(team.create_test().expect("test"), Status::InProgress);
    expect_err(Coll::barrier().init(&team), Status::InvalidParam, &["still being created"]);
    while team.create_test().expect("test") == Status::InProgress {
        std::thread::yield_now();
    }
    other.join().expect("join");
}

#[test]
fn timeouts_too_long_for_the_clock_mean_no_deadline() {
    on_team(2, |team| {
        let src = vec![1.0f32; 4];
        let mut dst = vec![0.0f32; 4];
        Coll::allreduce(&src, &mut dst, ReduceOp::Sum).timeout(Duration::MAX).run(team).expect("Duration::MAX");
        assert_eq!(dst, vec![2.0; 4]);
        let mut a = CollArgs::new(CollType::Barrier);
        a.flags |= CollFlags::TIMEOUT;
        // +inf too: UCC's "never" (its check `now - start > timeout` never fires).
        for t in [1e20, 1e300, f64::MAX, f64::INFINITY] {
            a.timeout = t;
            // SAFETY: a barrier has no buffers.
            let mut req = unsafe { team.collective_init(&a) }.expect("a huge raw timeout");
            req.run().expect("barrier");
        }
    });
    let mut c = Config::new();
    c.set("COLL_TIMEOUT", "100000000000000000000").set("WATCHDOG_TIMEOUT", "99999999999999999999999h");
    world::run(2, &c, |team, _| {
        let mut v = vec![1u8; 3];
        Coll::bcast(&mut v, 0).run(team).expect("bcast under a 1e20 s default timeout");
    });
}

#[test]
fn zero_timeouts_and_unknown_log_levels_are_refused() {
    for name in ["COLL_TIMEOUT", "WATCHDOG_TIMEOUT", "OOB_TIMEOUT", "TEAM_CREATE_TIMEOUT"] {
        let mut c = Config::new();
        c.set(name, "0");
        let lib = Lib::with_params(LibParams { config: c, ..LibParams::default() }).expect("lib");
        let e = Context::new(&lib, ContextParams::default()).err().expect("a zero timeout");
        let text = e.to_string();
        assert!(text.contains(&format!("UCC_{name}")) && text.contains("not a positive duration"), "{text}");
    }
    let mut c = Config::new();
    c.set("LOG_LEVEL", "loud");
    let e = expect_err(
        Lib::with_params(LibParams { config: c, ..LibParams::default() }),
        Status::InvalidParam,
        &["UCC_LOG_LEVEL", "loud"],
    );
    drop(e);
}

#[test]
fn raw_maxloc_on_plain_values_is_refused_unless_pairs_are_declared() {
    on_team(2, |team| {
        let mut src = vec![1.0f32; 4];
        let mut dst = vec![0.0f32; 4];
        let mut a = CollArgs::new(CollType::Allreduce);
        a.op = ReduceOp::Maxloc;
        a.src = info(src.as_mut_ptr().cast(), 4, DataType::Float32);
        a.dst = info(dst.as_mut_ptr().cast(), 4, DataType::Float32);
        // SAFETY: the buffers hold 4 float32 each and outlive the call; init fails before any use.
        expect_err(unsafe { team.collective_init(&a) }, Status::InvalidParam, &["maxloc", "LOC_PAIRS"]);
        // Declared, the same 16 bytes are 2 (value, index) pairs.
        a.flags |= CollFlags::LOC_PAIRS;
        a.src = info(src.as_mut_ptr().cast(), 2, DataType::Float32);
        a.dst = info(dst.as_mut_ptr().cast(), 2, DataType::Float32);
        // SAFETY: 2 pairs of 8 bytes fit the 16-byte buffers, alive until the request is dropped.
        let mut req = unsafe { team.collective_init(&a) }.expect("declared pairs");
        req.run().expect("maxloc over pairs");
    });
}

#[test]
fn a_shm_data_size_past_its_maximum_is_refused_not_wrapped() {
    // 8388608T is 2^63 bytes: the segment layout used to wrap to a few hundred
    // bytes and the first allreduce wrote far past the mapping.
    for v in ["8388608T", "2G"] {
        let mut c = Config::new();
        c.set("TL_SHM_DATA_SIZE", v);
        let lib = Lib::with_params(LibParams { config: c, ..LibParams::default() }).expect("lib");
        let e = expect_err(
            Context::new(&lib, ContextParams::default()),
            Status::InvalidParam,
            &["UCC_TL_SHM_DATA_SIZE", v],
        );
        assert!(e.to_string().contains("maximum"), "{e}");
    }
}

/// Team creation on 2 thread ranks whose libraries are configured apart
/// (`settings[r]` for rank r); each rank's result.
fn create_with(settings: [&[(&str, &str)]; 2]) -> Vec<ferrocoll::Result<()>> {
    let handles: Vec<_> = ThreadOob::group(2)
        .into_iter()
        .zip(settings)
        .map(|(oob, set)| {
            let mut c = Config::new();
            // A regression hangs for this long, not for the default 120 s.
            c.set("TEAM_CREATE_TIMEOUT", "20s");
            for (k, v) in set {
                c.set(k, *v);
            }
            std::thread::spawn(move || {
                let lib = Lib::with_params(LibParams { config: c, ..LibParams::default() })?;
                let ctx = Context::new(&lib, ContextParams::with_oob(oob))?;
                Team::create(&ctx, TeamParams::default()).map(drop)
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().expect("rank thread")).collect()
}

/// Two thread ranks, each creating a team with its own per-team overrides
/// (`TeamParams::config`) over contexts configured alike: what each got.
fn create_team_with(overrides: [&[(&str, &str)]; 2]) -> Vec<ferrocoll::Result<()>> {
    let handles: Vec<_> = ThreadOob::group(2)
        .into_iter()
        .zip(overrides)
        .map(|(oob, set)| {
            let mut c = Config::new();
            // A regression hangs for this long, not for the default 120 s.
            c.set("TEAM_CREATE_TIMEOUT", "20s");
            let set: Vec<(String, String)> = set.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            std::thread::spawn(move || {
                let lib = Lib::with_params(LibParams { config: c, ..LibParams::default() })?;
                let ctx = Context::new(&lib, ContextParams::with_oob(oob))?;
                let params = set.into_iter().fold(TeamParams::default(), |p, (k, v)| p.set(&k, v));
                Team::create(&ctx, params).map(drop)
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().expect("rank thread")).collect()
}

#[test]
fn members_that_override_a_tl_setting_differently_for_one_team_are_refused_naming_the_variable() {
    let out =
        create_team_with([&[("TL_P2P_TUNE", "allreduce:@ring:inf")], &[("TL_P2P_TUNE", "allreduce:@knomial:inf")]]);
    for (rank, r) in out.iter().enumerate() {
        let e = r.as_ref().expect_err("different per-team tune strings");
        assert_eq!(e.status(), Status::InvalidParam, "{e}");
        assert!(e.to_string().contains("UCC_TL_P2P_TUNE differs between the team's members"), "{e}");
        assert!(
            e.to_string().contains(&format!("on rank {rank} (this one), another value on rank {}", 1 - rank)),
            "{e}"
        );
    }
    // Set on one member only.
    let out = create_team_with([&[("TL_P2P_ALLREDUCE_KN_RADIX", "8")], &[]]);
    assert!(
        out.iter().all(|r| r.as_ref().is_err_and(|e| e.to_string().contains("UCC_TL_P2P_ALLREDUCE_KN_RADIX"))),
        "{out:?}"
    );
    // The barrier radix too (the creation handshake does not use it, so it cannot hang there).
    let out = create_team_with([&[("TL_P2P_BARRIER_KN_RADIX", "2")], &[("TL_P2P_BARRIER_KN_RADIX", "3")]]);
    assert!(
        out.iter().all(|r| r.as_ref().is_err_and(|e| e.to_string().contains("UCC_TL_P2P_BARRIER_KN_RADIX"))),
        "{out:?}"
    );
    // Alike, or only settings that are each rank's own: fine.
    assert!(create_team_with([&[("TL_P2P_TUNE", "allreduce:@ring:inf")]; 2]).iter().all(Result::is_ok));
    assert!(create_team_with([&[("TL_P2P_TCP_CONNECT_TIMEOUT", "5s")], &[]]).iter().all(Result::is_ok));
}

#[test]
fn members_with_no_transport_layer_in_common_are_told_at_once() {
    let start = std::time::Instant::now();
    let out = create_with([&[("TLS", "shm,self")], &[("TLS", "p2p,self")]]);
    for r in &out {
        let e = r.as_ref().expect_err("no common TL");
        assert_eq!(e.status(), Status::NotSupported, "{e}");
        assert!(e.to_string().contains("endpoint 0 has self, shm; endpoint 1 has self, p2p"), "{e}");
    }
    assert!(start.elapsed() < Duration::from_secs(10), "took {:?}", start.elapsed());
    // A TL one member lacks is left out; the others serve the team.
    assert!(create_with([&[("TLS", "shm,p2p,self")], &[("TLS", "p2p,self")]]).iter().all(Result::is_ok));
}

#[test]
fn members_that_tune_a_tl_differently_are_refused_naming_the_variable() {
    let out = create_with([&[("TL_P2P_ALLREDUCE_KN_RADIX", "2")], &[("TL_P2P_ALLREDUCE_KN_RADIX", "8")]]);
    for r in &out {
        let e = r.as_ref().expect_err("different radixes");
        assert_eq!(e.status(), Status::InvalidParam, "{e}");
        assert!(e.to_string().contains("UCC_TL_P2P_ALLREDUCE_KN_RADIX differs"), "{e}");
    }
    let out = create_with([&[("TL_SHM_TUNE", "allreduce:@rsag")], &[]]);
    assert!(out.iter().all(|r| r.as_ref().is_err_and(|e| e.to_string().contains("UCC_TL_SHM_TUNE"))), "{out:?}");
    // Transport settings are each rank's own.
    assert!(create_with([&[("TL_P2P_TCP_CONNECT_TIMEOUT", "5s")], &[]]).iter().all(Result::is_ok));
}
