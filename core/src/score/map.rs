//! Score maps: for each (collective, memory type, message size), the ordered
//! candidates (TL, algorithm, score). Each TL team offers default entries;
//! tune tokens rewrite them; the team's map is the union over its TLs.

use std::fmt::Write as _;

use super::tune::{AlgSpec, TuneToken};
use super::{MsgRange, Score};
use crate::error::{Error, Result};
use crate::types::{CollType, CollTypeSet, MemType};

/// An algorithm's index in its TL's table for one collective.
pub type AlgId = u16;

/// One TL's offer: for `coll` on `mem` in `range`, algorithm `alg` with `score`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScoreEntry {
    /// Collective.
    pub coll: CollType,
    /// Memory type.
    pub mem: MemType,
    /// Message sizes.
    pub range: MsgRange,
    /// Priority (0 disables).
    pub score: Score,
    /// Algorithm id within the TL.
    pub alg: AlgId,
}

/// What a TL team tells the tuner about itself.
pub struct TuneTarget<'a> {
    /// TL name, for messages.
    pub tl: &'a str,
    /// Size of the team.
    pub team_size: usize,
    /// Score of entries added by a token that names an algorithm but no score.
    pub default_score: Score,
    /// Collectives the TL implements.
    pub colls: CollTypeSet,
    /// Memory types the TL handles.
    pub mems: &'a [MemType],
    /// Resolve `@name`/`@id` for a collective; `None` if the TL has no such algorithm.
    pub resolve: &'a dyn Fn(CollType, &AlgSpec) -> Option<AlgId>,
    /// The tokens may have been written for another library's TL (UCC's
    /// TL/UCP, read from `UCC_TL_UCP_TUNE`, or UCC's TL of the same name,
    /// which reads the same variable): a token this TL cannot apply (an
    /// algorithm it lacks, such as UCC's `@onesided`, which UCC's MPI test
    /// sets) is skipped with a warning, as UCC goes on past tune input it
    /// cannot use, instead of failing the team's creation.
    pub foreign: bool,
}

/// Rewrites (collectives × memory types × message ranges, summed over the
/// tokens that apply) that one TL's tune tokens may ask for. Each rewrite
/// reads every entry and may add a few, so the cost grows with the square
/// of their number: a tune string of thousands of ranges (a 1 MiB line of
/// the configuration file holds over 100,000) would hold team creation for
/// minutes. Far above what a tuned configuration needs (one collective, one
/// memory type and one range per token, for the team's size).
const MAX_REWRITES: usize = 4096;

/// Foreign tokens named in the warning that they were skipped.
const SKIPPED_NAMED: usize = 8;

/// Apply tune tokens, in order, to one TL team's entries.
pub fn apply_tune(
    mut entries: Vec<ScoreEntry>,
    tokens: &[TuneToken],
    target: &TuneTarget<'_>,
) -> Result<Vec<ScoreEntry>> {
    let mut rewrites = 0usize;
    // Foreign tokens skipped: the first few named, all counted (a hostile
    // string of 100 000 tokens does not make a 10 MB warning).
    let (mut skipped, mut skipped_count) = (Vec::new(), 0usize);
    for token in tokens.iter().filter(|t| target.team_size_matches(t)) {
        let colls = match token_colls(token, target) {
            Ok(colls) => colls,
            Err(e) if target.foreign => {
                if skipped.len() < SKIPPED_NAMED {
                    skipped.push(format!("{:?} ({})", token.text, e.context()));
                }
                skipped_count += 1;
                continue;
            }
            Err(e) => return Err(e),
        };
        for (coll, alg) in colls {
            let mems: &[MemType] = if token.mems.is_empty() { target.mems } else { &token.mems };
            rewrites = rewrites.saturating_add(mems.len().saturating_mul(token.ranges.len().max(1)));
            if rewrites > MAX_REWRITES {
                return Err(Error::invalid_param(format!(
                    "the tune tokens of TL {} ask for more than {MAX_REWRITES} rewrites of its score map \
                     (collectives × memory types × message ranges): too many tokens or ranges",
                    target.tl
                )));
            }
            for &mem in mems {
                for range in token.ranges_or_all() {
                    entries = rewrite(entries, coll, mem, range, token.score, alg, target.default_score);
                }
            }
        }
    }
    if skipped_count > 0 {
        let more = skipped_count - skipped.len();
        if more > 0 {
            skipped.push(format!("and {more} more"));
        }
        warn_skipped(&skipped, target);
    }
    Ok(entries)
}

