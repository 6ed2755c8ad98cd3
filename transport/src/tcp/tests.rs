//! Several transports of one process talking over 127.0.0.1, and raw
//! sockets playing peers that misbehave (another job, a corrupt frame, a
//! process that dies).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Poll;
use std::thread;
use std::time::{Duration, Instant};

use ferrocoll_core::config::Config;
use ferrocoll_core::{ProcInfo, ReduceOp, Result, Status};

use super::TcpTransport;
use super::wire::{self, HEADER_LEN, HELLO_LEN, Header, Hello, VERSION};
use crate::p2p::{MsgKey, SendHandle, Transport, TransportPeer};
use crate::testing::{assert_stray_rules, call, key, mem, pattern, sig};

fn config() -> Config {
    let mut c = Config::new();
    c.set("TL_P2P_TCP_ADDR", "127.0.0.1").set("TL_P2P_TCP_CONNECT_TIMEOUT", "30s");
    c
}

fn job() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    // Relaxed: only uniqueness matters.
    format!("tcp-test-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

fn peers_of(ts: &[TcpTransport]) -> Vec<TransportPeer> {
    ts.iter().enumerate().map(|(ep, t)| TransportPeer { ep, proc: ProcInfo::local(), addr: t.address() }).collect()
}

/// `n` connected transports (each connects from its own thread: connect blocks until its peers come).
fn group(n: usize) -> Vec<TcpTransport> {
    let job = job();
    let ts: Vec<TcpTransport> = (0..n).map(|ep| TcpTransport::new(&job, ep, n, &config()).unwrap()).collect();
    let peers = peers_of(&ts);
    thread::scope(|s| {
        for t in &ts {
            let peers = &peers;
            s.spawn(move || t.connect(n, peers).unwrap());
        }
    });
    ts
}

/// Progress every transport until `done` says so (a test fails after 60 s rather than hang).
fn drive<T>(ts: &[&TcpTransport], mut done: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        for t in ts {
            t.progress().unwrap();
        }
        if let Some(v) = done() {
            return v;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "no progress in 60 s");
        thread::yield_now();
    }
}

fn recv(ts: &[&TcpTransport], t: &TcpTransport, src: usize, k: MsgKey, buf: &mut [u8]) -> Result<()> {
    let m = mem(buf);
    drive(ts, || match t.try_recv(src, &k, &sig(), m) {
        Poll::Ready(r) => Some(r),
        Poll::Pending => None,
    })
}

fn wait_send(ts: &[&TcpTransport], h: &mut Box<dyn SendHandle>) -> Result<()> {
    drive(ts, || match h.test() {
        Poll::Ready(r) => Some(r),
        Poll::Pending => None,
    })
}

#[test]
fn eager_and_large_messages_arrive_in_order_both_ways() {
    let ts = group(2);
    let all: Vec<&TcpTransport> = ts.iter().collect();
    for (from, to) in [(0, 1), (1, 0)] {
        let mut msgs: Vec<Vec<u8>> =
            [100, 3 << 20, 0, 20_000, 5].iter().map(|&n| pattern(n, (from * 10 + n) as u64)).collect();
        // Same key for all: FIFO per key.
        let mut hs: Vec<_> = msgs.iter_mut().map(|m| ts[from].send(to, key(1), sig(), mem(m)).unwrap()).collect();
        for m in &msgs {
            let mut got = vec![0xEEu8; m.len()];
            recv(&all, &ts[to], from, key(1), &mut got).unwrap();
            assert!(got == *m, "message of {} bytes from {from} to {to} differs", m.len());
        }
        hs.iter_mut().for_each(|h| wait_send(&all, h).unwrap());
        assert!(ts[to].try_recv(from, &key(1), &sig(), mem(&mut [0u8; 5])).is_pending());
    }
}

