//! A team's shared segment: POSIX shared memory, private to the job (mode
//! 0600), created by team rank 0 and mapped by every member, then unlinked
//! once everyone is attached, so nothing remains after the team is gone.

use std::ffi::CString;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use ferrocoll_core::{Error, MemRef, MemType, Result};

use super::layout::{LINE, Layout};

const MAGIC: u64 = 0x6665_7272_6f73_686d; // "ferroshm"
const VERSION: u32 = 1;

/// The first line of a segment.
#[repr(C)]
struct Header {
    /// MAGIC once the creator has written everything else (Release/Acquire).
    magic: AtomicU64,
    version: AtomicU32,
    ranks: AtomicU32,
    data: AtomicU64,
    /// Members other than the creator that have mapped the segment.
    attached: AtomicU32,
}

/// A rank's control line: counters only that rank writes, that everyone reads.
#[repr(C)]
pub(crate) struct Ctrl {
    /// Last epoch whose data this rank has published.
    pub arrive: AtomicU64,
    /// Last epoch whose reduced results this rank has published.
    pub reduced: AtomicU64,
    /// Last epoch this rank has finished reading.
    pub done: AtomicU64,
    /// The rank's process id (for liveness checks).
    pub pid: AtomicU64,
    /// Set when the rank destroyed its team.
    pub left: AtomicU64,
}

const _: () = assert!(std::mem::size_of::<Ctrl>() <= LINE && std::mem::size_of::<Header>() <= LINE);

/// A mapped team segment.
pub(crate) struct Segment {
    base: *mut u8,
    len: usize,
    layout: Layout,
    /// Still to unlink (the creator, until everyone attached).
    name: Option<CString>,
}

// SAFETY: the mapping is shared memory accessed only through atomics (header,
// control lines) or through MemRefs whose users follow the epoch protocol
// (a rank writes only its own area, and only while no one reads it); the raw
// pointer itself is only an address.
unsafe impl Send for Segment {}
// SAFETY: as for Send: shared access goes through atomics or the epoch protocol.
unsafe impl Sync for Segment {}

fn os_err(what: &str, name: &CString) -> Error {
    Error::no_resource(format!("{what} {}: {}", name.to_string_lossy(), std::io::Error::last_os_error()))
}

/// mmap `len` bytes of `fd`, shared, read-write.
fn map(fd: libc::c_int, len: usize, name: &CString) -> Result<*mut u8> {
    // SAFETY: mapping a fresh region (addr NULL) of an open shm fd; the result
    // is checked against MAP_FAILED before use.
    let p =
        unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0) };
    if p == libc::MAP_FAILED { Err(os_err("mmap of", name)) } else { Ok(p.cast()) }
}

impl Segment {
    /// The name of a team's segment.
    pub(crate) fn name(job: &str, team: u64) -> Result<CString> {
        let job: String =
            job.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_').take(40).collect();
        CString::new(format!("/ferrocoll-{job}-s{team:x}")).map_err(|e| Error::internal(e.to_string()))
    }

