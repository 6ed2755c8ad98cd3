//! Single copy: each rank reads what it takes straight out of the giving
//! rank's buffer with cross-memory attach (`process_vm_readv`), instead of
//! the giver copying it into the segment and the taker copying it out. For
//! messages past a few KiB the second copy, not the synchronisation, is
//! what a staged round costs (BENCHMARKS.md, the tenth round).
//!
//! One epoch, on every rank:
//! 1. A giving rank writes `(address, length)` of what it gives, in its
//!    own address space: one entry that every rank reads (bcast,
//!    allgather, gather), in its control line's pair beside `arrive` so
//!    that a reader fetches both at once, or a table of one per rank
//!    (scatter, alltoall) at the start of its half; then it publishes
//!    `arrive`.
//! 2. Each taking rank waits for each giver's `arrive`, checks the entry's
//!    length against what it expects, and reads the bytes into place. The
//!    giver's process is proved once per peer: its control line says where
//!    it maps the segment's cookie, and reading the team's cookie there
//!    means the pid is that rank's and the kernel lets this rank read it.
//!    After its reads it checks that every giver still takes part: one
//!    whose collective failed or timed out meanwhile may have handed its
//!    buffer back to its caller, so what was read is an error, not data.
//! 3. Every rank writes how its reads went (its *status*) beside its
//!    `reduced` (the details of lengths that differ in its results part)
//!    and publishes `reduced`; then copies its own block, if it gives
//!    itself one, while the others finish their reads; then waits for
//!    every rank's `reduced` and reads every status, and publishes `done`.
//!    A giver's buffer is not read after that, so the collective may
//!    return.
//!
//! Every rank reads the same statuses, so all decide alike: all read →
//! done; a length that differs → the same error on every rank; a read the
//! kernel refused for a peer (Yama, seccomp, another pid namespace, no such
//! system call) → this call and every later one go through the segment
//! (`staged`) on every rank; a buffer the kernel could not read (memory it
//! cannot pin, such as driver-mapped pinned memory) → this call does.
//!
//! Offers and statuses sit in slots by the epoch's parity, like the
//! signatures: a slot is read after its flag and rewritten two epochs
//! later at the earliest, which `begin` allows only once every rank
//! published this epoch's `done`, after its reads. What another process wrote in the
//! segment (addresses, lengths, statuses, the pid) decides only what this
//! rank asks the kernel to read into its own buffer, at its own lengths:
//! a hostile same-user process can make it read wrong bytes, as it can
//! write them into the segment anyway, but never out of bounds.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use ferrocoll_core::args::Blocks;
use ferrocoll_core::{CollType, Error, MemRef, Result, log_debug};
use ferrocoll_transport::cma;

use crate::shm::epoch::Flag;
use crate::shm::team::ShmTeam;

/// What a giving rank offers.
#[derive(Clone, Copy)]
pub(crate) enum Offer<'a> {
    /// One buffer that every taker reads whole.
    One(MemRef),
    /// A buffer and its block for each rank, which that rank reads.
    PerRank(MemRef, &'a Blocks),
}

/// How a single-copy epoch ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Every rank took what it takes.
    Done,
    /// Not every read could be done: the caller moves the data through
    /// the segment instead, on every rank.
    Staged,
}

/// Whether single copy may run on a team, and whether this rank can read
/// each peer (proved at the first read from it: the pid proved, or `None`).
pub(crate) struct Reach {
    on: AtomicBool,
    peers: Vec<OnceLock<Option<u32>>>,
}

impl Reach {
    pub(crate) fn new(size: usize, on: bool) -> Reach {
        Reach { on: AtomicBool::new(on), peers: (0..size).map(|_| OnceLock::new()).collect() }
    }

    /// Whether a collective may try single copy on this team.
    pub(crate) fn on(&self) -> bool {
        // Relaxed: turned off by this rank's running task only; the turn
        // orders it before the next task.
        self.on.load(Ordering::Relaxed)
    }
}

/// Bytes of a table entry: address, length.
const ENTRY: usize = 16;

/// A status: what a rank's reads came to, and (for a length that differs)
/// which giver, the length it expected and the one offered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    /// Every read was done.
    Read,
    /// The kernel refused to read this peer at all (`Reach` turns off).
    Refused,
    /// The kernel could not read this buffer (this call goes staged).
    Unreadable,
    /// A giver offered another length than this rank takes.
    Differs { giver: u64, wants: u64, offered: u64 },
}

