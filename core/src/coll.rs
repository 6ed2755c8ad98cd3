//! [`Coll`]: the safe, typed way to describe a collective over slices.
//!
//! ```no_run
//! # use ferrocoll_core::{Coll, ReduceOp, Team, Result};
//! # fn demo(team: &Team) -> Result<()> {
//! let src = vec![1.0f32; 1024];
//! let mut dst = vec![0.0f32; 1024];
//! Coll::allreduce(&src, &mut dst, ReduceOp::Sum).run(team)?;
//! # Ok(()) }
//! ```
//!
//! A [`Request`] made from a `Coll` borrows its slices, so they cannot be
//! touched or freed while the collective may use them.

use std::marker::PhantomData;
use std::time::Duration;

use crate::args::{ActiveSet, BufferInfo, BufferInfoV, CollArgs, CollBuffer, CollFlags, CompletionCallback};
use crate::element::Element;
use crate::error::{Error, Result};
use crate::object::{Request, Team};
use crate::types::{CollType, DataType, MemType, ReduceOp};
use sealed::CountSlice;

/// Integer types accepted for v-variant counts and displacements: `u32`
/// and `u64`, the two widths the flags can say (sealed: the library reads
/// the arrays in that width).
pub trait CountInt: sealed::Counts + Copy + Send + Sync + 'static {
    /// Whether the 64-bit flag applies.
    const WIDE: bool;
    /// As usize (for length checks).
    fn to_usize(self) -> Option<usize>;
}

mod sealed {
    /// A counts or displacements slice of either width, borrowed as given.
    #[derive(Clone, Copy)]
    pub enum CountSlice<'a> {
        Narrow(&'a [u32]),
        Wide(&'a [u64]),
    }

    /// Implemented for `u32` and `u64` only.
    pub trait Counts: Sized {
        /// The slice, by width.
        fn slice(s: &[Self]) -> CountSlice<'_>;
    }
    impl Counts for u32 {
        fn slice(s: &[u32]) -> CountSlice<'_> {
            CountSlice::Narrow(s)
        }
    }
    impl Counts for u64 {
        fn slice(s: &[u64]) -> CountSlice<'_> {
            CountSlice::Wide(s)
        }
    }
}

impl CountInt for u32 {
    const WIDE: bool = false;
    fn to_usize(self) -> Option<usize> {
        usize::try_from(self).ok()
    }
}

impl CountInt for u64 {
    const WIDE: bool = true;
    fn to_usize(self) -> Option<usize> {
        usize::try_from(self).ok()
    }
}

impl CountSlice<'_> {
    fn len(self) -> usize {
        match self {
            CountSlice::Narrow(s) => s.len(),
            CountSlice::Wide(s) => s.len(),
        }
    }

    /// Element `i` as usize (`None` when it does not fit; `i` in range).
    fn get(self, i: usize) -> Option<usize> {
        match self {
            CountSlice::Narrow(s) => s.get(i).and_then(|&v| v.to_usize()),
            CountSlice::Wide(s) => s.get(i).and_then(|&v| v.to_usize()),
        }
    }
}

/// A typed collective description, borrowing its buffers for `'a`.
pub struct Coll<'a> {
    args: CollArgs,
    /// Whether the element type is a (value, index) pair, when a typed buffer was given.
    pairs: Option<bool>,
    /// The v-variant sides (at most two), checked against the team size at init.
    v_checks: [Option<VCheck<'a>>; 2],
    _buffers: PhantomData<&'a mut [u8]>,
}

/// A v-variant side as given: checked at init, without copying the arrays.
#[derive(Clone, Copy)]
struct VCheck<'a> {
    side: &'static str,
    counts: CountSlice<'a>,
    /// `None`: blocks follow each other from offset 0 (reduce_scatterv).
    displs: Option<CountSlice<'a>>,
    /// The buffer's length in elements.
    len: usize,
    /// reduce_scatterv's dst: holds only this rank's block, at offset 0.
    own_block_only: bool,
}

