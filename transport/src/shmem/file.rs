//! [`ShmFile`]: creating and opening segments, with the checks that keep
//! them private to the job; [`ShmName`]: a created name, unlinked on drop.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

use ferrocoll_core::{Error, Result};

use super::mapping::{Mapping, page_size};
use super::name::SHM_DIR;

/// What [`ShmFile::create`] does when the name exists already (a crashed
/// run of the same job may have left it).
pub enum IfExists<'a> {
    /// Unlink whatever holds the name and create anew.
    Replace,
    /// Open what holds the name (refused, as by [`ShmFile::open`], unless
    /// this effective uid owns it privately) and replace it if `check`
    /// returns `Ok`; fail with `check`'s error otherwise.
    ReplaceIf(&'a dyn Fn(&ShmFile) -> Result<()>),
}

/// An open shared-memory segment.
pub struct ShmFile {
    fd: OwnedFd,
    name: String,
}

/// A segment name this process created: unlinked when dropped, unless
/// [`ShmName::unlink`] did it before.
pub struct ShmName {
    name: String,
    cname: CString,
    linked: AtomicBool,
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

/// An error creating `name`: `NotSupported` when it means "no usable shared
/// memory here" (no /dev/shm, no permission, read-only) rather than a fault.
fn create_error(name: &str, e: &io::Error) -> Error {
    match e.raw_os_error() {
        Some(libc::ENOENT | libc::ENOSYS | libc::EACCES | libc::EPERM | libc::EROFS) => {
            Error::not_supported(format!("cannot create {name} in {SHM_DIR}: {e}"))
        }
        _ => Error::io(format!("creating {name}: {e}")),
    }
}

/// `/dev/shm` must hold the whole segment: tmpfs allocates pages on first
/// touch, and a touch past its capacity is a SIGBUS, not an error.
fn check_space(name: &str, size: u64) -> Result<()> {
    let dir = CString::new(SHM_DIR).map_err(|_| Error::internal("SHM_DIR contains a NUL"))?;
    // SAFETY: an all-zero statvfs is a valid value of this plain C struct.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: dir is NUL-terminated and `st` is a writable statvfs.
    if unsafe { libc::statvfs(dir.as_ptr(), &mut st) } != 0 {
        return Err(Error::not_supported(format!("{SHM_DIR} is not available: {}", io::Error::last_os_error())));
    }
    let free = (st.f_bavail as u64).saturating_mul(st.f_frsize as u64);
    if free < size {
        return Err(Error::not_supported(format!("{SHM_DIR} has {free} bytes free, {name} needs {size}")));
    }
    Ok(())
}

fn create_excl(cn: &CString, name: &str, if_exists: IfExists<'_>) -> Result<OwnedFd> {
    let flags = libc::O_CREAT | libc::O_EXCL | libc::O_RDWR;
    match shm_open(cn, flags) {
        Ok(fd) => return Ok(fd),
        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
        Err(e) => return Err(create_error(name, &e)),
    }
    if let IfExists::ReplaceIf(check) = if_exists {
        // Gone since (its creator unlinked it): nothing to check or remove.
        if let Some(old) = ShmFile::open(name)? {
            check(&old)?;
            // Best effort: if it fails (someone else's file in a sticky
            // /dev/shm), the exclusive create below says so.
            let _ = shm_unlink(cn);
        }
    } else {
        let _ = shm_unlink(cn);
    }
    shm_open(cn, flags).map_err(|e| create_error(name, &e))
}

impl ShmFile {
    /// Create segment `name` (`/ferrocoll-…`, see
    /// [`segment_name`](super::segment_name)) of `size` bytes, exclusively,
    /// mode 0600, after checking that `/dev/shm` has room for all of it. A
    /// name that exists is handled as `if_exists` says. The name comes back
    /// owned: dropping it (on any error path of the caller too) unlinks it.
    ///
    /// `NotSupported` when shared memory is unusable here (no `/dev/shm`, no
    /// permission, too little space).
    pub fn create(name: &str, size: u64, if_exists: IfExists<'_>) -> Result<(ShmFile, ShmName)> {
        let cn = cname(name)?;
        let len = libc::off_t::try_from(size).ok().filter(|&l| l > 0).ok_or_else(|| {
            Error::invalid_param(format!("segment {name} of {size} bytes: the size must be 1 to 2^63-1"))
        })?;
        check_space(name, size)?;
        let fd = create_excl(&cn, name, if_exists)?;
        // From here on the name exists: `owned` unlinks it on every error path.
        let owned = ShmName { name: name.to_string(), cname: cn, linked: AtomicBool::new(true) };
        // SAFETY: fd is our freshly created object; ftruncate only sizes it.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), len) } != 0 {
            let e = io::Error::last_os_error();
            return Err(Error::no_resource(format!("sizing {name} to {size} bytes: {e}")));
        }
        Ok((ShmFile { fd, name: name.to_string() }, owned))
    }

