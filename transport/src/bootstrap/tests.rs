//! The store and its clients, with ranks as threads of this process on
//! 127.0.0.1 (rank 0 binds port 0 and the test hands the port to the others).

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread;

use ferrocoll_core::Status;
use ferrocoll_core::oob::allgather_blocking;

use super::auth::{Key, Transcript};
use super::frame::{Challenge, Hello, Kind, MAX_HELLO};
use super::*;

/// Long enough never to fire on a loaded machine; failures come from elsewhere.
const LONG: Duration = Duration::from_secs(60);

fn params(rank: usize, size: usize, port: u16, token: &str, timeout: Duration) -> TcpOobParams {
    TcpOobParams {
        rank,
        size,
        master_addr: "127.0.0.1".into(),
        master_port: port,
        token: token.into(),
        connect_timeout: timeout,
    }
}

/// Rank 0 on a port of the system's choice, and that port.
fn store(size: usize, timeout: Duration) -> (TcpOob, u16) {
    let oob = TcpOob::new(params(0, size, 0, "tok", timeout)).expect("store");
    let port = oob.listen_port().unwrap_or(0);
    (oob, port)
}

fn client(rank: usize, size: usize, port: u16, token: &str) -> TcpOob {
    TcpOob::new(params(rank, size, port, token, LONG)).expect("client")
}

/// Run `f` on every rank of a job of `size` (rank 0 on this thread); results in rank order.
fn job<R: Send + 'static>(size: usize, f: impl Fn(TcpOob) -> R + Send + Sync + 'static) -> Vec<R> {
    let (zero, port) = store(size, LONG);
    let f = Arc::new(f);
    let others: Vec<_> = (1..size)
        .map(|rank| {
            let f = f.clone();
            thread::spawn(move || f(client(rank, size, port, "tok")))
        })
        .collect();
    let mut out = vec![f(zero)];
    out.extend(others.into_iter().map(|h| h.join().expect("rank thread")));
    out
}

/// Rank `rank`'s bytes in round `round`: lengths differ per rank and round, including empty
/// and a round big enough to fill the sockets' buffers.
fn data(rank: usize, round: usize, size: usize) -> Vec<u8> {
    let len = match round {
        0 => 0,
        1 => rank,
        2 => (size - rank) * 1000 + 1,
        3 => 256 * 1024 + rank,
        _ => 5,
    };
    (0..len).map(|i| (rank * 31 + round * 7 + i) as u8).collect()
}

/// The next frame from a blocking socket: kind and payload (the payload at most `MAX_HELLO`
/// bytes: these tests read only handshake and error frames).
fn read_frame(s: &mut TcpStream) -> std::io::Result<(u8, Vec<u8>)> {
    let mut header = [0u8; 5];
    s.read_exact(&mut header)?;
    let len = u32::from_le_bytes([header[1], header[2], header[3], header[4]]) as usize;
    assert!(len <= MAX_HELLO, "a handshake frame of {len} bytes");
    let mut payload = vec![0; len];
    s.read_exact(&mut payload)?;
    Ok((header[0], payload))
}

/// A raw connection to the store that says hello as `rank` of `size` and answers the
/// challenge with a proof made with `token`, checking nothing (as an intruder would).
/// Returns the connection and the store's answer to the proof.
fn raw_rank(port: u16, rank: u32, size: u32, token: &str) -> std::io::Result<(TcpStream, (u8, Vec<u8>))> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(LONG))?;
    let hello = Hello { rank, size, nonce: auth::nonce().map_err(std::io::Error::other)? };
    s.write_all(&hello.encode().map_err(std::io::Error::other)?)?;
    let (kind, payload) = read_frame(&mut s)?;
    assert_eq!(kind, Kind::Challenge as u8, "{:?}", String::from_utf8_lossy(&payload));
    let c = Challenge::decode(&payload).map_err(std::io::Error::other)?;
    let t = Transcript { rank, size, client: hello.nonce, store: c.nonce };
    let key = Key::new(token.as_bytes()).map_err(std::io::Error::other)?;
    s.write_all(&frame::encode_proof(&key.rank_proof(&t)).map_err(std::io::Error::other)?)?;
    let answer = read_frame(&mut s)?;
    Ok((s, answer))
}

