//! Collectives on CUDA memory: the p2p TL's staging path.
//!
//! - Everywhere: without a CUDA memory component a collective on `cuda`
//!   memory is a clean `NotSupported` naming the memory type; and every
//!   collective runs through the staging path on *emulated* CUDA memory
//!   (host memory labelled `cuda`, served by a stand-in component whose
//!   copies are memmove), so the wrapper's copy-in/copy-out logic is tested
//!   on machines without a GPU.
//! - On a GPU (or, without one, on the fake CUDA driver; see
//!   `ferrocoll_tests::gpu::skip_unless_gpu`): allreduce, bcast and
//!   reduce_scatter (and a slice of every other collective) on device and
//!   managed memory over teams of 2 and 4 threads sharing the GPU, and over
//!   teams of 2 and 4 processes.
//!
//! Results are checked against the conformance suite's independent
//! references (`ferrocoll_tests::setup` / `runner::verify`), outputs
//! poisoned before every run.

mod gpu_support;

use std::sync::Arc;
use std::time::Duration;

use ferrocoll::core::backend::{Mc, ReduceSpec, Scratch};
use ferrocoll::{
    BufferInfo, CollArgs, CollBuffer, CollType, Components, Config, Context, ContextParams, CpuEe, Error, Event,
    EventType, Lib, LibParams, MemRef, MemType, ReduceOp, Result, Status, TcpOob, Team, TeamParams, ThreadOob,
};
use ferrocoll_mc::HostMc;
use ferrocoll_tests::cases::{Case, device_matrix};
use ferrocoll_tests::gpu::skip_unless_gpu;
use ferrocoll_tests::procs::{Job, ROLE, free_port};
use ferrocoll_tests::runner::{coll_buffer, verify};
use ferrocoll_tests::setup::setup;
use gpu_support::{DevBuf, Kind};

/// The collectives the issue names for CUDA memory.
const MAIN: [CollType; 3] = [CollType::Allreduce, CollType::Bcast, CollType::ReduceScatter];

/// Every collective that moves data.
fn data_colls() -> impl Iterator<Item = CollType> {
    CollType::ALL.into_iter().filter(|c| !c.is_synchronisation())
}

/// Where a case's buffers live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// Host memory labelled `cuda` (with [`EmulatedCuda`] in the library).
    Emulated,
    /// `cuMemAlloc` memory.
    Device,
    /// `cuMemAllocManaged` memory.
    Managed,
}

/// One buffer of a case.
enum Block {
    Host(Vec<u8>),
    Dev(DevBuf),
}

impl Block {
    fn new(place: Place, bytes: &[u8]) -> Block {
        match place {
            Place::Emulated => Block::Host(bytes.to_vec()),
            Place::Device => Block::Dev(DevBuf::from_host(bytes, Kind::Device)),
            Place::Managed => Block::Dev(DevBuf::from_host(bytes, Kind::Managed)),
        }
    }

    fn addr(&mut self) -> *mut u8 {
        match self {
            Block::Host(v) => v.as_mut_ptr(),
            Block::Dev(d) => d.addr(),
        }
    }

    fn read(&self) -> Vec<u8> {
        match self {
            Block::Host(v) => v.clone(),
            Block::Dev(d) => d.read(),
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        match self {
            Block::Host(v) => v.copy_from_slice(bytes),
            Block::Dev(d) => d.write(bytes),
        }
    }
}

/// A stand-in for the CUDA component on machines without a GPU: "cuda"
/// memory that is host memory, copied with memmove. It offers no pinned
/// memory, so staging falls back to host scratch, and no reductions (the
/// staged algorithms reduce on the host).
struct EmulatedCuda(HostMc);

impl Mc for EmulatedCuda {
    fn name(&self) -> &'static str {
        "emulated_cuda"
    }

    fn mem_type(&self) -> MemType {
        MemType::Cuda
    }

    fn alloc(&self, len: usize) -> Result<Scratch> {
        self.0.alloc(len)
    }

    fn copy(&self, dst: MemRef, src: MemRef) -> Result<()> {
        if dst.len() != src.len() {
            return Err(Error::invalid_param(format!("copy of {} bytes into {}", src.len(), dst.len())));
        }
        if !dst.is_empty() {
            // SAFETY: in these tests every "cuda" MemRef is host memory
            // (a Vec of the case) and every other one host scratch, each
            // live for len bytes while the request runs; ptr::copy is memmove.
            unsafe { std::ptr::copy(src.addr(), dst.addr(), dst.len()) };
        }
        Ok(())
    }

    fn reduce(&self, _dst: MemRef, _srcs: &[MemRef], spec: &ReduceSpec) -> Result<()> {
        Err(Error::not_supported(format!("emulated cuda memory is never reduced in place ({})", spec.op)))
    }
}

