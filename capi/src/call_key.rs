//! A call's raw arguments as a value: what `ucc_collective_init` compares
//! with the finalized requests its team keeps (`spares.rs`).
//!
//! The key holds every field [`translate`](crate::coll_args::translate)
//! reads, as the caller wrote it, and nothing else (a field UCC does not
//! read for this collective may be left uninitialised, so it is not read
//! here either). Two calls with equal keys on the same team member are the
//! same call: translating and validating the second would give what the
//! first gave. That holds only where the arguments alone decide, so there
//! is no key (`None`) for:
//! - the v-collectives, whose counts and displacements lie in arrays the
//!   caller may rewrite between calls (and whose NULL-buffer form is
//!   rebased and may be staged);
//! - an active set (its requests are never reused anyway);
//! - a collective type that is not one (the call fails translation).
//!
//! A buffer of `UCC_MEMORY_TYPE_UNKNOWN` (what Open MPI's coll/ucc passes
//! for every buffer) is keyed with the type the memory components give its
//! address now, as validation would resolve it: the same address freed and
//! allocated again as another kind of memory makes another key.

use ferrocoll::MemType;

use crate::abi::{self, *};
use crate::coll_args::{is_v, sides};
use crate::types;

/// Words of a key.
const WORDS: usize = 17;

/// The raw arguments of a call (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CallKey([u64; WORDS]);

/// Read one field of the caller's struct (as `coll_args.rs` does).
macro_rules! field {
    ($p:expr, $($f:tt)+) => {
        // SAFETY: the caller's struct, read field by field, each only where
        // `translate` reads it (every use below is guarded so).
        unsafe { (&raw const (*$p).$($f)+).read_unaligned() }
    };
}

/// The key of the call `p` describes for team rank `rank`, if it has one.
///
/// # Safety
/// `p` points to a `ucc_coll_args_t` whose fields are set as UCC requires
/// for this collective (as for `translate`).
pub(crate) unsafe fn call_key(
    p: *const abi::CollArgs,
    rank: usize,
    resolve: &dyn Fn(*const u8) -> MemType,
) -> Option<CallKey> {
    let mut k = [0u64; WORDS];
    let mask: u64 = field!(p, mask);
    if mask & ARGS_FIELD_ACTIVE_SET != 0 {
        return None;
    }
    let raw_coll: u32 = field!(p, coll_type);
    let coll = types::coll_type(raw_coll, "").ok()?;
    if is_v(coll, true) || is_v(coll, false) {
        return None;
    }
    k[0] = mask;
    k[1] = u64::from(raw_coll);
    let flags: u64 = if mask & ARGS_FIELD_FLAGS != 0 { field!(p, flags) } else { 0 };
    k[2] = flags;
    if coll.is_reduction() {
        k[3] = u64::from(field!(p, op));
    }
    let mut root = 0;
    if coll.is_rooted() {
        root = field!(p, root);
        k[4] = root;
    }
    if mask & ARGS_FIELD_TAG != 0 {
        k[5] = u64::from(field!(p, tag));
    }
    if flags & ferrocoll::CollFlags::TIMEOUT.0 != 0 {
        k[6] = f64::to_bits(field!(p, timeout));
    }
    if mask & ARGS_FIELD_CB != 0 {
        let cb: CollCallback = field!(p, cb);
        k[7] = cb.cb.map_or(0, |f| f as usize as u64);
        k[8] = cb.data as usize as u64;
    }
    let in_place = flags & ferrocoll::CollFlags::IN_PLACE.0 != 0;
    let (read_src, read_dst) = sides(coll, in_place, root == rank as u64);
    let side = |info: abi::BufferInfo, at: &mut [u64]| -> Option<()> {
        let mem_type = match info.mem_type {
            t if t == MemType::Unknown as u32 => resolve(info.buffer.cast_const().cast()) as u32,
            t => t,
        };
        at.copy_from_slice(&[info.buffer as usize as u64, info.count, info.datatype, u64::from(mem_type)]);
        Some(())
    };
    if read_src {
        side(field!(p, src.info), &mut k[9..13])?;
    }
    if read_dst {
        side(field!(p, dst.info), &mut k[13..17])?;
    }
    Some(CallKey(k))
}