fn wait(req: &mut Box<dyn OobRequest>) -> Result<Vec<Vec<u8>>> {
    let start = Instant::now();
    loop {
        if let Poll::Ready(r) = req.test() {
            return r;
        }
        assert!(start.elapsed() < LONG, "request still pending after {LONG:?}; missing {:?}", req.missing());
        thread::yield_now();
    }
}

#[test]
fn several_rounds_of_different_lengths() {
    for size in [1, 2, 3, 16] {
        let results = job(size, move |oob| {
            let me = oob.rank();
            let rounds = (0..5).map(|k| allgather_blocking(&oob, &data(me, k, size), Some(LONG)).expect("round"));
            (rounds.collect::<Vec<_>>(), oob.job_id())
        });
        for (rank, (rounds, _)) in results.iter().enumerate() {
            for (k, got) in rounds.iter().enumerate() {
                let want: Vec<Vec<u8>> = (0..size).map(|r| data(r, k, size)).collect();
                assert!(*got == want, "size {size}, rank {rank}, round {k}: wrong result");
            }
        }
        let id = results[0].1.clone().unwrap_or_default();
        assert!(id.len() == 16 && id.bytes().all(|b| b.is_ascii_digit() || b.is_ascii_lowercase()), "{id}");
        assert!(results.iter().all(|(_, j)| j.as_deref() == Some(id.as_str())), "job ids differ");
    }
}

#[test]
fn a_fast_rank_posts_the_next_round_before_a_slow_one_ends_the_first() {
    let results = job(3, |oob| {
        match oob.rank() {
            1 => {
                // Both rounds in flight at once.
                let mut a = oob.allgather(b"a1").expect("post 1");
                let mut b = oob.allgather(b"b1").expect("post 2");
                let rb = wait(&mut b).expect("round 2");
                (wait(&mut a).expect("round 1"), rb)
            }
            r => {
                if r == 2 {
                    thread::sleep(Duration::from_millis(100));
                }
                let a = allgather_blocking(&oob, format!("a{r}").as_bytes(), Some(LONG)).expect("round 1");
                if r == 2 {
                    thread::sleep(Duration::from_millis(100));
                }
                (a, allgather_blocking(&oob, format!("b{r}").as_bytes(), Some(LONG)).expect("round 2"))
            }
        }
    });
    for (a, b) in results {
        assert_eq!(a, [b"a0", b"a1", b"a2"]);
        assert_eq!(b, [b"b0", b"b1", b"b2"]);
    }
}

