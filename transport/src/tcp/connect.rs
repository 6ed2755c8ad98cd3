//! Opening one connection per pair of endpoints, eagerly, at `connect`:
//! each endpoint connects to the peers above it and accepts the peers below
//! it, all at once, retrying until a deadline.
//!
//! Both sides of a new connection send a [`Hello`] (the connector first; the
//! acceptor answers only if it accepts). A connection of another job, of
//! another protocol version, or from an endpoint that has no business here
//! is refused (closed and logged) and the wait goes on.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use ferrocoll_core::{Error, Result};

use super::sys;
use super::wire::{HELLO_LEN, Hello, VERSION};

/// A peer to connect with.
#[derive(Clone, Copy, Debug)]
pub(super) struct Wanted {
    pub ep: usize,
    pub addr: SocketAddr,
}

/// Longest wait for one TCP connect (a peer's full backlog drops SYNs for a while).
const CONNECT_TRY: Duration = Duration::from_secs(2);
/// First and longest pause before retrying a failed connect.
const RETRY_MIN: Duration = Duration::from_millis(10);
const RETRY_MAX: Duration = Duration::from_secs(1);
/// First and longest sleep of a pass that found nothing to do.
const NAP_MIN: Duration = Duration::from_micros(50);
const NAP_MAX: Duration = Duration::from_millis(5);
/// Longest wait, from its accept, for the hello of an incoming connection.
/// A connector writes its hello right after its connect, so the hello is
/// usually in the socket by the accept; one that sends nothing (a port
/// scanner, a stranger, a half-open connection) would otherwise hold a
/// descriptor until `connect` ends (never, without a deadline). A peer
/// refused for being slow sees the close and retries.
const HELLO_WAIT: Duration = Duration::from_secs(5);

/// How long an outgoing connection waits for the peer's answer before the
/// log says so (once): it waits on until `connect`'s deadline, since a peer
/// still on its way to its accept answers it then.
const ANSWER_WARN: Duration = Duration::from_secs(30);

/// Incoming connections that may wait for their hello at once, beyond two
/// per lower endpoint (each connects once, and again after a failure): a
/// flood of silent connections (a scanner, an attacker) is closed oldest
/// first instead of holding a descriptor each for `HELLO_WAIT`, so the
/// process does not run out of descriptors. A peer's hello is read in the
/// pass that accepts it, so a peer is never among the evicted unless its
/// hello is late; it then sees the close and retries.
const SILENT_SPARE: usize = 64;

/// Who this endpoint is, for the handshake.
#[derive(Clone, Copy, Debug)]
pub(super) struct Me {
    pub ep: usize,
    pub job: u64,
}

impl Me {
    fn hello_to(&self, to: usize) -> [u8; HELLO_LEN] {
        Hello { version: VERSION, job: self.job, from: self.ep as u32, to: to as u32 }.encode()
    }

    /// Why `h` is not a hello from endpoint `from` (any endpoint below us
    /// in `expected` when `None`) to this endpoint of this job.
    fn check(&self, h: &Hello, from: Option<usize>, expected: &BTreeSet<usize>) -> Result<usize, String> {
        if h.version != VERSION {
            return Err(format!("it speaks protocol version {}, not {VERSION}", h.version));
        }
        if h.job != self.job {
            return Err(format!("it belongs to another job (hash {:#x}, not {:#x})", h.job, self.job));
        }
        if h.to as usize != self.ep {
            return Err(format!("it is meant for endpoint {}, not {}", h.to, self.ep));
        }
        let ep = h.from as usize;
        match from {
            Some(f) if f != ep => Err(format!("it answers as endpoint {ep}, not {f}")),
            None if !expected.contains(&ep) => {
                Err(format!("endpoint {ep} is not expected to connect to endpoint {}", self.ep))
            }
            _ => Ok(ep),
        }
    }
}

/// A connection whose peer's hello is still arriving.
struct Handshake {
    stream: TcpStream,
    peer: SocketAddr,
    got: Vec<u8>,
    /// When the connection was opened or accepted.
    since: Instant,
    /// Whether the log said already that its answer is late (outgoing).
    warned: bool,
}

enum Step {
    Pending,
    Hello(Hello),
    Failed(String),
}

