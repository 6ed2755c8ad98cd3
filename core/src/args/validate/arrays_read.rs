//! [`ArraysRead`]: the counts and displacement arrays one validation read,
//! with the values it read, so that a later call with the same raw
//! arguments can tell, without validating again, whether the arrays still
//! hold what they held (see `core/src/object/plan_cache.rs`).

/// One array as validation read it.
#[derive(Debug)]
struct ArrayRead {
    ptr: *const u8,
    /// Elements are u64 (else u32).
    wide: bool,
    values: Box<[usize]>,
}

/// The arrays one validation read, in the order it read them.
#[derive(Debug, Default)]
pub(crate) struct ArraysRead(Vec<ArrayRead>);

// SAFETY: the pointers are only compared and, in `unchanged`, read under
// the contract of a later collective_init call (see there); they are never
// written through.
unsafe impl Send for ArraysRead {}
// SAFETY: as for Send: `&ArraysRead` reads nothing behind the pointers by itself.
unsafe impl Sync for ArraysRead {}

impl ArraysRead {
    /// Note that validation read `values` from the array at `ptr`.
    pub(crate) fn push(&mut self, ptr: *const u8, wide: bool, values: &[usize]) {
        self.0.push(ArrayRead { ptr, wide, values: values.into() });
    }

    /// Whether every array still holds the values validation read.
    ///
    /// # Safety
    /// Each array must still be valid for reads of its length, in its
    /// width: so it is when the caller's current `collective_init` has raw
    /// arguments equal to those of the call these were read for (same
    /// pointers, flags, collective and root, on the same team), since that
    /// call's contract covers the arrays its validation reads, and the
    /// validation of equal arguments reads the same arrays.
    pub(crate) unsafe fn unchanged(&self) -> bool {
        self.0.iter().all(|a| {
            a.values.iter().enumerate().all(|(i, &v)| {
                // SAFETY: the caller's contract; unaligned as validation reads them.
                let now = unsafe { read_element(a.ptr, a.wide, i) };
                usize::try_from(now) == Ok(v)
            })
        })
    }
}

/// Element `i` of a counts or displacements array of u64 (`wide`) or u32.
///
/// # Safety
/// `ptr` must be valid for reads of `i + 1` elements of that width.
pub(crate) unsafe fn read_element(ptr: *const u8, wide: bool, i: usize) -> u64 {
    if wide {
        // SAFETY: the caller's; read_unaligned because C arrays from users need not be aligned.
        unsafe { ptr.cast::<u64>().add(i).read_unaligned() }
    } else {
        // SAFETY: as above, an array of u32.
        u64::from(unsafe { ptr.cast::<u32>().add(i).read_unaligned() })
    }
}
