//! OOB for ranks that are threads of one process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Poll;

use super::{Oob, OobRequest};
use crate::error::{Error, Result};

/// One rank's handle on an in-process allgather group; make them with [`ThreadOob::group`].
#[derive(Clone)]
pub struct ThreadOob {
    rank: usize,
    shared: Arc<Shared>,
    /// How many allgathers this rank has posted (each round has its own slots).
    round: Arc<Mutex<u64>>,
}

struct Shared {
    size: usize,
    /// Unique per group in this process.
    group: u64,
    rounds: Mutex<HashMap<u64, Round>>,
}

struct Round {
    data: Vec<Option<Vec<u8>>>,
    /// Ranks that have collected the result; the round is freed when all have.
    collected: usize,
}

impl ThreadOob {
    /// `size` handles, one per rank, sharing one group.
    pub fn group(size: usize) -> Vec<ThreadOob> {
        static GROUPS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        // Relaxed: only uniqueness matters.
        let group = GROUPS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let shared = Arc::new(Shared { size, group, rounds: Mutex::new(HashMap::new()) });
        (0..size).map(|rank| ThreadOob { rank, shared: shared.clone(), round: Arc::new(Mutex::new(0)) }).collect()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock only means another rank's thread panicked; the map itself is consistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Oob for ThreadOob {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.shared.size
    }

    fn allgather(&self, data: &[u8]) -> Result<Box<dyn OobRequest>> {
        let round = {
            let mut r = lock(&self.round);
            *r += 1;
            *r
        };
        let mut rounds = lock(&self.shared.rounds);
        let entry = rounds.entry(round).or_insert_with(|| Round { data: vec![None; self.shared.size], collected: 0 });
        let slot = entry.data.get_mut(self.rank).ok_or_else(|| {
            Error::internal(format!("thread OOB rank {} outside group of {}", self.rank, self.shared.size))
        })?;
        *slot = Some(data.to_vec());
        Ok(Box::new(ThreadOobRequest { shared: self.shared.clone(), round, done: false }))
    }

    fn job_id(&self) -> Option<String> {
        Some(format!("t{:x}-{:x}", std::process::id(), self.shared.group))
    }
}

struct ThreadOobRequest {
    shared: Arc<Shared>,
    round: u64,
    done: bool,
}

impl OobRequest for ThreadOobRequest {
    fn test(&mut self) -> Poll<Result<Vec<Vec<u8>>>> {
        if self.done {
            return Poll::Ready(Err(Error::invalid_param("OOB request tested after it completed")));
        }
        let mut rounds = lock(&self.shared.rounds);
        let Some(round) = rounds.get_mut(&self.round) else {
            return Poll::Ready(Err(Error::internal(format!("thread OOB round {} vanished", self.round))));
        };
        if round.data.iter().any(Option::is_none) {
            return Poll::Pending;
        }
        let result: Vec<Vec<u8>> = round.data.iter().map(|d| d.clone().unwrap_or_default()).collect();
        round.collected += 1;
        if round.collected == self.shared.size {
            rounds.remove(&self.round);
        }
        self.done = true;
        Poll::Ready(Ok(result))
    }

    fn missing(&self) -> Vec<usize> {
        let rounds = lock(&self.shared.rounds);
        match rounds.get(&self.round) {
            Some(r) => r.data.iter().enumerate().filter(|(_, d)| d.is_none()).map(|(i, _)| i).collect(),
            None => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oob::allgather_blocking;
    use std::time::Duration;

    #[test]
    fn threads_allgather_twice() {
        let handles: Vec<_> = ThreadOob::group(4)
            .into_iter()
            .map(|oob| {
                std::thread::spawn(move || {
                    let me = oob.rank() as u8;
                    let a = allgather_blocking(&oob, &[me], None).unwrap();
                    let b = allgather_blocking(&oob, &vec![me; usize::from(me)], None).unwrap();
                    (a, b)
                })
            })
            .collect();
        for h in handles {
            let (a, b) = h.join().unwrap();
            assert_eq!(a, vec![vec![0], vec![1], vec![2], vec![3]]);
            assert_eq!(b[3], vec![3, 3, 3]);
            assert!(b[0].is_empty());
        }
    }

    #[test]
    fn missing_rank_times_out_with_its_name() {
        let mut group = ThreadOob::group(3);
        let oob = group.remove(0);
        let err = allgather_blocking(&oob, b"x", Some(Duration::from_millis(50))).unwrap_err();
        assert_eq!(err.status(), crate::Status::TimedOut);
        assert!(err.to_string().contains("[1, 2]"), "{err}");
    }
}
