//! One rank's buffers for one size, and the raw [`CollArgs`] that point
//! into them (raw arguments reach every datatype, float128 included, which
//! the typed `Coll` builder cannot).

use ferrocoll::{BufferInfo, BufferInfoV, Error, Result};
use ferrocoll::{CollArgs, CollBuffer, CollFlags, CollType, DataType, MemType, ReduceOp};

use super::check::{Put, Shape, Side};
use super::layout::Layout;
use super::pattern::Inputs;

/// A cache line, so that buffers start 64-byte aligned like ucc_perftest's.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

/// A zeroed, 64-byte aligned byte buffer.
pub struct AlignedBuf {
    lines: Vec<Line>,
    len: usize,
}

impl AlignedBuf {
    /// `len` zeroed bytes; an allocation failure is an error naming the size.
    pub fn new(len: usize) -> Result<AlignedBuf> {
        let n = len.div_ceil(64);
        let mut lines = Vec::new();
        lines.try_reserve_exact(n).map_err(|_| Error::no_memory(format!("cannot allocate a buffer of {len} bytes")))?;
        lines.resize(n, Line([0; 64]));
        Ok(AlignedBuf { lines, len })
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `lines` holds at least `len` initialised bytes (Line is
        // plain bytes with no padding), borrowed for as long as `self`.
        unsafe { std::slice::from_raw_parts(self.lines.as_ptr().cast::<u8>(), self.len) }
    }

    /// The bytes, mutably.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`, and `&mut self` makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.lines.as_mut_ptr().cast::<u8>(), self.len) }
    }

    /// The start, for the collective's arguments.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.lines.as_mut_ptr().cast()
    }
}

/// Everything one size needs on one rank: buffers, counts and the pristine
/// inputs that refill them.
pub struct SizeBuffers {
    /// Source buffer (empty when the rank has none).
    pub src: AlignedBuf,
    /// Destination buffer (empty when the rank has none).
    pub dst: AlignedBuf,
    has_src: bool,
    has_dst: bool,
    /// Per-rank counts and displacements of v-variants (`u64`, in elements).
    counts: Vec<u64>,
    displs: Vec<u64>,
    /// Where inputs go, and their bytes when kept for refilling (`--check`).
    puts: Vec<(Put, Option<AlignedBuf>)>,
    inputs: Inputs,
    rank: usize,
    elem_size: usize,
}

/// A byte pattern that no input has at every element; alternated between
/// iterations so that an unwritten element cannot match by chance twice.
const POISON: [u8; 2] = [0xa5, 0x5a];

impl SizeBuffers {
    /// Allocate `layout` for `shape`. With `keep`, the inputs are computed
    /// once and kept, so that refilling them before every iteration is a copy.
    pub fn new(shape: &Shape, layout: Layout, inputs: Inputs, keep: bool) -> Result<SizeBuffers> {
        let es = inputs.elem_size();
        let mut puts = Vec::new();
        for put in shape.inputs() {
            let bytes = if keep {
                let mut b = AlignedBuf::new(put.span.len * es)?;
                inputs.fill(shape.rank, put.first, b.bytes_mut());
                Some(b)
            } else {
                None
            };
            puts.push((put, bytes));
        }
        let c = shape.c as u64;
        Ok(SizeBuffers {
            src: AlignedBuf::new(layout.src.unwrap_or(0) * es)?,
            dst: AlignedBuf::new(layout.dst.unwrap_or(0) * es)?,
            has_src: layout.src.is_some(),
            has_dst: layout.dst.is_some(),
            counts: vec![c; shape.p],
            displs: (0..shape.p as u64).map(|j| j * c).collect(),
            puts,
            inputs,
            rank: shape.rank,
            elem_size: es,
        })
    }

    /// Poison what the collective writes and put the inputs in place
    /// (`iteration` picks the poison).
    pub fn prepare(&mut self, coll: CollType, iteration: usize) {
        let poison = POISON[iteration % 2];
        self.dst.bytes_mut().fill(poison);
        if coll == CollType::Bcast {
            self.src.bytes_mut().fill(poison);
        }
        let es = self.elem_size;
        for (put, bytes) in &self.puts {
            let buf = if put.span.side == Side::Src { &mut self.src } else { &mut self.dst };
            let Some(out) = buf.bytes_mut().get_mut(put.span.at * es..(put.span.at + put.span.len) * es) else {
                continue;
            };
            match bytes {
                Some(b) => out.copy_from_slice(b.bytes()),
                None => self.inputs.fill(self.rank, put.first, out),
            }
        }
    }

    /// Raw arguments over these buffers.
    ///
    /// The pointers stay valid while `self` lives and is not moved or
    /// resized; the caller keeps it so for as long as a request built from
    /// the arguments exists.
    pub fn args(&mut self, shape: &Shape, dtype: DataType, op: ReduceOp, persistent: bool) -> CollArgs {
        use CollType::*;
        let coll = shape.coll;
        let mut a = CollArgs::new(coll);
        a.op = op;
        a.root = shape.root as u64;
        if shape.in_place && super::layout::has_in_place(coll) {
            a.flags |= CollFlags::IN_PLACE;
        }
        if persistent {
            a.flags |= CollFlags::PERSISTENT;
        }
        if op.is_loc() {
            a.flags |= CollFlags::LOC_PAIRS;
        }
        let info = |b: &mut AlignedBuf, es: usize| {
            CollBuffer::Info(BufferInfo {
                buffer: b.as_mut_ptr(),
                count: (b.bytes().len() / es.max(1)) as u64,
                datatype: dtype,
                mem_type: MemType::Host,
            })
        };
        let es = self.elem_size;
        let v = |b: &mut AlignedBuf, counts: &[u64], displs: &[u64]| {
            CollBuffer::InfoV(BufferInfoV {
                buffer: b.as_mut_ptr(),
                counts: counts.as_ptr().cast(),
                displacements: displs.as_ptr().cast(),
                datatype: dtype,
                mem_type: MemType::Host,
            })
        };
        let vector_src = matches!(coll, Alltoallv | Scatterv);
        let vector_dst = matches!(coll, Allgatherv | Alltoallv | Gatherv | ReduceScatterv);
        if vector_src || vector_dst {
            a.flags |= CollFlags::COUNT_64BIT | CollFlags::DISPLACEMENTS_64BIT;
        }
        if self.has_src {
            a.src = if vector_src { v(&mut self.src, &self.counts, &self.displs) } else { info(&mut self.src, es) };
        }
        if self.has_dst {
            a.dst = if vector_dst { v(&mut self.dst, &self.counts, &self.displs) } else { info(&mut self.dst, es) };
        }
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_sized() {
        let mut b = AlignedBuf::new(100).unwrap();
        assert_eq!(b.bytes().len(), 100);
        assert_eq!(b.as_mut_ptr() as usize % 64, 0);
        b.bytes_mut()[99] = 7;
        assert_eq!(b.bytes()[99], 7);
        assert!(AlignedBuf::new(0).unwrap().bytes().is_empty());
        assert!(AlignedBuf::new(usize::MAX / 2).is_err());
    }
}
