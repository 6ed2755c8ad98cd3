//! The TCP bootstrap: an [`Oob`] whose store runs at rank 0 and that every
//! other rank connects to once.
//!
//! Rank 0 listens on `MASTER_ADDR:MASTER_PORT`; each other rank opens one
//! connection and the two sides prove to each other that they know the job
//! token, without sending it:
//!
//! 1. rank → store: hello (magic, protocol version, rank, size, a fresh
//!    random nonce from the rank);
//! 2. store → rank: challenge (a fresh nonce from the store, and the store's
//!    proof: HMAC-SHA256 keyed with the token over "store", rank, size, both
//!    nonces);
//! 3. the rank checks that proof (in constant time). A wrong one fails the
//!    rank at once, naming the address ("the process at 10.0.0.1:29500 does
//!    not know the job token: …"), and nothing more is sent to it. Otherwise
//!    rank → store: its proof (HMAC over "rank", rank, size, both nonces);
//! 4. the store checks it, then the rank's claims; it refuses — with an
//!    error frame the client reports, then closes — a wrong proof (a wrong
//!    token), a rank out of range or already connected, and a size that
//!    disagrees; it logs the refusal and keeps waiting for the right process.
//!    Else it welcomes the rank.
//!
//! So a process that listens on the port instead of rank 0 learns a rank, a
//! size and a nonce, never the token (nor a proof it can reuse: nonces are
//! fresh per connection); see `auth.rs` for the proofs and `SECURITY.md` for
//! what this does not protect.
//!
//! An allgather round: every rank sends `(round, bytes)` to rank 0; once
//! rank 0 holds every rank's bytes of a round it sends the whole vector to
//! everyone. Rounds are numbered, so a fast rank may post round 2 while a
//! slow one still reads round 1. The wire format is in `frame.rs`.
//!
//! Design decisions:
//! - **No threads.** All I/O is non-blocking and driven by
//!   [`OobRequest::test`]: rank 0 accepts, reads and writes; the others
//!   connect, greet, write and read as far as they can. The one exception is
//!   a connect attempt, which std can bound but not split (at most 1 s, only
//!   while the store's host does not answer).
//! - **Failures name the peer.** A store that stays unreachable past the
//!   deadline ("rank 2 could not reach rank 0 (the bootstrap store at
//!   10.0.0.1:29500) for 30.0 s: Connection refused"), a rank that left ("rank 3 (from …)
//!   closed its bootstrap connection during round 1"), ranks that never came
//!   (rank 0, after `connect_timeout`). When rank 0 fails it tells every
//!   connected rank why before they would otherwise wait for their timeout.
//! - **Length-checked frames**, capped at 1 GiB (16 KiB before a peer has
//!   proved it knows the token, on both sides); a corrupt frame is an error,
//!   never a panic.
//! - **The store proves first**, so a rank tells nothing derived from the
//!   token to a process that does not know it (a rank's proof would let such
//!   a process test guesses of a weak token offline). The store's proof
//!   offers that to anyone who connects, which is why the token must be a
//!   real secret (`ferrocoll-run`'s is 128 random bits).
//!
//! Limits: one store connection per rank, so rank 0 handles `size - 1`
//! sockets and every byte of every round (fine for a bootstrap of small
//! address blobs, not a data path). A rank that lost its connection cannot
//! rejoin. The job token guards against accidents (another job's ranks on the
//! same port) and against processes that do not know it, not against an
//! attacker who can read the job's environment; nothing is encrypted, and
//! the connection is not protected after the handshake (a relay between a
//! rank and the real store gets through it, then sees and can alter
//! everything).
//!
//! # Environment
//!
//! [`TcpOob::from_env`] reads the launchers' conventions; its documentation
//! holds the table of variables, precedence and defaults (here it would not
//! be rendered: this module is private, its types re-exported at the crate
//! root).

#![forbid(unsafe_code)]

mod auth;
mod client;
mod env;
mod frame;
mod port;
mod store;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Poll;
use std::time::{Duration, Instant};

use client::Client;
use ferrocoll_core::oob::{Oob, OobRequest};
use ferrocoll_core::{Error, Result};
use store::Store;

