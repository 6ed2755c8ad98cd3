//! The receive side of one connection: an incremental frame parser that
//! reads whatever the socket has without blocking and hands out complete
//! messages as owned buffers.
//!
//! Small frames are read many at a time into a staging buffer and parsed
//! from there. Once a header announces a large payload, the rest of it is
//! read straight into the message's own buffer (one copy, kernel to
//! message), exactly up to the frame's end. That buffer comes from the
//! [`Pool`] when one fits, else it grows as bytes arrive (so a corrupt
//! length costs no memory).

use std::io::{ErrorKind, Read};

use ferrocoll_core::args::Signature;
use ferrocoll_core::{Error, Result};

use super::pool::Pool;
use super::wire::{HEADER_LEN, Header, Kind};
use crate::p2p::MsgKey;

/// Bytes of the staging buffer (one read takes up to this many small frames).
const STAGE: usize = 64 * 1024;
/// A payload remainder at least this large is read straight into its message.
const DIRECT_MIN: usize = 16 * 1024;
/// Bytes read into a message per `read` (bounds the zeroing ahead of each read).
const CHUNK: usize = 1 << 20;

/// How a connection ended.
#[derive(Debug)]
pub(super) enum RxEnd {
    /// The peer said goodbye: it left cleanly (`cause`: the endpoint whose
    /// failure it left because of, if it named one).
    Goodbye { cause: Option<u32> },
    /// End of stream without a goodbye (`mid_frame`: inside a frame).
    Eof { mid_frame: bool },
    /// The socket failed (e.g. connection reset).
    Failed(std::io::Error),
    /// The bytes are not a valid frame.
    Corrupt(Error),
}

struct Partial {
    key: MsgKey,
    sig: Signature,
    len: usize,
    /// At least `filled` initialized bytes, at most `len`.
    buf: Vec<u8>,
    filled: usize,
}

impl Partial {
    /// Room for the next `want` bytes (a fresh buffer grows to hold them).
    fn room(&mut self, want: usize) -> &mut [u8] {
        let end = (self.filled + want).min(self.len);
        if self.buf.len() < end {
            self.buf.resize(end, 0);
        }
        &mut self.buf[self.filled..end]
    }
}

/// Parser state of one connection.
pub(super) struct RxConn {
    stage: Box<[u8]>,
    /// Unparsed bytes are `stage[start..end]`.
    start: usize,
    end: usize,
    /// The message whose payload is arriving.
    partial: Option<Partial>,
    ended: bool,
}

impl RxConn {
    pub(super) fn new() -> RxConn {
        RxConn { stage: vec![0u8; STAGE].into_boxed_slice(), start: 0, end: 0, partial: None, ended: false }
    }

    /// Whether the connection ended (every later `pump` does nothing).
    pub(super) fn is_ended(&self) -> bool {
        self.ended
    }

    /// Read from `src` until it would block, it ends, or about `budget`
    /// bytes were read; hand every complete message (its key, its sender's
    /// call and its bytes) to `deliver`, in order.
    /// Returns how the connection ended, once, or `None` while it is open.
    pub(super) fn pump<R: Read>(
        &mut self,
        src: &mut R,
        budget: usize,
        pool: &Pool,
        deliver: &mut dyn FnMut(MsgKey, Signature, Vec<u8>),
    ) -> Option<RxEnd> {
        if self.ended {
            return None;
        }
        let mut read = 0usize;
        loop {
            match self.parse(pool, deliver) {
                Ok(None) => {}
                Ok(Some(cause)) => return self.end(RxEnd::Goodbye { cause }),
                Err(e) => return self.end(RxEnd::Corrupt(e)),
            }
            if read >= budget {
                return None;
            }
            let r = match &mut self.partial {
                Some(p) if self.start == self.end && p.len - p.filled >= DIRECT_MIN => {
                    let r = src.read(p.room(CHUNK));
                    p.filled += r.as_ref().map_or(0, |n| *n);
                    r
                }
                _ => {
                    // Only an incomplete header (under HEADER_LEN bytes) can be
                    // left unparsed: move it to the front.
                    self.stage.copy_within(self.start..self.end, 0);
                    self.end -= self.start;
                    self.start = 0;
                    let r = src.read(&mut self.stage[self.end..]);
                    self.end += r.as_ref().map_or(0, |n| *n);
                    r
                }
            };
            match r {
                Ok(0) => {
                    let mid_frame = self.partial.is_some() || self.start != self.end;
                    return self.end(RxEnd::Eof { mid_frame });
                }
                Ok(n) => read += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return None,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return self.end(RxEnd::Failed(e)),
            }
        }
    }

