//! From measurements to tune tokens: per message size the fastest candidate
//! (median over repetitions), kept only where it beats the library's own
//! choice by a margin, merged into size ranges.

use std::collections::BTreeMap;

use ferrocoll::CollType;

/// One algorithm of one TL, as the perftest's Algorithm column names it (`shm/rsag`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Candidate {
    /// TL name (`shm`, `p2p`).
    pub tl: String,
    /// Algorithm name (`rsag`).
    pub alg: String,
}

impl Candidate {
    /// `tl/alg`, as the perftest prints it.
    pub fn label(&self) -> String {
        format!("{}/{}", self.tl, self.alg)
    }
}

/// The size the library selects on (UCC's `ucc_coll_args_msgsize`) for a
/// perftest row of `size_bytes` (each rank's source) on `ranks` ranks.
pub fn selection_bytes(coll: CollType, ranks: usize, size_bytes: u64) -> u64 {
    let n = ranks.max(1) as u64;
    match coll {
        // The destination holds every rank's block.
        CollType::Allgather => size_bytes.saturating_mul(n),
        // The destination is one block of the source.
        CollType::ReduceScatter => size_bytes / n,
        _ => size_bytes,
    }
}

/// Times (µs) of each run at each perftest size: `times[size_bytes]`.
pub type Times = BTreeMap<u64, Vec<f64>>;

/// The median of `v` (None when empty).
pub fn median(v: &[f64]) -> Option<f64> {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if s.is_empty() {
        return None;
    }
    s.sort_by(f64::total_cmp);
    let m = s.len() / 2;
    Some(if s.len() % 2 == 1 { s[m] } else { (s[m - 1] + s[m]) / 2.0 })
}

/// The verdict at one perftest size.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    /// Perftest size (each rank's source bytes).
    pub size_bytes: u64,
    /// What the library picked untuned, and its median time.
    pub default: Option<(String, f64)>,
    /// The fastest candidate and its median time.
    pub best: Option<(Candidate, f64)>,
    /// Whether the tuned file pins `best` here: it beats the default by more than the margin.
    pub pinned: bool,
}

/// Verdicts for every size measured. `default` holds the untuned runs'
/// times and the algorithm the library picked at each size; `measured`
/// each candidate's times (only rows where the candidate actually ran).
/// `margin` is the fraction (0.1 = 10 %) by which a candidate must beat the
/// default to be pinned.
pub fn verdicts(
    default: &BTreeMap<u64, (String, Vec<f64>)>,
    measured: &BTreeMap<Candidate, Times>,
    margin: f64,
) -> Vec<Verdict> {
    let mut sizes: Vec<u64> = default.keys().copied().collect();
    sizes.extend(measured.values().flat_map(|t| t.keys().copied()));
    sizes.sort_unstable();
    sizes.dedup();
    sizes
        .into_iter()
        .map(|size| {
            let def = default.get(&size).and_then(|(alg, t)| median(t).map(|m| (alg.clone(), m)));
            let best = measured
                .iter()
                .filter_map(|(c, t)| t.get(&size).and_then(|v| median(v)).map(|m| (c.clone(), m)))
                .min_by(|a, b| a.1.total_cmp(&b.1));
            let pinned = match (&def, &best) {
                (Some((def_alg, def_t)), Some((c, t))) => c.label() != *def_alg && *t < def_t * (1.0 - margin),
                (None, Some(_)) => false,
                _ => false,
            };
            Verdict { size_bytes: size, default: def, best, pinned }
        })
        .collect()
}

/// A pinned size range: `[start, end)` in selection bytes, and its candidate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pin {
    /// First selection size of the range.
    pub start: u64,
    /// One past the last (None: no end).
    pub end: Option<u64>,
    /// The candidate pinned there.
    pub candidate: Candidate,
}

/// Pinned ranges in selection bytes. Each measured size stands for the sizes
/// from it up to the next measured size (the last: up to twice itself, so a
/// pin never reaches sizes far beyond what was measured); consecutive sizes
/// pinned to the same candidate merge.
pub fn pins(coll: CollType, ranks: usize, verdicts: &[Verdict]) -> Vec<Pin> {
    let mut out: Vec<Pin> = Vec::new();
    for (i, v) in verdicts.iter().enumerate() {
        let (true, Some((c, _))) = (v.pinned, &v.best) else { continue };
        let start = selection_bytes(coll, ranks, v.size_bytes);
        let end = match verdicts.get(i + 1) {
            Some(next) => selection_bytes(coll, ranks, next.size_bytes),
            None => start.saturating_mul(2).max(start + 1),
        };
        match out.last_mut() {
            Some(last) if last.end == Some(start) && last.candidate == *c => last.end = Some(end),
            _ => out.push(Pin { start, end: Some(end), candidate: c.clone() }),
        }
    }
    out
}

