//! Transport tests: several `ShmTransport`s inside this one test process,
//! connected by hand (the transport does not care that its peers share its
//! process; only the router would prefer the in-process transport).

use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};

use ferrocoll_core::config::Config;
use ferrocoll_core::{ProcInfo, ReduceOp, Result, Status};

use super::ShmTransport;
use super::ring::Producer;
use super::segment::{OwnedSegment, open_peer};
use super::wire::{self, Address, Kind, Record, slot};
use crate::p2p::{MsgKey, SendHandle, Transport, TransportPeer};
use crate::shmem::{NAME_PREFIX, SHM_DIR};
use crate::testing::{assert_stray_rules, call, key, mem, pattern, sig};

pub(super) fn job(name: &str) -> String {
    format!("shmt-{name}-{}", std::process::id())
}

/// This job's names in /dev/shm.
fn files(job: &str) -> Vec<String> {
    let prefix = format!("{NAME_PREFIX}{job}-");
    let mut v: Vec<String> = std::fs::read_dir(SHM_DIR)
        .map(|d| d.filter_map(|e| e.ok()?.file_name().into_string().ok()).filter(|n| n.starts_with(&prefix)).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// Why CMA cannot work in this process at all (qemu-user: ENOSYS; a
/// seccomp filter: EPERM), or `None`: a read of its own memory is always
/// allowed where the system call exists.
pub(super) fn cma_missing() -> Option<String> {
    let word = 0x5eed_cafe_u64;
    crate::cma::probe(std::process::id(), &word as *const u64 as u64, word).err()
}

/// Whether `t` reads endpoint `peer` by CMA: it must where this host allows
/// CMA; where it does not, the test says so and checks the streamed path.
pub(super) fn uses_cma(t: &ShmTransport, peer: usize) -> bool {
    match cma_missing() {
        None => {
            assert!(t.cma_to(peer), "CMA works in this process, but the transport does not use it");
            true
        }
        Some(why) => {
            eprintln!("this host refuses CMA ({why}): the rendezvous checks are skipped");
            assert!(!t.cma_to(peer), "the transport uses CMA where it cannot work");
            false
        }
    }
}

fn config(pairs: &[(&str, &str)]) -> Config {
    let mut c = Config::new();
    for (k, v) in pairs {
        c.set(k, *v);
    }
    c
}

fn create(job: &str, n: usize, c: &Config) -> Vec<ShmTransport> {
    (0..n).map(|ep| ShmTransport::new(job, ep, n, c).unwrap()).collect()
}

fn peers(ts: &[ShmTransport]) -> Vec<TransportPeer> {
    let proc = ProcInfo::local();
    ts.iter().enumerate().map(|(ep, t)| TransportPeer { ep, proc: proc.clone(), addr: t.address() }).collect()
}

/// Connect every transport to all the others (not yet `connected()`).
fn connect_all(ts: &[ShmTransport]) {
    let all = peers(ts);
    for (ep, t) in ts.iter().enumerate() {
        let others: Vec<_> = all.iter().filter(|p| p.ep != ep).cloned().collect();
        t.connect(ts.len(), &others).unwrap();
    }
}

pub(super) fn group(name: &str, n: usize, c: &Config) -> Vec<ShmTransport> {
    let ts = create(&job(name), n, c);
    connect_all(&ts);
    ts.iter().for_each(|t| t.connected().unwrap());
    ts
}

/// Poll `f` until ready, progressing `ts` in between (a test that makes no
/// progress for 20 s fails rather than hangs).
fn poll<T>(ts: &[&ShmTransport], mut f: impl FnMut() -> Poll<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Poll::Ready(v) = f() {
            return v;
        }
        ts.iter().for_each(|t| t.progress().unwrap());
        assert!(Instant::now() < deadline, "no progress for 20 s");
        std::thread::yield_now();
    }
}

fn recv(ts: &[&ShmTransport], rx: &ShmTransport, src: usize, k: MsgKey, len: usize) -> Result<Vec<u8>> {
    let mut buf = vec![0xEE; len];
    poll(ts, || rx.try_recv(src, &k, &sig(), mem(&mut buf)))?;
    Ok(buf)
}

pub(super) fn send(t: &ShmTransport, dst: usize, k: MsgKey, data: &mut [u8]) -> Box<dyn SendHandle> {
    t.send(dst, k, sig(), mem(data)).unwrap()
}

#[test]
fn eager_and_large_messages_arrive_in_order_by_cma() {
    let ts = group("order", 2, &Config::new());
    let (a, b) = (&ts[0], &ts[1]);
    if !(uses_cma(a, 1) && uses_cma(b, 0)) {
        return;
    }
    let mut msgs = vec![pattern(100, 1), pattern(1 << 20, 2), pattern(8192, 3), pattern(0, 4), pattern(300_000, 5)];
    let expect = msgs.clone();
    let mut hs: Vec<_> = msgs.iter_mut().map(|m| send(a, 1, key(0), m)).collect();
    assert!(hs[0].test().is_ready() && hs[2].test().is_ready() && hs[3].test().is_ready());
    assert!(hs[1].test().is_pending(), "a rendezvous completes only once read");
    for m in &expect {
        assert_eq!(&recv(&[a], b, 0, key(0), m.len()).unwrap(), m);
    }
    for h in &mut hs {
        assert!(matches!(h.test(), Poll::Ready(Ok(()))));
    }
    assert!(b.try_recv(0, &key(0), &sig(), mem(&mut [0u8; 1])).is_pending());
}

#[test]
fn fragments_stream_when_cma_is_off() {
    let c = config(&[("TL_P2P_SHM_CMA", "n"), ("TL_P2P_SHM_RING_SIZE", "64k")]);
    let ts = group("frag", 2, &c);
    let (a, b) = (&ts[0], &ts[1]);
    assert!(!a.cma_to(1));
    let mut msgs = vec![pattern(1 << 20, 1), pattern(100_000, 2), pattern(3, 3), pattern(65_536, 4)];
    let expect = msgs.clone();
    let mut hs: Vec<_> = msgs.iter_mut().map(|m| send(a, 1, key(1), m)).collect();
    assert!(hs[0].test().is_pending(), "1 MiB does not fit a 64 KiB ring");
    for m in &expect {
        assert_eq!(&recv(&[a], b, 0, key(1), m.len()).unwrap(), m);
    }
    for h in &mut hs {
        assert!(matches!(poll(&[a], || h.test()), Ok(())));
    }
}

#[test]
fn a_message_of_another_call_under_another_tag_is_found_and_left() {
    let ts = group("stray", 2, &Config::new());
    let (a, b) = (&ts[0], &ts[1]);
    for len in [64, 300_000] {
        // Eager, and rendezvous (its descriptor has arrived).
        let mut m = pattern(len, 1);
        let mut h = a.send(1, key(5), call(ReduceOp::Max), mem(&mut m)).unwrap();
        let found = poll(&[a, b], || b.stray(0, &key(0), &sig()).map_or(Poll::Pending, |f| Poll::Ready(Some(f))));
        assert_stray_rules(b, found);
        let mut got = vec![0u8; len];
        poll(&[a, b], || b.try_recv(0, &key(5), &call(ReduceOp::Max), mem(&mut got))).unwrap();
        assert!(got == m && b.stray(0, &key(0), &sig()).is_none(), "taken whole ({len})");
        poll(&[a, b], || h.test()).unwrap();
    }
}

#[test]
fn unexpected_messages_wait_for_their_receive() {
    let ts = group("unexp", 3, &Config::new());
    let mut msgs: Vec<Vec<u8>> = (0..40u64).map(|i| pattern((i as usize * 7919) % 40_000, i)).collect();
    let expect = msgs.clone();
    let mut hs = Vec::new();
    for (i, m) in msgs.iter_mut().enumerate() {
        let k = MsgKey { tag: i as u32, ..key(0) };
        hs.push(send(&ts[(i % 2) * 2], 1, k, m));
    }
    for (i, m) in expect.iter().enumerate().rev() {
        let k = MsgKey { tag: i as u32, ..key(0) };
        assert_eq!(&recv(&[&ts[0], &ts[2]], &ts[1], (i % 2) * 2, k, m.len()).unwrap(), m, "message {i}");
    }
    for h in &mut hs {
        assert!(matches!(h.test(), Poll::Ready(Ok(()))));
    }
}

#[test]
fn a_full_ring_queues_sends_in_order() {
    let c = config(&[("TL_P2P_SHM_RING_SIZE", "4k"), ("TL_P2P_SHM_EAGER_SIZE", "1k")]);
    for cma in ["y", "n"] {
        let ts = group(&format!("full{cma}"), 2, &config(&[("TL_P2P_SHM_CMA", cma)]).merged(&c));
        let (a, b) = (&ts[0], &ts[1]);
        let mut msgs: Vec<Vec<u8>> =
            (0..300u64).map(|i| pattern(if i % 50 == 7 { 5000 } else { 900 + i as usize % 100 }, i)).collect();
        let expect = msgs.clone();
        let mut hs: Vec<_> = msgs.iter_mut().map(|m| send(a, 1, key(2), m)).collect();
        assert!(hs[0].test().is_ready(), "an eager send that went into the ring is complete at once");
        assert!(hs[20].test().is_pending(), "one that waits for ring space is not");
        for (i, m) in expect.iter().enumerate() {
            assert_eq!(&recv(&[a], b, 0, key(2), m.len()).unwrap(), m, "message {i} ({cma})");
        }
        for h in &mut hs {
            assert!(matches!(poll(&[a], || h.test()), Ok(())));
        }
    }
}

/// A sender whose sends are complete may close at once: what it sent is in
/// the receiver's ring, not in its own memory (with a full ring, eager sends
/// used to complete while queued, and a close dropped the queue: the
/// receiver then found its peer gone and its messages lost).
#[test]
fn a_sender_that_closes_once_its_sends_are_complete_loses_nothing() {
    let c = config(&[("TL_P2P_SHM_RING_SIZE", "4k"), ("TL_P2P_SHM_EAGER_SIZE", "1k"), ("TL_P2P_SHM_CMA", "n")]);
    let ts = group("close", 2, &c);
    let (a, b) = (&ts[0], &ts[1]);
    // All eager: at most a quarter of the ring each.
    let mut msgs: Vec<Vec<u8>> = (0..300u64).map(|i| pattern(500 + i as usize % 100, i)).collect();
    let expect = msgs.clone();
    let mut hs: Vec<_> = msgs.iter_mut().map(|m| send(a, 1, key(4), m)).collect();
    // The receiver takes only what the sender needs to complete every send.
    let mut next = 0;
    while hs.iter_mut().any(|h| h.test().is_pending()) {
        assert_eq!(recv(&[a], b, 0, key(4), expect[next].len()).unwrap(), expect[next], "message {next}");
        next += 1;
    }
    assert!(next < expect.len() - 1, "the test needs messages left in the ring at the close ({next} taken)");
    a.close();
    for (i, m) in expect.iter().enumerate().skip(next) {
        assert_eq!(&recv(&[], b, 0, key(4), m.len()).unwrap(), m, "message {i}, after the sender closed");
    }
}

#[test]
fn size_mismatch_fails_the_receive_and_the_rendezvous_sender() {
    for cma in ["y", "n"] {
        let ts = group(&format!("size{cma}"), 2, &config(&[("TL_P2P_SHM_CMA", cma)]));
        let (a, b) = (&ts[0], &ts[1]);
        let mut small = pattern(100, 1);
        let mut big = pattern(200_000, 2);
        let _h1 = send(a, 1, key(3), &mut small);
        let mut h2 = send(a, 1, key(3), &mut big);
        let e = recv(&[a], b, 0, key(3), 99).unwrap_err().to_string();
        assert!(e.contains("has 100 bytes but the receive expects 99"), "{e}");
        let e = recv(&[a], b, 0, key(3), 200_001).unwrap_err().to_string();
        assert!(e.contains("has 200000 bytes but the receive expects 200001"), "{e}");
        let r = poll(&[a], || h2.test());
        if cma == "y" && uses_cma(a, 1) {
            let e = r.unwrap_err().to_string();
            assert!(e.contains("another size"), "{e}");
        } else {
            assert!(r.is_ok(), "a streamed message is complete once in the ring");
        }
    }
}

#[test]
fn a_message_of_another_call_fails_the_receive_naming_both_calls() {
    for cma in ["y", "n"] {
        let ts = group(&format!("call{cma}"), 2, &config(&[("TL_P2P_SHM_CMA", cma)]));
        let (a, b) = (&ts[0], &ts[1]);
        // Eager, and rendezvous (CMA) or streamed: the sizes match, the calls do not.
        let (mut small, mut big) = (pattern(100, 1), pattern(200_000, 2));
        let mut h1 = a.send(1, key(3), call(ReduceOp::Max), mem(&mut small)).unwrap();
        let mut h2 = a.send(1, key(3), call(ReduceOp::Max), mem(&mut big)).unwrap();
        for len in [100, 200_000] {
            let mut buf = vec![0xEE; len];
            let e = poll(&[a], || b.try_recv(0, &key(3), &sig(), mem(&mut buf))).unwrap_err();
            assert_eq!(e.status(), Status::InvalidParam, "{e}");
            let text = e.to_string();
            assert!(text.contains("calls differ: rank 0 posted allreduce max float32 of 1024 elements"), "{text}");
            assert!(text.contains("this rank posted allreduce sum float32 of 1024 elements"), "{text}");
            assert!(buf.iter().all(|&x| x == 0xEE), "bytes reached the receive buffer ({cma}, {len})");
        }
        assert!(matches!(h1.test(), Poll::Ready(Ok(()))));
        let r = poll(&[a], || h2.test());
        if cma == "y" && uses_cma(a, 1) {
            let e = r.unwrap_err();
            assert_eq!(e.status(), Status::InvalidParam, "{e}");
            let e = e.to_string();
            assert!(e.contains("endpoint 1 rejected") && e.contains("another call"), "{e}");
        } else {
            assert!(r.is_ok(), "a streamed message is complete once in the ring");
        }
        // Both were taken out of the queue; the next messages go through.
        assert!(b.try_recv(0, &key(3), &sig(), mem(&mut [0u8; 100])).is_pending());
        let mut next = pattern(300_000, 3);
        let mut h3 = send(a, 1, key(4), &mut next);
        assert_eq!(recv(&[a], b, 0, key(4), next.len()).unwrap(), next);
        assert!(poll(&[a], || h3.test()).is_ok());
    }
}

#[test]
fn dropped_sends_are_retracted_or_kept_whole() {
    // A rendezvous dropped before the receiver took it is retracted.
    let ts = group("dropr", 2, &Config::new());
    let (a, b) = (&ts[0], &ts[1]);
    if uses_cma(a, 1) {
        let mut first = pattern(100_000, 1);
        let mut second = pattern(100_000, 2);
        drop(send(a, 1, key(5), &mut first));
        first.fill(0);
        let mut h = send(a, 1, key(5), &mut second);
        assert_eq!(recv(&[a], b, 0, key(5), second.len()).unwrap(), second);
        assert!(matches!(h.test(), Poll::Ready(Ok(()))));
    }

    // A stream dropped midway copies its rest: the receiver gets it whole.
    let c = config(&[("TL_P2P_SHM_CMA", "n"), ("TL_P2P_SHM_RING_SIZE", "16k")]);
    let ts = group("dropf", 2, &c);
    let (a, b) = (&ts[0], &ts[1]);
    let mut data = pattern(500_000, 3);
    let expect = data.clone();
    let mut h = send(a, 1, key(6), &mut data);
    assert!(h.test().is_pending());
    drop(h);
    data.fill(0);
    drop(data);
    assert_eq!(recv(&[a], b, 0, key(6), expect.len()).unwrap(), expect);
}

#[test]
fn a_dropped_rendezvous_waits_while_the_receiver_reads() {
    let ts = group("dropw", 2, &Config::new());
    let (a, b) = (&ts[0], &ts[1]);
    if !uses_cma(a, 1) {
        return;
    }
    let mut data = pattern(100_000, 1);
    let h = send(a, 1, key(7), &mut data);
    b.progress().unwrap();
    // Pretend the receiver took the message and is reading it.
    let i = (0..4096).find(|&i| slot::split(a.slot_word(i).load(Ordering::Relaxed)).1 == slot::QUEUED).unwrap();
    let w = a.slot_word(i);
    let generation = slot::split(w.load(Ordering::Relaxed)).0;
    w.store(slot::word(generation, slot::TAKEN), Ordering::Relaxed);
    let dropped = AtomicBool::new(false);
    std::thread::scope(|sc| {
        sc.spawn(|| {
            drop(h);
            dropped.store(true, Ordering::Release);
        });
        std::thread::sleep(Duration::from_millis(50));
        assert!(!dropped.load(Ordering::Acquire), "the drop must wait for the reader");
        w.store(slot::word(generation, slot::DONE), Ordering::Release);
    });
    assert!(dropped.load(Ordering::Acquire));
    // The receiver finds the message no longer queued and skips it.
    assert!(b.try_recv(0, &key(7), &sig(), mem(&mut vec![0u8; 100_000])).is_pending());
}

#[test]
fn a_peer_that_closes_cleanly_has_left_not_failed() {
    let ts = group("close", 2, &Config::new());
    let (a, b) = (&ts[0], &ts[1]);
    // The large send to the closing endpoint is a rendezvous it rejects.
    if !uses_cma(b, 0) {
        return;
    }
    let mut last = pattern(500, 1);
    let mut big = pattern(100_000, 2);
    let _ = send(a, 1, key(8), &mut last);
    let mut to_a = send(b, 0, key(9), &mut big);
    a.progress().unwrap();
    a.close();
    // What it sent before closing is delivered; then receives from it fail.
    assert_eq!(recv(&[], b, 0, key(8), 500).unwrap(), last);
    let e = recv(&[], b, 0, key(8), 500).unwrap_err();
    assert_eq!((e.status(), e.context()), (Status::IoError, "endpoint 0 left"));
    assert!(b.failed(0).is_none(), "leaving is not failing");
    let e = poll(&[b], || to_a.test()).unwrap_err().to_string();
    assert!(e.contains("endpoint 0 rejected") && e.contains("closed first"), "{e}");
    assert!(b.send(0, key(10), sig(), mem(&mut [1u8; 4])).is_err());
    assert!(a.send(1, key(10), sig(), mem(&mut [1u8; 4])).is_err(), "a closed transport sends nothing");
}

#[test]
fn a_corrupt_record_fails_only_its_sender() {
    let j = job("corrupt");
    let ts = create(&j, 3, &Config::new());
    connect_all(&ts);
    let (b, c) = (&ts[1], &ts[2]);
    // Write, as endpoint 0 would, a record with a bad magic into b's ring.
    let seg = open_peer(b.segment_name(), std::process::id(), 1, 3, 0).unwrap();
    let mut ring = Producer::new(seg.ring.clone(), 0, seg.header.ring_size as usize).unwrap();
    let mut rec =
        Record { kind: Kind::Eager, key: key(11), sig: sig(), chunk_len: 8, total_len: 8, offset: 0 }.encode();
    rec[0] ^= 0xFF;
    assert!(ring.push(&[&rec, &[0u8; 8]]).unwrap());
    ts.iter().for_each(|t| t.connected().unwrap());
    let e = recv(&[], b, 0, key(11), 8).unwrap_err().to_string();
    assert!(e.contains("endpoint 0 sent a corrupt message") && e.contains("magic"), "{e}");
    assert!(b.failed(0).is_some());
    let mut fine = pattern(64, 1);
    let _ = send(c, 1, key(11), &mut fine);
    assert_eq!(recv(&[], b, 2, key(11), 64).unwrap(), fine);
    assert!(b.failed(2).is_none());
}

#[test]
fn a_closing_endpoint_names_the_failure_it_leaves_because_of() {
    let ts = group("cause", 3, &Config::new());
    ts[2].set_cause(1);
    ts[2].close();
    ts[1].close();
    // Peers' segments are checked at most every SCAN_INTERVAL.
    let causes = poll(&[&ts[0]], || match ts[0].take_causes() {
        c if c.is_empty() => Poll::Pending,
        c => Poll::Ready(c),
    });
    assert_eq!(causes, vec![(2, 1)], "endpoint 1 closed naming nothing");
    assert!(ts[0].failed(1).is_none(), "the transport reports what it saw itself only");
    assert!(ts[0].take_causes().is_empty(), "each cause is handed out once");
}

#[test]
fn names_are_unlinked_once_connected_and_nothing_is_left() {
    let j = job("files");
    let ts = create(&j, 3, &Config::new());
    // `ferrocoll-<job>-<endpoint>-<16 hex digits of nonce>-<owner tag>`.
    let names = files(&j);
    assert_eq!(names.len(), 3, "{names:?}");
    for (ep, n) in names.iter().enumerate() {
        let rest = n.strip_prefix(&format!("ferrocoll-{j}-{ep}-")).unwrap_or_else(|| panic!("{n}"));
        let (nonce, owner) = rest.split_once('-').unwrap_or_else(|| panic!("{n}"));
        assert!(nonce.len() == 16 && nonce.chars().all(|c| c.is_ascii_hexdigit()), "{n}");
        assert_eq!(owner, crate::shmem::Owner::me().tag(), "{n}");
    }
    connect_all(&ts);
    assert_eq!(files(&j).len(), 3);
    ts.iter().for_each(|t| t.connected().unwrap());
    assert!(files(&j).is_empty());
    let mut m = pattern(1000, 1);
    let _ = send(&ts[0], 2, key(12), &mut m);
    assert_eq!(recv(&[], &ts[2], 0, key(12), 1000).unwrap(), m, "mapped segments outlive their names");
    drop(ts);

    // Never connected: dropping removes the name.
    let t = ShmTransport::new(&j, 0, 2, &Config::new()).unwrap();
    assert_eq!(files(&j).len(), 1);
    // Another transport of the same endpoint (a second context) gets a name of its own.
    let t2 = ShmTransport::new(&j, 0, 2, &Config::new()).unwrap();
    assert_eq!(files(&j).len(), 2);
    drop((t, t2));
    assert!(files(&j).is_empty());
    drop(ShmTransport::new(&j, 0, 2, &Config::new()).unwrap());
    assert!(files(&j).is_empty());

    // A group of one needs no shared memory.
    let e = ShmTransport::new(&j, 0, 1, &Config::new()).err().unwrap();
    assert_eq!(e.status(), Status::NotSupported);
    // A bad address fails connect, naming the endpoint.
    let t = ShmTransport::new(&j, 0, 2, &Config::new()).unwrap();
    let bad = TransportPeer { ep: 1, proc: ProcInfo::local(), addr: vec![1, 2, 3] };
    let e = t.connect(2, &[bad]).unwrap_err().to_string();
    assert!(e.contains("endpoint 1"), "{e}");
    drop(t);
    assert!(files(&j).is_empty());
}

#[test]
fn reaches_other_processes_of_the_same_host_only() {
    let t = ShmTransport::new(&job("reach"), 0, 2, &Config::new()).unwrap();
    let me = ProcInfo::local();
    let other = ProcInfo { pid: me.pid + 1, ..me.clone() };
    let remote = ProcInfo { host: format!("{}-elsewhere", me.host), ..other.clone() };
    assert!(t.reaches(&me, &other) && !t.reaches(&me, &me) && !t.reaches(&me, &remote));
}

/// Endpoint 0 is a crafted segment owned by a child process (`sleep`), which
/// the test kills: endpoint 1 must report it failed, still deliver what it
/// "sent" before dying, and release sends it had queued for it.
#[test]
fn a_dead_process_is_failed_after_its_last_messages() {
    let Ok(mut child) = std::process::Command::new("sleep").arg("30").spawn() else {
        eprintln!("skipped: cannot spawn `sleep`");
        return;
    };
    let cpid = child.id();
    let j = job("dead");
    let b = ShmTransport::new(&j, 1, 2, &Config::new()).unwrap();
    let fake = OwnedSegment::create(&j, 0, 2, 64 * 1024, 16).unwrap();
    let header = wire::SegHeader { pid: cpid, ..fake.header }.encode();
    // SAFETY: the test owns this fresh mapping of at least one page; no other
    // thread or process reads it yet.
    unsafe { std::ptr::copy_nonoverlapping(header.as_ptr(), fake.map.ptr(), header.len()) };
    // "Endpoint 0 can CMA-read endpoint 1", so b's large sends to it use rendezvous.
    fake.map.u8_at(wire::H_CMA + 1).unwrap().store(wire::CMA_YES, Ordering::Relaxed);
    let addr = Address { pid: cpid, probe_addr: 8, name: fake.name().to_string() }.encode();
    let proc = ProcInfo { pid: cpid, ..ProcInfo::local() };
    b.connect(2, &[TransportPeer { ep: 0, proc, addr }]).unwrap();
    // Its last words, in b's ring as it would have written them.
    let seg = open_peer(b.segment_name(), std::process::id(), 1, 2, 0).unwrap();
    let mut ring = Producer::new(seg.ring.clone(), 0, seg.header.ring_size as usize).unwrap();
    let words = b"last words before dying".to_vec();
    let rec = Record { kind: Kind::Eager, key: key(13), sig: sig(), chunk_len: 23, total_len: 23, offset: 0 };
    assert!(ring.push(&[&rec.encode(), &words]).unwrap());
    b.connected().unwrap();
    // Two rendezvous sends to it: one stays queued, one it "is reading".
    let (mut big1, mut big2) = (pattern(100_000, 1), pattern(100_000, 2));
    let mut queued = send(&b, 0, key(14), &mut big1);
    let taken = send(&b, 0, key(15), &mut big2);
    let i = (0..4096).rev().find(|&i| slot::split(b.slot_word(i).load(Ordering::Relaxed)).1 == slot::QUEUED).unwrap();
    let generation = slot::split(b.slot_word(i).load(Ordering::Relaxed)).0;
    b.slot_word(i).store(slot::word(generation, slot::TAKEN), Ordering::Relaxed);
    assert!(b.failed(0).is_none());

    child.kill().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while b.failed(0).is_none() && Instant::now() < deadline {
        b.progress().unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    let e = b.failed(0).expect("the dead peer is reported").to_string();
    assert!(e.contains(&format!("endpoint 0 (pid {cpid}) died")), "{e}");
    assert_eq!(recv(&[], &b, 0, key(13), 23).unwrap(), words);
    let e = recv(&[], &b, 0, key(13), 23).unwrap_err().to_string();
    assert!(e.contains("died"), "{e}");
    let e = poll(&[&b], || queued.test()).unwrap_err().to_string();
    assert!(e.contains("died"), "{e}");
    drop(taken); // returns: the reader is dead
    child.wait().unwrap();
    drop(fake);
    drop(b);
    assert!(files(&j).is_empty());
}

/// Both directions at once from two threads, sizes across every path.
#[test]
fn two_threads_exchange_many_messages() {
    for cma in ["y", "n"] {
        let c = config(&[("TL_P2P_SHM_CMA", cma), ("TL_P2P_SHM_RING_SIZE", "16k"), ("TL_P2P_SHM_EAGER_SIZE", "2k")]);
        let ts = group(&format!("threads{cma}"), 2, &c);
        const N: usize = 400;
        let size = |i: usize| [0, 1, 7, 2048, 2049, 5000, 40_000, 150_000][(i * 2_654_435_761) % 8];
        std::thread::scope(|sc| {
            for (me, t) in ts.iter().enumerate() {
                let peer = 1 - me;
                sc.spawn(move || {
                    let mut out: Vec<Vec<u8>> = (0..N).map(|i| pattern(size(i), (me * N + i) as u64)).collect();
                    let mut hs = Vec::new();
                    for (i, m) in out.iter_mut().enumerate() {
                        let k = MsgKey { seq: i as u64, tag: (i % 3) as u32, src: me as u32, team: 1 };
                        hs.push(send(t, peer, k, m));
                        if i % 16 == 15 || i == N - 1 {
                            for j in i.saturating_sub(15)..=i {
                                let k = MsgKey { seq: j as u64, tag: (j % 3) as u32, src: peer as u32, team: 1 };
                                let got = recv(&[t], t, peer, k, size(j)).unwrap();
                                assert!(got == pattern(size(j), (peer * N + j) as u64), "message {j} ({cma})");
                            }
                        }
                    }
                    for h in &mut hs {
                        assert!(matches!(poll(&[t], || h.test()), Ok(())));
                    }
                });
            }
        });
    }
}

/// `cargo test -p ferrocoll-tl --release -- --ignored --nocapture shm_throughput`:
/// 1 MiB messages between two threads, CMA against fragments (prints only).
#[test]
#[ignore]
fn shm_throughput() {
    const LEN: usize = 1 << 20;
    const N: usize = 2000;
    for cma in ["y", "n"] {
        let ts = group(&format!("bw{cma}"), 2, &config(&[("TL_P2P_SHM_CMA", cma)]));
        let start = Instant::now();
        std::thread::scope(|sc| {
            let (a, b) = (&ts[0], &ts[1]);
            sc.spawn(move || {
                let mut data = pattern(LEN, 1);
                for i in 0..N {
                    let mut h = send(a, 1, MsgKey { seq: i as u64, ..key(0) }, &mut data);
                    poll(&[a], || h.test()).unwrap();
                }
            });
            sc.spawn(move || {
                let mut buf = vec![0u8; LEN];
                for i in 0..N {
                    let k = MsgKey { seq: i as u64, ..key(0) };
                    poll(&[b], || b.try_recv(0, &k, &sig(), mem(&mut buf))).unwrap();
                }
            });
        });
        let s = start.elapsed().as_secs_f64();
        println!(
            "shm {}: {N} × 1 MiB in {s:.3} s = {:.2} GB/s",
            if cma == "y" { "CMA" } else { "FRAG" },
            (N * LEN) as f64 / s / 1e9
        );
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2).map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap()).collect()
}

/// Sizes of the two-process exchange: every path, both sides of each limit.
const MP_SIZES: [usize; 7] = [0, 1, 100, 8192, 8193, 70_000, 1 << 20];

/// The peer process of the two-process tests: this test binary run again with
/// `SHM_TEST_*` set (without them, this test does nothing). It echoes every
/// message back, then closes cleanly or sends last words and waits to be killed.
#[test]
#[ignore = "run by the two-process tests as their peer process"]
fn child_peer() {
    let (Ok(j), Ok(parent), Ok(mode)) =
        (std::env::var("SHM_TEST_JOB"), std::env::var("SHM_TEST_PARENT"), std::env::var("SHM_TEST_MODE"))
    else {
        return;
    };
    let cma = if mode.ends_with("-n") { "n" } else { "y" };
    let t = ShmTransport::new(&j, 1, 2, &config(&[("TL_P2P_SHM_CMA", cma)])).unwrap();
    println!("ADDR {}", hex(&t.address()));
    let addr = unhex(&parent);
    let proc = ProcInfo { pid: Address::parse(&addr).unwrap().pid, ..ProcInfo::local() };
    t.connect(2, &[TransportPeer { ep: 0, proc, addr }]).unwrap();
    println!("CONNECTED");
    let mut go = String::new();
    std::io::stdin().read_line(&mut go).unwrap();
    t.connected().unwrap();
    for (i, &len) in MP_SIZES.iter().enumerate() {
        let mut m = recv(&[&t], &t, 0, key(i as u32), len).unwrap();
        let mut h = send(&t, 0, key(1000 + i as u32), &mut m);
        poll(&[&t], || h.test()).unwrap();
    }
    if mode.starts_with("die") {
        let mut last = b"last words".to_vec();
        drop(send(&t, 0, key(9999), &mut last));
        println!("SENT");
        // Wait to be killed (a minute at most, should the parent be gone).
        std::thread::sleep(Duration::from_secs(60));
        std::process::exit(2);
    }
    t.close();
    println!("CLOSED");
}

/// Run `child_peer` in another process, connected to `parent` (endpoint 0).
fn two_processes(mode: &str) {
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Command, Stdio};
    let j = job(&format!("mp{mode}"));
    let cma = if mode.ends_with("-n") { "n" } else { "y" };
    let parent = ShmTransport::new(&j, 0, 2, &config(&[("TL_P2P_SHM_CMA", cma)])).unwrap();
    let exe = std::env::current_exe().unwrap();
    /// Kills the peer if the test fails before it exits.
    struct Reaper(std::process::Child);
    impl Drop for Reaper {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let Ok(child) = Command::new(exe)
        .args(["shm::tests::child_peer", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env("SHM_TEST_JOB", &j)
        .env("SHM_TEST_PARENT", hex(&parent.address()))
        .env("SHM_TEST_MODE", mode)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
    else {
        eprintln!("skipped: cannot run this test binary again");
        return;
    };
    let mut child = Reaper(child);
    let child_pid = child.0.id();
    let mut lines = BufReader::new(child.0.stdout.take().unwrap()).lines().map_while(|l| l.ok());
    // The harness may print "test <name> ... " before the child's first line: look for markers anywhere.
    let mut wait_for = |marker: &str| {
        let line = lines.find(|l| l.contains(marker)).unwrap_or_else(|| panic!("the peer never said {marker}"));
        line.split_once(marker).map(|(_, rest)| rest.trim().to_string()).unwrap_or_default()
    };
    let addr = unhex(&wait_for("ADDR "));
    let proc = ProcInfo { pid: child_pid, ..ProcInfo::local() };
    parent.connect(2, &[TransportPeer { ep: 1, proc, addr }]).unwrap();
    wait_for("CONNECTED");
    writeln!(child.0.stdin.as_mut().unwrap(), "GO").unwrap();
    parent.connected().unwrap();
    if cma == "n" {
        assert!(!parent.cma_to(1));
    } else if !parent.cma_to(1) {
        eprintln!("note: this host refuses CMA between processes: the exchange runs on fragments");
    }

    let mut msgs: Vec<Vec<u8>> = MP_SIZES.iter().enumerate().map(|(i, &n)| pattern(n, i as u64)).collect();
    let expect = msgs.clone();
    let mut hs: Vec<_> = msgs.iter_mut().enumerate().map(|(i, m)| send(&parent, 1, key(i as u32), m)).collect();
    for (i, m) in expect.iter().enumerate() {
        assert_eq!(&recv(&[&parent], &parent, 1, key(1000 + i as u32), m.len()).unwrap(), m, "echo {i}");
    }
    for h in &mut hs {
        assert!(matches!(poll(&[&parent], || h.test()), Ok(())));
    }
    if mode.starts_with("die") {
        wait_for("SENT");
        child.0.kill().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while parent.failed(1).is_none() && Instant::now() < deadline {
            parent.progress().unwrap();
            std::thread::sleep(Duration::from_millis(5));
        }
        let e = parent.failed(1).expect("the killed peer is reported").to_string();
        assert!(e.contains(&format!("endpoint 1 (pid {child_pid}) died")), "{e}");
        assert_eq!(recv(&[], &parent, 1, key(9999), 10).unwrap(), b"last words");
        let e = recv(&[], &parent, 1, key(9999), 10).unwrap_err().to_string();
        assert!(e.contains("died"), "{e}");
    } else {
        wait_for("CLOSED");
        let e = recv(&[], &parent, 1, key(0), 1).unwrap_err();
        assert_eq!(e.context(), "endpoint 1 left");
        assert!(parent.failed(1).is_none());
    }
    let status = child.0.wait().unwrap();
    assert_eq!(status.success(), mode.starts_with("clean"), "{status}");
    drop(parent);
    assert!(files(&j).is_empty());
}

#[test]
fn two_processes_by_cma_then_clean_close() {
    two_processes("clean-y");
}

#[test]
fn two_processes_by_fragments_then_a_kill() {
    two_processes("die-n");
}
