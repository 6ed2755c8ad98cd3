//! `ferrocoll-reduce-bench`: reduction kernels against a copy in the same memory
//! (see `ferrocoll_bench::reduce_bench`).

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(ferrocoll_bench::reduce_bench::main(&args));
}
