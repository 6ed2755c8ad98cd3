//! The host memory component: CPU memory, scratch from a pool, memmove
//! copies (and streaming ones, `stream.rs`, for destinations larger than
//! the cache) and the reduction kernels of [`crate::reduce_slices`].
//!
//! `HostMc` is where [`MemRef`]s become slices: [`Mc::reduce`] checks memory
//! types, lengths and overlap, then turns the references into slices in one
//! place (`reduce`) under the `MemRef` contract; everything below it is safe
//! code over slices.

mod pool;
mod stream;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use ferrocoll_core::backend::{Mc, PreparedReduce, ReduceSpec, Scratch};
use ferrocoll_core::{Error, MemRef, MemType, Result};

pub use pool::{ALIGN, DEFAULT_CACHE_LIMIT, Pool};

use crate::reduce;

/// The host (CPU memory) component.
///
/// ```
/// use ferrocoll_core::backend::Mc;
/// let mc = ferrocoll_mc::HostMc::new();
/// let scratch = mc.alloc(1000)?;
/// assert_eq!(scratch.mem().len(), 1000);
/// assert_eq!(scratch.mem().addr() as usize % 64, 0);
/// # Ok::<(), ferrocoll_core::Error>(())
/// ```
pub struct HostMc {
    pool: Arc<Pool>,
}

impl HostMc {
    /// A host component whose pool caches up to [`DEFAULT_CACHE_LIMIT`] bytes.
    pub fn new() -> HostMc {
        HostMc::with_cache_limit(DEFAULT_CACHE_LIMIT)
    }

    /// A host component whose pool caches up to `bytes` of freed scratch.
    pub fn with_cache_limit(bytes: usize) -> HostMc {
        HostMc { pool: Arc::new(Pool::new(bytes)) }
    }

    /// The scratch pool (for statistics).
    pub fn pool(&self) -> &Pool {
        &self.pool
    }
}

impl Default for HostMc {
    fn default() -> Self {
        HostMc::new()
    }
}

impl std::fmt::Debug for HostMc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostMc").field("cached_bytes", &self.pool.cached_bytes()).finish()
    }
}

/// Sources whose slices are kept on the stack during a reduce.
const STACK_SOURCES: usize = 16;

/// Sources of the usual reduce (two ranks, a tree's step): their slices
/// go in an array of this many.
const FEW_SOURCES: usize = 4;

#[inline]
fn check_host(what: &str, mem: &MemRef) -> Result<()> {
    check_host_with(|| what.to_string(), mem)
}

/// As [`check_host`], naming the buffer only on the error path (a reduction
/// checks every source: formatting "reduce source {i}" for each on every
/// call cost more than the reduction of a small vector).
#[inline]
fn check_host_with(what: impl FnOnce() -> String, mem: &MemRef) -> Result<()> {
    if mem.mem_type() == MemType::Host { Ok(()) } else { Err(not_host(mem.mem_type(), what())) }
}

#[cold]
fn not_host(mem_type: MemType, what: String) -> Error {
    Error::invalid_param(format!("host memory component given {mem_type} memory for the {what}"))
}

impl Mc for HostMc {
    fn name(&self) -> &'static str {
        "host"
    }

    fn mem_type(&self) -> MemType {
        MemType::Host
    }

    fn alloc(&self, len: usize) -> Result<Scratch> {
        let mem = self.pool.take(len)?;
        Ok(Scratch::new(mem, self.pool.clone()))
    }

    fn copy(&self, dst: MemRef, src: MemRef) -> Result<()> {
        check_host("copy destination", &dst)?;
        check_host("copy source", &src)?;
        if dst.len() != src.len() {
            return Err(Error::invalid_param(format!(
                "copy of {} source bytes into a {}-byte destination",
                src.len(),
                dst.len()
            )));
        }
        dst.copy_host_from(&src)
    }

    fn copy_streaming(&self, dst: MemRef, src: MemRef) -> Result<()> {
        if dst.overlaps(&src) || dst.len() != src.len() || dst.is_empty() {
            // memmove handles overlap; `copy` reports the other cases.
            return self.copy(dst, src);
        }
        check_host("copy destination", &dst)?;
        check_host("copy source", &src)?;
        // SAFETY: by the MemRef contract both ranges are live host allocations
        // (host checked above) of len bytes, dst writable, and no one else
        // touches them during the call; they do not overlap (checked above),
        // so the &mut slice over dst aliases nothing.
        let (d, s) = unsafe { (dst.as_mut_slice(), src.as_slice()) };
        stream::copy_streaming(d, s);
        Ok(())
    }

    fn reduce(&self, dst: MemRef, srcs: &[MemRef], spec: &ReduceSpec) -> Result<()> {
        with_operands(dst, srcs, spec, |dst, first, rest| reduce::reduce_operands(dst, first, rest, spec))
    }

    fn prepare_reduce(&self, spec: &ReduceSpec) -> Option<PreparedReduce> {
        reduce::prepare(spec).ok()
    }

    fn reduce_prepared(&self, dst: MemRef, srcs: &[MemRef], prepared: &PreparedReduce) -> Result<()> {
        if let [a, b] = srcs
            && prepared.has_pair()
            && apart_on_host(&dst, a, b)
        {
            // SAFETY: by the MemRef contract the three ranges are live host
            // allocations (host checked) of their lengths, dst writable, and
            // nothing outside ferrocoll accesses them during the call;
            // neither source overlaps dst (checked), so the &mut slice over
            // dst aliases neither shared one (the sources may alias each other).
            let (d, a, b) = unsafe { (dst.as_mut_slice(), a.as_slice(), b.as_slice()) };
            return prepared.run_pair(d, a, b);
        }
        with_operands(dst, srcs, prepared.spec(), |dst, first, rest| prepared.run(dst, first, rest))
    }
}