#[test]
fn unexpected_messages_wait_for_their_receive() {
    let ts = group(3);
    let all: Vec<&TcpTransport> = ts.iter().collect();
    let mut msgs: Vec<Vec<u8>> = (0..6).map(|i| pattern(1000 + i * 50_000, i as u64)).collect();
    let mut hs: Vec<_> =
        msgs.iter_mut().enumerate().map(|(i, m)| ts[2].send(0, key(i as u32), sig(), mem(m)).unwrap()).collect();
    hs.iter_mut().for_each(|h| wait_send(&all, h).unwrap());
    // Everything arrives before any receive is posted; receive in reverse order.
    for _ in 0..50 {
        ts[0].progress().unwrap();
        thread::sleep(Duration::from_millis(1));
    }
    for (i, m) in msgs.iter().enumerate().rev() {
        let mut got = vec![0u8; m.len()];
        recv(&all, &ts[0], 2, key(i as u32), &mut got).unwrap();
        assert!(got == *m, "message {i} differs");
    }
    assert!(ts[1].try_recv(2, &key(0), &sig(), mem(&mut [0u8; 1000])).is_pending());
}

#[test]
fn many_messages_in_flight_are_batched_and_all_arrive() {
    const N: usize = 3000;
    let ts = group(3);
    let all: Vec<&TcpTransport> = ts.iter().collect();
    let sizes = |i: usize| [1, 8, 64, 512, 4096, 16 * 1024, 40_000][i % 7];
    let mut out: Vec<Vec<Vec<u8>>> =
        (0..3).map(|me| (0..N).map(|i| pattern(sizes(i), (me * N + i) as u64)).collect()).collect();
    let mut hs = Vec::new();
    for (me, msgs) in out.iter_mut().enumerate() {
        for (i, m) in msgs.iter_mut().enumerate() {
            for to in (0..3).filter(|&t| t != me) {
                hs.push(ts[me].send(to, MsgKey { src: me as u32, ..key(i as u32) }, sig(), mem(m)).unwrap());
            }
        }
    }
    for (me, t) in ts.iter().enumerate() {
        for (from, msgs) in out.iter().enumerate().filter(|&(f, _)| f != me) {
            for (i, m) in msgs.iter().enumerate() {
                let mut got = vec![0u8; m.len()];
                recv(&all, t, from, MsgKey { src: from as u32, ..key(i as u32) }, &mut got).unwrap();
                assert!(got == *m, "message {i} from {from} to {me} differs");
            }
        }
    }
    hs.iter_mut().for_each(|h| wait_send(&all, h).unwrap());
}

#[test]
fn a_64_mib_message_each_way_at_once() {
    let ts = group(2);
    let all: Vec<&TcpTransport> = ts.iter().collect();
    let mut a = pattern(64 << 20, 1);
    let mut b = pattern(64 << 20, 2);
    let mut ha = ts[0].send(1, key(9), sig(), mem(&mut a)).unwrap();
    let mut hb = ts[1].send(0, key(9), sig(), mem(&mut b)).unwrap();
    let (mut got_a, mut got_b) = (vec![0u8; 64 << 20], vec![0u8; 64 << 20]);
    let (ra, rb) = (mem(&mut got_a), mem(&mut got_b));
    let (mut da, mut db) = (false, false);
    drive(&all, || {
        da = da || ts[1].try_recv(0, &key(9), &sig(), ra).map(|r| r.unwrap()).is_ready();
        db = db || ts[0].try_recv(1, &key(9), &sig(), rb).map(|r| r.unwrap()).is_ready();
        (da && db).then_some(())
    });
    wait_send(&all, &mut ha).unwrap();
    wait_send(&all, &mut hb).unwrap();
    assert!(got_a == a && got_b == b);
}

#[test]
fn a_size_mismatch_names_both_sizes_and_later_messages_still_arrive() {
    let ts = group(2);
    let all: Vec<&TcpTransport> = ts.iter().collect();
    let (mut m, mut n) = (pattern(100, 1), pattern(30_000, 2));
    let _h1 = ts[0].send(1, key(1), sig(), mem(&mut m)).unwrap();
    let mut h2 = ts[0].send(1, key(2), sig(), mem(&mut n)).unwrap();
    let e = recv(&all, &ts[1], 0, key(1), &mut [0u8; 99]).unwrap_err().to_string();
    assert!(e.contains("100 bytes") && e.contains("expects 99"), "{e}");
    let mut got = vec![0u8; n.len()];
    recv(&all, &ts[1], 0, key(2), &mut got).unwrap();
    assert!(got == n);
    wait_send(&all, &mut h2).unwrap();
}