/// The collectives `token` rewrites on `target`, each with the algorithm
/// it sets (if it names one); an error if the token names a collective the
/// TL does not implement or an algorithm it lacks, or matches nothing.
/// Nothing is rewritten before the whole token is known to apply.
fn token_colls(token: &TuneToken, target: &TuneTarget<'_>) -> Result<Vec<(CollType, Option<AlgId>)>> {
    let mut colls = Vec::new();
    for coll in token.colls_or(target.colls).iter() {
        if !target.colls.contains(coll) {
            if token.colls != CollTypeSet::EMPTY {
                return Err(Error::invalid_param(format!("TL {} does not implement {coll}", target.tl)));
            }
            continue;
        }
        let alg = match &token.alg {
            None => None,
            Some(spec) => match (target.resolve)(coll, spec) {
                Some(id) => Some(id),
                None if token.colls == CollTypeSet::EMPTY => continue,
                None => {
                    return Err(Error::invalid_param(format!("TL {} has no {coll} algorithm {spec}", target.tl)));
                }
            },
        };
        colls.push((coll, alg));
    }
    if colls.is_empty() {
        return Err(Error::invalid_param(format!(
            "tune token {:?} matches no collective of TL {} (algorithm not found?)",
            token.text, target.tl
        )));
    }
    Ok(colls)
}

/// Say, once a process for each TL, which foreign tune tokens were skipped
/// (every team of every rank reads the same string).
fn warn_skipped(skipped: &[String], target: &TuneTarget<'_>) {
    static WARNED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut warned = WARNED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if warned.iter().any(|tl| tl == target.tl) {
        return;
    }
    warned.push(target.tl.to_string());
    crate::log_warn!(
        "tune tokens TL {} cannot apply skipped (written for UCC's TL?): {}; it goes on without them, as UCC does",
        target.tl,
        skipped.join(", ")
    );
}

impl TuneTarget<'_> {
    fn team_size_matches(&self, t: &TuneToken) -> bool {
        t.applies_to_team_size(self.team_size)
    }
}

/// Set `score`/`alg` on every entry of (coll, mem) inside `range`, splitting
/// entries at the range's ends; with an algorithm, fill uncovered gaps too.
fn rewrite(
    entries: Vec<ScoreEntry>,
    coll: CollType,
    mem: MemType,
    range: MsgRange,
    score: Option<Score>,
    alg: Option<AlgId>,
    default_score: Score,
) -> Vec<ScoreEntry> {
    let mut out = Vec::with_capacity(entries.len() + 2);
    let mut covered: Vec<MsgRange> = Vec::new();
    for e in entries {
        let Some(inside) = (e.coll == coll && e.mem == mem).then(|| e.range.intersect(&range)).flatten() else {
            out.push(e);
            continue;
        };
        if e.range.start < inside.start {
            out.push(ScoreEntry { range: MsgRange::new(e.range.start, inside.start), ..e });
        }
        out.push(ScoreEntry { range: inside, score: score.unwrap_or(e.score), alg: alg.unwrap_or(e.alg), ..e });
        if inside.end < e.range.end {
            out.push(ScoreEntry { range: MsgRange::new(inside.end, e.range.end), ..e });
        }
        covered.push(inside);
    }
    if let Some(alg) = alg {
        covered.sort();
        let mut at = range.start;
        for c in covered.iter().chain(std::iter::once(&MsgRange::new(range.end, range.end))) {
            if c.start > at {
                out.push(ScoreEntry {
                    coll,
                    mem,
                    range: MsgRange::new(at, c.start),
                    score: score.unwrap_or(default_score),
                    alg,
                });
            }
            at = at.max(c.end);
        }
    }
    out
}

/// A candidate chosen from a score map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// Index of the TL team in the team's list.
    pub tl: usize,
    /// Algorithm id within that TL.
    pub alg: AlgId,
    /// Its score.
    pub score: Score,
    /// The range of the entry it came from.
    pub range: MsgRange,
}

/// A team's score map.
#[derive(Clone, Debug, Default)]
pub struct ScoreMap {
    /// `(tl index, entry)` for every enabled entry.
    entries: Vec<(usize, ScoreEntry)>,
}

