//! `ferrocoll-tune`'s command line.

use std::path::PathBuf;
use std::str::FromStr;

use ferrocoll::CollType;

use crate::perftest::units::parse_count;

/// The usage text.
pub const USAGE: &str = "\
usage: ferrocoll-tune [options]
Measures, on this machine, every algorithm of every TL for each collective
and team size (processes on this host, through ferrocoll-perftest --np),
and writes a configuration file that pins the algorithms that beat the
library's own choice. Load it with UCC_CONFIG_FILE=FILE (or copy it to
$HOME/ucc.conf); variables set in the environment win over it.
  --np LIST         team sizes, comma-separated (default 2)
  -c LIST           collectives (default allreduce,bcast,reduce,allgather,
                    reduce_scatter,alltoall)
  -b, -e, -f        perftest's min count, max count and factor, float32
                    elements (default 2, 4m, 4: 8 B to 16 MiB)
  -n ITERS          timed iterations per size (default: the perftest's; 100 when only -w is given)
  -w WARMUPS        warm-up iterations per size (default: the perftest's; 10 when only -n is given)
  -r REPS           sweeps of each candidate, interleaved; medians are compared (default 3)
  --margin PCT      how much faster than the default choice a candidate
                    must be to be pinned (default 10)
  --stream-b, --stream-e COUNT
                    the sizes (float32 elements, factor 2) at which bcast
                    and allgather are run streaming their destinations past
                    the cache and not, on the first team size, to set
                    UCC_TL_SHM_STREAM_THRESHOLD (default 256k to 16m:
                    1 to 64 MiB; only when -c has bcast or allgather)
  --no-stream       do not measure streaming
  -o FILE           the file written (default ferrocoll-tune.conf)
  --perftest PATH   the perftest binary (default: beside this program)
  -h, --help        this text";

/// Parsed options.
#[derive(Clone, Debug)]
pub struct Options {
    /// Team sizes.
    pub ranks: Vec<usize>,
    /// Collectives.
    pub colls: Vec<CollType>,
    /// `-b`, `-e`, `-f` as given (checked to parse).
    pub counts: (String, String, String),
    /// `-n`, `-w`.
    pub iters: Option<(u64, u64)>,
    /// Repetitions.
    pub reps: usize,
    /// Fraction by which a pin must beat the default.
    pub margin: f64,
    /// Output file.
    pub output: PathBuf,
    /// Perftest binary (None: beside this program).
    pub perftest: Option<PathBuf>,
    /// `-b` and `-e` of the streaming sweeps (None: `--no-stream`).
    pub stream: Option<(String, String)>,
}

const DEFAULT_COLLS: [CollType; 6] = [
    CollType::Allreduce,
    CollType::Bcast,
    CollType::Reduce,
    CollType::Allgather,
    CollType::ReduceScatter,
    CollType::Alltoall,
];

/// Parse the arguments (without the program name); `Ok(None)` for `--help`.
pub fn parse(args: &[String]) -> Result<Option<Options>, String> {
    let mut o = Options {
        ranks: vec![2],
        colls: DEFAULT_COLLS.to_vec(),
        counts: ("2".into(), "4m".into(), "4".into()),
        iters: None,
        reps: 3,
        margin: 0.10,
        output: PathBuf::from("ferrocoll-tune.conf"),
        perftest: None,
        stream: Some(("256k".into(), "16m".into())),
    };
    let (mut n, mut w) = (None, None);
    let (mut stream_b, mut stream_e, mut no_stream) = (None, None, false);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().cloned().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "-h" | "--help" => return Ok(None),
            "--np" => o.ranks = list(&value()?, "--np", |r: &usize| (2..=1024).contains(r))?,
            "-c" => o.colls = list(&value()?, "-c", |_: &CollType| true)?,
            "-b" => o.counts.0 = count(&value()?, "-b")?,
            "-e" => o.counts.1 = count(&value()?, "-e")?,
            "-f" => o.counts.2 = count(&value()?, "-f")?,
            "-n" => n = Some(number(&value()?, "-n", 1)?),
            "-w" => w = Some(number(&value()?, "-w", 0)?),
            "-r" => o.reps = number(&value()?, "-r", 1)? as usize,
            "--margin" => {
                let v = value()?;
                let pct = v.parse::<f64>().ok().filter(|p| (0.0..100.0).contains(p));
                o.margin = pct.ok_or(format!("--margin {v:?} is not a percentage in [0, 100)"))? / 100.0;
            }
            "-o" => o.output = PathBuf::from(value()?),
            "--perftest" => o.perftest = Some(PathBuf::from(value()?)),
            "--stream-b" => stream_b = Some(count(&value()?, "--stream-b")?),
            "--stream-e" => stream_e = Some(count(&value()?, "--stream-e")?),
            "--no-stream" => no_stream = true,
            other => return Err(format!("unknown option {other:?} (see --help)")),
        }
    }
    let min = parse_count(&o.counts.0).unwrap_or(0);
    let max = parse_count(&o.counts.1).unwrap_or(0);
    if min > max {
        return Err(format!("-b {} is larger than -e {}", o.counts.0, o.counts.1));
    }
    if parse_count(&o.counts.2).unwrap_or(0) < 2 {
        return Err(format!("-f {} must be at least 2", o.counts.2));
    }
    o.stream = match (no_stream, o.stream.take()) {
        (true, _) | (_, None) => None,
        (false, Some((b, e))) => {
            let (b, e) = (stream_b.unwrap_or(b), stream_e.unwrap_or(e));
            if parse_count(&b) > parse_count(&e) {
                return Err(format!("--stream-b {b} is larger than --stream-e {e}"));
            }
            Some((b, e))
        }
    };
    if n.is_some() || w.is_some() {
        o.iters = Some((n.unwrap_or(100), w.unwrap_or(10)));
    }
    Ok(Some(o))
}

