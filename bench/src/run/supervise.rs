//! The supervision loop: reap ranks as they end, forward signals, and stop
//! the job when a rank fails, when `--timeout` expires or when we are
//! interrupted (a grace period, then SIGTERM, then SIGKILL).

use std::time::{Duration, Instant};

use super::child::{RankProc, try_reap};
use super::exit::{Exit, signal_name};
use super::flight::FlightDir;
use super::shm::ShmWatch;
use super::signals::{SignalGuard, signal_group};

/// How often the loop wakes up.
const TICK: Duration = Duration::from_millis(10);
/// Between SIGTERM and SIGKILL.
pub const KILL_AFTER: Duration = Duration::from_secs(2);
/// After SIGKILL, how long to wait for ranks to be reaped before giving up.
const GIVE_UP_AFTER: Duration = Duration::from_secs(10);

/// Where the job is in its shutdown.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    /// Every rank is left alone.
    Running,
    /// Something went wrong; the others may finish until the deadline.
    Grace(Instant),
    /// SIGTERM was sent; SIGKILL follows at the deadline.
    Terminating(Instant),
    /// SIGKILL was sent at this time.
    Killed(Instant),
}

/// What happened to the job.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// How each rank ended (`None`: never reaped).
    pub exits: Vec<Option<Exit>>,
    /// The first rank that failed, and how.
    pub first_failure: Option<(usize, Exit)>,
    /// Whether `--timeout` expired.
    pub timed_out: bool,
    /// The signal the launcher received and forwarded, if any.
    pub interrupted: Option<i32>,
    /// The exit code the launcher should return: 0 iff every rank exited 0.
    pub code: i32,
}

/// The supervision of one job.
pub struct Supervisor<'a> {
    /// The ranks.
    pub ranks: Vec<RankProc>,
    /// Time given to the others after a failure or an interrupt.
    pub grace: Duration,
    /// Overall time limit.
    pub timeout: Option<Duration>,
    /// Prefix of our messages (`ferrocoll-run`).
    pub label: &'a str,
    /// Caught signals.
    pub signals: &'a SignalGuard,
    /// Shared-memory segments in use.
    pub shm: &'a mut ShmWatch,
    /// Where the ranks' flight records go, when the job has one.
    pub flight: Option<&'a FlightDir>,
}

impl Supervisor<'_> {
    fn say(&self, msg: std::fmt::Arguments<'_>) {
        crate::errln!("{}: {msg}", self.label);
    }

    fn live(&self) -> impl Iterator<Item = &RankProc> {
        self.ranks.iter().filter(|r| r.exit.is_none())
    }

    fn live_list(&self) -> String {
        let v: Vec<String> = self.live().map(|r| r.rank.to_string()).collect();
        v.join(", ")
    }

    /// Once per job, before it is stopped: the live ranks' flight records, analysed.
    fn report_flight(&self, done: &mut bool) {
        if std::mem::replace(done, true) {
            return;
        }
        let Some(f) = self.flight else { return };
        let pids: Vec<libc::pid_t> = self.live().map(|r| r.pid).collect();
        let collected = f.collect(&pids);
        for line in collected.report.iter().flat_map(|r| r.lines()) {
            self.say(format_args!("{line}"));
        }
        let silent: Vec<String> = self
            .ranks
            .iter()
            .filter(|r| collected.silent.contains(&r.pid))
            .map(|r| format!("{} (pid {})", r.rank, r.pid))
            .collect();
        if !silent.is_empty() {
            self.say(format_args!(
                "rank(s) {} neither answered for a flight record nor ended within {} s (blocked outside the \
                 library, or stopped)",
                silent.join(", "),
                super::flight::WAIT.as_secs()
            ));
        }
    }

    fn signal_live(&self, sig: libc::c_int) {
        for r in self.live() {
            signal_group(r.pid, sig);
        }
    }

    /// Run until every rank has been reaped (or could not be).
    pub fn run(mut self, start: Instant) -> Outcome {
        let mut phase = Phase::Running;
        let mut out = Outcome { exits: vec![None; self.ranks.len()], ..Outcome::default() };
        let mut reported = false;
        loop {
            for sig in self.signals.take() {
                if out.interrupted.is_none() {
                    self.report_flight(&mut reported);
                    out.interrupted = Some(sig);
                    let n = self.live().count();
                    self.say(format_args!("received {}, forwarding it to {n} running ranks", signal_name(sig)));
                }
                self.signal_live(sig);
                if phase == Phase::Running {
                    phase = Phase::Grace(Instant::now() + self.grace);
                }
            }
            let pids: Vec<libc::pid_t> = self.live().map(|r| r.pid).collect();
            self.shm.poll(pids.into_iter());
            // Ranks that ended since the last look: one killed by a signal
            // goes first, since the others often fail because it died (they
            // notice within milliseconds, so both can end between two looks).
            let mut ended: Vec<(usize, Exit)> = (0..self.ranks.len())
                .filter(|&i| self.ranks[i].exit.is_none())
                .filter_map(|i| try_reap(self.ranks[i].pid).map(|e| (i, e)))
                .collect();
            order_ended(&mut ended);
            for (i, exit) in ended {
                self.ranks[i].exit = Some(exit);
                out.exits[i] = Some(exit);
                if exit.success() {
                    continue;
                }
                let rank = self.ranks[i].rank;
                // A rank that ends after we sent SIGTERM or SIGKILL did not fail on its own.
                let stopped_by_us = matches!(phase, Phase::Terminating(_) | Phase::Killed(_));
                let why = if stopped_by_us { format!(" (stopped by {})", self.label) } else { String::new() };
                self.say(format_args!("rank {rank} {exit}{why}"));
                if out.first_failure.is_none() && !stopped_by_us {
                    out.first_failure = Some((rank, exit));
                    if phase == Phase::Running && self.live().next().is_some() {
                        self.report_flight(&mut reported);
                        self.say(format_args!(
                            "giving the other ranks ({}) {} s to finish before stopping them",
                            self.live_list(),
                            self.grace.as_secs_f64()
                        ));
                        phase = Phase::Grace(Instant::now() + self.grace);
                    }
                }
            }
            if self.live().next().is_none() {
                break;
            }
            let now = Instant::now();
            if let Some(t) = self.timeout {
                if !out.timed_out && now.duration_since(start) >= t && !matches!(phase, Phase::Killed(_)) {
                    out.timed_out = true;
                    self.report_flight(&mut reported);
                    self.say(format_args!(
                        "timeout: {} s elapsed with ranks {} still running; stopping them",
                        t.as_secs_f64(),
                        self.live_list()
                    ));
                    self.signal_live(libc::SIGTERM);
                    phase = Phase::Terminating(now + KILL_AFTER);
                }
            }
            match phase {
                Phase::Grace(until) if now >= until => {
                    self.say(format_args!("stopping ranks {} (SIGTERM)", self.live_list()));
                    self.signal_live(libc::SIGTERM);
                    phase = Phase::Terminating(now + KILL_AFTER);
                }
                Phase::Terminating(until) if now >= until => {
                    self.say(format_args!("killing ranks {} (SIGKILL)", self.live_list()));
                    self.signal_live(libc::SIGKILL);
                    phase = Phase::Killed(now);
                }
                Phase::Killed(at) if now.duration_since(at) >= GIVE_UP_AFTER => {
                    self.say(format_args!("ranks {} did not end after SIGKILL; giving up on them", self.live_list()));
                    break;
                }
                _ => {}
            }
            std::thread::sleep(TICK);
        }
        out.code = exit_code(&out);
        out
    }
}