fn info<T: Element>(ptr: *const T, len: usize, loc_as_value: bool) -> CollBuffer {
    // Pairs used outside a loc reduction travel as bytes.
    let (count, datatype) =
        if T::LOC_PAIR && !loc_as_value { (len * std::mem::size_of::<T>(), DataType::Uint8) } else { (len, T::DTYPE) };
    CollBuffer::Info(BufferInfo {
        buffer: ptr.cast_mut().cast(),
        count: count as u64,
        datatype,
        mem_type: MemType::Host,
    })
}

impl<'a> Coll<'a> {
    fn new(coll: CollType) -> Self {
        Coll { args: CollArgs::new(coll), pairs: None, v_checks: [None; 2], _buffers: PhantomData }
    }

    /// Record the element type: (value, index) pairs say so in the flags.
    fn elements<T: Element>(&mut self) {
        self.pairs = Some(T::LOC_PAIR);
        if T::LOC_PAIR {
            self.args.flags |= CollFlags::LOC_PAIRS;
        }
    }

    fn src<T: Element>(mut self, s: &'a [T]) -> Self {
        self.elements::<T>();
        self.args.src = info(s.as_ptr(), s.len(), self.args.coll_type.is_reduction());
        self
    }

    fn dst<T: Element>(mut self, d: &'a mut [T]) -> Self {
        self.elements::<T>();
        self.args.dst = info(d.as_mut_ptr(), d.len(), self.args.coll_type.is_reduction());
        self
    }

    fn in_place(mut self) -> Self {
        self.args.flags |= CollFlags::IN_PLACE;
        self
    }

    fn root(mut self, root: usize) -> Self {
        self.args.root = root as u64;
        self
    }

    fn op(mut self, op: ReduceOp) -> Self {
        self.args.op = op;
        self
    }

    fn v_side<T: Element, C: CountInt>(
        &mut self,
        side: &'static str,
        buf: *const T,
        len: usize,
        counts: &'a [C],
        displs: Option<&'a [C]>,
    ) -> CollBuffer {
        self.elements::<T>();
        if C::WIDE {
            self.args.flags |= CollFlags::COUNT_64BIT | CollFlags::DISPLACEMENTS_64BIT;
        }
        let check = VCheck { side, counts: C::slice(counts), displs: displs.map(C::slice), len, own_block_only: false };
        // Collectives have at most two sides: the second slot is always free here.
        let free = if self.v_checks[0].is_none() { 0 } else { 1 };
        self.v_checks[free] = Some(check);
        CollBuffer::InfoV(BufferInfoV {
            buffer: buf.cast_mut().cast(),
            counts: counts.as_ptr().cast(),
            displacements: displs.map_or(std::ptr::null(), |d| d.as_ptr().cast()),
            datatype: T::DTYPE,
            mem_type: MemType::Host,
        })
    }

    /// `dst = op(src of every rank)`.
    pub fn allreduce<T: Element>(src: &'a [T], dst: &'a mut [T], op: ReduceOp) -> Self {
        Coll::new(CollType::Allreduce).op(op).src(src).dst(dst)
    }

    /// Allreduce with `buf` as input and output.
    pub fn allreduce_in_place<T: Element>(buf: &'a mut [T], op: ReduceOp) -> Self {
        Coll::new(CollType::Allreduce).op(op).dst(buf).in_place()
    }

    /// The root gets `op(src of every rank)` in `dst` (`None` on the other ranks).
    pub fn reduce<T: Element>(src: &'a [T], dst: Option<&'a mut [T]>, op: ReduceOp, root: usize) -> Self {
        let c = Coll::new(CollType::Reduce).op(op).root(root).src(src);
        match dst {
            Some(d) => c.dst(d),
            None => c,
        }
    }

    /// Reduce at the root with `buf` as its input and output (other ranks call [`Coll::reduce`] with `None`).
    pub fn reduce_in_place_at_root<T: Element>(buf: &'a mut [T], op: ReduceOp, root: usize) -> Self {
        Coll::new(CollType::Reduce).op(op).root(root).dst(buf).in_place()
    }

