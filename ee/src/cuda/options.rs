//! Everything a stream engine reads when it is created: how its host-driven
//! triggered posts learn that the stream reached them ([`StreamInput`]) and
//! how they hold the stream until the collective ends ([`StreamWait`]).

use ferrocoll_core::Result;
use ferrocoll_core::config::Config;

use super::input::StreamInput;
use super::wait::StreamWait;

/// A stream engine's choices for host-driven triggered posts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamOptions {
    /// The input dependency (`UCC_EE_CUDA_STREAM_INPUT`).
    pub input: StreamInput,
    /// The output dependency (`UCC_EE_CUDA_STREAM_WAIT`).
    pub wait: StreamWait,
}

impl StreamOptions {
    /// Both knobs as `config` has them (defaults when unset); `InvalidParam`
    /// naming the variable and the value of a bad one.
    pub fn from_config(config: &Config) -> Result<StreamOptions> {
        Ok(StreamOptions { input: StreamInput::from_config(config)?, wait: StreamWait::from_config(config)? })
    }

    /// Both knobs as this process's environment has them now.
    pub fn from_env() -> Result<StreamOptions> {
        StreamOptions::from_config(&Config::from_env())
    }
}

impl From<StreamInput> for StreamOptions {
    fn from(input: StreamInput) -> StreamOptions {
        StreamOptions { input, ..StreamOptions::default() }
    }
}

impl From<StreamWait> for StreamOptions {
    fn from(wait: StreamWait) -> StreamOptions {
        StreamOptions { wait, ..StreamOptions::default() }
    }
}
