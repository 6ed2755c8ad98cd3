//! Reused byte buffers for eager messages (received ones waiting for their
//! receive, sent ones waiting for ring space), so steady traffic does not
//! allocate.

use std::sync::Mutex;

use super::peer::lock;

/// Buffers kept at most.
const KEEP: usize = 256;

/// A pool of `Vec<u8>`s of capacity up to a bound.
pub(super) struct BufPool {
    bufs: Mutex<Vec<Vec<u8>>>,
    max_cap: usize,
}

impl BufPool {
    /// A pool that keeps buffers of capacity at most `max_cap`.
    pub fn new(max_cap: usize) -> BufPool {
        BufPool { bufs: Mutex::new(Vec::new()), max_cap }
    }

    /// An empty buffer with room for `cap` bytes.
    pub fn get(&self, cap: usize) -> Vec<u8> {
        let mut v = if cap <= self.max_cap { lock(&self.bufs).pop().unwrap_or_default() } else { Vec::new() };
        v.clear();
        v.reserve(cap);
        v
    }

    /// Give a buffer back.
    pub fn put(&self, v: Vec<u8>) {
        if v.capacity() <= self.max_cap && v.capacity() > 0 {
            let mut bufs = lock(&self.bufs);
            if bufs.len() < KEEP {
                bufs.push(v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_reused_up_to_the_bound() {
        let pool = BufPool::new(1024);
        let mut v = pool.get(100);
        v.extend_from_slice(&[1; 100]);
        let p = v.as_ptr();
        pool.put(v);
        let w = pool.get(50);
        assert!(w.is_empty() && w.as_ptr() == p);
        pool.put(Vec::with_capacity(4096));
        assert!(pool.get(10).capacity() < 4096);
    }
}