    /// The root's `buf` is copied to every rank's `buf`.
    pub fn bcast<T: Element>(buf: &'a mut [T], root: usize) -> Self {
        let mut c = Coll::new(CollType::Bcast).root(root);
        c.args.src = info(buf.as_mut_ptr(), buf.len(), false);
        c
    }

    /// Every rank's `src` (N elements) lands in block r of every `dst` (P·N).
    pub fn allgather<T: Element>(src: &'a [T], dst: &'a mut [T]) -> Self {
        Coll::new(CollType::Allgather).src(src).dst(dst)
    }

    /// Allgather where each rank's block is already in place in `dst`.
    pub fn allgather_in_place<T: Element>(dst: &'a mut [T]) -> Self {
        Coll::new(CollType::Allgather).dst(dst).in_place()
    }

    /// Allgather with `counts[r]` elements from rank r placed at `displs[r]` of `dst`.
    pub fn allgatherv<T: Element, C: CountInt>(
        src: &'a [T],
        dst: &'a mut [T],
        counts: &'a [C],
        displs: &'a [C],
    ) -> Self {
        let mut c = Coll::new(CollType::Allgatherv).src(src);
        c.args.dst = c.v_side("dst", dst.as_mut_ptr(), dst.len(), counts, Some(displs));
        c
    }

    /// Allgatherv where each rank's block is already at `displs[rank]` of `dst`.
    pub fn allgatherv_in_place<T: Element, C: CountInt>(dst: &'a mut [T], counts: &'a [C], displs: &'a [C]) -> Self {
        let mut c = Coll::new(CollType::Allgatherv).in_place();
        c.args.dst = c.v_side("dst", dst.as_mut_ptr(), dst.len(), counts, Some(displs));
        c
    }

    /// Block j of rank i's `src` goes to block i of rank j's `dst` (both P·N).
    pub fn alltoall<T: Element>(src: &'a [T], dst: &'a mut [T]) -> Self {
        Coll::new(CollType::Alltoall).src(src).dst(dst)
    }

    /// Alltoall with `buf` as input and output.
    pub fn alltoall_in_place<T: Element>(buf: &'a mut [T]) -> Self {
        Coll::new(CollType::Alltoall).dst(buf).in_place()
    }

    /// Alltoall with counts and displacements per peer.
    #[allow(clippy::too_many_arguments)]
    pub fn alltoallv<T: Element, C: CountInt>(
        src: &'a [T],
        send_counts: &'a [C],
        send_displs: &'a [C],
        dst: &'a mut [T],
        recv_counts: &'a [C],
        recv_displs: &'a [C],
    ) -> Self {
        let mut c = Coll::new(CollType::Alltoallv);
        c.args.src = c.v_side("src", src.as_ptr(), src.len(), send_counts, Some(send_displs));
        c.args.dst = c.v_side("dst", dst.as_mut_ptr(), dst.len(), recv_counts, Some(recv_displs));
        c
    }

    /// Alltoallv with `buf` as input and output: block j (at `displs[j]`,
    /// `counts[j]` elements) goes to rank j, whose block for this rank comes
    /// back in its place. Counts must be symmetric (rank i's `counts[j]` equals
    /// rank j's `counts[i]`).
    pub fn alltoallv_in_place<T: Element, C: CountInt>(buf: &'a mut [T], counts: &'a [C], displs: &'a [C]) -> Self {
        let mut c = Coll::new(CollType::Alltoallv).in_place();
        c.args.dst = c.v_side("dst", buf.as_mut_ptr(), buf.len(), counts, Some(displs));
        c
    }

    /// Rank r gets block r (N elements) of `op(src of every rank)` (P·N) in `dst`.
    pub fn reduce_scatter<T: Element>(src: &'a [T], dst: &'a mut [T], op: ReduceOp) -> Self {
        Coll::new(CollType::ReduceScatter).op(op).src(src).dst(dst)
    }

