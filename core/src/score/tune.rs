//! UCC's tune strings: `UCC_TL_<NAME>_TUNE=token#token#...`, each token
//! `coll:msg_range:mem_type:[team_size]:score:@alg` with every qualifier
//! optional and recognised by its shape:
//!
//! | field        | shape                         | example             |
//! |--------------|-------------------------------|---------------------|
//! | collectives  | names joined by `,`           | `allreduce,bcast`   |
//! | sizes        | `start-end` joined by `,`     | `0-4k,1M-inf`       |
//! | memory types | names joined by `,`           | `host,cuda`         |
//! | team sizes   | `[lo-hi]` or `[n]`, joined by `,` | `[2-8,16]`      |
//! | score        | a number or `inf` (0 disables)| `100`               |
//! | algorithm    | `@name` or `@id`              | `@ring`             |
//!
//! A token without collectives applies to every collective, without sizes to
//! every size, without memory types to every memory type.

use std::fmt;

use super::{MsgRange, Score};
use crate::error::{Error, Result};
use crate::types::{CollType, CollTypeSet, MemType};

/// An algorithm named in a tune token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AlgSpec {
    /// `@ring`
    Name(String),
    /// `@2`
    Id(u16),
}

impl fmt::Display for AlgSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AlgSpec::Name(n) => write!(f, "@{n}"),
            AlgSpec::Id(i) => write!(f, "@{i}"),
        }
    }
}

/// One `#`-separated token.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TuneToken {
    /// Collectives (empty: all).
    pub colls: CollTypeSet,
    /// Message ranges (empty: all sizes).
    pub ranges: Vec<MsgRange>,
    /// Memory types (empty: all).
    pub mems: Vec<MemType>,
    /// Inclusive team-size ranges (empty: every size).
    pub team_sizes: Vec<(u64, u64)>,
    /// New score.
    pub score: Option<Score>,
    /// Algorithm to use.
    pub alg: Option<AlgSpec>,
    /// The token as written, for messages.
    pub text: String,
}

impl TuneToken {
    /// Whether the token applies to a team of `size` ranks.
    pub fn applies_to_team_size(&self, size: usize) -> bool {
        self.team_sizes.is_empty() || self.team_sizes.iter().any(|&(lo, hi)| (lo..=hi).contains(&(size as u64)))
    }

    /// The collectives it names, or `all` when it names none.
    pub fn colls_or(&self, all: CollTypeSet) -> CollTypeSet {
        if self.colls == CollTypeSet::EMPTY { all } else { self.colls }
    }

    /// The ranges it names, or every size.
    pub fn ranges_or_all(&self) -> Vec<MsgRange> {
        if self.ranges.is_empty() { vec![MsgRange::ALL] } else { self.ranges.clone() }
    }
}

/// Parse a whole tune string (tokens joined by `#`; empty tokens are ignored).
pub fn parse_tune(s: &str) -> Result<Vec<TuneToken>> {
    s.split('#')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| parse_token(t).map_err(|e| e.prefixed(format!("tune token {t:?}"))))
        .collect()
}

fn parse_token(token: &str) -> Result<TuneToken> {
    let mut t = TuneToken { text: token.to_string(), ..TuneToken::default() };
    for field in token.split(':').map(str::trim) {
        if field.is_empty() {
            continue;
        }
        if let Some(alg) = field.strip_prefix('@') {
            set_once(&mut t.alg, parse_alg(alg)?, "algorithm")?;
        } else if let Some(inner) = field.strip_prefix('[') {
            let inner = inner
                .strip_suffix(']')
                .ok_or_else(|| Error::invalid_param(format!("team size {field:?} lacks its closing ']'")))?;
            if !t.team_sizes.is_empty() {
                return Err(Error::invalid_param("team sizes given twice"));
            }
            t.team_sizes = inner.split(',').map(parse_team_size).collect::<Result<_>>()?;
        } else if let Ok(score) = Score::parse(field) {
            set_once(&mut t.score, score, "score")?;
        } else if let Some(colls) = parse_all(field, |s| s.parse::<CollType>()) {
            if t.colls != CollTypeSet::EMPTY {
                return Err(Error::invalid_param("collectives given twice"));
            }
            t.colls = colls.into_iter().collect();
        } else if let Some(mems) = parse_all(field, |s| s.parse::<MemType>()) {
            if !t.mems.is_empty() {
                return Err(Error::invalid_param("memory types given twice"));
            }
            t.mems = mems;
        } else if let Some(ranges) = parse_all(field, MsgRange::parse) {
            if !t.ranges.is_empty() {
                return Err(Error::invalid_param("message ranges given twice"));
            }
            t.ranges = ranges;
        } else {
            return Err(Error::invalid_param(format!(
                "field {field:?} is none of: collective names, message ranges (0-4k), memory types, \
                 [team sizes], a score, @algorithm"
            )));
        }
    }
    Ok(t)
}

