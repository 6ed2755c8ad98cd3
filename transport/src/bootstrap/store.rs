//! Rank 0's side: the store. It listens, admits each rank once (after the
//! handshake: hello, our challenge with our proof, the rank's proof),
//! collects every rank's bytes of a round and sends the gathered vector to
//! everyone. All I/O is non-blocking and happens inside [`Store::progress`],
//! which the requests' `test` calls.

use std::collections::BTreeMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::task::Poll;
use std::time::{Duration, Instant};

use ferrocoll_core::{Error, Result, Status};

use super::auth::{self, Key, Transcript};
use super::frame::{self, Challenge, Fill, Frame, FrameReader, Hello, Kind, MAX_FRAME, MAX_HELLO, OutBuf};
use super::{TcpOobParams, deadline_after, secs};

/// How long a refused connection may take to drain its error frame.
const REFUSAL_LINGER: Duration = Duration::from_secs(5);
/// How long a new connection may take to present its hello and its proof
/// (ranks send each at once).
const HELLO_WAIT: Duration = Duration::from_secs(30);
/// Why a rank's proof is refused: it was made with another token.
const WRONG_TOKEN: &str = "wrong job token (this process belongs to another job, or the ranks \
                           were started with different FERROCOLL_JOB_TOKEN values)";

pub(super) struct Store {
    size: usize,
    key: Key,
    listener: TcpListener,
    /// What we listen on, for messages (`0.0.0.0:29500`).
    local: SocketAddr,
    timeout: Duration,
    deadline: Option<Instant>,
    /// Accepted, not yet through the handshake.
    pending: Vec<Pending>,
    /// Refused, draining the error frame before closing.
    refusing: Vec<(TcpStream, OutBuf, Instant)>,
    /// Index = rank; `peers[0]` stays `None` (the store itself).
    peers: Vec<Option<Peer>>,
    rounds: BTreeMap<u64, Round>,
    /// Rounds posted by rank 0.
    posted: u64,
    /// Rounds whose result has been built.
    built: u64,
    fatal: Option<Error>,
}

struct Pending {
    stream: TcpStream,
    from: SocketAddr,
    reader: FrameReader,
    /// Our challenge, until the socket has taken it.
    out: OutBuf,
    since: Instant,
    stage: Stage,
}

/// Where a pending connection is in the handshake.
enum Stage {
    /// Accepted; its hello has not arrived.
    Hello,
    /// Hello read and challenge queued; its proof has not arrived.
    Challenged(Transcript),
}

impl Stage {
    /// The frame this stage waits for, for messages.
    fn expects(&self) -> &'static str {
        match self {
            Stage::Hello => "hello",
            Stage::Challenged(_) => "proof",
        }
    }
}

/// What a pending connection's frame leads to.
enum Step {
    /// Read on (the challenge has been queued).
    Wait,
    /// The peer proved it knows the token; what it claimed.
    Proved(Transcript),
    /// Refuse it, with this reason.
    Refuse(String),
}

struct Peer {
    stream: TcpStream,
    from: SocketAddr,
    reader: FrameReader,
    out: OutBuf,
    /// Why the connection is gone (`None`: open).
    closed: Option<String>,
    /// The round whose bytes this rank sends next: a rank's rounds come in
    /// order, one frame each (`Client::post`).
    next_round: u64,
}

struct Round {
    data: Vec<Option<Vec<u8>>>,
    result: Option<Built>,
}

struct Built {
    all: Vec<Vec<u8>>,
    /// Per rank: the byte count of its connection at which the result has been written.
    marks: Vec<u64>,
}

impl Store {
    pub(super) fn new(p: &TcpOobParams) -> Result<Store> {
        let listener = listen(&p.master_addr, p.master_port)?;
        let local = listener.local_addr()?;
        listener.set_nonblocking(true).map_err(|e| Error::from(e).prefixed(format!("bootstrap store on {local}")))?;
        ferrocoll_core::log_debug!("bootstrap store of {} ranks listening on {local}", p.size);
        Ok(Store {
            size: p.size,
            key: Key::new(p.token.as_bytes())?,
            listener,
            local,
            timeout: p.connect_timeout,
            deadline: deadline_after(p.connect_timeout),
            pending: Vec::new(),
            refusing: Vec::new(),
            peers: (0..p.size).map(|_| None).collect(),
            rounds: BTreeMap::new(),
            posted: 0,
            built: 0,
            fatal: None,
        })
    }

