//! The shm transport's segments: this endpoint's own (created, mapped
//! whole, unlinked once every peer has mapped it) and its peers' (opened by
//! name, checked, and mapped in two parts: the meta part and the one ring
//! this endpoint writes). Naming, creating, opening and mapping are
//! [`crate::shmem`]'s; this file knows what the header means.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use ferrocoll_core::{Error, Result};

use super::wire::{self, HEADER_LEN, SegHeader};
use crate::liveness;
use crate::shmem::{self, IfExists, Mapping, ShmFile, ShmName};

/// This endpoint's segment.
pub(super) struct OwnedSegment {
    /// Unlinked by [`OwnedSegment::unlink`], or at the latest on drop.
    name: ShmName,
    /// The whole segment.
    pub map: Arc<Mapping>,
    /// Its header.
    pub header: SegHeader,
}

impl OwnedSegment {
    /// Create and initialise `/ferrocoll-<job>-<ep>-<nonce>-<owner>` (peers
    /// learn the name from this endpoint's address, so none can guess it
    /// before; the owner tag, [`shmem::Owner`], lets a later process's
    /// [`shmem::sweep_stale`] remove it if this one is killed before the
    /// name is unlinked; an existing segment of a dead owner is replaced,
    /// one of a live owner is an error). Nothing is left behind on failure.
    pub fn create(job: &str, ep: usize, n_eps: usize, ring_size: u64, n_slots: u32) -> Result<OwnedSegment> {
        let nonce = shmem::nonce()?;
        let suffix = format!("{ep}-{nonce:016x}-{}", shmem::Owner::me().tag());
        let name = shmem::segment_name(job, &suffix);
        let (ep32, n32) = match (u32::try_from(ep), u32::try_from(n_eps)) {
            (Ok(e), Ok(n)) => (e, n),
            _ => return Err(Error::invalid_param(format!("endpoint {ep} of {n_eps} is out of range"))),
        };
        let pid = std::process::id();
        let probe = probe_token(pid, ep);
        let header = SegHeader::layout(pid, ep32, n32, ring_size, n_slots, shmem::page_size(), probe, nonce)?;
        let total = header.total_len()?;
        let (file, owned) =
            ShmFile::create(&name, total, IfExists::ReplaceIf(&replace_if_owner_gone)).map_err(|e| {
                e.prefixed(format!("segment of {n_eps} rings of UCC_TL_P2P_SHM_RING_SIZE={ring_size} bytes"))
            })?;
        // From here on, dropping `owned` on an error path unlinks the name.
        let map = file.map(0, total)?;
        let bytes = header.encode();
        let dst = map.range(0, bytes.len())?;
        // SAFETY: `dst` starts bytes.len() in-bounds bytes (checked by
        // `range`), and no other process has the name yet (O_EXCL), so nobody
        // reads these bytes while we write them.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, bytes.len()) };
        // Relaxed: peers learn the segment exists only through the OOB
        // address exchange, which orders everything written before it.
        map.u32_at(wire::H_STATE)?.store(wire::SEG_OPEN, Ordering::Relaxed);
        Ok(OwnedSegment { name: owned, map: Arc::new(map), header })
    }

    /// The name, with its leading `/`.
    pub fn name(&self) -> &str {
        self.name.as_str()
    }

    /// The address of the probe word in this process.
    pub fn probe_addr(&self) -> u64 {
        self.map.ptr().wrapping_add(wire::H_PROBE) as u64
    }

    /// Remove the name (idempotent): the memory stays until every process unmaps it.
    pub fn unlink(&self) -> Result<()> {
        self.name.unlink()
    }

    /// Mark the segment closed cleanly, naming `cause` (the endpoint whose
    /// failure this one leaves because of), for peers that read its state.
    pub fn mark_closed(&self, cause: Option<usize>) {
        let word = cause.and_then(|c| u32::try_from(c).ok()?.checked_add(1));
        if let (Some(w), Ok(cell)) = (word, self.map.u32_at(wire::H_CAUSE)) {
            // Relaxed: published by the Release store of the state below.
            cell.store(w, Ordering::Relaxed);
        }
        if let Ok(state) = self.map.u32_at(wire::H_STATE) {
            // Release: a peer that Acquire-loads CLOSED sees every record this
            // endpoint pushed before closing.
            state.store(wire::SEG_CLOSED, Ordering::Release);
        }
    }
}

/// A segment of this name exists (a crashed run of the same job may have
/// left it): replace it if its owner process is gone, refuse it otherwise.
fn replace_if_owner_gone(old: &ShmFile) -> Result<()> {
    let name = old.name();
    let mut raw = [0u8; HEADER_LEN];
    let owner_pid = old
        .read_exact_at(0, &mut raw)
        .ok()
        .filter(|_| raw[..8] == wire::MAGIC.to_le_bytes())
        .map(|_| u32::from_le_bytes([raw[12], raw[13], raw[14], raw[15]]));
    match owner_pid {
        Some(pid) if liveness::process_gone(pid) => {
            ferrocoll_core::log_debug!("shm: replacing {name}, left behind by pid {pid}");
            Ok(())
        }
        Some(pid) => Err(Error::no_resource(format!(
            "shared-memory segment {name} exists and its owner (pid {pid}) is alive: is the job name reused?"
        ))),
        None => Err(Error::no_resource(format!(
            "shared-memory segment {name} exists and has no readable header (being created by another process?)"
        ))),
    }
}

