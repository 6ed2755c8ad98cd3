//! A team's shared segment: what its bytes mean (a header line, a control
//! line and a call board per rank, the ranks' data areas; laid out by
//! `layout.rs`). Team rank 0 creates it and every member maps it; rank 0
//! unlinks the name once everyone is attached, so nothing remains after
//! the team is gone.
//! Creating (exclusive, mode 0600, after a space check), opening (only a
//! private segment of this uid), mapping (checked bounds) and unlinking are
//! [`ferrocoll_transport::shmem`]'s.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use ferrocoll_core::engine::board::{BOARD_DEPTH, ENTRY_WORDS};
use ferrocoll_core::{Error, MemRef, MemType, Result, Status};
use ferrocoll_transport::shmem::{self, AtomicView, IfExists, Mapping, ShmFile, ShmName};

use super::layout::{CTRL, ENTRY, INLINE, INLINE_DEPTH, INLINE_HEAD, LINE, Layout};

const MAGIC: u64 = 0x6665_7272_6f73_686d; // "ferroshm"
/// The segment layout's version: raised with every change of `layout.rs`'s
/// geometry or header (8: inline regions of 4 KiB; 9: the single-copy
/// threshold in the header; 10: the staging probe's cells; 11: inline
/// regions of 8 KiB), so that ranks of builds that disagree fail naming
/// both versions instead of reading each other wrong.
const VERSION: u32 = 11;

/// The first line of a segment.
#[repr(C)]
struct Header {
    /// MAGIC once the creator has written everything else (Release/Acquire).
    magic: AtomicU64,
    version: AtomicU32,
    ranks: AtomicU32,
    data: AtomicU64,
    /// The creator endpoint's nonce (also in the name): a segment without it
    /// is not this team's, whatever its name.
    cookie: AtomicU64,
    /// Members other than the creator that have mapped the segment.
    attached: AtomicU32,
    /// 1 when the creator's context saw more of the job's ranks on this
    /// host than it has cores, else 0: the team's choices that follow it
    /// take the creator's view, so that every member makes them alike.
    oversubscribed: AtomicU32,
    /// The creator's `UCC_TL_SHM_CMA_THRESHOLD` (measured on its machine
    /// where "auto", `crossover.rs`): the team's, for the same reason;
    /// [`CMA_PENDING`] while the creator still times it with rank 1
    /// (Release once final, Acquire by the members that wait for it).
    cma_threshold: AtomicU64,
    /// Where the creator and rank 1 time staging (`staging_probe.rs`).
    probe: ProbeCells,
}

/// The header's `cma_threshold` while the creator times staging with rank
/// 1: the creator's own "auto", not yet a figure.
const CMA_PENDING: u64 = u64::MAX - 1;

/// Cells of the header through which the creator and rank 1 time
/// staging's two copies as the team is created (`staging_probe.rs`).
#[repr(C)]
pub(crate) struct ProbeCells {
    /// Odd: the creator has copied a round in (Release); one more: rank 1
    /// has copied it out (Release).
    pub turn: AtomicU64,
    /// Bytes of the round (untrusted at rank 1: a range of the creator's data part).
    pub size: AtomicU64,
    /// Nanoseconds rank 1's copy out of the last round took.
    pub out_ns: AtomicU64,
}

const _: () = assert!(std::mem::size_of::<Header>() <= LINE);

// SAFETY: repr(C) and made only of atomics: any bits (zeroes of a fresh
// segment included) are a value, and every process accesses it atomically.
unsafe impl AtomicView for Header {}