/// Whether `dst` and two sources are all host memory and neither source
/// overlaps `dst`: a two-source reduction that needs none of
/// [`with_operands`]' cases (in place, errors to name), which it is left to.
fn apart_on_host(dst: &MemRef, a: &MemRef, b: &MemRef) -> bool {
    let host = |m: &MemRef| m.mem_type() == MemType::Host;
    host(dst) && host(a) && host(b) && !a.overlaps(dst) && !b.overlaps(dst)
}

/// `f(dst, first, rest)` on the slices of a reduction's operands, host
/// memory all (checked): `first` is `srcs[0]`, or `None` when that is dst
/// itself (exactly the same range: in place). Any other overlap between
/// dst and a source is an error.
fn with_operands(
    dst: MemRef,
    srcs: &[MemRef],
    spec: &ReduceSpec,
    f: impl FnOnce(&mut [u8], Option<&[u8]>, &[&[u8]]) -> Result<()>,
) -> Result<()> {
    let Some((first, rest)) = srcs.split_first() else {
        return Err(Error::invalid_param(format!(
            "reduction {} on {} needs at least one source, got none",
            spec.op, spec.dtype
        )));
    };
    check_host("reduce destination", &dst)?;
    for (i, s) in srcs.iter().enumerate() {
        check_host_with(|| format!("reduce source {i}"), s)?;
    }
    let in_place = first.addr() == dst.addr() && first.len() == dst.len();
    let checked = if in_place { rest } else { srcs };
    let offset = usize::from(in_place);
    if let Some(i) = checked.iter().position(|s| s.overlaps(&dst)) {
        return Err(Error::internal(format!(
            "reduce source {} overlaps the destination ({} bytes at {:p}); only source 0 may be the destination itself",
            i + offset,
            dst.len(),
            dst.addr()
        )));
    }
    // SAFETY: by the MemRef contract every range is a live host allocation
    // (host checked above) of its length, dst writable, and nothing
    // outside ferrocoll accesses them during the call. No source in
    // `checked` overlaps dst (checked above), so the one &mut slice over dst
    // aliases none of the shared slices; sources may alias each other, as
    // shared slices may. In place, srcs[0] is dst and gets no slice of its own.
    let dst_slice = unsafe { dst.as_mut_slice() };
    // SAFETY: as above.
    unsafe {
        with_slices(checked, |slices| match slices.split_first() {
            Some((first, rest)) if !in_place => f(dst_slice, Some(first), rest),
            _ => f(dst_slice, None, slices),
        })
    }
}

/// `f` on the slices of `mems`: on the stack for the usual few sources, in
/// an array no longer than needed (filling the 16-slot one cost more than
/// reducing two `f32`), else on the heap.
///
/// # Safety
/// Every range must be a live host allocation of its length that nothing
/// writes while `f` runs (the `MemRef` contract, host memory).
unsafe fn with_slices<R>(mems: &[MemRef], f: impl FnOnce(&[&[u8]]) -> R) -> R {
    /// [`with_slices`] on an array of `N` slots (`mems` fits).
    ///
    /// # Safety
    /// As [`with_slices`].
    unsafe fn on_stack<const N: usize, R>(mems: &[MemRef], f: impl FnOnce(&[&[u8]]) -> R) -> R {
        let mut stack: [&[u8]; N] = [&[]; N];
        for (slot, m) in stack.iter_mut().zip(mems) {
            // SAFETY: forwarded to our caller.
            *slot = unsafe { m.as_slice() };
        }
        f(&stack[..mems.len().min(N)])
    }
    match mems.len() {
        // SAFETY: forwarded to our caller.
        0..=FEW_SOURCES => unsafe { on_stack::<FEW_SOURCES, R>(mems, f) },
        // SAFETY: forwarded to our caller.
        n if n <= STACK_SOURCES => unsafe { on_stack::<STACK_SOURCES, R>(mems, f) },
        _ => {
            // SAFETY: forwarded to our caller.
            let heap: Vec<&[u8]> = mems.iter().map(|m| unsafe { m.as_slice() }).collect();
            f(&heap)
        }
    }
}