#[test]
fn wrong_processes_are_refused_while_the_right_ones_complete() {
    let (zero, port) = store(3, LONG);
    let (round1_done, wait_round1) = mpsc::channel();
    let (go_round2, wait_go) = mpsc::channel::<()>();
    let r0 = thread::spawn(move || {
        let a = allgather_blocking(&zero, b"0", Some(LONG));
        (a, allgather_blocking(&zero, b"00", Some(LONG)))
    });
    let r1 = thread::spawn(move || {
        let oob = client(1, 3, port, "tok");
        let a = allgather_blocking(&oob, b"1", Some(LONG));
        (a, allgather_blocking(&oob, b"11", Some(LONG)))
    });
    let r2 = thread::spawn(move || {
        let oob = client(2, 3, port, "tok");
        let a = allgather_blocking(&oob, b"2", Some(LONG));
        let _ = round1_done.send(());
        let _ = wait_go.recv();
        (a, allgather_blocking(&oob, b"22", Some(LONG)))
    });
    wait_round1.recv().expect("round 1 done");
    // Rank 0 is now polling in round 2, which waits for rank 2.
    let refused = |rank: usize, size: usize, token: &str| {
        let oob = TcpOob::new(params(rank, size, port, token, LONG)).expect("intruder");
        allgather_blocking(&oob, b"x", Some(LONG)).expect_err("intruder admitted")
    };
    // A rank given another token does not trust the store (whose proof is made with
    // "tok"), so it sends no proof: it fails, and the store sees it leave.
    let e = refused(1, 3, "other");
    assert_eq!(e.status(), Status::InvalidParam, "{e}");
    let want = format!("rank 1: the process at 127.0.0.1:{port} does not know the job token");
    assert!(e.to_string().contains(&want) && e.to_string().contains("wrong job token"), "{e}");
    // A process that speaks the protocol but has another token: its proof is refused.
    let (_s, (kind, reason)) = raw_rank(port, 1, 3, "other").expect("raw handshake");
    assert_eq!(kind, Kind::Error as u8);
    assert!(String::from_utf8_lossy(&reason).contains("wrong job token"), "{reason:?}");
    for (rank, size, token, reason) in [
        (1, 4, "tok", "job size 4 disagrees with the store's 3"),
        (3, 4, "tok", "job size 4 disagrees"),
        (1, 3, "tok", "rank 1 is already connected (from 127.0.0.1:"),
    ] {
        let e = refused(rank, size, token);
        assert_eq!(e.status(), Status::InvalidParam, "{e}");
        assert!(e.to_string().contains(reason), "{reason:?} in {e}");
        assert!(e.to_string().contains(&format!("the bootstrap store at 127.0.0.1:{port}")), "{e}");
    }
    // Not even a ferrocoll peer.
    let mut raw = TcpStream::connect(("127.0.0.1", port)).expect("raw connect");
    raw.write_all(b"GET / HTTP/1.1\r\n\r\n").expect("raw write");
    let mut answer = Vec::new();
    raw.read_to_end(&mut answer).expect("raw read");
    assert_eq!(answer.first(), Some(&(Kind::Error as u8)));
    assert!(String::from_utf8_lossy(&answer).contains("not a ferrocoll bootstrap hello"));
    // Handshake frames out of order.
    let mut early = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    early.write_all(&frame::encode_proof(&[0; 32]).expect("proof")).expect("write");
    let (kind, reason) = read_frame(&mut early).expect("answer");
    assert_eq!(kind, Kind::Error as u8);
    assert!(String::from_utf8_lossy(&reason).contains("expected a hello, got a Proof frame"), "{reason:?}");
    let mut twice = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let hello = Hello { rank: 2, size: 3, nonce: [0; 32] }.encode().expect("hello");
    twice.write_all(&[&hello[..], &hello[..]].concat()).expect("write");
    assert_eq!(read_frame(&mut twice).expect("challenge").0, Kind::Challenge as u8);
    let (kind, reason) = read_frame(&mut twice).expect("answer");
    assert_eq!(kind, Kind::Error as u8);
    assert!(String::from_utf8_lossy(&reason).contains("expected a proof, got a Hello frame"), "{reason:?}");

    go_round2.send(()).expect("go");
    for h in [r0, r1, r2] {
        let (a, b) = h.join().expect("rank");
        assert_eq!(a.expect("round 1"), [b"0".to_vec(), b"1".to_vec(), b"2".to_vec()]);
        assert_eq!(b.expect("round 2"), [b"00".to_vec(), b"11".to_vec(), b"22".to_vec()]);
    }
}

#[test]
fn a_rank_that_never_arrives_is_named_by_the_timeout() {
    let (zero, port) = store(3, LONG);
    let one = thread::spawn(move || {
        let oob = client(1, 3, port, "tok");
        let mut req = oob.allgather(b"1").expect("post");
        let e = allgather_blocking(&oob, b"again", Some(Duration::from_millis(300))).expect_err("round 2 alone");
        // Returned, so that rank 1 stays connected until rank 0 has timed out.
        (req.test().is_pending(), req.missing(), e, oob)
    });
    let e = allgather_blocking(&zero, b"0", Some(Duration::from_secs(2))).expect_err("rank 2 never comes");
    assert_eq!(e.status(), Status::TimedOut);
    assert!(e.to_string().contains("missing ranks [2]"), "{e}");
    let (pending, missing, e, _oob) = one.join().expect("rank 1");
    assert!(pending);
    assert_eq!(missing, [0]);
    assert!(e.to_string().contains("missing ranks [0]"), "{e}");
}

