//! `ferrocoll-perftest`'s command line: ucc_perftest's options (getopt
//! style: `-c allreduce`, `-callreduce`, `-iF`) plus ferrocoll's long ones.

use std::path::PathBuf;

use ferrocoll::{CollType, DataType, MemType, ReduceOp};

use super::units::parse_count;

/// The usage text.
pub const USAGE: &str = "\
usage: ferrocoll-perftest [options]
  -c <collective>   allreduce (default), bcast, reduce, allgather, allgatherv,
                    alltoall, alltoallv, reduce_scatter, reduce_scatterv, gather,
                    gatherv, scatter, scatterv, barrier, fanin, fanout
  -b <count>        min count (default 128; suffixes k, m, g: powers of 1024)
  -e <count>        max count (default 128)
                    The count is ucc_perftest's: elements per rank and per peer
                    block (allgather: each rank's block, alltoall and
                    reduce_scatter: the block for each peer). The table's Count
                    is each rank's source count, as ucc_perftest prints it.
  -f <factor>       multiplication factor between counts (default 2)
  -d <datatype>     int8..int128, uint8..uint128, float16, bfloat16, float32
                    (default), float64, float128, float32_complex,
                    float64_complex, float128_complex, float8_e4m3, float8_e5m2
  -o <op>           sum (default), prod, max, min, land, lor, lxor, band, bor,
                    bxor, maxloc, minloc, avg
  -m <memtype>      host (default), cuda or cuda-mng (device buffers; inputs and checks staged outside the timing)
  -n <iterations>   timed iterations (default 1000, 200 from 64 KiB up: the
                    largest buffer of any rank, so every rank runs as many)
  -w <warmups>      warm-up iterations (default 100, 20 from 64 KiB up)
  -i                in place
  -p                persistent (init once, post every iteration)
  -r <root>         root of rooted collectives (default 0)
  -F                full print: bus bandwidth from the avg, min and max times
  -T                triggered post (not supported)
  --np N            start N processes of this program through ferrocoll-run
  --emulate-hosts K with --np: spread the ranks over K emulated hosts
  --emulate-switches J with --emulate-hosts: put the hosts under J emulated switches
  --bind-to WHAT    with --np: none, core or numa (default: core when the
                    ranks fit this process's CPUs, else none; see ferrocoll-run)
  --threads N       run N ranks as threads of this process
  --check           verify the results of every iteration
  --per-rank        under each size, each rank's mean and p10/p50/p90/p99/max
                    times (also in --json)
  --csv FILE        write the results as CSV
  --json FILE       write the results as JSON
  -h, --help        this text
Under a launcher (RANK/WORLD_SIZE, OMPI_COMM_WORLD_*, SLURM_*) each process
is one rank (TCP bootstrap); only rank 0 prints.";

/// Everything the command line sets.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// Collective.
    pub coll: CollType,
    /// First block count.
    pub min: u64,
    /// Last block count.
    pub max: u64,
    /// Factor between counts.
    pub factor: u64,
    /// Datatype.
    pub dtype: DataType,
    /// Reduction.
    pub op: ReduceOp,
    /// Memory type.
    pub mem: MemType,
    /// Timed iterations (`None`: ucc_perftest's defaults by size).
    pub iters: Option<usize>,
    /// Warm-up iterations.
    pub warmups: Option<usize>,
    /// In place.
    pub in_place: bool,
    /// Persistent requests.
    pub persistent: bool,
    /// Root.
    pub root: usize,
    /// Full print.
    pub full: bool,
    /// Launch this many processes.
    pub np: Option<usize>,
    /// Emulated hosts for `--np`.
    pub emulate_hosts: Option<usize>,
    /// Emulated switch groups over the emulated hosts.
    pub emulate_switches: Option<usize>,
    /// `--bind-to` for `--np` (`None`: the launcher's default).
    pub bind_to: Option<crate::run::bind::BindTo>,
    /// Run this many thread ranks.
    pub threads: Option<usize>,
    /// Verify results.
    pub check: bool,
    /// Print each rank's spread of times.
    pub per_rank: bool,
    /// CSV output.
    pub csv: Option<PathBuf>,
    /// JSON output.
    pub json: Option<PathBuf>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            coll: CollType::Allreduce,
            min: 128,
            max: 128,
            factor: 2,
            dtype: DataType::Float32,
            op: ReduceOp::Sum,
            mem: MemType::Host,
            iters: None,
            warmups: None,
            in_place: false,
            persistent: false,
            root: 0,
            full: false,
            np: None,
            emulate_hosts: None,
            emulate_switches: None,
            bind_to: None,
            threads: None,
            check: false,
            per_rank: false,
            csv: None,
            json: None,
        }
    }
}

