//! Running a closure on a team of thread ranks (for tools that need a team).

use ferrocoll::{Context, ContextParams, Lib, Result, Team, TeamParams, ThreadOob};

/// Run `f` on every rank of a team of `ranks` threads; results in rank order.
pub fn on_thread_team<R, F>(lib: &Lib, ranks: usize, f: F) -> Result<Vec<R>>
where
    R: Send + 'static,
    F: Fn(&Team) -> Result<R> + Send + Sync + Clone + 'static,
{
    let handles: Vec<_> = ThreadOob::group(ranks.max(1))
        .into_iter()
        .map(|oob| {
            let (lib, f) = (lib.clone(), f.clone());
            std::thread::spawn(move || -> Result<R> {
                let ctx = Context::new(&lib, ContextParams::with_oob(oob))?;
                let team = Team::create(&ctx, TeamParams::default())?;
                f(&team)
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().unwrap_or_else(|_| Err(ferrocoll::Error::internal("a rank thread panicked"))))
        .collect()
}