#[test]
fn the_store_gives_up_on_ranks_that_never_connect_and_says_so_to_the_others() {
    let (zero, port) = store(3, Duration::from_millis(300));
    let one = thread::spawn(move || allgather_blocking(&client(1, 3, port, "tok"), b"1", None));
    let e = allgather_blocking(&zero, b"0", None).expect_err("rank 2 never connects");
    assert_eq!(e.status(), Status::TimedOut);
    // Rank 1 is in the list too when it was slower than the deadline.
    let m = e.to_string();
    let list = m.split("ranks [").nth(1).and_then(|r| r.split(']').next()).unwrap_or_default();
    assert!(list == "2" || list == "1, 2", "{m}");
    let want = format!("] did not connect to the bootstrap store on 127.0.0.1:{port} within 0.3 s");
    assert!(m.contains(&want), "{m}");
    // A failed store still answers (admitted ranks got the abort; late ones are refused with it).
    while !one.is_finished() {
        assert!(zero.allgather(b"again").is_err());
        thread::sleep(Duration::from_millis(5));
    }
    let e = one.join().expect("rank 1").expect_err("told by the store");
    assert_eq!(e.status(), Status::TimedOut);
    assert!(e.to_string().contains("the bootstrap store (rank 0) failed") && e.to_string().contains(&want), "{e}");
}

#[test]
fn a_late_rank_learns_why_the_store_failed() {
    let (zero, port) = store(2, Duration::from_millis(100));
    let e = allgather_blocking(&zero, b"0", None).expect_err("nobody came in time");
    assert!(e.to_string().contains("ranks [1] did not connect"), "{e}");
    let late = thread::spawn(move || allgather_blocking(&client(1, 2, port, "tok"), b"1", None));
    while !late.is_finished() {
        assert!(zero.allgather(b"again").is_err());
        thread::sleep(Duration::from_millis(5));
    }
    let e = late.join().expect("late rank").expect_err("refused");
    assert_eq!(e.status(), Status::TimedOut);
    let want = format!("the bootstrap store at 127.0.0.1:{port} refused rank 1: the bootstrap store (rank 0) failed: ");
    assert!(e.to_string().contains(&want) && e.to_string().contains("ranks [1] did not connect"), "{e}");
}

#[test]
fn an_unreachable_store_is_named_after_the_deadline() {
    // A port nobody listens on: bind one, then free it.
    let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("free port").port();
    let oob = TcpOob::new(params(1, 2, port, "tok", Duration::from_millis(300))).expect("client");
    let start = Instant::now();
    let e = allgather_blocking(&oob, b"x", None).expect_err("nobody listens");
    assert!(start.elapsed() >= Duration::from_millis(300));
    assert_eq!(e.status(), Status::TimedOut);
    let m = e.to_string();
    assert!(
        m.contains(&format!("rank 1 could not reach rank 0 (the bootstrap store at 127.0.0.1:{port}) for 0.3 s")),
        "{m}"
    );
    assert!(m.to_lowercase().contains("refused"), "{m}");
    // Later posts fail the same way at once.
    assert!(oob.allgather(b"y").is_err());
}