impl Status {
    fn words(self) -> [u64; 4] {
        match self {
            Status::Read => [1, 0, 0, 0],
            Status::Refused => [2, 0, 0, 0],
            Status::Unreadable => [3, 0, 0, 0],
            Status::Differs { giver, wants, offered } => [Status::DIFFERS, giver, wants, offered],
        }
    }

    /// The code of [`Status::Differs`].
    const DIFFERS: u64 = 4;

    /// A peer's status (untrusted: anything unknown counts as unreadable).
    fn of(w: [u64; 4]) -> Status {
        match w[0] {
            1 => Status::Read,
            2 => Status::Refused,
            Status::DIFFERS => Status::Differs { giver: w[1], wants: w[2], offered: w[3] },
            _ => Status::Unreadable,
        }
    }
}

/// Run one single-copy epoch: offer `give` (if any) and read each
/// `(giver, into)` of `take`, `into`'s length being what this rank expects.
/// `per_rank`: the givers offer a block per rank ([`Offer::PerRank`]), as
/// every rank knows from the collective it runs. `own`: this rank's own
/// block, `(where it lands, where it lies)`, copied once this rank's reads
/// are announced, while the others finish theirs (it is in place when the
/// outcome is [`Outcome::Done`]; the staged way copies it again).
pub(crate) async fn single_copy(
    team: &ShmTeam,
    coll: CollType,
    give: Option<Offer<'_>>,
    take: &[(usize, MemRef)],
    per_rank: bool,
    own: Option<(MemRef, MemRef)>,
) -> Result<Outcome> {
    let (p, me) = (team.size, team.rank);
    let e = team.begin().await?;
    let half = team.seg.data(me, e)?;
    match give {
        Some(Offer::One(buf)) => offer_one(team, e, buf)?,
        Some(Offer::PerRank(buf, blocks)) => {
            for j in 0..p {
                write_entry(half, j, blocks.of(buf, j)?)?;
            }
        }
        None => {}
    }
    team.publish(Flag::Arrive, e)?;
    // Start with the first giver after this rank, so that the ranks do not
    // all read rank 0 first.
    let first = take.iter().position(|&(g, _)| g > me).unwrap_or(0);
    let mut status = Status::Read;
    for &(g, into) in take[first..].iter().chain(&take[..first]) {
        team.wait(Flag::Arrive, &[g], e).await?;
        let [addr, len] = if per_rank {
            read_words::<2>(team.seg.data(g, e)?.range(me * ENTRY, ENTRY)?)?
        } else {
            offered(team, g, e)?
        };
        if len != into.len() as u64 {
            status = Status::Differs { giver: g as u64, wants: into.len() as u64, offered: len };
            break;
        }
        status = read_block(team, g, addr, into);
        if status != Status::Read {
            break;
        }
    }
    let (outcome, copied) = agree(team, coll, e, take.iter().map(|&(g, _)| g), status, || match own {
        Some((dst, src)) => team.copy(dst, src),
        None => Ok(()),
    })
    .await;
    team.publish(Flag::Done, e)?;
    copied?;
    outcome
}

/// Offer `buf` whole to every rank in epoch `e` (before `arrive`).
pub(crate) fn offer_one(team: &ShmTeam, e: u64, buf: MemRef) -> Result<()> {
    let slot = &team.seg.ctrl(team.rank)?.copy_offer[(e % 2) as usize];
    // Relaxed: published by the Release of this rank's `arrive`; the slot's
    // readers of epoch e - 2 have all finished (`begin`).
    slot[0].store(buf.addr() as u64, Ordering::Relaxed);
    slot[1].store(buf.len() as u64, Ordering::Relaxed);
    Ok(())
}

/// What rank `g` offers whole in epoch `e`: `[address, length]` (after its `arrive`).
pub(crate) fn offered(team: &ShmTeam, g: usize, e: u64) -> Result<[u64; 2]> {
    let slot = &team.seg.ctrl(g)?.copy_offer[(e % 2) as usize];
    // Relaxed: written before g's `arrive`, which this rank Acquired.
    Ok([slot[0].load(Ordering::Relaxed), slot[1].load(Ordering::Relaxed)])
}

/// The end of a single-copy epoch `e` in which this rank read from
/// `givers` and came to `status`: check that those givers still take part,
/// publish the status, run `own` (this rank's copy of its own block: it
/// overlaps the others' reads instead of following them), and decide with
/// every rank's. The copy's result comes apart from the outcome, so that
/// the caller publishes `done` either way.
pub(crate) async fn agree(
    team: &ShmTeam,
    coll: CollType,
    e: u64,
    givers: impl IntoIterator<Item = usize>,
    status: Status,
    own: impl FnOnce() -> Result<()>,
) -> (Result<Outcome>, Result<()>) {
    if let Err(err) = announce(team, e, givers, status) {
        return (Err(err), Ok(()));
    }
    let copied = own();
    (decide(team, coll, e, status).await, copied)
}

