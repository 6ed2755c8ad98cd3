//! Collective types (UCC's 16, as bit flags) and sets of them.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// A collective operation type, with UCC's bit-flag values (`ucc_coll_type_t`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CollType {
    /// Every rank gets the concatenation of every rank's block.
    Allgather = 1 << 0,
    /// Allgather with a count per rank.
    Allgatherv = 1 << 1,
    /// Every rank gets the reduction of every rank's vector.
    Allreduce = 1 << 2,
    /// Rank i's block j goes to rank j's block i.
    Alltoall = 1 << 3,
    /// Alltoall with counts and displacements per peer.
    Alltoallv = 1 << 4,
    /// No rank leaves before every rank has entered.
    Barrier = 1 << 5,
    /// The root's buffer is copied to every rank.
    Bcast = 1 << 6,
    /// The root leaves after every rank has entered.
    Fanin = 1 << 7,
    /// Every rank leaves after the root has entered.
    Fanout = 1 << 8,
    /// The root gets the concatenation of every rank's block.
    Gather = 1 << 9,
    /// Gather with a count per rank.
    Gatherv = 1 << 10,
    /// The root gets the reduction of every rank's vector.
    Reduce = 1 << 11,
    /// Rank i gets block i of the reduction.
    ReduceScatter = 1 << 12,
    /// Reduce-scatter with a count per rank.
    ReduceScatterv = 1 << 13,
    /// Rank i gets block i of the root's buffer.
    Scatter = 1 << 14,
    /// Scatter with a count per rank.
    Scatterv = 1 << 15,
}

impl CollType {
    /// Every collective type, in UCC's order.
    pub const ALL: [CollType; 16] = [
        CollType::Allgather,
        CollType::Allgatherv,
        CollType::Allreduce,
        CollType::Alltoall,
        CollType::Alltoallv,
        CollType::Barrier,
        CollType::Bcast,
        CollType::Fanin,
        CollType::Fanout,
        CollType::Gather,
        CollType::Gatherv,
        CollType::Reduce,
        CollType::ReduceScatter,
        CollType::ReduceScatterv,
        CollType::Scatter,
        CollType::Scatterv,
    ];

    /// Lower-case name as in UCC's tune strings (`allreduce`, `reduce_scatterv`, ...).
    pub const fn name(self) -> &'static str {
        use CollType::*;
        match self {
            Allgather => "allgather",
            Allgatherv => "allgatherv",
            Allreduce => "allreduce",
            Alltoall => "alltoall",
            Alltoallv => "alltoallv",
            Barrier => "barrier",
            Bcast => "bcast",
            Fanin => "fanin",
            Fanout => "fanout",
            Gather => "gather",
            Gatherv => "gatherv",
            Reduce => "reduce",
            ReduceScatter => "reduce_scatter",
            ReduceScatterv => "reduce_scatterv",
            Scatter => "scatter",
            Scatterv => "scatterv",
        }
    }

    /// The bit value.
    pub const fn bit(self) -> u32 {
        self as u32
    }

    /// Position of the bit (0..16), usable as an array index.
    pub const fn index(self) -> usize {
        (self as u32).trailing_zeros() as usize
    }

    /// Collectives that take a reduction operation.
    pub const fn is_reduction(self) -> bool {
        use CollType::*;
        matches!(self, Allreduce | Reduce | ReduceScatter | ReduceScatterv)
    }

    /// Collectives with a root rank.
    pub const fn is_rooted(self) -> bool {
        use CollType::*;
        matches!(self, Bcast | Reduce | Gather | Gatherv | Scatter | Scatterv | Fanin | Fanout)
    }

    /// Collectives that move no data.
    pub const fn is_synchronisation(self) -> bool {
        matches!(self, CollType::Barrier | CollType::Fanin | CollType::Fanout)
    }

    /// Collectives with per-rank counts (the v-variants).
    pub const fn is_vector(self) -> bool {
        use CollType::*;
        matches!(self, Allgatherv | Alltoallv | Gatherv | ReduceScatterv | Scatterv)
    }
}

impl fmt::Display for CollType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for CollType {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let lower = s.trim().to_ascii_lowercase();
        CollType::ALL.iter().copied().find(|c| c.name() == lower).ok_or_else(|| {
            let names: Vec<&str> = CollType::ALL.iter().map(|c| c.name()).collect();
            Error::invalid_param(format!("unknown collective type {s:?}; expected one of {}", names.join(", ")))
        })
    }
}

/// A set of collective types (a bit mask of [`CollType`] values).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CollTypeSet(pub u32);

impl CollTypeSet {
    /// The empty set.
    pub const EMPTY: CollTypeSet = CollTypeSet(0);
    /// Every collective type.
    pub const ALL: CollTypeSet = CollTypeSet(0xffff);

    /// Whether `coll` is in the set.
    pub const fn contains(self, coll: CollType) -> bool {
        self.0 & coll.bit() != 0
    }

    /// The set with `coll` added.
    pub const fn with(self, coll: CollType) -> CollTypeSet {
        CollTypeSet(self.0 | coll.bit())
    }

    /// The members, in UCC's order.
    pub fn iter(self) -> impl Iterator<Item = CollType> {
        CollType::ALL.into_iter().filter(move |c| self.contains(*c))
    }
}

impl FromIterator<CollType> for CollTypeSet {
    fn from_iter<I: IntoIterator<Item = CollType>>(iter: I) -> Self {
        iter.into_iter().fold(CollTypeSet::EMPTY, CollTypeSet::with)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_and_names() {
        assert_eq!(CollType::Allgather.bit(), 1);
        assert_eq!(CollType::Scatterv.bit(), 1 << 15);
        for (i, c) in CollType::ALL.iter().enumerate() {
            assert_eq!(c.index(), i);
            assert_eq!(c.name().parse::<CollType>().unwrap(), *c);
        }
        let set: CollTypeSet = [CollType::Bcast, CollType::Barrier].into_iter().collect();
        assert!(set.contains(CollType::Bcast) && !set.contains(CollType::Allreduce));
        assert_eq!(set.iter().count(), 2);
    }
}