fn list<T: FromStr>(v: &str, opt: &str, ok: impl Fn(&T) -> bool) -> Result<Vec<T>, String> {
    let items: Option<Vec<T>> = v.split(',').map(|s| s.trim().parse::<T>().ok().filter(&ok)).collect();
    match items {
        Some(items) if !items.is_empty() => Ok(items),
        _ => Err(format!("{opt} {v:?}: not a comma-separated list of valid values")),
    }
}

fn count(v: &str, opt: &str) -> Result<String, String> {
    parse_count(v).filter(|&c| c > 0).map(|_| v.to_string()).ok_or(format!("{opt} {v:?} is not a positive count"))
}

fn number(v: &str, opt: &str, min: u64) -> Result<u64, String> {
    v.parse::<u64>().ok().filter(|&x| x >= min).ok_or(format!("{opt} {v:?} is not a whole number ≥ {min}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Option<Options>, String> {
        parse(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn defaults_and_values() {
        let o = p(&[]).unwrap().unwrap();
        assert_eq!((o.ranks.clone(), o.colls.len(), o.reps), (vec![2], 6, 3));
        let o = p(&["--np", "2,4", "-c", "allreduce,bcast", "-b", "1k", "-e", "1m", "-n", "50", "--margin", "5"])
            .unwrap()
            .unwrap();
        assert_eq!(o.ranks, [2, 4]);
        assert_eq!(o.colls, [CollType::Allreduce, CollType::Bcast]);
        assert_eq!(o.iters, Some((50, 10)));
        assert!((o.margin - 0.05).abs() < 1e-12);
        assert!(p(&["--help"]).unwrap().is_none());
        assert_eq!(o.stream, Some(("256k".into(), "16m".into())));
        let o = p(&["--stream-b", "1k", "--stream-e", "4k"]).unwrap().unwrap();
        assert_eq!(o.stream, Some(("1k".into(), "4k".into())));
        assert_eq!(p(&["--no-stream", "--stream-e", "4k"]).unwrap().unwrap().stream, None);
    }

    #[test]
    fn bad_values_are_named() {
        for (args, needle) in [
            (&["--np", "1"][..], "--np"),
            (&["-c", "allreduce,nope"][..], "nope"),
            (&["-b", "0"][..], "-b"),
            (&["-b", "4m", "-e", "2"][..], "larger"),
            (&["-f", "1"][..], "-f"),
            (&["-r", "0"][..], "-r"),
            (&["--margin", "100"][..], "--margin"),
            (&["-n"][..], "needs a value"),
            (&["--bogus"][..], "--bogus"),
            (&["--stream-b", "0"][..], "--stream-b"),
            (&["--stream-b", "16m", "--stream-e", "1m"][..], "--stream-b 16m is larger"),
        ] {
            let e = p(args).unwrap_err();
            assert!(e.contains(needle), "{args:?}: {e}");
        }
    }
}