/// The first half of [`agree`]: this rank's reads of epoch `e` from
/// `givers` are over, with `status`. A rank with work left that reads
/// nobody's buffer (the reduction of what it read) announces before it, so
/// that ranks that only wait for its reads go on meanwhile.
pub(crate) fn announce(team: &ShmTeam, e: u64, givers: impl IntoIterator<Item = usize>, status: Status) -> Result<()> {
    // A giver whose collective failed or was cancelled while this rank
    // read (a timeout) may have handed its buffer back to its caller: what
    // was read from it is not its data. It marks itself before that.
    std::sync::atomic::fence(Ordering::SeqCst);
    for g in givers {
        team.still_takes_part(g)?;
    }
    write_status(team, e, status)?;
    team.publish(Flag::Reduced, e)
}

/// The second half of [`agree`]: once every rank has announced its status
/// of epoch `e` (this rank's is `status`), what the epoch comes to, alike
/// on every rank. After it, no rank reads this rank's buffer.
pub(crate) async fn decide(team: &ShmTeam, coll: CollType, e: u64, status: Status) -> Result<Outcome> {
    team.wait(Flag::Reduced, &team.all, e).await?;
    let mut outcome = Ok(Outcome::Done);
    for r in 0..team.size {
        match if r == team.rank { status } else { read_status(team, r, e)? } {
            Status::Read => {}
            Status::Refused => {
                team.reach.on.store(false, Ordering::Relaxed);
                if outcome.is_ok() {
                    outcome = Ok(Outcome::Staged);
                }
            }
            Status::Unreadable => {
                if outcome.is_ok() {
                    outcome = Ok(Outcome::Staged);
                }
            }
            Status::Differs { giver, wants, offered } => {
                outcome = Err(Error::io(format!(
                    "{coll}: rank {r} takes {wants} bytes from rank {giver}, which gives {offered}: do the ranks' \
                     counts agree?"
                )));
                break;
            }
        }
    }
    outcome
}

fn write_words(at: MemRef, words: &[u64]) -> Result<()> {
    let cell = at.range(0, words.len() * 8)?;
    // SAFETY: `at` lies in this rank's own part of the segment, which no
    // rank reads before the flag this rank publishes after this write, nor
    // after it has published `done` (see the module docs).
    let bytes = unsafe { cell.as_mut_slice() };
    for (chunk, w) in bytes.chunks_exact_mut(8).zip(words) {
        chunk.copy_from_slice(&w.to_le_bytes());
    }
    Ok(())
}

fn read_words<const N: usize>(at: MemRef) -> Result<[u64; N]> {
    let cell = at.range(0, N * 8)?;
    // SAFETY: a peer's part of the segment, written before the flag this
    // rank waited for (Acquire) and not rewritten before this rank's `done`.
    let bytes = unsafe { cell.as_slice() };
    let mut words = [0u64; N];
    for (w, chunk) in words.iter_mut().zip(bytes.chunks_exact(8)) {
        *w = u64::from_le_bytes(chunk.try_into().unwrap_or_default());
    }
    Ok(words)
}

fn write_entry(half: MemRef, index: usize, buf: MemRef) -> Result<()> {
    let at = index.checked_mul(ENTRY).ok_or_else(|| Error::internal(format!("table entry {index}")))?;
    write_words(half.range(at, ENTRY)?, &[buf.addr() as u64, buf.len() as u64])
}

/// Write this rank's status of epoch `e`: its code in the control line,
/// beside `reduced`, and the details of lengths that differ (rare) in its
/// results part.
fn write_status(team: &ShmTeam, e: u64, status: Status) -> Result<()> {
    let words = status.words();
    if matches!(status, Status::Differs { .. }) {
        write_words(team.seg.results(team.rank, e)?, &words)?;
    }
    // Relaxed: published by the Release of `reduced`; the slot's readers of
    // epoch e - 2 have all finished (`begin`).
    team.seg.ctrl(team.rank)?.copy_status[(e % 2) as usize].store(words[0], Ordering::Relaxed);
    Ok(())
}