fn set_once<T>(slot: &mut Option<T>, v: T, what: &str) -> Result<()> {
    if slot.is_some() {
        return Err(Error::invalid_param(format!("{what} given twice")));
    }
    *slot = Some(v);
    Ok(())
}

/// `Some` when every comma-separated item parses.
fn parse_all<T>(field: &str, f: impl Fn(&str) -> Result<T>) -> Option<Vec<T>> {
    field.split(',').map(|s| f(s.trim()).ok()).collect()
}

fn parse_alg(s: &str) -> Result<AlgSpec> {
    if s.is_empty() {
        return Err(Error::invalid_param("'@' is not followed by an algorithm name or id"));
    }
    Ok(match s.parse::<u16>() {
        Ok(id) => AlgSpec::Id(id),
        Err(_) => AlgSpec::Name(s.to_ascii_lowercase()),
    })
}

fn parse_team_size(s: &str) -> Result<(u64, u64)> {
    let num = |v: &str| {
        let v = v.trim();
        if v.eq_ignore_ascii_case("inf") {
            return Ok(u64::MAX);
        }
        v.parse::<u64>().map_err(|_| Error::invalid_param(format!("team size {v:?} is not a number")))
    };
    let (lo, hi) = match s.split_once('-') {
        Some((a, b)) => (num(a)?, num(b)?),
        None => (num(s)?, num(s)?),
    };
    if lo > hi {
        return Err(Error::invalid_param(format!("team size range [{s}] is empty")));
    }
    Ok((lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_token() {
        let t = parse_tune("allreduce,bcast:0-4k,1M-inf:host:[2-8]:100:@ring").unwrap();
        assert_eq!(t.len(), 1);
        let t = &t[0];
        assert!(t.colls.contains(CollType::Allreduce) && t.colls.contains(CollType::Bcast));
        assert_eq!(t.ranges, vec![MsgRange::new(0, 4096), MsgRange::new(1 << 20, u64::MAX)]);
        assert_eq!(t.mems, vec![MemType::Host]);
        assert_eq!(t.team_sizes, vec![(2, 8)]);
        assert_eq!(t.score, Some(Score(100)));
        assert_eq!(t.alg, Some(AlgSpec::Name("ring".into())));
        assert!(t.applies_to_team_size(8) && !t.applies_to_team_size(9));
    }

    #[test]
    fn optional_fields_and_multiple_tokens() {
        let t = parse_tune("allreduce:@1#bcast:0#inf").unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(t[0].alg, Some(AlgSpec::Id(1)));
        assert_eq!(t[1].score, Some(Score(0)));
        assert_eq!(t[2].colls, CollTypeSet::EMPTY);
        assert_eq!(t[2].score, Some(Score::INF));
    }

    #[test]
    fn errors_name_the_token_and_field() {
        let e = parse_tune("allreduce:0-4k#allreduc:@ring").unwrap_err().to_string();
        assert!(e.contains("allreduc:@ring") && e.contains("\"allreduc\""), "{e}");
        assert!(parse_tune("allreduce:1:2").is_err());
        assert!(parse_tune("allreduce:[4-2]").is_err());
        assert!(parse_tune("allreduce:@").is_err());
        let t = parse_tune("bcast:[2,5-inf]:@0").unwrap();
        assert!(t[0].applies_to_team_size(2) && !t[0].applies_to_team_size(3) && t[0].applies_to_team_size(99));
    }
}

/// Never-panic property of the tune-string parser (`UCC_TL_*_TUNE`, outside input).
#[cfg(test)]
mod parser_props {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn tune_strings_never_panic(
            any in "\\PC{0,40}",
            shaped in "([a-z_]{0,10}|@[a-z_0-9]{0,8}|[0-9]{0,22}[kKmMgG]?(-[0-9]{0,22}[kKmMgG]?)?|inf|\\^[0-9]{0,3}|[0-9-]{0,5}|:|#){0,8}",
        ) {
            for s in [any.as_str(), shaped.as_str()] {
                if let Ok(tokens) = parse_tune(s) {
                    for t in &tokens {
                        let _ = t.ranges_or_all();
                        let _ = t.applies_to_team_size(usize::MAX);
                    }
                }
            }
        }
    }
}