/// Where a rank finds the store and who it is.
#[derive(Clone, PartialEq, Eq)]
pub struct TcpOobParams {
    /// This rank.
    pub rank: usize,
    /// Number of ranks.
    pub size: usize,
    /// Rank 0's address (host name or IP).
    pub master_addr: String,
    /// Rank 0's port. At rank 0, 0 lets the system choose one (read it with
    /// [`TcpOob::listen_port`] and tell the other ranks).
    pub master_port: u16,
    /// The job's secret, never sent: the store and each rank prove to each
    /// other that they know it, and a process that does not is refused (or,
    /// in the store's place, not trusted). Empty: anyone can make the proofs.
    pub token: String,
    /// How long to keep trying to reach the store (or to wait for every rank, at rank 0).
    /// `Duration::MAX`: forever.
    pub connect_timeout: Duration,
}

impl fmt::Debug for TcpOobParams {
    /// Like a derived `Debug`, but without the token's value (it ends up in logs).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpOobParams")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("master_addr", &self.master_addr)
            .field("master_port", &self.master_port)
            .field("token", &format_args!("<{} bytes>", self.token.len()))
            .field("connect_timeout", &self.connect_timeout)
            .finish()
    }
}

/// The TCP-store OOB: rank 0 runs a store that every other rank connects to
/// once; each allgather round goes through it. [`TcpOob::from_env`] reads the
/// launchers' variables (ferrocoll-run, torchrun, mpirun, srun).
///
/// ```no_run
/// use ferrocoll_core::{Context, ContextParams, Lib};
/// use ferrocoll_transport::TcpOob;
///
/// // In a process started by ferrocoll-run, torchrun, mpirun or srun:
/// fn join_the_job(lib: &Lib) -> ferrocoll_core::Result<Context> {
///     let oob = TcpOob::from_env()?;
///     eprintln!("local rank {:?} of {:?} on this host", oob.local_rank(), oob.local_size());
///     Context::new(lib, ContextParams::with_oob(oob))
/// }
/// ```
pub struct TcpOob {
    params: TcpOobParams,
    local_rank: Option<usize>,
    local_size: Option<usize>,
    listen_port: Option<u16>,
    job_id: String,
    side: Arc<Mutex<Side>>,
}

enum Side {
    /// A job of one rank: nothing to connect.
    Alone,
    Store(Store),
    Client(Client),
}

impl TcpOob {
    /// A TCP port for rank 0's store (`master_port`) that was free on
    /// 127.0.0.1 a moment ago: below the kernel's ephemeral range where
    /// there is room, so that no connection takes it before rank 0 binds
    /// it (only a process binding it by number can).
    pub fn free_port() -> std::io::Result<u16> {
        port::free_port()
    }

    /// The job id every rank of a job computes (16 hex digits): a hash of
    /// the token and the store's address and port. Shared-memory segments are
    /// named with it, so a launcher can remove what a crashed job left.
    pub fn job_id_for(token: &str, master_addr: &str, master_port: u16) -> String {
        let id = ferrocoll_core::hash::fnv1a(&[
            token.as_bytes(),
            &[0],
            master_addr.as_bytes(),
            &[0],
            &master_port.to_le_bytes(),
        ]);
        format!("{id:016x}")
    }

