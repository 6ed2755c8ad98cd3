//! Copies into the segment: plain or streaming stores, whichever this rank
//! measures faster.
//!
//! What a rank copies into its part of the segment another rank reads next,
//! and the lines it writes were last read by that rank: each plain store
//! first takes its line back from the reader's cache. Where the two CPUs
//! share a cache that costs little, but not on every machine, nor at every
//! moment on one. On a 2-core AMD EPYC VM (family 25) a rank's 512-KiB copy
//! into the segment ran 18–60 µs in most runs and 300–600 µs in others
//! (up to 40 % of the runs at times, a whole run at a time: where the
//! machine placed the memory or the vCPUs, which the guest cannot see),
//! making 2-rank reduce and allreduce of 1 MiB 8× slower, while streaming
//! (non-temporal) stores, which write the line without reading it, stayed
//! at 40–50 µs in every run (BENCHMARKS.md, forty-first round). Where the
//! plain copy is fast, streaming is slower: the reader then finds the data
//! in memory rather than in a shared cache (15–25 % on that VM's fast
//! runs). Neither choice is right everywhere, so each rank times its large
//! copies in and keeps plain stores unless they measure several times
//! slower than streaming ones, timing the kind out of favour now and then
//! to notice when the machine changes.
//!
//! The choice is the writer's alone: readers see the same bytes either
//! way, since streaming stores are fenced before the flag that publishes
//! them (`mc`'s `copy_streaming`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Copies shorter than this are plain and untimed: two clock reads (~50 ns)
/// would cost more than 3 % of a copy this long that runs at cache speed.
pub(crate) const TIMED_FROM: usize = 64 << 10;

/// Every this many timed copies, one uses the kind not in favour.
const EXPLORE_EVERY: u64 = 32;

/// Streaming is in favour only while plain copies take this many times
/// longer: the writer's clock does not see what streaming costs the reader
/// (a trip to memory for every line, where a plain copy left them in a
/// cache the two share). On the family-25 VM (BENCHMARKS.md, forty-first
/// round), plain / streaming per byte was 0.3–1.9 in the runs where plain
/// won end to end (2-rank reduce of 1 MiB 57–71 µs, against 64–84 with
/// streaming) and 10–14 in those where it lost 8×.
const PLAIN_UNLESS_SLOWER_BY: u64 = 4;

/// How a copy into the segment writes its lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stores {
    /// Ordinary stores, through the cache.
    Plain = 0,
    /// Non-temporal stores, past the cache.
    Streaming = 1,
}

impl Stores {
    fn other(self) -> Stores {
        match self {
            Stores::Plain => Stores::Streaming,
            Stores::Streaming => Stores::Plain,
        }
    }
}

/// A rank's measured cost of each kind of store, for its copies into the
/// segment of at least [`TIMED_FROM`] bytes.
#[derive(Debug, Default)]
pub(crate) struct CopyIn {
    /// Per kind (`Stores as usize`): picoseconds per byte (0: not yet
    /// timed). A faster sample replaces the estimate (a preempted or
    /// page-faulting copy must not keep a kind out of favour for long); a
    /// slower one moves it half-way, but up by half at most (a preempted
    /// copy, which may take a thousand times longer, moves it no further
    /// than any other slow one: a kind that turned slow needs four copies
    /// to climb from par to [`PLAIN_UNLESS_SLOWER_BY`]).
    cost: [AtomicU64; 2],
    /// Timed copies chosen so far.
    chosen: AtomicU64,
}

impl CopyIn {
    /// The kind of stores the next timed copy uses: each kind once first,
    /// then plain unless it costs [`PLAIN_UNLESS_SLOWER_BY`] times
    /// streaming's, but every [`EXPLORE_EVERY`]-th copy the other.
    pub(crate) fn pick(&self) -> Stores {
        let n = self.chosen.fetch_add(1, Ordering::Relaxed);
        match self.costs() {
            [0, _] => Stores::Plain,
            [_, 0] => Stores::Streaming,
            _ if n % EXPLORE_EVERY == EXPLORE_EVERY - 1 => self.favoured().other(),
            _ => self.favoured(),
        }
    }

    /// The kind in favour now, as [`Self::pick`] would choose outside its
    /// exploring copies (plain until both kinds are timed).
    pub(crate) fn favoured(&self) -> Stores {
        let [plain, streaming] = self.costs();
        if streaming != 0 && plain / PLAIN_UNLESS_SLOWER_BY > streaming { Stores::Streaming } else { Stores::Plain }
    }

    /// The cost estimates, plain's then streaming's.
    fn costs(&self) -> [u64; 2] {
        [Stores::Plain, Stores::Streaming].map(|s| self.cost[s as usize].load(Ordering::Relaxed))
    }

