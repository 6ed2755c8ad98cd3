//! The call board: where the ranks of a team show the collectives they
//! posted, so that a rank whose collective makes no progress can tell when
//! it never will because the ranks' calls differ.
//!
//! Each TL checks the ranks it reads from (the shm TL's signature per step,
//! the signature every p2p message carries). But ranks whose calls differ
//! may choose different TLs or algorithms — counts of 5 000 and 200 000
//! elements select shm on one rank and p2p on the other — and then no
//! message and no control line of theirs ever meets: both would wait until
//! their timeout, or forever. The board is where they meet.
//!
//! A TL with memory that every rank of the team reads (the shm TL's
//! segment) offers a board ([`TlTeam::call_board`](crate::backend::TlTeam::call_board)).
//! At every post the engine shows the collective there — sequence number,
//! [`Signature`] and the algorithm chosen — in entry `seq % BOARD_DEPTH` of
//! its rank; a task still in progress [`FIRST_LOOK`] after it started looks,
//! and looks again every [`LOOK_EVERY`], at the entries the other ranks show
//! for the same sequence number. An entry of another call, or of the same
//! call run by another algorithm, fails the task on both sides, naming the
//! ranks and their calls. An entry of another sequence number says nothing
//! (that rank has not posted this collective yet, or is `BOARD_DEPTH`
//! posts further). Looking costs nothing on the fast path: only a task that
//! has waited `FIRST_LOOK` reads other ranks' entries.
//!
//! Entries are written without locks, so a reader may see one half
//! written; each carries a checksum of its words, and one whose checksum
//! does not match is taken as empty (a zeroed entry fails it too). A
//! mismatch is therefore only reported for an entry that its rank wrote whole.

use std::sync::Arc;
use std::time::Duration;

use crate::args::Signature;
use crate::error::{Error, Result};

/// Entries each rank keeps on a board: the posts of a rank that may still
/// be waited for (a rank with more nonblocking collectives in flight than
/// this overwrites the entries of its oldest, which are then not checked).
pub const BOARD_DEPTH: usize = 8;

/// Words of one entry: seq, signature (2), algorithm name (4), checksum.
pub const ENTRY_WORDS: usize = 8;

/// How long a task runs before it first looks at the board.
pub const FIRST_LOOK: Duration = Duration::from_millis(10);

/// How often a task still in progress looks again.
pub const LOOK_EVERY: Duration = Duration::from_millis(100);

/// Bytes of the algorithm name an entry holds ("tl/algorithm", cut there).
const VIA_BYTES: usize = 32;

/// The checksum's starting value: not zero, so that an entry of zeroes
/// (a fresh board) does not pass as a post.
const SEED: u64 = 0x6361_6c6c_626f_6172; // "callboar"

/// Where a team's ranks show their posts (implemented by a TL; see the module docs).
pub trait CallBoard: Send + Sync {
    /// Number of ranks on the board (the team's size).
    fn ranks(&self) -> usize;
    /// Write this rank's entry `index` (< [`BOARD_DEPTH`]).
    fn write(&self, index: usize, words: &[u64; ENTRY_WORDS]);
    /// Read rank `r`'s entry `index`, as it is now (possibly half written).
    fn read(&self, r: usize, index: usize) -> Result<[u64; ENTRY_WORDS]>;
}

/// One post as the board shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Posted {
    /// The team's sequence number of the collective.
    pub seq: u64,
    /// What was called.
    pub sig: Signature,
    /// "tl/algorithm" (its first 32 bytes, zero-padded).
    pub via: [u64; 4],
}

