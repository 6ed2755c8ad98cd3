//! Worlds of ranks that are threads of this process.

use std::sync::Arc;
use std::time::Duration;

use ferrocoll::{Config, Context, ContextParams, Lib, LibParams, Team, TeamParams, ThreadOob};

/// Run `f` on `size` threads, each with its own context and a team over all of them.
///
/// `config` is laid over the environment for every rank (e.g. a tune string).
/// Returns each rank's result in rank order; a panicking rank panics the caller.
pub fn run<R, F>(size: usize, config: &Config, f: F) -> Vec<R>
where
    R: Send + 'static,
    F: Fn(&Team, &Context) -> R + Send + Sync + 'static,
{
    let lib = Lib::with_params(LibParams { config: config.clone(), ..LibParams::default() }).expect("library");
    let f = Arc::new(f);
    // Ranks keep their contexts until every rank is done, so an early finisher
    // does not look like a dead peer to the others.
    let leave = Arc::new(std::sync::Barrier::new(size));
    let handles: Vec<_> = ThreadOob::group(size)
        .into_iter()
        .map(|oob| {
            let (lib, f, leave) = (lib.clone(), f.clone(), leave.clone());
            std::thread::Builder::new()
                .name(format!("rank{}", ferrocoll::Oob::rank(&oob)))
                .spawn(move || {
                    use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
                    // A rank whose context or team fails still reaches the
                    // leave barrier (the others would wait there forever),
                    // then panics with its error.
                    let made = catch_unwind(AssertUnwindSafe(|| {
                        let ctx = Context::new(&lib, ContextParams::with_oob(oob)).expect("context");
                        let team = Team::create(&ctx, TeamParams::default()).expect("team");
                        (team, ctx)
                    }));
                    match made {
                        Err(p) => {
                            leave.wait();
                            resume_unwind(p)
                        }
                        Ok((team, ctx)) => {
                            let out = catch_unwind(AssertUnwindSafe(|| f(&team, &ctx)));
                            leave.wait();
                            // The team and context go only after every rank is done.
                            drop((team, ctx));
                            out.unwrap_or_else(|p| resume_unwind(p))
                        }
                    }
                })
                .expect("spawn")
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
}

/// Configuration that pins one p2p algorithm for one collective (and
/// switches the self TL off, so that teams of one use p2p too).
pub fn pin(coll: ferrocoll::CollType, alg: &str) -> Config {
    let mut c = Config::new();
    c.set("TL_P2P_TUNE", format!("{coll}:@{alg}:inf"));
    c.set("TL_SELF_TUNE", "0");
    c
}

/// A generous per-collective timeout for tests: a broken algorithm fails instead of hanging.
pub const TEST_TIMEOUT: Duration = Duration::from_secs(60);
