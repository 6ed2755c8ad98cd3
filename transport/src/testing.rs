//! What the transports' unit tests share: a message key, call signatures,
//! a `MemRef` over a test buffer, and seeded bytes that differ per seed.

use ferrocoll_core::args::Signature;
use ferrocoll_core::{CollType, DataType, MemRef, ReduceOp};

use crate::p2p::MsgKey;

/// A key of team 7, sequence number 1, from rank 0, with step tag `tag`.
pub(crate) fn key(tag: u32) -> MsgKey {
    MsgKey { team: 7, seq: 1, tag, src: 0 }
}

/// The call the tests' messages belong to: "allreduce sum float32 of 1024 elements".
pub(crate) fn sig() -> Signature {
    call(ReduceOp::Sum)
}

/// An allreduce `op` float32 of 1024 elements (`call(ReduceOp::Max)` disagrees with [`sig`]).
pub(crate) fn call(op: ReduceOp) -> Signature {
    Signature::new(CollType::Allreduce, Some((DataType::Float32, op)), 0, 1024)
}

/// `v` as a `MemRef`.
pub(crate) fn mem(v: &mut [u8]) -> MemRef {
    // SAFETY: the tests keep `v` alive and untouched while the MemRef is used.
    unsafe { MemRef::from_mut_slice(v) }
}

/// `len` seeded bytes (xorshift), different per seed.
pub(crate) fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// The rules of [`Transport::stray`](crate::Transport::stray) that every
/// transport keeps, checked on endpoint `t`, which holds, from endpoint 0,
/// one message of `key(5)` posted as `call(ReduceOp::Max)` (`found`: what
/// `t.stray(0, &key(0), &sig())` said). The message stays where it is.
pub(crate) fn assert_stray_rules(t: &dyn crate::Transport, found: Option<(MsgKey, Signature)>) {
    assert_eq!(found, Some((key(5), call(ReduceOp::Max))), "another tag, and a call that differs");
    assert_eq!(t.stray(0, &key(0), &sig()), found, "left in place");
    assert!(t.stray(0, &key(0), &call(ReduceOp::Max)).is_none(), "a call that agrees");
    assert!(t.stray(0, &MsgKey { seq: 2, ..key(0) }, &sig()).is_none(), "another collective");
    assert!(t.stray(0, &MsgKey { team: 8, ..key(0) }, &sig()).is_none(), "another team");
    assert!(t.stray(0, &MsgKey { src: 1, ..key(0) }, &sig()).is_none(), "another sender");
    let any = t.find_arrived(None, &|k, _| k.tag == 5);
    assert_eq!(any, found, "found among every sender's messages");
    assert!(t.find_arrived(None, &|k, _| k.seq != 1).is_none(), "only what the pick accepts");
}
