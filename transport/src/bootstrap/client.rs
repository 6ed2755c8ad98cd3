//! A rank other than 0: one connection to the store. Connecting (with
//! retries until the deadline), the hello, sending contributions and reading
//! results all happen inside [`Client::progress`], without blocking — except
//! the connect attempt itself, which std can only bound (by [`MAX_ATTEMPT`]).

use std::collections::BTreeMap;
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use ferrocoll_core::{Error, Result};

use super::frame::{self, Fill, FrameReader, Hello, Kind, MAX_FRAME, OutBuf};
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
    hello: Arc<[u8]>,
    timeout: Duration,
    deadline: Option<Instant>,
    conn: Option<Conn>,
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
        let hello = Hello { rank: p.rank, size: p.size, token: p.token.as_bytes().to_vec() }.encode()?;
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
            timeout: p.connect_timeout,
            deadline: deadline_after(p.connect_timeout),
            conn: None,
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
                    "rank {}: the bootstrap store at {} {why} before answering the hello",
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
                out.push(self.hello.clone());
                self.conn = Some(Conn { stream, reader: FrameReader::new(MAX_FRAME), out });
                return Ok(());
            }
            self.attempts += 1;
            let pause = Duration::from_millis(10 << self.attempts.min(6)).min(MAX_PAUSE);
            self.next_attempt = Instant::now() + pause;
        }
        if self.deadline.is_some_and(|d| Instant::now() > d) {
            return Err(Error::timed_out(format!(
                "rank {} could not reach the bootstrap store at {} for {}: {}",
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
                Kind::Welcome if !self.welcomed => {
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
                    return Err(Error::new(
                        e.status(),
                        format!("the bootstrap store at {} refused rank {}: {}", self.target, self.rank, e.context()),
                    ));
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
