//! How the perftest finds its ranks: threads of this process
//! (`--threads N`, or one rank when nothing else applies), processes it
//! starts through the launcher (`--np N`), or the process's place in a job
//! started by a launcher (TCP bootstrap from `RANK`/`WORLD_SIZE`,
//! `OMPI_COMM_WORLD_*`, `SLURM_*`, `PMI_*`).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc;

use ferrocoll::{Context, ContextParams, Error, Lib, Oob, Result, TcpOob, Team, TeamParams, ThreadOob};

use super::options::{Options, child_args};
use crate::run::{LaunchConfig, launch};

/// Whether this process was started by a launcher that names its rank.
pub fn under_launcher() -> bool {
    let has = |v: &str| std::env::var_os(v).is_some();
    (has("RANK") && has("WORLD_SIZE"))
        || has("OMPI_COMM_WORLD_SIZE")
        || (has("SLURM_PROCID") && has("SLURM_NTASKS"))
        || (has("PMI_RANK") && has("PMI_SIZE"))
}

/// What one rank does once it has a team: `Ok(true)` if every result checked out.
pub type RankMain = dyn Fn(&Team, &Context, &Options) -> Result<bool> + Send + Sync;

/// Run `body` on `n` thread ranks. Returns the exit code.
pub fn threads(n: usize, o: &Options, body: &'static RankMain) -> i32 {
    let lib = match Lib::new() {
        Ok(l) => l,
        Err(e) => {
            crate::errln!("ferrocoll-perftest: {e}");
            return 1;
        }
    };
    let (tx, rx) = mpsc::channel::<(usize, Result<bool>)>();
    for oob in ThreadOob::group(n) {
        let (lib, o, tx) = (lib.clone(), o.clone(), tx.clone());
        let rank = oob.rank();
        let spawned = std::thread::Builder::new().name(format!("rank {rank}")).spawn(move || {
            let r = catch_unwind(AssertUnwindSafe(|| {
                let ctx = Context::new(&lib, ContextParams::with_oob(oob))?;
                let team = Team::create(&ctx, TeamParams::default())?;
                body(&team, &ctx, &o)
            }))
            .unwrap_or_else(|_| Err(Error::internal(format!("rank {rank} panicked"))));
            // The receiver outlives every sender unless main already exited.
            let _ = tx.send((rank, r));
        });
        if let Err(e) = spawned {
            crate::errln!("ferrocoll-perftest: cannot start the thread of rank {rank}: {e}");
            return 1;
        }
    }
    drop(tx);
    let mut all_correct = true;
    for _ in 0..n {
        match rx.recv() {
            Ok((_, Ok(correct))) => all_correct &= correct,
            Ok((rank, Err(e))) => {
                // The other ranks may be waiting for this one: leave them.
                crate::errln!("ferrocoll-perftest: rank {rank}: {e}");
                return 1;
            }
            Err(_) => return 1,
        }
    }
    if all_correct { 0 } else { 1 }
}

/// Run `body` as this process's rank of a launched job. Returns the exit code.
pub fn process(o: &Options, body: &RankMain) -> i32 {
    let run = || -> Result<bool> {
        let lib = Lib::new()?;
        let oob = TcpOob::from_env().map_err(|e| e.prefixed("bootstrap over TCP (TcpOob::from_env)"))?;
        let ctx = Context::new(&lib, ContextParams::with_oob(oob))?;
        let team = Team::create(&ctx, TeamParams::default())?;
        body(&team, &ctx, o)
    };
    match run() {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(e) => {
            crate::errln!("ferrocoll-perftest: {e}");
            1
        }
    }
}

/// Start `np` processes of this program through the launcher, with `args`
/// less the launch options. Returns the exit code.
pub fn launch_np(np: usize, o: &Options, args: &[String]) -> i32 {
    let exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            crate::errln!("ferrocoll-perftest: cannot find this program to start it: {e}");
            return 1;
        }
    };
    let mut cfg = LaunchConfig::new(np, exe, child_args(args).into_iter().map(Into::into).collect());
    cfg.emulate_hosts = o.emulate_hosts;
    cfg.emulate_switches = o.emulate_switches;
    cfg.bind_to = o.bind_to;
    cfg.unprefixed_stdout = Some(0);
    cfg.label = "ferrocoll-perftest".into();
    match launch(&cfg) {
        Ok(out) => {
            if out.code != 0 {
                crate::errln!("ferrocoll-perftest: job failed: {}", out.summary());
            }
            out.code
        }
        Err(e) => {
            crate::errln!("ferrocoll-perftest: {e}");
            e.code()
        }
    }
}
