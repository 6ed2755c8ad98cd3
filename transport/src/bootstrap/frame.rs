//! The bootstrap's wire format: length-prefixed frames, their payloads, and
//! the non-blocking buffers that read and write them.
//!
//! A frame is `[kind u8][len u32 LE][payload: len bytes]`; integers are
//! little-endian. Payloads, in the order a connection sees them:
//!
//! | kind | direction | payload |
//! |------|-----------|---------|
//! | `Hello` | client → store | magic `FCOB`, version u16, rank u32, size u32, client nonce (32 bytes) |
//! | `Challenge` | store → client | store nonce (32 bytes), store proof (32 bytes) |
//! | `Proof` | client → store | rank proof (32 bytes) |
//! | `Welcome` | store → client | empty |
//! | `Error` | store → client | status i32, UTF-8 reason (refusal, or why the store aborted) |
//! | `Contribute` | client → store | round u64, the rank's bytes (rest of the frame) |
//! | `Result` | store → client | round u64, count u32, then count × (len u32, bytes) |
//!
//! The token itself never travels: the proofs are MACs keyed with it
//! (`auth.rs`). Version 1 sent the token in the hello; a version-1 peer is
//! refused by the version check, in either direction.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::sync::Arc;

use ferrocoll_core::wire::Reader;
use ferrocoll_core::{Error, Result, Status};

use super::auth::{Nonce, Proof};

/// `FCOB` (ferrocoll OOB) as the first four bytes of a hello.
pub(super) const MAGIC: u32 = u32::from_le_bytes(*b"FCOB");
/// Protocol version; a store refuses a client that speaks another. 2: the
/// challenge-response handshake (1 sent the token in the hello).
pub(super) const VERSION: u16 = 2;
/// The largest frame accepted from an authenticated peer (and built by the store).
pub(super) const MAX_FRAME: usize = 1 << 30;
/// The largest frame accepted from a peer that has not proved it knows the
/// job token (the store's side: before a valid proof; a rank's side: before
/// a valid challenge).
pub(super) const MAX_HELLO: usize = 16 * 1024;
/// Bytes of a frame header.
const HEADER: usize = 5;
/// Bytes read from one socket per progress call, so that one busy peer cannot starve the others.
const READ_BUDGET: usize = 16 << 20;

/// What a frame carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Hello = 1,
    Welcome = 2,
    Error = 3,
    Contribute = 4,
    Result = 5,
    Challenge = 6,
    Proof = 7,
}

impl Kind {
    fn from_u8(b: u8) -> Option<Kind> {
        match b {
            1 => Some(Kind::Hello),
            2 => Some(Kind::Welcome),
            3 => Some(Kind::Error),
            4 => Some(Kind::Contribute),
            5 => Some(Kind::Result),
            6 => Some(Kind::Challenge),
            7 => Some(Kind::Proof),
            _ => None,
        }
    }
}

/// One received frame.
#[derive(Debug)]
pub(super) struct Frame {
    pub(super) kind: Kind,
    pub(super) payload: Vec<u8>,
}

/// A whole frame, ready to be queued (shared by every peer it goes to).
pub(super) fn encode(kind: Kind, parts: &[&[u8]]) -> Result<Arc<[u8]>> {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    if len > MAX_FRAME {
        return Err(Error::invalid_param(format!(
            "a bootstrap {kind:?} frame of {len} bytes exceeds the limit of {MAX_FRAME} bytes"
        )));
    }
    let mut out = Vec::with_capacity(HEADER + len);
    out.push(kind as u8);
    out.extend_from_slice(&(len as u32).to_le_bytes());
    for p in parts {
        out.extend_from_slice(p);
    }
    Ok(out.into())
}

/// The client's hello: who it claims to be, and its half of the challenge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Hello {
    pub(super) rank: u32,
    pub(super) size: u32,
    pub(super) nonce: Nonce,
}

impl Hello {
    pub(super) fn encode(&self) -> Result<Arc<[u8]>> {
        encode(
            Kind::Hello,
            &[
                &MAGIC.to_le_bytes(),
                &VERSION.to_le_bytes(),
                &self.rank.to_le_bytes(),
                &self.size.to_le_bytes(),
                &self.nonce,
            ],
        )
    }

