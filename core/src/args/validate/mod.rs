//! Validation of [`CollArgs`] into [`CollInit`]: every check that input can
//! fail happens here, once, with a message naming the bad value; algorithms
//! and transports trust the result.
//!
//! The checks every collective shares (root, flags, timeout, active set, the
//! pairing of src and dst, the operation against the datatype) are in this
//! file; what each collective requires of its buffers, and the
//! [`Operands`](super::Operands) it gives its algorithms, are in a file
//! named after it.

mod allgather;
mod allreduce;
mod alltoall;
mod arrays_read;
mod bcast;
mod check;
mod gather;
mod reduce;
mod reduce_scatter;
mod scatter;
mod select;

use std::cell::RefCell;
use std::time::Duration;

use super::{ActiveSet, CollArgs, CollBuffer, CollFlags, CollInit, Operands, Reducer};
use crate::error::{Error, Result};
use crate::types::{CollType, MemType, ReduceOp};
use check::{Buf, Checker};

pub(crate) use arrays_read::ArraysRead;

/// What one collective's validation needs to know besides the buffers.
pub(crate) struct Ctx<'a> {
    /// Reads and checks the buffers.
    pub ck: Checker<'a>,
    /// This rank.
    pub rank: usize,
    /// Team size.
    pub size: usize,
    /// The root (0 for unrooted collectives), below `size`.
    pub root: usize,
    /// The in-place flag.
    pub in_place: bool,
    /// The reduction (reduction collectives).
    pub op: ReduceOp,
}

impl Ctx<'_> {
    /// Whether this rank is the root.
    pub fn is_root(&self) -> bool {
        self.rank == self.root
    }

    /// The arithmetic of a reduction over elements like `buf`'s.
    pub fn reducer(&self, buf: &Buf) -> Reducer {
        Reducer { dtype: buf.dtype, op: self.op, elem_size: buf.elem_size, ranks: self.size }
    }
}

/// One collective's validated buffers and operands.
pub(crate) struct Validated {
    /// The source side, when this rank reads one (`None` in place).
    pub src: Option<Buf>,
    /// The destination side, when this rank writes one.
    pub dst: Option<Buf>,
    /// Elements of the full vector (see [`CollInit::count`]).
    pub count: usize,
    /// What the algorithms get.
    pub ops: Operands,
}

impl CollInit {
    /// Validate `args` for rank `rank` of a team of `size`.
    ///
    /// `resolve_mem` turns `MemType::Unknown` into a concrete type;
    /// `default_timeout` applies when the args carry none.
    ///
    /// # Safety
    /// Every non-null buffer pointer in `args` must be valid (in the sense of
    /// [`MemRef::new`](crate::MemRef::new)) for the extent its counts
    /// describe, and the counts and displacement arrays of v-variants must
    /// be team-size arrays of the width the flags say, for as long as the
    /// returned value (or a request built from it) is used.
    pub unsafe fn validate(
        args: &CollArgs,
        rank: usize,
        size: usize,
        resolve_mem: &dyn Fn(*const u8) -> MemType,
        default_timeout: Option<Duration>,
    ) -> Result<CollInit> {
        // SAFETY: forwarded to our caller.
        unsafe { Self::validate_noting_arrays(args, rank, size, resolve_mem, default_timeout, false) }
            .map(|(init, _)| init)
    }

