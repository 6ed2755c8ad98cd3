//! `ferrocoll-perftest`: ucc_perftest's options and table for ferrocoll
//! (see `ferrocoll_bench::perftest`).

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(ferrocoll_bench::perftest::main(&args));
}
