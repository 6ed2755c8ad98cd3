//! The cache of opened peer allocations: a collective that reuses its
//! buffers opens each peer's allocation once, not once per call.
//!
//! Entries are keyed by (peer rank, buffer id, handle bytes): the buffer
//! id names one allocation of the peer for its whole life, the handle
//! guards against a peer that restarted with the same ids. An entry whose
//! range in the peer's address space overlaps a new allocation's is stale
//! (the peer freed it: two live allocations never overlap); it is dropped
//! (closed) before the new one opens. The driver may also give a new
//! allocation memory of a freed one elsewhere in the address space (on an
//! H200 a 1 MiB buffer freed and allocated again came back 4 KiB lower,
//! and opening it failed with `CUDA_ERROR_ALREADY_MAPPED` while the old
//! mapping was open): an open that fails so (`NoResource`) closes every
//! mapping of that peer and opens once more, as UCX's CUDA IPC cache does.
//! The cache is bounded: past its capacity the least recently used entry is
//! dropped. It is generic over the mapping (`M`, [`OpenedMem`] by default)
//! so that its bookkeeping is tested without a driver; a mapping is closed
//! by dropping it.
//!
//! [`OpenedMem`]: super::OpenedMem

use std::collections::HashMap;

use ferrocoll_core::{Error, Result, Status};

use super::{Exported, IpcHandle, OpenedMem};

/// The capacity of [`IpcCache::new`]: mappings held at once, over all
/// peers. UCC's TL/CUDA maps a handful of buffers per peer and collective
/// (source, destination, scratch); 256 leaves room for many in flight
/// while bounding the driver's mappings (each pins a peer's allocation).
pub const DEFAULT_CAPACITY: usize = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Key {
    rank: usize,
    buffer_id: u64,
    handle: IpcHandle,
}

#[derive(Debug)]
struct Entry<M> {
    mapping: M,
    /// The allocation's range in the peer's address space.
    base: u64,
    size: u64,
    last_use: u64,
}

/// What the cache did so far (for tests and diagnostics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups answered by a cached mapping.
    pub hits: u64,
    /// Mappings opened.
    pub opens: u64,
    /// Least recently used mappings dropped for room.
    pub evicted: u64,
    /// Mappings dropped because the peer's addresses now hold another
    /// allocation (or the driver said the new one was mapped already).
    pub stale: u64,
}

/// Opened mappings of peers' allocations (see the module docs).
#[derive(Debug)]
pub struct IpcCache<M = OpenedMem> {
    entries: HashMap<Key, Entry<M>>,
    capacity: usize,
    tick: u64,
    stats: CacheStats,
}

impl<M> IpcCache<M> {
    /// An empty cache of [`DEFAULT_CAPACITY`].
    pub fn new() -> IpcCache<M> {
        IpcCache::with_capacity(DEFAULT_CAPACITY).expect("the default capacity is not zero")
    }

    /// An empty cache holding at most `capacity` mappings; `InvalidParam` for 0.
    pub fn with_capacity(capacity: usize) -> Result<IpcCache<M>> {
        if capacity == 0 {
            return Err(Error::invalid_param("a CUDA IPC cache of capacity 0 could hold no mapping"));
        }
        Ok(IpcCache { entries: HashMap::new(), capacity, tick: 0, stats: CacheStats::default() })
    }

    /// Mappings held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds no mapping.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The most mappings it holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// What it did so far.
    pub fn stats(&self) -> CacheStats {
        self.stats
    }

    /// The mapping of `peer`'s allocation exported by rank `rank`: the
    /// cached one, else one made by `open` (entries of that rank whose
    /// range overlaps the allocation are dropped before `open` is called;
    /// an open refused with `NoResource` drops every entry of that rank and
    /// is tried once more; the least recently used entry is dropped after
    /// it succeeded, when the cache is full). `open`'s error is returned as
    /// is, and the cache is left without the entry.
    pub fn get_or_open(
        &mut self,
        rank: usize,
        peer: &Exported,
        mut open: impl FnMut(&Exported) -> Result<M>,
    ) -> Result<&M> {
        self.tick += 1;
        let key = Key { rank, buffer_id: peer.buffer_id, handle: peer.handle };
        if self.entries.contains_key(&key) {
            self.stats.hits += 1;
        } else {
            let end = peer.base.saturating_add(peer.size);
            self.drop_where(|k, e| k.rank == rank && e.base < end && peer.base < e.base.saturating_add(e.size));
            let mapping = match open(peer) {
                Err(e) if e.status() == Status::NoResource => {
                    self.drop_where(|k, _| k.rank == rank);
                    open(peer)?
                }
                opened => opened?,
            };
            self.stats.opens += 1;
            // Room is made only once the open succeeded: a refused open costs no entry.
            if self.entries.len() >= self.capacity {
                let lru = self.entries.iter().min_by_key(|(_, e)| e.last_use).map(|(k, _)| *k);
                if let Some(lru) = lru {
                    self.remove(&lru);
                    self.stats.evicted += 1;
                }
            }
            self.entries.insert(key, Entry { mapping, base: peer.base, size: peer.size, last_use: 0 });
        }
        let entry = self.entries.get_mut(&key).expect("present or just inserted");
        entry.last_use = self.tick;
        Ok(&entry.mapping)
    }

