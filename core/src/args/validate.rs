//! Validation of [`CollArgs`] into [`CollInit`]: every check that input can
//! fail happens here, once, with a message naming the bad value; algorithms
//! and transports trust the result.

use std::time::Duration;

use super::{ActiveSet, BufferInfo, BufferInfoV, CollArgs, CollBuffer, CollFlags, CompletionCallback};
use crate::buffer::MemRef;
use crate::error::{Error, Result};
use crate::types::{CollType, DataType, MemType, ReduceOp};

/// Counts and displacements (in elements) of a v-variant buffer, one per rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VLayout {
    /// Element count per rank.
    pub counts: Vec<usize>,
    /// Displacement per rank, in elements.
    pub displs: Vec<usize>,
}

/// A validated buffer.
#[derive(Clone, Debug)]
pub struct Buf {
    /// The whole buffer (for v-variants: up to the furthest block's end).
    pub mem: MemRef,
    /// Element type.
    pub dtype: DataType,
    /// Bytes per element (the pair size for maxloc/minloc).
    pub elem_size: usize,
    /// Elements in the buffer (for v-variants: sum of the counts; for
    /// reduce_scatterv's dst: the whole vector in place, else this rank's count).
    pub count: usize,
    /// Per-rank layout of v-variant buffers (for reduce_scatterv's dst: the
    /// blocks of the whole vector, one after the other).
    pub v: Option<VLayout>,
}

impl Buf {
    /// Bytes of `count` elements.
    pub fn bytes(&self, count: usize) -> usize {
        count * self.elem_size
    }

    /// `count` elements starting at element `offset`.
    pub fn elems(&self, offset: usize, count: usize) -> Result<MemRef> {
        self.mem.range(offset * self.elem_size, count * self.elem_size)
    }

    /// Rank `r`'s block: `(displs[r], counts[r])` for v-variants, else the
    /// UCC block distribution of `count` elements over `size` ranks.
    pub fn block(&self, r: usize, size: usize) -> Result<MemRef> {
        match &self.v {
            Some(v) => {
                let (d, c) = (v.displs.get(r), v.counts.get(r));
                match (d, c) {
                    (Some(&d), Some(&c)) => self.elems(d, c),
                    _ => Err(Error::internal(format!("rank {r} has no block in a layout of {}", v.counts.len()))),
                }
            }
            None => self.elems(block_offset(self.count, size, r), block_count(self.count, size, r)),
        }
    }

    /// Element count of rank `r`'s block (see [`Buf::block`]).
    pub fn block_len(&self, r: usize, size: usize) -> usize {
        match &self.v {
            Some(v) => v.counts.get(r).copied().unwrap_or(0),
            None => block_count(self.count, size, r),
        }
    }
}

/// Elements in block `r` when `total` elements are split over `size` ranks:
/// the first `total % size` blocks hold one more (UCC's distribution).
pub fn block_count(total: usize, size: usize, r: usize) -> usize {
    if size == 0 {
        return 0;
    }
    total / size + usize::from(r < total % size)
}

/// First element of block `r` (see [`block_count`]).
pub fn block_offset(total: usize, size: usize, r: usize) -> usize {
    if size == 0 {
        return 0;
    }
    let (q, rem) = (total / size, total % size);
    r * q + r.min(rem)
}

/// Arguments after validation: what algorithms receive.
#[derive(Clone)]
pub struct CollInit {
    /// Collective.
    pub coll: CollType,
    /// This rank in the team.
    pub rank: usize,
    /// Team size.
    pub size: usize,
    /// Root (0 for unrooted collectives).
    pub root: usize,
    /// Reduction (sum when unused).
    pub op: ReduceOp,
    /// Element type of the data (`Uint8` when there is none).
    pub dtype: DataType,
    /// In place.
    pub in_place: bool,
    /// Persistent: may be posted again.
    pub persistent: bool,
    /// Timeout from post to completion.
    pub timeout: Option<Duration>,
    /// Memory type used for selection.
    pub mem_type: MemType,
    /// Message size used for selection, in bytes (UCC's `ucc_coll_args_msgsize`).
    pub msgsize: u64,
    /// Elements of the full vector: N for allreduce, reduce and bcast; the
    /// P·N total for allgather, alltoall, gather, scatter and reduce_scatter;
    /// the sum of counts for v-variants.
    pub count: usize,
    /// Source buffer, when this rank reads one (`None` in place).
    pub src: Option<Buf>,
    /// Destination buffer, when this rank writes one.
    pub dst: Option<Buf>,
    /// Bcast among a subset of ranks.
    pub active_set: Option<ActiveSet>,
    /// User tag.
    pub tag: Option<u16>,
    /// Completion callback.
    pub cb: Option<CompletionCallback>,
}

