//! The send side of one connection: a FIFO of byte segments waiting for
//! the kernel.
//!
//! Small frames (header and payload) are copied into an owned segment that
//! later frames append to, so a burst of them leaves in one system call.
//! A large frame is a segment that points at the sender's buffer and is
//! written straight from it; its [`SendState`] turns `DONE` when the last
//! byte is in the kernel. Flushing gathers several segments into one
//! vectored write.
//!
//! A large send dropped before it is done is retracted (not started) or
//! its unwritten rest is copied (partly written), so the byte stream stays
//! whole and the sender's buffer is free as soon as the drop returns.

use std::collections::VecDeque;
use std::io::{self, ErrorKind, IoSlice};
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, Ordering};

use ferrocoll_core::MemRef;

use super::wire::{HEADER_LEN, Header};

/// Payloads up to this size are copied at send (the send completes once the kernel has the copy).
pub(super) const EAGER_MAX: usize = 16 * 1024;
/// Segments gathered into one vectored write.
const MAX_IOV: usize = 64;
/// Writes per flush at most (each hands up to a socket buffer to the kernel).
const FLUSH_ROUNDS: usize = 16;
/// A written owned segment up to this capacity is kept for the next small frames.
const SPARE_MAX: usize = 1 << 20;

const QUEUED: u8 = 0;
const DONE: u8 = 1;
const FAILED: u8 = 2;

/// Progress of one large send, shared by its handle and the queue.
#[derive(Debug, Default)]
pub(super) struct SendState {
    state: AtomicU8,
    why: OnceLock<String>,
}

impl SendState {
    /// `Some(Ok)` once done, `Some(Err(why))` once failed, `None` while queued.
    pub(super) fn outcome(&self) -> Option<Result<(), &str>> {
        // Acquire: pairs with the Release in finish(), so `why` is visible.
        match self.state.load(Ordering::Acquire) {
            QUEUED => None,
            DONE => Some(Ok(())),
            _ => Some(Err(self.why.get().map_or("the connection failed", String::as_str))),
        }
    }

    fn finish(&self, failure: Option<&str>) {
        let state = match failure {
            None => DONE,
            Some(why) => {
                let _ = self.why.set(why.to_string());
                FAILED
            }
        };
        // Release: a handle that sees DONE/FAILED sees `why`, and that the queue dropped its buffer.
        self.state.store(state, Ordering::Release);
    }
}

enum Segment {
    Owned(Vec<u8>),
    Large { header: [u8; HEADER_LEN], data: MemRef, state: Arc<SendState> },
}

impl Segment {
    fn len(&self) -> usize {
        match self {
            Segment::Owned(v) => v.len(),
            Segment::Large { data, .. } => HEADER_LEN + data.len(),
        }
    }

    /// The bytes from `off` on, as up to two slices.
    fn slices(&self, off: usize) -> [&[u8]; 2] {
        match self {
            Segment::Owned(v) => [v.get(off..).unwrap_or(&[]), &[]],
            Segment::Large { header, data, .. } => {
                // SAFETY: the sender keeps `data` valid and unmodified until its
                // handle completes or is dropped; completion is decided by this
                // queue, and the handle's drop takes it out of the queue (under
                // the same lock as every call here) before it returns.
                let payload = unsafe { data.as_slice() };
                let h = header.get(off..).unwrap_or(&[]);
                [h, payload.get(off.saturating_sub(HEADER_LEN)..).unwrap_or(&[])]
            }
        }
    }
}

/// Frames waiting to be written to one connection, in order.
#[derive(Default)]
pub(super) struct SendQueue {
    segs: VecDeque<Segment>,
    /// Bytes of the front segment already written.
    front_off: usize,
    /// An emptied owned segment, reused for the next small frames.
    spare: Vec<u8>,
    /// Bytes ever queued.
    queued: u64,
    /// Bytes ever taken out of the queue: written, or retracted whole. A
    /// frame whose last byte is at `queued` after its push has left once
    /// `left` reaches that mark.
    left: u64,
}

impl SendQueue {
    /// Whether every byte queued has been written.
    pub(super) fn is_empty(&self) -> bool {
        self.segs.is_empty()
    }

