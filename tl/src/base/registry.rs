//! A TL's algorithms: what each is called, which collective it serves, and
//! how it runs — typed by its collective, so an algorithm receives exactly
//! its collective's [`Operands`](ferrocoll_core::args::Operands) and the
//! matching happens here, once.

use std::sync::Arc;

use ferrocoll_core::args::{
    Allgather, Allreduce, Alltoall, Bcast, CollInit, Gather, Operands, Reduce, ReduceScatter, Scatter,
};
use ferrocoll_core::backend::AlgInfo;
use ferrocoll_core::engine::TaskFuture;
use ferrocoll_core::score::AlgId;
use ferrocoll_core::{CollType, CollTypeSet, Error, Result};

/// One execution of an algorithm (a task's future, see `CollTask::start`).
pub(crate) type AlgFuture = TaskFuture;

/// How an algorithm runs, by collective: it gets the TL's execution context
/// `X` (a p2p `Comm`, the shm team, …) and its collective's operands.
pub(crate) enum Run<X> {
    /// Allreduce.
    Allreduce(fn(X, Allreduce) -> AlgFuture),
    /// Reduce.
    Reduce(fn(X, Reduce) -> AlgFuture),
    /// Bcast.
    Bcast(fn(X, Bcast) -> AlgFuture),
    /// Allgather and allgatherv.
    Allgather(fn(X, Allgather) -> AlgFuture),
    /// Gather and gatherv.
    Gather(fn(X, Gather) -> AlgFuture),
    /// Scatter and scatterv.
    Scatter(fn(X, Scatter) -> AlgFuture),
    /// Alltoall and alltoallv.
    Alltoall(fn(X, Alltoall) -> AlgFuture),
    /// Reduce-scatter and reduce-scatterv.
    ReduceScatter(fn(X, ReduceScatter) -> AlgFuture),
    /// Barrier.
    Barrier(fn(X) -> AlgFuture),
    /// Fanin, given the root.
    Fanin(fn(X, usize) -> AlgFuture),
    /// Fanout, given the root.
    Fanout(fn(X, usize) -> AlgFuture),
    /// Any collective, given all of its validated arguments (the self TL's local copy).
    Any(fn(X, Arc<CollInit>) -> AlgFuture),
}

// Function pointers are Copy whatever X is; a derive would ask X: Copy.
impl<X> Clone for Run<X> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<X> Copy for Run<X> {}

impl<X> Run<X> {
    /// Start one execution on `x` with `init`'s operands.
    pub(crate) fn start(&self, x: X, init: &Arc<CollInit>) -> Result<AlgFuture> {
        Ok(match (self, &init.ops) {
            (Run::Allreduce(f), Operands::Allreduce(o)) => f(x, o.clone()),
            (Run::Reduce(f), Operands::Reduce(o)) => f(x, o.clone()),
            (Run::Bcast(f), Operands::Bcast(o)) => f(x, o.clone()),
            (Run::Allgather(f), Operands::Allgather(o)) => f(x, o.clone()),
            (Run::Gather(f), Operands::Gather(o)) => f(x, o.clone()),
            (Run::Scatter(f), Operands::Scatter(o)) => f(x, o.clone()),
            (Run::Alltoall(f), Operands::Alltoall(o)) => f(x, o.clone()),
            (Run::ReduceScatter(f), Operands::ReduceScatter(o)) => f(x, o.clone()),
            (Run::Barrier(f), Operands::Barrier) => f(x),
            (Run::Fanin(f), Operands::Fanin { root }) => f(x, *root),
            (Run::Fanout(f), Operands::Fanout { root }) => f(x, *root),
            (Run::Any(f), _) => f(x, init.clone()),
            (_, ops) => {
                return Err(Error::internal(format!(
                    "an algorithm for {} was given {} operands",
                    self.serves(),
                    ops.kind()
                )));
            }
        })
    }

