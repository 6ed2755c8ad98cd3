//! Reading one side (source or destination) of [`CollArgs`] into a checked
//! [`Buf`], and the count relations collectives impose; every error names
//! the collective, the side and the value.

use std::cell::RefCell;

use super::super::blocks::Blocks;
use super::super::{BufferInfo, BufferInfoV, CollArgs, CollBuffer, CollFlags};
use super::arrays_read::{ArraysRead, read_element};
use crate::buffer::MemRef;
use crate::error::{Error, Result};
use crate::types::{CollType, DataType, MemType};

/// Counts and displacements (in elements) of a v-variant buffer, one per rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct VLayout {
    /// Element count per rank.
    pub counts: Vec<usize>,
    /// Displacement per rank, in elements.
    pub displs: Vec<usize>,
}

/// A validated buffer side.
#[derive(Clone, Debug)]
pub(crate) struct Buf {
    /// The whole buffer (for v-variants: up to the furthest block's end).
    pub mem: MemRef,
    /// Element type.
    pub dtype: DataType,
    /// Bytes per element (the pair size for maxloc/minloc).
    pub elem_size: usize,
    /// Elements in the buffer (for v-variants: the sum of the counts; for
    /// reduce_scatterv's dst: the whole vector in place, else this rank's count).
    pub count: usize,
    /// Per-rank layout of v-variant buffers.
    pub v: Option<VLayout>,
}

impl Buf {
    /// One block per rank: the v-layout, or UCC's even split of `count` over `size`.
    pub fn blocks(&self, size: usize) -> Blocks {
        match &self.v {
            Some(v) => Blocks::from_counts(&v.counts, &v.displs, self.elem_size),
            None => Blocks::even(self.count, size, self.elem_size),
        }
    }

    /// Element count of rank `r`'s block (see [`Buf::blocks`]).
    pub fn block_len(&self, r: usize, size: usize) -> usize {
        match &self.v {
            Some(v) => v.counts.get(r).copied().unwrap_or(0),
            None => super::super::block_count(self.count, size, r),
        }
    }
}

/// Reads the buffers of one collective's arguments.
pub(crate) struct Checker<'a> {
    pub coll: CollType,
    pub size: usize,
    pub args: &'a CollArgs,
    pub resolve_mem: &'a dyn Fn(*const u8) -> MemType,
    /// Where to note the arrays read, when the caller asked for them.
    pub reads: Option<RefCell<ArraysRead>>,
}

impl Checker<'_> {
    /// An `InvalidParam` error prefixed with the collective.
    pub fn err(&self, msg: impl std::fmt::Display) -> Error {
        Error::invalid_param(format!("{}: {msg}", self.coll))
    }

    fn flag(&self, f: CollFlags) -> bool {
        self.args.flags.contains(f)
    }

    /// Bytes per element as the collective moves them (pairs for maxloc/minloc).
    fn elem_size(&self, dt: DataType) -> usize {
        if self.coll.is_reduction() { self.args.op.element_size(dt) } else { dt.size() }
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

    fn side(&self, side: &str) -> &CollBuffer {
        if side == "src" { &self.args.src } else { &self.args.dst }
    }

    /// The plain buffer `side` ("src" or "dst").
    pub fn info(&self, side: &str) -> Result<Buf> {
        let info: &BufferInfo = match self.side(side) {
            CollBuffer::Info(i) => i,
            CollBuffer::InfoV(_) => return Err(self.err(format!("{side} must be a plain buffer (info), not info_v"))),
            CollBuffer::None => return Err(self.err(format!("{side} buffer is missing"))),
        };
        let count =
            usize::try_from(info.count).map_err(|_| self.err(format!("{side}.count {} is too large", info.count)))?;
        let es = self.elem_size(info.datatype);
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

    fn info_v_of(&self, side: &str) -> Result<&BufferInfoV> {
        match self.side(side) {
            CollBuffer::InfoV(i) => Ok(i),
            CollBuffer::Info(_) => Err(self.err(format!("{side} must be a buffer with counts (info_v)"))),
            CollBuffer::None => Err(self.err(format!("{side} buffer is missing"))),
        }
    }

    /// The v-variant buffer `side`, with its counts and displacements.
    pub fn info_v(&self, side: &str) -> Result<Buf> {
        let info = self.info_v_of(side)?;
        let counts = self.read_array(side, "counts", info.counts, self.flag(CollFlags::COUNT_64BIT))?;
        let displs =
            self.read_array(side, "displacements", info.displacements, self.flag(CollFlags::DISPLACEMENTS_64BIT))?;
        let es = self.elem_size(info.datatype);
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
    pub fn info_counts(&self, in_place: bool, rank: usize) -> Result<Buf> {
        let info = self.info_v_of("dst")?;
        let counts = self.read_array("dst", "counts", info.counts, self.flag(CollFlags::COUNT_64BIT))?;
        let mut displs = Vec::with_capacity(counts.len());
        let mut total = 0usize;
        for &c in &counts {
            displs.push(total);
            total = total.checked_add(c).ok_or_else(|| self.err("dst.counts sum overflows"))?;
        }
        let held = if in_place { total } else { counts.get(rank).copied().unwrap_or(0) };
        let e = self.elem_size(info.datatype);
        let len = self.bytes("dst", held, e)?;
        // The whole vector's bytes must fit too: blocks are addressed by their offsets in it.
        self.bytes("dst", total, e)?;
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
            // SAFETY: the caller of `CollInit::validate` promised a team-size
            // array of the width the flag says.
            let v = unsafe { read_element(ptr, wide, i) };
            out.push(usize::try_from(v).map_err(|_| self.err(format!("{side}.{what}[{i}] = {v} is too large")))?);
        }
        if let Some(reads) = &self.reads {
            reads.borrow_mut().push(ptr, wide, &out);
        }
        Ok(out)
    }

    /// `a.count` equals `b.count`.
    pub fn same_count(&self, a: &str, na: usize, b: &str, nb: usize) -> Result<()> {
        if na != nb {
            return Err(self.err(format!("{a}.count {na} differs from {b}.count {nb}")));
        }
        Ok(())
    }

    /// `total` is the team size times `block`.
    pub fn total_is_p_times(&self, total_side: &str, total: usize, block_side: &str, block: usize) -> Result<()> {
        if block.checked_mul(self.size) != Some(total) {
            return Err(self.err(format!(
                "{total_side}.count {total} is not team size {} × {block_side}.count {block}",
                self.size
            )));
        }
        Ok(())
    }

    /// `total` splits into team-size equal blocks.
    pub fn divisible(&self, side: &str, total: usize) -> Result<usize> {
        if !total.is_multiple_of(self.size.max(1)) {
            return Err(self.err(format!("{side}.count {total} is not divisible by team size {}", self.size)));
        }
        Ok(total)
    }

    /// The team size times `block` elements of `side` (the total a rank without that buffer implies).
    pub fn times_p(&self, side: &str, block: usize) -> Result<usize> {
        block
            .checked_mul(self.size)
            .ok_or_else(|| self.err(format!("{side}.count {block} × team size {} overflows", self.size)))
    }
}
