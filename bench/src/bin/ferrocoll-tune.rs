//! ferrocoll-tune: measure this machine's crossovers between algorithms and
//! write a configuration file that pins the faster ones (see `--help`).

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(ferrocoll_bench::tune::main(&args));
}