    /// Create the segment (team rank 0). A stale segment of the same name
    /// (from a crashed run of the same job) is replaced.
    pub(crate) fn create(name: CString, layout: Layout) -> Result<Segment> {
        let flags = libc::O_CREAT | libc::O_EXCL | libc::O_RDWR;
        // SAFETY: name is a valid NUL-terminated string; the fd is checked.
        let mut fd = unsafe { libc::shm_open(name.as_ptr(), flags, 0o600) };
        if fd < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EEXIST) {
            // SAFETY: as above.
            unsafe { libc::shm_unlink(name.as_ptr()) };
            // SAFETY: as above.
            fd = unsafe { libc::shm_open(name.as_ptr(), flags, 0o600) };
        }
        if fd < 0 {
            return Err(os_err("shm_open (create) of", &name));
        }
        let len = layout.total();
        // SAFETY: fd is an open shm fd we own.
        let sized = unsafe { libc::ftruncate(fd, len as libc::off_t) } == 0;
        let mapped = if sized { map(fd, len, &name) } else { Err(os_err("ftruncate of", &name)) };
        // SAFETY: fd is ours; the mapping (if any) keeps the memory alive.
        unsafe { libc::close(fd) };
        let base = match mapped {
            Ok(b) => b,
            Err(e) => {
                // SAFETY: valid name; remove what we created.
                unsafe { libc::shm_unlink(name.as_ptr()) };
                return Err(e);
            }
        };
        let seg = Segment { base, len, layout, name: Some(name) };
        let h = seg.header();
        h.version.store(VERSION, Ordering::Relaxed);
        h.ranks.store(layout.ranks as u32, Ordering::Relaxed);
        h.data.store(layout.data as u64, Ordering::Relaxed);
        // Release: openers that see MAGIC (Acquire) see the fields above.
        h.magic.store(MAGIC, Ordering::Release);
        Ok(seg)
    }

    /// Map the segment if its creator has finished writing it (`Ok(None)`: not yet).
    pub(crate) fn open(name: &CString, ranks: usize) -> Result<Option<Segment>> {
        // SAFETY: valid name; fd checked.
        let fd = unsafe { libc::shm_open(name.as_ptr(), libc::O_RDWR, 0) };
        if fd < 0 {
            return match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::ENOENT) => Ok(None),
                _ => Err(os_err("shm_open of", name)),
            };
        }
        let result = Segment::open_fd(fd, name, ranks);
        // SAFETY: fd is ours.
        unsafe { libc::close(fd) };
        result
    }

    fn open_fd(fd: libc::c_int, name: &CString, ranks: usize) -> Result<Option<Segment>> {
        // SAFETY: a zeroed stat is a valid out-parameter for fstat.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fd is open; st is a valid out-parameter.
        if unsafe { libc::fstat(fd, &mut st) } != 0 {
            return Err(os_err("fstat of", name));
        }
        let size = usize::try_from(st.st_size).unwrap_or(0);
        if size < LINE {
            return Ok(None); // created but not sized yet
        }
        let head = map(fd, LINE, name)?;
        let peek = Segment { base: head, len: LINE, layout: Layout::new(ranks, LINE), name: None };
        let h = peek.header();
        // Acquire: pairs with the creator's Release of MAGIC.
        if h.magic.load(Ordering::Acquire) != MAGIC {
            return Ok(None);
        }
        let (version, seg_ranks, data) = (
            h.version.load(Ordering::Relaxed),
            h.ranks.load(Ordering::Relaxed) as usize,
            h.data.load(Ordering::Relaxed),
        );
        drop(peek);
        if version != VERSION || seg_ranks != ranks {
            return Err(Error::invalid_param(format!(
                "segment {} has version {version} for {seg_ranks} ranks; this rank expects version {VERSION} for {ranks}",
                name.to_string_lossy()
            )));
        }
        let layout = Layout::new(ranks, data as usize);
        if size < layout.total() {
            return Err(Error::io(format!(
                "segment {} has {size} bytes, less than its layout's {}",
                name.to_string_lossy(),
                layout.total()
            )));
        }
        let base = map(fd, layout.total(), name)?;
        let seg = Segment { base, len: layout.total(), layout, name: None };
        // AcqRel: the creator's Acquire load of the count sees our mapping done.
        seg.header().attached.fetch_add(1, Ordering::AcqRel);
        Ok(Some(seg))
    }

    fn header(&self) -> &Header {
        // SAFETY: the mapping starts with a LINE-sized, page-aligned Header made
        // of atomics, valid for as long as self (it is unmapped in Drop).
        unsafe { &*self.base.cast::<Header>() }
    }

    /// The geometry.
    pub(crate) fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Members that have mapped the segment (the creator not counted).
    pub(crate) fn attached(&self) -> usize {
        // Acquire: see open_fd.
        self.header().attached.load(Ordering::Acquire) as usize
    }

    /// Remove the name (the creator, once everyone is attached).
    pub(crate) fn unlink(&mut self) {
        if let Some(name) = self.name.take() {
            // SAFETY: valid name.
            unsafe { libc::shm_unlink(name.as_ptr()) };
        }
    }

    /// Rank `r`'s control line.
    pub(crate) fn ctrl(&self, r: usize) -> Result<&Ctrl> {
        let off = self.layout.ctrl(r);
        if r >= self.layout.ranks || off + LINE > self.len {
            return Err(Error::internal(format!("control line of rank {r} in a team of {}", self.layout.ranks)));
        }
        // SAFETY: in bounds (checked), LINE-aligned (the mapping is page-aligned
        // and offsets are multiples of LINE), and Ctrl is made of atomics, which
        // every process may access concurrently; valid for as long as self.
        Ok(unsafe { &*self.base.add(off).cast::<Ctrl>() })
    }

    fn region(&self, off: usize, len: usize) -> Result<MemRef> {
        if off + len > self.len {
            return Err(Error::internal(format!("region {off}+{len} outside a segment of {}", self.len)));
        }
        // SAFETY: in bounds of our mapping, which lives as long as the team (and
        // the tasks that use these MemRefs hold the team); who writes and reads
        // when is the epoch protocol's business (see the module docs).
        Ok(unsafe { MemRef::new(self.base.add(off), len, MemType::Host) })
    }

    /// Rank `r`'s data part for `epoch`.
    pub(crate) fn data(&self, r: usize, epoch: u64) -> Result<MemRef> {
        self.region(self.layout.data_at(r, epoch), self.layout.data)
    }

    /// Rank `r`'s results part for `epoch`.
    pub(crate) fn results(&self, r: usize, epoch: u64) -> Result<MemRef> {
        self.region(self.layout.results_at(r, epoch), self.layout.results)
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        self.unlink();
        // SAFETY: base/len are exactly what mmap returned; nothing uses the
        // mapping after the segment is dropped (tasks hold the team alive).
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}
