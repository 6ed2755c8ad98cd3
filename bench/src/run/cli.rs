//! `ferrocoll-run`'s command line.

use std::ffi::OsString;
use std::time::Duration;

use super::LaunchConfig;

/// The usage text.
pub const USAGE: &str = "\
usage: ferrocoll-run -n N [--emulate-hosts K [--emulate-switches J]] [--bind-to none|core|numa] [--timeout SECS] [--grace SECS] [--] program [args...]

Starts N ranks of `program` on this host, with RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT and FERROCOLL_JOB_TOKEN set.

  -n, --np N            number of ranks (at most 4096)
  --emulate-hosts K     spread the ranks over K emulated hosts (contiguous
                        blocks; sets FERROCOLL_HOST_ID=host<h>, and LOCAL_RANK
                        and LOCAL_WORLD_SIZE per emulated host); or a list of
                        ranks per host, e.g. 1,3,2 (adding up to N)
  --emulate-switches J  put the K emulated hosts under J emulated leaf
                        switches (contiguous blocks of hosts; sets
                        FERROCOLL_SWITCH_ID=switch<g>); needs --emulate-hosts
  --bind-to WHAT        none: no binding; core: rank i on the i-th CPU this
                        launcher may use (an error if ranks outnumber them);
                        numa: rank i on the CPUs of NUMA node i mod nodes.
                        Default: core when ranks <= those CPUs, else none.
                        Each rank finds its binding in FERROCOLL_BIND
                        (core:3, numa:0-7, none)
  --timeout SECS        stop every rank after SECS seconds (exit code 124)
  --grace SECS          after a rank fails, time the others get before
                        SIGTERM (default 5); SIGKILL follows 2 s later
  -h, --help            this text

Each output line of rank r is prefixed with `[r] `. Exit code: 0 iff every
rank exited 0; else the first failed rank's status (128 + signal).";

/// What the command line asks for.
#[derive(Debug)]
pub enum Cli {
    /// Print the usage.
    Help,
    /// Launch.
    Run(LaunchConfig),
}

/// Parse seconds: `5`, `0.5`, `2s`, `3m`.
pub fn parse_secs(opt: &str, v: &str) -> Result<Duration, String> {
    let (num, mult) = match v.trim() {
        s if s.ends_with('m') => (&s[..s.len() - 1], 60.0),
        s if s.ends_with('s') => (&s[..s.len() - 1], 1.0),
        s => (s, 1.0),
    };
    num.parse::<f64>()
        .ok()
        .map(|x| x * mult)
        .filter(|x| x.is_finite() && *x >= 0.0 && *x < 1e9)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| format!("{opt} {v:?}: expected a number of seconds (e.g. 30, 0.5, 2m)"))
}

fn parse_count(opt: &str, v: &str) -> Result<usize, String> {
    v.trim().parse::<usize>().map_err(|_| format!("{opt} {v:?}: expected a whole number"))
}

