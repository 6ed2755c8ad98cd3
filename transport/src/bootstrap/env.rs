//! Reading the launchers' variables into [`TcpOobParams`]: a pure function
//! over a map of variables, so that every case is testable without touching
//! the process environment. The table of variables is in the parent module's
//! documentation.

use std::collections::HashMap;
use std::time::Duration;

use ferrocoll_core::config::parse_duration;
use ferrocoll_core::hash::fnv1a;
use ferrocoll_core::{Error, Result};

use super::TcpOobParams;

/// Default of `UCC_OOB_TIMEOUT` (as in [`ferrocoll_core::config::CORE_FIELDS`]).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// Ports derived from a job identifier lie in `[PORT_BASE, PORT_BASE + PORT_SPAN)`,
/// below Linux's ephemeral range (32768–60999) so that outgoing connections do not take them.
const PORT_BASE: u16 = 20000;
const PORT_SPAN: u16 = 12768;

/// One launcher's variables.
struct Family {
    launcher: &'static str,
    rank: &'static str,
    size: &'static str,
    local_rank: &'static str,
    /// `None`: computed (Slurm, see [`slurm_local_size`]).
    local_size: Option<&'static str>,
    /// Variables that name the job, tried in order (each entry joined with `.`).
    job: &'static [&'static [&'static str]],
}

/// In order of precedence: a launcher started by another (torchrun inside
/// srun) is the nearer one, and its variables come first.
const FAMILIES: [Family; 4] = [
    Family {
        launcher: "torchrun/ferrocoll-run",
        rank: "RANK",
        size: "WORLD_SIZE",
        local_rank: "LOCAL_RANK",
        local_size: Some("LOCAL_WORLD_SIZE"),
        job: &[&["TORCHELASTIC_RUN_ID"]],
    },
    Family {
        launcher: "mpirun (Open MPI)",
        rank: "OMPI_COMM_WORLD_RANK",
        size: "OMPI_COMM_WORLD_SIZE",
        local_rank: "OMPI_COMM_WORLD_LOCAL_RANK",
        local_size: Some("OMPI_COMM_WORLD_LOCAL_SIZE"),
        job: &[&["OMPI_MCA_orte_hnp_uri"], &["PMIX_NAMESPACE"]],
    },
    Family {
        launcher: "MPICH hydra",
        rank: "PMI_RANK",
        size: "PMI_SIZE",
        local_rank: "MPI_LOCALRANKID",
        local_size: Some("MPI_LOCALNRANKS"),
        job: &[],
    },
    Family {
        launcher: "srun (Slurm)",
        rank: "SLURM_PROCID",
        size: "SLURM_NTASKS",
        local_rank: "SLURM_LOCALID",
        local_size: None,
        job: &[&["SLURM_JOB_ID", "SLURM_STEP_ID"], &["SLURM_JOB_ID"]],
    },
];

/// Index of Slurm in [`FAMILIES`]: its variables are inherited by everything
/// started inside an allocation, so they may describe an outer launch.
const SLURM: usize = 3;

/// Every variable [`parse`] may read (what `from_env` copies out of the environment).
pub(super) const VARIABLES: &[&str] = &[
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RUN_ID",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "OMPI_MCA_orte_hnp_uri",
    "PMIX_NAMESPACE",
    "PMI_RANK",
    "PMI_SIZE",
    "MPI_LOCALRANKID",
    "MPI_LOCALNRANKS",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_LOCALID",
    "SLURM_NODEID",
    "SLURM_NNODES",
    "SLURM_STEP_NUM_NODES",
    "SLURM_STEP_TASKS_PER_NODE",
    "SLURM_TASKS_PER_NODE",
    "SLURM_JOB_ID",
    "SLURM_STEP_ID",
    "FERROCOLL_JOB_TOKEN",
    "UCC_OOB_TIMEOUT",
];

/// Where the job token came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TokenSource {
    /// `FERROCOLL_JOB_TOKEN`.
    Explicit,
    /// Derived from these job identifiers (e.g. `SLURM_JOB_ID=12.0`).
    Derived(String),
    /// None found: any process that reaches the store can join.
    Missing,
}