impl Posted {
    /// `via` ("tl/algorithm") as an entry holds it.
    pub fn via_words(via: &str) -> [u64; 4] {
        let mut bytes = [0u8; VIA_BYTES];
        let n = via.len().min(VIA_BYTES);
        bytes[..n].copy_from_slice(&via.as_bytes()[..n]);
        std::array::from_fn(|i| u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().unwrap_or_default()))
    }

    /// The algorithm's name back from [`Posted::via`].
    pub fn via_name(&self) -> String {
        let bytes: Vec<u8> = self.via.iter().flat_map(|w| w.to_le_bytes()).take_while(|&b| b != 0).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The entry's words.
    pub fn encode(&self) -> [u64; ENTRY_WORDS] {
        let mut w = self.words();
        w[ENTRY_WORDS - 1] = checksum(&w);
        w
    }

    /// The entry's words but its checksum (0 in its place).
    fn words(&self) -> [u64; ENTRY_WORDS] {
        [self.seq, self.sig.word, self.sig.size, self.via[0], self.via[1], self.via[2], self.via[3], 0]
    }

    /// The post an entry holds, or `None` if it holds none whole (empty,
    /// half written, or garbage).
    pub fn decode(w: &[u64; ENTRY_WORDS]) -> Option<Posted> {
        (w[ENTRY_WORDS - 1] == checksum(w)).then(|| Posted {
            seq: w[0],
            sig: Signature { word: w[1], size: w[2] },
            via: [w[3], w[4], w[5], w[6]],
        })
    }
}

/// A mix of every word but the last (the checksum's own place): the
/// call's words first, the sequence number last, so that a request's next
/// post mixes one word into what its first computed ([`BoardWatch::reshow`]).
fn checksum(w: &[u64; ENTRY_WORDS]) -> u64 {
    mix(call_mix(w), w[0])
}

/// The checksum's mix of the words a request's posts share: all but the
/// sequence number (and the checksum's place).
fn call_mix(w: &[u64; ENTRY_WORDS]) -> u64 {
    w[1..ENTRY_WORDS - 1].iter().fold(SEED, |h, &x| mix(h, x))
}

fn mix(h: u64, x: u64) -> u64 {
    (h ^ x).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29)
}

/// A posted task's place on its team's board: shown at post, looked at
/// while the task waits.
pub struct BoardWatch {
    board: Arc<dyn CallBoard>,
    rank: usize,
    mine: Posted,
    /// `call_mix` of `mine`, which its posts share.
    call: u64,
}

impl BoardWatch {
    /// Show `mine`, posted by team rank `rank`, on `board`.
    pub fn show(board: &Arc<dyn CallBoard>, rank: usize, mine: Posted) -> BoardWatch {
        let mut watch = BoardWatch { board: board.clone(), rank, mine, call: call_mix(&mine.words()) };
        watch.reshow(mine.seq);
        watch
    }

    /// Show the next post of the same request (the same call), as `seq`.
    pub fn reshow(&mut self, seq: u64) {
        self.mine.seq = seq;
        let mut w = self.mine.words();
        w[ENTRY_WORDS - 1] = mix(self.call, seq);
        self.board.write(index(seq), &w);
    }

    /// Compare this post with the other ranks' posts of the same sequence
    /// number: an error naming the first rank whose call, or algorithm,
    /// differs.
    pub fn look(&self) -> Result<()> {
        let mine = &self.mine;
        for r in (0..self.board.ranks()).filter(|&r| r != self.rank) {
            let Some(theirs) = Posted::decode(&self.board.read(r, index(mine.seq))?) else { continue };
            if theirs.seq != mine.seq {
                continue;
            }
            if !theirs.sig.agrees(&mine.sig) {
                return Err(Error::invalid_param(format!(
                    "the ranks' calls differ: rank {r} posted {} (via {}), this rank ({}) posted {} (via {})",
                    theirs.sig.describe(),
                    theirs.via_name(),
                    self.rank,
                    mine.sig.describe(),
                    mine.via_name(),
                )));
            }
            if theirs.via != mine.via {
                return Err(Error::invalid_param(format!(
                    "the ranks chose different algorithms for the same call ({}): rank {r} runs it via {}, \
                     this rank ({}) via {}; they cannot meet (do the ranks' buffers have the same memory type?)",
                    mine.sig.describe(),
                    theirs.via_name(),
                    self.rank,
                    mine.via_name()
                )));
            }
        }
        Ok(())
    }
}