/// The tune tokens of `pins` for TL `tl` (UCC grammar:
/// `coll:start-end:host:[ranks]:inf:@alg`), in order.
pub fn tokens(coll: CollType, ranks: usize, tl: &str, pins: &[Pin]) -> Vec<String> {
    pins.iter()
        .filter(|p| p.candidate.tl == tl)
        .map(|p| {
            let end = p.end.map_or_else(|| "inf".to_string(), |e| e.to_string());
            format!("{coll}:{}-{end}:host:[{ranks}]:inf:@{}", p.start, p.candidate.alg)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(tl: &str, alg: &str) -> Candidate {
        Candidate { tl: tl.into(), alg: alg.into() }
    }

    #[test]
    fn selection_sizes_follow_ucc_msgsize() {
        assert_eq!(selection_bytes(CollType::Allreduce, 4, 1024), 1024);
        assert_eq!(selection_bytes(CollType::Allgather, 4, 1024), 4096);
        assert_eq!(selection_bytes(CollType::ReduceScatter, 4, 1024), 256);
        assert_eq!(selection_bytes(CollType::Allgather, 2, u64::MAX), u64::MAX, "saturates");
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[f64::NAN, 1.0]), Some(1.0));
    }

    /// Default: onestep at 8 and 16 bytes, rsag at 32. Candidate p2p/ring is
    /// much faster at 16 and 32, barely faster at 8.
    fn case() -> Vec<Verdict> {
        let default: BTreeMap<u64, (String, Vec<f64>)> = [
            (8, ("shm/onestep".to_string(), vec![1.0, 1.0, 1.0])),
            (16, ("shm/onestep".to_string(), vec![2.0, 2.1, 1.9])),
            (32, ("shm/rsag".to_string(), vec![4.0, 4.0, 4.0])),
        ]
        .into();
        let mut measured = BTreeMap::new();
        measured.insert(cand("shm", "onestep"), Times::from([(8, vec![1.0]), (16, vec![2.0]), (32, vec![5.0])]));
        measured.insert(cand("p2p", "ring"), Times::from([(8, vec![0.97]), (16, vec![1.0]), (32, vec![2.0])]));
        verdicts(&default, &measured, 0.1)
    }

    #[test]
    fn only_clear_wins_over_the_default_are_pinned() {
        let v = case();
        assert_eq!(v.len(), 3);
        assert!(!v[0].pinned, "3 % faster is within the margin: {v:?}");
        assert!(v[1].pinned && v[2].pinned, "{v:?}");
        assert_eq!(v[1].best.as_ref().unwrap().0, cand("p2p", "ring"));
        assert_eq!(v[2].default.as_ref().unwrap(), &("shm/rsag".to_string(), 4.0));
    }

    #[test]
    fn the_default_itself_is_never_pinned() {
        let default: BTreeMap<u64, (String, Vec<f64>)> = [(8, ("shm/onestep".to_string(), vec![9.0]))].into();
        let measured = BTreeMap::from([(cand("shm", "onestep"), Times::from([(8, vec![1.0])]))]);
        assert!(!verdicts(&default, &measured, 0.1)[0].pinned, "same algorithm: only noise differs");
    }

    #[test]
    fn pins_merge_and_become_tokens() {
        let v = case();
        let p = pins(CollType::Allreduce, 2, &v);
        assert_eq!(p, [Pin { start: 16, end: Some(64), candidate: cand("p2p", "ring") }]);
        assert_eq!(tokens(CollType::Allreduce, 2, "p2p", &p), ["allreduce:16-64:host:[2]:inf:@ring"]);
        assert!(tokens(CollType::Allreduce, 2, "shm", &p).is_empty());
        // allgather selects on the whole destination: ranges scale by the team size.
        let p = pins(CollType::Allgather, 4, &v);
        assert_eq!((p[0].start, p[0].end), (64, Some(256)));
    }

    #[test]
    fn tokens_parse_in_the_library_grammar() {
        let p = pins(CollType::Allreduce, 2, &case());
        let text = tokens(CollType::Allreduce, 2, "p2p", &p).join("#");
        let parsed = ferrocoll::core::score::parse_tune(&text).unwrap();
        assert_eq!(parsed.len(), 1);
        assert!(parsed[0].applies_to_team_size(2) && !parsed[0].applies_to_team_size(3));
    }
}