impl Handshake {
    fn new(stream: TcpStream, peer: SocketAddr) -> Handshake {
        Handshake { stream, peer, got: Vec::with_capacity(HELLO_LEN), since: Instant::now(), warned: false }
    }

    /// Why an outgoing connection (from endpoint `me` to `to`) still has no
    /// answer, once it has waited `HELLO_WAIT`: for the deadline's error,
    /// and for the log, once, past `ANSWER_WARN`. It is not closed: the peer
    /// may not have reached its accept yet, and one that answers a
    /// connection this side closed would count it connected.
    fn late(&mut self, me: usize, to: usize) -> Option<String> {
        let waited = self.since.elapsed();
        if waited < HELLO_WAIT {
            return None;
        }
        let why = format!("it accepted the connection but has not answered for {} s", waited.as_secs());
        if waited >= ANSWER_WARN && !self.warned {
            self.warned = true;
            ferrocoll_core::log_warn!("p2p tcp: endpoint {me} waits for endpoint {to} at {}: {why}", self.peer);
        }
        Some(why)
    }

    /// Read the rest of the peer's hello, and not a byte more (frames follow it).
    fn read(&mut self) -> Step {
        let mut buf = [0u8; HELLO_LEN];
        loop {
            let want = HELLO_LEN - self.got.len();
            match (&self.stream).read(&mut buf[..want]) {
                Ok(0) => return Step::Failed("it closed the connection during the handshake".into()),
                Ok(n) => {
                    self.got.extend_from_slice(&buf[..n]);
                    if self.got.len() == HELLO_LEN {
                        return match Hello::decode(&self.got) {
                            Ok(h) => Step::Hello(h),
                            Err(e) => Step::Failed(e.context().to_string()),
                        };
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Step::Pending,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Step::Failed(e.to_string()),
            }
        }
    }
}

/// An outgoing connection: idle (waiting to retry) or handshaking.
struct Out {
    to: Wanted,
    conn: Option<Handshake>,
    next_try: Instant,
    delay: Duration,
}

/// Open a connection to `to` and send our hello; the stream comes back non-blocking.
fn open(me: &Me, to: Wanted, wait: Duration) -> std::io::Result<TcpStream> {
    let s = TcpStream::connect_timeout(&to.addr, wait.clamp(Duration::from_millis(1), CONNECT_TRY))?;
    s.set_nodelay(true)?;
    sys::keep_alive(s.as_raw_fd())?;
    (&s).write_all(&me.hello_to(to.ep))?;
    s.set_nonblocking(true)?;
    Ok(s)
}

/// Connect with every peer of `peers` (other than `me`), accepting on
/// `listener`; returns one non-blocking `TCP_NODELAY` stream per peer, or
/// an error naming the endpoints not connected once `timeout` has passed.
pub(super) fn establish(
    listener: &TcpListener,
    me: Me,
    peers: &[Wanted],
    timeout: Option<Duration>,
) -> Result<Vec<(usize, TcpStream)>> {
    let start = Instant::now();
    // A timeout too long for the clock means no deadline.
    let deadline = timeout.and_then(|t| start.checked_add(t));
    let mut outs: Vec<Out> = peers
        .iter()
        .filter(|p| p.ep > me.ep)
        .map(|&to| Out { to, conn: None, next_try: start, delay: RETRY_MIN })
        .collect();
    let below: BTreeSet<usize> = peers.iter().filter(|p| p.ep < me.ep).map(|p| p.ep).collect();
    let mut incoming: Vec<Handshake> = Vec::new();
    let mut done: BTreeMap<usize, TcpStream> = BTreeMap::new();
    let mut last_err: BTreeMap<usize, String> = BTreeMap::new();
    let mut nap = NAP_MIN;
    loop {
        let now = Instant::now();
        let left = deadline.map_or(CONNECT_TRY, |d| d.saturating_duration_since(now));
        let mut busy = false;

        for o in outs.iter_mut() {
            if done.contains_key(&o.to.ep) {
                continue;
            }
            if o.conn.is_none() && now >= o.next_try {
                busy = true;
                match open(&me, o.to, left) {
                    Ok(s) => o.conn = Some(Handshake::new(s, o.to.addr)),
                    Err(e) => {
                        last_err.insert(o.to.ep, e.to_string());
                        o.next_try = now + o.delay;
                        o.delay = (o.delay * 2).min(RETRY_MAX);
                    }
                }
            }
            let Some(hs) = &mut o.conn else { continue };
            let failure = match hs.read() {
                // Still no answer: wait on (see `Handshake::late`), saying why.
                Step::Pending => {
                    if let Some(why) = hs.late(me.ep, o.to.ep) {
                        last_err.insert(o.to.ep, why);
                    }
                    continue;
                }
                Step::Hello(h) => me.check(&h, Some(o.to.ep), &below).err(),
                Step::Failed(why) => Some(why),
            };
            busy = true;
            match (failure, o.conn.take()) {
                (None, Some(hs)) => {
                    done.insert(o.to.ep, hs.stream);
                }
                (Some(why), _) => {
                    last_err.insert(o.to.ep, why);
                    o.next_try = now + o.delay;
                    o.delay = (o.delay * 2).min(RETRY_MAX);
                }
                (None, None) => {}
            }
        }

        loop {
            match listener.accept() {
                Ok((s, peer)) => {
                    busy = true;
                    match s
                        .set_nonblocking(true)
                        .and_then(|()| s.set_nodelay(true))
                        .and_then(|()| sys::keep_alive(s.as_raw_fd()))
                    {
                        Ok(()) => incoming.push(Handshake::new(s, peer)),
                        Err(e) => ferrocoll_core::log_warn!(
                            "p2p tcp: endpoint {} dropped a connection from {peer}: {e}",
                            me.ep
                        ),
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    // E.g. out of file descriptors: say so, and try again on the next pass.
                    last_err.insert(usize::MAX, format!("accept failed: {e}"));
                    break;
                }
            }
        }

        let silent_cap = below.len().saturating_mul(2).saturating_add(SILENT_SPARE);
        for mut hs in std::mem::take(&mut incoming) {
            let why = match hs.read() {
                Step::Pending if hs.since.elapsed() < HELLO_WAIT => {
                    incoming.push(hs);
                    continue;
                }
                Step::Pending => format!("no hello within {HELLO_WAIT:?} of its accept"),
                Step::Failed(why) => why,
                Step::Hello(h) => match me.check(&h, None, &below) {
                    Ok(ep) => match (&hs.stream).write(&me.hello_to(ep)) {
                        Ok(HELLO_LEN) => {
                            busy = true;
                            if done.insert(ep, hs.stream).is_some() {
                                ferrocoll_core::log_debug!("p2p tcp: endpoint {ep} reconnected to endpoint {}", me.ep);
                            }
                            continue;
                        }
                        Ok(n) => format!("the answer was cut short after {n} bytes"),
                        Err(e) => format!("the answer failed: {e}"),
                    },
                    Err(why) => why,
                },
            };
            busy = true;
            ferrocoll_core::log_warn!("p2p tcp: endpoint {} refused a connection from {}: {why}", me.ep, hs.peer);
        }
        if incoming.len() > silent_cap {
            // Oldest first: they were accepted first, and waited longest.
            let evicted = incoming.len() - silent_cap;
            let first = incoming.drain(..evicted).next().map(|hs| hs.peer);
            ferrocoll_core::log_warn!(
                "p2p tcp: endpoint {} closed {evicted} connections still without a hello (the first from {first:?}): \
                 at most {silent_cap} may wait for theirs",
                me.ep
            );
        }

        if peers.iter().all(|p| p.ep == me.ep || done.contains_key(&p.ep)) {
            return Ok(done.into_iter().collect());
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(timed_out(me.ep, peers, &done, &last_err, start.elapsed()));
        }
        if busy {
            nap = NAP_MIN;
        } else {
            std::thread::sleep(nap);
            nap = (nap * 2).min(NAP_MAX);
        }
    }
}

fn timed_out(
    me: usize,
    peers: &[Wanted],
    done: &BTreeMap<usize, TcpStream>,
    last_err: &BTreeMap<usize, String>,
    waited: Duration,
) -> Error {
    let missing: Vec<&Wanted> = peers.iter().filter(|p| p.ep != me && !done.contains_key(&p.ep)).collect();
    let eps: Vec<usize> = missing.iter().map(|p| p.ep).collect();
    let mut why: Vec<String> = missing
        .iter()
        .map(|p| {
            let what = match last_err.get(&p.ep) {
                Some(e) => format!("last error: {e}"),
                None if p.ep < me => "it never connected to this endpoint".to_string(),
                None => "no answer to the handshake".to_string(),
            };
            format!("endpoint {} ({}): {what}", p.ep, p.addr)
        })
        .collect();
    if let Some(e) = last_err.get(&usize::MAX) {
        why.push(e.clone());
    }
    if missing.iter().any(|p| p.addr.ip().is_loopback()) {
        why.push(
            "an address is loopback: an endpoint on another host must set UCC_TL_P2P_TCP_ADDR or MASTER_ADDR".into(),
        );
    }
    Error::timed_out(format!(
        "endpoint {me}: endpoints {eps:?} not connected after {:.1}s (UCC_TL_P2P_TCP_CONNECT_TIMEOUT): {}",
        waited.as_secs_f64(),
        why.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use std::thread;

    use super::*;

    fn listener() -> (TcpListener, SocketAddr) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let a = l.local_addr().unwrap();
        (l, a)
    }

    #[test]
    fn three_endpoints_connect_pairwise_and_strangers_are_refused() {
        let ls: Vec<_> = (0..3).map(|_| listener()).collect();
        let peers: Vec<Wanted> = ls.iter().enumerate().map(|(ep, (_, addr))| Wanted { ep, addr: *addr }).collect();
        // A stranger of another job knocks on endpoint 2 first: refused, and the wait goes on.
        let mut stranger = TcpStream::connect(peers[2].addr).unwrap();
        stranger.write_all(&Hello { version: VERSION, job: 666, from: 0, to: 2 }.encode()).unwrap();
        let got = thread::scope(|s| {
            let hs: Vec<_> = ls
                .iter()
                .enumerate()
                .map(|(ep, (l, _))| {
                    let peers = &peers;
                    s.spawn(move || establish(l, Me { ep, job: 42 }, peers, Some(Duration::from_secs(20))))
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap().unwrap()).collect::<Vec<_>>()
        });
        for (ep, streams) in got.iter().enumerate() {
            let eps: Vec<usize> = streams.iter().map(|(e, _)| *e).collect();
            assert_eq!(eps, (0..3).filter(|&e| e != ep).collect::<Vec<_>>());
        }
        // The stranger's connection was closed without an answer.
        stranger.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut b = [0u8; 1];
        assert!(matches!(stranger.read(&mut b), Ok(0) | Err(_)));
        // Each pair's streams are the two ends of one connection.
        let (a, b) = (&got[0][0].1, &got[1][0].1);
        assert_eq!(a.local_addr().unwrap(), b.peer_addr().unwrap());
    }

    #[test]
    fn a_connection_that_sends_no_hello_is_dropped_while_the_wait_goes_on() {
        let ls: Vec<_> = (0..2).map(|_| listener()).collect();
        let peers: Vec<Wanted> = ls.iter().enumerate().map(|(ep, (_, addr))| Wanted { ep, addr: *addr }).collect();
        thread::scope(|s| {
            let (l1, peers1) = (&ls[1].0, &peers);
            let one = s.spawn(move || establish(l1, Me { ep: 1, job: 7 }, peers1, Some(Duration::from_secs(120))));
            // Half a hello, then silence: endpoint 1 must close it while it still
            // waits for endpoint 0, not hold it for as long as it waits.
            let mut silent = TcpStream::connect(peers[1].addr).unwrap();
            silent.write_all(&Hello { version: VERSION, job: 7, from: 0, to: 1 }.encode()[..5]).unwrap();
            silent.set_read_timeout(Some(HELLO_WAIT * 6)).unwrap();
            let r = silent.read(&mut [0u8; 1]);
            let closed = matches!(r, Ok(0)) || r.as_ref().is_err_and(|e| e.kind() == ErrorKind::ConnectionReset);
            // Endpoint 0 arrives only now; the group completes either way.
            let zero = establish(&ls[0].0, Me { ep: 0, job: 7 }, &peers, Some(Duration::from_secs(60)));
            assert!(zero.is_ok() && one.join().unwrap().is_ok());
            assert!(closed, "the silent connection was held open while endpoint 1 waited: {r:?}");
        });
    }

    #[test]
    fn a_flood_of_silent_connections_is_closed_oldest_first_while_the_wait_goes_on() {
        let ls: Vec<_> = (0..2).map(|_| listener()).collect();
        let peers: Vec<Wanted> = ls.iter().enumerate().map(|(ep, (_, addr))| Wanted { ep, addr: *addr }).collect();
        let flood = SILENT_SPARE + 2 + 40;
        thread::scope(|s| {
            let (l1, peers1) = (&ls[1].0, &peers);
            let one = s.spawn(move || establish(l1, Me { ep: 1, job: 9 }, peers1, Some(Duration::from_secs(120))));
            // Silent connections, more than may wait: the oldest are closed
            // at once, not after HELLO_WAIT each.
            let silent: Vec<TcpStream> = (0..flood).map(|_| TcpStream::connect(peers[1].addr).unwrap()).collect();
            let start = Instant::now();
            let closed = silent
                .iter()
                .filter(|c| {
                    let left = (HELLO_WAIT / 2).saturating_sub(start.elapsed()).max(Duration::from_millis(1));
                    c.set_read_timeout(Some(left)).unwrap();
                    let r = (&**c).read(&mut [0u8; 1]);
                    matches!(r, Ok(0)) || r.is_err_and(|e| e.kind() == ErrorKind::ConnectionReset)
                })
                .count();
            // Endpoint 0 arrives only now; the group completes either way.
            let zero = establish(&ls[0].0, Me { ep: 0, job: 9 }, &peers, Some(Duration::from_secs(60)));
            assert!(zero.is_ok() && one.join().unwrap().is_ok());
            let cap = 2 + SILENT_SPARE; // one endpoint below endpoint 1
            assert!(closed >= flood - cap, "{closed} of {flood} silent connections closed before HELLO_WAIT / 2");
        });
    }

    /// An endpoint that accepts and never answers: the connection is kept
    /// (an answer may still come), and the deadline's error says why.
    #[test]
    fn a_peer_that_accepts_and_never_answers_is_named_with_why() {
        let (l, addr) = listener();
        let (mute, mute_addr) = listener();
        let peers = [Wanted { ep: 0, addr }, Wanted { ep: 1, addr: mute_addr }];
        let deadline = HELLO_WAIT + Duration::from_secs(1);
        let (e, accepted) = thread::scope(|s| {
            let connector = s.spawn(|| establish(&l, Me { ep: 0, job: 3 }, &peers, Some(deadline)));
            // Accept every connection, read nothing, answer nothing; keep them open.
            let mut held = Vec::new();
            while !connector.is_finished() {
                match mute.accept() {
                    Ok((c, _)) => held.push(c),
                    Err(_) => thread::sleep(Duration::from_millis(5)),
                }
            }
            (connector.join().unwrap().unwrap_err(), held.len())
        });
        let s = e.to_string();
        assert_eq!(e.status(), ferrocoll_core::Status::TimedOut);
        assert!(s.contains("endpoints [1]") && s.contains("accepted the connection but has not answered"), "{s}");
        assert_eq!(accepted, 1, "the connection was kept while an answer could come");
    }

    #[test]
    fn the_deadline_names_the_missing_endpoints_and_the_last_error() {
        let (l, addr) = listener();
        // Endpoint 2's address is a port nobody listens on; endpoint 0 never comes.
        let (dead, dead_addr) = listener();
        drop(dead);
        let peers = [Wanted { ep: 0, addr }, Wanted { ep: 1, addr }, Wanted { ep: 2, addr: dead_addr }];
        let e = establish(&l, Me { ep: 1, job: 1 }, &peers, Some(Duration::from_millis(300))).unwrap_err();
        let s = e.to_string();
        assert_eq!(e.status(), ferrocoll_core::Status::TimedOut);
        assert!(s.contains("endpoints [0, 2]") && s.contains("never connected") && s.contains("refused"), "{s}");
    }
}