    /// From the launchers' environment variables.
    ///
    /// Rank 0 starts listening at once; the other ranks connect at their
    /// first allgather.
    ///
    /// # Variables
    ///
    /// Each launcher's variables, highest precedence first. When several
    /// launchers' variables are present they must agree (rank, size, local rank,
    /// local size), or `from_env` fails with `InvalidParam` naming both
    /// variables and values. Exception: Slurm's variables are inherited by
    /// everything started inside an allocation (the batch script, mpirun's
    /// daemons, one torchrun per node), so when another launcher is present and
    /// Slurm's rank or size differs, Slurm's are taken for an outer launch and
    /// ignored.
    ///
    /// | launcher | rank | size | local rank | local size | job identifier |
    /// |---|---|---|---|---|---|
    /// | torchrun, `ferrocoll-run` | `RANK` | `WORLD_SIZE` | `LOCAL_RANK` | `LOCAL_WORLD_SIZE` | `TORCHELASTIC_RUN_ID` (unless `none`) |
    /// | mpirun (Open MPI) | `OMPI_COMM_WORLD_RANK` | `OMPI_COMM_WORLD_SIZE` | `OMPI_COMM_WORLD_LOCAL_RANK` | `OMPI_COMM_WORLD_LOCAL_SIZE` | `OMPI_MCA_orte_hnp_uri`, else `PMIX_NAMESPACE` |
    /// | MPICH hydra | `PMI_RANK` | `PMI_SIZE` | `MPI_LOCALRANKID` | `MPI_LOCALNRANKS` | — |
    /// | srun (Slurm) | `SLURM_PROCID` | `SLURM_NTASKS` | `SLURM_LOCALID` | every task when `SLURM_STEP_NUM_NODES` or `SLURM_NNODES` is 1, else `SLURM_STEP_TASKS_PER_NODE` (or `SLURM_TASKS_PER_NODE`, e.g. `2(x3),1`) at `SLURM_NODEID` | `SLURM_JOB_ID`.`SLURM_STEP_ID` (or `SLURM_JOB_ID`) |
    ///
    /// Rank and size come from the first launcher present; local rank and size
    /// from the first agreeing launcher that has them (they may stay unknown);
    /// the job identifier likewise.
    ///
    /// | variable | meaning | when absent |
    /// |---|---|---|
    /// | `MASTER_ADDR` | rank 0's host (name or IP) | `127.0.0.1` when the job is on one host (local size = size), else an error asking for it |
    /// | `MASTER_PORT` | the store's port | derived from the job identifier (a port in 20000–32767), else an error asking for it |
    /// | `FERROCOLL_JOB_TOKEN` | the job's secret, set by `ferrocoll-run` | derived from the job identifier, with a warning at rank 0 (job ids are not secret), else empty with a warning: any process that reaches the port can join |
    /// | `UCC_OOB_TIMEOUT` | how long to reach the store (clients) or to wait for every rank to connect (rank 0): `30s`, `500ms`, `inf` | 120 s |
    ///
    /// Nothing found is a `NotFound` error listing the variables looked for; a
    /// rank's variable without its size (or the reverse), a value that is not a
    /// number, a rank not below its size, are `InvalidParam` errors naming them.
    ///
    /// `UCC_OOB_TIMEOUT` is read from the process environment here; a value
    /// set on a [`ferrocoll_core::Config`] only governs the context's own wait.
    pub fn from_env() -> Result<TcpOob> {
        let vars: HashMap<String, String> = env::VARIABLES
            .iter()
            .filter_map(|&name| std::env::var_os(name).map(|v| (name.to_string(), v.to_string_lossy().into_owned())))
            .collect();
        let launch = env::parse(&vars)?;
        for note in &launch.notes {
            ferrocoll_core::log_debug!("TCP bootstrap: {note}");
        }
        match &launch.token {
            env::TokenSource::Explicit => {}
            // Said once per job (at rank 0, which runs the store): a token
            // derived from a job id that other users can read keeps only
            // accidents out, not a local process that wants in.
            env::TokenSource::Derived(from) if launch.params.rank == 0 => ferrocoll_core::log_warn!(
                "TCP bootstrap: no FERROCOLL_JOB_TOKEN, so the job token is derived from {from}, which other \
                 processes on these hosts can read: one of them could join the bootstrap (or, listening on the \
                 port first, pass for the store); set FERROCOLL_JOB_TOKEN to the same secret on every rank \
                 (ferrocoll-run does)"
            ),
            env::TokenSource::Derived(from) => {
                ferrocoll_core::log_debug!("TCP bootstrap: job token derived from {from}")
            }
            env::TokenSource::Missing => ferrocoll_core::log_warn!(
                "TCP bootstrap: no FERROCOLL_JOB_TOKEN and no job identifier: any process that reaches \
                 {}:{} can join this job's bootstrap; set FERROCOLL_JOB_TOKEN to the same secret on every rank",
                launch.params.master_addr,
                launch.params.master_port
            ),
        }
        ferrocoll_core::log_debug!(
            "TCP bootstrap: rank {} of {} from {}, store at {}:{}",
            launch.params.rank,
            launch.params.size,
            launch.launcher,
            launch.params.master_addr,
            launch.params.master_port
        );
        let mut oob = TcpOob::new(launch.params)?;
        oob.local_rank = launch.local_rank;
        oob.local_size = launch.local_size;
        Ok(oob)
    }

