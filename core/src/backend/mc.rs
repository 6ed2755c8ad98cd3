//! The memory-component trait: allocation, copies and reductions for one memory type.

use std::sync::Arc;

use crate::buffer::MemRef;
use crate::error::{Error, Result};
use crate::types::{DataType, MemType, ReduceOp};

/// One reduction: `count` elements of `dtype` combined with `op`.
///
/// For [`ReduceOp::Avg`] the elements are summed, and when `avg_divisor` is
/// `Some(n)` the sum is divided by `n` before it is written (algorithms set
/// it on the step that produces final results, so that narrow floats are
/// rounded once).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReduceSpec {
    /// Element type.
    pub dtype: DataType,
    /// Operation.
    pub op: ReduceOp,
    /// Elements (pairs for maxloc/minloc).
    pub count: usize,
    /// Divide the sum by this (avg, final step only).
    pub avg_divisor: Option<usize>,
}

impl ReduceSpec {
    /// Bytes of each operand (`None` if that overflows).
    pub fn bytes(&self) -> Option<usize> {
        self.count.checked_mul(self.op.element_size(self.dtype))
    }
}

/// The kernel of a [`PreparedReduce`]: `dst = op(first, rest...)`, or
/// `op(dst, rest...)` in place (`first` is `None`), over operands whose
/// lengths [`PreparedReduce::run`] checked against the spec.
pub type ReduceKernel = fn(dst: &mut [u8], first: Option<&[u8]>, rest: &[&[u8]], spec: &ReduceSpec) -> Result<()>;

/// The short two-source kernel of a [`PreparedReduce`]: `dst = op(a, b)`
/// element by element, over operands of equal length holding whole
/// elements, up to [`PAIR_BYTES`] ([`PreparedReduce::run_pair`] checked
/// them). The same operation on each element as the full kernel's, so the
/// same bits.
pub type PairKernel = fn(dst: &mut [u8], a: &[u8], b: &[u8]);

/// Operand bytes up to which [`PreparedReduce::run_pair`] takes the pair
/// kernel: a small collective's payload on two ranks. The full kernel's
/// layers (operand lists, the driver's size cases) cost ~150 instructions
/// a call there, as much as the rest of the reduction's step; its vector
/// loops win past ~768 bytes (callgrind, 2-rank allreduce of `f32`,
/// instructions a reduction, full kernel against pair kernel: 8 B 259 /
/// 109, 128 B 340 / 189, 256 B 358 / 233, 1 KiB 466 / 497, 4 KiB 898 /
/// 1 553; BENCHMARKS.md, thirty-fourth round).
pub const PAIR_BYTES: usize = 512;

/// A reduction whose spec a memory component checked once, for a task
/// that reduces alike at every post: each run checks its operands'
/// lengths and calls the kernel chosen for the spec's type and operation.
/// A small allreduce's reduction was ~400 instructions, a quarter of them
/// checking and dispatching on the same spec each time.
#[derive(Clone, Copy, Debug)]
pub struct PreparedReduce {
    spec: ReduceSpec,
    bytes: usize,
    kernel: ReduceKernel,
    /// For operands of at most [`PAIR_BYTES`] and exactly two sources.
    pair: Option<PairKernel>,
}

impl PreparedReduce {
    /// `kernel` for `spec`, which the caller checked it can reduce; `None`
    /// if the operands' bytes overflow.
    pub fn new(spec: ReduceSpec, kernel: ReduceKernel) -> Option<PreparedReduce> {
        Some(PreparedReduce { spec, bytes: spec.bytes()?, kernel, pair: None })
    }

    /// With `pair` for two short sources (see [`PairKernel`]).
    pub fn with_pair(self, pair: Option<PairKernel>) -> PreparedReduce {
        PreparedReduce { pair: pair.filter(|_| self.bytes <= PAIR_BYTES), ..self }
    }

    /// Whether [`run_pair`](PreparedReduce::run_pair) has a kernel of its
    /// own: a caller with two sources may then skip building the operand
    /// lists of [`run`](PreparedReduce::run).
    pub fn has_pair(&self) -> bool {
        self.pair.is_some()
    }

    /// The spec it reduces.
    pub fn spec(&self) -> &ReduceSpec {
        &self.spec
    }