/// What the environment says about this process's place in the job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Launch {
    pub(crate) params: TcpOobParams,
    pub(crate) local_rank: Option<usize>,
    pub(crate) local_size: Option<usize>,
    /// The launcher whose variables gave the rank.
    pub(crate) launcher: &'static str,
    pub(crate) token: TokenSource,
    /// Things worth a debug line (an outer launcher's variables that were ignored).
    pub(crate) notes: Vec<String>,
}

/// A number read from a variable, with its origin for messages (`RANK=3`).
#[derive(Clone, Debug)]
struct Val {
    what: String,
    n: usize,
}

/// One launcher's view of the job.
struct World {
    family: usize,
    rank: Val,
    size: Val,
    local_rank: Option<Val>,
    local_size: Option<Val>,
    /// `(description, identifier)` of the job, e.g. `("SLURM_JOB_ID=12, SLURM_STEP_ID=0", "12.0")`.
    job: Option<(String, String)>,
}

struct Vars<'a>(&'a HashMap<String, String>);

impl Vars<'_> {
    /// A variable's value; empty counts as unset.
    fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(|v| v.trim()).filter(|v| !v.is_empty())
    }

    fn number(&self, name: &str) -> Result<Option<Val>> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => v
                .parse::<usize>()
                .map(|n| Some(Val { what: format!("{name}={v}"), n }))
                .map_err(|_| Error::invalid_param(format!("{name}={v:?} is not a non-negative integer"))),
        }
    }
}

/// Read the launchers' variables (see the module table of the parent).
pub(crate) fn parse(vars: &HashMap<String, String>) -> Result<Launch> {
    let vars = Vars(vars);
    let mut worlds = Vec::new();
    for (i, _) in FAMILIES.iter().enumerate() {
        match world(&vars, i) {
            Ok(Some(w)) => worlds.push(w),
            Ok(None) => {}
            // An outer Slurm launch may leave half its variables behind; only
            // an error when Slurm is the launcher that counts.
            Err(_) if i == SLURM && !worlds.is_empty() => {}
            Err(e) => return Err(e),
        }
    }
    let mut notes = Vec::new();
    let (first, rest) = worlds.split_first().ok_or_else(nothing_found)?;
    let launcher = FAMILIES[first.family].launcher;
    let mut local_rank = first.local_rank.clone();
    let mut local_size = first.local_size.clone();
    let mut job = first.job.clone();
    for w in rest {
        let other = FAMILIES[w.family].launcher;
        if w.family == SLURM && (w.rank.n != first.rank.n || w.size.n != first.size.n) {
            notes.push(format!(
                "ignoring {} and {}: {launcher} runs inside an outer {other} launch",
                w.rank.what, w.size.what
            ));
            continue;
        }
        agree(&first.rank, &w.rank, launcher, other, "rank")?;
        agree(&first.size, &w.size, launcher, other, "size")?;
        merge(&mut local_rank, &w.local_rank, launcher, other, "local rank")?;
        merge(&mut local_size, &w.local_size, launcher, other, "local size")?;
        job = job.or_else(|| w.job.clone());
    }
    check_locals(&first.size, &local_rank, &local_size)?;
    let (master_addr, master_port) = master(&vars, first, &local_size, &job)?;
    let (token, source) = match (vars.get("FERROCOLL_JOB_TOKEN"), &job) {
        (Some(t), _) => (t.to_string(), TokenSource::Explicit),
        (None, Some((what, id))) => {
            (format!("job-{:016x}", fnv1a(&[id.as_bytes()])), TokenSource::Derived(what.clone()))
        }
        (None, None) => (String::new(), TokenSource::Missing),
    };
    let connect_timeout = match vars.get("UCC_OOB_TIMEOUT") {
        None => DEFAULT_TIMEOUT,
        Some(v) => match parse_duration(v).map_err(|e| e.prefixed("UCC_OOB_TIMEOUT"))? {
            // Zero would fail every connection at once, later, as a connect timeout.
            Some(d) if d.is_zero() => {
                return Err(Error::invalid_param(format!(
                    "UCC_OOB_TIMEOUT={v:?} is not a positive duration (inf switches it off)"
                )));
            }
            d => d.unwrap_or(Duration::MAX),
        },
    };
    Ok(Launch {
        params: TcpOobParams {
            rank: first.rank.n,
            size: first.size.n,
            master_addr,
            master_port,
            token,
            connect_timeout,
        },
        local_rank: local_rank.map(|v| v.n),
        local_size: local_size.map(|v| v.n),
        launcher,
        token: source,
        notes,
    })
}