    /// Open the existing segment `name` for reading and writing; `Ok(None)`
    /// if there is none (not created yet, or unlinked). Refused unless this
    /// process's effective uid owns it and its mode grants nothing to group
    /// or others: every ferrocoll segment is created so, and anything else
    /// was planted by someone else.
    pub fn open(name: &str) -> Result<Option<ShmFile>> {
        let cn = cname(name)?;
        let fd = match shm_open(&cn, libc::O_RDWR) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
            Err(e) => return Err(Error::io(format!("opening {name}: {e}"))),
        };
        let file = ShmFile { fd, name: name.to_string() };
        let st = file.stat()?;
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        let mode = st.st_mode & 0o7777;
        if st.st_uid != me || mode & 0o077 != 0 {
            return Err(Error::io(format!(
                "refusing shared-memory segment {name}: it belongs to uid {} with mode {mode:04o}, but a segment \
                 of this job belongs to uid {me} (this process) with mode 0600",
                st.st_uid
            )));
        }
        Ok(Some(file))
    }

    /// The name, with its leading `/`.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn stat(&self) -> Result<libc::stat> {
        // SAFETY: an all-zero stat is a valid value of this plain C struct.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: the descriptor is open (owned by self) and `st` is a writable stat.
        if unsafe { libc::fstat(self.fd.as_raw_fd(), &mut st) } != 0 {
            return Err(Error::io(format!("fstat of {}: {}", self.name, io::Error::last_os_error())));
        }
        Ok(st)
    }

    /// The segment's size in bytes now (0 while its creator has not sized it).
    pub fn size(&self) -> Result<u64> {
        let st = self.stat()?;
        u64::try_from(st.st_size).map_err(|_| Error::io(format!("{} has a negative size {}", self.name, st.st_size)))
    }

    /// Read exactly `buf.len()` bytes at `offset` (e.g. a header, before
    /// deciding what to map).
    pub fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let len = buf.len();
        let what = || format!("reading {len} bytes at offset {offset} of {}", self.name);
        let off =
            libc::off_t::try_from(offset).map_err(|_| Error::invalid_param(format!("{}: offset too large", what())))?;
        // SAFETY: `buf` is a writable buffer of buf.len() bytes that this call borrows mutably.
        let n = unsafe { libc::pread(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), len, off) };
        if n < 0 {
            return Err(Error::io(format!("{}: {}", what(), io::Error::last_os_error())));
        }
        if n as usize != len {
            return Err(Error::io(format!("{}: the segment holds only {n} there", what())));
        }
        Ok(())
    }

    /// Map `len` bytes from `offset` (a multiple of the page size), shared
    /// and read-write. The range must lie within the segment as it is now:
    /// touching a mapping past the end of its file is a SIGBUS.
    pub fn map(&self, offset: u64, len: u64) -> Result<Mapping> {
        let name = &self.name;
        let what = || format!("mapping {len} bytes at offset {offset} of {name}");
        let end = offset
            .checked_add(len)
            .ok_or_else(|| Error::invalid_param(format!("{}: the end overflows 64 bits", what())))?;
        let size = self.size()?;
        if len == 0 || end > size {
            return Err(Error::io(format!("{}, which has {size} bytes", what())));
        }
        let page = page_size();
        if !offset.is_multiple_of(page) {
            return Err(Error::internal(format!("{}: the offset is not a multiple of the page size {page}", what())));
        }
        let (Ok(off), Ok(n)) = (libc::off_t::try_from(offset), usize::try_from(len)) else {
            return Err(Error::invalid_param(format!("{}: too large for this system", what())));
        };
        Mapping::new(&self.fd, off, n).map_err(|e| Error::no_resource(format!("{}: {e}", what())))
    }
}

impl ShmName {
    /// The name, with its leading `/`.
    pub fn as_str(&self) -> &str {
        &self.name
    }

    /// Remove the name (idempotent): the memory stays until every process
    /// unmaps it, and nothing is left in `/dev/shm` if one crashes after.
    pub fn unlink(&self) -> Result<()> {
        if !self.linked.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        shm_unlink(&self.cname).map_err(|e| Error::io(format!("unlinking {}: {e}", self.name)))
    }
}

impl Drop for ShmName {
    fn drop(&mut self) {
        if let Err(e) = self.unlink() {
            ferrocoll_core::log_debug!("shm: {}", e.context());
        }
    }
}
