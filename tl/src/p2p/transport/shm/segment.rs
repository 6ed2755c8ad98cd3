//! Shared-memory segments: this endpoint's own (created, mapped whole,
//! unlinked once every peer has mapped it) and its peers' (opened by name,
//! checked, and mapped in two parts: the meta part and the one ring this
//! endpoint writes).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};

use ferrocoll_core::{Error, Result};

use super::liveness;
use super::wire::{self, HEADER_LEN, SegHeader};

/// A shared mapping of part of a segment, unmapped on drop.
pub(super) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a Mapping is an address range of MAP_SHARED memory that stays
// mapped until drop; all access to the shared bytes goes through atomics or
// the ring protocol (which gives each byte one writer at a time), never
// through Rust references to non-atomic data.
unsafe impl Send for Mapping {}
// SAFETY: see Send; `&Mapping` only hands out atomics and raw pointers.
unsafe impl Sync for Mapping {}

impl Mapping {
    fn map(fd: &OwnedFd, offset: u64, len: usize) -> io::Result<Mapping> {
        let off = libc::off_t::try_from(offset).map_err(|_| io::Error::from_raw_os_error(libc::EOVERFLOW))?;
        // SAFETY: a fresh mapping chosen by the kernel (addr null) aliases no
        // Rust object; `fd` is an open shared-memory object.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                off,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        NonNull::new(p.cast::<u8>())
            .map(|ptr| Mapping { ptr, len })
            .ok_or_else(|| io::Error::other("mmap returned null"))
    }

    /// First byte.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    fn at<T>(&self, off: usize) -> Result<*mut T> {
        let size = std::mem::size_of::<T>();
        match off.checked_add(size) {
            Some(end) if end <= self.len && off.is_multiple_of(std::mem::align_of::<T>()) => {
                Ok(self.ptr().wrapping_add(off).cast::<T>())
            }
            _ => Err(Error::internal(format!("{size}-byte atomic at offset {off} of a {}-byte mapping", self.len))),
        }
    }

    /// The `u64` atomic at `off` (bounds and alignment checked; the mapping is page-aligned).
    pub fn u64_at(&self, off: usize) -> Result<&AtomicU64> {
        let p = self.at::<AtomicU64>(off)?;
        // SAFETY: `p` is in bounds and aligned (checked by `at`), the mapping
        // lives as long as `&self`, and every process touches this word only atomically.
        Ok(unsafe { &*p })
    }

    /// The `u32` atomic at `off`.
    pub fn u32_at(&self, off: usize) -> Result<&AtomicU32> {
        let p = self.at::<AtomicU32>(off)?;
        // SAFETY: as in `u64_at`.
        Ok(unsafe { &*p })
    }

    /// The `u8` atomic at `off`.
    pub fn u8_at(&self, off: usize) -> Result<&AtomicU8> {
        let p = self.at::<AtomicU8>(off)?;
        // SAFETY: as in `u64_at`.
        Ok(unsafe { &*p })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len are exactly what mmap returned, and every borrow of
        // the mapping (atomics, ring views) holds the Mapping (or an Arc of it).
        if unsafe { libc::munmap(self.ptr().cast(), self.len) } != 0 {
            ferrocoll_core::log_debug!("shm: munmap failed: {}", io::Error::last_os_error());
        }
    }
}

/// The system page size (mmap offsets are multiples of it).
pub(super) fn page_size() -> u64 {
    // SAFETY: sysconf reads a constant of the system.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(p).ok().filter(|p| p.is_power_of_two()).unwrap_or(4096)
}

/// Longest job part of a segment name.
const MAX_JOB: usize = 64;

/// `/ferrocoll-<job>-<ep>`, with `job` reduced to `[A-Za-z0-9_-]` and, when
/// longer than 64 characters, cut and suffixed with a hash of the whole.
pub(super) fn segment_name(job: &str, ep: usize) -> String {
    let clean: String = job.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    let job = if clean.len() <= MAX_JOB {
        clean
    } else {
        // FNV-1a of the original: distinct long names stay distinct.
        let h = job.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
        format!("{}-{h:016x}", &clean[..MAX_JOB - 17])
    };
    format!("/ferrocoll-{job}-{ep}")
}

fn cname(name: &str) -> Result<CString> {
    CString::new(name).map_err(|_| Error::invalid_param(format!("segment name {name:?} contains a NUL")))
}