/// One family's values, `None` when neither its rank nor its size is set.
fn world(vars: &Vars<'_>, family: usize) -> Result<Option<World>> {
    let f = &FAMILIES[family];
    let (rank, size) = match (vars.number(f.rank)?, vars.number(f.size)?) {
        (None, None) => return Ok(None),
        (Some(r), Some(s)) => (r, s),
        (Some(v), None) | (None, Some(v)) => {
            let absent = if vars.get(f.rank).is_some() { f.size } else { f.rank };
            return Err(Error::invalid_param(format!(
                "{} is set but {absent} is not ({} sets both)",
                v.what, f.launcher
            )));
        }
    };
    if size.n == 0 {
        return Err(Error::invalid_param(format!("{}: a job has at least one rank", size.what)));
    }
    if rank.n >= size.n {
        return Err(Error::invalid_param(format!("{} is not below {}", rank.what, size.what)));
    }
    let local_size = match f.local_size {
        Some(name) => vars.number(name)?,
        None => slurm_local_size(vars, size.n),
    };
    let job = f.job.iter().find_map(|names| {
        let values: Option<Vec<&str>> = names.iter().map(|n| vars.get(n)).collect();
        let values = values?;
        let what = names.iter().zip(&values).map(|(n, v)| format!("{n}={v}")).collect::<Vec<_>>().join(", ");
        let id = values.join(".");
        // torchrun's default rendezvous id is the same for every job.
        (id != "none").then_some((what, id))
    });
    Ok(Some(World { family, rank, size, local_rank: vars.number(f.local_rank)?, local_size, job }))
}

/// Slurm gives no local size directly: one node means every task; otherwise
/// the step's tasks-per-node list at this node's index.
fn slurm_local_size(vars: &Vars<'_>, size: usize) -> Option<Val> {
    for nodes in ["SLURM_STEP_NUM_NODES", "SLURM_NNODES"] {
        if vars.get(nodes) == Some("1") {
            return Some(Val { what: format!("{nodes}=1 (all {size} tasks on one node)"), n: size });
        }
    }
    let node = vars.get("SLURM_NODEID")?;
    let index = node.parse::<usize>().ok()?;
    ["SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"].iter().find_map(|name| {
        let spec = vars.get(name)?;
        let n = tasks_on_node(spec, index)?;
        Some(Val { what: format!("{name}={spec} at SLURM_NODEID={node}"), n })
    })
}

/// Slurm's compressed per-node task counts (`2(x3),1` = 2, 2, 2, 1) at `node`.
pub(super) fn tasks_on_node(spec: &str, node: usize) -> Option<usize> {
    let mut seen = 0usize;
    for part in spec.split(',') {
        let part = part.trim();
        let (count, repeat) = match part.split_once("(x") {
            Some((c, r)) => (c, r.strip_suffix(')')?.parse::<usize>().ok()?),
            None => (part, 1),
        };
        let count = count.parse::<usize>().ok()?;
        seen = seen.checked_add(repeat)?;
        if node < seen {
            return Some(count);
        }
    }
    None
}