/// The default components with only the host memory component.
fn host_only() -> Components {
    let mut c = ferrocoll::default_components();
    c.mcs.retain(|m| m.mem_type() == MemType::Host);
    c
}

/// The host-only components plus [`EmulatedCuda`].
fn emulated() -> Components {
    let mut c = host_only();
    c.mcs.push(Arc::new(EmulatedCuda(HostMc::new())));
    c
}

/// Run `f` on `size` thread ranks of a library over `components` (as
/// `ferrocoll_tests::world::run`, which always uses the default components).
fn world<R, F>(size: usize, components: fn() -> Components, f: F) -> Vec<R>
where
    R: Send + 'static,
    F: Fn(&Team) -> R + Send + Sync + 'static,
{
    let mut config = Config::new();
    config.set("TL_SELF_TUNE", "0");
    // These tests are about the p2p TL's staging; TL/NCCL (which would take
    // CUDA memory on a GPU with NCCL) is tested in gpu_nccl.rs.
    config.set("TL_NCCL_TUNE", "0");
    let lib = Lib::with_components(LibParams { config, ..LibParams::default() }, components()).expect("library");
    let f = Arc::new(f);
    let leave = Arc::new(std::sync::Barrier::new(size));
    let handles: Vec<_> = ThreadOob::group(size)
        .into_iter()
        .map(|oob| {
            let (lib, f, leave) = (lib.clone(), f.clone(), leave.clone());
            std::thread::spawn(move || {
                let ctx = Context::new(&lib, ContextParams::with_oob(oob)).expect("context");
                let team = Team::create(&ctx, TeamParams::default()).expect("team");
                let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&team)));
                leave.wait();
                out.unwrap_or_else(|p| std::panic::resume_unwind(p))
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
}

/// The memory type a case tells ferrocoll: the real one, or (every other
/// case, on a GPU) `Unknown`, so that the pointer query resolves it.
fn told(place: Place, case: &Case) -> MemType {
    match place {
        Place::Emulated => MemType::Cuda,
        _ if case.seed % 2 == 1 => MemType::Unknown,
        Place::Device => MemType::Cuda,
        Place::Managed => MemType::CudaManaged,
    }
}

fn side(
    block: &mut Option<Block>,
    count: usize,
    v: &Option<(Vec<usize>, Vec<usize>)>,
    case: &Case,
    mem_type: MemType,
    arrays: &mut Vec<Vec<u8>>,
) -> CollBuffer {
    let Some(b) = block.as_mut() else { return CollBuffer::None };
    coll_buffer(b.addr(), count, v, case, mem_type, arrays)
}

/// Run `case` on this rank with its buffers in `place`; check the result.
fn run_case_on(team: &Team, case: &Case, place: Place) -> std::result::Result<(), String> {
    let (rank, size) = (team.rank(), team.size());
    let fresh = setup(case, rank, size);
    let mut src = fresh.src.as_deref().map(|b| Block::new(place, b));
    let mut dst = fresh.dst.as_deref().map(|b| Block::new(place, b));
    let mut arrays = Vec::new();
    let mt = told(place, case);
    let mut a = ferrocoll_tests::runner::case_args(case);
    a.src = side(&mut src, fresh.src_count, &fresh.src_v, case, mt, &mut arrays);
    a.dst = side(&mut dst, fresh.dst_count, &fresh.dst_v, case, mt, &mut arrays);
    let fail = |what: &str, e: Error| format!("{case} on {place:?} memory, rank {rank}: {what}: {e}");
    // SAFETY: every pointer in `a` points into `src`, `dst` or `arrays`,
    // which live (unmoved: blocks are rewritten in place) until the end of
    // this function, after the request is finalized.
    let mut req = unsafe { team.collective_init(&a) }.map_err(|e| fail("init", e))?;
    if !req.selected().starts_with("p2p/") && req.selected() != "none/zero-size" {
        return Err(format!("{case}: {} ran, not the p2p TL", req.selected()));
    }
    let posts = if case.persistent { 3 } else { 1 };
    for i in 0..posts {
        if i > 0 {
            // Fresh inputs and a fresh poison for every post.
            if let (Some(b), Some(f)) = (src.as_mut(), fresh.src.as_ref()) {
                b.write(f);
            }
            if let (Some(b), Some(f)) = (dst.as_mut(), fresh.dst.as_ref()) {
                b.write(f);
            }
        }
        req.post().map_err(|e| fail("post", e))?;
        req.wait().map_err(|e| fail(&format!("wait (post {})", i + 1), e))?;
        let mut got = fresh.clone();
        got.dst = dst.as_ref().map(Block::read);
        // Bcast's result is in its one buffer, the source.
        got.src = src.as_ref().map(Block::read);
        verify(case, rank, size, &got)
            .map_err(|e| format!("{case} on {place:?} memory, rank {rank}, post {}: {e}", i + 1))?;
    }
    req.finalize().map_err(|e| fail("finalize", e))?;
    Ok(())
}

/// Run every `every`-th case of `colls` on each rank of a thread world.
fn thread_world(size: usize, components: fn() -> Components, colls: Vec<CollType>, place: Place, every: usize) {
    let results = world(size, components, move |team| {
        if place != Place::Emulated {
            gpu_support::bind();
        }
        let mut n = 0;
        for &coll in &colls {
            for case in device_matrix(coll, size, 500 + coll.index() as u64).iter().step_by(every) {
                run_case_on(team, case, place)?;
                n += 1;
            }
        }
        Ok::<usize, String>(n)
    });
    for (rank, r) in results.into_iter().enumerate() {
        match r {
            Ok(n) => assert!(n > 0, "rank {rank} ran no case"),
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn cuda_memory_without_a_cuda_component_is_not_supported() {
    for mt in [MemType::Cuda, MemType::CudaManaged] {
        let errors = world(2, host_only, move |team| {
            let src = [1.0f32; 4];
            let mut dst = [0.0f32; 4];
            let mut a = CollArgs::new(CollType::Allreduce);
            a.op = ReduceOp::Sum;
            a.src = CollBuffer::Info(BufferInfo {
                buffer: src.as_ptr().cast_mut().cast(),
                count: 4,
                datatype: ferrocoll::DataType::Float32,
                mem_type: mt,
            });
            a.dst = CollBuffer::Info(BufferInfo {
                buffer: dst.as_mut_ptr().cast(),
                count: 4,
                datatype: ferrocoll::DataType::Float32,
                mem_type: mt,
            });
            // SAFETY: the buffers outlive the request; the init fails before any use.
            unsafe { team.collective_init(&a) }.err()
        });
        for e in errors {
            let e = e.unwrap_or_else(|| panic!("a collective on {mt} memory was accepted without a CUDA component"));
            assert_eq!(e.status(), Status::NotSupported, "{e}");
            assert!(e.to_string().contains(mt.name()), "the error does not name {mt}: {e}");
        }
    }
}

#[test]
fn every_collective_runs_staged_on_emulated_cuda_memory_1_rank() {
    thread_world(1, emulated, data_colls().collect(), Place::Emulated, 1);
}

#[test]
fn every_collective_runs_staged_on_emulated_cuda_memory_2_ranks() {
    thread_world(2, emulated, data_colls().collect(), Place::Emulated, 1);
}

#[test]
fn every_collective_runs_staged_on_emulated_cuda_memory_3_ranks() {
    thread_world(3, emulated, data_colls().collect(), Place::Emulated, 1);
}

#[test]
fn every_collective_runs_staged_on_emulated_cuda_memory_4_ranks() {
    thread_world(4, emulated, data_colls().collect(), Place::Emulated, 1);
}

/// A triggered post copies its staged inputs in when its trigger fires, not
/// when it is posted: the trigger says the inputs are ready (on a CUDA
/// stream engine, that the stream work writing them has run). On emulated
/// CUDA memory with the CPU engine: the inputs are written after
/// `triggered_post` and before `set_event`, on teams of 1 to 3 ranks.
#[test]
fn a_triggered_post_stages_its_inputs_when_triggered_not_when_posted() {
    const N: usize = 64;
    const COMPUTE: Event = Event::new(EventType::ComputeComplete);
    for size in 1..=3 {
        world(size, emulated, |team| {
            let rank = team.rank();
            let mut src = vec![-1i64; N];
            let mut dst = vec![0i64; N];
            let info = |buffer: *mut i64| {
                CollBuffer::Info(BufferInfo {
                    buffer: buffer.cast(),
                    count: N as u64,
                    datatype: ferrocoll::DataType::Int64,
                    mem_type: MemType::Cuda,
                })
            };
            let mut a = CollArgs::new(CollType::Allreduce);
            a.op = ReduceOp::Sum;
            a.src = info(src.as_mut_ptr());
            a.dst = info(dst.as_mut_ptr());
            // SAFETY: src and dst outlive the request, which is finalized below; between
            // triggered_post and set_event only this thread writes src, and the request
            // may not read it before the trigger.
            let mut req = unsafe { team.collective_init(&a) }.expect("init");
            let ee = CpuEe::new();
            req.triggered_post(&ee, &COMPUTE).expect("triggered_post");
            let ready: Vec<i64> = (0..N as i64).map(|i| (rank as i64 + 1) * 100 + i).collect();
            // SAFETY: the request does not touch src before the trigger (the property tested).
            unsafe { std::ptr::copy_nonoverlapping(ready.as_ptr(), src.as_mut_ptr(), N) };
            ee.set_event(COMPUTE).expect("set_event");
            req.wait().expect("wait");
            req.finalize().expect("finalize");
            let want: Vec<i64> =
                (0..N as i64).map(|i| (0..team.size() as i64).map(|r| (r + 1) * 100 + i).sum()).collect();
            assert_eq!(dst, want, "rank {rank} of {}: the collective read its input before the trigger", team.size());
        });
    }
}

fn default_components() -> Components {
    ferrocoll::default_components()
}

#[test]
fn allreduce_bcast_reduce_scatter_on_device_memory_2_threads() {
    if skip_unless_gpu("allreduce_bcast_reduce_scatter_on_device_memory_2_threads") {
        return;
    }
    thread_world(2, default_components, MAIN.to_vec(), Place::Device, 1);
}

#[test]
fn allreduce_bcast_reduce_scatter_on_device_memory_4_threads() {
    if skip_unless_gpu("allreduce_bcast_reduce_scatter_on_device_memory_4_threads") {
        return;
    }
    thread_world(4, default_components, MAIN.to_vec(), Place::Device, 2);
}

#[test]
fn allreduce_bcast_reduce_scatter_on_managed_memory_2_threads() {
    if skip_unless_gpu("allreduce_bcast_reduce_scatter_on_managed_memory_2_threads") {
        return;
    }
    thread_world(2, default_components, MAIN.to_vec(), Place::Managed, 5);
}

#[test]
fn every_collective_on_device_memory_3_threads() {
    if skip_unless_gpu("every_collective_on_device_memory_3_threads") {
        return;
    }
    thread_world(3, default_components, data_colls().collect(), Place::Device, 7);
}

/// One rank of a process job started by [`process_job`] (a no-op when run directly).
#[test]
fn gpu_rank_body() {
    let Ok(role) = std::env::var(ROLE) else { return };
    let code = match role.as_str() {
        "gpu_colls" => gpu_colls_rank(),
        other => {
            println!("FAIL unknown role {other}");
            1
        }
    };
    std::process::exit(code);
}

fn gpu_colls_rank() -> i32 {
    let setup = || -> Result<(ferrocoll::Lib, Context)> {
        let lib = ferrocoll::Lib::new()?;
        let ctx = Context::new(&lib, ContextParams::with_oob(TcpOob::from_env()?))?;
        Ok((lib, ctx))
    };
    let (_lib, ctx) = match setup() {
        Ok(c) => c,
        Err(e) => {
            println!("FAIL context: {e}");
            return 1;
        }
    };
    let team = match Team::create(&ctx, TeamParams::default()) {
        Ok(t) => t,
        Err(e) => {
            println!("FAIL team: {e}");
            return 1;
        }
    };
    gpu_support::bind();
    let size = team.size();
    let mut n = 0;
    for coll in MAIN {
        for case in device_matrix(coll, size, 900 + coll.index() as u64).iter().step_by(2) {
            let place = if case.seed % 5 == 0 { Place::Managed } else { Place::Device };
            if let Err(e) = run_case_on(&team, case, place) {
                println!("FAIL {e}");
                return 1;
            }
            n += 1;
        }
    }
    println!("DONE {n}");
    0
}

/// `size` processes of this binary, each one rank, running [`gpu_colls_rank`].
fn process_job(size: usize) {
    let token = format!("gpu-{:x}-{:x}", std::process::id(), free_port());
    let job = Job::start("gpu_rank_body", "gpu_colls", size, 0..size, &token, free_port(), &|_| Vec::new());
    for o in job.finish(Duration::from_secs(300)) {
        assert!(
            o.success == Some(true) && o.lines("FAIL").is_empty() && !o.lines("DONE ").is_empty(),
            "rank {}: {:?}\n{}\n{}",
            o.rank,
            o.success,
            o.stdout,
            o.stderr
        );
    }
}

#[test]
fn allreduce_bcast_reduce_scatter_on_device_memory_2_processes() {
    if skip_unless_gpu("allreduce_bcast_reduce_scatter_on_device_memory_2_processes") {
        return;
    }
    process_job(2);
}

#[test]
fn allreduce_bcast_reduce_scatter_on_device_memory_4_processes() {
    if skip_unless_gpu("allreduce_bcast_reduce_scatter_on_device_memory_4_processes") {
        return;
    }
    process_job(4);
}
