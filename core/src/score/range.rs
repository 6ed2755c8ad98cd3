//! Message-size ranges and scores.

use std::fmt;

use crate::config::parse_size;
use crate::error::{Error, Result};

/// Half-open range of message sizes in bytes, `[start, end)`; `end ==
/// u64::MAX` means no upper bound (printed `inf`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MsgRange {
    /// First size in the range.
    pub start: u64,
    /// First size past the range (`u64::MAX`: unbounded).
    pub end: u64,
}

impl MsgRange {
    /// Every size.
    pub const ALL: MsgRange = MsgRange { start: 0, end: u64::MAX };

    /// `[start, end)`.
    pub const fn new(start: u64, end: u64) -> MsgRange {
        MsgRange { start, end }
    }

    /// Whether `size` is in the range.
    pub fn contains(&self, size: u64) -> bool {
        size >= self.start && (size < self.end || self.end == u64::MAX)
    }

    /// The overlap with `other`, if any.
    pub fn intersect(&self, other: &MsgRange) -> Option<MsgRange> {
        let start = self.start.max(other.start);
        let end = self.end.min(other.end);
        (start < end).then_some(MsgRange { start, end })
    }

    /// Parse UCC's `start-end` with size units (`0-4k`, `4k-inf`, `1M-2M`).
    pub fn parse(s: &str) -> Result<MsgRange> {
        let (a, b) = s.split_once('-').ok_or_else(|| {
            Error::invalid_param(format!("message range {s:?} is not of the form start-end (e.g. 0-4k)"))
        })?;
        let start = parse_size(a)?;
        let end = parse_size(b)?;
        if start >= end {
            return Err(Error::invalid_param(format!("message range {s:?} is empty: its start is not below its end")));
        }
        Ok(MsgRange { start, end })
    }
}

fn fmt_size(f: &mut fmt::Formatter<'_>, v: u64) -> fmt::Result {
    if v == u64::MAX {
        f.write_str("inf")
    } else if v >= 1 << 30 && v.is_multiple_of(1 << 30) {
        write!(f, "{}G", v >> 30)
    } else if v >= 1 << 20 && v.is_multiple_of(1 << 20) {
        write!(f, "{}M", v >> 20)
    } else if v >= 1 << 10 && v.is_multiple_of(1 << 10) {
        write!(f, "{}K", v >> 10)
    } else {
        write!(f, "{v}")
    }
}

impl fmt::Display for MsgRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_size(f, self.start)?;
        f.write_str("-")?;
        fmt_size(f, self.end)
    }
}

/// A candidate's priority: higher wins; 0 disables; [`Score::INF`] beats everything.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Score(pub u32);

impl Score {
    /// Disabled.
    pub const DISABLED: Score = Score(0);
    /// Highest possible (`inf` in tune strings).
    pub const INF: Score = Score(u32::MAX);

    /// Parse a number or `inf`.
    pub fn parse(s: &str) -> Result<Score> {
        if s.eq_ignore_ascii_case("inf") {
            return Ok(Score::INF);
        }
        s.parse::<u32>().map(Score).map_err(|_| Error::invalid_param(format!("score {s:?} is not a number or inf")))
    }
}

impl fmt::Display for Score {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == Score::INF { f.write_str("inf") } else { write!(f, "{}", self.0) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_print() {
        let r = MsgRange::parse("0-4k").unwrap();
        assert_eq!(r, MsgRange::new(0, 4096));
        assert!(r.contains(4095) && !r.contains(4096));
        assert_eq!(r.to_string(), "0-4K");
        assert!(MsgRange::parse("4k-inf").unwrap().contains(u64::MAX));
        assert!(MsgRange::parse("8k-4k").is_err());
        assert!(MsgRange::parse("8k").is_err());
        assert_eq!(MsgRange::parse("1M-2M").unwrap().intersect(&r), None);
        assert_eq!(Score::parse("inf").unwrap(), Score::INF);
        assert!(Score::parse("high").is_err());
    }
}