    /// Drop every mapping of rank `rank` (a peer that left); how many.
    pub fn forget_rank(&mut self, rank: usize) -> usize {
        let keys: Vec<Key> = self.entries.keys().filter(|k| k.rank == rank).copied().collect();
        keys.iter().for_each(|k| self.remove(k));
        keys.len()
    }

    /// Drop every mapping.
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// Drop the stale entries `stale` picks (counted).
    fn drop_where(&mut self, stale: impl Fn(&Key, &Entry<M>) -> bool) {
        let before = self.entries.len();
        self.entries.retain(|k, e| !stale(k, e));
        self.stats.stale += (before - self.entries.len()) as u64;
    }

    fn remove(&mut self, key: &Key) {
        self.entries.remove(key);
    }
}

impl<M> Default for IpcCache<M> {
    fn default() -> Self {
        IpcCache::new()
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use super::*;

    /// A mapping that records its close (drop) in a shared log.
    #[derive(Debug)]
    struct Fake {
        id: u64,
        closed: Rc<RefCell<Vec<u64>>>,
    }

    impl Drop for Fake {
        fn drop(&mut self) {
            self.closed.borrow_mut().push(self.id);
        }
    }

    /// A 4 KiB allocation.
    fn peer(base: u64, buffer_id: u64) -> Exported {
        sized(base, buffer_id, 0x1000)
    }

    fn sized(base: u64, buffer_id: u64, size: u64) -> Exported {
        let mut h = [0u8; 64];
        h[..8].copy_from_slice(&base.to_le_bytes());
        h[8..16].copy_from_slice(&buffer_id.to_le_bytes());
        Exported { handle: IpcHandle(h), base, size, offset: 0, buffer_id }
    }

    struct World {
        cache: IpcCache<Fake>,
        closed: Rc<RefCell<Vec<u64>>>,
        opened: Vec<u64>,
    }

    impl World {
        fn new(capacity: usize) -> World {
            World { cache: IpcCache::with_capacity(capacity).unwrap(), closed: Rc::default(), opened: Vec::new() }
        }

        /// The buffer id behind the mapping the cache hands out.
        fn get(&mut self, rank: usize, p: &Exported) -> u64 {
            let closed = self.closed.clone();
            let opened = &mut self.opened;
            self.cache
                .get_or_open(rank, p, |p| {
                    opened.push(p.buffer_id);
                    Ok(Fake { id: p.buffer_id, closed: closed.clone() })
                })
                .unwrap()
                .id
        }
    }

    #[test]
    fn each_allocation_is_opened_once_per_peer() {
        let mut w = World::new(8);
        let (a, b) = (peer(0x1000, 1), peer(0x9000, 2));
        for _ in 0..3 {
            assert_eq!(w.get(0, &a), 1);
            assert_eq!(w.get(0, &b), 2);
            assert_eq!(w.get(1, &a), 1, "the same ids from another rank are another allocation");
        }
        assert_eq!(w.opened, [1, 2, 1]);
        assert_eq!(w.cache.len(), 3);
        assert_eq!(w.cache.stats(), CacheStats { hits: 6, opens: 3, evicted: 0, stale: 0 });
        assert!(w.closed.borrow().is_empty());
        assert_eq!(w.cache.forget_rank(0), 2);
        let mut closed = w.closed.borrow().clone();
        closed.sort();
        assert_eq!(closed, [1, 2], "rank 0's two mappings, not rank 1's");
        w.cache.clear();
        assert_eq!(w.closed.borrow().len(), 3);
        assert!(w.cache.is_empty());
    }

    #[test]
    fn a_reallocated_address_replaces_the_stale_mapping() {
        let mut w = World::new(8);
        assert_eq!(w.get(0, &peer(0x1000, 1)), 1);
        // Freed and allocated again at the same base: a new buffer id.
        assert_eq!(w.get(0, &peer(0x1000, 5)), 5, "never the stale mapping");
        assert_eq!(*w.closed.borrow(), [1], "the stale mapping is closed before the new one opens");
        assert_eq!(w.cache.len(), 1);
        assert_eq!(w.cache.stats().stale, 1);
        assert_eq!(w.get(0, &peer(0x1000, 5)), 5);
        assert_eq!(w.opened, [1, 5]);
        // Same buffer id but another handle (a restarted peer): opened anew.
        let mut other = peer(0x1000, 5);
        other.handle.0[63] ^= 1;
        assert_eq!(w.get(0, &other), 5);
        assert_eq!(w.opened, [1, 5, 5]);
        assert_eq!(w.cache.len(), 1);
    }

    #[test]
    fn an_overlapping_reallocation_replaces_the_stale_mapping() {
        let mut w = World::new(8);
        let mib = 1 << 20;
        assert_eq!(w.get(0, &sized(0x11000, 1, mib)), 1);
        assert_eq!(w.get(0, &sized(0x111000, 2, mib)), 2, "right after the first");
        assert_eq!(w.get(1, &sized(0x10000, 7, mib)), 7, "another rank's addresses");
        // Freed, and 1 MiB allocated again 4 KiB lower (seen on an H200).
        assert_eq!(w.get(0, &sized(0x10000, 3, mib)), 3);
        assert_eq!(*w.closed.borrow(), [1], "only the overlapped mapping of that rank");
        assert_eq!(w.cache.stats().stale, 1);
        assert_eq!(w.cache.len(), 3);
    }

    #[test]
    fn a_refusal_as_already_mapped_closes_the_peers_mappings_and_opens_again() {
        let mut w = World::new(8);
        w.get(0, &peer(0x1000, 1));
        w.get(1, &peer(0x1000, 1));
        let closed = w.closed.clone();
        let mut tries = 0;
        let got = w.cache.get_or_open(0, &peer(0x800000, 2), |p| {
            tries += 1;
            if tries == 1 {
                Err(Error::new(Status::NoResource, "cuIpcOpenMemHandle failed: CUDA_ERROR_ALREADY_MAPPED"))
            } else {
                Ok(Fake { id: p.buffer_id, closed: closed.clone() })
            }
        });
        assert_eq!(got.unwrap().id, 2);
        assert_eq!(tries, 2);
        assert_eq!(*w.closed.borrow(), [1], "rank 0's mapping closed, rank 1's kept");
        assert_eq!(w.cache.len(), 2);
        // Refused again after the retry: the error, and no entry.
        let err = w
            .cache
            .get_or_open(0, &peer(0x900000, 3), |_| Err(Error::new(Status::NoResource, "still mapped")))
            .unwrap_err();
        assert_eq!(err.context(), "still mapped");
        assert_eq!(w.cache.len(), 1, "rank 0's entry dropped before the retry; rank 1's kept");
    }

    #[test]
    fn the_least_recently_used_mapping_makes_room() {
        let mut w = World::new(2);
        w.get(0, &peer(0x1000, 1));
        w.get(0, &peer(0x2000, 2));
        w.get(0, &peer(0x1000, 1)); // 2 is now the least recently used
        w.get(0, &peer(0x3000, 3));
        assert_eq!(*w.closed.borrow(), [2]);
        assert_eq!(w.cache.len(), 2);
        assert_eq!(w.get(0, &peer(0x1000, 1)), 1);
        assert_eq!(w.cache.stats(), CacheStats { hits: 2, opens: 3, evicted: 1, stale: 0 });
        assert_eq!(w.cache.capacity(), 2);
    }

    #[test]
    fn a_failed_open_leaves_no_entry_and_zero_capacity_is_refused() {
        let mut cache: IpcCache<Fake> = IpcCache::with_capacity(4).unwrap();
        let err = cache.get_or_open(0, &peer(0x1000, 1), |_| Err(Error::invalid_param("refused"))).unwrap_err();
        assert_eq!(err.context(), "refused");
        assert!(cache.is_empty());
        assert_eq!(cache.stats().opens, 0);
        let mut full = World::new(1);
        full.get(0, &peer(0x1000, 1));
        assert!(full.cache.get_or_open(0, &peer(0x2000, 2), |_| Err(Error::no_memory("full"))).is_err());
        assert_eq!((full.cache.len(), full.closed.borrow().len()), (1, 0), "a refused open evicts nothing");
        assert_eq!(IpcCache::<Fake>::with_capacity(0).unwrap_err().status(), Status::InvalidParam);
        assert_eq!(IpcCache::<Fake>::new().capacity(), DEFAULT_CAPACITY);
    }
}