fn read_status(team: &ShmTeam, r: usize, e: u64) -> Result<Status> {
    // Relaxed: written before r's `reduced`, which this rank Acquired.
    let code = team.seg.ctrl(r)?.copy_status[(e % 2) as usize].load(Ordering::Relaxed);
    let mut words = [code, 0, 0, 0];
    if code == Status::DIFFERS {
        words = read_words::<4>(team.seg.results(r, e)?)?;
        words[0] = code;
    }
    Ok(Status::of(words))
}

/// Read `into` from `addr` in giver `g`'s process (its length is what
/// this rank takes, agreed with the giver).
pub(crate) fn read_block(team: &ShmTeam, g: usize, addr: u64, into: MemRef) -> Status {
    if into.is_empty() {
        return Status::Read;
    }
    let Some(pid) = reachable(team, g) else { return Status::Refused };
    // SAFETY: `into` is this rank's destination, which the collective owns
    // until it completes; the kernel writes at most its length.
    let dst = unsafe { into.as_mut_slice() };
    match cma::read(pid, addr, dst) {
        Ok(()) => Status::Read,
        Err(err) => {
            log_debug!("shm: single copy from rank {g} (pid {pid}) at {addr:#x}: {err}");
            Status::Unreadable
        }
    }
}

/// Rank `g`'s pid, if this rank can read its memory (proved once: see the
/// module docs). The pid proved, not the one `g`'s control line holds now:
/// that word is shared memory, and rewritten after the proof it would send
/// the reads to a process never proved to be `g`'s.
fn reachable(team: &ShmTeam, g: usize) -> Option<u32> {
    let proved = team.reach.peers.get(g)?;
    if let Some(&pid) = proved.get() {
        return pid;
    }
    let ctrl = team.seg.ctrl(g).ok()?;
    // Relaxed: written at the team's creation, before the flag of g's that
    // this rank waited for (Acquire).
    let pid = u32::try_from(ctrl.pid.load(Ordering::Relaxed)).ok().filter(|&p| p != 0)?;
    let at = ctrl.cookie_at.load(Ordering::Relaxed);
    *proved.get_or_init(|| {
        let Ok((cookie, _)) = team.seg.cookie() else { return None };
        match cma::probe(pid, at, cookie) {
            Ok(()) => Some(pid),
            Err(why) => {
                log_debug!("shm: no single copy from rank {g} (pid {pid}): {why}");
                None
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use ferrocoll_core::CollType::Bcast;
    use ferrocoll_core::MemRef;

    use super::*;
    use crate::shm::test_support::poll_to_end;
    use crate::shm::test_support::threads;

    /// A bcast of 64 bytes from rank 0 by single copy: each rank's outcome and buffer.
    fn bcast(teams: &[std::sync::Arc<ShmTeam>]) -> Vec<(Result<Outcome>, Vec<u8>)> {
        std::thread::scope(|s| {
            let handles: Vec<_> = teams
                .iter()
                .enumerate()
                .map(|(rank, team)| {
                    s.spawn(move || {
                        let mut buf = if rank == 0 { (0..64u8).collect() } else { vec![0u8; 64] };
                        // SAFETY: `buf` outlives the collective, which ends before this closure does.
                        let m = unsafe { MemRef::from_mut_slice(&mut buf) };
                        let (give, take) = if rank == 0 { (Some(Offer::One(m)), None) } else { (None, Some((0, m))) };
                        (poll_to_end(single_copy(team, Bcast, give, take.as_slice(), false, None)), buf)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    /// The pid in a giver's control line, rewritten once the giver was
    /// proved, does not move the reads to another process.
    #[test]
    fn reads_go_to_the_process_proved_whatever_the_pid_word_says_later() {
        let word = 0x5eed_u64;
        if cma::probe(std::process::id(), &word as *const u64 as u64, word).is_err() {
            eprintln!("skipped: this host refuses process_vm_readv");
            return;
        }
        let teams = threads("sc-pid", 2);
        for round in 0..2 {
            for (rank, (outcome, buf)) in bcast(&teams).into_iter().enumerate() {
                assert_eq!(outcome.expect("no error"), Outcome::Done, "round {round}, rank {rank}");
                assert_eq!(buf, (0..64u8).collect::<Vec<_>>(), "round {round}, rank {rank}");
            }
            // After the proof: another process's pid (one that has exited).
            let mut child = std::process::Command::new("true").spawn().expect("spawn true");
            let other = child.id();
            child.wait().expect("wait for true");
            teams[0].seg.ctrl(0).unwrap().pid.store(u64::from(other), Ordering::Relaxed);
        }
    }
}