/// A rank's control lines: values only that rank writes, that everyone
/// reads, in three line pairs by how often each is written and read, so
/// that a write never has to take a line back from a reader that did not
/// need it: the first holds what a reader of a step waits on (the line that
/// must travel), the second `done` (written every epoch, read only when a
/// rank cannot infer it, see `epoch.rs`), the third what a waiting rank
/// reads on every poll but its owner writes once (`left`, `pid`). Writing
/// `done` into the first pair, as before, made every rank's next write
/// there wait for the line to come back from the peer that had just read
/// it (measured: barrier and allreduce 8 B on 2 ranks, BENCHMARKS.md).
#[repr(C)]
pub(crate) struct Ctrl {
    /// Last epoch whose data this rank has published.
    pub arrive: AtomicU64,
    /// Last epoch whose reduced results this rank has published.
    pub reduced: AtomicU64,
    /// The signature of the collective of epoch `e`, in slot `e % 2` (see
    /// `Signature` in core, and `epoch.rs`): a rank cannot start epoch `e + 2` before every rank
    /// has finished `e`, if `e`'s readers read this slot (`ShmTeam::poll_begin`),
    /// so the slot of an epoch a reader waits in is stable.
    pub sig: [SigSlot; 2],
    /// Single copy's status for epoch `e`, in slot `e % 2`, beside
    /// `reduced` which publishes it (`alg/single_copy.rs`).
    pub copy_status: [AtomicU64; 2],
    /// Single copy's offer of one buffer (address, length) for epoch `e`,
    /// in slot `e % 2`: in the line pair that a reader fetches with
    /// `arrive`, which publishes it.
    pub copy_offer: [[AtomicU64; 2]; 2],
    _to_done: [AtomicU64; 4],
    /// Last epoch this rank has finished reading.
    pub done: AtomicU64,
    _to_pid: [AtomicU64; 15],
    /// The rank's process id (for liveness checks).
    pub pid: AtomicU64,
    /// [`PRESENT`], [`LEFT`] (the rank destroyed its team) or [`FAILED`]
    /// (a collective failed on it, e.g. its arguments differed from another
    /// rank's, and it will not take part in later ones), with the cause
    /// above [`CAUSE_SHIFT`].
    pub left: AtomicU64,
    /// Where this rank's process maps the header's `cookie` (0: it offers
    /// no single copy): a peer that reads the team's cookie there through
    /// cross-memory attach knows that the pid in `pid` is this rank's
    /// process, and that it may read it (`alg/single_copy.rs`).
    pub cookie_at: AtomicU64,
    _to_end: [AtomicU64; 13],
}

/// A rank's control-line value of `left` while it takes part.
pub(crate) const PRESENT: u64 = 0;
/// The rank destroyed its team.
pub(crate) const LEFT: u64 = 1;
/// A collective failed on the rank; it takes no part in later ones.
pub(crate) const FAILED: u64 = 2;
/// `left`'s low byte is [`PRESENT`], [`LEFT`] or [`FAILED`]; above this
/// shift a FAILED rank says which rank's failure ended its part, plus one
/// (0: its own, or unknown), so that the ranks that only wait on it can
/// name the rank that failed first.
pub(crate) const CAUSE_SHIFT: u32 = 8;

/// One epoch's signature in a control line or an inline region's head.
#[repr(C)]
pub(crate) struct SigSlot {
    /// `Signature::word`, with the epoch's low byte in bits 24..32 (the
    /// slot of epoch `e` held `e - 2` before, or an inline head's
    /// `e - INLINE_DEPTH`: a byte tells them apart).
    pub word: AtomicU64,
    /// `Signature::size`.
    pub size: AtomicU64,
}

// SAFETY: as for Header: repr(C), atomics only.
unsafe impl AtomicView for Ctrl {}

/// The head of a rank's inline region for an epoch; its payload follows
/// in the same cache line (`inline.rs`).
#[repr(C)]
pub(crate) struct InlineHead {
    /// The last epoch whose payload this rank has published in the region
    /// (written by the inline publishes only, never by a payload).
    pub tag: AtomicU64,
    /// That epoch's signature, as a control line's slot holds it.
    pub sig: SigSlot,
    _reserved: AtomicU64,
}

// SAFETY: as for Header: repr(C), atomics only.
unsafe impl AtomicView for InlineHead {}

/// One entry of a rank's call board: words only that rank writes (see
/// `ferrocoll_core::engine::board`; readers check its checksum).
#[repr(C)]
pub(crate) struct BoardEntry(pub [AtomicU64; ENTRY_WORDS]);