    /// Parse a hello; the error is the reason sent back to the refused peer.
    pub(super) fn decode(payload: &[u8]) -> std::result::Result<Hello, String> {
        let mut r = Reader::new(payload);
        let magic = r.u32().map_err(|e| format!("not a ferrocoll bootstrap hello: {}", e.context()))?;
        if magic != MAGIC {
            return Err(format!("not a ferrocoll bootstrap hello (magic {magic:#010x}, expected {MAGIC:#010x})"));
        }
        let version = r.u16().map_err(|e| format!("hello without a version: {}", e.context()))?;
        if version != VERSION {
            return Err(format!("bootstrap protocol version {version}, the store speaks version {VERSION}"));
        }
        Hello::body(r).map_err(|e| format!("malformed hello: {}", e.context()))
    }

    fn body(mut r: Reader<'_>) -> Result<Hello> {
        let rank = r.u32()?;
        let size = r.u32()?;
        let nonce = array(&mut r)?;
        r.finish()?;
        Ok(Hello { rank, size, nonce })
    }
}

/// The store's answer to a hello: its nonce, and its proof that it knows the token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Challenge {
    pub(super) nonce: Nonce,
    pub(super) proof: Proof,
}

impl Challenge {
    pub(super) fn encode(&self) -> Result<Arc<[u8]>> {
        encode(Kind::Challenge, &[&self.nonce, &self.proof])
    }

    pub(super) fn decode(payload: &[u8]) -> Result<Challenge> {
        let mut r = Reader::new(payload);
        let nonce = array(&mut r)?;
        let proof = array(&mut r)?;
        r.finish().map_err(|e| e.prefixed("challenge"))?;
        Ok(Challenge { nonce, proof })
    }
}

/// A rank's answer to the challenge.
pub(super) fn encode_proof(proof: &Proof) -> Result<Arc<[u8]>> {
    encode(Kind::Proof, &[proof])
}

/// The proof a `Proof` frame carries.
pub(super) fn decode_proof(payload: &[u8]) -> Result<Proof> {
    let mut r = Reader::new(payload);
    let proof = array(&mut r)?;
    r.finish().map_err(|e| e.prefixed("proof"))?;
    Ok(proof)
}

/// The next `N` bytes as an array (nonces and proofs have fixed lengths).
fn array<const N: usize>(r: &mut Reader<'_>) -> Result<[u8; N]> {
    let mut a = [0u8; N];
    a.copy_from_slice(r.bytes(N)?);
    Ok(a)
}

pub(super) fn u32_of(n: usize, what: &str) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::invalid_param(format!("bootstrap {what} {n} does not fit in 32 bits")))
}

/// A rank's contribution to a round.
pub(super) fn encode_contribution(round: u64, data: &[u8]) -> Result<Arc<[u8]>> {
    encode(Kind::Contribute, &[&round.to_le_bytes(), data])
}

/// `(round, bytes)` of a contribution.
pub(super) fn decode_contribution(payload: &[u8]) -> Result<(u64, Vec<u8>)> {
    let mut r = Reader::new(payload);
    let round = r.u64()?;
    let rest = r.remaining();
    Ok((round, r.bytes(rest)?.to_vec()))
}

/// Every rank's bytes of a round, in rank order.
pub(super) fn encode_result(round: u64, all: &[Vec<u8>]) -> Result<Arc<[u8]>> {
    let len = 12 + all.iter().map(|d| 4 + d.len()).sum::<usize>();
    if len > MAX_FRAME {
        return Err(Error::invalid_param(format!(
            "round {round}: the gathered bytes of {} ranks ({len} bytes) exceed the bootstrap's frame limit of {MAX_FRAME} bytes",
            all.len()
        )));
    }
    let mut p = Vec::with_capacity(len);
    p.extend_from_slice(&round.to_le_bytes());
    p.extend_from_slice(&u32_of(all.len(), "rank count")?.to_le_bytes());
    for d in all {
        p.extend_from_slice(&u32_of(d.len(), "contribution length")?.to_le_bytes());
        p.extend_from_slice(d);
    }
    encode(Kind::Result, &[&p])
}

/// `(round, every rank's bytes)` of a result, checked to hold `size` entries.
pub(super) fn decode_result(payload: &[u8], size: usize) -> Result<(u64, Vec<Vec<u8>>)> {
    let mut r = Reader::new(payload);
    let round = r.u64()?;
    let count = r.u32()? as usize;
    if count != size {
        return Err(Error::io(format!("result of round {round} holds {count} ranks, the job has {size}")));
    }
    let mut all = Vec::with_capacity(count);
    for _ in 0..count {
        let n = r.u32()? as usize;
        all.push(r.bytes(n)?.to_vec());
    }
    r.finish()?;
    Ok((round, all))
}

/// An error frame: the status and the reason, cut to a sane length.
pub(super) fn encode_error(status: Status, reason: &str) -> Result<Arc<[u8]>> {
    let mut end = reason.len().min(4096);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    encode(Kind::Error, &[&status.code().to_le_bytes(), &reason.as_bytes()[..end]])
}