#[test]
fn a_rank_that_dies_between_rounds_fails_the_next_round_with_its_name() {
    let (zero, port) = store(3, LONG);
    let (gone, wait_gone) = mpsc::channel();
    let one = thread::spawn(move || {
        let oob = client(1, 3, port, "tok");
        allgather_blocking(&oob, b"1", Some(LONG)).expect("round 1");
        let _ = wait_gone.recv();
        allgather_blocking(&oob, b"11", Some(LONG))
    });
    let two = thread::spawn(move || {
        let oob = client(2, 3, port, "tok");
        allgather_blocking(&oob, b"2", Some(LONG)).expect("round 1");
        drop(oob);
        let _ = gone.send(());
    });
    allgather_blocking(&zero, b"0", Some(LONG)).expect("round 1");
    two.join().expect("rank 2");
    let e = allgather_blocking(&zero, b"00", Some(LONG)).expect_err("rank 2 is gone");
    assert_eq!(e.status(), Status::IoError);
    let m = e.to_string();
    assert!(
        m.contains("rank 2 (from 127.0.0.1:") && m.ends_with("closed its bootstrap connection during round 2"),
        "{m}"
    );
    let e = one.join().expect("rank 1").expect_err("told by the store");
    assert!(e.to_string().contains("rank 1: the bootstrap store (rank 0) failed: rank 2 (from"), "{e}");
    // The store stays failed.
    assert!(zero.allgather(b"000").is_err());
}

#[test]
fn a_rank_that_leaves_while_another_never_came_names_both() {
    let (zero, port) = store(3, LONG);
    // Rank 1 goes through the handshake (which needs rank 0 polling), contributes, and
    // leaves. (One that leaves during the handshake has not proved who it is: it is not
    // named, only logged, and counts as not connected.)
    let one = thread::spawn(move || -> std::io::Result<()> {
        let (mut s, welcome) = raw_rank(port, 1, 3, "tok")?;
        assert_eq!(welcome, (Kind::Welcome as u8, vec![]));
        s.write_all(&frame::encode_contribution(1, b"1").map_err(std::io::Error::other)?)
    });
    let e = allgather_blocking(&zero, b"0", Some(LONG)).expect_err("rank 1 left");
    one.join().expect("rank 1").expect("rank 1's io");
    assert_eq!(e.status(), Status::IoError);
    let m = e.to_string();
    assert!(m.contains("rank 1 (from 127.0.0.1:") && m.contains("during round 1 (ranks [2] never connected)"), "{m}");
}

#[test]
fn a_store_that_dies_is_named_by_its_clients() {
    let (zero, port) = store(2, LONG);
    let (gone, wait_gone) = mpsc::channel();
    let one = thread::spawn(move || {
        let oob = client(1, 2, port, "tok");
        allgather_blocking(&oob, b"1", Some(LONG)).expect("round 1");
        let _ = wait_gone.recv();
        allgather_blocking(&oob, b"11", Some(LONG))
    });
    allgather_blocking(&zero, b"0", Some(LONG)).expect("round 1");
    drop(zero);
    gone.send(()).expect("signal");
    let e = one.join().expect("rank 1").expect_err("store gone");
    assert_eq!(e.status(), Status::IoError);
    // "closed its connection", or "lost its connection (Broken pipe)" when our write raced the close.
    let m = e.to_string();
    assert!(m.contains(&format!("rank 1: rank 0 (the bootstrap store at 127.0.0.1:{port})")), "{m}");
    assert!(m.contains("its connection") && m.ends_with("during round 2"), "{m}");
}

#[test]
fn an_oversized_frame_is_an_error_not_an_allocation() {
    let (zero, port) = store(2, LONG);
    let rogue = thread::spawn(move || -> std::io::Result<Vec<u8>> {
        let (mut s, welcome) = raw_rank(port, 1, 2, "tok")?;
        assert_eq!(welcome, (Kind::Welcome as u8, vec![]));
        let mut header = vec![Kind::Contribute as u8];
        header.extend_from_slice(&(1u32 << 31).to_le_bytes());
        s.write_all(&header)?;
        let mut rest = Vec::new();
        s.read_to_end(&mut rest)?;
        Ok(rest)
    });
    let e = allgather_blocking(&zero, b"0", Some(LONG)).expect_err("rogue frame");
    assert_eq!(e.status(), Status::IoError);
    let m = e.to_string();
    assert!(
        m.contains("rank 1 (from 127.0.0.1:") && m.contains("2147483648 bytes exceeds the limit of 1073741824"),
        "{m}"
    );
    drop(zero);
    let told = rogue.join().expect("rogue").expect("rogue io");
    assert!(String::from_utf8_lossy(&told).contains("exceeds the limit"), "{told:?}");
}

