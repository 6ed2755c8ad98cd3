//! `ferrocoll-info`: what this build of ferrocoll has, like `ucc_info`.
//!
//! ```text
//! ferrocoll-info -v          version
//! ferrocoll-info -c          configuration variables, their values and defaults
//! ferrocoll-info -A          components and their algorithms
//! ferrocoll-info -s [N]      default scores, and the score map of a team of N thread ranks (default 4)
//! ferrocoll-info -T          topology: hosts, switch groups and ranks per host of the job this
//!                            process is a rank of (under ferrocoll-run or another launcher: rank 0
//!                            prints), or of this process alone
//! ```

use ferrocoll::core::config::CORE_FIELDS;
use ferrocoll::{Config, Context, ContextParams, Lib, Result, TcpOob, Team, TeamParams};

const HELP: &str = "usage: ferrocoll-info [-v] [-c] [-A] [-s [N]] [-T]
  -v      version
  -c      configuration variables, their values and defaults
  -A      components and their algorithms
  -s [N]  default scores, and the score map of a team of N thread ranks (default 4)
  -T      topology of the job this process is a rank of (rank 0 prints), or of this process alone";

/// A mistake in the options: the usage on stderr, exit status 2.
fn usage() -> ! {
    eprintln!("{HELP}");
    std::process::exit(2);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() {
        usage();
    }
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{HELP}");
        return;
    }
    let lib = match Lib::new() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("ferrocoll-info: {e}");
            std::process::exit(1);
        }
    };
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "-v" => println!("ferrocoll {}", env!("CARGO_PKG_VERSION")),
            "-c" => print_config(&lib),
            "-A" => print_algorithms(&lib),
            "-s" => {
                let n = args.get(i + 1).and_then(|a| a.parse::<usize>().ok());
                if n.is_some() {
                    i += 1;
                }
                // The team is N threads of this process: 0 printed the map of a
                // team of 1 as "0 ranks", a huge N panicked allocating them.
                let max = ferrocoll_bench::run::MAX_RANKS;
                if let Some(n) = n.filter(|n| !(1..=max).contains(n)) {
                    eprintln!("ferrocoll-info: -s {n}: the team size must be between 1 and {max}");
                    usage();
                }
                print_scores(&lib, n.unwrap_or(4));
            }
            "-T" => {
                if let Err(e) = print_topology(&lib) {
                    eprintln!("ferrocoll-info: {e}");
                    std::process::exit(1);
                }
            }
            other => {
                eprintln!("ferrocoll-info: unknown option {other:?}");
                usage();
            }
        }
        i += 1;
    }
}

fn print_config(lib: &Lib) {
    let cfg: &Config = lib.config();
    let mut fields: Vec<_> = CORE_FIELDS.to_vec();
    fields.extend_from_slice(ferrocoll::ee::cuda::CONFIG_FIELDS);
    fields.extend_from_slice(ferrocoll_mc::CONFIG_FIELDS);
    for tl in lib.tls() {
        fields.extend(tl.config_fields());
    }
    for f in fields {
        let value = cfg.get(f.name).unwrap_or(f.default);
        println!("# {}", f.doc);
        println!("{}={value}{}", f.name, if cfg.get(f.name).is_some() { "" } else { "  (default)" });
        println!();
    }
}

fn print_algorithms(lib: &Lib) {
    println!("memory components: {}", lib.mcs().names().join(", "));
    for tl in lib.tls() {
        println!("tl/{} algorithms ({}; default score {}):", tl.name(), tl.description(), tl.default_score());
        let mut last = None;
        for a in tl.algorithms() {
            if last != Some(a.coll) {
                println!("  {}", a.coll);
                last = Some(a.coll);
            }
            println!("    {} : {:<16} : {}", a.id, a.name, a.description);
        }
    }
}

fn print_scores(lib: &Lib, ranks: usize) {
    let scores: Vec<String> = lib.tls().iter().map(|t| format!("{}={}", t.name(), t.default_score())).collect();
    println!("Default TLs scores: {}", scores.join(" "));
    let maps = ferrocoll_bench::threads::on_thread_team(lib, ranks, |team: &Team| team.score_map());
    match maps {
        Ok(mut maps) if !maps.is_empty() => {
            println!("Score map of a team of {ranks} thread ranks (range: tl/algorithm:score, best first):");
            print!("{}", maps.swap_remove(0));
        }
        Ok(_) => {}
        Err(e) => eprintln!("ferrocoll-info: {e}"),
    }
    let _ = TeamParams::default();
}

/// The topology of the launched job (a context and a team over every rank;
/// rank 0 prints), or of this process alone when no launcher set `RANK`.
fn print_topology(lib: &Lib) -> Result<()> {
    let params = match std::env::var_os("RANK") {
        Some(_) => ContextParams::with_oob(TcpOob::from_env()?),
        None => ContextParams::default(),
    };
    let ctx = Context::new(lib, params)?;
    let team = Team::create(&ctx, TeamParams::default())?;
    if team.rank() == 0 {
        print!("{}", ferrocoll_bench::topology::describe(ctx.procs(), team.layout()));
    }
    Ok(())
}