#[cfg(test)]
mod tests {
    use ferrocoll::CollType;

    use super::*;

    fn args(coll: CollType) -> abi::CollArgs {
        // SAFETY: all-zero is a valid `ucc_coll_args_t` (mask 0, NULL buffers).
        let mut a: abi::CollArgs = unsafe { std::mem::zeroed() };
        a.coll_type = coll as u32;
        a
    }

    fn info(buffer: usize, count: u64) -> abi::BufferInfo {
        abi::BufferInfo { buffer: buffer as *mut std::ffi::c_void, count, datatype: 0, mem_type: MemType::Host as u32 }
    }

    /// Equal calls have equal keys; a change in any field the call reads
    /// changes the key; a field it does not read (a bcast's dst) does not.
    #[test]
    fn keys_change_with_what_the_call_reads() {
        let mut a = args(CollType::Allreduce);
        a.src.info = info(0x1000, 4);
        a.dst.info = info(0x2000, 4);
        // SAFETY: `a` is set for an allreduce.
        let key = |a: &abi::CollArgs| unsafe { call_key(a, 0, &|_| MemType::Host) };
        let k = key(&a).expect("an allreduce on host buffers has a key");
        assert_eq!(key(&a), Some(k));
        let mut b = a;
        b.dst.info = info(0x3000, 4);
        assert_ne!(key(&b), Some(k), "another destination");
        let mut b = a;
        b.src.info = info(0x1000, 5);
        assert_ne!(key(&b), Some(k), "another count");
        let mut b = a;
        b.op = 2;
        assert_ne!(key(&b), Some(k), "another reduction");
        let mut b = a;
        b.mask = ARGS_FIELD_FLAGS;
        b.flags = ferrocoll::CollFlags::IN_PLACE.0;
        assert_ne!(key(&b), Some(k), "in place");
        let mut b = a;
        b.mask = ARGS_FIELD_CB;
        assert_ne!(key(&b), Some(k), "a callback");

        let mut c = args(CollType::Bcast);
        c.src.info = info(0x1000, 4);
        let kc = key(&c).expect("a bcast has a key");
        c.dst.info = info(0x9000, 9);
        assert_eq!(key(&c), Some(kc), "a bcast never reads dst");
        c.root = 1;
        assert_ne!(key(&c), Some(kc), "another root");
    }

    /// No key where the arguments alone do not decide the call; a buffer of
    /// unknown memory type is keyed with the type its address has now.
    #[test]
    fn no_key_for_arrays_or_active_sets_and_unknown_memory_resolved() {
        use CollType::*;
        for coll in [Allgatherv, Alltoallv, Gatherv, Scatterv, ReduceScatterv] {
            // SAFETY: a v-collective has no key before any buffer is read.
            assert_eq!(unsafe { call_key(&args(coll), 1, &|_| MemType::Host) }, None, "{coll:?}");
        }
        let mut a = args(CollType::Allreduce);
        a.src.info = info(0x1000, 4);
        let known = a;
        a.dst.info = abi::BufferInfo { mem_type: MemType::Unknown as u32, ..info(0x2000, 4) };
        let mut b = known;
        b.dst.info = info(0x2000, 4);
        // SAFETY: set for an allreduce (so are `b` and, below, `a` again).
        let host = unsafe { call_key(&a, 0, &|_| MemType::Host) };
        assert!(host.is_some());
        // SAFETY: as above.
        let explicit = unsafe { call_key(&b, 0, &|_| MemType::Host) };
        assert_eq!(host, explicit, "unknown resolved to host: the host key");
        // SAFETY: as above.
        let cuda = unsafe { call_key(&a, 0, &|_| MemType::Cuda) };
        assert_ne!(host, cuda, "the same address, now device memory: another key");
        let mut s = args(CollType::Bcast);
        s.mask = ARGS_FIELD_ACTIVE_SET;
        // SAFETY: set for a bcast.
        assert_eq!(unsafe { call_key(&s, 0, &|_| MemType::Host) }, None, "active set");
    }
}