    /// `dst = op(first, rest...)`, or `op(dst, rest...)` without `first`;
    /// every operand must be the spec's bytes long.
    pub fn run(&self, dst: &mut [u8], first: Option<&[u8]>, rest: &[&[u8]]) -> Result<()> {
        let wrong = |len: usize| len != self.bytes;
        if wrong(dst.len()) || first.is_some_and(|f| wrong(f.len())) || rest.iter().any(|s| wrong(s.len())) {
            return Err(self.lengths_differ(dst.len(), first, rest));
        }
        if self.bytes == 0 {
            return Ok(());
        }
        (self.kernel)(dst, first, rest, &self.spec)
    }

    /// `dst = op(a, b)`: [`run`](PreparedReduce::run) with two sources,
    /// by the pair kernel where there is one.
    pub fn run_pair(&self, dst: &mut [u8], a: &[u8], b: &[u8]) -> Result<()> {
        match self.pair {
            Some(pair) if dst.len() == self.bytes && a.len() == self.bytes && b.len() == self.bytes => {
                pair(dst, a, b);
                Ok(())
            }
            _ => self.run(dst, Some(a), std::slice::from_ref(&b)),
        }
    }

    /// The first operand whose length is not the spec's, named as
    /// `reduce` names it: the destination, or source i (`first` is source 0).
    #[cold]
    fn lengths_differ(&self, dst: usize, first: Option<&[u8]>, rest: &[&[u8]]) -> Error {
        let sources = first.into_iter().chain(rest.iter().copied()).map(<[u8]>::len);
        let (name, len) = std::iter::once(("destination".to_string(), dst))
            .chain(sources.enumerate().map(|(i, len)| (format!("source {i}"), len)))
            .find(|&(_, len)| len != self.bytes)
            .unwrap_or(("an operand".to_string(), 0));
        Error::invalid_param(format!(
            "{name} has {len} bytes but {} {} elements for {} need {}",
            self.spec.count, self.spec.dtype, self.spec.op, self.bytes
        ))
    }
}

/// Scratch memory from a memory component; returned to its pool on drop.
pub struct Scratch {
    mem: MemRef,
    owner: Option<Arc<dyn ScratchOwner>>,
}

/// Where a [`Scratch`] goes back to.
pub trait ScratchOwner: Send + Sync {
    /// Take the memory back.
    fn release(&self, mem: MemRef);
}

impl Scratch {
    /// Wrap memory that `owner` takes back on drop.
    pub fn new(mem: MemRef, owner: Arc<dyn ScratchOwner>) -> Scratch {
        Scratch { mem, owner: Some(owner) }
    }

    /// The memory (valid until the `Scratch` is dropped).
    pub fn mem(&self) -> MemRef {
        self.mem
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(owner) = self.owner.take() {
            owner.release(self.mem);
        }
    }
}

impl std::fmt::Debug for Scratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scratch").field("mem", &self.mem).finish()
    }
}

/// A copy in flight on a device, as a memory component reports it.
pub trait CopyInFlight: Send {
    /// Whether the copy has finished (an error if it failed).
    fn is_done(&mut self) -> Result<bool>;
}

/// A copy started by [`Mc::copy_start`]: poll [`PendingCopy::is_done`]
/// until it says true. Dropping one that is not done waits for the copy
/// (the memory it writes may be freed right after), so drop it only once
/// done, or on a path that may block.
pub struct PendingCopy {
    in_flight: Option<Box<dyn CopyInFlight>>,
}

impl PendingCopy {
    /// A copy that has already finished.
    pub fn done() -> PendingCopy {
        PendingCopy { in_flight: None }
    }

    /// A copy that finishes when `in_flight` says so.
    pub fn in_flight(in_flight: Box<dyn CopyInFlight>) -> PendingCopy {
        PendingCopy { in_flight: Some(in_flight) }
    }

    /// Whether the copy has finished (an error if it failed). Cheap: a
    /// look at the device's progress, no wait.
    pub fn is_done(&mut self) -> Result<bool> {
        let Some(copy) = &mut self.in_flight else { return Ok(true) };
        let done = copy.is_done()?;
        if done {
            self.in_flight = None;
        }
        Ok(done)
    }
}

impl Drop for PendingCopy {
    fn drop(&mut self) {
        let Some(copy) = &mut self.in_flight else { return };
        // The copy may still write memory its owner frees once we return:
        // wait for it. An error means the device will not write any more.
        while let Ok(false) = copy.is_done() {
            std::thread::yield_now();
        }
    }
}

impl std::fmt::Debug for PendingCopy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingCopy").field("in_flight", &self.in_flight.is_some()).finish()
    }
}