/// A proved rank's round numbers are input too: a rank sends its rounds in
/// order, so one that names any other round (here the last one there is)
/// fails the store at once, naming it, instead of leaving a round the store
/// keeps (and allocates for) forever while round 1 waits for its bytes.
#[test]
fn a_rank_that_skips_rounds_is_an_error_not_a_round_kept_forever() {
    let (zero, port) = store(2, LONG);
    let rogue = thread::spawn(move || -> std::io::Result<Vec<u8>> {
        let (mut s, welcome) = raw_rank(port, 1, 2, "tok")?;
        assert_eq!(welcome, (Kind::Welcome as u8, vec![]));
        s.write_all(&frame::encode_contribution(u64::MAX, b"late").map_err(std::io::Error::other)?)?;
        let mut rest = Vec::new();
        s.read_to_end(&mut rest)?;
        Ok(rest)
    });
    let e = allgather_blocking(&zero, b"0", Some(Duration::from_secs(10))).expect_err("a round out of order");
    let m = e.to_string();
    assert_eq!(e.status(), Status::IoError, "{m}");
    assert!(m.contains(&format!("rank 1 sent bytes for round {}, its next round is 1", u64::MAX)), "{m}");
    drop(zero);
    let told = rogue.join().expect("rogue").expect("rogue io");
    assert!(String::from_utf8_lossy(&told).contains("its next round is 1"), "{told:?}");
}