#[test]
fn a_message_of_another_call_under_another_tag_is_found_and_left() {
    let ts = group(2);
    let all: Vec<&TcpTransport> = ts.iter().collect();
    for len in [64, 300_000] {
        let mut m = pattern(len, 1);
        let mut h = ts[0].send(1, key(5), call(ReduceOp::Max), mem(&mut m)).unwrap();
        let found = drive(&all, || ts[1].stray(0, &key(0), &sig()));
        assert_stray_rules(&ts[1], Some(found));
        let mut got = vec![0u8; len];
        let g = mem(&mut got);
        drive(&all, || match ts[1].try_recv(0, &key(5), &call(ReduceOp::Max), g) {
            Poll::Ready(r) => Some(r),
            Poll::Pending => None,
        })
        .unwrap();
        assert!(got == m && ts[1].stray(0, &key(0), &sig()).is_none(), "taken whole ({len})");
        wait_send(&all, &mut h).unwrap();
    }
}

#[test]
fn a_message_of_another_call_fails_the_receive_naming_both_calls() {
    let ts = group(2);
    let all: Vec<&TcpTransport> = ts.iter().collect();
    // Copied at send, and written straight from the sender's buffer: the sizes match, the calls do not.
    let (mut small, mut big) = (pattern(100, 1), pattern(200_000, 2));
    let mut h1 = ts[0].send(1, key(1), call(ReduceOp::Max), mem(&mut small)).unwrap();
    let mut h2 = ts[0].send(1, key(1), call(ReduceOp::Max), mem(&mut big)).unwrap();
    for len in [100, 200_000] {
        let mut buf = vec![0xEE; len];
        let e = recv(&all, &ts[1], 0, key(1), &mut buf).unwrap_err();
        assert_eq!(e.status(), Status::InvalidParam, "{e}");
        let text = e.to_string();
        assert!(text.contains("calls differ: rank 0 posted allreduce max float32 of 1024 elements"), "{text}");
        assert!(text.contains("this rank posted allreduce sum float32 of 1024 elements"), "{text}");
        assert!(buf.iter().all(|&x| x == 0xEE), "bytes reached the receive buffer ({len})");
    }
    // The sends completed when the kernel took the bytes; nothing waits on them.
    wait_send(&all, &mut h1).unwrap();
    wait_send(&all, &mut h2).unwrap();
    // Both were taken out of the queue; the connection goes on.
    assert!(ts[1].try_recv(0, &key(1), &sig(), mem(&mut [0u8; 100])).is_pending());
    let mut next = pattern(300_000, 3);
    let mut h3 = ts[0].send(1, key(2), sig(), mem(&mut next)).unwrap();
    let mut got = vec![0u8; next.len()];
    recv(&all, &ts[1], 0, key(2), &mut got).unwrap();
    assert!(got == next);
    wait_send(&all, &mut h3).unwrap();
    assert!(ts[1].failed(0).is_none() && ts[0].failed(1).is_none());
}

#[test]
fn dropped_sends_are_retracted_or_finished_from_a_copy() {
    let ts = group(2);
    let all: Vec<&TcpTransport> = ts.iter().collect();
    // Nobody reads at endpoint 1 yet: 64 MiB cannot fit the socket buffers, so
    // the first send is partly written and the second not started.
    let mut first = pattern(64 << 20, 3);
    let mut second = pattern(1 << 20, 4);
    let mut h1 = ts[0].send(1, key(1), sig(), mem(&mut first)).unwrap();
    let h2 = ts[0].send(1, key(2), sig(), mem(&mut second)).unwrap();
    assert!(h1.test().is_pending());
    let expect = first.clone();
    drop(h2);
    drop(h1);
    first.fill(0xEE);
    second.fill(0xEE);
    let mut last = pattern(10, 5);
    let _h3 = ts[0].send(1, key(3), sig(), mem(&mut last)).unwrap();
    let mut got = vec![0u8; 64 << 20];
    recv(&all, &ts[1], 0, key(1), &mut got).unwrap();
    assert!(got == expect, "the partly written message was not finished from a copy");
    let mut got3 = vec![0u8; 10];
    recv(&all, &ts[1], 0, key(3), &mut got3).unwrap();
    assert_eq!(got3, last);
    // The retracted message never comes (the last one came after where it was).
    assert!(ts[1].try_recv(0, &key(2), &sig(), mem(&mut vec![0u8; 1 << 20])).is_pending());
}