/// The error an error frame carries (an unknown status reads as an I/O error).
pub(super) fn decode_error(payload: &[u8]) -> Error {
    let (code, text) = match payload.split_first_chunk::<4>() {
        Some((c, rest)) => (i32::from_le_bytes(*c), rest),
        None => (Status::IoError.code(), payload),
    };
    // An error frame carries an error status; anything else reads as an I/O error.
    let status = Status::from_code(code).filter(|s| !s.is_ok_or_pending()).unwrap_or(Status::IoError);
    Error::new(status, String::from_utf8_lossy(text).into_owned())
}

/// Whether the socket is still open after [`FrameReader::fill`].
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Fill {
    /// Nothing more to read now.
    Open,
    /// The peer closed its side.
    Eof,
}

/// Accumulates bytes from a non-blocking socket and cuts them into frames.
pub(super) struct FrameReader {
    buf: Vec<u8>,
    at: usize,
    max: usize,
}

impl FrameReader {
    /// A reader that refuses frames longer than `max` bytes.
    pub(super) fn new(max: usize) -> FrameReader {
        FrameReader { buf: Vec::new(), at: 0, max }
    }

    /// Change the size limit (raised once a peer has authenticated).
    pub(super) fn set_max(&mut self, max: usize) {
        self.max = max;
    }