fn probe_token(pid: u32, ep: usize) -> u64 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    (t as u64) ^ (u64::from(pid) << 32) ^ (ep as u64).rotate_left(17) ^ wire::MAGIC
}

/// A peer's segment as this endpoint sees it.
pub(super) struct PeerSegment {
    /// Header, flags and slots (everything before the rings).
    pub meta: Arc<Mapping>,
    /// The ring this endpoint writes (control block and data).
    pub ring: Arc<Mapping>,
    /// The peer's header.
    pub header: SegHeader,
}

/// The nonce that `name` (`…-<ep>-<nonce>-<owner>`, see [`OwnedSegment::create`]) carries.
fn nonce_of(name: &str) -> Option<u64> {
    let mut parts = name.rsplit('-');
    let (_owner, nonce) = (parts.next()?, parts.next()?);
    (nonce.len() == 16).then(|| u64::from_str_radix(nonce, 16).ok()).flatten()
}

/// Open and map peer `peer_ep`'s segment `name`, checking that it belongs to
/// `pid`, has `n_eps` rings, carries the nonce of its name and is not closed.
pub(super) fn open_peer(name: &str, pid: u32, peer_ep: usize, n_eps: usize, my_ep: usize) -> Result<PeerSegment> {
    let file = ShmFile::open(name)?.ok_or_else(|| Error::io(format!("opening {name}: there is no such segment")))?;
    let mut raw = [0u8; HEADER_LEN];
    file.read_exact_at(0, &mut raw)?;
    let header = SegHeader::parse(&raw, shmem::page_size()).map_err(|e| e.prefixed(name))?;
    if header.pid != pid || header.ep as usize != peer_ep || header.n_eps as usize != n_eps {
        return Err(Error::io(format!(
            "{name} belongs to endpoint {} of {} (pid {}), expected endpoint {peer_ep} of {n_eps} (pid {pid})",
            header.ep, header.n_eps, header.pid
        )));
    }
    let nonce = nonce_of(name).ok_or_else(|| Error::io(format!("{name} is not a segment name (no nonce)")))?;
    if header.nonce != nonce {
        return Err(Error::io(format!(
            "{name} carries nonce {:016x} in its header, not its name's {nonce:016x}: it is not the segment \
             its endpoint created",
            header.nonce
        )));
    }
    let total = header.total_len()?;
    let actual = file.size()?;
    if actual != total {
        return Err(Error::io(format!("{name} has {actual} bytes, its header says {total}")));
    }
    let meta = Arc::new(file.map(0, header.rings_off)?);
    let ring = Arc::new(file.map(header.ring_off(my_ep)?, header.ring_stride)?);
    // Acquire: pairs with the Release of mark_closed.
    if meta.u32_at(wire::H_STATE)?.load(Ordering::Acquire) != wire::SEG_OPEN {
        return Err(Error::io(format!("{name} is not open (its endpoint closed or never finished creating it)")));
    }
    Ok(PeerSegment { meta, ring, header })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_open_unlink() {
        let job = format!("segtest{}", std::process::id());
        let seg = OwnedSegment::create(&job, 1, 2, 4096, 8).unwrap();
        let path = format!("{}{}", shmem::SHM_DIR, seg.name());
        assert!(std::path::Path::new(&path).exists());
        // A second creation for the same endpoint gets another name: no one can
        // guess a name before its owner publishes it.
        let other = OwnedSegment::create(&job, 1, 2, 4096, 8).unwrap();
        assert_ne!(other.name(), seg.name());
        assert!(other.name().starts_with(&format!("/ferrocoll-{job}-1-")) && other.name().len() > job.len() + 28);
        let file = other.name().trim_start_matches('/');
        assert_eq!(shmem::Owner::of_name(file), Some(shmem::Owner::me()), "{file}");
        drop(other);
        let peer = open_peer(seg.name(), std::process::id(), 1, 2, 0).unwrap();
        assert_eq!(peer.header, seg.header);
        assert!(open_peer(seg.name(), std::process::id() + 1, 1, 2, 0).is_err());
        assert!(open_peer(seg.name(), std::process::id(), 0, 2, 0).is_err());
        seg.mark_closed(None);
        let e = open_peer(seg.name(), std::process::id(), 1, 2, 0).err().unwrap().to_string();
        assert!(e.contains("not open"), "{e}");
        // A header copied from another segment (all else right) is refused.
        let copied = SegHeader { nonce: seg.header.nonce ^ 1, ..seg.header }.encode();
        // SAFETY: the test owns this mapping of at least one page; no other
        // thread or process reads it now.
        unsafe { std::ptr::copy_nonoverlapping(copied.as_ptr(), seg.map.ptr(), copied.len()) };
        let e = open_peer(seg.name(), std::process::id(), 1, 2, 0).err().unwrap().to_string();
        assert!(e.contains("not its name's") && e.contains(&format!("{:016x}", seg.header.nonce)), "{e}");
        assert_eq!(nonce_of("/ferrocoll-job-x-1-00000000000000ff-p12t3"), Some(255));
        assert_eq!(nonce_of("/ferrocoll-job-1-ff-p12"), None);
        seg.unlink().unwrap();
        assert!(!std::path::Path::new(&path).exists());
        seg.unlink().unwrap();
        drop(seg);
    }
}
