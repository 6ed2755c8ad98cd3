//! How a stream engine learns that the work ahead of a triggered post has
//! run (its input dependency), and the knob that chooses it
//! (`UCC_EE_CUDA_STREAM_INPUT`, read when the engine is created).

use std::fmt;
use std::str::FromStr;

use ferrocoll_core::config::{Config, ConfigField};
use ferrocoll_core::{Error, Result};

/// `UCC_EE_CUDA_STREAM_INPUT`.
pub const INPUT: ConfigField = ConfigField {
    name: "UCC_EE_CUDA_STREAM_INPUT",
    default: "event",
    doc: "How a CUDA stream engine's host-driven triggered post learns that the work before it ran: event (a CUDA \
          event, polled with cuEventQuery) or write (the stream writes the post's number to pinned host memory, \
          which progress reads without a driver call; on an H200 it waits 4.3-4.6 us on a busy stream against event's \
          13.3, for ~4 us more on the host per post). Read when the engine is created.",
};

/// A stream engine's input dependency for host-driven triggered posts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StreamInput {
    /// `event`: record a CUDA event on the stream; progress polls it with
    /// `cuEventQuery`, one driver call per poll.
    #[default]
    Event,
    /// `write`: enqueue `cuStreamWriteValue64(started, n)` (32-bit on devices
    /// without 64-bit stream memory operations) on a word of pinned host
    /// memory; progress reads it with an acquire load. Ran on an H200
    /// (BENCHMARKS.md, "GPU: third session").
    Write,
}

impl StreamInput {
    /// The value of [`INPUT`] in `config` (its default when unset);
    /// `InvalidParam` naming the variable and the value otherwise.
    pub fn from_config(config: &Config) -> Result<StreamInput> {
        match config.get(INPUT.name) {
            None => Ok(StreamInput::default()),
            Some(v) => v.parse().map_err(|e: Error| e.prefixed(INPUT.name)),
        }
    }

    /// The value of [`INPUT`] in this process's environment, read now.
    pub fn from_env() -> Result<StreamInput> {
        StreamInput::from_config(&Config::from_env())
    }
}

impl FromStr for StreamInput {
    type Err = Error;

    fn from_str(s: &str) -> Result<StreamInput> {
        match s.trim().to_ascii_lowercase().as_str() {
            "event" => Ok(StreamInput::Event),
            "write" => Ok(StreamInput::Write),
            _ => Err(Error::invalid_param(format!("{s:?} is not a stream input: event or write"))),
        }
    }
}

impl fmt::Display for StreamInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StreamInput::Event => "event",
            StreamInput::Write => "write",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_knob_parses_its_two_values_and_names_a_bad_one() {
        assert_eq!(StreamInput::from_config(&Config::new()).unwrap(), StreamInput::Event, "the default");
        for (v, want) in [("event", StreamInput::Event), ("write", StreamInput::Write), (" Write ", StreamInput::Write)]
        {
            let mut c = Config::new();
            c.set(INPUT.name, v);
            assert_eq!(StreamInput::from_config(&c).unwrap(), want, "{v:?}");
        }
        assert_eq!(INPUT.default, StreamInput::default().to_string());
        let mut c = Config::new();
        c.set(INPUT.name, "poll");
        let e = StreamInput::from_config(&c).unwrap_err();
        assert_eq!(e.status(), ferrocoll_core::Status::InvalidParam);
        assert!(e.context().contains("UCC_EE_CUDA_STREAM_INPUT") && e.context().contains("poll"), "{e}");
    }
}
