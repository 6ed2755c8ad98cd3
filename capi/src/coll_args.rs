//! `ucc_coll_args_t` → ferrocoll's [`CollArgs`].
//!
//! Read as UCC reads it: `coll_type` always; `op` for reductions; `root`
//! for rooted collectives; the masked fields when their bit is set; and
//! of `src`/`dst` only the sides this collective uses on this rank (a
//! non-root's gather destination, bcast's dst, an in-place source are never
//! read: callers leave them uninitialised).
//!
//! A v-buffer whose `buffer` is NULL carries addresses as displacements
//! (PyTorch passes lists of tensors so, with 1-byte elements): it is
//! rebased on its lowest non-empty block, and the displacements of every
//! v-side are rewritten as 64-bit offsets from their buffer. Device blocks
//! with gaps between them are staged instead ([`crate::staging`]): the
//! side gets packed displacements and a [`Plan`] for its scratch.

use std::ffi::c_void;

use ferrocoll::{
    ActiveSet, BufferInfo, BufferInfoV, CollArgs, CollBuffer, CollFlags, CollType, DataType, Error, MemType, Result,
};

use crate::abi::{self, *};
use crate::staging::{Block, Plan};
use crate::types;

/// The user's completion callback.
#[derive(Clone, Copy, Debug)]
pub(crate) struct UserCb {
    /// The function.
    pub f: unsafe extern "C" fn(data: *mut c_void, status: UccStatus),
    /// Its argument.
    pub data: *mut c_void,
}

// SAFETY: UCC calls completion callbacks from whichever thread progresses
// the collective; `data` is the caller's and is only passed back to it.
unsafe impl Send for UserCb {}
// SAFETY: as above; the struct is only read.
unsafe impl Sync for UserCb {}

/// The translated arguments and what they point into.
pub(crate) struct Translated {
    /// For `Team::collective_init` (the completion callback is the request's to add).
    pub args: CollArgs,
    /// The caller's callback, if the mask has one.
    pub user_cb: Option<UserCb>,
    /// Displacement arrays made here (rebased or widened), which `args` points to.
    pub keep: Vec<Box<[u64]>>,
    /// Sides to stage: their buffer in `args` is NULL until the caller
    /// points it at the scratch made for the plan.
    pub stage: Vec<Plan>,
}

/// Read one field of the caller's struct.
macro_rules! field {
    ($p:expr, $($f:tt)+) => {
        // SAFETY: the caller's struct, read field by field, each only when UCC
        // says it is set (every use below is guarded so).
        unsafe { (&raw const (*$p).$($f)+).read_unaligned() }
    };
}

/// Which sides this rank's collective reads: (src, dst).
pub(crate) fn sides(coll: CollType, in_place: bool, is_root: bool) -> (bool, bool) {
    use CollType::*;
    match coll {
        Barrier | Fanin | Fanout => (false, false),
        Bcast => (true, false),
        Allreduce | Allgather | Allgatherv | Alltoall | Alltoallv | ReduceScatter | ReduceScatterv => (!in_place, true),
        Reduce | Gather | Gatherv => (!(in_place && is_root), is_root),
        Scatter | Scatterv => (is_root, !(in_place && is_root)),
    }
}

/// Whether side `src` (else dst) of `coll` is a v-buffer (`info_v`).
pub(crate) fn is_v(coll: CollType, src: bool) -> bool {
    use CollType::*;
    match coll {
        Alltoallv => true,
        Allgatherv | Gatherv | ReduceScatterv => !src,
        Scatterv => src,
        _ => false,
    }
}

/// A side as read from C, before any rebasing.
enum Side {
    Info(BufferInfo),
    V { info: BufferInfoV, dtype: DataType },
}