// SAFETY: as for Header: repr(C), atomics only.
unsafe impl AtomicView for BoardEntry {}

const _: () = assert!(std::mem::size_of::<Ctrl>() == CTRL && std::mem::size_of::<Header>() <= LINE);
const _: () = assert!(std::mem::size_of::<BoardEntry>() == ENTRY);
const _: () = assert!(std::mem::size_of::<InlineHead>() == INLINE_HEAD && INLINE_HEAD.is_multiple_of(16));
// The signature's tag byte tells an inline head's epoch from the last one of its region.
const _: () = assert!(INLINE_DEPTH >= 2 && INLINE_DEPTH < 256);
const _: () = assert!(std::mem::offset_of!(Ctrl, sig) + std::mem::size_of::<[SigSlot; 2]>() <= 64);
const _: () = assert!(std::mem::offset_of!(Ctrl, copy_status) + std::mem::size_of::<[AtomicU64; 2]>() <= 64);
const _: () = assert!(std::mem::offset_of!(Ctrl, done) == LINE && std::mem::offset_of!(Ctrl, pid) == 2 * LINE);

/// A mapped team segment.
pub(crate) struct Segment {
    map: Mapping,
    layout: Layout,
    /// Still to unlink (the creator, until everyone attached); unlinked when dropped.
    name: Option<ShmName>,
    /// The creator's view (see `Header::oversubscribed`), read once.
    oversubscribed: bool,
    /// The creator's single-copy threshold (see `Header::cma_threshold`),
    /// once final.
    cma_threshold: Option<usize>,
    /// Where the lines every epoch touches lie, found (bounds and alignment
    /// checked) once when the segment is mapped: a small collective looks
    /// them up a dozen times, and each checked look cost ~60 instructions.
    lines: Lines,
}

/// Rank `r`'s control lines at `ctrl[r]`, its call board's first entry at
/// `board[r]`, its inline region `i` at `inline[INLINE_DEPTH * r + i]`. Every
/// pointer lies in the segment's mapping, which the `Segment` holding them
/// owns.
struct Lines {
    ctrl: Box<[NonNull<Ctrl>]>,
    board: Box<[NonNull<BoardEntry>]>,
    inline: Box<[NonNull<u8>]>,
}

// SAFETY: the pointers are addresses in the segment's own mapping (which is
// Send and Sync); through them a Segment hands out only what the mapping
// would (`AtomicView`s and `MemRef`s), for no longer than it lives.
unsafe impl Send for Lines {}
// SAFETY: see Send.
unsafe impl Sync for Lines {}

impl Lines {
    /// The lines of every rank of `layout` in `map`, each checked once.
    fn find(map: &Mapping, layout: &Layout) -> Result<Lines> {
        let ctrl = (0..layout.ranks)
            .map(|r| map.view::<Ctrl>(layout.ctrl(r)).map(NonNull::from))
            .collect::<Result<Box<[_]>>>()?;
        let board = (0..layout.ranks)
            .map(|r| {
                // The first entry's bounds and alignment, then the whole board's bounds.
                map.range(layout.board(r, 0), BOARD_DEPTH * ENTRY)?;
                map.view::<BoardEntry>(layout.board(r, 0)).map(NonNull::from)
            })
            .collect::<Result<Box<[_]>>>()?;
        let inline = (0..INLINE_DEPTH * layout.ranks)
            .map(|i| {
                let at = layout.inline_at(i / INLINE_DEPTH, (i % INLINE_DEPTH) as u64);
                // The head's bounds and alignment, then the whole region's bounds.
                let head = map.view::<InlineHead>(at)?;
                map.range(at, INLINE)?;
                Ok(NonNull::from(head).cast::<u8>())
            })
            .collect::<Result<Box<[_]>>>()?;
        Ok(Lines { ctrl, board, inline })
    }
}