/// Why the command line was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OptError {
    /// Malformed: exit code 2, with the usage.
    Usage(String),
    /// Well-formed but not supported (`-m rocm`, `-T`): exit code 1.
    NotSupported(String),
}

/// What the command line asks for.
#[derive(Clone, Debug, PartialEq)]
pub enum Parsed {
    /// Print the usage.
    Help,
    /// Run.
    Run(Options),
}

fn usage(msg: impl Into<String>) -> OptError {
    OptError::Usage(msg.into())
}

fn number(opt: &str, v: &str) -> Result<usize, OptError> {
    v.trim().parse::<usize>().map_err(|_| usage(format!("{opt} {v:?}: expected a whole number")))
}

/// Short options that take a value.
const WITH_VALUE: &str = "cbefdomnwr";
/// Short flags.
const FLAGS: &str = "ipFTh";

/// Parse the arguments (without the program name).
pub fn parse(args: &[String]) -> Result<Parsed, OptError> {
    let mut o = Options::default();
    let mut triggered = false;
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if let Some(long) = a.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (long, None),
            };
            let opt = format!("--{name}");
            let mut value = || -> Result<String, OptError> {
                if let Some(v) = inline.clone() {
                    return Ok(v);
                }
                i += 1;
                args.get(i).cloned().ok_or_else(|| usage(format!("option {opt} needs a value")))
            };
            match name {
                "help" => return Ok(Parsed::Help),
                "check" => o.check = true,
                "per-rank" => o.per_rank = true,
                "np" => o.np = Some(number(&opt, &value()?)?),
                "threads" => o.threads = Some(number(&opt, &value()?)?),
                "emulate-hosts" => o.emulate_hosts = Some(number(&opt, &value()?)?),
                "emulate-switches" => o.emulate_switches = Some(number(&opt, &value()?)?),
                "bind-to" => o.bind_to = Some(crate::run::bind::BindTo::parse(&value()?).map_err(usage)?),
                "csv" => o.csv = Some(PathBuf::from(value()?)),
                "json" => o.json = Some(PathBuf::from(value()?)),
                _ => return Err(usage(format!("unknown option {opt}"))),
            }
            i += 1;
            continue;
        }
        let Some(shorts) = a.strip_prefix('-').filter(|s| !s.is_empty()) else {
            return Err(usage(format!("unexpected argument {a:?}")));
        };
        for (at, ch) in shorts.char_indices() {
            let opt = format!("-{ch}");
            if FLAGS.contains(ch) {
                match ch {
                    'i' => o.in_place = true,
                    'p' => o.persistent = true,
                    'F' => o.full = true,
                    'T' => triggered = true,
                    _ => return Ok(Parsed::Help),
                }
                continue;
            }
            if !WITH_VALUE.contains(ch) {
                return Err(usage(format!("unknown option {opt}")));
            }
            let rest = &shorts[at + ch.len_utf8()..];
            let v = if rest.is_empty() {
                i += 1;
                args.get(i).cloned().ok_or_else(|| usage(format!("option {opt} needs a value")))?
            } else {
                rest.to_string()
            };
            set_short(&mut o, ch, &opt, &v)?;
            break;
        }
        i += 1;
    }
    check(&o, triggered)?;
    Ok(Parsed::Run(o))
}

