//! Test harness: runs one algorithm future per rank, each on its own thread,
//! over the in-process transport and a plain heap memory component, without
//! the core engine. It reaches the building blocks (`allgather_blocks`,
//! `exchange_blocks`) with layouts the public API never produces, such as
//! blocks out of order or with gaps between them.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use ferrocoll_core::args::Signature;
use ferrocoll_core::engine::TaskDiag;
use ferrocoll_core::{CollType, Error, MemRef, ProcInfo, Result};
use ferrocoll_transport::{InProcTransport, Router};

use crate::p2p::team::TeamShared;
use crate::p2p::{Comm, P2pConfig};

static NEXT_TEAM: AtomicU64 = AtomicU64::new(1);

/// Run `f(comm, buffer)` on one thread per entry of `bufs` (the ranks' buffers,
/// in rank order) and return each rank's buffer afterwards, or its error.
pub(crate) fn run_ranks<F, Fut>(bufs: Vec<Vec<u8>>, config: &P2pConfig, f: F) -> Vec<Result<Vec<u8>>>
where
    F: Fn(Comm, MemRef) -> Fut + Sync,
    Fut: Future<Output = Result<()>>,
{
    let places = vec![("", ""); bufs.len()];
    run_ranks_on(&places, bufs, config, f)
}

/// [`run_ranks`] on a team whose ranks run at `places` ((host, switch) per
/// rank, as `Layout::new` takes them), for the hierarchical algorithms.
pub(crate) fn run_ranks_on<F, Fut>(
    places: &[(&str, &str)],
    bufs: Vec<Vec<u8>>,
    config: &P2pConfig,
    f: F,
) -> Vec<Result<Vec<u8>>>
where
    F: Fn(Comm, MemRef) -> Fut + Sync,
    Fut: Future<Output = Result<()>>,
{
    let size = bufs.len();
    assert_eq!(places.len(), size, "one place per rank");
    let layout = Arc::new(ferrocoll_core::topo::Layout::new(places));
    let routers: Vec<Arc<Router>> =
        (0..size).map(|_| Arc::new(Router::new(vec![Box::new(InProcTransport::new())]))).collect();
    let me = ProcInfo::local();
    let addrs: Vec<(ProcInfo, Vec<u8>)> = routers.iter().map(|t| (me.clone(), t.address())).collect();
    for (ep, t) in routers.iter().enumerate() {
        t.connect(ep, &addrs).expect("connect");
    }
    // Relaxed: ids only need to be unique.
    let id = NEXT_TEAM.fetch_add(1, Ordering::Relaxed);
    let f = &f;
    let results = std::thread::scope(|s| {
        let handles: Vec<_> = bufs
            .into_iter()
            .zip(&routers)
            .enumerate()
            .map(|(rank, (mut buf, t))| {
                let shared = Arc::new(TeamShared {
                    id,
                    rank,
                    size,
                    eps: (0..size).collect(),
                    transport: t.clone(),
                    mcs: crate::heap_mc::heap_mcs(),
                    config: config.clone(),
                    layout: layout.clone(),
                    notices: Default::default(),
                    posted: Default::default(),
                    teams: Default::default(),
                    posted_via: Default::default(),
                    via_tag: 0,
                });
                s.spawn(move || {
                    // SAFETY: `buf` lives on this thread until the future that uses it is done.
                    let mem = unsafe { MemRef::from_mut_slice(&mut buf) };
                    // Every rank runs the same call; its signature only has to agree.
                    let sig = Signature::new(CollType::Allgather, None, 0, size as u64);
                    let comm = Comm::new(shared, 0, sig, Arc::new(TaskDiag::default()));
                    poll_to_end(f(comm, mem), rank).map(|()| buf)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
    });
    for t in &routers {
        t.close();
    }
    results
}

/// Poll `fut` with a no-op waker until it is done, as the engine does.
fn poll_to_end(fut: impl Future<Output = Result<()>>, rank: usize) -> Result<()> {
    let mut fut = std::pin::pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Poll::Ready(r) = fut.as_mut().poll(&mut cx) {
            return r;
        }
        if Instant::now() > deadline {
            return Err(Error::internal(format!("rank {rank} is still waiting after 30 s")));
        }
        std::thread::yield_now();
    }
}