    /// Queue a small frame by copying it (or a goodbye, with an empty
    /// payload); the mark it has left the queue at (see [`SendQueue::left`]).
    pub(super) fn push_copy(&mut self, header: &Header, payload: &[u8]) -> u64 {
        if !matches!(self.segs.back(), Some(Segment::Owned(_))) {
            self.segs.push_back(Segment::Owned(std::mem::take(&mut self.spare)));
        }
        if let Some(Segment::Owned(v)) = self.segs.back_mut() {
            v.extend_from_slice(&header.encode());
            v.extend_from_slice(payload);
        }
        self.queued += (HEADER_LEN + payload.len()) as u64;
        self.queued
    }

    /// Bytes ever taken out of the queue (written, or retracted whole): a
    /// frame pushed with mark `m` has left once this is at least `m`.
    pub(super) fn left(&self) -> u64 {
        self.left
    }

    /// Queue a large frame written straight from `data`; see [`SendState`].
    pub(super) fn push_large(&mut self, header: &Header, data: MemRef) -> Arc<SendState> {
        let state = Arc::new(SendState::default());
        self.queued += (HEADER_LEN + data.len()) as u64;
        self.segs.push_back(Segment::Large { header: header.encode(), data, state: state.clone() });
        state
    }

    /// Write as much as `write` takes without blocking. `write` is one
    /// vectored write (a socket's `sendmsg`); an error other than
    /// `WouldBlock`/`Interrupted` is returned and leaves the queue as it was.
    pub(super) fn flush(&mut self, write: &mut dyn FnMut(&[IoSlice<'_>]) -> io::Result<usize>) -> io::Result<()> {
        for _ in 0..FLUSH_ROUNDS {
            if self.segs.is_empty() {
                return Ok(());
            }
            let r = {
                let mut iov = [IoSlice::new(&[]); MAX_IOV];
                let mut n = 0;
                let mut off = self.front_off;
                for seg in &self.segs {
                    for s in seg.slices(off).into_iter().filter(|s| !s.is_empty()) {
                        if let Some(slot) = iov.get_mut(n) {
                            *slot = IoSlice::new(s);
                            n += 1;
                        }
                    }
                    off = 0;
                    if n >= MAX_IOV - 1 {
                        break;
                    }
                }
                write(&iov[..n])
            };
            match r {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => self.advance(n),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn advance(&mut self, mut n: usize) {
        self.left += n as u64;
        while n > 0 {
            let Some(front) = self.segs.front() else { return };
            let left = front.len() - self.front_off;
            if n < left {
                self.front_off += n;
                return;
            }
            n -= left;
            self.front_off = 0;
            match self.segs.pop_front() {
                Some(Segment::Large { state, .. }) => state.finish(None),
                Some(Segment::Owned(mut v)) if v.capacity() <= SPARE_MAX => {
                    v.clear();
                    self.spare = v;
                }
                _ => {}
            }
        }
    }

    /// The large send of `state` is dropped: take it out of the queue if no
    /// byte of it was written, or replace it by a copy of its unwritten rest.
    /// Either way the queue no longer refers to the sender's buffer.
    pub(super) fn retract(&mut self, state: &Arc<SendState>) {
        let found =
            self.segs.iter().position(|s| matches!(s, Segment::Large { state: st, .. } if Arc::ptr_eq(st, state)));
        let Some(i) = found else { return };
        if i == 0 && self.front_off > 0 {
            if let Some(seg) = self.segs.get_mut(0) {
                let rest = seg.slices(self.front_off).concat();
                *seg = Segment::Owned(rest);
                self.front_off = 0;
            }
        } else if let Some(seg) = self.segs.remove(i) {
            self.left += seg.len() as u64;
        }
        state.finish(Some("the send was dropped before it completed"));
    }

    /// The connection is gone: fail every large send with `why` and forget every byte.
    pub(super) fn fail_all(&mut self, why: &str) {
        for seg in self.segs.drain(..) {
            if let Segment::Large { state, .. } = seg {
                state.finish(Some(why));
            }
        }
        self.front_off = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{key, mem, sig};

    /// A writer that takes at most `cap` bytes per call into `out`, then would block after `calls` calls.
    fn writer(out: &mut Vec<u8>, cap: usize, calls: &mut usize) -> impl FnMut(&[IoSlice<'_>]) -> io::Result<usize> {
        move |bufs| {
            if *calls == 0 {
                return Err(ErrorKind::WouldBlock.into());
            }
            *calls -= 1;
            let mut n = 0;
            for b in bufs {
                let take = b.len().min(cap - n);
                out.extend_from_slice(&b[..take]);
                n += take;
            }
            Ok(n)
        }
    }

    fn frame(tag: u32, payload: &[u8]) -> Vec<u8> {
        let mut v = Header::data(key(tag), sig(), payload.len()).encode().to_vec();
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn small_frames_coalesce_and_large_ones_complete_when_written() {
        let mut q = SendQueue::default();
        let mut big = vec![5u8; 100_000];
        q.push_copy(&Header::data(key(0), sig(), 3), b"abc");
        let st = q.push_large(&Header::data(key(1), sig(), big.len()), mem(&mut big));
        q.push_copy(&Header::data(key(2), sig(), 1), b"z");
        let (mut out, mut calls) = (Vec::new(), 1);
        q.flush(&mut writer(&mut out, 50_000, &mut calls)).unwrap();
        assert!(st.outcome().is_none() && !q.is_empty());
        let mut calls = usize::MAX;
        q.flush(&mut writer(&mut out, 1 << 30, &mut calls)).unwrap();
        assert_eq!(st.outcome(), Some(Ok(())));
        assert!(q.is_empty());
        assert!(out == [frame(0, b"abc"), frame(1, &big), frame(2, b"z")].concat());
    }

    #[test]
    fn dropped_large_sends_keep_the_stream_whole() {
        let mut q = SendQueue::default();
        let (mut a, mut b) = (vec![1u8; 70_000], vec![2u8; 70_000]);
        let sa = q.push_large(&Header::data(key(0), sig(), a.len()), mem(&mut a));
        let sb = q.push_large(&Header::data(key(1), sig(), b.len()), mem(&mut b));
        q.push_copy(&Header::data(key(2), sig(), 2), b"ok");
        let (mut out, mut calls) = (Vec::new(), 1);
        q.flush(&mut writer(&mut out, 1000, &mut calls)).unwrap();
        // a is partly written, b not started: retract both, then poison the buffers.
        q.retract(&sa);
        q.retract(&sb);
        assert!(matches!(sa.outcome(), Some(Err(_))) && matches!(sb.outcome(), Some(Err(_))));
        a.fill(0xEE);
        b.fill(0xEE);
        while !q.is_empty() {
            let mut calls = usize::MAX;
            q.flush(&mut writer(&mut out, 4096, &mut calls)).unwrap();
        }
        assert!(out == [frame(0, &[1u8; 70_000]), frame(2, b"ok")].concat());
    }

    #[test]
    fn errors_leave_the_queue_and_fail_all_releases_it() {
        let mut q = SendQueue::default();
        let mut a = vec![1u8; 70_000];
        let st = q.push_large(&Header::data(key(0), sig(), a.len()), mem(&mut a));
        let e = q.flush(&mut |_| Err(io::Error::from(ErrorKind::BrokenPipe))).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BrokenPipe);
        assert!(st.outcome().is_none());
        q.fail_all("endpoint 1 died");
        assert_eq!(st.outcome(), Some(Err("endpoint 1 died")));
        assert!(q.is_empty());
    }

    #[test]
    fn many_segments_are_written_in_order_with_bounded_iovecs() {
        let mut q = SendQueue::default();
        let mut bufs: Vec<Vec<u8>> = (0..200).map(|i| vec![i as u8; EAGER_MAX + 1]).collect();
        let states: Vec<_> = bufs
            .iter_mut()
            .enumerate()
            .map(|(i, b)| {
                q.push_copy(&Header::data(key(1000 + i as u32), sig(), 1), &[i as u8]);
                q.push_large(&Header::data(key(i as u32), sig(), b.len()), mem(b))
            })
            .collect();
        let mut want = Vec::new();
        for (i, b) in bufs.iter().enumerate() {
            want.extend(frame(1000 + i as u32, &[i as u8]));
            want.extend(frame(i as u32, b));
        }
        let mut out = Vec::new();
        while !q.is_empty() {
            let mut calls = usize::MAX;
            let mut w = writer(&mut out, usize::MAX, &mut calls);
            q.flush(&mut |bufs| {
                assert!(bufs.len() <= MAX_IOV);
                w(bufs)
            })
            .unwrap();
        }
        assert!(out == want);
        assert!(states.iter().all(|s| s.outcome() == Some(Ok(()))));
    }
}