    /// [`CollInit::validate`], and when `note` is set, the counts and
    /// displacement arrays it read with their values.
    ///
    /// # Safety
    /// As [`CollInit::validate`].
    pub(crate) unsafe fn validate_noting_arrays(
        args: &CollArgs,
        rank: usize,
        size: usize,
        resolve_mem: &dyn Fn(*const u8) -> MemType,
        default_timeout: Option<Duration>,
        note: bool,
    ) -> Result<(CollInit, Option<ArraysRead>)> {
        use CollType::*;
        let coll = args.coll_type;
        let reads = note.then(Default::default);
        let ck = Checker { coll, size, args, resolve_mem, reads };
        let (root, timeout) = check_common(&ck, rank, default_timeout)?;
        let in_place = args.flags.contains(CollFlags::IN_PLACE) || aliased(args, rank, root);
        let c = Ctx { ck, rank, size, root, in_place, op: args.op };
        let v = match coll {
            Barrier => Validated { src: None, dst: None, count: 0, ops: Operands::Barrier },
            Fanin => Validated { src: None, dst: None, count: 0, ops: Operands::Fanin { root } },
            Fanout => Validated { src: None, dst: None, count: 0, ops: Operands::Fanout { root } },
            Bcast => bcast::validate(&c)?,
            Allreduce => allreduce::validate(&c)?,
            Reduce => reduce::validate(&c)?,
            Allgather | Allgatherv => allgather::validate(&c)?,
            Gather | Gatherv => gather::validate(&c)?,
            Scatter | Scatterv => scatter::validate(&c)?,
            Alltoall | Alltoallv => alltoall::validate(&c)?,
            ReduceScatter | ReduceScatterv => reduce_scatter::validate(&c)?,
        };
        check_pair(&c.ck, v.src.as_ref(), v.dst.as_ref())?;
        let dtype = v.dst.as_ref().or(v.src.as_ref()).map_or(crate::types::DataType::Uint8, |b| b.dtype);
        let is_root = c.is_root();
        let (src, dst) = (v.src.as_ref(), v.dst.as_ref());
        if coll.is_reduction() {
            // Device memory has fewer reductions (no float128).
            let on_device = [src, dst].into_iter().flatten().any(|b| b.mem.mem_type() != MemType::Host);
            let check = if on_device { ReduceOp::check_device_dtype } else { ReduceOp::check_dtype };
            check(args.op, dtype).map_err(|e| e.prefixed(coll))?;
        }
        let init = CollInit {
            coll,
            rank,
            size,
            root,
            op: args.op,
            dtype,
            elem_size: dst.or(src).map_or(1, |b| b.elem_size),
            in_place,
            persistent: args.flags.contains(CollFlags::PERSISTENT),
            timeout,
            mem_type: select::mem_type(coll, is_root, src, dst),
            msgsize: select::msgsize(coll, is_root, size, v.count, src, dst),
            count: v.count,
            src: src.map(|b| b.mem),
            dst: dst.map(|b| b.mem),
            dst_fully_written: !in_place && dst.is_some_and(|b| b.v.is_none()),
            ops: v.ops,
            active_set: args.active_set,
            tag: args.tag,
            cb: args.cb.clone(),
        };
        Ok((init, c.ck.reads.map(RefCell::into_inner)))
    }
}

/// The checks every collective shares: root, flags, timeout, active set.
/// Returns the root (0 for unrooted collectives) and the timeout.
fn check_common(ck: &Checker<'_>, rank: usize, default_timeout: Option<Duration>) -> Result<(usize, Option<Duration>)> {
    use CollType::*;
    let (args, coll, size) = (ck.args, ck.coll, ck.size);
    let in_place = args.flags.contains(CollFlags::IN_PLACE);
    let root = if coll.is_rooted() {
        let r = usize::try_from(args.root).unwrap_or(usize::MAX);
        if r >= size {
            return Err(ck.err(format!("root {} is not below team size {size}", args.root)));
        }
        r
    } else {
        0
    };
    if in_place && matches!(coll, Bcast | Barrier | Fanin | Fanout) {
        let why = if coll == Bcast { "bcast is always in place (its one buffer is src)" } else { "it has no buffers" };
        return Err(ck.err(format!("the in-place flag is not allowed: {why}")));
    }
    if coll.is_reduction() && args.op.is_loc() && !args.flags.contains(CollFlags::LOC_PAIRS) {
        return Err(ck.err(format!(
            "{} reduces (value, index) pairs: set CollFlags::LOC_PAIRS and count pairs (ValueIndex<T> \
             buffers of the typed API do), so that an array of plain values is not read as pairs",
            args.op
        )));
    }
    // Mapped buffers (`MEM_MAPPED_BUFFERS`) let UCC choose a one-sided
    // algorithm; every rank still posts the collective, so the two-sided
    // ones give the same result: the flag is taken, and means nothing here.
    let timeout = if args.flags.contains(CollFlags::TIMEOUT) {
        // NaN, zero and negative timeouts are refused (UCC would time such
        // a collective out at its first look, or never for NaN); +inf is
        // UCC's "never", which its check `now - start > timeout` gives it.
        if args.timeout.is_nan() || args.timeout <= 0.0 {
            return Err(ck.err(format!("timeout {} s is not a positive number of seconds", args.timeout)));
        }
        // Longer than a Duration holds (centuries, or +inf): as long as it holds.
        Some(Duration::try_from_secs_f64(args.timeout).unwrap_or(Duration::MAX))
    } else {
        default_timeout
    };
    if let Some(set) = &args.active_set {
        if coll != Bcast {
            return Err(Error::not_supported(format!("{coll}: active sets are supported for bcast only")));
        }
        check_active_set(ck, set, size, root, rank)?;
    }
    Ok((root, timeout))
}

