//! What the shm TL's unit tests share.

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use ferrocoll_core::config::Config;
use ferrocoll_core::{Error, Result};

use super::ShmConfig;
use super::segment::Segment;
use super::team::{ShmTeam, TeamSetup};

/// Poll `fut` with a no-op waker until it is done (10 s at most).
pub(super) fn poll_to_end<T>(fut: impl Future<Output = Result<T>>) -> Result<T> {
    let mut fut = std::pin::pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Poll::Ready(r) = fut.as_mut().poll(&mut cx) {
            return r;
        }
        if Instant::now() > deadline {
            return Err(Error::internal("still waiting after 10 s"));
        }
        std::thread::yield_now();
    }
}

/// A team of `size` threads of this process, one `ShmTeam` per rank, its
/// segment named after `test`.
pub(super) fn threads(test: &str, size: usize) -> Vec<Arc<ShmTeam>> {
    let config = ShmConfig::from_config(&Config::new()).expect("default config");
    threads_with(test, size, |_| config.clone())
}

/// [`threads`], each rank with its own configuration (`config_of(rank)`).
pub(super) fn threads_with(test: &str, size: usize, config_of: impl Fn(usize) -> ShmConfig) -> Vec<Arc<ShmTeam>> {
    threads_in(test, size, &Arc::new(OnceLock::new()), config_of)
}

/// [`threads_with`], as teams of contexts that share what their first
/// ranks measured (`TeamSetup::probed`).
pub(super) fn threads_in(
    test: &str,
    size: usize,
    probed: &Arc<OnceLock<usize>>,
    config_of: impl Fn(usize) -> ShmConfig,
) -> Vec<Arc<ShmTeam>> {
    let name = Segment::name(&format!("shmtl-{test}{}", std::process::id()), 0x2c, 0xcf, "p1t2n3");
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..size)
            .map(|rank| {
                let (name, config) = (name.clone(), config_of(rank));
                s.spawn(move || {
                    let pids = vec![0; size];
                    let setup = TeamSetup { name, cookie: 0xcf, oversubscribed: false, pids, probed: probed.clone() };
                    poll_to_end(ShmTeam::create_shared(setup, rank, size, crate::heap_mc::heap_mcs(), config))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap().expect("team")).collect()
    })
}