#[test]
fn a_connection_of_another_job_is_refused_and_the_wait_goes_on() {
    let job = job();
    let ts: Vec<TcpTransport> = (0..2).map(|ep| TcpTransport::new(&job, ep, 2, &config()).unwrap()).collect();
    let (addr1, _) = wire::decode_addr(&ts[1].address()).unwrap();
    let mut stranger = TcpStream::connect(addr1).unwrap();
    let foreign = Hello { version: VERSION, job: wire::job_hash("another job"), from: 0, to: 1 };
    stranger.write_all(&foreign.encode()).unwrap();
    let peers = peers_of(&ts);
    thread::scope(|s| {
        for t in &ts {
            let peers = &peers;
            s.spawn(move || t.connect(2, peers).unwrap());
        }
    });
    stranger.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert!(matches!(stranger.read(&mut [0u8; 1]), Ok(0) | Err(_)), "the stranger got an answer");
    let all: Vec<&TcpTransport> = ts.iter().collect();
    let mut m = pattern(10, 1);
    let _h = ts[0].send(1, key(1), sig(), mem(&mut m)).unwrap();
    let mut got = vec![0u8; 10];
    recv(&all, &ts[1], 0, key(1), &mut got).unwrap();
    assert_eq!(got, m);
}

#[test]
fn a_goodbye_is_leaving_not_dying() {
    let ts = group(2);
    let all: Vec<&TcpTransport> = ts.iter().collect();
    let mut m = pattern(50_000, 1);
    let mut h = ts[0].send(1, key(1), sig(), mem(&mut m)).unwrap();
    wait_send(&all, &mut h).unwrap();
    ts[0].close();
    // The message sent before the goodbye is still delivered; then "left".
    let mut got = vec![0u8; m.len()];
    recv(&all[1..], &ts[1], 0, key(1), &mut got).unwrap();
    assert!(got == m);
    let e = recv(&all[1..], &ts[1], 0, key(2), &mut [0u8; 4]).unwrap_err();
    assert!(e.to_string().contains("endpoint 0") && e.to_string().contains("left"), "{e}");
    assert!(ts[1].failed(0).is_none());
    assert!(ts[1].send(0, key(3), sig(), mem(&mut [1u8; 4])).is_err());
    assert!(ts[0].send(1, key(3), sig(), mem(&mut [1u8; 4])).is_err());
}

/// A sender whose sends are complete may close at once: copied sends
/// that the kernel has not taken yet (its buffer full of what the receiver
/// has not read) are not complete, and the close waits for room for its
/// goodbye. Copied sends used to complete at once, and the close cut the
/// connection with them still queued: the receiver lost messages and took
/// a peer that did its part for a dead one.
#[test]
fn a_sender_that_closes_once_its_sends_are_complete_loses_nothing_and_leaves() {
    let ts = group(2);
    let (a, b) = (&ts[0], &ts[1]);
    let mut msgs: Vec<Vec<u8>> = (0..4096u64).map(|i| pattern(16 * 1024, i)).collect();
    let expect = msgs.clone();
    let mut hs: Vec<_> = msgs.iter_mut().map(|m| a.send(1, key(5), sig(), mem(m)).unwrap()).collect();
    let queued = hs.iter_mut().map(|h| h.test()).filter(Poll::is_pending).count();
    assert!(queued > 0, "64 MiB unread should fill the socket's buffers (every send was complete)");
    thread::scope(|s| {
        s.spawn(|| {
            for (i, m) in expect.iter().enumerate() {
                let mut got = vec![0u8; m.len()];
                recv(&[b], b, 0, key(5), &mut got).unwrap_or_else(|e| panic!("message {i}: {e}"));
                assert!(&got == m, "message {i}");
            }
        });
        for h in &mut hs {
            wait_send(&[a], h).unwrap();
        }
        a.close();
    });
    let e = recv(&[b], b, 0, key(6), &mut [0u8; 4]).unwrap_err();
    assert!(e.to_string().contains("left"), "{e}");
    assert!(b.failed(0).is_none(), "a clean leave, not a death");
}