impl std::fmt::Debug for CollInit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.coll)?;
        if self.coll.is_reduction() {
            write!(f, " {}", self.op)?;
        }
        if !self.coll.is_synchronisation() {
            write!(f, " count {} {}", self.count, self.dtype)?;
        }
        if self.in_place {
            f.write_str(" in-place")?;
        }
        if self.coll.is_rooted() {
            write!(f, " root {}", self.root)?;
        }
        write!(f, " (rank {} of {}, {} bytes, {})", self.rank, self.size, self.msgsize, self.mem_type)
    }
}

/// Checks shared by every buffer, with the collective and side in messages.
struct Checker<'a> {
    coll: CollType,
    size: usize,
    resolve_mem: &'a dyn Fn(*const u8) -> MemType,
    flags: CollFlags,
}

impl Checker<'_> {
    fn err(&self, msg: impl std::fmt::Display) -> Error {
        Error::invalid_param(format!("{}: {msg}", self.coll))
    }

    fn mem_type(&self, side: &str, addr: *mut u8, mt: MemType) -> Result<MemType> {
        let mt = if mt == MemType::Unknown { (self.resolve_mem)(addr) } else { mt };
        match mt {
            MemType::Rocm | MemType::RocmManaged => Err(Error::not_supported(format!(
                "{}: {side} is {mt} memory, which ferrocoll does not support",
                self.coll
            ))),
            _ => Ok(mt),
        }
    }

    fn bytes(&self, side: &str, count: usize, elem_size: usize) -> Result<usize> {
        count
            .checked_mul(elem_size)
            .filter(|b| *b <= isize::MAX as usize)
            .ok_or_else(|| self.err(format!("{side}.count {count} × {elem_size} bytes overflows the address space")))
    }

    fn info(&self, side: &str, b: &CollBuffer, elem_size: &dyn Fn(DataType) -> usize) -> Result<Buf> {
        let info: &BufferInfo = match b {
            CollBuffer::Info(i) => i,
            CollBuffer::InfoV(_) => return Err(self.err(format!("{side} must be a plain buffer (info), not info_v"))),
            CollBuffer::None => return Err(self.err(format!("{side} buffer is missing"))),
        };
        let count =
            usize::try_from(info.count).map_err(|_| self.err(format!("{side}.count {} is too large", info.count)))?;
        let es = elem_size(info.datatype);
        let len = self.bytes(side, count, es)?;
        if info.buffer.is_null() && len > 0 {
            return Err(self.err(format!("{side}.buffer is null but {side}.count is {count}")));
        }
        let mt = self.mem_type(side, info.buffer, info.mem_type)?;
        // SAFETY: the caller of `CollInit::validate` promised that the buffer
        // is valid for count elements of its datatype while the request lives.
        let mem = unsafe { MemRef::new(info.buffer, len, mt) };
        Ok(Buf { mem, dtype: info.datatype, elem_size: es, count, v: None })
    }

    fn info_v(&self, side: &str, b: &CollBuffer, elem_size: &dyn Fn(DataType) -> usize) -> Result<Buf> {
        let info: &BufferInfoV = match b {
            CollBuffer::InfoV(i) => i,
            CollBuffer::Info(_) => return Err(self.err(format!("{side} must be a buffer with counts (info_v)"))),
            CollBuffer::None => return Err(self.err(format!("{side} buffer is missing"))),
        };
        let counts = self.read_array(side, "counts", info.counts, self.flags.contains(CollFlags::COUNT_64BIT))?;
        let displs = self.read_array(
            side,
            "displacements",
            info.displacements,
            self.flags.contains(CollFlags::DISPLACEMENTS_64BIT),
        )?;
        let es = elem_size(info.datatype);
        let mut extent = 0usize;
        let mut total = 0usize;
        for (r, (&c, &d)) in counts.iter().zip(&displs).enumerate() {
            let end = d
                .checked_add(c)
                .ok_or_else(|| self.err(format!("{side} block {r}: displacement {d} + count {c} overflows")))?;
            if c > 0 {
                extent = extent.max(end);
            }
            total = total.checked_add(c).ok_or_else(|| self.err(format!("{side}.counts sum overflows")))?;
        }
        let len = self.bytes(side, extent, es)?;
        if info.buffer.is_null() && len > 0 {
            return Err(self.err(format!("{side}.buffer is null but its counts sum to {total}")));
        }
        let mt = self.mem_type(side, info.buffer, info.mem_type)?;
        // SAFETY: the caller of `CollInit::validate` promised that the buffer
        // holds every block described by counts and displacements.
        let mem = unsafe { MemRef::new(info.buffer, len, mt) };
        Ok(Buf { mem, dtype: info.datatype, elem_size: es, count: total, v: Some(VLayout { counts, displs }) })
    }

    /// reduce_scatterv's dst: counts only (displacements are implied: blocks
    /// follow each other); the buffer holds the whole vector in place, else
    /// only this rank's block.
    fn info_counts(&self, b: &CollBuffer, es: &dyn Fn(DataType) -> usize, in_place: bool, rank: usize) -> Result<Buf> {
        let info: &BufferInfoV = match b {
            CollBuffer::InfoV(i) => i,
            CollBuffer::Info(_) => return Err(self.err("dst must be a buffer with counts (info_v)")),
            CollBuffer::None => return Err(self.err("dst buffer is missing")),
        };
        let counts = self.read_array("dst", "counts", info.counts, self.flags.contains(CollFlags::COUNT_64BIT))?;
        let mut displs = Vec::with_capacity(counts.len());
        let mut total = 0usize;
        for &c in &counts {
            displs.push(total);
            total = total.checked_add(c).ok_or_else(|| self.err("dst.counts sum overflows"))?;
        }
        let held = if in_place { total } else { counts.get(rank).copied().unwrap_or(0) };
        let e = es(info.datatype);
        let len = self.bytes("dst", held, e)?;
        if info.buffer.is_null() && len > 0 {
            return Err(self.err(format!("dst.buffer is null but it must hold {held} elements")));
        }
        let mt = self.mem_type("dst", info.buffer, info.mem_type)?;
        // SAFETY: the caller of `CollInit::validate` promised the buffer holds
        // `held` elements (the whole vector in place, else this rank's block).
        let mem = unsafe { MemRef::new(info.buffer, len, mt) };
        Ok(Buf { mem, dtype: info.datatype, elem_size: e, count: held, v: Some(VLayout { counts, displs }) })
    }

    fn read_array(&self, side: &str, what: &str, ptr: *const u8, wide: bool) -> Result<Vec<usize>> {
        if self.size == 0 {
            return Ok(Vec::new());
        }
        if ptr.is_null() {
            return Err(self.err(format!("{side}.{what} is null")));
        }
        let mut out = Vec::with_capacity(self.size);
        for i in 0..self.size {
            let v = if wide {
                // SAFETY: the caller promised a team-size array of u64 (flag set);
                // read_unaligned because C arrays from users need not be aligned.
                unsafe { ptr.cast::<u64>().add(i).read_unaligned() }
            } else {
                // SAFETY: as above, an array of u32.
                u64::from(unsafe { ptr.cast::<u32>().add(i).read_unaligned() })
            };
            out.push(usize::try_from(v).map_err(|_| self.err(format!("{side}.{what}[{i}] = {v} is too large")))?);
        }
        Ok(out)
    }
}