/// Whether `args` give one buffer as both source and destination (the same
/// address, count, datatype and memory type) without the in-place flag, in
/// a collective where that is what the flag means: allreduce, alltoall, and
/// reduce at its root. UCC accepts such a call (Open MPI 4.1 makes one at
/// every communicator creation: `allreduce(&ok, &ok, 1, MPI_MIN)` through
/// coll/ucc), so it runs in place; any other overlap is still refused.
fn aliased(args: &CollArgs, rank: usize, root: usize) -> bool {
    use CollType::*;
    let applies = match args.coll_type {
        Allreduce | Alltoall => true,
        Reduce => rank == root,
        _ => false,
    };
    match (&args.src, &args.dst) {
        (CollBuffer::Info(s), CollBuffer::Info(d)) => {
            applies
                && !s.buffer.is_null()
                && s.buffer == d.buffer
                && (s.count, s.datatype, s.mem_type) == (d.count, d.datatype, d.mem_type)
        }
        _ => false,
    }
}

/// The checks between a source and a destination that both exist: same
/// datatype, same memory type, no overlap of the bytes the collective reads
/// and writes (that is what the in-place flag is for).
fn check_pair(ck: &Checker<'_>, src: Option<&Buf>, dst: Option<&Buf>) -> Result<()> {
    let (Some(s), Some(d)) = (src, dst) else { return Ok(()) };
    if s.dtype != d.dtype {
        return Err(ck.err(format!("src datatype {} differs from dst datatype {}", s.dtype, d.dtype)));
    }
    if s.mem.mem_type() != d.mem.mem_type() {
        return Err(Error::not_supported(format!(
            "{}: src is {} memory but dst is {}: mixed memory types are not supported yet",
            ck.coll,
            s.mem.mem_type(),
            d.mem.mem_type()
        )));
    }
    if s.mem.overlaps(&d.mem) && any_overlap(touched(s, ck.size), touched(d, ck.size)) {
        return Err(ck.err("src and dst overlap but the in-place flag is not set"));
    }
    Ok(())
}

/// The address ranges `[start, end)` a side's collective touches: the whole
/// buffer, or a v-buffer's non-empty blocks. A v-buffer's span may hold
/// memory between its blocks that is not the collective's: a caller may lay
/// blocks of separate allocations out as displacements from one base
/// (PyTorch's lists of tensors through the C interface), and then source
/// and destination spans interleave while no block of one meets a block of
/// the other.
fn touched(b: &Buf, size: usize) -> Vec<(usize, usize)> {
    let base = b.mem.addr() as usize;
    if b.v.is_none() {
        return vec![(base, base + b.mem.len())];
    }
    let blocks = b.blocks(size);
    // Validation put every non-empty block inside `b.mem`, so the sums stay in the address space.
    (0..blocks.len())
        .filter_map(|i| blocks.get(i).ok())
        .filter(|&(_, len)| len > 0)
        .map(|(off, len)| (base + off, base + off + len))
        .collect()
}

