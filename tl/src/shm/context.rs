//! The shm TL's per-context state: who runs where, to know which teams share a host.

use std::sync::{Arc, OnceLock};

use ferrocoll_core::backend::{McSet, TlContext, TlContextParams, TlPeer, TlTeamFuture, TlTeamParams};
use ferrocoll_core::{Error, ProcInfo, Result};
use ferrocoll_transport::shmem::{self, Owner, SHM_DIR};

use super::ShmConfig;
use super::segment::Segment;
use super::team::{ShmTeam, TeamSetup};

pub(crate) struct ShmContext {
    job: String,
    ep: usize,
    mcs: McSet,
    /// What this endpoint puts in the names of the team segments it
    /// creates (and the nonce in their headers too, see `segment.rs`).
    mark: Mark,
    /// Every endpoint's process and mark (`None`: it has no shm TL).
    peers: OnceLock<Vec<(ProcInfo, Option<Mark>)>>,
    /// The single-copy threshold the first of this context's teams that
    /// timed staging with a peer found (`staging_probe.rs`): its later
    /// teams take it as it is.
    probed: Arc<OnceLock<usize>>,
}

/// An endpoint's part of the names of the segments it creates: a nonce,
/// and its process's tag (see `Owner`), sent to the others as its address.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Mark {
    nonce: u64,
    owner: String,
}

impl Mark {
    fn encode(&self) -> Vec<u8> {
        [&self.nonce.to_le_bytes()[..], self.owner.as_bytes()].concat()
    }

    /// A peer's address, if it is one (a peer without this TL sends none).
    fn decode(addr: &[u8]) -> Option<Mark> {
        let (nonce, owner) = addr.split_first_chunk::<8>()?;
        let owner = std::str::from_utf8(owner).ok()?;
        // The tag goes into a file name: only what `Owner::tag` makes.
        Owner::of_name(&format!("-{owner}"))?;
        Some(Mark { nonce: u64::from_le_bytes(*nonce), owner: owner.to_string() })
    }
}

impl ShmContext {
    pub(crate) fn new(params: &TlContextParams<'_>) -> Result<ShmContext> {
        ShmConfig::from_config(params.config)?;
        if !std::path::Path::new(SHM_DIR).is_dir() {
            return Err(Error::not_supported(format!("{SHM_DIR} is not available")));
        }
        let nonce = shmem::nonce().map_err(|e| Error::not_supported(e.context().to_string()))?;
        // What processes killed during setup left (see `shmem::sweep_stale`).
        shmem::sweep_stale();
        Ok(ShmContext {
            job: params.job.to_string(),
            ep: params.ep,
            mcs: params.mcs.clone(),
            mark: Mark { nonce, owner: Owner::me().tag() },
            peers: OnceLock::new(),
            probed: Arc::default(),
        })
    }
}

impl TlContext for ShmContext {
    fn address(&self) -> Vec<u8> {
        self.mark.encode()
    }

    fn connect(&self, peers: &[TlPeer]) -> Result<()> {
        // Only peers that have this TL (a mark as address) can share a segment with us.
        let peers = peers.iter().map(|p| (p.proc.clone(), Mark::decode(&p.addr))).collect();
        let _ = self.peers.set(peers);
        Ok(())
    }

    fn progress(&self) -> Result<()> {
        Ok(())
    }

    fn team_create(&self, params: &TlTeamParams) -> Result<TlTeamFuture> {
        let peers = self.peers.get().ok_or_else(|| Error::internal("shm team before connect"))?;
        let (me, _) = peers.get(self.ep).ok_or_else(|| Error::internal("own endpoint missing"))?;
        if let Some(&ep) = params.eps.iter().find(|&&ep| peers.get(ep).is_none_or(|(p, _)| !p.same_host(me))) {
            return Err(Error::not_supported(format!("endpoint {ep} is on another host")));
        }
        // The team's first rank creates the segment, under its mark.
        let first = params.eps.first().copied().ok_or_else(|| Error::internal("a team without members"))?;
        let mark = peers
            .get(first)
            .and_then(|(_, m)| m.as_ref())
            .ok_or_else(|| Error::not_supported(format!("endpoint {first} has no shm TL")))?;
        let config = ShmConfig::from_config(&params.config)?;
        let name = Segment::name(&self.job, params.team_id, mark.nonce, &mark.owner);
        let pids = params.eps.iter().map(|&ep| peers.get(ep).map_or(0, |(p, _)| p.pid)).collect();
        let (oversubscribed, probed) = (params.oversubscribed, self.probed.clone());
        let setup = TeamSetup { name, cookie: mark.nonce, oversubscribed, pids, probed };
        Ok(Box::pin(ShmTeam::create(setup, params.rank, params.size, self.mcs.clone(), config)))
    }

    fn close(&self) {
        // A peer killed during a team's setup may have left its segment.
        shmem::sweep_stale();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_round_trip_and_addresses_that_are_not_marks_are_refused() {
        let m = Mark { nonce: 0x1234, owner: Owner::me().tag() };
        assert_eq!(Mark::decode(&m.encode()), Some(m));
        assert_eq!(Mark::decode(&[1, 2, 3]), None, "too short");
        let mut bad = 7u64.to_le_bytes().to_vec();
        bad.extend_from_slice(b"p1/../x");
        assert_eq!(Mark::decode(&bad), None, "a tag that would put a path in a name");
    }
}

/// Never-panic property of the peer mark decoder (bytes from peers).
#[cfg(test)]
mod decode_props {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn marks_never_panic_and_hold_only_owner_tags(
            bytes in proptest::collection::vec(any::<u8>(), 0..48),
            nonce in any::<u64>(),
            tag in "(p[0-9]{0,12}(t[0-9]{0,21})?(n[0-9]{0,12})?|\\PC{0,12})",
        ) {
            if let Some(m) = Mark::decode(&bytes) {
                let name = ["-", m.owner.as_str()].concat();
                prop_assert!(Owner::of_name(&name).is_some());
            }
            let encoded = Mark { nonce, owner: tag.clone() }.encode();
            if let Some(m) = Mark::decode(&encoded) {
                prop_assert_eq!((m.nonce, m.owner.as_str()), (nonce, tag.as_str()));
            }
        }
    }
}
