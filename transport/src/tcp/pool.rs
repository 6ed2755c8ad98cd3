//! Recycled receive buffers.
//!
//! A large message is read into a buffer of its own, which the receive
//! copies out of and then gives back here. The next message of a similar
//! size reuses it: no allocation, no page faults, no zeroing (the bytes
//! are already initialized, and every one is overwritten before the
//! message is delivered). Bounded in count and bytes.

use std::sync::Mutex;

/// Buffers smaller than this are not kept (small messages are cheap to allocate).
const MIN_LEN: usize = 64 * 1024;
/// At most this many buffers ...
const MAX_COUNT: usize = 16;
/// ... and this many bytes are kept.
const MAX_BYTES: usize = 64 << 20;

/// A bounded pool of initialized byte buffers.
#[derive(Default)]
pub(super) struct Pool {
    /// The buffers and their total length.
    bufs: Mutex<(Vec<Vec<u8>>, usize)>,
}

impl Pool {
    /// A buffer of exactly `len` initialized bytes (of no particular value),
    /// if one of `len` to `2 * len` bytes is kept.
    pub(super) fn take(&self, len: usize) -> Option<Vec<u8>> {
        if len < MIN_LEN {
            return None;
        }
        let mut g = self.bufs.lock().unwrap_or_else(|p| p.into_inner());
        let (bufs, bytes) = &mut *g;
        let fits = |v: &Vec<u8>| v.len() >= len && v.len() / 2 <= len;
        let (i, _) = bufs.iter().enumerate().filter(|(_, v)| fits(v)).min_by_key(|(_, v)| v.len())?;
        let mut v = bufs.swap_remove(i);
        *bytes -= v.len();
        v.truncate(len);
        Some(v)
    }

    /// Keep `v` for a later [`Pool::take`], if it is large and there is room.
    pub(super) fn give(&self, v: Vec<u8>) {
        if v.len() < MIN_LEN || v.len() > MAX_BYTES {
            return;
        }
        let mut g = self.bufs.lock().unwrap_or_else(|p| p.into_inner());
        let (bufs, bytes) = &mut *g;
        if bufs.len() < MAX_COUNT && *bytes + v.len() <= MAX_BYTES {
            *bytes += v.len();
            bufs.push(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_fit_within_twice_the_size_and_bounded() {
        let p = Pool::default();
        assert!(p.take(MIN_LEN).is_none());
        p.give(vec![1u8; 100]);
        p.give(vec![2u8; MIN_LEN * 4]);
        p.give(vec![3u8; MIN_LEN * 2]);
        assert!(p.take(MIN_LEN).is_some_and(|v| v.len() == MIN_LEN && v[0] == 3));
        assert!(p.take(MIN_LEN).is_none(), "a buffer over twice the size was used");
        assert!(p.take(MIN_LEN * 3).is_some_and(|v| v.len() == MIN_LEN * 3 && v[0] == 2));
        for _ in 0..MAX_COUNT * 2 {
            p.give(vec![0u8; MAX_BYTES / 8]);
        }
        let g = p.bufs.lock().unwrap();
        assert!(g.0.len() <= MAX_COUNT && g.1 <= MAX_BYTES && g.1 == g.0.iter().map(Vec::len).sum::<usize>());
    }
}