    /// Reduce-scatter in place: `buf` holds the whole input; rank r's block of
    /// the result lands at its own offset in `buf` (UCC's semantics).
    pub fn reduce_scatter_in_place<T: Element>(buf: &'a mut [T], op: ReduceOp) -> Self {
        Coll::new(CollType::ReduceScatter).op(op).dst(buf).in_place()
    }

    /// Rank r gets `counts[r]` elements of the reduction (of Σcounts elements),
    /// at the start of `dst`.
    pub fn reduce_scatterv<T: Element, C: CountInt>(
        src: &'a [T],
        dst: &'a mut [T],
        counts: &'a [C],
        op: ReduceOp,
    ) -> Self {
        let mut c = Coll::new(CollType::ReduceScatterv).op(op).src(src);
        c.args.dst = c.v_side("dst", dst.as_mut_ptr(), dst.len(), counts, None);
        if let Some(v) = &mut c.v_checks[0] {
            v.own_block_only = true;
        }
        c
    }

    /// Reduce-scatterv in place: `buf` holds the whole input (Σcounts); rank
    /// r's result lands at offset Σ_{i<r} counts\[i\].
    pub fn reduce_scatterv_in_place<T: Element, C: CountInt>(buf: &'a mut [T], counts: &'a [C], op: ReduceOp) -> Self {
        let mut c = Coll::new(CollType::ReduceScatterv).op(op).in_place();
        c.args.dst = c.v_side("dst", buf.as_mut_ptr(), buf.len(), counts, None);
        c
    }

    /// The root gets every rank's `src` (N) as block r of `dst` (P·N; `None` elsewhere).
    pub fn gather<T: Element>(src: &'a [T], dst: Option<&'a mut [T]>, root: usize) -> Self {
        let c = Coll::new(CollType::Gather).root(root).src(src);
        match dst {
            Some(d) => c.dst(d),
            None => c,
        }
    }

    /// Gather at the root whose own block is already in place in `dst`.
    pub fn gather_in_place_at_root<T: Element>(dst: &'a mut [T], root: usize) -> Self {
        Coll::new(CollType::Gather).root(root).dst(dst).in_place()
    }