fn index(seq: u64) -> usize {
    (seq % BOARD_DEPTH as u64) as usize
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::types::{CollType, DataType, ReduceOp};

    struct MemBoard(Mutex<Vec<[u64; ENTRY_WORDS]>>, usize, usize);

    impl MemBoard {
        fn new(ranks: usize, me: usize) -> Arc<MemBoard> {
            Arc::new(MemBoard(Mutex::new(vec![[0; ENTRY_WORDS]; ranks * BOARD_DEPTH]), ranks, me))
        }
        fn put(&self, r: usize, p: &Posted) {
            self.0.lock().unwrap()[r * BOARD_DEPTH + index(p.seq)] = p.encode();
        }
    }

    impl CallBoard for MemBoard {
        fn ranks(&self) -> usize {
            self.1
        }
        fn write(&self, i: usize, w: &[u64; ENTRY_WORDS]) {
            self.0.lock().unwrap()[self.2 * BOARD_DEPTH + i] = *w;
        }
        fn read(&self, r: usize, i: usize) -> Result<[u64; ENTRY_WORDS]> {
            Ok(self.0.lock().unwrap()[r * BOARD_DEPTH + i])
        }
    }

    fn allreduce(seq: u64, count: u64, via: &str) -> Posted {
        let word = CollType::Allreduce.index() as u64 | (DataType::Float32 as u64) << 8 | (ReduceOp::Sum as u64) << 16;
        Posted { seq, sig: Signature { word, size: count }, via: Posted::via_words(via) }
    }

    #[test]
    fn entries_round_trip_and_torn_or_empty_ones_are_ignored() {
        let p = allreduce(7, 5000, "shm/rsag");
        assert_eq!(Posted::decode(&p.encode()), Some(p));
        assert_eq!(p.via_name(), "shm/rsag");
        assert_eq!(Posted::decode(&[0; ENTRY_WORDS]), None, "a fresh board shows nothing");
        let mut torn = p.encode();
        torn[2] = 200_000; // the size of a newer post, the rest still the old one's
        assert_eq!(Posted::decode(&torn), None);
        let long = "p2p/a_very_long_algorithm_name_that_is_cut";
        assert_eq!(allreduce(1, 1, long).via_name(), &long[..32]);
    }

    /// `show` and `reshow` write what `encode` does (they mix the call's
    /// words once and the sequence number at each post), which decodes.
    #[test]
    fn shown_and_reshown_posts_are_encoded_entries() {
        let board = MemBoard::new(2, 0);
        let dynb: Arc<dyn CallBoard> = board.clone();
        let mut watch = BoardWatch::show(&dynb, 0, allreduce(7, 5000, "shm/rsag"));
        for seq in [7, 8, 9 + BOARD_DEPTH as u64, u64::MAX] {
            if seq != 7 {
                watch.reshow(seq);
            }
            let want = allreduce(seq, 5000, "shm/rsag");
            let entry = board.read(0, index(seq)).unwrap();
            assert_eq!(entry, want.encode(), "seq {seq}");
            assert_eq!(Posted::decode(&entry), Some(want), "seq {seq}");
        }
    }

    #[test]
    fn a_peer_with_another_call_or_algorithm_at_the_same_seq_is_named() {
        let board = MemBoard::new(3, 0);
        let dynb: Arc<dyn CallBoard> = board.clone();
        let watch = BoardWatch::show(&dynb, 0, allreduce(7, 5000, "shm/rsag"));
        watch.look().expect("nobody else posted yet");
        board.put(1, &allreduce(7, 5000, "shm/rsag"));
        board.put(2, &allreduce(15, 1, "p2p/knomial")); // same entry, another seq
        watch.look().expect("rank 1 agrees; rank 2 is elsewhere");
        board.put(2, &allreduce(7, 200_000, "p2p/sra_knomial"));
        let e = watch.look().unwrap_err().to_string();
        assert!(e.contains("rank 2 posted allreduce") && e.contains("200000") && e.contains("p2p/sra_knomial"), "{e}");
        assert!(e.contains("this rank (0) posted") && e.contains("5000"), "{e}");
        board.put(2, &allreduce(7, 5000, "p2p/ring"));
        let e = watch.look().unwrap_err().to_string();
        assert!(e.contains("different algorithms") && e.contains("rank 2 runs it via p2p/ring"), "{e}");
    }
}