impl Segment {
    /// The name of a team's segment: `/ferrocoll-<job>-s<team id in hex>-<nonce>-<owner>`,
    /// where the nonce is the creating endpoint's (exchanged at context
    /// creation, so no process outside the job can know the name before it
    /// exists) and the owner its process's tag (`shmem::Owner`: what the
    /// sweep of stale segments reads).
    pub(crate) fn name(job: &str, team: u64, nonce: u64, owner: &str) -> String {
        shmem::segment_name(job, &format!("s{team:x}-{nonce:016x}-{owner}"))
    }

    /// Create the segment of `layout` under `name` (team rank 0), with
    /// `cookie` (the nonce of its name) in its header, for a team whose
    /// first rank (this one) sees its host `oversubscribed` or not and
    /// starts single copy at `cma_threshold` (`None`: a figure it will
    /// publish, [`Segment::publish_cma_threshold`]). A segment of the same
    /// name is replaced.
    pub(crate) fn create(
        name: &str,
        layout: Layout,
        cookie: u64,
        oversubscribed: bool,
        cma_threshold: Option<usize>,
    ) -> Result<Segment> {
        let total = layout.total() as u64;
        // NoResource, never NotSupported: that would turn the TL off at rank
        // 0 alone, while the other members wait for a segment that never comes.
        let no_resource = |e: Error| match e.status() {
            Status::NotSupported => Error::no_resource(e.context()),
            _ => e,
        };
        let (file, owned) = ShmFile::create(name, total, IfExists::Replace).map_err(no_resource)?;
        // Dropped on an error below, `owned` unlinks the name.
        let map = file.map(0, total)?;
        let lines = Lines::find(&map, &layout)?;
        let seg = Segment { map, layout, name: Some(owned), oversubscribed, cma_threshold, lines };
        let h = seg.header()?;
        h.oversubscribed.store(u32::from(oversubscribed), Ordering::Relaxed);
        h.cma_threshold.store(cma_threshold.map_or(CMA_PENDING, |t| t as u64), Ordering::Relaxed);
        h.version.store(VERSION, Ordering::Relaxed);
        h.ranks.store(layout.ranks as u32, Ordering::Relaxed);
        h.data.store(layout.data as u64, Ordering::Relaxed);
        h.cookie.store(cookie, Ordering::Relaxed);
        // Release: openers that see MAGIC (Acquire) see the fields above.
        h.magic.store(MAGIC, Ordering::Release);
        Ok(seg)
    }

    /// Map the segment if its creator has finished writing it (`Ok(None)`:
    /// not yet); it must carry `cookie`.
    pub(crate) fn open(name: &str, ranks: usize, cookie: u64) -> Result<Option<Segment>> {
        let Some(file) = ShmFile::open(name)? else { return Ok(None) };
        let size = file.size()?;
        if size < LINE as u64 {
            return Ok(None); // created but not sized yet
        }
        let head = file.map(0, LINE as u64)?;
        let h = head.view::<Header>(0)?;
        // Acquire: pairs with the creator's Release of MAGIC.
        if h.magic.load(Ordering::Acquire) != MAGIC {
            return Ok(None);
        }
        let (version, seg_ranks, data, seen, oversubscribed, cma_threshold) = (
            h.version.load(Ordering::Relaxed),
            h.ranks.load(Ordering::Relaxed) as usize,
            h.data.load(Ordering::Relaxed),
            h.cookie.load(Ordering::Relaxed),
            h.oversubscribed.load(Ordering::Relaxed),
            h.cma_threshold.load(Ordering::Relaxed),
        );
        drop(head);
        if seen != cookie {
            return Err(Error::io(format!(
                "segment {name} does not carry this team's cookie: it was not made by the team's first rank"
            )));
        }
        if version != VERSION || seg_ranks != ranks {
            return Err(Error::invalid_param(format!(
                "segment {name} has version {version} for {seg_ranks} ranks; this rank expects version {VERSION} for {ranks}"
            )));
        }
        // The creator's header is input: its sizes are checked like any other.
        let oversubscribed = match oversubscribed {
            0 => false,
            1 => true,
            v => {
                return Err(Error::invalid_param(format!("segment {name} says oversubscribed = {v}, neither 0 nor 1")));
            }
        };
        let data = usize::try_from(data)
            .map_err(|_| Error::invalid_param(format!("segment {name} has {data}-byte halves, more than memory")))?;
        let cma_threshold = threshold_of(cma_threshold);
        let layout = Layout::new(ranks, data).map_err(|e| e.prefixed(format!("segment {name}")))?;
        let total = layout.total() as u64;
        if size < total {
            return Err(Error::io(format!("segment {name} has {size} bytes, less than its layout's {total}")));
        }
        let map = file.map(0, total)?;
        let lines = Lines::find(&map, &layout)?;
        let seg = Segment { map, layout, name: None, oversubscribed, cma_threshold, lines };
        // AcqRel: the creator's Acquire load of the count sees our mapping done.
        seg.header()?.attached.fetch_add(1, Ordering::AcqRel);
        Ok(Some(seg))
    }