/// A close whose goodbye finds the socket's buffer full (the peer reads
/// slowly) waits a little for room, so that the peer sees a clean leave
/// (and what was queued before the goodbye), not a cut connection.
#[test]
fn a_close_waits_a_little_for_room_for_its_goodbye() {
    let ts = group(2);
    let (a, b) = (&ts[0], &ts[1]);
    // Fill the socket's buffers, then queue 16 more.
    let mut msgs: Vec<Vec<u8>> = Vec::new();
    let mut queued = 0;
    while queued < 16 {
        assert!(msgs.len() < 8192, "128 MiB unread and the socket's buffers are not full");
        let mut m = pattern(16 * 1024, msgs.len() as u64);
        if a.send(1, key(7), sig(), mem(&mut m)).unwrap().test().is_pending() {
            queued += 1;
        }
        msgs.push(m);
    }
    thread::scope(|s| {
        s.spawn(|| {
            for (i, m) in msgs.iter().enumerate() {
                let mut got = vec![0u8; m.len()];
                recv(&[b], b, 0, key(7), &mut got).unwrap_or_else(|e| panic!("message {i} of {}: {e}", msgs.len()));
                assert!(&got == m, "message {i}");
            }
        });
        a.close();
    });
    let e = recv(&[b], b, 0, key(8), &mut [0u8; 4]).unwrap_err();
    assert!(e.to_string().contains("left"), "{e}");
    assert!(b.failed(0).is_none(), "a clean leave, not a death");
}

#[test]
fn a_peer_that_left_because_another_died_names_the_dead_one() {
    let ts = group(3);
    ts[1].abort();
    ts[2].close();
    let e = recv(&[&ts[0]], &ts[0], 2, key(1), &mut [0u8; 4]).unwrap_err().to_string();
    assert!(e.contains("endpoint 2") && e.contains("left"), "{e}");
    assert!(e.contains("endpoint 1") && e.contains("without saying goodbye"), "{e}");
    assert!(ts[0].failed(1).is_some() && ts[0].failed(2).is_none());
}

#[test]
fn a_goodbye_names_the_failure_its_sender_leaves_because_of() {
    let ts = group(3);
    // Endpoint 2 leaves because (it says) endpoint 1 failed; endpoint 0 has
    // seen nothing of endpoint 1 itself.
    ts[2].set_cause(1);
    ts[2].close();
    let e = recv(&[&ts[0]], &ts[0], 2, key(1), &mut [0u8; 4]).unwrap_err().to_string();
    assert!(e.contains("endpoint 2") && e.contains("left"), "{e}");
    assert_eq!(ts[0].take_causes(), vec![(2, 1)]);
    assert_eq!(ts[0].take_causes(), vec![], "each cause is handed out once");
    // The transport reports what it saw itself only; the router adds reports.
    assert!(ts[0].failed(1).is_none());
    // A plain goodbye names nothing.
    ts[1].close();
    let _ = recv(&[&ts[0]], &ts[0], 1, key(1), &mut [0u8; 4]).unwrap_err();
    assert_eq!(ts[0].take_causes(), vec![]);
}

/// A raw socket playing endpoint 1 of a group of two with `t` (endpoint 0 of job `job`):
/// returns the transport, connected, and the peer's end of the connection.
fn with_raw_peer() -> (TcpTransport, TcpStream) {
    let job = job();
    let t = TcpTransport::new(&job, 0, 2, &config()).unwrap();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let fake = wire::encode_addr(l.local_addr().unwrap(), wire::job_hash(&job));
    let peers = vec![
        TransportPeer { ep: 0, proc: ProcInfo::local(), addr: t.address() },
        TransportPeer { ep: 1, proc: ProcInfo::local(), addr: fake },
    ];
    let s = thread::scope(|s| {
        let c = s.spawn(|| t.connect(2, &peers));
        let (mut s, _) = l.accept().unwrap();
        let mut hello = [0u8; HELLO_LEN];
        s.read_exact(&mut hello).unwrap();
        let h = Hello::decode(&hello).unwrap();
        assert_eq!((h.from, h.to, h.job), (0, 1, wire::job_hash(&job)));
        s.write_all(&Hello { version: VERSION, job: h.job, from: 1, to: 0 }.encode()).unwrap();
        c.join().unwrap().unwrap();
        s
    });
    (t, s)
}

fn frame(k: MsgKey, payload: &[u8]) -> Vec<u8> {
    let mut f = Header::data(k, sig(), payload.len()).encode().to_vec();
    f.extend_from_slice(payload);
    f
}