    /// Make `stores` the kind in favour (its other kind measured 1000
    /// times slower), for tests of what each kind does.
    #[cfg(test)]
    pub(crate) fn favour(&self, stores: Stores) {
        self.cost[stores as usize].store(1, Ordering::Relaxed);
        self.cost[stores.other() as usize].store(1000, Ordering::Relaxed);
    }

    /// Record that a copy of `bytes` with `stores` took `took`.
    pub(crate) fn record(&self, stores: Stores, bytes: usize, took: Duration) {
        if bytes == 0 {
            return;
        }
        let ps = (took.as_nanos().saturating_mul(1000) / bytes as u128).clamp(1, u64::MAX as u128) as u64;
        let slot = &self.cost[stores as usize];
        let old = slot.load(Ordering::Relaxed);
        let new = if old == 0 || ps < old { ps } else { old + (ps - old).min(old) / 2 };
        slot.store(new.max(1), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn each_kind_is_timed_once_before_either_is_preferred() {
        let c = CopyIn::default();
        assert_eq!(c.pick(), Stores::Plain);
        c.record(Stores::Plain, 1 << 20, us(100));
        assert_eq!(c.pick(), Stores::Streaming);
        c.record(Stores::Streaming, 1 << 20, us(50));
        assert_eq!(c.pick(), Stores::Plain, "plain, twice as slow, stays in favour");
        assert_eq!(c.favoured(), Stores::Plain);
        c.record(Stores::Plain, 1 << 20, us(300));
        c.record(Stores::Plain, 1 << 20, us(300));
        assert_eq!(c.pick(), Stores::Streaming, "plain, 5x as slow, is not");
        assert_eq!(c.favoured(), Stores::Streaming);
    }

    #[test]
    fn the_favoured_kind_wins_but_the_other_is_tried_now_and_then() {
        let c = CopyIn::default();
        c.record(Stores::Plain, 1 << 20, us(20));
        c.record(Stores::Streaming, 1 << 20, us(40));
        let picks: Vec<Stores> = (0..2 * EXPLORE_EVERY).map(|_| c.pick()).collect();
        let others = picks.iter().filter(|&&s| s == Stores::Streaming).count();
        assert_eq!(others, 2, "one exploring copy per {EXPLORE_EVERY}: {picks:?}");
    }

    #[test]
    fn a_kind_that_turns_slow_loses_its_favour_within_a_few_copies() {
        let c = CopyIn::default();
        c.record(Stores::Plain, 1 << 20, us(20));
        c.record(Stores::Streaming, 1 << 20, us(45));
        // The machine changes: plain copies now take 300 µs.
        let mut copies = 0;
        while c.pick() == Stores::Plain {
            c.record(Stores::Plain, 1 << 20, us(300));
            copies += 1;
            assert!(copies < 8, "still plain after {copies} slow copies");
        }
    }

    #[test]
    fn one_slow_sample_of_the_other_kind_is_outlived() {
        let c = CopyIn::default();
        // A preempted first copy makes plain look slow...
        assert_eq!(c.pick(), Stores::Plain);
        c.record(Stores::Plain, 1 << 20, us(2000));
        assert_eq!(c.pick(), Stores::Streaming);
        c.record(Stores::Streaming, 1 << 20, us(45));
        // ...but the exploring copies find it fast again and bring it back.
        let mut copies = 0;
        loop {
            let s = c.pick();
            c.record(s, 1 << 20, if s == Stores::Plain { us(20) } else { us(45) });
            copies += 1;
            if s == Stores::Plain && c.pick() == Stores::Plain {
                break;
            }
            assert!(copies <= EXPLORE_EVERY, "plain not back after {copies} copies");
        }
    }

    #[test]
    fn one_preempted_copy_does_not_flip_the_favour() {
        let c = CopyIn::default();
        c.record(Stores::Plain, 1 << 20, us(40));
        c.record(Stores::Streaming, 1 << 20, us(25));
        c.record(Stores::Plain, 1 << 20, us(40_000));
        assert_eq!(c.favoured(), Stores::Plain, "one copy that lost the CPU for 40 ms");
        c.record(Stores::Plain, 1 << 20, us(40));
        assert_eq!(c.favoured(), Stores::Plain);
    }

    #[test]
    fn an_empty_or_instant_copy_records_nothing_absurd() {
        let c = CopyIn::default();
        c.record(Stores::Plain, 0, us(5));
        assert_eq!(c.pick(), Stores::Plain, "nothing recorded for 0 bytes");
        c.record(Stores::Plain, 1 << 20, Duration::ZERO);
        assert_eq!(c.pick(), Stores::Streaming, "a 0-ns sample counts as timed");
        c.record(Stores::Streaming, 1 << 20, Duration::ZERO);
        assert_eq!(c.pick(), Stores::Plain, "and as no cheaper than any other");
    }
}