    /// Gather with per-rank counts; the root passes `Some((dst, counts, displs))`.
    pub fn gatherv<T: Element, C: CountInt>(
        src: &'a [T],
        dst: Option<(&'a mut [T], &'a [C], &'a [C])>,
        root: usize,
    ) -> Self {
        let mut c = Coll::new(CollType::Gatherv).root(root).src(src);
        if let Some((d, counts, displs)) = dst {
            c.args.dst = c.v_side("dst", d.as_mut_ptr(), d.len(), counts, Some(displs));
        }
        c
    }

    /// Block r of the root's `src` (P·N; `None` elsewhere) lands in rank r's `dst` (N).
    pub fn scatter<T: Element>(src: Option<&'a [T]>, dst: &'a mut [T], root: usize) -> Self {
        let c = Coll::new(CollType::Scatter).root(root).dst(dst);
        match src {
            Some(s) => c.src(s),
            None => c,
        }
    }

    /// Scatter at the root, whose own block stays in `src`.
    pub fn scatter_in_place_at_root<T: Element>(src: &'a [T], root: usize) -> Self {
        Coll::new(CollType::Scatter).root(root).src(src).in_place()
    }

    /// Scatter with per-rank counts; the root passes `Some((src, counts, displs))`.
    pub fn scatterv<T: Element, C: CountInt>(
        src: Option<(&'a [T], &'a [C], &'a [C])>,
        dst: &'a mut [T],
        root: usize,
    ) -> Self {
        let mut c = Coll::new(CollType::Scatterv).root(root).dst(dst);
        if let Some((s, counts, displs)) = src {
            c.args.src = c.v_side("src", s.as_ptr(), s.len(), counts, Some(displs));
        }
        c
    }

    /// No rank leaves before all have entered.
    pub fn barrier() -> Self {
        Coll::new(CollType::Barrier)
    }

    /// The root leaves after all ranks have entered.
    pub fn fanin(root: usize) -> Self {
        Coll::new(CollType::Fanin).root(root)
    }

    /// Ranks leave after the root has entered.
    pub fn fanout(root: usize) -> Self {
        Coll::new(CollType::Fanout).root(root)
    }

    /// Make the request persistent: it can be posted again after it completes.
    pub fn persistent(mut self) -> Self {
        self.args.flags |= CollFlags::PERSISTENT;
        self
    }

    /// Fail with `TimedOut` if the collective is not done `t` after each post.
    pub fn timeout(mut self, t: Duration) -> Self {
        self.args.flags |= CollFlags::TIMEOUT;
        self.args.timeout = t.as_secs_f64();
        self
    }

    /// Restrict a bcast to a strided subset of ranks, matched by `tag`.
    pub fn active_set(mut self, set: ActiveSet, tag: u16) -> Self {
        self.args.active_set = Some(set);
        self.args.tag = Some(tag);
        self
    }

    /// Call `cb` with the final status when the collective completes.
    pub fn on_complete(mut self, cb: CompletionCallback) -> Self {
        self.args.cb = Some(cb);
        self
    }

    /// The raw arguments this describes.
    pub fn args(&self) -> &CollArgs {
        &self.args
    }

    fn check(&self, team: &Team) -> Result<()> {
        let coll = self.args.coll_type;
        // The element size of a reduction depends on the op: pairs for maxloc/minloc.
        if let Some(pairs) = self.pairs.filter(|_| coll.is_reduction()) {
            if pairs != self.args.op.is_loc() {
                return Err(Error::invalid_param(if pairs {
                    format!("{coll}: ValueIndex elements need the maxloc or minloc operation, not {}", self.args.op)
                } else {
                    format!("{coll}: {} works on (value, index) pairs: use ValueIndex<T> elements", self.args.op)
                }));
            }
        }
        for v in self.v_checks.iter().flatten() {
            let displs = v.displs.map_or(team.size(), CountSlice::len);
            if v.counts.len() != team.size() || displs != team.size() {
                return Err(Error::invalid_param(format!(
                    "{coll}: {side} has {} counts and {displs} displacements for a team of {}",
                    v.counts.len(),
                    team.size(),
                    side = v.side
                )));
            }
            if v.own_block_only {
                let mine = v.counts.get(team.rank());
                if mine.is_none_or(|m| m > v.len) {
                    return Err(Error::invalid_param(format!(
                        "{coll}: {} has {} elements but this rank's count is {mine:?}",
                        v.side, v.len
                    )));
                }
                continue;
            }
            // Implied displacements (blocks back to back) run on from 0.
            let mut at = Some(0usize);
            for r in 0..team.size() {
                let c = v.counts.get(r);
                let d = match v.displs {
                    Some(ds) => ds.get(r),
                    None => at,
                };
                at = at.zip(c).and_then(|(a, c)| a.checked_add(c));
                let end = c.zip(d).and_then(|(c, d)| c.checked_add(d).map(|e| (c, e)));
                match end {
                    Some((0, _)) => {}
                    Some((_, e)) if e <= v.len => {}
                    _ => {
                        return Err(Error::invalid_param(format!(
                            "{coll}: {} block {r} (count {:?}, displacement {:?}) reaches past its {} elements",
                            v.side, c, d, v.len
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// Initialise the request on `team`.
    pub fn init(self, team: &Team) -> Result<Request<'a>> {
        self.check(team)?;
        // SAFETY: every pointer in args comes from a slice borrowed for 'a,
        // and the returned Request<'a> keeps that borrow; counts/displacement
        // slices were checked to have team-size length with matching width
        // flags; extents were checked against the slices above (the
        // non-v counts come from the slice lengths).
        unsafe { team.init_request(&self.args) }
    }

    /// Initialise and post.
    pub fn init_and_post(self, team: &Team) -> Result<Request<'a>> {
        let mut r = self.init(team)?;
        r.post()?;
        Ok(r)
    }

    /// Initialise, post and wait.
    pub fn run(self, team: &Team) -> Result<()> {
        self.init(team)?.run()
    }
}