fn agree(a: &Val, b: &Val, la: &str, lb: &str, what: &str) -> Result<()> {
    if a.n == b.n {
        return Ok(());
    }
    Err(Error::invalid_param(format!(
        "{} contradicts {} ({la} and {lb} disagree about this process's {what}; \
         unset the variables of the launcher that does not apply)",
        a.what, b.what
    )))
}

fn merge(into: &mut Option<Val>, from: &Option<Val>, la: &str, lb: &str, what: &str) -> Result<()> {
    match (into.as_ref(), from) {
        (Some(a), Some(b)) => agree(a, b, la, lb, what),
        (None, Some(b)) => {
            *into = Some(b.clone());
            Ok(())
        }
        _ => Ok(()),
    }
}

fn check_locals(size: &Val, local_rank: &Option<Val>, local_size: &Option<Val>) -> Result<()> {
    if let Some(ls) = local_size {
        if ls.n == 0 || ls.n > size.n {
            return Err(Error::invalid_param(format!("{} is not between 1 and {}", ls.what, size.what)));
        }
        if let Some(lr) = local_rank {
            if lr.n >= ls.n {
                return Err(Error::invalid_param(format!("{} is not below {}", lr.what, ls.what)));
            }
        }
    }
    Ok(())
}

/// `MASTER_ADDR`/`MASTER_PORT`, or the defaults for a one-host job with a job identifier.
fn master(
    vars: &Vars<'_>,
    world: &World,
    local_size: &Option<Val>,
    job: &Option<(String, String)>,
) -> Result<(String, u16)> {
    let addr = match vars.get("MASTER_ADDR") {
        Some(a) => a.to_string(),
        None => match local_size {
            Some(ls) if ls.n == world.size.n => "127.0.0.1".to_string(),
            _ if world.size.n == 1 => "127.0.0.1".to_string(),
            _ => {
                let why = match local_size {
                    Some(ls) => format!("{} of {}", ls.what, world.size.what),
                    None => format!("{} and no local size", world.size.what),
                };
                return Err(Error::invalid_param(format!(
                    "MASTER_ADDR is not set and the ranks are not known to share one host ({why}): \
                     set MASTER_ADDR to rank 0's host and MASTER_PORT to a free port there"
                )));
            }
        },
    };
    let port = match vars.get("MASTER_PORT") {
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 => n,
            _ => return Err(Error::invalid_param(format!("MASTER_PORT={p:?} is not a port (1-65535)"))),
        },
        None => match job {
            Some((_, id)) => PORT_BASE + (fnv1a(&[b"port:", id.as_bytes()]) % u64::from(PORT_SPAN)) as u16,
            None => {
                return Err(Error::invalid_param(format!(
                    "MASTER_PORT is not set and no job identifier was found to derive one from \
                     (looked for {}): set MASTER_PORT (and MASTER_ADDR) to rank 0's host and a free port",
                    job_variables()
                )));
            }
        },
    };
    Ok((addr, port))
}

fn job_variables() -> String {
    let mut names: Vec<String> = Vec::new();
    for f in &FAMILIES {
        for set in f.job {
            let n = set.join("+");
            if !names.iter().any(|m| *m == n || m.starts_with(&format!("{n}+"))) {
                names.push(n);
            }
        }
    }
    names.join(", ")
}

fn nothing_found() -> Error {
    let looked: Vec<String> = FAMILIES.iter().map(|f| format!("{}/{} ({})", f.rank, f.size, f.launcher)).collect();
    Error::not_found(format!(
        "no launcher variables found: looked for {}; start the program with a launcher \
         (ferrocoll-run, torchrun, mpirun, srun) or build TcpOobParams yourself",
        looked.join(", ")
    ))
}

#[cfg(test)]
#[path = "env_tests.rs"]
mod tests;