    /// The operands it takes, for messages.
    fn serves(&self) -> &'static str {
        match self {
            Run::Allreduce(_) => "allreduce",
            Run::Reduce(_) => "reduce",
            Run::Bcast(_) => "bcast",
            Run::Allgather(_) => "allgather",
            Run::Gather(_) => "gather",
            Run::Scatter(_) => "scatter",
            Run::Alltoall(_) => "alltoall",
            Run::ReduceScatter(_) => "reduce_scatter",
            Run::Barrier(_) => "barrier",
            Run::Fanin(_) => "fanin",
            Run::Fanout(_) => "fanout",
            Run::Any(_) => "any collective",
        }
    }

    /// Whether it can run collective `coll` (whose operands validation makes).
    #[cfg(test)]
    pub(crate) fn accepts(&self, coll: CollType) -> bool {
        use CollType as C;
        match self {
            Run::Allreduce(_) => coll == C::Allreduce,
            Run::Reduce(_) => coll == C::Reduce,
            Run::Bcast(_) => coll == C::Bcast,
            Run::Allgather(_) => matches!(coll, C::Allgather | C::Allgatherv),
            Run::Gather(_) => matches!(coll, C::Gather | C::Gatherv),
            Run::Scatter(_) => matches!(coll, C::Scatter | C::Scatterv),
            Run::Alltoall(_) => matches!(coll, C::Alltoall | C::Alltoallv),
            Run::ReduceScatter(_) => matches!(coll, C::ReduceScatter | C::ReduceScatterv),
            Run::Barrier(_) => coll == C::Barrier,
            Run::Fanin(_) => coll == C::Fanin,
            Run::Fanout(_) => coll == C::Fanout,
            Run::Any(_) => true,
        }
    }
}

/// Refuses (with `NotSupported`) arguments an algorithm cannot handle.
pub(crate) type CheckFn = fn(&CollInit) -> Result<()>;

/// One algorithm of a TL.
pub(crate) struct Alg<X: 'static> {
    /// Name, id and description (what `ferrocoll-info -A` prints and tune strings name).
    pub info: AlgInfo,
    /// How it runs.
    pub run: Run<X>,
    /// Arguments it refuses at init, beyond what validation refuses (most algorithms refuse none).
    pub check: Option<CheckFn>,
}

impl<X> Clone for Alg<X> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<X> Copy for Alg<X> {}

impl<X> Alg<X> {
    /// Algorithm `id` of `coll`, named `name`, running `run`, accepting every valid argument set.
    pub(crate) const fn new(
        coll: CollType,
        id: AlgId,
        name: &'static str,
        description: &'static str,
        run: Run<X>,
    ) -> Self {
        Alg { info: AlgInfo { coll, id, name, description }, run, check: None }
    }

    /// The same algorithm, refusing what `check` refuses.
    pub(crate) const fn with_check(mut self, check: CheckFn) -> Self {
        self.check = Some(check);
        self
    }

    /// Refuse arguments it cannot handle.
    pub(crate) fn supports(&self, init: &CollInit) -> Result<()> {
        self.check.map_or(Ok(()), |check| check(init))
    }
}

/// Every algorithm of a TL, made once per process.
pub(crate) struct Registry<X: 'static> {
    algs: Vec<Alg<X>>,
    infos: Vec<AlgInfo>,
}

impl<X> Registry<X> {
    /// A registry of the algorithms of `tables` (ids must be unique per
    /// collective; see [`Registry::check`]).
    pub(crate) fn new(tables: &[&[Alg<X>]]) -> Self {
        let algs: Vec<Alg<X>> = tables.iter().flat_map(|t| t.iter().copied()).collect();
        let infos = algs.iter().map(|a| a.info).collect();
        Registry { algs, infos }
    }

    /// Every algorithm's description.
    pub(crate) fn infos(&self) -> &[AlgInfo] {
        &self.infos
    }

    /// Algorithm `id` of `coll`.
    pub(crate) fn find(&self, coll: CollType, id: AlgId) -> Option<&Alg<X>> {
        self.algs.iter().find(|a| a.info.coll == coll && a.info.id == id)
    }

    /// The collectives it has an algorithm for.
    pub(crate) fn colls(&self) -> CollTypeSet {
        self.algs.iter().map(|a| a.info.coll).collect()
    }

    /// Consistency of the table, for each TL's tests: every algorithm runs the
    /// operands of the collective it is listed under, ids of a collective are
    /// 0, 1, 2, … in order, and names are unique per collective.
    #[cfg(test)]
    pub(crate) fn check(&self) -> std::result::Result<(), String> {
        for coll in CollType::ALL {
            let algs: Vec<_> = self.algs.iter().filter(|a| a.info.coll == coll).collect();
            for (i, a) in algs.iter().enumerate() {
                if !a.run.accepts(coll) {
                    return Err(format!("{coll}/{} runs {} operands", a.info.name, a.run.serves()));
                }
                if usize::from(a.info.id) != i {
                    return Err(format!("{coll}/{} has id {} at position {i}", a.info.name, a.info.id));
                }
                if algs[..i].iter().any(|b| b.info.name == a.info.name) {
                    return Err(format!("{coll}/{} is listed twice", a.info.name));
                }
            }
        }
        Ok(())
    }
}
