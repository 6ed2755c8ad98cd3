//! `ferrocoll-run -n N [--emulate-hosts K] [--timeout SECS] [--grace SECS] -- program args…`:
//! start N ranks of a program on this host (see `ferrocoll_bench::run`).

use ferrocoll_bench::run::cli::{Cli, USAGE, parse};
use ferrocoll_bench::run::launch;

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let cfg = match parse(&args) {
        Ok(Cli::Run(cfg)) => cfg,
        Ok(Cli::Help) => {
            ferrocoll_bench::outln!("{USAGE}");
            return;
        }
        Err(e) => {
            ferrocoll_bench::errln!("ferrocoll-run: {e}\n{USAGE}");
            std::process::exit(2);
        }
    };
    match launch(&cfg) {
        Ok(out) => {
            if out.code != 0 {
                ferrocoll_bench::errln!("ferrocoll-run: job failed: {}", out.summary());
            }
            std::process::exit(out.code);
        }
        Err(e) => {
            ferrocoll_bench::errln!("ferrocoll-run: {e}");
            std::process::exit(e.code());
        }
    }
}
