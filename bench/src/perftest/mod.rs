//! `ferrocoll-perftest`: ucc_perftest's options and table for ferrocoll.
//!
//! ```text
//! ferrocoll-perftest --np 4 -c allreduce -b 1 -e 16M        # 4 processes on this host
//! ferrocoll-perftest --threads 3 -c alltoall -d int32 --check --csv out.csv
//! torchrun --nproc-per-node 8 ferrocoll-perftest -c bcast    # under any launcher
//! ```
//!
//! For each count of the sweep (`-b` to `-e`, times `-f`) every rank runs
//! `-w` warm-ups and `-n` timed iterations (ucc_perftest's defaults: 100 and
//! 1000, 20 and 200 from 64 KiB per buffer up), each timed on its own from
//! `init` to completion with an untimed barrier after it (`-p`: one
//! persistent request posted every iteration). Each rank's mean time is
//! gathered over ferrocoll itself; rank 0 prints their average, minimum and
//! maximum, the bus bandwidth (nccl-tests / ucc_perftest formulas, see
//! [`layout::busbw_bytes`]) and the TL/algorithm its requests used;
//! `--per-rank` adds each rank's mean and percentiles ([`spread`]).
//!
//! Counts are ucc_perftest's (see [`layout`]): `-b`/`-e` give the elements
//! each rank contributes per block; the `Count` column is each rank's
//! source count (P times the block for alltoall(v), reduce_scatter(v) and
//! scatter(v)), and `Size` is that in bytes.
//!
//! `--check` fills the inputs with deterministic values before every
//! iteration, poisons the outputs, and compares every output element with
//! what it must be (exactly for integers and moved bytes, with a tolerance
//! for floats, see [`mod@reference`]); the first wrong element is reported with
//! its rank, iteration and index, and the exit code is 1.
//!
//! Differences from ucc_perftest: every ferrocoll datatype and operation is
//! accepted; the v-variants get their plain forms' bandwidth formula; `-T`
//! (triggered post) and `-m cuda` are refused (not supported yet); `-S`
//! (root shift), `-N`, `-M` and `--gen` are not offered. The transport per
//! peer is not shown: ferrocoll has no public way to ask for it yet.

pub mod bench;
pub mod binding;
pub mod bootstrap;
pub mod buffers;
pub mod check;
pub mod codec;
pub mod device;
pub mod layout;
pub mod options;
pub mod pattern;
pub mod reference;
pub mod report;
pub mod spread;
pub mod units;

use std::io::Write as _;

use ferrocoll::{Context, Result, Team};

use options::{OptError, Options, Parsed, USAGE, parse};
use report::{Progress, TeamInfo, header, table_row};

/// Run the perftest with `args` (without the program name); returns the exit code.
pub fn main(args: &[String]) -> i32 {
    let o = match parse(args) {
        Ok(Parsed::Run(o)) => o,
        Ok(Parsed::Help) => {
            crate::outln!("{USAGE}");
            return 0;
        }
        Err(OptError::Usage(m)) => {
            crate::errln!("ferrocoll-perftest: {m}\n{USAGE}");
            return 2;
        }
        Err(OptError::NotSupported(m)) => {
            crate::errln!("ferrocoll-perftest: {m}");
            return 1;
        }
    };
    // The files are written after the whole sweep: one that cannot be
    // written was found out only then. This process checks them when it is
    // the one that writes them or starts the one that does (under another
    // launcher, which rank prints is known only after the bootstrap).
    if o.np.is_some() || o.threads.is_some() || !bootstrap::under_launcher() {
        for (opt, path) in [("--csv", &o.csv), ("--json", &o.json)] {
            if let Some(Err(e)) = path.as_deref().map(report::check_writable) {
                crate::errln!("ferrocoll-perftest: {opt} {e}");
                return 2;
            }
        }
    }
    if let Some(np) = o.np {
        return bootstrap::launch_np(np, &o, args);
    }
    if let Some(n) = o.threads {
        return bootstrap::threads(n, &o, &rank_main);
    }
    if bootstrap::under_launcher() {
        return bootstrap::process(&o, &rank_main);
    }
    bootstrap::threads(1, &o, &rank_main)
}

/// Rank 0's table: rows on stdout as they come, progress on stderr.
struct Table {
    progress: Progress,
    full: bool,
    per_rank: bool,
}

impl bench::Observer for Table {
    fn start(&mut self, index: usize, bytes: u64) {
        self.progress.start(index, bytes);
    }

    fn row(&mut self, _index: usize, row: &report::Row) {
        crate::outln!("{}", table_row(row, self.full));
        if self.per_rank {
            for (rank, s) in row.per_rank.iter().enumerate() {
                crate::outln!("{}", s.table_line(rank));
            }
        }
        // A closed stdout must not stop the benchmark.
        let _ = std::io::stdout().flush();
    }
}

/// What the team looks like, for the header.
fn team_info(team: &Team, ctx: &Context) -> Result<TeamInfo> {
    let procs = ctx.procs();
    let hosts: Vec<String> = procs.iter().map(|p| p.host.clone()).collect();
    let pids: Vec<u32> = procs.iter().map(|p| p.pid).collect();
    Ok(TeamInfo {
        binding: binding::describe(team).map_err(|e| e.prefixed("gathering the ranks' CPU bindings"))?,
        size: team.size(),
        layout: report::hosts_summary(&hosts, &pids),
        tls: team.tl_names().map(|v| v.into_iter().map(String::from).collect()).unwrap_or_default(),
    })
}

/// One rank's whole run: the sweep, and on rank 0 the header, the table and
/// the files. `Ok(false)`: some result was wrong.
fn rank_main(team: &Team, ctx: &Context, o: &Options) -> Result<bool> {
    let printer = team.rank() == 0;
    let info = team_info(team, ctx)?;
    let sizes = bench::counts(o).len();
    if printer {
        crate::outln!("{}", header(o, &info));
    }
    let mut table = Table { progress: Progress::new(o.coll.name(), sizes), full: o.full, per_rank: o.per_rank };
    let end = bench::run_sweep(team, o, &mut table)?;
    if !printer {
        return Ok(!end.check_failed);
    }
    type Render = fn(&Options, &TeamInfo, &[report::Row]) -> String;
    let files: [(Option<&std::path::PathBuf>, Render); 2] =
        [(o.csv.as_ref(), report::csv), (o.json.as_ref(), report::json)];
    let mut files_ok = true;
    for (path, render) in files {
        if let Some(path) = path {
            if let Err(e) = report::write_file(path, &render(o, &info, &end.rows)) {
                crate::errln!("ferrocoll-perftest: {e}");
                files_ok = false;
            }
        }
    }
    if end.check_failed {
        crate::errln!(
            "ferrocoll-perftest: --check found wrong results (see the messages above); stopped the sweep there"
        );
    } else if o.check && !bench::nothing_to_check(o.coll) {
        crate::errln!("ferrocoll-perftest: --check: every result of every iteration was correct");
    }
    if !files_ok {
        return Err(ferrocoll::Error::io("could not write the result files"));
    }
    Ok(!end.check_failed)
}
