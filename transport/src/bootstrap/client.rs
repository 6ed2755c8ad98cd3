//! A rank other than 0: one connection to the store. Connecting (with
//! retries until the deadline), the handshake, sending contributions and
//! reading results all happen inside [`Client::progress`], without blocking —
//! except the connect attempt itself, which std can only bound (by
//! [`MAX_ATTEMPT`]).
//!
//! The handshake: hello (rank, size, our nonce), then the store's challenge,
//! whose proof we check before we send anything else; only then our proof.
//! Whatever listens on the port before it has proved that it knows the token
//! gets nothing but the hello, and may send us no more than 16 KiB.

use std::collections::BTreeMap;
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use ferrocoll_core::{Error, Result};

use super::auth::{self, Key, Transcript};
use super::frame::{self, Challenge, Fill, FrameReader, Hello, Kind, MAX_FRAME, MAX_HELLO, OutBuf};
use super::{TcpOobParams, deadline_after, secs};

/// The longest one connect attempt may block a `test` (a host that drops SYNs).
const MAX_ATTEMPT: Duration = Duration::from_secs(1);
/// The shortest attempt: below this a healthy connect could be cut off.
const MIN_ATTEMPT: Duration = Duration::from_millis(10);
/// The longest pause between attempts.
const MAX_PAUSE: Duration = Duration::from_millis(500);

pub(super) struct Client {
    rank: usize,
    size: usize,
    /// The store as the user named it (`10.0.0.1:29500`).
    target: String,
    host: String,
    port: u16,
    hello: Hello,
    key: Key,
    timeout: Duration,
    deadline: Option<Instant>,
    conn: Option<Conn>,
    /// The store has proved that it knows the token (we have sent our proof).
    store_proved: bool,
    /// The store has admitted us (contributions may be sent).
    welcomed: bool,
    attempts: u32,
    next_attempt: Instant,
    last_error: String,
    /// Contributions posted before the store welcomed us.
    held: Vec<Arc<[u8]>>,
    results: BTreeMap<u64, Vec<Vec<u8>>>,
    posted: u64,
    received: u64,
    /// Why the store's connection ended, when it ended between rounds.
    closed: Option<String>,
    fatal: Option<Error>,
}

struct Conn {
    stream: TcpStream,
    reader: FrameReader,
    out: OutBuf,
}

impl Client {
    pub(super) fn new(p: &TcpOobParams) -> Result<Client> {
        // One nonce per client is one per connection: a client connects once
        // (a failed attempt sent nothing, and a lost connection is not reopened).
        let hello =
            Hello { rank: frame::u32_of(p.rank, "rank")?, size: frame::u32_of(p.size, "size")?, nonce: auth::nonce()? };
        let host = p.master_addr.trim().trim_start_matches('[').trim_end_matches(']').to_string();
        Ok(Client {
            rank: p.rank,
            size: p.size,
            target: if host.contains(':') {
                format!("[{host}]:{}", p.master_port)
            } else {
                format!("{host}:{}", p.master_port)
            },
            host,
            port: p.master_port,
            hello,
            key: Key::new(p.token.as_bytes())?,
            timeout: p.connect_timeout,
            deadline: deadline_after(p.connect_timeout),
            conn: None,
            store_proved: false,
            welcomed: false,
            attempts: 0,
            next_attempt: Instant::now(),
            last_error: String::from("no attempt finished"),
            held: Vec::new(),
            results: BTreeMap::new(),
            posted: 0,
            received: 0,
            closed: None,
            fatal: None,
        })
    }

    /// This rank's contribution to the next round; returns the round number.
    pub(super) fn post(&mut self, data: &[u8]) -> Result<u64> {
        if let Some(e) = &self.fatal {
            return Err(e.duplicate());
        }
        let round = self.posted + 1;
        let f = frame::encode_contribution(round, data)?;
        self.posted = round;
        match self.conn.as_mut().filter(|_| self.welcomed) {
            Some(c) => {
                c.out.push(f);
            }
            None => self.held.push(f),
        }
        self.progress();
        Ok(round)
    }

    pub(super) fn test(&mut self, round: u64) -> Poll<Result<Vec<Vec<u8>>>> {
        self.progress();
        if let Some(all) = self.results.remove(&round) {
            return Poll::Ready(Ok(all));
        }
        match &self.fatal {
            Some(e) => Poll::Ready(Err(e.duplicate())),
            None => Poll::Pending,
        }
    }

    /// `[0]` until the store has answered `round`.
    pub(super) fn missing(&self, round: u64) -> Vec<usize> {
        if self.received >= round { Vec::new() } else { vec![0] }
    }

    fn progress(&mut self) {
        if self.fatal.is_none() {
            if let Err(e) = self.step() {
                self.fatal = Some(e);
                self.conn = None;
            }
        }
    }

    fn step(&mut self) -> Result<()> {
        if self.conn.is_none() && self.closed.is_none() {
            self.connect()?;
        }
        if let Some(c) = self.conn.as_mut() {
            if let Err(e) = c.out.flush(&mut c.stream) {
                // Still read: an error frame from the store explains more than the broken pipe.
                self.closed = Some(format!("lost its connection ({e})"));
            }
        }
        self.read()?;
        if let Some(why) = &self.closed {
            if !self.welcomed {
                return Err(Error::io(format!(
                    "rank {}: rank 0 (the bootstrap store at {}) {why} before answering the hello",
                    self.rank, self.target
                )));
            }
            if self.posted > self.received {
                return Err(Error::io(format!(
                    "rank {}: rank 0 (the bootstrap store at {}) {why} during round {}",
                    self.rank,
                    self.target,
                    self.received + 1
                )));
            }
        }
        if self.conn.is_some() && !self.welcomed && self.deadline.is_some_and(|d| Instant::now() > d) {
            return Err(Error::timed_out(format!(
                "rank {}: the bootstrap store at {} accepted the connection but did not answer the hello within {}",
                self.rank,
                self.target,
                secs(self.timeout)
            )));
        }
        Ok(())
    }