fn set_short(o: &mut Options, ch: char, opt: &str, v: &str) -> Result<(), OptError> {
    let count = |v: &str| {
        parse_count(v).ok_or_else(|| usage(format!("{opt} {v:?}: expected a count such as 1024, 64k or 16M")))
    };
    match ch {
        'c' => o.coll = v.parse().map_err(|e: ferrocoll::Error| usage(format!("-c: {}", e.context())))?,
        'b' => o.min = count(v)?,
        'e' => o.max = count(v)?,
        'f' => o.factor = number(opt, v)? as u64,
        'd' => o.dtype = v.parse().map_err(|e: ferrocoll::Error| usage(format!("-d: {}", e.context())))?,
        'o' => o.op = v.parse().map_err(|e: ferrocoll::Error| usage(format!("-o: {}", e.context())))?,
        'm' => {
            o.mem = match v.trim().to_ascii_lowercase().as_str() {
                "host" => MemType::Host,
                "cuda" => MemType::Cuda,
                "cuda-mng" | "cuda_managed" => MemType::CudaManaged,
                "rocm" | "rocm_managed" => {
                    return Err(OptError::NotSupported(format!(
                        "-m {v}: ROCm memory is not supported by ferrocoll (NotSupported); use -m host or -m cuda"
                    )));
                }
                _ => return Err(usage(format!("-m {v:?}: unknown memory type; expected host, cuda or cuda-mng"))),
            }
        }
        'n' => o.iters = Some(number(opt, v)?),
        'w' => o.warmups = Some(number(opt, v)?),
        'r' => o.root = number(opt, v)?,
        _ => return Err(usage(format!("unknown option {opt}"))),
    }
    Ok(())
}

/// Checks across options.
fn check(o: &Options, triggered: bool) -> Result<(), OptError> {
    if triggered {
        return Err(OptError::NotSupported(
            "-T: triggered post (ucc_collective_triggered_post on an execution engine) is not supported by \
             ferrocoll-perftest (NotSupported)"
                .into(),
        ));
    }
    if o.factor < 2 {
        return Err(usage(format!("-f {}: the multiplication factor must be at least 2", o.factor)));
    }
    if o.min > o.max {
        return Err(usage(format!("-b {} is larger than -e {}", o.min, o.max)));
    }
    match (o.np, o.threads) {
        (Some(_), Some(_)) => return Err(usage("--np and --threads cannot be combined")),
        (Some(0), _) => return Err(usage("--np 0: the number of ranks must be at least 1")),
        (_, Some(0)) => return Err(usage("--threads 0: the number of ranks must be at least 1")),
        _ => {}
    }
    // Ranks are processes or threads of this host, planned before any
    // starts: an absurd count panicked allocating them.
    let max = crate::run::MAX_RANKS;
    for (opt, n) in [("--np", o.np), ("--threads", o.threads)] {
        if let Some(n) = n.filter(|&n| n > max) {
            return Err(usage(format!("{opt} {n}: at most {max} ranks run on one host")));
        }
    }
    // Each size runs warm-ups + iterations calls: a sum past usize::MAX
    // overflowed (a panic, or in a release build far fewer calls than asked).
    let (n, w) = (o.iters.unwrap_or(1000), o.warmups.unwrap_or(100));
    if n.checked_add(w).is_none() {
        return Err(usage(format!("-n {n} -w {w}: more iterations than this machine can count")));
    }
    if let (Some(b), None) = (o.bind_to, o.np) {
        return Err(usage(format!("--bind-to {b} needs --np (under another launcher, bind with it)")));
    }
    if let Some(k) = o.emulate_hosts {
        let np = o.np.ok_or_else(|| usage(format!("--emulate-hosts {k} needs --np")))?;
        if k == 0 || k > np {
            return Err(usage(format!("--emulate-hosts {k} must be between 1 and --np ({np})")));
        }
    }
    if let Some(j) = o.emulate_switches {
        let k = o.emulate_hosts.ok_or_else(|| usage(format!("--emulate-switches {j} needs --emulate-hosts")))?;
        if j == 0 || j > k {
            return Err(usage(format!("--emulate-switches {j} must be between 1 and --emulate-hosts ({k})")));
        }
    }
    if o.coll.is_reduction() {
        o.op.check_dtype(o.dtype).map_err(|e| OptError::NotSupported(format!("-o {} -d {}: {}", o.op, o.dtype, e)))?;
    }
    Ok(())
}