/// Read `ucc_coll_args_t` at `p` for team rank `rank` of `size`.
///
/// # Safety
/// `p` points to a `ucc_coll_args_t` whose fields are set as UCC requires
/// for this collective; its count and displacement arrays have `size`
/// entries of the width the flags say.
pub(crate) unsafe fn translate(
    p: *const abi::CollArgs,
    rank: usize,
    size: usize,
    resolve: &dyn Fn(*const u8) -> MemType,
) -> Result<Translated> {
    let mask: u64 = field!(p, mask);
    let coll = types::coll_type(field!(p, coll_type), "coll_args.coll_type")?;
    let mut args = CollArgs::new(coll);
    let flags: u64 = if mask & ARGS_FIELD_FLAGS != 0 { field!(p, flags) } else { 0 };
    let unknown = flags & !(ARGS_FLAGS_KNOWN | ARGS_FLAGS_MEMH | ARGS_HINTS);
    if unknown != 0 {
        return Err(Error::invalid_param(format!("coll_args.flags {flags:#x} has unknown bits {unknown:#x}")));
    }
    if flags & ARGS_HINTS != 0 {
        ferrocoll::core::log_debug!("coll_args.flags hints {:#x} accepted and ignored", flags & ARGS_HINTS);
    }
    args.flags = CollFlags(flags & ARGS_FLAGS_KNOWN);
    if coll.is_reduction() {
        args.op = types::reduce_op(field!(p, op), "coll_args.op")?;
    }
    if coll.is_rooted() {
        args.root = field!(p, root);
    }
    if mask & ARGS_FIELD_TAG != 0 {
        args.tag = Some(field!(p, tag));
    }
    if flags & CollFlags::TIMEOUT.0 != 0 {
        args.timeout = field!(p, timeout);
    }
    if mask & ARGS_FIELD_ACTIVE_SET != 0 {
        let s: abi::ActiveSet = field!(p, active_set);
        args.active_set = Some(ActiveSet { start: s.start, stride: s.stride, size: s.size });
    }
    let user_cb = if mask & ARGS_FIELD_CB != 0 {
        let cb: CollCallback = field!(p, cb);
        let f = cb.cb.ok_or_else(|| Error::invalid_param("coll_args.cb.cb is NULL but the mask has CB"))?;
        Some(UserCb { f, data: cb.data })
    } else {
        None
    };
    // global_work_buffer and the memory handles serve one-sided algorithms,
    // which ferrocoll does not have: a collective on mapped buffers runs
    // as the two-sided one (see `mem_map.rs`), and neither is read.
    let in_place = args.flags.contains(CollFlags::IN_PLACE);
    let is_root = args.root == rank as u64;
    let (read_src, read_dst) = sides(coll, in_place, is_root);
    let read = |src: bool| -> Result<Option<Side>> {
        let name = if src { "src" } else { "dst" };
        if !(if src { read_src } else { read_dst }) {
            return Ok(None);
        }
        if is_v(coll, src) {
            let v: abi::BufferInfoV = if src { field!(p, src.info_v) } else { field!(p, dst.info_v) };
            let dtype = types::datatype(v.datatype, format_args!("coll_args.{name}.info_v.datatype"))?;
            let mem_type = types::mem_type(v.mem_type, format_args!("coll_args.{name}.info_v.mem_type"))?;
            let info = BufferInfoV {
                buffer: v.buffer.cast(),
                counts: v.counts.cast_const().cast(),
                displacements: v.displacements.cast_const().cast(),
                datatype: dtype,
                mem_type,
            };
            Ok(Some(Side::V { info, dtype }))
        } else {
            let i: abi::BufferInfo = if src { field!(p, src.info) } else { field!(p, dst.info) };
            Ok(Some(Side::Info(BufferInfo {
                buffer: i.buffer.cast(),
                count: i.count,
                datatype: types::datatype(i.datatype, format_args!("coll_args.{name}.info.datatype"))?,
                mem_type: types::mem_type(i.mem_type, format_args!("coll_args.{name}.info.mem_type"))?,
            })))
        }
    };
    let (src, dst) = (read(true)?, read(false)?);
    let mut keep = Vec::new();
    let mut stage = Vec::new();
    let null_v = [&src, &dst].iter().any(|s| matches!(s, Some(Side::V { info, .. }) if info.buffer.is_null()));
    let displs_wide = args.flags.contains(CollFlags::DISPLACEMENTS_64BIT);
    let counts_wide = args.flags.contains(CollFlags::COUNT_64BIT);
    let how = Rebase { size, counts_wide, displs_wide, in_place, resolve };
    let mut finish = |side: Option<Side>, name: &str| -> Result<CollBuffer> {
        Ok(match side {
            None => CollBuffer::None,
            Some(Side::Info(i)) => CollBuffer::Info(i),
            // reduce_scatterv's dst has no displacements to rewrite.
            Some(Side::V { info, .. }) if !null_v || (coll == CollType::ReduceScatterv && name == "dst") => {
                CollBuffer::InfoV(info)
            }
            Some(Side::V { mut info, dtype }) => {
                // SAFETY: the caller's arrays of `size` entries (this function's contract).
                let (base, displs, plan) = unsafe { rebase(&info, dtype, name, &how) }?;
                info.buffer = base;
                info.displacements = displs.as_ptr().cast();
                keep.push(displs);
                if let Some(plan) = plan {
                    info.mem_type = plan.mem;
                    stage.push(plan);
                }
                CollBuffer::InfoV(info)
            }
        })
    };
    args.src = finish(src, "src")?;
    args.dst = finish(dst, "dst")?;
    if null_v {
        args.flags |= CollFlags::DISPLACEMENTS_64BIT;
    }
    Ok(Translated { args, user_cb, keep, stage })
}