/// Whether a range of `a` meets a range of `b` (each list may overlap itself).
fn any_overlap(mut a: Vec<(usize, usize)>, mut b: Vec<(usize, usize)>) -> bool {
    a.sort_unstable();
    b.sort_unstable();
    let (mut i, mut j) = (0, 0);
    while let (Some(x), Some(y)) = (a.get(i), b.get(j)) {
        if x.0 < y.1 && y.0 < x.1 {
            return true;
        }
        // The range that ends first meets nothing later in the other list,
        // whose ranges start no earlier than the one it just missed.
        if x.1 <= y.1 { i += 1 } else { j += 1 }
    }
    false
}

fn check_active_set(ck: &Checker<'_>, set: &ActiveSet, size: usize, root: usize, rank: usize) -> Result<()> {
    if set.size == 0 {
        return Err(ck.err("active set size is 0"));
    }
    let members: Vec<i128> = (0..set.size.min(size as u64 + 1))
        .map(|i| i128::from(set.start) + i128::from(i) * i128::from(set.stride))
        .collect();
    if set.size > size as u64 || members.iter().any(|&m| m < 0 || m >= size as i128) {
        return Err(ck.err(format!(
            "active set (start {}, stride {}, size {}) reaches outside team of {size}",
            set.start, set.stride, set.size
        )));
    }
    let mut sorted = members.clone();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.len() != members.len() {
        return Err(ck.err(format!("active set stride {} repeats ranks", set.stride)));
    }
    if !members.contains(&(root as i128)) {
        return Err(ck.err(format!("root {root} is not in the active set")));
    }
    if !members.contains(&(rank as i128)) {
        return Err(ck.err(format!("this rank ({rank}) is not in the active set, so it must not post")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::{BufferInfoV, CollBuffer};
    use crate::types::DataType;

    #[test]
    fn ranges_meet_only_when_they_share_a_byte() {
        assert!(!any_overlap(vec![(0, 4), (8, 12)], vec![(4, 8), (12, 16)]));
        assert!(any_overlap(vec![(0, 4), (8, 12)], vec![(4, 9)]));
        assert!(any_overlap(vec![(0, 100), (1, 2)], vec![(50, 51)]));
        assert!(!any_overlap(vec![(10, 20), (0, 5)], vec![(5, 10), (20, 30)]));
        assert!(!any_overlap(vec![], vec![(0, 1)]));
    }

    /// Alltoallv whose source and destination blocks interleave in one
    /// allocation: their spans overlap, their blocks do not.
    #[test]
    fn v_buffers_are_checked_block_by_block() {
        let mut buf = [0u8; 16];
        let base = buf.as_mut_ptr();
        let counts = [4u32, 4];
        let (src_d, dst_d, clash) = ([0u32, 8], [4u32, 12], [4u32, 10]);
        let side = |displs: &[u32; 2]| {
            CollBuffer::InfoV(BufferInfoV {
                buffer: base,
                counts: counts.as_ptr().cast(),
                displacements: displs.as_ptr().cast(),
                datatype: DataType::Uint8,
                mem_type: MemType::Host,
            })
        };
        let mut args = CollArgs::new(CollType::Alltoallv);
        args.src = side(&src_d);
        args.dst = side(&dst_d);
        // SAFETY: every block lies in `buf`, which outlives the validated arguments.
        assert!(unsafe { CollInit::validate(&args, 0, 2, &|_| MemType::Host, None) }.is_ok());
        args.dst = side(&clash);
        // SAFETY: as above.
        let e = unsafe { CollInit::validate(&args, 0, 2, &|_| MemType::Host, None) }.err().map(|e| e.to_string());
        assert!(e.is_some_and(|e| e.contains("overlap")));
    }
}