    /// The port we listen on (the one chosen by the system when asked for port 0).
    pub(super) fn port(&self) -> u16 {
        self.local.port()
    }

    /// Rank 0's contribution to the next round; returns the round number.
    pub(super) fn post(&mut self, data: &[u8]) -> Result<u64> {
        if self.fatal.is_some() {
            // Still answer late ranks: they learn why instead of waiting for their timeout.
            self.progress();
        }
        if let Some(e) = &self.fatal {
            return Err(e.duplicate());
        }
        self.posted += 1;
        let size = self.size;
        let round = self.rounds.entry(self.posted).or_insert_with(|| Round::new(size));
        round.data[0] = Some(data.to_vec());
        self.progress();
        Ok(self.posted)
    }

    pub(super) fn test(&mut self, round: u64) -> Poll<Result<Vec<Vec<u8>>>> {
        self.progress();
        let flushed = match self.rounds.get(&round).and_then(|r| r.result.as_ref()) {
            Some(b) => self.flushed(b),
            None => false,
        };
        if flushed {
            if let Some(Round { result: Some(b), .. }) = self.rounds.remove(&round) {
                return Poll::Ready(Ok(b.all));
            }
        }
        match &self.fatal {
            Some(e) => Poll::Ready(Err(e.duplicate())),
            None => Poll::Pending,
        }
    }

    /// Ranks whose bytes of `round` have not arrived.
    pub(super) fn missing(&self, round: u64) -> Vec<usize> {
        match self.rounds.get(&round) {
            Some(r) if r.result.is_none() => (0..self.size).filter(|&i| r.data[i].is_none()).collect(),
            _ => Vec::new(),
        }
    }

    fn flushed(&self, b: &Built) -> bool {
        self.peers.iter().enumerate().skip(1).all(|(i, p)| p.as_ref().is_some_and(|p| p.out.written() >= b.marks[i]))
    }