impl ScoreMap {
    /// Add the (tuned) entries of TL `tl`; disabled entries are dropped.
    pub fn add(&mut self, tl: usize, entries: impl IntoIterator<Item = ScoreEntry>) {
        self.entries.extend(entries.into_iter().filter(|e| e.score > Score::DISABLED).map(|e| (tl, e)));
    }

    /// Candidates for a collective, best first (ties keep TL order).
    pub fn candidates(&self, coll: CollType, mem: MemType, msgsize: u64) -> Vec<Candidate> {
        let mut c: Vec<Candidate> = self
            .entries
            .iter()
            .filter(|(_, e)| e.coll == coll && e.mem == mem && e.range.contains(msgsize))
            .map(|&(tl, e)| Candidate { tl, alg: e.alg, score: e.score, range: e.range })
            .collect();
        c.sort_by(|a, b| b.score.cmp(&a.score).then(a.tl.cmp(&b.tl)));
        c
    }

    /// The sizes where some entry of (`coll`, `mem`) starts or ends, sorted
    /// and without repeats: between two neighbours the candidates do not
    /// change (every entry's range covers all of such a piece or none of it).
    pub fn cuts(&self, coll: CollType, mem: MemType) -> Vec<u64> {
        let mut cuts: Vec<u64> = self
            .entries
            .iter()
            .filter(|(_, e)| e.coll == coll && e.mem == mem)
            .flat_map(|(_, e)| [e.range.start, e.range.end])
            .collect();
        cuts.sort_unstable();
        cuts.dedup();
        cuts
    }