/// A memory component (UCC's MC): everything ferrocoll does to memory of one type.
pub trait Mc: Send + Sync {
    /// Short name (`host`, `cuda`).
    fn name(&self) -> &'static str;

    /// The memory type it handles.
    fn mem_type(&self) -> MemType;

    /// Whether `addr` is memory of this component's type (pointer query). The
    /// host component answers false: host is what remains when no other
    /// component claims a pointer.
    fn owns(&self, _addr: *const u8) -> bool {
        false
    }

    /// Scratch memory of `len` bytes (from a pool; contents undefined).
    fn alloc(&self, len: usize) -> Result<Scratch>;

    /// Host memory of `len` bytes that this component's copies reach
    /// fastest, for staging its memory through the host (pinned memory for
    /// CUDA). The default, `NotSupported`, tells callers to use the host
    /// component's scratch instead.
    fn alloc_host(&self, _len: usize) -> Result<Scratch> {
        Err(Error::not_supported(format!("the {} memory component has no host staging memory", self.name())))
    }

    /// Copy `src` to `dst` (same length; they may overlap).
    fn copy(&self, dst: MemRef, src: MemRef) -> Result<()>;

    /// Copy `src` to `dst` (same length; they may overlap) when `dst` will
    /// not be read again soon: a piece of a buffer larger than the cache.
    /// The host component writes it with non-temporal stores, which skip
    /// reading the destination lines and leave the cache to data that is
    /// reused; the default is [`Mc::copy`].
    fn copy_streaming(&self, dst: MemRef, src: MemRef) -> Result<()> {
        self.copy(dst, src)
    }

    /// Start copying `src` to `dst` (same length; they may overlap) and
    /// return at once; the copy is done when the returned [`PendingCopy`]
    /// says so. For components whose copies run on a device, so that the
    /// thread that progresses collectives never blocks on the device. Both
    /// ranges must stay valid until the copy is done or the `PendingCopy`
    /// dropped (its drop waits for the copy). The default copies at once.
    fn copy_start(&self, dst: MemRef, src: MemRef) -> Result<PendingCopy> {
        self.copy(dst, src)?;
        Ok(PendingCopy::done())
    }

    /// `dst = op(srcs[0], srcs[1], ...)` element-wise. `srcs[0]` may be `dst`
    /// itself (exactly the same range): then dst is also the first operand.
    /// Any other overlap between dst and a source is an error.
    fn reduce(&self, dst: MemRef, srcs: &[MemRef], spec: &ReduceSpec) -> Result<()>;

    /// `spec` checked once, for reductions repeated with it
    /// ([`Mc::reduce_prepared`]); `None` where this component has no such
    /// path (the default) or cannot reduce `spec` (`reduce` then says why).
    fn prepare_reduce(&self, _spec: &ReduceSpec) -> Option<PreparedReduce> {
        None
    }

    /// [`Mc::reduce`] of the spec `prepared` checked, which this
    /// component's [`Mc::prepare_reduce`] made.
    fn reduce_prepared(&self, dst: MemRef, srcs: &[MemRef], prepared: &PreparedReduce) -> Result<()> {
        self.reduce(dst, srcs, prepared.spec())
    }
}

/// The memory components of a library, one per memory type.
#[derive(Clone, Default)]
pub struct McSet {
    mcs: Vec<Arc<dyn Mc>>,
}

impl McSet {
    /// A set from a list (the first component of a memory type wins).
    pub fn new(mcs: Vec<Arc<dyn Mc>>) -> McSet {
        McSet { mcs }
    }

    /// The component for `mem_type`.
    pub fn get(&self, mem_type: MemType) -> Result<&Arc<dyn Mc>> {
        self.mcs.iter().find(|m| m.mem_type() == mem_type).ok_or_else(|| {
            Error::not_supported(format!(
                "no memory component handles {mem_type} memory (available: {})",
                self.names().join(", ")
            ))
        })
    }

    /// Resolve the memory type of a pointer: the first component that claims
    /// it, else host.
    pub fn resolve(&self, addr: *const u8) -> MemType {
        self.mcs.iter().find(|m| m.owns(addr)).map_or(MemType::Host, |m| m.mem_type())
    }

    /// Names of the components.
    pub fn names(&self) -> Vec<&'static str> {
        self.mcs.iter().map(|m| m.name()).collect()
    }

    /// Every component.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Mc>> {
        self.mcs.iter()
    }
}