fn shm_open(name: &CString, flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: `name` is NUL-terminated; shm_open only reads it.
    let fd = unsafe { libc::shm_open(name.as_ptr(), flags | libc::O_CLOEXEC, 0o600) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a freshly opened descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn shm_unlink(name: &CString) -> io::Result<()> {
    // SAFETY: `name` is NUL-terminated; shm_unlink only reads it.
    if unsafe { libc::shm_unlink(name.as_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn file_len(fd: &OwnedFd) -> io::Result<u64> {
    let f = std::mem::ManuallyDrop::new(
        // SAFETY: the File is never dropped (ManuallyDrop), so `fd` keeps sole ownership of the descriptor.
        unsafe { std::fs::File::from_raw_fd(fd.as_raw_fd()) },
    );
    Ok(f.metadata()?.len())
}

fn read_header(fd: &OwnedFd) -> io::Result<[u8; HEADER_LEN]> {
    let mut b = [0u8; HEADER_LEN];
    // SAFETY: `b` is a writable buffer of HEADER_LEN bytes owned by this frame.
    let n = unsafe { libc::pread(fd.as_raw_fd(), b.as_mut_ptr().cast(), HEADER_LEN, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n as usize != HEADER_LEN {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, format!("header is {n} bytes")));
    }
    Ok(b)
}

/// Errors that mean "no usable shared memory here" rather than a fault.
fn unavailable(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOSYS | libc::EACCES | libc::EPERM | libc::EROFS))
}

/// This endpoint's segment.
pub(super) struct OwnedSegment {
    name: String,
    cname: CString,
    /// The whole segment.
    pub map: Arc<Mapping>,
    /// Its header.
    pub header: SegHeader,
    linked: AtomicBool,
}

impl OwnedSegment {
    /// Create and initialise `/ferrocoll-<job>-<ep>` (an existing segment of a
    /// dead owner is replaced; one of a live owner is an error). Nothing is
    /// left behind on failure.
    pub fn create(job: &str, ep: usize, n_eps: usize, ring_size: u64, n_slots: u32) -> Result<OwnedSegment> {
        let name = segment_name(job, ep);
        let cn = cname(&name)?;
        let (ep32, n32) = match (u32::try_from(ep), u32::try_from(n_eps)) {
            (Ok(e), Ok(n)) => (e, n),
            _ => return Err(Error::invalid_param(format!("endpoint {ep} of {n_eps} is out of range"))),
        };
        let pid = std::process::id();
        let probe = probe_token(pid, ep);
        let header = SegHeader::layout(pid, ep32, n32, ring_size, n_slots, page_size(), probe)?;
        let total = header.total_len()?;
        check_space(total)?;
        let fd = create_excl(&cn, &name)?;
        // From here on the name exists: unlink it on every error path.
        let made = (|| -> Result<Arc<Mapping>> {
            let len = libc::off_t::try_from(total).map_err(|_| Error::invalid_param("segment too large"))?;
            // SAFETY: fd is our freshly created object; ftruncate only sizes it.
            if unsafe { libc::ftruncate(fd.as_raw_fd(), len) } != 0 {
                let e = io::Error::last_os_error();
                return Err(Error::no_resource(format!("sizing {name} to {total} bytes: {e}")));
            }
            let map = Mapping::map(&fd, 0, total as usize)
                .map_err(|e| Error::no_resource(format!("mapping {name} ({total} bytes): {e}")))?;
            let bytes = header.encode();
            // SAFETY: the mapping is at least HEADER_LEN bytes (the layout puts
            // the state word past it) and no other process has the name yet
            // (O_EXCL), so nobody reads these bytes while we write them.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), map.ptr(), bytes.len()) };
            // Relaxed: peers learn the segment exists only through the OOB
            // address exchange, which orders everything written before it.
            map.u32_at(wire::H_STATE)?.store(wire::SEG_OPEN, Ordering::Relaxed);
            Ok(Arc::new(map))
        })();
        match made {
            Ok(map) => Ok(OwnedSegment { name, cname: cn, map, header, linked: AtomicBool::new(true) }),
            Err(e) => {
                let _ = shm_unlink(&cn);
                Err(e)
            }
        }
    }

    /// The name, with its leading `/`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The address of the probe word in this process.
    pub fn probe_addr(&self) -> u64 {
        self.map.ptr().wrapping_add(wire::H_PROBE) as u64
    }

    /// Remove the name (idempotent): the memory stays until every process unmaps it.
    pub fn unlink(&self) -> Result<()> {
        if !self.linked.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        shm_unlink(&self.cname).map_err(|e| Error::io(format!("unlinking {}: {e}", self.name)))
    }

    /// Mark the segment closed cleanly, for peers that read its state.
    pub fn mark_closed(&self) {
        if let Ok(state) = self.map.u32_at(wire::H_STATE) {
            // Release: a peer that Acquire-loads CLOSED sees every record this
            // endpoint pushed before closing.
            state.store(wire::SEG_CLOSED, Ordering::Release);
        }
    }
}

impl Drop for OwnedSegment {
    fn drop(&mut self) {
        if let Err(e) = self.unlink() {
            ferrocoll_core::log_debug!("shm: {}", e.context());
        }
    }
}

fn probe_token(pid: u32, ep: usize) -> u64 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    (t as u64) ^ (u64::from(pid) << 32) ^ (ep as u64).rotate_left(17) ^ wire::MAGIC
}

/// `/dev/shm` must hold the whole segment: tmpfs allocates pages on first
/// touch, and a touch past its capacity is a SIGBUS, not an error.
fn check_space(total: u64) -> Result<()> {
    let path = c"/dev/shm";
    // SAFETY: an all-zero statvfs is a valid value of this plain C struct.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: path is NUL-terminated and `st` is a writable statvfs.
    if unsafe { libc::statvfs(path.as_ptr(), &mut st) } != 0 {
        return Err(Error::not_supported(format!("/dev/shm is not available: {}", io::Error::last_os_error())));
    }
    let free = (st.f_bavail as u64).saturating_mul(st.f_frsize as u64);
    if free < total {
        return Err(Error::not_supported(format!(
            "/dev/shm has {free} bytes free, a segment needs {total} (UCC_TL_P2P_SHM_RING_SIZE × group size)"
        )));
    }
    Ok(())
}

fn create_excl(cn: &CString, name: &str) -> Result<OwnedFd> {
    let flags = libc::O_CREAT | libc::O_EXCL | libc::O_RDWR;
    match shm_open(cn, flags) {
        Ok(fd) => Ok(fd),
        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
            // A crashed run of the same job may have left it: replace it if its owner is gone.
            let owner = shm_open(cn, libc::O_RDONLY).ok().and_then(|fd| read_header(&fd).ok());
            let owner_pid = owner
                .filter(|b| b[..8] == wire::MAGIC.to_le_bytes())
                .map(|b| u32::from_le_bytes([b[12], b[13], b[14], b[15]]));
            match owner_pid {
                Some(pid) if liveness::process_gone(pid) => {
                    ferrocoll_core::log_debug!("shm: replacing {name}, left behind by pid {pid}");
                    let _ = shm_unlink(cn);
                    shm_open(cn, flags).map_err(|e| Error::io(format!("creating {name}: {e}")))
                }
                Some(pid) => Err(Error::no_resource(format!(
                    "shared-memory segment {name} exists and its owner (pid {pid}) is alive: is the job name reused?"
                ))),
                None => Err(Error::no_resource(format!(
                    "shared-memory segment {name} exists and has no readable header (being created by another \
                     process?)"
                ))),
            }
        }
        Err(e) if unavailable(&e) => Err(Error::not_supported(format!("cannot create {name} in /dev/shm: {e}"))),
        Err(e) => Err(Error::io(format!("creating {name}: {e}"))),
    }
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

/// Open and map peer `peer_ep`'s segment `name`, checking that it belongs to
/// `pid`, has `n_eps` rings and is not closed.
pub(super) fn open_peer(name: &str, pid: u32, peer_ep: usize, n_eps: usize, my_ep: usize) -> Result<PeerSegment> {
    let cn = cname(name)?;
    let fd = shm_open(&cn, libc::O_RDWR).map_err(|e| Error::io(format!("opening {name}: {e}")))?;
    let raw = read_header(&fd).map_err(|e| Error::io(format!("reading the header of {name}: {e}")))?;
    let header = SegHeader::parse(&raw, page_size()).map_err(|e| e.prefixed(name))?;
    if header.pid != pid || header.ep as usize != peer_ep || header.n_eps as usize != n_eps {
        return Err(Error::io(format!(
            "{name} belongs to endpoint {} of {} (pid {}), expected endpoint {peer_ep} of {n_eps} (pid {pid})",
            header.ep, header.n_eps, header.pid
        )));
    }
    let total = header.total_len()?;
    let actual = file_len(&fd).map_err(|e| Error::io(format!("size of {name}: {e}")))?;
    if actual != total {
        return Err(Error::io(format!("{name} has {actual} bytes, its header says {total}")));
    }
    let map = |off: u64, len: u64| {
        Mapping::map(&fd, off, len as usize).map(Arc::new).map_err(|e| Error::io(format!("mapping {name}: {e}")))
    };
    let meta = map(0, header.rings_off)?;
    let ring = map(header.ring_off(my_ep)?, header.ring_stride)?;
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
    fn names_are_sanitised_and_short() {
        assert_eq!(segment_name("t1a-2", 3), "/ferrocoll-t1a-2-3");
        assert_eq!(segment_name("a/b c", 0), "/ferrocoll-a_b_c-0");
        let long = "x".repeat(300);
        let n = segment_name(&long, 12);
        assert!(n.len() < 90, "{n}");
        assert_ne!(n, segment_name(&format!("{long}y"), 12));
    }

    #[test]
    fn create_open_unlink() {
        let job = format!("segtest{}", std::process::id());
        let seg = OwnedSegment::create(&job, 1, 2, 4096, 8).unwrap();
        let path = format!("/dev/shm{}", seg.name());
        assert!(std::path::Path::new(&path).exists());
        // A second creation with the same name while the owner lives is refused.
        assert!(OwnedSegment::create(&job, 1, 2, 4096, 8).is_err());
        let peer = open_peer(seg.name(), std::process::id(), 1, 2, 0).unwrap();
        assert_eq!(peer.header, seg.header);
        assert!(open_peer(seg.name(), std::process::id() + 1, 1, 2, 0).is_err());
        assert!(open_peer(seg.name(), std::process::id(), 0, 2, 0).is_err());
        seg.mark_closed();
        let e = open_peer(seg.name(), std::process::id(), 1, 2, 0).err().unwrap().to_string();
        assert!(e.contains("not open"), "{e}");
        seg.unlink().unwrap();
        assert!(!std::path::Path::new(&path).exists());
        seg.unlink().unwrap();
        drop(seg);
    }
}
