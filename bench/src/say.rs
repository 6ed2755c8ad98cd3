//! `println!` and `eprintln!` that ignore a closed stream: a benchmark piped
//! into `head`, or a launcher whose terminal went away, must not panic.

/// Write a line to stdout; a write error (closed pipe) is ignored.
#[macro_export]
macro_rules! outln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($t)*);
    }};
}

/// Write a line to stderr; a write error is ignored.
#[macro_export]
macro_rules! errln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($t)*);
    }};
}