/// The arguments to give the ranks when `--np` starts them: everything but
/// `--np`, `--emulate-hosts`, `--emulate-switches` and `--bind-to`.
pub fn child_args(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        match a.as_str() {
            "--np" | "--emulate-hosts" | "--emulate-switches" | "--bind-to" => i += 1,
            s if s.starts_with("--np=")
                || s.starts_with("--emulate-hosts=")
                || s.starts_with("--emulate-switches=")
                || s.starts_with("--bind-to=") => {}
            _ => out.push(a.clone()),
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Parsed, OptError> {
        parse(&s.split_whitespace().map(String::from).collect::<Vec<_>>())
    }

    fn run(s: &str) -> Options {
        match p(s) {
            Ok(Parsed::Run(o)) => o,
            other => panic!("{s}: {other:?}"),
        }
    }

    #[test]
    fn ucc_perftest_style() {
        let o = run("-c alltoall -b 1 -e 16M -f 4 -d bfloat16 -o max -n 10 -w 2 -iF -r1");
        assert_eq!(o.coll, CollType::Alltoall);
        assert_eq!((o.min, o.max, o.factor), (1, 16 << 20, 4));
        assert_eq!((o.dtype, o.op), (DataType::Bfloat16, ReduceOp::Max));
        assert_eq!((o.iters, o.warmups, o.root), (Some(10), Some(2), 1));
        assert!(o.in_place && o.full && !o.persistent);
        let o = run("-creduce_scatter --check --csv=/tmp/x.csv --np=2 --emulate-hosts 2");
        assert_eq!(o.coll, CollType::ReduceScatter);
        assert_eq!(o.np, Some(2));
        assert!(o.check && o.csv.is_some() && o.emulate_hosts == Some(2) && !o.per_rank);
        assert!(run("--per-rank").per_rank);
        assert_eq!(run("").coll, CollType::Allreduce);
        // The SHARP reduce_scatter measurement's command line (ucc_perftest's
        // units: counts of elements per peer block, powers of 1024).
        let o = run("-c reduce_scatter -F -b 16K -e 1280M -w 100");
        assert_eq!(o.coll, CollType::ReduceScatter);
        assert_eq!((o.min, o.max, o.warmups, o.full), (16 << 10, 1280 << 20, Some(100), true));
    }

    #[test]
    fn bad_options_name_themselves() {
        let u = |s: &str| match p(s) {
            Err(OptError::Usage(m)) => m,
            other => panic!("{s}: {other:?}"),
        };
        assert!(u("-c allreduc").contains("allreduc"));
        assert!(u("-x").contains("-x"));
        assert!(u("--bogus").contains("--bogus"));
        assert!(u("-b").contains("-b"));
        assert!(u("-b 1.5").contains("-b"));
        assert!(u("-d float33").contains("float33"));
        assert!(u("-f 1").contains("-f 1"));
        assert!(u("--threads 2 --np 2").contains("--np"));
        assert!(u("--emulate-hosts 2").contains("--emulate-hosts"));
        assert!(u("--np 4 --emulate-switches 2").contains("needs --emulate-hosts"));
        assert!(u("--np 4 --emulate-hosts 2 --emulate-switches 3").contains("--emulate-switches 3"));
        assert!(u("--bind-to core").contains("--bind-to core needs --np"));
        assert!(u("--np 2 --bind-to socket").contains("socket"));
        assert_eq!(run("--np 2 --bind-to none").bind_to, Some(crate::run::bind::BindTo::None));
        assert!(u("stray").contains("stray"));
        assert!(u("--np 18446744073709551615").contains("--np 18446744073709551615: at most 4096 ranks"));
        assert!(u("--threads 4097").contains("--threads 4097"));
        assert!(u("-n 1 -w 18446744073709551615").contains("-n 1 -w 18446744073709551615"));
        assert!(u("-n 18446744073709551615").contains("-n 18446744073709551615 -w 100"));
        assert!(matches!(p("-m rocm"), Err(OptError::NotSupported(m)) if m.contains("ROCm")));
        assert_eq!(run("-m cuda").mem, MemType::Cuda);
        assert_eq!(run("-m cuda-mng").mem, MemType::CudaManaged);
        assert!(matches!(p("-T"), Err(OptError::NotSupported(m)) if m.contains("-T")));
        assert!(matches!(p("-o band -d float32"), Err(OptError::NotSupported(m)) if m.contains("band")));
        assert!(matches!(p("-h"), Ok(Parsed::Help)));
    }

    #[test]
    fn children_lose_the_launch_options() {
        let a: Vec<String> = "--np 4 -c bcast --emulate-hosts=2 --emulate-switches 2 --bind-to core --check"
            .split(' ')
            .map(String::from)
            .collect();
        assert_eq!(child_args(&a), vec!["-c", "bcast", "--check"]);
    }
}