impl Outcome {
    /// Why the job failed, in a few words (`rank 3 failed first: exited with status 3`).
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if self.timed_out {
            parts.push("timed out".to_string());
        }
        if let Some(sig) = self.interrupted {
            parts.push(format!("interrupted by {}", signal_name(sig)));
        }
        if let Some((rank, exit)) = self.first_failure {
            parts.push(format!("rank {rank} failed first: {exit}"));
        }
        if parts.is_empty() {
            let failed = self.exits.iter().filter(|e| !e.is_some_and(Exit::success)).count();
            parts.push(format!("{failed} ranks did not exit 0"));
        }
        parts.join("; ")
    }
}

/// Ranks that ended between two looks, in the order to report them: those
/// killed by a signal first (a likely cause of the others' failures), then by rank.
fn order_ended(ended: &mut [(usize, Exit)]) {
    ended.sort_by_key(|(i, e)| (!matches!(e, Exit::Signal(_)), *i));
}

/// 0 iff every rank exited 0; else 124 on timeout, else the first failure's
/// shell code (its status, or 128 + its signal).
pub fn exit_code(out: &Outcome) -> i32 {
    if out.exits.iter().all(|e| e.is_some_and(Exit::success)) {
        return 0;
    }
    if out.timed_out {
        return 124;
    }
    match (out.first_failure, out.interrupted) {
        (Some((_, e)), _) => e.shell_code().clamp(1, 255),
        (None, Some(sig)) => 128 + sig,
        (None, None) => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rank_killed_by_a_signal_is_reported_before_those_that_failed_after_it() {
        let mut ended = vec![(0, Exit::Status(1)), (1, Exit::Status(1)), (2, Exit::Signal(9)), (3, Exit::Status(0))];
        order_ended(&mut ended);
        assert_eq!(ended[0], (2, Exit::Signal(9)));
        assert_eq!(ended[1..], [(0, Exit::Status(1)), (1, Exit::Status(1)), (3, Exit::Status(0))]);
    }

    #[test]
    fn exit_codes() {
        let ok = Outcome { exits: vec![Some(Exit::Status(0)); 2], ..Outcome::default() };
        assert_eq!(exit_code(&ok), 0);
        let failed = Outcome {
            exits: vec![Some(Exit::Status(0)), Some(Exit::Status(3))],
            first_failure: Some((1, Exit::Status(3))),
            ..Outcome::default()
        };
        assert_eq!(exit_code(&failed), 3);
        let killed = Outcome {
            exits: vec![Some(Exit::Signal(9)), None],
            first_failure: Some((0, Exit::Signal(9))),
            ..Outcome::default()
        };
        assert_eq!(exit_code(&killed), 137);
        let slow = Outcome { timed_out: true, ..killed };
        assert_eq!(exit_code(&slow), 124);
    }
}