impl CollInit {
    /// Validate `args` for rank `rank` of a team of `size`.
    ///
    /// `resolve_mem` turns `MemType::Unknown` into a concrete type;
    /// `default_timeout` applies when the args carry none.
    ///
    /// # Safety
    /// Every non-null buffer pointer in `args` must be valid (in the sense of
    /// [`MemRef::new`]) for the extent its counts describe, and the counts and
    /// displacement arrays of v-variants must be team-size arrays of the width
    /// the flags say, for as long as the returned value (or a request built
    /// from it) is used.
    pub unsafe fn validate(
        args: &CollArgs,
        rank: usize,
        size: usize,
        resolve_mem: &dyn Fn(*const u8) -> MemType,
        default_timeout: Option<Duration>,
    ) -> Result<CollInit> {
        use CollType::*;
        let coll = args.coll_type;
        let ck = Checker { coll, size, resolve_mem, flags: args.flags };
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
        let is_root = rank == root;
        if in_place && matches!(coll, Bcast | Barrier | Fanin | Fanout) {
            let why =
                if coll == Bcast { "bcast is always in place (its one buffer is src)" } else { "it has no buffers" };
            return Err(ck.err(format!("the in-place flag is not allowed: {why}")));
        }
        if args.flags.contains(CollFlags::MEM_MAPPED_BUFFERS) {
            return Err(Error::not_supported(format!("{coll}: mem-mapped (one-sided) buffers are not supported")));
        }
        let timeout = if args.flags.contains(CollFlags::TIMEOUT) {
            if !(args.timeout.is_finite() && args.timeout > 0.0) {
                return Err(ck.err(format!("timeout {} s is not a positive number of seconds", args.timeout)));
            }
            Some(Duration::from_secs_f64(args.timeout))
        } else {
            default_timeout
        };
        if let Some(set) = &args.active_set {
            if coll != Bcast {
                return Err(Error::not_supported(format!("{coll}: active sets are supported for bcast only")));
            }
            check_active_set(&ck, set, size, root, rank)?;
        }
        let op = args.op;
        let reduction = coll.is_reduction();
        let elem_size = move |dt: DataType| if reduction { op.element_size(dt) } else { dt.size() };
        let es: &dyn Fn(DataType) -> usize = &elem_size;
        let need_src = |_: ()| ck.info("src", &args.src, es);
        let need_dst = |_: ()| ck.info("dst", &args.dst, es);

        let (src, dst, count): (Option<Buf>, Option<Buf>, usize) = match coll {
            Barrier | Fanin | Fanout => (None, None, 0),
            Bcast => {
                let b = need_src(())?;
                let n = b.count;
                (Some(b), None, n)
            }
            Allreduce => {
                let dst = need_dst(())?;
                let src = if in_place { None } else { Some(need_src(())?) };
                if let Some(s) = &src {
                    same_count(&ck, "src", s.count, "dst", dst.count)?;
                }
                let n = dst.count;
                (src, Some(dst), n)
            }
            Reduce => {
                let dst = if is_root { Some(need_dst(())?) } else { None };
                let src = if in_place && is_root { None } else { Some(need_src(())?) };
                if let (Some(s), Some(d)) = (&src, &dst) {
                    same_count(&ck, "src", s.count, "dst", d.count)?;
                }
                let n = dst.as_ref().or(src.as_ref()).map_or(0, |b| b.count);
                (src, dst, n)
            }
            Allgather | Gather => {
                let has_dst = coll == Allgather || is_root;
                let dst = if has_dst { Some(need_dst(())?) } else { None };
                let src = if in_place && has_dst { None } else { Some(need_src(())?) };
                let n = match (&src, &dst) {
                    (Some(s), Some(d)) => {
                        total_is_p_times(&ck, "dst", d.count, "src", s.count)?;
                        d.count
                    }
                    (None, Some(d)) => divisible(&ck, "dst", d.count)?,
                    (Some(s), None) => s.count * size,
                    (None, None) => 0,
                };
                (src, dst, n)
            }
            Scatter => {
                let src = if is_root { Some(need_src(())?) } else { None };
                let dst = if in_place && is_root { None } else { Some(need_dst(())?) };
                let n = match (&src, &dst) {
                    (Some(s), Some(d)) => {
                        total_is_p_times(&ck, "src", s.count, "dst", d.count)?;
                        s.count
                    }
                    (Some(s), None) => divisible(&ck, "src", s.count)?,
                    (None, Some(d)) => d.count * size,
                    (None, None) => 0,
                };
                (src, dst, n)
            }
            Alltoall => {
                let dst = need_dst(())?;
                let src = if in_place { None } else { Some(need_src(())?) };
                if let Some(s) = &src {
                    same_count(&ck, "src", s.count, "dst", dst.count)?;
                }
                let n = divisible(&ck, "dst", dst.count)?;
                (src, Some(dst), n)
            }
            ReduceScatter => {
                let dst = need_dst(())?;
                if in_place {
                    let n = dst.count;
                    (None, Some(dst), n)
                } else {
                    let src = need_src(())?;
                    total_is_p_times(&ck, "src", src.count, "dst", dst.count)?;
                    let n = src.count;
                    (Some(src), Some(dst), n)
                }
            }
            Allgatherv | Gatherv => {
                let has_dst = coll == Allgatherv || is_root;
                let dst = if has_dst { Some(ck.info_v("dst", &args.dst, es)?) } else { None };
                let src = if in_place && has_dst { None } else { Some(need_src(())?) };
                if let (Some(s), Some(d)) = (&src, &dst) {
                    let mine = d.block_len(rank, size);
                    if s.count != mine {
                        return Err(ck.err(format!("src.count {} differs from dst.counts[{rank}] = {mine}", s.count)));
                    }
                }
                let n = dst.as_ref().map_or(0, |d| d.count);
                (src, dst, n)
            }
            Scatterv => {
                let src = if is_root { Some(ck.info_v("src", &args.src, es)?) } else { None };
                let dst = if in_place && is_root { None } else { Some(need_dst(())?) };
                if let (Some(s), Some(d)) = (&src, &dst) {
                    let mine = s.block_len(rank, size);
                    if d.count != mine {
                        return Err(ck.err(format!("dst.count {} differs from src.counts[{rank}] = {mine}", d.count)));
                    }
                }
                let n = src.as_ref().map_or(0, |s| s.count);
                (src, dst, n)
            }
            Alltoallv => {
                let dst = ck.info_v("dst", &args.dst, es)?;
                let src = if in_place { None } else { Some(ck.info_v("src", &args.src, es)?) };
                let n = dst.count;
                (src, Some(dst), n)
            }
            ReduceScatterv => {
                let dst = ck.info_counts(&args.dst, es, in_place, rank)?;
                let total = dst.v.as_ref().map_or(0, |v| v.counts.iter().sum());
                let src = if in_place { None } else { Some(need_src(())?) };
                if let Some(s) = &src {
                    if s.count != total {
                        return Err(
                            ck.err(format!("src.count {} differs from the sum of dst.counts, {total}", s.count))
                        );
                    }
                }
                (src, Some(dst), total)
            }
        };

        let dtype = dst.as_ref().or(src.as_ref()).map_or(DataType::Uint8, |b| b.dtype);
        if let (Some(s), Some(d)) = (&src, &dst) {
            if s.dtype != d.dtype {
                return Err(ck.err(format!("src datatype {} differs from dst datatype {}", s.dtype, d.dtype)));
            }
            if s.mem.mem_type() != d.mem.mem_type() {
                return Err(Error::not_supported(format!(
                    "{coll}: src is {} memory but dst is {}: mixed memory types are not supported yet",
                    s.mem.mem_type(),
                    d.mem.mem_type()
                )));
            }
            if s.mem.overlaps(&d.mem) {
                return Err(ck.err("src and dst overlap but the in-place flag is not set"));
            }
        }
        if reduction {
            op.check_dtype(dtype).map_err(|e| e.prefixed(coll))?;
        }
        let mem_type = selection_mem_type(coll, is_root, src.as_ref(), dst.as_ref());
        let msgsize = msgsize(coll, is_root, size, count, src.as_ref(), dst.as_ref());
        Ok(CollInit {
            coll,
            rank,
            size,
            root,
            op,
            dtype,
            in_place,
            persistent: args.flags.contains(CollFlags::PERSISTENT),
            timeout,
            mem_type,
            msgsize,
            count,
            src,
            dst,
            active_set: args.active_set,
            tag: args.tag,
            cb: args.cb.clone(),
        })
    }

