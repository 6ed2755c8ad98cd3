//! The log level a library's configuration asks for is the one in effect,
//! wherever it came from (its own test binary: the level is process-wide).

use ferrocoll_core::config::Config;
use ferrocoll_core::log::{self, Level};
use ferrocoll_core::{Components, Lib, LibParams};

fn lib_with_level(level: &str) -> Lib {
    let mut config = Config::new();
    config.set("LOG_LEVEL", level);
    Lib::with_components(LibParams { config, ..LibParams::default() }, Components::default()).expect("a library")
}

#[test]
fn the_configured_level_applies_and_n_prints_nothing() {
    let _debug = lib_with_level("debug");
    assert_eq!(log::max_level(), Some(Level::Debug));
    assert!(log::enabled(Level::Debug) && !log::enabled(Level::Trace));

    let _silent = lib_with_level("n");
    assert_eq!(log::max_level(), None, "UCC_LOG_LEVEL=n is documented as none");
    assert!(!log::enabled(Level::Error), "n must silence even errors");

    let _error = lib_with_level("error");
    assert!(log::enabled(Level::Error) && !log::enabled(Level::Warn));
}