    /// Read what the socket has (up to a budget) without blocking.
    pub(super) fn fill(&mut self, src: &mut impl Read) -> io::Result<Fill> {
        let mut chunk = [0u8; 64 * 1024];
        let mut got = 0;
        while got < READ_BUDGET {
            match src.read(&mut chunk) {
                Ok(0) => return Ok(Fill::Eof),
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    got += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(Fill::Open)
    }

    /// The next complete frame, if one has arrived. A corrupt or oversized
    /// header is an error (the connection cannot be resynchronised).
    pub(super) fn next(&mut self) -> Result<Option<Frame>> {
        let avail = &self.buf[self.at..];
        if avail.len() < HEADER {
            return Ok(None);
        }
        let kind = Kind::from_u8(avail[0])
            .ok_or_else(|| Error::io(format!("bootstrap frame of unknown kind {} (corrupt stream?)", avail[0])))?;
        let len = u32::from_le_bytes([avail[1], avail[2], avail[3], avail[4]]) as usize;
        if len > self.max {
            return Err(Error::io(format!(
                "bootstrap {kind:?} frame of {len} bytes exceeds the limit of {} bytes",
                self.max
            )));
        }
        if avail.len() < HEADER + len {
            return Ok(None);
        }
        let payload = avail[HEADER..HEADER + len].to_vec();
        self.at += HEADER + len;
        if self.at == self.buf.len() {
            self.buf.clear();
            self.at = 0;
        } else if self.at > 64 * 1024 && self.at * 2 > self.buf.len() {
            self.buf.drain(..self.at);
            self.at = 0;
        }
        Ok(Some(Frame { kind, payload }))
    }
}

/// Frames queued for a non-blocking socket, with byte counters so that a
/// sender can tell when a given frame has been handed to the kernel.
#[derive(Default)]
pub(super) struct OutBuf {
    queue: VecDeque<Arc<[u8]>>,
    /// Bytes of the front frame already written.
    at: usize,
    enqueued: u64,
    written: u64,
}

impl OutBuf {
    /// Queue a frame; returns the byte count at which it is fully written.
    pub(super) fn push(&mut self, frame: Arc<[u8]>) -> u64 {
        self.enqueued += frame.len() as u64;
        self.queue.push_back(frame);
        self.enqueued
    }

    /// Bytes handed to the kernel so far.
    pub(super) fn written(&self) -> u64 {
        self.written
    }

    /// Whether everything queued has been written.
    pub(super) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Write as much as the socket takes without blocking.
    pub(super) fn flush(&mut self, dst: &mut impl Write) -> io::Result<()> {
        while let Some(front) = self.queue.front() {
            match dst.write(&front[self.at..]) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "socket accepted no bytes")),
                Ok(n) => {
                    self.at += n;
                    self.written += n as u64;
                    if self.at == front.len() {
                        self.queue.pop_front();
                        self.at = 0;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A source that hands out its bytes `step` at a time, then would block (or reports EOF).
    struct Trickle {
        data: Vec<u8>,
        at: usize,
        step: usize,
        eof: bool,
    }

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.at == self.data.len() {
                return if self.eof { Ok(0) } else { Err(io::ErrorKind::WouldBlock.into()) };
            }
            let n = self.step.min(buf.len()).min(self.data.len() - self.at);
            buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    #[test]
    fn frames_survive_any_split() {
        let hello = Hello { rank: 3, size: 8, nonce: [5; 32] };
        let challenge = Challenge { nonce: [6; 32], proof: [7; 32] };
        let all = vec![vec![1u8, 2], vec![], vec![9; 300]];
        let mut stream = Vec::new();
        stream.extend_from_slice(&hello.encode().unwrap());
        stream.extend_from_slice(&challenge.encode().unwrap());
        stream.extend_from_slice(&encode_proof(&[8; 32]).unwrap());
        stream.extend_from_slice(&encode_contribution(7, b"abc").unwrap());
        stream.extend_from_slice(&encode_result(7, &all).unwrap());
        for step in [1, 2, 5, 64, 100_000] {
            let mut src = Trickle { data: stream.clone(), at: 0, step, eof: true };
            let mut r = FrameReader::new(MAX_FRAME);
            let mut frames = Vec::new();
            loop {
                let state = r.fill(&mut src).unwrap();
                while let Some(f) = r.next().unwrap() {
                    frames.push(f);
                }
                if state == Fill::Eof {
                    break;
                }
            }
            let kinds: Vec<Kind> = frames.iter().map(|f| f.kind).collect();
            assert_eq!(
                kinds,
                [Kind::Hello, Kind::Challenge, Kind::Proof, Kind::Contribute, Kind::Result],
                "step {step}"
            );
            assert_eq!(Hello::decode(&frames[0].payload).unwrap(), hello);
            assert_eq!(Challenge::decode(&frames[1].payload).unwrap(), challenge);
            assert_eq!(decode_proof(&frames[2].payload).unwrap(), [8; 32]);
            assert_eq!(decode_contribution(&frames[3].payload).unwrap(), (7, b"abc".to_vec()));
            assert_eq!(decode_result(&frames[4].payload, 3).unwrap(), (7, all.clone()));
        }
    }

    #[test]
    fn oversized_and_unknown_frames_are_errors() {
        let mut r = FrameReader::new(MAX_HELLO);
        let mut src = Trickle { data: vec![1, 0, 0, 0, 0x40], at: 0, step: 5, eof: false };
        r.fill(&mut src).unwrap();
        let e = r.next().unwrap_err();
        assert!(e.to_string().contains("exceeds the limit of 16384"), "{e}");

        let mut r = FrameReader::new(MAX_FRAME);
        let mut src = Trickle { data: vec![99, 0, 0, 0, 0], at: 0, step: 5, eof: false };
        r.fill(&mut src).unwrap();
        assert!(r.next().unwrap_err().to_string().contains("unknown kind 99"));
    }

    #[test]
    fn corrupt_payloads_are_errors_not_panics() {
        assert!(Hello::decode(b"GET / HTTP/1.1").unwrap_err().contains("not a ferrocoll bootstrap hello"));
        let mut bad_version = MAGIC.to_le_bytes().to_vec();
        bad_version.extend_from_slice(&9u16.to_le_bytes());
        assert!(Hello::decode(&bad_version).unwrap_err().contains("version 9"));
        // A version-1 hello (which carried the token) is refused by its version.
        let mut v1 = MAGIC.to_le_bytes().to_vec();
        v1.extend_from_slice(&1u16.to_le_bytes());
        v1.extend_from_slice(&[1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, b't', b'o', b'k']);
        assert!(Hello::decode(&v1).unwrap_err().contains("bootstrap protocol version 1, the store speaks version 2"));
        let good = Hello { rank: 1, size: 2, nonce: [0; 32] }.encode().unwrap();
        for cut in HEADER + 6..good.len() {
            assert!(Hello::decode(&good[HEADER..cut]).unwrap_err().contains("malformed hello"), "cut {cut}");
        }
        let mut long = good[HEADER..].to_vec();
        long.push(0);
        assert!(Hello::decode(&long).unwrap_err().contains("malformed hello"));
        // Challenges and proofs have fixed lengths: one byte short or over is an error.
        let c = Challenge { nonce: [1; 32], proof: [2; 32] }.encode().unwrap();
        let pr = encode_proof(&[3; 32]).unwrap();
        for (payload, decode) in [
            (&c[HEADER..], (|b| Challenge::decode(b).map(|_| ())) as fn(&[u8]) -> Result<()>),
            (&pr[HEADER..], |b| decode_proof(b).map(|_| ())),
        ] {
            assert!(decode(payload).is_ok());
            assert!(decode(&payload[..payload.len() - 1]).unwrap_err().to_string().contains("truncated"));
            let mut long = payload.to_vec();
            long.push(0);
            assert!(decode(&long).unwrap_err().to_string().contains("trailing"));
            assert!(decode(&[]).is_err());
        }
        assert!(decode_contribution(&[1, 2, 3]).is_err());
        let res = encode_result(1, &[vec![5; 10], vec![6]]).unwrap();
        assert!(decode_result(&res[HEADER..], 3).unwrap_err().to_string().contains("holds 2 ranks"));
        for cut in 0..res.len() - HEADER {
            assert!(decode_result(&res[HEADER..HEADER + cut], 2).is_err(), "cut {cut}");
        }
        let mut long = res[HEADER..].to_vec();
        long.push(0);
        assert!(decode_result(&long, 2).is_err());
    }

    #[test]
    fn outbuf_counts_partial_writes() {
        struct Slow(Vec<u8>, usize);
        impl Write for Slow {
            fn write(&mut self, b: &[u8]) -> io::Result<usize> {
                if self.1 == 0 {
                    return Err(io::ErrorKind::WouldBlock.into());
                }
                let n = b.len().min(3);
                self.1 -= 1;
                self.0.extend_from_slice(&b[..n]);
                Ok(n)
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut out = OutBuf::default();
        let a = out.push(encode(Kind::Welcome, &[]).unwrap());
        let b = out.push(encode_error(Status::TimedOut, "no").unwrap());
        assert_eq!((a, b), (5, 16));
        let mut w = Slow(Vec::new(), 3);
        out.flush(&mut w).unwrap();
        // 3 + 2 bytes of the welcome, then 3 of the error frame.
        assert_eq!(out.written(), 8);
        assert!(!out.is_empty());
        w.1 = 100;
        out.flush(&mut w).unwrap();
        assert!(out.is_empty());
        assert_eq!(out.written(), 16);
        assert_eq!(w.0, [2, 0, 0, 0, 0, 3, 6, 0, 0, 0, 0xf8, 0xff, 0xff, 0xff, b'n', b'o']);
        let e = decode_error(&w.0[10..]);
        assert_eq!((e.status(), e.context()), (Status::TimedOut, "no"));
        assert_eq!(decode_error(&[1]).status(), Status::IoError);
    }

    proptest::proptest! {
        /// Frames come from other processes: whatever their payload, decoding
        /// is a value or an error, never a panic, and what encodes decodes back.
        #[test]
        fn decoders_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256), size in 0usize..8) {
            let _ = Hello::decode(&bytes);
            let _ = Challenge::decode(&bytes);
            let _ = decode_proof(&bytes);
            let _ = decode_contribution(&bytes);
            let _ = decode_result(&bytes, size);
            let _ = decode_error(&bytes);
        }

        #[test]
        fn handshake_frames_round_trip(rank in proptest::prelude::any::<u32>(), size in proptest::prelude::any::<u32>(), a in proptest::prelude::any::<[u8; 32]>(), b in proptest::prelude::any::<[u8; 32]>()) {
            let hello = Hello { rank, size, nonce: a };
            let h = hello.encode().unwrap();
            proptest::prop_assert_eq!((h[0], h.len()), (Kind::Hello as u8, HEADER + 46));
            proptest::prop_assert_eq!(Hello::decode(&h[HEADER..]).unwrap(), hello);
            let challenge = Challenge { nonce: a, proof: b };
            let c = challenge.encode().unwrap();
            proptest::prop_assert_eq!((c[0], c.len()), (Kind::Challenge as u8, HEADER + 64));
            proptest::prop_assert_eq!(Challenge::decode(&c[HEADER..]).unwrap(), challenge);
            let p = encode_proof(&b).unwrap();
            proptest::prop_assert_eq!((p[0], p.len()), (Kind::Proof as u8, HEADER + 32));
            proptest::prop_assert_eq!(decode_proof(&p[HEADER..]).unwrap(), b);
        }

        #[test]
        fn contributions_and_results_round_trip(round in 0u64..1 << 40, parts in proptest::collection::vec(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40), 1..6)) {
            // A frame is [kind u8][length u32] then the payload the decoders read.
            let c = encode_contribution(round, &parts[0]).unwrap();
            proptest::prop_assert_eq!(decode_contribution(&c[HEADER..]).unwrap(), (round, parts[0].clone()));
            let r = encode_result(round, &parts).unwrap();
            proptest::prop_assert_eq!(decode_result(&r[HEADER..], parts.len()).unwrap(), (round, parts.clone()));
        }
    }
}
