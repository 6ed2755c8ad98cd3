//! Completion slots are shared memory: a forged or stuck slot holds no
//! dropped send for ever, and a read its sender retracted fails the receive.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ferrocoll_core::config::Config;

use super::ShmTransport;
use super::ring::Producer;
use super::segment::{OwnedSegment, open_peer};
use super::send::TAKEN_PATIENCE;
use super::tests::{cma_missing, group, job, send, uses_cma};
use super::wire::slot;
use crate::p2p::{SendHandle, Transport};
use crate::testing::{key, mem, pattern, sig};

/// Drop `h` on a thread of its own: whether the drop returned within `within`
/// (one that never returns is left spinning, and its buffer leaked for it).
fn dropped_within(h: Box<dyn SendHandle>, within: Duration) -> bool {
    let (done, returned) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(h);
        let _ = done.send(());
    });
    returned.recv_timeout(within).is_ok()
}

/// The slot of the one rendezvous `t` has queued, and its generation.
fn queued_slot(t: &ShmTransport) -> (u32, u64) {
    let i = (0..4096).find(|&i| slot::split(t.slot_word(i).load(Ordering::Relaxed)).1 == slot::QUEUED).unwrap();
    (i, slot::split(t.slot_word(i).load(Ordering::Relaxed)).0)
}

/// A completion slot is shared memory: a TAKEN that is not this message's
/// (another generation), or one its "receiver" never finishes, does not
/// hold a dropped send forever. The second is retracted after
/// `TAKEN_PATIENCE`, and a receiver that finds it so fails its receive.
#[test]
fn a_dropped_rendezvous_does_not_wait_for_a_forged_or_stuck_slot() {
    let ts = group("dropforged", 2, &Config::new());
    let (a, b) = (&ts[0], &ts[1]);
    if !uses_cma(a, 1) {
        eprintln!("skipped: no rendezvous by CMA between these endpoints");
        return;
    }
    let h = send(a, 1, key(7), Box::leak(pattern(100_000, 1).into_boxed_slice()));
    b.progress().unwrap();
    let (i, generation) = queued_slot(a);
    a.slot_word(i).store(slot::word(generation + 1, slot::TAKEN), Ordering::Relaxed);
    assert!(dropped_within(h, Duration::from_secs(5)), "a TAKEN of another generation held the drop");

    let h = send(a, 1, key(8), Box::leak(pattern(100_000, 2).into_boxed_slice()));
    b.progress().unwrap();
    let (i, generation) = queued_slot(a);
    a.slot_word(i).store(slot::word(generation, slot::TAKEN), Ordering::Relaxed);
    let start = Instant::now();
    assert!(dropped_within(h, TAKEN_PATIENCE * 3), "a TAKEN never finished held the drop");
    assert!(start.elapsed() >= TAKEN_PATIENCE, "gave up on a live reader early");
    assert_eq!(a.slot_word(i).load(Ordering::Relaxed), slot::word(generation, slot::CANCELLED));
    // Neither is offered to a receive any more.
    for k in [key(7), key(8)] {
        assert!(b.try_recv(0, &k, &sig(), mem(&mut vec![0u8; 100_000])).is_pending());
    }
}

/// The receiver's side of a retraction: a read over by the time its sender
/// retracted the slot (TAKEN too long, or a slot overwritten) is not the
/// sender's data, and fails the receive instead of completing it.
#[test]
fn a_rendezvous_retracted_while_it_is_read_fails_the_receive() {
    use std::sync::{Arc, Mutex};

    use super::health::Health;
    use super::peer::Peer;
    use super::pool::BufPool;
    use super::recv::{Arrived, deliver};
    use super::send::Outbox;
    use super::wire::RndvDesc;

    if let Some(why) = cma_missing() {
        eprintln!("skipped: this host refuses CMA ({why})");
        return;
    }
    let me = std::process::id();
    let owner = OwnedSegment::create(&job("retract"), 0, 2, 4096, 4).unwrap();
    let seg = open_peer(owner.name(), me, 0, 2, 1).unwrap();
    let ring = Producer::new(seg.ring.clone(), 0, seg.header.ring_size as usize).unwrap();
    let outbox = Mutex::new(Outbox::new(ring));
    let peer = Arc::new(Peer {
        ep: 0,
        proc: crate::liveness::Proc::of(me),
        seg,
        outbox,
        health: Health::default(),
        cause_taken: AtomicBool::new(false),
    });
    let (src, generation) = (pattern(1000, 5), 3);
    let desc = RndvDesc { pid: me, slot: 0, generation, addr: src.as_ptr() as u64 };
    let pool = BufPool::new(64);
    let deliver_with = |state: u8, buf: &mut Vec<u8>| {
        peer.slot(0).unwrap().store(slot::word(generation, state), Ordering::Relaxed);
        let a = Arrived::Rndv { peer: peer.clone(), sig: sig(), len: src.len(), desc };
        deliver(a, &key(1), &sig(), mem(buf), &pool)
    };
    let mut buf = vec![0u8; 1000];
    let e = deliver_with(slot::CANCELLED, &mut buf).expect_err("a retracted read").to_string();
    assert!(e.contains("endpoint 0 retracted") && e.contains("while this endpoint read it"), "{e}");
    let mut buf = vec![0u8; 1000];
    deliver_with(slot::TAKEN, &mut buf).expect("a read its sender waited for");
    assert_eq!((buf, peer.slot(0).unwrap().load(Ordering::Relaxed)), (src.clone(), slot::word(generation, slot::DONE)));
}