/// Read entry `i` of a count or displacement array.
///
/// # Safety
/// `a` has more than `i` entries of the width `wide` says.
unsafe fn entry(a: *const u8, i: usize, wide: bool) -> u64 {
    if wide {
        // SAFETY: forwarded; unaligned because C arrays need not be aligned for us.
        unsafe { a.cast::<u64>().add(i).read_unaligned() }
    } else {
        // SAFETY: as above.
        u64::from(unsafe { a.cast::<u32>().add(i).read_unaligned() })
    }
}

/// What rebasing a v-side needs besides the side.
struct Rebase<'a> {
    /// Team size: entries in each array.
    size: usize,
    /// The arrays' widths (the 64-bit flags).
    counts_wide: bool,
    displs_wide: bool,
    /// The in-place flag.
    in_place: bool,
    /// Memory type of an address (for `UCC_MEMORY_TYPE_UNKNOWN`).
    resolve: &'a dyn Fn(*const u8) -> MemType,
}

/// A rebased v-side: its buffer, 64-bit displacements relative to it, and
/// what to stage (then the buffer is NULL until the scratch is made).
type Rebased = (*mut u8, Box<[u64]>, Option<Plan>);

/// A v-side's buffer and 64-bit displacements relative to it: unchanged
/// (widened) when it has a buffer; when its buffer is NULL, based on the
/// lowest address of a non-empty block, or, for device blocks with gaps
/// between them, packed for staging.
///
/// # Safety
/// The arrays have `size` entries of the widths given.
unsafe fn rebase(info: &BufferInfoV, dtype: DataType, name: &str, how: &Rebase<'_>) -> Result<Rebased> {
    if info.counts.is_null() || info.displacements.is_null() {
        return Err(Error::invalid_param(format!("coll_args.{name}.info_v: counts or displacements is NULL")));
    }
    let (size, resolve, in_place) = (how.size, how.resolve, how.in_place);
    // SAFETY: `size` entries each (contract).
    let counts: Vec<u64> = (0..size).map(|i| unsafe { entry(info.counts, i, how.counts_wide) }).collect();
    // SAFETY: as above.
    let displs: Vec<u64> = (0..size).map(|i| unsafe { entry(info.displacements, i, how.displs_wide) }).collect();
    if !info.buffer.is_null() {
        return Ok((info.buffer, displs.into_boxed_slice(), None));
    }
    let es = dtype.size() as u64;
    let overflow = |i: usize| {
        Error::invalid_param(format!(
            "coll_args.{name}.info_v: block {i} (displacement {} + count {}) × {es} bytes overflows",
            displs[i], counts[i]
        ))
    };
    // Byte ranges of the non-empty blocks: with a NULL buffer the displacements are addresses.
    let mut lo = u64::MAX;
    let (mut hi, mut bytes) = (0u64, 0u64);
    for i in (0..size).filter(|&i| counts[i] > 0) {
        let start = displs[i].checked_mul(es).ok_or_else(|| overflow(i))?;
        let len = counts[i].checked_mul(es).ok_or_else(|| overflow(i))?;
        let end = start.checked_add(len).ok_or_else(|| overflow(i))?;
        lo = lo.min(start);
        hi = hi.max(end);
        bytes = bytes.saturating_add(len);
    }
    if lo == u64::MAX {
        // Every block is empty: nothing is read or written.
        return Ok((std::ptr::null_mut(), displs.into_boxed_slice(), None));
    }
    if lo % es != 0 {
        return Err(Error::invalid_param(format!(
            "coll_args.{name}.info_v: buffer is NULL and the lowest block address {lo:#x} is not a multiple of \
             the {es}-byte element"
        )));
    }
    let base = lo as usize as *mut u8;
    let mem = if info.mem_type == MemType::Unknown { resolve(base) } else { info.mem_type };
    if hi - lo > bytes && in_place {
        // An in-place input is copied whole: the span of scattered blocks
        // holds memory that is not the caller's to read.
        return Err(Error::not_supported(format!(
            "coll_args.{name}.info_v: blocks at scattered addresses (NULL buffer) in place; pass one buffer with \
             displacements"
        )));
    }
    if hi - lo > bytes && mem != MemType::Host {
        // Device buffers are staged whole by the TLs, gaps included: the
        // blocks are packed into scratch instead (their bytes cannot overflow:
        // each block's end was checked, and they sum to at most `bytes`).
        let mut packed = vec![0u64; size];
        let mut blocks = Vec::new();
        let mut off = 0u64;
        for i in (0..size).filter(|&i| counts[i] > 0) {
            let len = counts[i] * es;
            blocks.push(Block { addr: displs[i] * es, bytes: len, off });
            packed[i] = off / es;
            off += len;
        }
        let plan = Plan { src: name == "src", mem, blocks, bytes: off };
        return Ok((std::ptr::null_mut(), packed.into_boxed_slice(), Some(plan)));
    }
    let rebased = displs.iter().zip(&counts).map(|(&d, &c)| if c > 0 { d - lo / es } else { 0 }).collect();
    Ok((base, rebased, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(_: *const u8) -> MemType {
        MemType::Host
    }

    const HOW: Rebase<'static> =
        Rebase { size: 2, counts_wide: true, displs_wide: true, in_place: false, resolve: &host };

    #[test]
    fn sides_follow_roles() {
        use CollType::*;
        assert_eq!(sides(Bcast, false, true), (true, false));
        assert_eq!(sides(Reduce, false, false), (true, false));
        assert_eq!(sides(Reduce, true, true), (false, true));
        assert_eq!(sides(Gatherv, false, false), (true, false));
        assert_eq!(sides(Scatter, false, false), (false, true));
        assert_eq!(sides(Scatter, true, true), (true, false));
        assert_eq!(sides(Allreduce, true, false), (false, true));
        assert_eq!(sides(Barrier, false, true), (false, false));
        assert!(is_v(Alltoallv, true) && is_v(Gatherv, false) && !is_v(Gatherv, true) && is_v(Scatterv, true));
    }

    /// Arguments as a caller that fills only what the collective needs:
    /// every other byte is garbage, which must never be read.
    fn garbage() -> abi::CollArgs {
        // SAFETY: CollArgs is plain data (integers, pointers, a float); any
        // byte pattern is a value of it.
        unsafe { std::mem::transmute([0xa5u8; 184]) }
    }

    #[test]
    fn unmasked_fields_are_not_read() {
        let mut a = garbage();
        let mut x = [1.0f32; 4];
        a.mask = 0;
        a.coll_type = CollType::Bcast as u32;
        a.root = 1;
        a.src.info = abi::BufferInfo { buffer: x.as_mut_ptr().cast(), count: 4, datatype: 11 << 3, mem_type: 0 };
        // SAFETY: a bcast's fields are set; the rest is garbage that must not be read.
        let t = unsafe { translate(&a, 0, 2, &host) }.unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(t.args.dst, CollBuffer::None));
        assert_eq!((t.args.flags, t.args.tag, t.args.root), (CollFlags(0), None, 1));
        assert!(t.args.active_set.is_none() && t.user_cb.is_none());
        a.mask = ARGS_FIELD_FLAGS;
        // UCC's hints (what Open MPI and MPICH set on blocking collectives) are accepted.
        for hint in [ARGS_HINT_OPTIMIZE_OVERLAP_CPU, ARGS_HINT_OPTIMIZE_OVERLAP_GPU, ARGS_HINT_OPTIMIZE_LATENCY] {
            a.flags = hint;
            // SAFETY: as above.
            let t = unsafe { translate(&a, 0, 2, &host) }.unwrap_or_else(|e| panic!("hint {hint:#x}: {e}"));
            assert_eq!(t.args.flags, CollFlags(0), "a hint is not a ferrocoll flag");
        }
        a.flags = 1 << 20;
        // SAFETY: as above.
        let e = unsafe { translate(&a, 0, 2, &host) }.err().expect("unknown flags are refused");
        assert!(e.context().contains("unknown bits"), "{e}");
    }

    /// A bad datatype or memory type is named by the field it came from
    /// (the name is made only then: a good call formats nothing).
    #[test]
    fn a_bad_type_names_its_field() {
        let mut a = garbage();
        let (mut x, mut y) = ([1.0f32; 4], [0.0f32; 4]);
        a.mask = 0;
        a.coll_type = CollType::Allreduce as u32;
        a.op = 0;
        a.src.info = abi::BufferInfo { buffer: x.as_mut_ptr().cast(), count: 4, datatype: 11 << 3, mem_type: 0 };
        a.dst.info = abi::BufferInfo { buffer: y.as_mut_ptr().cast(), count: 4, datatype: 99 << 3, mem_type: 0 };
        // SAFETY: an allreduce's fields are set; the rest is garbage that must not be read.
        let e = unsafe { translate(&a, 0, 2, &host) }.err().expect("datatype 99 is refused");
        assert!(e.context().starts_with("coll_args.dst.info.datatype 0x318"), "{e}");
        a.dst.info.datatype = 11 << 3;
        a.src.info.mem_type = 77;
        // SAFETY: as above.
        let e = unsafe { translate(&a, 0, 2, &host) }.err().expect("memory type 77 is refused");
        assert!(e.context().starts_with("coll_args.src.info.mem_type 77"), "{e}");
    }

    #[test]
    fn null_v_buffers_are_rebased() {
        // Two 2-byte blocks 10 bytes apart, given as addresses (rank 1's first).
        let mut mem = [0u8; 16];
        let base = mem.as_mut_ptr() as u64;
        let counts = [2u64, 2];
        let addrs = [base + 10, base];
        let info = BufferInfoV {
            buffer: std::ptr::null_mut(),
            counts: counts.as_ptr().cast(),
            displacements: addrs.as_ptr().cast(),
            datatype: DataType::Uint8,
            mem_type: MemType::Host,
        };
        // SAFETY: two 64-bit entries each.
        let (b, d, plan) = unsafe { rebase(&info, DataType::Uint8, "src", &HOW) }.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((b as u64, &*d), (base, &[10u64, 0][..]));
        assert!(plan.is_none());
        // The same blocks of device memory are packed for staging (the gap is never touched).
        let cuda = BufferInfoV { mem_type: MemType::Cuda, ..info };
        // SAFETY: as above.
        let (b, d, plan) = unsafe { rebase(&cuda, DataType::Uint8, "dst", &HOW) }.unwrap_or_else(|e| panic!("{e}"));
        assert!(b.is_null());
        assert_eq!(&*d, &[0u64, 2][..], "packed in rank order");
        let want = Plan {
            src: false,
            mem: MemType::Cuda,
            blocks: vec![Block { addr: base + 10, bytes: 2, off: 0 }, Block { addr: base, bytes: 2, off: 2 }],
            bytes: 4,
        };
        assert_eq!(plan, Some(want));
        // In place, scattered blocks are refused: the gap would be read.
        let in_place = Rebase { in_place: true, ..HOW };
        // SAFETY: as above.
        assert!(unsafe { rebase(&info, DataType::Uint8, "dst", &in_place) }.is_err());
        // Addresses that overflow with the element size are an error, not a wrap.
        let huge = [u64::MAX / 2, 1];
        let bad = BufferInfoV { displacements: huge.as_ptr().cast(), datatype: DataType::Int32, ..info };
        // SAFETY: as above.
        let Err(e) = (unsafe { rebase(&bad, DataType::Int32, "dst", &HOW) }) else { panic!("overflow is refused") };
        assert!(e.context().contains("overflows"), "{e}");
        // Every block empty: no buffer at all.
        let zero = [0u64, 0];
        let empty = BufferInfoV { counts: zero.as_ptr().cast(), ..info };
        // SAFETY: as above.
        let (b, _, _) = unsafe { rebase(&empty, DataType::Uint8, "dst", &HOW) }.unwrap_or_else(|e| panic!("{e}"));
        assert!(b.is_null());
    }
}