    /// From explicit parameters. Rank 0 binds its port here (an error if it
    /// is taken); other ranks connect at their first allgather, and keep
    /// trying until `connect_timeout` has passed since this call.
    pub fn new(params: TcpOobParams) -> Result<TcpOob> {
        let TcpOobParams { rank, size, master_port, .. } = params;
        if size == 0 || rank >= size {
            return Err(Error::invalid_param(format!("TCP bootstrap: rank {rank} is not below size {size}")));
        }
        if u32::try_from(size).is_err() {
            return Err(Error::invalid_param(format!("TCP bootstrap: size {size} does not fit in 32 bits")));
        }
        if params.token.len() > auth::MAX_TOKEN {
            return Err(Error::invalid_param(format!(
                "TCP bootstrap: a job token of {} bytes is longer than {}",
                params.token.len(),
                auth::MAX_TOKEN
            )));
        }
        if params.master_addr.trim().is_empty() && size > 1 {
            return Err(Error::invalid_param("TCP bootstrap: master_addr (MASTER_ADDR) is empty"));
        }
        if master_port == 0 && rank != 0 {
            return Err(Error::invalid_param(format!(
                "TCP bootstrap: rank {rank} was given master_port 0; only rank 0 may let the system choose its port"
            )));
        }
        let (side, listen_port) = match (size, rank) {
            (1, _) => (Side::Alone, None),
            (_, 0) => {
                let s = Store::new(&params)?;
                let port = s.port();
                (Side::Store(s), Some(port))
            }
            _ => (Side::Client(Client::new(&params)?), None),
        };
        let port = listen_port.unwrap_or(master_port);
        let job_id = TcpOob::job_id_for(&params.token, &params.master_addr, port);
        Ok(TcpOob { params, local_rank: None, local_size: None, listen_port, job_id, side: Arc::new(Mutex::new(side)) })
    }

    /// This process's index among the job's processes on its host, when the
    /// launcher said (`LOCAL_RANK`, `OMPI_COMM_WORLD_LOCAL_RANK`, …); `None`
    /// for [`TcpOob::new`].
    pub fn local_rank(&self) -> Option<usize> {
        self.local_rank
    }

    /// How many of the job's processes run on this host, when known (see [`TcpOob::local_rank`]).
    pub fn local_size(&self) -> Option<usize> {
        self.local_size
    }

    /// The port rank 0's store listens on (the system's choice when
    /// `master_port` was 0); `None` on other ranks and in a job of one.
    pub fn listen_port(&self) -> Option<u16> {
        self.listen_port
    }

    /// The parameters in effect.
    pub fn params(&self) -> &TcpOobParams {
        &self.params
    }
}

impl Oob for TcpOob {
    fn rank(&self) -> usize {
        self.params.rank
    }

    fn size(&self) -> usize {
        self.params.size
    }

    fn allgather(&self, data: &[u8]) -> Result<Box<dyn OobRequest>> {
        let mut side = lock(&self.side);
        let round = match &mut *side {
            Side::Alone => {
                let all = Some(vec![data.to_vec()]);
                return Ok(Box::new(TcpOobRequest { side: self.side.clone(), round: 1, alone: all, done: false }));
            }
            Side::Store(s) => s.post(data),
            Side::Client(c) => c.post(data),
        }
        .map_err(|e| e.prefixed(format!("TCP bootstrap allgather at rank {}", self.params.rank)))?;
        Ok(Box::new(TcpOobRequest { side: self.side.clone(), round, alone: None, done: false }))
    }

    /// 16 hex digits: see [`TcpOob::job_id_for`].
    fn job_id(&self) -> Option<String> {
        Some(self.job_id.clone())
    }
}

struct TcpOobRequest {
    side: Arc<Mutex<Side>>,
    round: u64,
    /// A job of one: the result.
    alone: Option<Vec<Vec<u8>>>,
    done: bool,
}

impl OobRequest for TcpOobRequest {
    fn test(&mut self) -> Poll<Result<Vec<Vec<u8>>>> {
        if self.done {
            return Poll::Ready(Err(Error::invalid_param("TCP bootstrap request tested after it completed")));
        }
        let r = match self.alone.take() {
            Some(all) => Poll::Ready(Ok(all)),
            None => match &mut *lock(&self.side) {
                Side::Alone => Poll::Ready(Err(Error::internal("TCP bootstrap of one rank lost its result"))),
                Side::Store(s) => s.test(self.round),
                Side::Client(c) => c.test(self.round),
            },
        };
        self.done = r.is_ready();
        r
    }

    fn missing(&self) -> Vec<usize> {
        if self.done || self.alone.is_some() {
            return Vec::new();
        }
        match &*lock(&self.side) {
            Side::Alone => Vec::new(),
            Side::Store(s) => s.missing(self.round),
            Side::Client(c) => c.missing(self.round),
        }
    }
}

fn lock(m: &Mutex<Side>) -> MutexGuard<'_, Side> {
    // A poisoned lock means a thread panicked while holding it; the sockets
    // and buffers are still consistent enough to report errors from.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// `now + d`, or `None` (no deadline) when that does not fit (`Duration::MAX`).
fn deadline_after(d: Duration) -> Option<Instant> {
    Instant::now().checked_add(d)
}

/// A duration for messages: `30.0 s`.
fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}