    /// True when no rank moves any data (UCC's zero-size short-cut applies).
    pub fn is_zero_size(&self) -> bool {
        use CollType::*;
        matches!(self.coll, Allreduce | Allgather | Alltoall | Bcast | Gather | Reduce | Scatter) && self.count == 0
    }

    /// Size in bytes of one element as the algorithms move it.
    pub fn elem_size(&self) -> usize {
        self.dst.as_ref().or(self.src.as_ref()).map_or(1, |b| b.elem_size)
    }
}

fn same_count(ck: &Checker<'_>, a: &str, na: usize, b: &str, nb: usize) -> Result<()> {
    if na != nb {
        return Err(ck.err(format!("{a}.count {na} differs from {b}.count {nb}")));
    }
    Ok(())
}

fn total_is_p_times(ck: &Checker<'_>, total_side: &str, total: usize, block_side: &str, block: usize) -> Result<()> {
    if block.checked_mul(ck.size) != Some(total) {
        return Err(
            ck.err(format!("{total_side}.count {total} is not team size {} × {block_side}.count {block}", ck.size))
        );
    }
    Ok(())
}

fn divisible(ck: &Checker<'_>, side: &str, total: usize) -> Result<usize> {
    if !total.is_multiple_of(ck.size.max(1)) {
        return Err(ck.err(format!("{side}.count {total} is not divisible by team size {}", ck.size)));
    }
    Ok(total)
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

/// UCC's `ucc_coll_args_mem_type`.
fn selection_mem_type(coll: CollType, is_root: bool, src: Option<&Buf>, dst: Option<&Buf>) -> MemType {
    use CollType::*;
    let mt = |b: Option<&Buf>| b.map(|b| b.mem.mem_type());
    let pick = match coll {
        Barrier | Fanin | Fanout => None,
        Bcast => mt(src),
        Reduce | Gather | Gatherv => {
            if is_root {
                mt(dst).or(mt(src))
            } else {
                mt(src)
            }
        }
        Scatter | Scatterv => {
            if is_root {
                mt(src).or(mt(dst))
            } else {
                mt(dst)
            }
        }
        _ => mt(dst).or(mt(src)),
    };
    pick.unwrap_or(MemType::Host)
}

/// UCC's `ucc_coll_args_msgsize` (asymmetric v-variants count as 0).
fn msgsize(coll: CollType, is_root: bool, size: usize, total: usize, src: Option<&Buf>, dst: Option<&Buf>) -> u64 {
    use CollType::*;
    let bytes = |b: Option<&Buf>| b.map_or(0, |b| (b.count * b.elem_size) as u64);
    let n = size as u64;
    match coll {
        Barrier | Fanin | Fanout | Alltoallv | Gatherv | Scatterv => 0,
        Bcast => bytes(src),
        Allreduce | Alltoall | Allgather | ReduceScatter => bytes(dst),
        Allgatherv | ReduceScatterv => dst.map_or(0, |b| (total * b.elem_size) as u64),
        Reduce => {
            if is_root {
                bytes(dst)
            } else {
                bytes(src)
            }
        }
        Gather => {
            if is_root {
                bytes(dst)
            } else {
                bytes(src) * n
            }
        }
        Scatter => {
            if is_root {
                bytes(src)
            } else {
                bytes(dst) * n
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_cover_the_total() {
        for total in [0usize, 1, 7, 16, 101] {
            for size in 1..9 {
                let mut at = 0;
                for r in 0..size {
                    assert_eq!(block_offset(total, size, r), at);
                    at += block_count(total, size, r);
                }
                assert_eq!(at, total);
            }
        }
        assert_eq!(block_count(10, 4, 0), 3);
        assert_eq!(block_count(10, 4, 3), 2);
    }
}