/// Parse `ferrocoll-run`'s arguments (without the program name).
pub fn parse(args: &[OsString]) -> Result<Cli, String> {
    let mut ranks = None;
    let mut hosts = None;
    let mut switches = None;
    let mut sizes: Option<Vec<usize>> = None;
    let mut timeout = None;
    let mut grace = super::DEFAULT_GRACE;
    let mut bind_to = None;
    let mut i = 0;
    let value = |i: &mut usize, opt: &str| -> Result<String, String> {
        *i += 1;
        args.get(*i).map(|v| v.to_string_lossy().into_owned()).ok_or_else(|| format!("option {opt} needs a value"))
    };
    while i < args.len() {
        let a = args[i].to_string_lossy().into_owned();
        let (opt, inline) = match a.split_once('=') {
            Some((o, v)) if o.starts_with("--") => (o.to_string(), Some(v.to_string())),
            _ => (a.clone(), None),
        };
        let val = |i: &mut usize| inline.clone().map_or_else(|| value(i, &opt), Ok);
        match opt.as_str() {
            "--" => {
                i += 1;
                break;
            }
            "-h" | "--help" => return Ok(Cli::Help),
            "-n" | "-np" | "--np" => ranks = Some(parse_count(&opt, &val(&mut i)?)?),
            "--emulate-hosts" => {
                let v = val(&mut i)?;
                if v.contains(',') {
                    let list = v.split(',').map(|n| parse_count(&opt, n)).collect::<Result<Vec<_>, _>>()?;
                    hosts = Some(list.len());
                    sizes = Some(list);
                } else {
                    hosts = Some(parse_count(&opt, &v)?);
                }
            }
            "--emulate-switches" => switches = Some(parse_count(&opt, &val(&mut i)?)?),
            "--timeout" => timeout = Some(parse_secs(&opt, &val(&mut i)?)?),
            "--grace" => grace = parse_secs(&opt, &val(&mut i)?)?,
            "--bind-to" => bind_to = Some(super::bind::BindTo::parse(&val(&mut i)?)?),
            s if s.starts_with('-') && s.len() > 1 => return Err(format!("unknown option {s}")),
            _ => break,
        }
        i += 1;
    }
    let ranks = ranks.ok_or("the number of ranks is missing (-n N)")?;
    if ranks == 0 {
        return Err("-n 0: the number of ranks must be at least 1".into());
    }
    if ranks > super::MAX_RANKS {
        return Err(format!("-n {ranks}: at most {} ranks run on one host", super::MAX_RANKS));
    }
    if let Some(k) = hosts {
        if k == 0 || k > ranks {
            return Err(format!("--emulate-hosts {k} must be between 1 and -n ({ranks})"));
        }
    }
    if let Some(list) = &sizes {
        if list.contains(&0) || list.iter().sum::<usize>() != ranks {
            let shown: Vec<String> = list.iter().map(usize::to_string).collect();
            return Err(format!(
                "--emulate-hosts {}: every host needs a rank and the sizes must add up to -n ({ranks})",
                shown.join(",")
            ));
        }
    }
    if let Some(j) = switches {
        match hosts {
            None => return Err(format!("--emulate-switches {j} needs --emulate-hosts K (switches group hosts)")),
            Some(k) if j == 0 || j > k => {
                return Err(format!("--emulate-switches {j} must be between 1 and --emulate-hosts ({k})"));
            }
            Some(_) => {}
        }
    }
    let program = args.get(i).ok_or("the program to run is missing (ferrocoll-run -n N -- program args...)")?;
    let mut cfg = LaunchConfig::new(ranks, program.clone(), args[i + 1..].to_vec());
    cfg.emulate_hosts = hosts;
    cfg.host_sizes = sizes;
    cfg.emulate_switches = switches;
    cfg.timeout = timeout;
    cfg.grace = grace;
    cfg.bind_to = bind_to;
    Ok(Cli::Run(cfg))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Cli, String> {
        parse(&s.split_whitespace().map(OsString::from).collect::<Vec<_>>())
    }

    #[test]
    fn parses_a_job() {
        let Ok(Cli::Run(c)) = p("-n 4 --emulate-hosts 2 --timeout 1.5 --grace=3 -- sh -c true") else { panic!() };
        assert_eq!((c.ranks, c.emulate_hosts), (4, Some(2)));
        assert_eq!(c.timeout, Some(Duration::from_millis(1500)));
        assert_eq!(c.grace, Duration::from_secs(3));
        assert_eq!(c.program, "sh");
        assert_eq!(c.args, vec![OsString::from("-c"), OsString::from("true")]);
        let Ok(Cli::Run(c)) = p("-n 2 hostname -f") else { panic!() };
        assert_eq!(c.args, vec![OsString::from("-f")]);
        assert_eq!(c.bind_to, None);
        let Ok(Cli::Run(c)) = p("-n 2 --bind-to numa true") else { panic!() };
        assert_eq!(c.bind_to, Some(super::super::bind::BindTo::Numa));
    }

    #[test]
    fn errors_name_the_option() {
        assert!(p("-n").unwrap_err().contains("-n"));
        assert!(p("-n x true").unwrap_err().contains("-n \"x\""));
        assert!(p("--bogus 1 true").unwrap_err().contains("--bogus"));
        assert!(p("-n 2 --emulate-hosts 3 true").unwrap_err().contains("--emulate-hosts 3"));
        assert!(p("-n 4 --emulate-switches 2 true").unwrap_err().contains("needs --emulate-hosts"));
        assert!(p("-n 4 --emulate-hosts 2 --emulate-switches 3 true").unwrap_err().contains("--emulate-switches 3"));
        let Ok(Cli::Run(c)) = p("-n 4 --emulate-hosts 4 --emulate-switches=2 true") else { panic!() };
        assert_eq!(c.emulate_switches, Some(2));
        let Ok(Cli::Run(c)) = p("-n 6 --emulate-hosts 1,3,2 true") else { panic!() };
        assert_eq!((c.emulate_hosts, c.host_sizes), (Some(3), Some(vec![1, 3, 2])));
        assert!(p("-n 6 --emulate-hosts 1,3 true").unwrap_err().contains("--emulate-hosts 1,3:"));
        assert!(p("-n 3 --emulate-hosts 0,3 true").unwrap_err().contains("every host needs a rank"));
        assert!(p("-n 3 --emulate-hosts 1,x true").unwrap_err().contains("\"x\""));
        assert!(p("-n 2 --timeout soon true").unwrap_err().contains("--timeout"));
        assert!(p("-n 2").unwrap_err().contains("program"));
        assert!(p("-n 2 --bind-to socket true").unwrap_err().contains("socket"));
        // Absurd rank counts are refused before anything is planned or started.
        assert!(p("-n 18446744073709551615 true").unwrap_err().contains("-n 18446744073709551615: at most 4096"));
        assert!(p("-n 4097 true").unwrap_err().contains("-n 4097"));
        assert!(matches!(p("-n 4096 true"), Ok(Cli::Run(_))));
        assert!(p("true").unwrap_err().contains("-n"));
        assert!(matches!(p("--help"), Ok(Cli::Help)));
    }
}
