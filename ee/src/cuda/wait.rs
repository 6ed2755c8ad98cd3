//! How a stream engine holds its stream behind a host-driven triggered post
//! (its output dependency), and the knob that chooses it
//! (`UCC_EE_CUDA_STREAM_WAIT`, read when the engine is created).
//!
//! Both wait for the engine's flag (pinned host memory mapped into the
//! device) to reach the post's number. `memop` is the driver's stream
//! memory operation, polled by the GPU's front end; `kernel` is a one-thread
//! kernel (`fc_flag_wait` of `ferrocoll-kernels`) that spins on the flag
//! with `__nanosleep` between reads. On an H200 (BENCHMARKS.md, "GPU: third
//! session") the kernel holds no faster than `memop`: with the `write`
//! input a triggered post adds 4.3–4.6 µs to a busy stream with `memop`,
//! 6.3–6.7 with `kernel`, and on an idle stream 7 against 10 µs.

use std::ffi::c_void;
use std::fmt;
use std::str::FromStr;
use std::sync::Mutex;

use ferrocoll_core::config::{Config, ConfigField};
use ferrocoll_core::{Error, Result};
use ferrocoll_cuda::{Attribute, Context, DeviceId, Function, Module, Stream};

/// `UCC_EE_CUDA_STREAM_WAIT`.
pub const WAIT: ConfigField = ConfigField {
    name: "UCC_EE_CUDA_STREAM_WAIT",
    default: "memop",
    doc: "How a CUDA stream engine holds its stream behind a host-driven triggered post until the collective \
          ends: memop (cuStreamWaitValue on a flag in pinned host memory) or kernel (a one-thread kernel spinning \
          on that flag; compiles ferrocoll's kernels with NVRTC when the first such engine of a context is made; on an \
          H200 no faster than memop). \
          Read when the engine is created.",
};

/// A stream engine's output dependency for host-driven triggered posts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StreamWait {
    /// `memop`: `cuStreamWaitValue64(flag ≥ n)` (32-bit on devices without
    /// 64-bit stream memory operations).
    #[default]
    Memop,
    /// `kernel`: `fc_flag_wait(flag, n)` launched with one thread.
    Kernel,
}

impl StreamWait {
    /// The value of [`WAIT`] in `config` (its default when unset);
    /// `InvalidParam` naming the variable and the value otherwise.
    pub fn from_config(config: &Config) -> Result<StreamWait> {
        match config.get(WAIT.name) {
            None => Ok(StreamWait::default()),
            Some(v) => v.parse().map_err(|e: Error| e.prefixed(WAIT.name)),
        }
    }
}

impl FromStr for StreamWait {
    type Err = Error;

    fn from_str(s: &str) -> Result<StreamWait> {
        match s.trim().to_ascii_lowercase().as_str() {
            "memop" => Ok(StreamWait::Memop),
            "kernel" => Ok(StreamWait::Kernel),
            _ => Err(Error::invalid_param(format!("{s:?} is not a stream wait: memop or kernel"))),
        }
    }
}

impl fmt::Display for StreamWait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StreamWait::Memop => "memop",
            StreamWait::Kernel => "kernel",
        })
    }
}

/// `fc_flag_wait`, loaded once per context (the `kernel` wait).
///
/// Loading a module may wait until every stream of its context is idle
/// (CUDA's lazy-loading notes: loading kernels may need a context
/// synchronisation). An engine made while another engine of the process
/// holds its stream behind a triggered post would wait for that post's
/// collective, which may need this very rank: ranks as threads of one
/// process on one GPU hung so on an H200 (`gpu_stream`'s ordering test,
/// one rank in `cuModuleLoadData`, the others' driver calls behind it). So
/// the first kernel-wait engine of a context loads the kernel and every
/// later one takes it from [`LOADED`]; modules are never unloaded.
#[derive(Clone, Copy)]
pub(crate) struct WaitKernel {
    function: Function,
}

/// The wait kernel of each context that has had a kernel-wait engine, by
/// the context's driver id (never reused, unlike its handle; an entry of a
/// destroyed context is a few dead bytes).
static LOADED: Mutex<Vec<(u64, WaitKernel)>> = Mutex::new(Vec::new());

impl WaitKernel {
    /// The kernel in `ctx` (current on this thread, of `device`): loaded
    /// the first time, then the same. A failure is not kept: the next
    /// engine tries again.
    pub(crate) fn in_context(ctx: Context, device: DeviceId) -> Result<WaitKernel> {
        let id = ctx.id()?;
        // Held while loading: a second engine of the context waits for the first's kernel.
        let mut loaded = LOADED.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(&(_, kernel)) = loaded.iter().find(|(of, _)| *of == id) {
            return Ok(kernel);
        }
        let kernel = Self::load(device)?;
        loaded.push((id, kernel));
        Ok(kernel)
    }

    /// ferrocoll's kernels for `device`, compiled with NVRTC (or taken from
    /// the cache) and loaded in the current context. Errors name NVRTC or
    /// the driver call that failed.
    fn load(device: DeviceId) -> Result<WaitKernel> {
        let cc = |a| device.attribute(a).map(|v| u32::try_from(v).unwrap_or(0));
        let (major, minor) = (cc(Attribute::ComputeCapabilityMajor)?, cc(Attribute::ComputeCapabilityMinor)?);
        let ptx = ferrocoll_kernels::ptx_for_arch(major, minor)?;
        let module = Module::load_ptx(&ptx)?;
        let function = module.function(ferrocoll_kernels::FLAG_WAIT_KERNEL)?;
        Ok(WaitKernel { function })
    }

    /// Enqueue "wait until the 64-bit flag at device address `flag` is ≥
    /// `value`" on `stream` (its context current): one thread of
    /// `fc_flag_wait`.
    pub(crate) fn enqueue(&self, stream: &Stream, flag: u64, value: u64) -> Result<()> {
        let (mut flag, mut value) = (flag, value);
        let mut params: [*mut c_void; 2] = [(&raw mut flag).cast(), (&raw mut value).cast()];
        // SAFETY: the function belongs to the module loaded in the stream's
        // context (the engine's, current); fc_flag_wait takes (u64, u64) by
        // value and `params` points at two live u64s for the call (the
        // driver copies them). `flag` is the device mapping of the engine's
        // flag, which stays allocated until the engine synchronised its
        // stream (Shared's drop), so after this kernel ran.
        unsafe { self.function.launch(1, 1, stream, &mut params) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_knob_parses_its_two_values_and_names_a_bad_one() {
        assert_eq!(StreamWait::from_config(&Config::new()).unwrap(), StreamWait::Memop, "the default");
        for (v, want) in [("memop", StreamWait::Memop), ("kernel", StreamWait::Kernel), (" Kernel", StreamWait::Kernel)]
        {
            let mut c = Config::new();
            c.set(WAIT.name, v);
            assert_eq!(StreamWait::from_config(&c).unwrap(), want, "{v:?}");
        }
        assert_eq!(WAIT.default, StreamWait::default().to_string());
        let mut c = Config::new();
        c.set(WAIT.name, "spin");
        let e = StreamWait::from_config(&c).unwrap_err();
        assert_eq!(e.status(), ferrocoll_core::Status::InvalidParam);
        assert!(e.context().contains("UCC_EE_CUDA_STREAM_WAIT") && e.context().contains("spin"), "{e}");
    }
}