#[test]
fn a_peer_that_dies_is_failed_after_its_messages_are_delivered() {
    let (t, mut s) = with_raw_peer();
    let k = MsgKey { src: 1, ..key(1) };
    s.write_all(&frame(k, b"last words")).unwrap();
    // A large send in progress when the peer dies fails; nobody reads it here.
    let mut big = pattern(64 << 20, 1);
    let mut h = t.send(1, key(5), sig(), mem(&mut big)).unwrap();
    drop(s);
    let why = drive(&[&t], || t.failed(1)).to_string();
    assert!(why.contains("endpoint 1 (127.0.0.1:") && why.contains("without saying goodbye"), "{why}");
    let mut got = [0u8; 10];
    assert!(matches!(t.try_recv(1, &k, &sig(), mem(&mut got)), Poll::Ready(Ok(()))));
    assert_eq!(&got, b"last words");
    let Poll::Ready(Err(e)) = t.try_recv(1, &key(2), &sig(), mem(&mut got)) else {
        panic!("a receive from the dead succeeded")
    };
    assert_eq!(e.status(), Status::IoError);
    assert!(matches!(h.test(), Poll::Ready(Err(_))));
    assert!(t.send(1, key(6), sig(), mem(&mut [0u8; 4])).is_err());
}

#[test]
fn a_corrupt_frame_fails_the_connection_naming_the_peer() {
    for bad in [vec![0x5Au8; HEADER_LEN], {
        let mut h = Header::goodbye(None).encode().to_vec();
        h[2] = 9;
        h
    }] {
        let (t, mut s) = with_raw_peer();
        let k = MsgKey { src: 1, ..key(1) };
        s.write_all(&frame(k, b"fine")).unwrap();
        s.write_all(&bad).unwrap();
        let why = drive(&[&t], || t.failed(1)).to_string();
        assert!(why.contains("endpoint 1") && why.contains("corrupt"), "{why}");
        let mut got = [0u8; 4];
        assert!(matches!(t.try_recv(1, &k, &sig(), mem(&mut got)), Poll::Ready(Ok(()))));
        assert_eq!(&got, b"fine");
        // The transport closed the connection.
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        assert!(matches!(s.read(&mut [0u8; 1]), Ok(0) | Err(_)));
    }
}

#[test]
fn messages_to_itself_are_delivered_when_routed_here() {
    let t = TcpTransport::new(&job(), 0, 1, &config()).unwrap();
    t.connect(1, &peers_of(std::slice::from_ref(&t))).unwrap();
    let mut m = pattern(100_000, 1);
    let mut h = t.send(0, key(1), sig(), mem(&mut m)).unwrap();
    assert!(h.test().is_ready());
    let mut got = vec![0u8; m.len()];
    recv(&[&t], &t, 0, key(1), &mut got).unwrap();
    assert!(got == m);
    assert!(t.failed(0).is_none());
}

/// Loopback throughput of 4 MiB messages between two transports of one
/// process (run: `cargo test -p ferrocoll-tl --release tcp_throughput -- --ignored --nocapture`).
#[test]
#[ignore = "a measurement, not a check"]
fn tcp_throughput_4mib() {
    const SIZE: usize = 4 << 20;
    const COUNT: usize = 500;
    const WINDOW: usize = 8;
    let ts = group(2);
    let (a, b) = (&ts[0], &ts[1]);
    let start = Instant::now();
    thread::scope(|s| {
        s.spawn(move || {
            let mut bufs: Vec<Vec<u8>> = (0..WINDOW).map(|i| pattern(SIZE, i as u64)).collect();
            let mut inflight: std::collections::VecDeque<Box<dyn SendHandle>> = Default::default();
            for i in 0..COUNT {
                if inflight.len() == WINDOW {
                    let mut h = inflight.pop_front().unwrap();
                    wait_send(&[a], &mut h).unwrap();
                }
                inflight.push_back(a.send(1, key(i as u32), sig(), mem(&mut bufs[i % WINDOW])).unwrap());
            }
            inflight.iter_mut().for_each(|h| wait_send(&[a], h).unwrap());
        });
        s.spawn(move || {
            let mut buf = vec![0u8; SIZE];
            for i in 0..COUNT {
                recv(&[b], b, 0, key(i as u32), &mut buf).unwrap();
            }
        });
    });
    let secs = start.elapsed().as_secs_f64();
    let bytes = (SIZE * COUNT) as f64;
    println!(
        "tcp loopback, {COUNT} messages of 4 MiB: {:.2} GB/s ({:.2} GiB/s) in {secs:.2} s",
        bytes / secs / 1e9,
        bytes / secs / (1u64 << 30) as f64
    );
}