    fn end(&mut self, how: RxEnd) -> Option<RxEnd> {
        self.ended = true;
        self.partial = None;
        Some(how)
    }

    /// Parse what the staging buffer holds; `Ok(Some(cause))` at a goodbye.
    fn parse(
        &mut self,
        pool: &Pool,
        deliver: &mut dyn FnMut(MsgKey, Signature, Vec<u8>),
    ) -> Result<Option<Option<u32>>> {
        loop {
            if let Some(p) = &mut self.partial {
                let take = (self.end - self.start).min(p.len - p.filled);
                p.room(take).copy_from_slice(&self.stage[self.start..self.start + take]);
                p.filled += take;
                self.start += take;
                if p.filled < p.len {
                    return Ok(None);
                }
                if let Some(mut p) = self.partial.take() {
                    p.buf.truncate(p.len);
                    deliver(p.key, p.sig, p.buf);
                }
                continue;
            }
            let Some(bytes) =
                self.stage.get(self.start..self.start + HEADER_LEN).filter(|_| self.end - self.start >= HEADER_LEN)
            else {
                return Ok(None);
            };
            let h = Header::decode(bytes)?;
            self.start += HEADER_LEN;
            match h.kind {
                Kind::Goodbye => return Ok(Some(h.cause())),
                Kind::Data => {
                    let len = usize::try_from(h.len)
                        .map_err(|_| Error::io(format!("a frame announces {} payload bytes", h.len)))?;
                    let buf = match pool.take(len) {
                        Some(buf) => buf,
                        None => {
                            // Reserve (address space only); pages are touched as bytes arrive,
                            // so a corrupt length costs no memory and an absurd one is an error.
                            let mut buf = Vec::new();
                            buf.try_reserve_exact(len).map_err(|e| {
                                Error::io(format!(
                                    "a frame announces {len} payload bytes, which cannot be allocated: {e}"
                                ))
                            })?;
                            buf
                        }
                    };
                    self.partial = Some(Partial { key: h.key, sig: h.sig, len, buf, filled: 0 });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io;

    use proptest::prelude::*;

    use super::*;

    /// A reader that hands out `data` in the given chunk sizes, then would block (or ends).
    struct Chunks {
        data: Vec<u8>,
        at: usize,
        sizes: Vec<usize>,
        eof: bool,
    }

    impl Read for Chunks {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.at == self.data.len() {
                return if self.eof { Ok(0) } else { Err(ErrorKind::WouldBlock.into()) };
            }
            let i = self.at % self.sizes.len().max(1);
            let n =
                self.sizes.get(i).copied().unwrap_or(usize::MAX).max(1).min(buf.len()).min(self.data.len() - self.at);
            buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    fn key(tag: u32) -> MsgKey {
        MsgKey { team: 9, seq: 3, tag, src: 1 }
    }

    /// A message as delivered: key, sender's call, bytes.
    type Msg = (MsgKey, Signature, Vec<u8>);

    fn frames(lens: &[usize]) -> (Vec<u8>, Vec<Msg>) {
        let mut wire = Vec::new();
        let mut msgs = Vec::new();
        for (i, &len) in lens.iter().enumerate() {
            let payload: Vec<u8> = (0..len).map(|j| (j * 31 + i * 7) as u8).collect();
            let sig = Signature { word: i as u64 * 0x0101, size: len as u64 };
            wire.extend_from_slice(&Header::data(key(i as u32), sig, len).encode());
            wire.extend_from_slice(&payload);
            msgs.push((key(i as u32), sig, payload));
        }
        (wire, msgs)
    }

    fn drain(conn: &mut RxConn, src: &mut Chunks) -> (Vec<Msg>, Option<RxEnd>) {
        drain_with(conn, src, &Pool::default())
    }

    fn drain_with(conn: &mut RxConn, src: &mut Chunks, pool: &Pool) -> (Vec<Msg>, Option<RxEnd>) {
        let mut got = Vec::new();
        let mut end = None;
        for _ in 0..1_000_000 {
            end = conn.pump(src, 1 << 20, pool, &mut |k, g, v| got.push((k, g, v)));
            if end.is_some() || src.at == src.data.len() {
                break;
            }
        }
        if end.is_none() {
            end = conn.pump(src, 1 << 20, pool, &mut |k, g, v| got.push((k, g, v)));
        }
        (got, end)
    }

    #[test]
    fn small_and_large_frames_then_goodbye() {
        let (mut wire, msgs) = frames(&[0, 5, 200_000, 17, STAGE * 3 + 1]);
        wire.extend_from_slice(&Header::goodbye(None).encode());
        wire.extend_from_slice(b"ignored after goodbye");
        let mut src = Chunks { data: wire, at: 0, sizes: vec![7, 100_000, 1, 3000], eof: true };
        let mut conn = RxConn::new();
        let (got, end) = drain(&mut conn, &mut src);
        assert!(got == msgs, "the messages differ");
        assert!(matches!(end, Some(RxEnd::Goodbye { cause: None })), "{end:?}");
        assert!(
            conn.is_ended()
                && conn.pump(&mut src, 1, &Pool::default(), &mut |_, _, _| panic!("delivered after the end")).is_none()
        );
    }

    #[test]
    fn eof_mid_frame_and_corrupt_headers_end_the_connection() {
        let (wire, msgs) = frames(&[10, 50_000]);
        let mut src = Chunks { data: wire[..wire.len() - 1].to_vec(), at: 0, sizes: vec![4096], eof: true };
        let (got, end) = drain(&mut RxConn::new(), &mut src);
        assert!(got == msgs[..1], "the first message differs");
        assert!(matches!(end, Some(RxEnd::Eof { mid_frame: true })), "{end:?}");

        let mut garbage = frames(&[3]).0;
        garbage.extend_from_slice(&[0xAB; HEADER_LEN]);
        let mut src = Chunks { data: garbage, at: 0, sizes: vec![usize::MAX], eof: false };
        let (got, end) = drain(&mut RxConn::new(), &mut src);
        assert_eq!(got.len(), 1);
        let Some(RxEnd::Corrupt(e)) = end else { panic!("expected a corrupt frame, got {end:?}") };
        assert!(e.to_string().contains("0xabab"), "{e}");
    }

    #[test]
    fn an_absurd_length_is_an_error_not_an_abort() {
        let mut h = Header::data(key(0), Signature { word: 1, size: 2 }, 0).encode();
        h[28..36].copy_from_slice(&(u64::MAX / 2).to_le_bytes());
        let mut src = Chunks { data: h.to_vec(), at: 0, sizes: vec![usize::MAX], eof: false };
        let (_, end) = drain(&mut RxConn::new(), &mut src);
        assert!(matches!(end, Some(RxEnd::Corrupt(_))), "{end:?}");
    }

    #[test]
    fn budget_bounds_one_pump() {
        let (wire, msgs) = frames(&[100; 50]);
        let mut src = Chunks { data: wire, at: 0, sizes: vec![136], eof: false };
        let mut conn = RxConn::new();
        let mut got = Vec::new();
        assert!(conn.pump(&mut src, 1, &Pool::default(), &mut |k, g, v| got.push((k, g, v))).is_none());
        assert!(got.len() < msgs.len() && src.at < src.data.len());
        let (rest, end) = drain(&mut conn, &mut src);
        got.extend(rest);
        assert!(got == msgs, "the messages differ");
        assert!(end.is_none());
    }

    #[test]
    fn pooled_buffers_are_reused_and_every_byte_overwritten() {
        let pool = Pool::default();
        let (wire, msgs) = frames(&[300_000, 200_000, 100, 300_000]);
        for len in [300_000, 350_000] {
            pool.give(vec![0xEE; len]);
        }
        let mut src = Chunks { data: wire, at: 0, sizes: vec![5000, 70_000, 1], eof: true };
        let (got, end) = drain_with(&mut RxConn::new(), &mut src, &pool);
        assert!(got == msgs, "the messages differ");
        assert!(matches!(end, Some(RxEnd::Eof { mid_frame: false })), "{end:?}");
        // Both kept buffers were taken (300_000 fits exactly, 350_000 within twice 200_000).
        assert!(pool.take(150_000).is_none());
    }

    proptest! {
        #[test]
        fn any_chunking_delivers_the_same_messages(
            lens in proptest::collection::vec(prop_oneof![0usize..64, 0usize..40_000], 1..12),
            sizes in proptest::collection::vec(1usize..70_000, 1..6),
        ) {
            let (wire, msgs) = frames(&lens);
            let mut src = Chunks { data: wire, at: 0, sizes, eof: true };
            let (got, end) = drain(&mut RxConn::new(), &mut src);
            prop_assert!(got == msgs, "the messages differ");
            prop_assert!(matches!(end, Some(RxEnd::Eof { mid_frame: false })), "{:?}", end);
        }

        #[test]
        fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut src = Chunks { data, at: 0, sizes: vec![13], eof: true };
            let _ = drain(&mut RxConn::new(), &mut src);
        }
    }
}