    /// One connect attempt when it is due; the deadline error once it has passed.
    fn connect(&mut self) -> Result<()> {
        let now = Instant::now();
        if now >= self.next_attempt {
            let attempt = match self.deadline {
                Some(d) => d.saturating_duration_since(now).clamp(MIN_ATTEMPT, MAX_ATTEMPT),
                None => MAX_ATTEMPT,
            };
            if let Some(stream) = self.attempt(attempt) {
                let mut out = OutBuf::default();
                out.push(self.hello.encode()?);
                // Small frames only until the peer has proved it is the store.
                self.conn = Some(Conn { stream, reader: FrameReader::new(MAX_HELLO), out });
                return Ok(());
            }
            self.attempts += 1;
            let pause = Duration::from_millis(10 << self.attempts.min(6)).min(MAX_PAUSE);
            self.next_attempt = Instant::now() + pause;
        }
        if self.deadline.is_some_and(|d| Instant::now() > d) {
            return Err(Error::timed_out(format!(
                "rank {} could not reach rank 0 (the bootstrap store at {}) for {}: {}",
                self.rank,
                self.target,
                secs(self.timeout),
                self.last_error
            )));
        }
        Ok(())
    }

    /// Try every address of the store once; a connected, non-blocking stream or `None`.
    fn attempt(&mut self, timeout: Duration) -> Option<TcpStream> {
        let addrs = match (self.host.as_str(), self.port).to_socket_addrs() {
            Ok(a) => a.collect::<Vec<_>>(),
            Err(e) => {
                self.last_error = format!("{} does not resolve: {e}", self.host);
                return None;
            }
        };
        if addrs.is_empty() {
            self.last_error = format!("{} resolves to no address", self.host);
        }
        for a in addrs {
            let ready = TcpStream::connect_timeout(&a, timeout)
                .and_then(|s| s.set_nonblocking(true).and_then(|()| s.set_nodelay(true)).map(|()| s));
            match ready {
                Ok(s) => return Some(s),
                Err(e) => self.last_error = e.to_string(),
            }
        }
        None
    }

    fn read(&mut self) -> Result<()> {
        let Some(c) = self.conn.as_mut() else { return Ok(()) };
        let fill = c.reader.fill(&mut c.stream);
        let store = |e: Error| e.prefixed(format!("rank {}: the bootstrap store at {}", self.rank, self.target));
        while let Some(f) = c.reader.next().map_err(store)? {
            match f.kind {
                Kind::Challenge if !self.store_proved => {
                    let challenge = Challenge::decode(&f.payload).map_err(store)?;
                    let t = Transcript {
                        rank: self.hello.rank,
                        size: self.hello.size,
                        client: self.hello.nonce,
                        store: challenge.nonce,
                    };
                    if !self.key.store_proof_holds(&t, &challenge.proof) {
                        // Not a byte more to it: the caller drops the connection with the error.
                        return Err(Error::invalid_param(format!(
                            "rank {}: the process at {} does not know the job token: it is not this job's \
                             bootstrap store (another job on the same port, or a squatter), or this rank has \
                             the wrong job token (the ranks were started with different FERROCOLL_JOB_TOKEN values)",
                            self.rank, self.target
                        )));
                    }
                    self.store_proved = true;
                    c.reader.set_max(MAX_FRAME);
                    c.out.push(frame::encode_proof(&self.key.rank_proof(&t))?);
                    if let Err(e) = c.out.flush(&mut c.stream) {
                        self.closed = Some(format!("lost its connection ({e})"));
                    }
                }
                Kind::Welcome if self.store_proved && !self.welcomed => {
                    self.welcomed = true;
                    for h in self.held.drain(..) {
                        c.out.push(h);
                    }
                    if let Err(e) = c.out.flush(&mut c.stream) {
                        self.closed = Some(format!("lost its connection ({e})"));
                    }
                }
                Kind::Error if !self.welcomed => {
                    let e = frame::decode_error(&f.payload);
                    // Before its proof, what answers may not be the store (e.g. a store of
                    // protocol version 1 refusing our version): its words are quoted as such.
                    let who = if self.store_proved {
                        format!("the bootstrap store at {}", self.target)
                    } else {
                        format!("the process at {} (before proving that it knows the job token)", self.target)
                    };
                    return Err(Error::new(e.status(), format!("{who} refused rank {}: {}", self.rank, e.context())));
                }
                Kind::Error => {
                    let e = frame::decode_error(&f.payload);
                    return Err(Error::new(e.status(), format!("rank {}: {}", self.rank, e.context())));
                }
                Kind::Result if self.welcomed => {
                    let (round, all) = frame::decode_result(&f.payload, self.size).map_err(store)?;
                    if round != self.received + 1 || round > self.posted {
                        return Err(store(Error::io(format!(
                            "sent the result of round {round}, expected round {} (posted {})",
                            self.received + 1,
                            self.posted
                        ))));
                    }
                    self.received = round;
                    self.results.insert(round, all);
                }
                k => return Err(store(Error::io(format!("sent an unexpected {k:?} frame")))),
            }
        }
        match fill {
            Ok(Fill::Open) => {}
            Ok(Fill::Eof) => self.closed = Some("closed its connection".to_string()),
            Err(e) => self.closed = Some(format!("lost its connection ({e})")),
        }
        if self.closed.is_some() {
            self.conn = None;
        }
        Ok(())
    }
}
