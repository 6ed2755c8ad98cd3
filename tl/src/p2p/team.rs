//! The p2p TL's team: its shared state, the creation handshake, and
//! turning validated arguments into tasks.

use std::sync::Arc;

use ferrocoll_core::args::CollInit;
use ferrocoll_core::backend::{CollTask, McSet, PostInfo, TlTeam};
use ferrocoll_core::engine::{TaskDiag, TaskFuture};
use ferrocoll_core::score::{AlgId, Score, ScoreEntry};
use ferrocoll_core::wire::Reader;
use ferrocoll_core::{CollType, CollTypeSet, Error, MemRef, MemType, Result};

use super::alg::{self, RunFn};
use super::transport::Transport;
use super::{Comm, P2pConfig};

/// What every task of a team shares.
pub(crate) struct TeamShared {
    pub id: u64,
    pub rank: usize,
    pub size: usize,
    /// Context endpoint of each team rank.
    pub eps: Arc<[usize]>,
    pub transport: Arc<dyn Transport>,
    pub mcs: McSet,
    pub config: P2pConfig,
}

/// The p2p TL's team.
pub(crate) struct P2pTeam {
    shared: Arc<TeamShared>,
    score: Score,
}

/// Sequence number reserved for the creation handshake (collectives count from 0).
const HANDSHAKE_SEQ: u64 = u64::MAX;

impl P2pTeam {
    /// Check with every member that they created the same team, then hand out the team.
    pub(crate) async fn create(shared: Arc<TeamShared>, score: Score) -> Result<Arc<dyn TlTeam>> {
        handshake(&shared).await?;
        Ok(Arc::new(P2pTeam { shared, score }))
    }
}

/// Every rank sends (size, endpoint-list hash) to rank 0, which checks them
/// and answers each with a verdict: members that disagree get an error that
/// names the rank, instead of collectives that hang or mix up data.
async fn handshake(shared: &Arc<TeamShared>) -> Result<()> {
    if shared.size == 1 {
        return Ok(());
    }
    let comm = Comm::new(shared.clone(), HANDSHAKE_SEQ, Arc::new(TaskDiag::default()));
    let mut mine = Vec::with_capacity(16);
    mine.extend_from_slice(&(shared.size as u64).to_le_bytes());
    mine.extend_from_slice(&fingerprint(&shared.eps).to_le_bytes());
    let mut verdict = [0u8; 1];
    if shared.rank == 0 {
        let mut theirs = vec![0u8; 16 * shared.size];
        let bufs =
            (1..shared.size).map(|r| Ok((r, host(&mut theirs[16 * r..16 * (r + 1)])))).collect::<Result<Vec<_>>>()?;
        ferrocoll_core::engine::try_join_all(bufs.iter().map(|&(r, b)| comm.recv(r, 0, b))).await?;
        let bad = (1..shared.size).find(|&r| theirs[16 * r..16 * (r + 1)] != mine[..]);
        verdict[0] = u8::from(bad.is_some());
        let sends = (1..shared.size).map(|r| comm.isend(r, 1, host(&mut verdict))).collect::<Result<Vec<_>>>()?;
        ferrocoll_core::engine::try_join_all(sends).await?;
        if let Some(r) = bad {
            let mut rd = Reader::new(&theirs[16 * r..16 * (r + 1)]);
            return Err(Error::invalid_param(format!(
                "team {:#x}: rank {r} created a team of {} ranks over other endpoints (hash {:#x}) than rank 0 \
                 ({} ranks, hash {:#x})",
                shared.id,
                rd.u64()?,
                rd.u64()?,
                shared.size,
                fingerprint(&shared.eps)
            )));
        }
    } else {
        comm.send(0, 0, host(&mut mine)).await?;
        comm.recv(0, 1, host(&mut verdict)).await?;
        if verdict[0] != 0 {
            return Err(Error::invalid_param(format!(
                "team {:#x}: rank 0 found that the members do not agree on the team's endpoints",
                shared.id
            )));
        }
    }
    Ok(())
}

fn host(b: &mut [u8]) -> MemRef {
    // SAFETY: the handshake's buffers live on its future's stack frame until
    // every send and receive using them has completed (each is awaited).
    unsafe { MemRef::from_mut_slice(b) }
}

fn fingerprint(eps: &[usize]) -> u64 {
    eps.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &e| (h ^ e as u64).wrapping_mul(0x0100_0000_01b3))
}

impl TlTeam for P2pTeam {
    fn colls(&self) -> CollTypeSet {
        alg::infos().iter().map(|a| a.coll).collect()
    }

    fn mem_types(&self) -> &[MemType] {
        &[MemType::Host]
    }

    fn default_scores(&self) -> Vec<ScoreEntry> {
        alg::defaults()
            .filter(|d| alg::find(d.coll, 0).is_some())
            .flat_map(|d| {
                d.ranges.iter().map(move |&(range, alg)| ScoreEntry {
                    coll: d.coll,
                    mem: MemType::Host,
                    range,
                    score: self.score,
                    alg,
                })
            })
            .collect()
    }

    fn coll_init(&self, alg: AlgId, init: &Arc<CollInit>) -> Result<Box<dyn CollTask>> {
        let a = alg::find(init.coll, alg)
            .ok_or_else(|| Error::not_supported(format!("p2p has no {} algorithm {alg}", init.coll)))?;
        if init.mem_type != MemType::Host {
            return Err(Error::not_supported(format!("p2p moves host memory only, not {}", init.mem_type)));
        }
        (a.check)(init)?;
        Ok(Box::new(AlgTask { team: self.shared.clone(), init: init.clone(), run: a.run, coll: init.coll }))
    }
}

/// A prepared algorithm: each post runs it with a fresh [`Comm`].
struct AlgTask {
    team: Arc<TeamShared>,
    init: Arc<CollInit>,
    run: RunFn,
    coll: CollType,
}

impl CollTask for AlgTask {
    fn start(&self, post: &PostInfo) -> Result<TaskFuture> {
        debug_assert_eq!(self.coll, self.init.coll);
        let comm = Comm::new(self.team.clone(), post.seq, post.diag.clone());
        Ok((self.run)(comm, self.init.clone()))
    }
}