#[test]
fn ipv6_loopback_works_where_the_host_has_it() {
    if TcpListener::bind("[::1]:0").is_err() {
        eprintln!("skipped: this host has no IPv6 loopback");
        return;
    }
    let mut c = config();
    c.set("TL_P2P_TCP_ADDR", "::1");
    let job = job();
    let ts: Vec<TcpTransport> = (0..2).map(|ep| TcpTransport::new(&job, ep, 2, &c).unwrap()).collect();
    assert!(wire::decode_addr(&ts[0].address()).unwrap().0.is_ipv6());
    let peers = peers_of(&ts);
    thread::scope(|s| {
        for t in &ts {
            let peers = &peers;
            s.spawn(move || t.connect(2, peers).unwrap());
        }
    });
    let all: Vec<&TcpTransport> = ts.iter().collect();
    let mut m = pattern(100_000, 6);
    let mut h = ts[1].send(0, key(1), sig(), mem(&mut m)).unwrap();
    let mut got = vec![0u8; m.len()];
    recv(&all, &ts[0], 1, key(1), &mut got).unwrap();
    wait_send(&all, &mut h).unwrap();
    assert!(got == m);
}

const CHILD_JOB: &str = "FERROCOLL_TCP_TEST_JOB";

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2).filter_map(|i| u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()).collect()
}

/// Endpoint 1 of [`a_peer_process_that_exits_is_failed`], run in a child
/// process: it prints its address, reads endpoint 0's from stdin, echoes one
/// message and exits without closing its transport.
#[test]
#[ignore = "run by a_peer_process_that_exits_is_failed in a child process"]
fn child_endpoint() {
    let Ok(job) = std::env::var(CHILD_JOB) else { return };
    let t = TcpTransport::new(&job, 1, 2, &config()).unwrap();
    println!("ADDR {}", hex(&t.address()));
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    let peers = vec![
        TransportPeer { ep: 0, proc: ProcInfo::local(), addr: unhex(line.trim()) },
        TransportPeer { ep: 1, proc: ProcInfo::local(), addr: t.address() },
    ];
    t.connect(2, &peers).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    recv(&[&t], &t, 0, key(1), &mut buf).unwrap();
    let mut h = t.send(0, MsgKey { src: 1, ..key(2) }, sig(), mem(&mut buf)).unwrap();
    wait_send(&[&t], &mut h).unwrap();
    // Die: no destructor runs, so no goodbye is sent.
    std::process::exit(0);
}

/// Start the ignored test `name` of this binary in a child process with
/// `env`, read the address it prints (`ADDR <hex>`), and give it ours on its
/// stdin: the child and its endpoint's address.
fn child_process(name: &str, env: &[(&str, &str)], t: &TcpTransport) -> (std::process::Child, Vec<u8>) {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .args(["--exact", name, "--ignored", "--nocapture", "--test-threads=1"])
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let addr = (0..100)
        .find_map(|_| {
            let mut l = String::new();
            out.read_line(&mut l).ok()?;
            // libtest may print "test name ... " before it on the same line.
            l.split_once("ADDR ").map(|(_, a)| unhex(a.trim()))
        })
        .expect("the child printed no address");
    // Keep reading what the child prints, or it dies writing to a closed pipe.
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    writeln!(child.stdin.take().unwrap(), "{}", hex(&t.address())).unwrap();
    (child, addr)
}

#[test]
fn a_peer_process_that_exits_is_failed() {
    let job = job();
    let t = TcpTransport::new(&job, 0, 2, &config()).unwrap();
    let (mut child, addr) = child_process("tcp::tests::child_endpoint", &[(CHILD_JOB, &job)], &t);
    let peers = vec![
        TransportPeer { ep: 0, proc: ProcInfo::local(), addr: t.address() },
        TransportPeer { ep: 1, proc: ProcInfo::local(), addr },
    ];
    t.connect(2, &peers).unwrap();
    let mut m = pattern(1 << 20, 77);
    let mut h = t.send(1, key(1), sig(), mem(&mut m)).unwrap();
    let mut echo = vec![0u8; 1 << 20];
    recv(&[&t], &t, 1, MsgKey { src: 1, ..key(2) }, &mut echo).unwrap();
    wait_send(&[&t], &mut h).unwrap();
    assert!(echo == m, "the echo differs");
    let why = drive(&[&t], || t.failed(1)).to_string();
    assert!(why.contains("endpoint 1") && why.contains("without saying goodbye"), "{why}");
    assert!(child.wait().unwrap().success());
}

