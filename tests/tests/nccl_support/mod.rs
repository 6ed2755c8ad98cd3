//! What the TL/NCCL tests share (`nccl_fake.rs` on the fake NCCL,
//! `gpu_nccl.rs` on a GPU): an f32 allreduce on device memory through the
//! library, and conformance cases on device memory that must be served by
//! TL/NCCL.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use ferrocoll::{
    BufferInfo, CollArgs, CollBuffer, CollFlags, CollType, Context, ContextParams, DataType, Lib, LibParams, MemType,
    ReduceOp, Request, Team, TeamParams, ThreadOob,
};
use ferrocoll_tests::cases::Case;
use ferrocoll_tests::runner::{case_args, coll_buffer, verify};
use ferrocoll_tests::setup::setup;

use crate::gpu_support::{DevBuf, Kind};

/// A sum allreduce of `n` f32 on device buffers `src` → `dst`, with `timeout` (if any).
///
/// # Safety
/// The buffers must hold `n` f32 each and outlive the request.
pub unsafe fn allreduce(
    team: &Team,
    src: &DevBuf,
    dst: &DevBuf,
    n: usize,
    timeout: Option<Duration>,
) -> ferrocoll::Result<Request<'static>> {
    let info = |b: &DevBuf| {
        CollBuffer::Info(BufferInfo {
            buffer: b.addr(),
            count: n as u64,
            datatype: DataType::Float32,
            mem_type: MemType::Cuda,
        })
    };
    let mut a = CollArgs::new(CollType::Allreduce);
    a.src = info(src);
    a.dst = info(dst);
    a.op = ReduceOp::Sum;
    a.flags = CollFlags::PERSISTENT;
    if let Some(t) = timeout {
        a.flags |= CollFlags::TIMEOUT;
        a.timeout = t.as_secs_f64();
    }
    // SAFETY: forwarded to our caller.
    unsafe { team.collective_init(&a) }
}

/// f32 values as bytes.
pub fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Bytes as f32 values.
pub fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

fn side(
    buf: &Option<DevBuf>,
    count: usize,
    v: &Option<(Vec<usize>, Vec<usize>)>,
    case: &Case,
    arrays: &mut Vec<Vec<u8>>,
) -> CollBuffer {
    let Some(b) = buf.as_ref() else { return CollBuffer::None };
    coll_buffer(b.addr(), count, v, case, MemType::Cuda, arrays)
}

/// Run `case` on device memory; it must be served by TL/NCCL (`Ok(false)`
/// when TL/NCCL refused it at init, which the caller judges), and its result
/// must verify against the suite's reference.
pub fn run_case(team: &Team, case: &Case) -> Result<bool, String> {
    let (rank, size) = (team.rank(), team.size());
    let fresh = setup(case, rank, size);
    let src = fresh.src.as_deref().map(|b| DevBuf::from_host(b, Kind::Device));
    let dst = fresh.dst.as_deref().map(|b| DevBuf::from_host(b, Kind::Device));
    let mut arrays = Vec::new();
    let mut a = case_args(case);
    a.src = side(&src, fresh.src_count, &fresh.src_v, case, &mut arrays);
    a.dst = side(&dst, fresh.dst_count, &fresh.dst_v, case, &mut arrays);
    // SAFETY: the pointers in `a` point into `src`, `dst` and `arrays`, which outlive the request.
    let mut req = unsafe { team.collective_init(&a) }.map_err(|e| format!("{case}: init: {e}"))?;
    if !req.selected().starts_with("nccl/") {
        return if req.selected() == "none/zero-size" { Ok(true) } else { Ok(false) };
    }
    let posts = if case.persistent { 3 } else { 1 };
    for i in 0..posts {
        if i > 0 {
            if let (Some(b), Some(f)) = (&src, &fresh.src) {
                b.write(f);
            }
            if let (Some(b), Some(f)) = (&dst, &fresh.dst) {
                b.write(f);
            }
        }
        req.post().map_err(|e| format!("{case}: post: {e}"))?;
        req.wait().map_err(|e| format!("{case}: wait: {e}"))?;
        let mut got = fresh.clone();
        got.dst = dst.as_ref().map(DevBuf::read);
        got.src = src.as_ref().map(DevBuf::read);
        verify(case, rank, size, &got).map_err(|e| format!("{case} via {}, post {}: {e}", req.selected(), i + 1))?;
    }
    req.finalize().map_err(|e| format!("{case}: finalize: {e}"))?;
    Ok(true)
}

/// Two ranks (threads) on devices `devices`, each binding its own before creating the team.
pub fn two_ranks<R: Send + 'static>(devices: [usize; 2], f: impl Fn(&Team) -> R + Send + Sync + 'static) -> Vec<R> {
    let lib = Lib::with_params(LibParams::default()).expect("library");
    let f = Arc::new(f);
    let handles: Vec<_> = ThreadOob::group(2)
        .into_iter()
        .zip(devices)
        .map(|(oob, dev)| {
            let (lib, f) = (lib.clone(), f.clone());
            std::thread::spawn(move || {
                let primary =
                    ferrocoll_cuda::PrimaryContext::retain(ferrocoll_cuda::DeviceId::get(dev).expect("device"))
                        .expect("retain");
                primary.context().make_current().expect("current");
                let ctx = Context::new(&lib, ContextParams::with_oob(oob)).expect("context");
                let team = Team::create(&ctx, TeamParams::default()).expect("team");
                let out = f(&team);
                drop(team);
                drop(ctx);
                drop(primary);
                out
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().expect("rank")).collect()
}

/// A sum of 8 f32 on two ranks that told the library they run on GPUs
/// `devices`: checks the result, returns the TL/algorithm each rank ran.
pub fn allreduce_on_two_ranks(devices: [usize; 2]) -> Vec<String> {
    two_ranks(devices, |team| {
        let src = DevBuf::from_host(&f32_bytes(&[2.0; 8]), Kind::Device);
        let dst = DevBuf::new(32, Kind::Device);
        // SAFETY: 8 f32 each, outliving the request.
        let mut req = unsafe { allreduce(team, &src, &dst, 8, None) }.expect("init");
        let selected = req.selected().to_string();
        req.post().and_then(|()| req.wait()).expect("served by another TL");
        assert_eq!(f32s(&dst.read()), vec![4.0; 8]);
        selected
    })
}