    fn header(&self) -> Result<&Header> {
        self.map.view::<Header>(0)
    }

    /// The team's cookie (the nonce of the segment's name), and where this
    /// process maps it.
    pub(crate) fn cookie(&self) -> Result<(u64, u64)> {
        let cookie = &self.header()?.cookie;
        // Relaxed: written before the creator's Release of MAGIC, which every
        // member Acquired (the creator wrote it itself).
        Ok((cookie.load(Ordering::Relaxed), cookie.as_ptr() as u64))
    }

    /// The geometry.
    /// Whether the team's first rank saw its host oversubscribed (the
    /// team's view, alike on every member).
    pub(crate) fn oversubscribed(&self) -> bool {
        self.oversubscribed
    }

    /// The team's first rank's single-copy threshold (the team's, alike on
    /// every member: "auto" measures each machine's, `crossover.rs`);
    /// `None` while the first rank still measures it.
    pub(crate) fn cma_threshold(&self) -> Option<usize> {
        self.cma_threshold
    }

    /// [`Segment::cma_threshold`], read again from the header if it was not
    /// final yet.
    pub(crate) fn refresh_cma_threshold(&mut self) -> Result<Option<usize>> {
        if self.cma_threshold.is_none() {
            // Acquire: pairs with the creator's Release in `publish_cma_threshold`.
            self.cma_threshold = threshold_of(self.header()?.cma_threshold.load(Ordering::Acquire));
        }
        Ok(self.cma_threshold)
    }

    /// The creator's threshold, once measured, for every member.
    pub(crate) fn publish_cma_threshold(&mut self, t: usize) -> Result<()> {
        let t = if t as u64 == CMA_PENDING { usize::MAX } else { t };
        // Release: see `refresh_cma_threshold`.
        self.header()?.cma_threshold.store(t as u64, Ordering::Release);
        self.cma_threshold = Some(t);
        Ok(())
    }

    /// The cells through which the creator and rank 1 time staging.
    pub(crate) fn probe_cells(&self) -> Result<&ProbeCells> {
        Ok(&self.header()?.probe)
    }

    pub(crate) fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Members that have mapped the segment (the creator not counted).
    pub(crate) fn attached(&self) -> Result<usize> {
        // Acquire: see open.
        Ok(self.header()?.attached.load(Ordering::Acquire) as usize)
    }

    /// Remove the name (the creator, once everyone is attached).
    pub(crate) fn unlink(&mut self) {
        // Dropping the name unlinks it (a failure is logged).
        drop(self.name.take());
    }

    fn check_rank(&self, r: usize) -> Result<()> {
        if r < self.layout.ranks { Ok(()) } else { Err(self.no_rank(r)) }
    }

    #[cold]
    fn no_rank(&self, r: usize) -> Error {
        Error::internal(format!("rank {r} in a shm team of {}", self.layout.ranks))
    }