    /// A table like `ucc_info -s`: for each collective and memory type, the
    /// size ranges and their candidates, best first. `name(tl, coll, alg)`
    /// gives `"tl/alg"`.
    pub fn describe(&self, name: &dyn Fn(usize, CollType, AlgId) -> String) -> String {
        let mut out = String::new();
        for coll in CollType::ALL {
            for mem in MemType::CONCRETE {
                let cuts = self.cuts(coll, mem);
                if cuts.is_empty() {
                    continue;
                }
                let _ = writeln!(out, "{coll} {mem}:");
                for w in cuts.windows(2) {
                    let r = MsgRange::new(w[0], w[1]);
                    let cands = self.candidates(coll, mem, r.start);
                    if cands.is_empty() {
                        continue;
                    }
                    let list: Vec<String> =
                        cands.iter().map(|c| format!("{}:{}", name(c.tl, coll, c.alg), c.score)).collect();
                    let _ = writeln!(out, "  {r}: {}", list.join(" "));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::score::tune::parse_tune;

    fn e(coll: CollType, start: u64, end: u64, score: u32, alg: AlgId) -> ScoreEntry {
        ScoreEntry { coll, mem: MemType::Host, range: MsgRange::new(start, end), score: Score(score), alg }
    }

    fn tune(entries: Vec<ScoreEntry>, s: &str) -> Result<Vec<ScoreEntry>> {
        tune_as(entries, s, false)
    }

    fn tune_as(entries: Vec<ScoreEntry>, s: &str, foreign: bool) -> Result<Vec<ScoreEntry>> {
        let resolve = |_c: CollType, a: &AlgSpec| match a {
            AlgSpec::Name(n) if n == "knomial" => Some(0),
            AlgSpec::Name(n) if n == "ring" => Some(1),
            AlgSpec::Id(i) if *i < 2 => Some(*i),
            _ => None,
        };
        let target = TuneTarget {
            tl: "p2p",
            team_size: 4,
            default_score: Score(10),
            colls: [CollType::Allreduce, CollType::Bcast].into_iter().collect(),
            mems: &[MemType::Host],
            resolve: &resolve,
            foreign,
        };
        apply_tune(entries, &parse_tune(s)?, &target)
    }

    #[test]
    fn tune_splits_ranges_and_sets_alg() {
        let out = tune(vec![e(CollType::Allreduce, 0, u64::MAX, 10, 0)], "allreduce:4k-inf:@ring").unwrap();
        let mut m = ScoreMap::default();
        m.add(0, out);
        assert_eq!(m.candidates(CollType::Allreduce, MemType::Host, 100)[0].alg, 0);
        assert_eq!(m.candidates(CollType::Allreduce, MemType::Host, 4096)[0].alg, 1);
        assert_eq!(m.candidates(CollType::Allreduce, MemType::Host, 1 << 40)[0].alg, 1);
    }

    #[test]
    fn score_zero_disables_and_alg_fills_gaps() {
        let out = tune(vec![e(CollType::Allreduce, 0, 1024, 10, 0)], "allreduce:0-inf:0").unwrap();
        let mut m = ScoreMap::default();
        m.add(0, out);
        assert!(m.candidates(CollType::Allreduce, MemType::Host, 10).is_empty());
        let out = tune(vec![e(CollType::Allreduce, 0, 1024, 10, 0)], "allreduce:0-2k:@ring:50").unwrap();
        let mut m = ScoreMap::default();
        m.add(0, out);
        let c = m.candidates(CollType::Allreduce, MemType::Host, 1500);
        assert_eq!((c[0].alg, c[0].score), (1, Score(50)));
        assert!(m.candidates(CollType::Allreduce, MemType::Host, 4096).is_empty());
    }

    #[test]
    fn team_size_qualifier_and_errors() {
        let base = vec![e(CollType::Bcast, 0, u64::MAX, 10, 0)];
        assert_eq!(tune(base.clone(), "bcast:[5-8]:@ring").unwrap(), base);
        assert!(tune(base.clone(), "bcast:@bruck").unwrap_err().to_string().contains("bruck"));
        assert!(tune(base, "alltoall:@ring").is_err());
    }

    /// A foreign string's token that does not apply is skipped whole (no
    /// collective of it rewritten), and the tokens around it apply.
    #[test]
    fn foreign_tokens_that_do_not_apply_are_skipped_whole() {
        let base = vec![e(CollType::Allreduce, 0, u64::MAX, 10, 0), e(CollType::Bcast, 0, u64::MAX, 10, 0)];
        let s = "allreduce:@ring:20#allreduce,bcast:@onesided#alltoall:@ring#bcast:0-1k:30";
        assert!(tune(base.clone(), s).is_err(), "strict: the second token fails");
        let out = tune_as(base, s, true).unwrap();
        let mut m = ScoreMap::default();
        m.add(0, out);
        let a = m.candidates(CollType::Allreduce, MemType::Host, 100)[0];
        assert_eq!((a.alg, a.score), (1, Score(20)), "the first token applied, the second not at all");
        assert_eq!(m.candidates(CollType::Bcast, MemType::Host, 100)[0].score, Score(30));
        assert_eq!(m.candidates(CollType::Bcast, MemType::Host, 4096)[0].score, Score(10));
    }

    #[test]
    fn thousands_of_ranges_are_refused_not_ground_through() {
        // 8000 ranges for two collectives: 16000 rewrites, each reading every
        // entry made so far (quadratic; minutes for a 1 MiB config line).
        let ranges: Vec<String> = (0..8000u64).map(|i| format!("{}-{}", 2 * i, 2 * i + 1)).collect();
        let err = tune(vec![], &format!("allreduce,bcast:{}:@ring", ranges.join(","))).unwrap_err().to_string();
        assert!(err.contains("p2p") && err.contains(&MAX_REWRITES.to_string()), "{err}");
        // What a tuned configuration holds is far below the limit.
        let pins: Vec<String> =
            (0..100u64).map(|i| format!("allreduce:{}-{}:host:[4]:inf:@ring", i << 10, (i + 1) << 10)).collect();
        assert_eq!(tune(vec![e(CollType::Allreduce, 0, u64::MAX, 10, 0)], &pins.join("#")).unwrap().len(), 101);
    }

    #[test]
    fn higher_score_first_across_tls() {
        let mut m = ScoreMap::default();
        m.add(0, [e(CollType::Bcast, 0, u64::MAX, 10, 0)]);
        m.add(1, [e(CollType::Bcast, 0, 8192, 50, 3)]);
        let c = m.candidates(CollType::Bcast, MemType::Host, 16);
        assert_eq!((c[0].tl, c[1].tl), (1, 0));
        assert_eq!(m.candidates(CollType::Bcast, MemType::Host, 8192).len(), 1);
        let text = m.describe(&|tl, _, alg| format!("tl{tl}/{alg}"));
        assert!(text.contains("0-8K: tl1/3:50 tl0/0:10"), "{text}");
    }
}