    /// Do every bit of I/O that can be done without blocking.
    fn progress(&mut self) {
        if self.fatal.is_none() {
            if let Err(e) = self.step() {
                self.abort(e);
            }
        }
        if self.fatal.is_some() {
            // Best effort: deliver the abort frames, and refuse newcomers with the reason.
            for p in self.peers.iter_mut().flatten().filter(|p| p.closed.is_none()) {
                let _ = p.out.flush(&mut p.stream);
            }
            self.accept();
            self.admit();
        }
        self.refusing.retain_mut(|(s, out, since)| {
            let done = out.flush(s).is_err() || out.is_empty() || since.elapsed() > REFUSAL_LINGER;
            if done {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
            !done
        });
    }

    fn step(&mut self) -> Result<()> {
        self.accept();
        self.admit();
        self.read()?;
        self.build()?;
        for p in self.peers.iter_mut().flatten().filter(|p| p.closed.is_none()) {
            if let Err(e) = p.out.flush(&mut p.stream) {
                p.closed = Some(format!("lost its bootstrap connection ({e})"));
            }
        }
        self.check()
    }

    fn accept(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((stream, from)) => {
                    if let Err(e) = stream.set_nonblocking(true).and_then(|()| stream.set_nodelay(true)) {
                        ferrocoll_core::log_warn!(
                            "bootstrap store on {}: dropped a connection from {from}: {e}",
                            self.local
                        );
                        continue;
                    }
                    let reader = FrameReader::new(MAX_HELLO);
                    let out = OutBuf::default();
                    self.pending.push(Pending {
                        stream,
                        from,
                        reader,
                        out,
                        since: Instant::now(),
                        stage: Stage::Hello,
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // ECONNABORTED, EMFILE...: try again at the next progress.
                    ferrocoll_core::log_debug!("bootstrap store on {}: accept failed: {e}", self.local);
                    return;
                }
            }
        }
    }

    /// Take new connections through the handshake; admit or refuse them.
    fn admit(&mut self) {
        let mut i = 0;
        while i < self.pending.len() {
            let p = &mut self.pending[i];
            let wrote = p.out.flush(&mut p.stream);
            let fill = p.reader.fill(&mut p.stream);
            let proved = match (p.reader.next(), fill, wrote) {
                (Ok(Some(f)), ..) => match handshake(&self.key, p, f) {
                    // Again on the same connection: flush the challenge, read on.
                    Step::Wait => continue,
                    Step::Proved(t) => Ok(t),
                    Step::Refuse(reason) => Err(reason),
                },
                (Err(e), ..) => Err(format!("not a ferrocoll bootstrap {} ({})", p.stage.expects(), e.context())),
                (Ok(None), Ok(Fill::Open), Ok(())) if p.since.elapsed() < HELLO_WAIT => {
                    i += 1;
                    continue;
                }
                (Ok(None), Ok(Fill::Open), Ok(())) => {
                    Err(format!("no {} within {}", p.stage.expects(), secs(HELLO_WAIT)))
                }
                // Closed, or the socket failed.
                (Ok(None), ..) => {
                    let p = self.pending.swap_remove(i);
                    self.left(&p);
                    continue;
                }
            };
            let p = self.pending.swap_remove(i);
            match (proved.and_then(|t| self.judge(&t)), &self.fatal) {
                (Ok(rank), None) => self.welcome(rank, p),
                (Err(reason), _) => self.refuse(p, Status::InvalidParam, &reason),
                (Ok(_), Some(e)) => {
                    let reason = format!("the bootstrap store (rank 0) failed: {}", e.context());
                    self.refuse(p, e.status(), &reason);
                }
            }
        }
    }

    /// A pending connection closed before the end of the handshake. One that
    /// was challenged and left did not know the token (a rank that does
    /// checks our proof, then sends its own); it is said like a refusal.
    fn left(&self, p: &Pending) {
        match &p.stage {
            Stage::Challenged(t) if self.fatal.is_none() => ferrocoll_core::log_warn!(
                "bootstrap store on {}: the connection from {} (claiming rank {} of {}) left without proving that \
                 it knows the job token (a process of another job, a rank given a different FERROCOLL_JOB_TOKEN, \
                 a rank that died, or something probing the port); still waiting for the job's ranks",
                self.local,
                p.from,
                t.rank,
                t.size
            ),
            _ => ferrocoll_core::log_debug!(
                "bootstrap store on {}: {} left before its {}",
                self.local,
                p.from,
                p.stage.expects()
            ),
        }
    }

    /// The rank a peer that proved the token may take, or why not (sent to the peer).
    fn judge(&self, t: &Transcript) -> std::result::Result<usize, String> {
        let (rank, size) = (t.rank as usize, t.size as usize);
        if size != self.size {
            return Err(format!("job size {size} disagrees with the store's {}", self.size));
        }
        if rank == 0 || rank >= self.size {
            return Err(format!("rank {rank} is not between 1 and {} (rank 0 is the store)", self.size - 1));
        }
        if let Some(p) = &self.peers[rank] {
            return Err(format!("rank {rank} is already connected (from {})", p.from));
        }
        Ok(rank)
    }

    fn welcome(&mut self, rank: usize, p: Pending) {
        let Pending { stream, from, mut reader, mut out, .. } = p;
        reader.set_max(MAX_FRAME);
        match frame::encode(Kind::Welcome, &[]) {
            Ok(f) => {
                out.push(f);
            }
            Err(e) => ferrocoll_core::log_warn!("bootstrap store: {e}"),
        }
        ferrocoll_core::log_debug!("bootstrap store on {}: rank {rank} connected from {from}", self.local);
        self.peers[rank] = Some(Peer { stream, from, reader, out, closed: None, next_round: 1 });
    }

    fn refuse(&mut self, p: Pending, status: Status, reason: &str) {
        if self.fatal.is_none() {
            ferrocoll_core::log_warn!(
                "bootstrap store on {}: refused the connection from {}: {reason}; still waiting for the job's ranks",
                self.local,
                p.from
            );
        }
        let mut out = p.out;
        if let Ok(f) = frame::encode_error(status, reason) {
            out.push(f);
        }
        self.refusing.push((p.stream, out, Instant::now()));
    }

    /// Take in the contributions of every admitted rank.
    fn read(&mut self) -> Result<()> {
        for (rank, slot) in self.peers.iter_mut().enumerate() {
            let Some(p) = slot.as_mut().filter(|p| p.closed.is_none()) else { continue };
            let fill = p.reader.fill(&mut p.stream);
            loop {
                let f = match p.reader.next() {
                    Ok(Some(f)) => f,
                    Ok(None) => break,
                    Err(e) => return Err(e.prefixed(format!("rank {rank} (from {})", p.from))),
                };
                if f.kind != Kind::Contribute {
                    return Err(Error::io(format!(
                        "rank {rank} (from {}) sent an unexpected {:?} frame",
                        p.from, f.kind
                    )));
                }
                let (round, data) =
                    frame::decode_contribution(&f.payload).map_err(|e| e.prefixed(format!("rank {rank}")))?;
                // The round number is the peer's: any other than its next
                // (one over, sent twice, or far ahead, which would be kept
                // and allocated for while the round before waits) is an error.
                if round != p.next_round {
                    return Err(Error::io(format!(
                        "rank {rank} sent bytes for round {round}, its next round is {}",
                        p.next_round
                    )));
                }
                p.next_round += 1;
                let size = self.size;
                let r = self.rounds.entry(round).or_insert_with(|| Round::new(size));
                r.data[rank] = Some(data);
            }
            match fill {
                Ok(Fill::Open) => {}
                Ok(Fill::Eof) => p.closed = Some("closed its bootstrap connection".to_string()),
                Err(e) => p.closed = Some(format!("lost its bootstrap connection ({e})")),
            }
        }
        Ok(())
    }

    /// Build (and queue) the result of every round that has all its bytes, in order.
    fn build(&mut self) -> Result<()> {
        loop {
            let next = self.built + 1;
            let Some(round) = self.rounds.get_mut(&next) else { return Ok(()) };
            if round.data.iter().any(Option::is_none) {
                return Ok(());
            }
            let all: Vec<Vec<u8>> = round.data.iter_mut().map(|d| d.take().unwrap_or_default()).collect();
            let f = frame::encode_result(next, &all)?;
            let mut marks = vec![0; self.size];
            for (rank, p) in self.peers.iter_mut().enumerate().skip(1) {
                marks[rank] = match p {
                    Some(p) if p.closed.is_none() => p.out.push(f.clone()),
                    _ => u64::MAX,
                };
            }
            round.result = Some(Built { all, marks });
            self.built = next;
        }
    }

    /// Ranks that left while a round needs them, and ranks that never came.
    fn check(&self) -> Result<()> {
        for (rank, p) in self.peers.iter().enumerate().skip(1) {
            let Some(p) = p else { continue };
            let Some(why) = &p.closed else { continue };
            let owed = self.rounds.iter().find(|(_, r)| match &r.result {
                None => true,
                Some(b) => p.out.written() < b.marks[rank],
            });
            if let Some((round, _)) = owed {
                let absent = self.absent();
                let also =
                    if absent.is_empty() { String::new() } else { format!(" (ranks {absent:?} never connected)") };
                return Err(Error::io(format!("rank {rank} (from {}) {why} during round {round}{also}", p.from)));
            }
        }
        if self.deadline.is_some_and(|d| Instant::now() > d) {
            let absent = self.absent();
            if !absent.is_empty() {
                return Err(Error::timed_out(format!(
                    "ranks {absent:?} did not connect to the bootstrap store on {} within {}",
                    self.local,
                    secs(self.timeout)
                )));
            }
        }
        Ok(())
    }

    /// Ranks that have not connected (yet).
    fn absent(&self) -> Vec<usize> {
        (1..self.size).filter(|&r| self.peers[r].is_none()).collect()
    }

    /// Fail every round, now and later, and tell the connected ranks why.
    fn abort(&mut self, e: Error) {
        ferrocoll_core::log_warn!("bootstrap store on {}: {}", self.local, e.context());
        if let Ok(f) = frame::encode_error(e.status(), &format!("the bootstrap store (rank 0) failed: {}", e.context()))
        {
            for p in self.peers.iter_mut().flatten().filter(|p| p.closed.is_none()) {
                p.out.push(f.clone());
            }
        }
        self.fatal = Some(e);
    }
}

/// One handshake frame of a pending connection: a hello is answered with a
/// challenge, a proof is checked. Nothing here admits a rank: the caller
/// judges what a proved peer claims.
fn handshake(key: &Key, p: &mut Pending, f: Frame) -> Step {
    match (&p.stage, f.kind) {
        (Stage::Hello, Kind::Hello) => {
            let hello = match Hello::decode(&f.payload) {
                Ok(h) => h,
                Err(reason) => return Step::Refuse(reason),
            };
            let challenge = auth::nonce().and_then(|nonce| {
                let t = Transcript { rank: hello.rank, size: hello.size, client: hello.nonce, store: nonce };
                let frame = Challenge { nonce, proof: key.store_proof(&t) }.encode()?;
                Ok((t, frame))
            });
            match challenge {
                Ok((t, frame)) => {
                    p.out.push(frame);
                    p.stage = Stage::Challenged(t);
                    Step::Wait
                }
                Err(e) => Step::Refuse(format!("the bootstrap store could not make a challenge: {}", e.context())),
            }
        }
        (Stage::Challenged(t), Kind::Proof) => match frame::decode_proof(&f.payload) {
            Ok(proof) if key.rank_proof_holds(t, &proof) => Step::Proved(t.clone()),
            Ok(_) => Step::Refuse(WRONG_TOKEN.to_string()),
            Err(e) => Step::Refuse(format!("malformed proof: {}", e.context())),
        },
        (stage, k) => Step::Refuse(format!("expected a {}, got a {k:?} frame", stage.expects())),
    }
}

impl Round {
    fn new(size: usize) -> Round {
        Round { data: vec![None; size], result: None }
    }
}

/// Bind the store's socket. A loopback or local IP address is bound as it
/// is; any other address, and a host name (which may resolve differently on
/// this host, e.g. to 127.0.1.1), binds every interface.
pub(super) fn listen(master_addr: &str, port: u16) -> Result<TcpListener> {
    let host = master_addr.trim().trim_start_matches('[').trim_end_matches(']');
    let mut candidates = Vec::new();
    match host.parse::<IpAddr>() {
        Ok(ip) if ip.is_loopback() || ip.is_unspecified() => candidates.push(ip),
        Ok(ip) => candidates.extend([ip, unspecified(&ip)]),
        Err(_) if host.eq_ignore_ascii_case("localhost") => candidates.push(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        Err(_) => {
            let v6_only = (host, port)
                .to_socket_addrs()
                .map(|mut a| a.next().is_some() && a.all(|a| a.is_ipv6()))
                .unwrap_or(false);
            candidates.push(if v6_only {
                IpAddr::V6(Ipv6Addr::UNSPECIFIED)
            } else {
                IpAddr::V4(Ipv4Addr::UNSPECIFIED)
            });
        }
    }
    let mut last = None;
    for ip in candidates {
        // std sets SO_REUSEADDR on Unix, so a restarted job can rebind a port in TIME_WAIT.
        match TcpListener::bind((ip, port)) {
            Ok(l) => return Ok(l),
            // Not an address of this host: listen on every interface instead.
            Err(e) if e.kind() == io::ErrorKind::AddrNotAvailable => last = Some((ip, e)),
            Err(e) => return Err(bind_error(master_addr, ip, port, e)),
        }
    }
    Err(match last {
        Some((ip, e)) => bind_error(master_addr, ip, port, e),
        None => Error::internal(format!("no address to listen on for MASTER_ADDR={master_addr}")),
    })
}

fn unspecified(ip: &IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    }
}

fn bind_error(master_addr: &str, ip: IpAddr, port: u16, e: io::Error) -> Error {
    let hint =
        if e.kind() == io::ErrorKind::AddrInUse { "; another job may hold it: choose another MASTER_PORT" } else { "" };
    Error::no_resource(format!(
        "rank 0 could not listen on {} for the bootstrap store (MASTER_ADDR={master_addr}, MASTER_PORT={port}): {e}{hint}",
        SocketAddr::new(ip, port)
    ))
    .with_source(e)
}