    /// Rank `r`'s inline region for `epoch` (`INLINE` bytes).
    #[inline]
    fn inline_region(&self, r: usize, epoch: u64) -> Result<NonNull<u8>> {
        let i = r.checked_mul(INLINE_DEPTH).and_then(|i| i.checked_add((epoch % INLINE_DEPTH as u64) as usize));
        i.and_then(|i| self.lines.inline.get(i)).copied().ok_or_else(|| self.no_rank(r))
    }

    /// Rank `r`'s control line.
    #[inline]
    pub(crate) fn ctrl(&self, r: usize) -> Result<&Ctrl> {
        match self.lines.ctrl.get(r) {
            // SAFETY: a Ctrl in the mapping, checked by `Lines::find`; an
            // `AtomicView`, so any bits and any other process's writes are
            // fine; it lives as long as `&self` (the mapping's owner).
            Some(p) => Ok(unsafe { p.as_ref() }),
            None => Err(self.no_rank(r)),
        }
    }

    /// Entry `i` of rank `r`'s call board.
    #[inline]
    pub(crate) fn board(&self, r: usize, i: usize) -> Result<&BoardEntry> {
        let first = self.lines.board.get(r).ok_or_else(|| self.no_rank(r))?;
        if i >= BOARD_DEPTH {
            return Err(Error::internal(format!("call board entry {i} of {BOARD_DEPTH}")));
        }
        // SAFETY: entry i < BOARD_DEPTH of a board whose entries lie in the
        // mapping, one after the other (`Lines::find`, `Layout::board`); an
        // `AtomicView`, living as long as `&self`.
        Ok(unsafe { first.add(i).as_ref() })
    }

    fn region(&self, off: usize, len: usize) -> Result<MemRef> {
        let p = self.map.range(off, len)?;
        // SAFETY: in bounds of our mapping (checked by `range`), which lives as
        // long as the team (and the tasks that use these MemRefs hold the
        // team); who writes and reads when is the epoch protocol's business
        // (see `epoch.rs`).
        Ok(unsafe { MemRef::new(p, len, MemType::Host) })
    }

    /// Rank `r`'s data part for `epoch`.
    pub(crate) fn data(&self, r: usize, epoch: u64) -> Result<MemRef> {
        self.check_rank(r)?;
        self.region(self.layout.data_at(r, epoch), self.layout.data)
    }

    /// The head of rank `r`'s inline region for `epoch`.
    #[inline]
    pub(crate) fn inline_head(&self, r: usize, epoch: u64) -> Result<&InlineHead> {
        let p = self.inline_region(r, epoch)?.cast::<InlineHead>();
        // SAFETY: the region's start, in the mapping (`Lines::find`), is
        // line-aligned (`layout.rs`) and begins with the head; an
        // `AtomicView`, living as long as `&self`.
        Ok(unsafe { p.as_ref() })
    }

    /// Bytes of an inline region's payload.
    pub(crate) fn inline_capacity(&self) -> usize {
        INLINE - INLINE_HEAD
    }

    /// The payload of rank `r`'s inline region for `epoch` (16-byte aligned).
    #[inline]
    pub(crate) fn inline_payload(&self, r: usize, epoch: u64) -> Result<MemRef> {
        let p = self.inline_region(r, epoch)?.as_ptr().wrapping_add(INLINE_HEAD);
        // SAFETY: the region's payload, in the mapping (`Lines::find` checked
        // all INLINE bytes of it), which lives as long as the team; see `region`.
        Ok(unsafe { MemRef::new(p, INLINE - INLINE_HEAD, MemType::Host) })
    }

    /// Rank `r`'s results part for `epoch`.
    pub(crate) fn results(&self, r: usize, epoch: u64) -> Result<MemRef> {
        self.check_rank(r)?;
        self.region(self.layout.results_at(r, epoch), self.layout.results)
    }
}