const CHILD_EMULATED: &str = "FERROCOLL_TCP_TEST_EMULATED_JOB";

/// Where a test endpoint on emulated host `h` runs.
fn on_host(h: usize) -> ProcInfo {
    ProcInfo { host: format!("emulated-host{h}"), ..ProcInfo::local() }
}

/// Endpoint 1 of [`an_emulated_link_holds_messages_back`], in a child
/// process with `FERROCOLL_EMULATE_LINK` set: echoes two messages, then
/// waits for a last word before closing.
#[test]
#[ignore = "run by an_emulated_link_holds_messages_back in a child process"]
fn child_emulated_endpoint() {
    let Ok(job) = std::env::var(CHILD_EMULATED) else { return };
    let t = TcpTransport::new(&job, 1, 2, &config()).unwrap();
    println!("ADDR {}", hex(&t.address()));
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    let peers = vec![
        TransportPeer { ep: 0, proc: on_host(0), addr: unhex(line.trim()) },
        TransportPeer { ep: 1, proc: on_host(1), addr: t.address() },
    ];
    t.locate(&on_host(1));
    t.connect(2, &peers).unwrap();
    for (tag, len) in [(1, 8), (3, 1 << 20)] {
        let mut buf = vec![0u8; len];
        recv(&[&t], &t, 0, key(tag), &mut buf).unwrap();
        let mut h = t.send(0, MsgKey { src: 1, ..key(tag + 1) }, sig(), mem(&mut buf)).unwrap();
        wait_send(&[&t], &mut h).unwrap();
    }
    let mut done = [0u8; 1];
    recv(&[&t], &t, 0, key(9), &mut done).unwrap();
}

/// Two processes on different emulated hosts: a round trip takes at least
/// the latency both ways, and a large message at least its time on the
/// emulated wire too (lower bounds only: the machine may be slower).
#[test]
fn an_emulated_link_holds_messages_back() {
    use super::emulate::LinkEmulation;
    // 30 ms and 100 MB/s, both directions: 1 MiB spends 10.5 ms on the wire each way.
    let spec = "host:30ms:100MB/s";
    let (latency, bandwidth) = (Duration::from_millis(30), 100e6);
    let job = job();
    let t = TcpTransport::with_emulation(&job, 0, 2, &config(), LinkEmulation::parse(spec).unwrap()).unwrap();
    let env = [(CHILD_EMULATED, job.as_str()), ("FERROCOLL_EMULATE_LINK", spec)];
    let (mut child, addr) = child_process("tcp::tests::child_emulated_endpoint", &env, &t);
    let peers = vec![
        TransportPeer { ep: 0, proc: on_host(0), addr: t.address() },
        TransportPeer { ep: 1, proc: on_host(1), addr },
    ];
    t.locate(&on_host(0));
    t.connect(2, &peers).unwrap();
    for (tag, len) in [(1, 8usize), (3, 1 << 20)] {
        let mut m = pattern(len, u64::from(tag));
        let start = Instant::now();
        let mut h = t.send(1, key(tag), sig(), mem(&mut m)).unwrap();
        let mut echo = vec![0u8; len];
        recv(&[&t], &t, 1, MsgKey { src: 1, ..key(tag + 1) }, &mut echo).unwrap();
        let took = start.elapsed();
        wait_send(&[&t], &mut h).unwrap();
        assert!(echo == m, "the echo of {len} bytes differs");
        let wire = Duration::from_secs_f64(len as f64 / bandwidth);
        let least = 2 * (latency + wire);
        assert!(took >= least, "a round trip of {len} bytes took {took:?}, less than the emulated {least:?}");
    }
    let mut done = [1u8];
    let mut h = t.send(1, key(9), sig(), mem(&mut done)).unwrap();
    wait_send(&[&t], &mut h).unwrap();
    assert!(child.wait().unwrap().success());
}