#[test]
fn the_store_binds_what_it_can() {
    let ip = |addr: &str| store::listen(addr, 0).and_then(|l| Ok(l.local_addr()?.ip())).expect(addr);
    assert_eq!(ip("127.0.0.1"), IpAddr::V4(Ipv4Addr::LOCALHOST));
    assert_eq!(ip("localhost"), IpAddr::V4(Ipv4Addr::LOCALHOST));
    // TEST-NET-3: not an address of this host, so every interface.
    assert_eq!(ip("203.0.113.7"), IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("addr").port();
    let e = TcpOob::new(params(0, 2, port, "tok", LONG)).err().expect("port taken");
    assert_eq!(e.status(), Status::NoResource);
    assert!(e.to_string().contains(&format!("rank 0 could not listen on 127.0.0.1:{port}")), "{e}");
    assert!(e.to_string().contains("choose another MASTER_PORT"), "{e}");
}

#[test]
fn a_store_named_localhost_is_reached() {
    let zero = TcpOob::new(TcpOobParams { master_addr: "localhost".into(), ..params(0, 2, 0, "t", LONG) }).expect("0");
    let port = zero.listen_port().expect("port");
    let one = thread::spawn(move || {
        let oob = TcpOob::new(TcpOobParams { master_addr: "localhost".into(), ..params(1, 2, port, "t", LONG) });
        allgather_blocking(&oob.expect("1"), b"1", Some(LONG))
    });
    let all = allgather_blocking(&zero, b"0", Some(LONG)).expect("0");
    assert_eq!(one.join().expect("1").expect("1"), all);
}

#[test]
fn parameters_are_checked_and_the_token_stays_out_of_debug() {
    let bad = |p: TcpOobParams| TcpOob::new(p).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(bad(params(2, 2, 1, "t", LONG)).contains("rank 2 is not below size 2"));
    assert!(bad(params(0, 0, 1, "t", LONG)).contains("rank 0 is not below size 0"));
    assert!(bad(params(1, 2, 0, "t", LONG)).contains("rank 1 was given master_port 0"));
    assert!(bad(params(1, 2, 1, &"t".repeat(5000), LONG)).contains("token of 5000 bytes"));
    assert!(bad(TcpOobParams { master_addr: " ".into(), ..params(1, 2, 1, "t", LONG) }).contains("empty"));
    let p = params(1, 2, 1, "s3cret", LONG);
    let shown = format!("{p:?}");
    assert!(!shown.contains("s3cret") && shown.contains("<6 bytes>"), "{shown}");
}

#[test]
fn a_job_of_one_needs_no_socket() {
    let oob = TcpOob::new(TcpOobParams { master_addr: String::new(), ..params(0, 1, 0, "t", LONG) }).expect("one");
    assert_eq!(oob.listen_port(), None);
    let mut req = oob.allgather(b"me").expect("post");
    assert!(req.missing().is_empty());
    assert_eq!(wait(&mut req).expect("result"), [b"me"]);
    assert!(req.test().is_ready(), "tested again: an error, not a hang");
    assert_eq!(oob.job_id().map(|j| j.len()), Some(16));
}

#[test]
fn job_ids_differ_between_jobs() {
    let a = TcpOob::new(params(1, 2, 5000, "a", LONG)).expect("a");
    let b = TcpOob::new(params(1, 2, 5000, "b", LONG)).expect("b");
    let c = TcpOob::new(params(1, 2, 5001, "a", LONG)).expect("c");
    let a2 = TcpOob::new(params(1, 3, 5000, "a", LONG)).expect("a2");
    assert_ne!(a.job_id(), b.job_id());
    assert_ne!(a.job_id(), c.job_id());
    assert_eq!(a.job_id(), a2.job_id(), "the rank count is not part of the name");
}

/// What a process that listens where rank 1 looks for its store receives from it, when it
/// answers the hello with `answer`: everything until rank 1 closes. Also rank 1's result and
/// the port.
fn squat(token: &str, answer: impl FnOnce(&Hello) -> Vec<u8>) -> (Vec<u8>, Result<Vec<Vec<u8>>>, u16) {
    let squatter = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = squatter.local_addr().expect("addr").port();
    let token = token.to_string();
    let rank = thread::spawn(move || allgather_blocking(&client(1, 2, port, &token), b"rank 1's bytes", Some(LONG)));
    let (mut s, _) = squatter.accept().expect("accept");
    s.set_read_timeout(Some(LONG)).expect("timeout");
    let (kind, payload) = read_frame(&mut s).expect("first frame");
    let mut got = vec![kind];
    got.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    got.extend_from_slice(&payload);
    let hello = Hello::decode(&payload).expect("a hello of this version");
    // The rank may already have closed: what it sent is what counts.
    let _ = s.write_all(&answer(&hello));
    s.read_to_end(&mut got).expect("read until the rank closes");
    (got, rank.join().expect("rank 1"), port)
}

/// A challenge frame answering `h`, its proof made with `key`.
fn challenge_for(key: &[u8], h: &Hello) -> Vec<u8> {
    let t = Transcript { rank: h.rank, size: h.size, client: h.nonce, store: [2; 32] };
    let proof = Key::new(key).expect("key").store_proof(&t);
    Challenge { nonce: [2; 32], proof }.encode().expect("challenge").to_vec()
}

#[test]
fn a_squatter_on_the_port_never_sees_the_token_and_is_named() {
    let token = "s3cret-job-token-4f9a";
    // What the squatter answers: a challenge whose proof it made with this key (none: zeros),
    // for the hello it received, or with another rank or another connection's nonce.
    let answers = [
        ("a bogus proof", None, None, None),
        ("another job's store", Some(&b"another job's token"[..]), None, None),
        ("a store without a token", Some(&b""[..]), None, None),
        // What this job's store sent on another connection, replayed: the nonces differ.
        ("a replayed challenge", Some(token.as_bytes()), None, Some([3; 32])),
        ("this job's store proof for another rank", Some(token.as_bytes()), Some(2), None),
    ];
    for (what, key, rank, client) in answers {
        let answer = |h: &Hello| match key {
            Some(key) => {
                challenge_for(key, &Hello { rank: rank.unwrap_or(h.rank), nonce: client.unwrap_or(h.nonce), ..*h })
            }
            None => Challenge { nonce: [1; 32], proof: [0; 32] }.encode().expect("challenge").to_vec(),
        };
        let (got, result, port) = squat(token, answer);
        assert!(!got.windows(token.len()).any(|w| w == token.as_bytes()), "{what}: the token travelled: {got:?}");
        // The hello (46 bytes of payload) and nothing more: no proof, no contribution.
        assert_eq!((got[0], got.len()), (Kind::Hello as u8, 5 + 46), "{what}: the rank sent {got:?}");
        let e = result.expect_err(what);
        assert_eq!(e.status(), Status::InvalidParam, "{what}: {e}");
        let want = format!(
            "rank 1: the process at 127.0.0.1:{port} does not know the job token: it is not this job's \
             bootstrap store (another job on the same port, or a squatter)"
        );
        assert!(e.to_string().contains(&want), "{what}: {e}");
    }
}

#[test]
fn a_squatter_that_skips_the_challenge_or_floods_the_rank_is_not_trusted() {
    let welcome = |_: &Hello| frame::encode(Kind::Welcome, &[]).expect("welcome").to_vec();
    let (got, result, port) = squat("tok", welcome);
    assert_eq!(got.len(), 5 + 46, "the rank sent more than its hello: {got:?}");
    let e = result.expect_err("welcomed without a challenge");
    let want = format!("rank 1: the bootstrap store at 127.0.0.1:{port}: sent an unexpected Welcome frame");
    assert!(e.to_string().contains(&want), "{e}");
    // Before the store has proved itself, a rank reads no frame over 16 KiB.
    let flood = |_: &Hello| {
        let mut f = vec![Kind::Result as u8];
        f.extend_from_slice(&(1u32 << 30).to_le_bytes());
        f
    };
    let (got, result, _) = squat("tok", flood);
    assert_eq!(got.len(), 5 + 46, "the rank sent more than its hello: {got:?}");
    let e = result.expect_err("flooded");
    assert!(e.to_string().contains("1073741824 bytes exceeds the limit of 16384 bytes"), "{e}");
    // An error frame before the challenge (a store of protocol version 1 refusing ours)
    // is reported, but not as the store's word.
    let old_store = |_: &Hello| {
        let reason = "bootstrap protocol version 2, the store speaks version 1";
        frame::encode_error(Status::InvalidParam, reason).expect("error").to_vec()
    };
    let (got, result, port) = squat("tok", old_store);
    assert_eq!(got.len(), 5 + 46, "the rank sent more than its hello: {got:?}");
    let e = result.expect_err("refused");
    let want = format!(
        "the process at 127.0.0.1:{port} (before proving that it knows the job token) refused rank 1: \
         bootstrap protocol version 2, the store speaks version 1"
    );
    assert!(e.to_string().contains(&want), "{e}");
    // A corrupt challenge is an error, not a panic.
    let short = |_: &Hello| frame::encode(Kind::Challenge, &[&[1; 40]]).expect("short").to_vec();
    let (_, result, _) = squat("tok", short);
    assert!(result.expect_err("short challenge").to_string().contains("truncated"));
}

#[test]
fn a_job_with_an_empty_token_still_runs() {
    // No token: the protocol runs (and proves nothing; SECURITY.md says so).
    let zero = TcpOob::new(params(0, 3, 0, "", LONG)).expect("store");
    let port = zero.listen_port().expect("port");
    let others: Vec<_> = (1..3)
        .map(|r| thread::spawn(move || allgather_blocking(&client(r, 3, port, ""), &[r as u8], Some(LONG))))
        .collect();
    let all = allgather_blocking(&zero, &[0], Some(LONG)).expect("rank 0");
    assert_eq!(all, [[0], [1], [2]]);
    for h in others {
        assert_eq!(h.join().expect("rank").expect("round"), all);
    }
    // A rank without a token does not take a store with one for its own.
    let (got, result, _) = squat("", |h| challenge_for(b"tok", h));
    assert_eq!(got.len(), 5 + 46, "the rank sent more than its hello: {got:?}");
    assert!(result.expect_err("trusted").to_string().contains("does not know the job token"));
}