/// A header's threshold word: `None` while pending; any other size is a
/// threshold, one past this process's sizes "never".
fn threshold_of(word: u64) -> Option<usize> {
    (word != CMA_PENDING).then(|| usize::try_from(word).unwrap_or(usize::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_map_what_the_creator_wrote_and_corrupt_sizes_are_refused() {
        let n = Segment::name(&format!("shmtl-segtest{}", std::process::id()), 0x1f, 0xab, "p1t2n3");
        assert!(n.starts_with("/ferrocoll-shmtl-segtest") && n.ends_with("-s1f-00000000000000ab-p1t2n3"), "{n}");
        let mut seg = Segment::create(&n, Layout::new(2, 4096).unwrap(), 0xab, true, Some(48 << 10)).unwrap();
        let e = Segment::open(&n, 2, 0xac).err().expect("another cookie").to_string();
        assert!(e.contains("cookie"), "{e}");
        let peer = Segment::open(&n, 2, 0xab).unwrap().expect("created and written");
        assert_eq!((peer.layout(), seg.attached().unwrap()), (seg.layout(), 1));
        assert!(peer.oversubscribed() && seg.oversubscribed(), "the creator's view, on every member");
        assert_eq!((peer.cma_threshold(), seg.cma_threshold()), (Some(48 << 10), Some(48 << 10)), "the creator's");
        let flag = &seg.header().unwrap().oversubscribed;
        flag.store(0, Ordering::Relaxed);
        assert!(!Segment::open(&n, 2, 0xab).unwrap().unwrap().oversubscribed());
        flag.store(7, Ordering::Relaxed);
        let e = Segment::open(&n, 2, 0xab).err().expect("a flag that is no flag").to_string();
        assert!(e.contains(&n) && e.contains("oversubscribed = 7"), "{e}");
        flag.store(1, Ordering::Relaxed);
        peer.ctrl(1).unwrap().arrive.store(5, Ordering::Relaxed);
        assert_eq!(seg.ctrl(1).unwrap().arrive.load(Ordering::Relaxed), 5);
        assert!(seg.ctrl(2).is_err() && seg.data(2, 0).is_err() && seg.results(usize::MAX, 1).is_err());
        assert!(Segment::open(&n, 3, 0xab).is_err(), "a team of another size");
        // The creator's header is input to the others: sizes that overflow, or
        // that the file does not hold, are errors naming the segment.
        let data = &seg.header().unwrap().data;
        data.store(u64::MAX / 2, Ordering::Relaxed);
        let e = Segment::open(&n, 2, 0xab).err().expect("overflowing halves").to_string();
        assert!(e.contains(&n) && e.contains("too large"), "{e}");
        data.store(1 << 30, Ordering::Relaxed);
        let e = Segment::open(&n, 2, 0xab).err().expect("halves past the end").to_string();
        assert!(e.contains(&n) && e.contains("less than its layout"), "{e}");
        seg.unlink();
        assert!(Segment::open(&n, 2, 0xab).unwrap().is_none(), "unlinked");
    }

    #[test]
    fn a_threshold_still_measured_reaches_the_members_once_published() {
        let n = Segment::name(&format!("shmtl-segpending{}", std::process::id()), 0x1f, 0xab, "p1t2n3");
        let mut seg = Segment::create(&n, Layout::new(2, 4096).unwrap(), 0xab, false, None).unwrap();
        let mut peer = Segment::open(&n, 2, 0xab).unwrap().expect("created and written");
        assert_eq!((seg.cma_threshold(), peer.cma_threshold()), (None, None));
        assert_eq!(peer.refresh_cma_threshold().unwrap(), None, "not published yet");
        seg.publish_cma_threshold(32 << 10).unwrap();
        assert_eq!((seg.cma_threshold(), peer.refresh_cma_threshold().unwrap()), (Some(32 << 10), Some(32 << 10)));
        // "Never" as a figure, and the pending word itself, are "never".
        seg.publish_cma_threshold(CMA_PENDING as usize).unwrap();
        let mut late = Segment::open(&n, 2, 0xab).unwrap().expect("still named");
        assert_eq!(late.refresh_cma_threshold().unwrap(), Some(usize::MAX));
    }
}
