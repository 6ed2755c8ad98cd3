//! The caller's out-of-band allgather (`ucc_oob_coll_t`) as ferrocoll's
//! [`Oob`].
//!
//! UCC's allgather moves the same number of bytes from every endpoint;
//! ferrocoll's moves byte strings of any length (each endpoint's address
//! differs in size). [`CollOob`] therefore runs two of the caller's
//! allgathers per ferrocoll allgather: the lengths (8 bytes each), then
//! every string padded to the longest.

use std::ffi::c_void;
use std::hash::{Hash, Hasher};
use std::task::Poll;
use std::time::Duration;

use ferrocoll::{Error, Oob, OobRequest, Result};

use crate::abi::{OobColl, UCC_INPROGRESS, UCC_OK};

/// Longest string an endpoint may contribute (a context address is a few
/// hundred bytes): a length past it came from a broken OOB.
const MAX_CONTRIBUTION: u64 = 1 << 24;

/// The caller's callbacks, checked.
#[derive(Clone, Copy)]
pub(crate) struct RawOob {
    oob: OobColl,
}

// SAFETY: UCC's contract for the OOB is that its callbacks may be called
// from the thread that creates the context or team (ferrocoll calls them
// only from inside ucc_context_create, ucc_team_create_post and
// ucc_team_create_test, on the caller's thread); `coll_info` is the
// caller's and is only passed back to the caller's callbacks.
unsafe impl Send for RawOob {}
// SAFETY: as for Send: the struct is only read.
unsafe impl Sync for RawOob {}

impl RawOob {
    /// Check the callbacks and the endpoint numbers; `what` names the parameter in errors.
    pub(crate) fn new(oob: OobColl, what: &str) -> Result<RawOob> {
        if oob.allgather.is_none() || oob.req_test.is_none() || oob.req_free.is_none() {
            return Err(Error::invalid_param(format!(
                "{what}: allgather, req_test and req_free must all be set (allgather {}, req_test {}, req_free {})",
                set(oob.allgather.is_some()),
                set(oob.req_test.is_some()),
                set(oob.req_free.is_some())
            )));
        }
        if oob.n_oob_eps == 0 || oob.oob_ep >= oob.n_oob_eps {
            return Err(Error::invalid_param(format!(
                "{what}: oob_ep {} is not below n_oob_eps {}",
                oob.oob_ep, oob.n_oob_eps
            )));
        }
        Ok(RawOob { oob })
    }

    /// This endpoint.
    pub(crate) fn rank(&self) -> usize {
        self.oob.oob_ep as usize
    }

    /// Number of endpoints.
    pub(crate) fn size(&self) -> usize {
        self.oob.n_oob_eps as usize
    }

    /// Post an allgather of `src` (the same length on every endpoint).
    ///
    /// An empty one (a barrier) is posted as one byte per endpoint: an
    /// empty Vec's pointer is dangling, and its value (1) is `MPI_IN_PLACE`,
    /// which an OOB over `MPI_Iallgather` (Open MPI's coll/ucc) passes on
    /// and MPI refuses; other OOBs need not accept zero bytes either.
    pub(crate) fn allgather(&self, src: Vec<u8>) -> Result<Fixed> {
        let barrier = src.is_empty();
        let src = if barrier { vec![0] } else { src };
        let total = src
            .len()
            .checked_mul(self.size())
            .ok_or_else(|| Error::invalid_param(format!("OOB allgather of {} bytes overflows", src.len())))?;
        // Fallible: n_oob_eps is the caller's, and a failed allocation must
        // be an error, not an abort of the process.
        let mut recv = Vec::new();
        recv.try_reserve_exact(total).map_err(|_| {
            Error::no_memory(format!(
                "OOB allgather of {} bytes from each of n_oob_eps {} endpoints: {total} bytes cannot be allocated",
                src.len(),
                self.size()
            ))
        })?;
        recv.resize(total, 0);
        let mut f = Fixed { oob: *self, src, recv, req: std::ptr::null_mut(), state: State::Posted, barrier };
        let Some(allgather) = self.oob.allgather else { return Err(Error::internal("OOB allgather vanished")) };
        // SAFETY: the callbacks were checked non-null; `src` and `recv` are
        // owned by `f` and are not moved or freed while the request lives
        // (`Fixed` leaks them if dropped before completion, see its Drop).
        let st = unsafe {
            allgather(
                f.src.as_mut_ptr().cast(),
                f.recv.as_mut_ptr().cast(),
                f.src.len(),
                self.oob.coll_info,
                &mut f.req,
            )
        };
        if st != UCC_OK {
            f.state = State::Failed;
            return Err(Error::io(format!("the OOB allgather callback returned status {st}")));
        }
        Ok(f)
    }
}

fn set(b: bool) -> &'static str {
    if b { "set" } else { "NULL" }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    Posted,
    Done,
    Failed,
}

/// One posted allgather of the caller's (equal lengths).
pub(crate) struct Fixed {
    oob: RawOob,
    src: Vec<u8>,
    recv: Vec<u8>,
    req: *mut c_void,
    state: State,
    /// Posted for an empty contribution (its one byte is not returned).
    barrier: bool,
}

// SAFETY: the request pointer is the caller's and is only passed back to
// its callbacks (see RawOob).
unsafe impl Send for Fixed {}

impl Fixed {
    /// `Ready(Ok(bytes))` with every endpoint's contribution, in endpoint order.
    pub(crate) fn test(&mut self) -> Poll<Result<Vec<u8>>> {
        match self.state {
            State::Done => return Poll::Ready(Err(Error::invalid_param("OOB request tested after it completed"))),
            State::Failed => return Poll::Ready(Err(Error::io("OOB request tested after it failed"))),
            State::Posted => {}
        }
        let Some(req_test) = self.oob.oob.req_test else { return Poll::Ready(Err(Error::internal("no req_test"))) };
        // SAFETY: checked non-null at construction; `req` is what allgather returned.
        let st = unsafe { req_test(self.req) };
        if st == UCC_INPROGRESS {
            return Poll::Pending;
        }
        self.free();
        if st != UCC_OK {
            self.state = State::Failed;
            return Poll::Ready(Err(Error::io(format!("the OOB req_test callback returned status {st}"))));
        }
        self.state = State::Done;
        let recv = std::mem::take(&mut self.recv);
        Poll::Ready(Ok(if self.barrier { Vec::new() } else { recv }))
    }

    fn free(&mut self) {
        if let Some(req_free) = self.oob.oob.req_free {
            // SAFETY: checked non-null; called once per request, after its last test.
            let st = unsafe { req_free(self.req) };
            if st != UCC_OK {
                ferrocoll::core::log_warn!("the OOB req_free callback returned status {st}");
            }
        }
    }
}

impl Drop for Fixed {
    fn drop(&mut self) {
        if self.state == State::Posted {
            // Abandoned in flight (a timeout): the caller's allgather may still
            // write into `recv` and read `src`, so they are leaked rather than
            // freed, and the request is not freed under its feet.
            std::mem::forget(std::mem::take(&mut self.src));
            std::mem::forget(std::mem::take(&mut self.recv));
        }
    }
}

/// ferrocoll's [`Oob`] over the caller's callbacks (a context's bootstrap).
pub(crate) struct CollOob {
    raw: RawOob,
    /// The job's name, agreed by every endpoint ([`CollOob::agree_on_job`]).
    job: String,
}

impl CollOob {
    /// Wrap checked callbacks, first agreeing on a name for the job over
    /// them (blocking, at most `timeout`).
    ///
    /// ferrocoll names a job's shared resources (the shm TL's segments)
    /// after its OOB's job id, which every endpoint must see alike; a UCC
    /// OOB has none, so the endpoints make one: each contributes its host,
    /// process and a clock reading, and the name is a hash of them all.
    pub(crate) fn agree_on_job(raw: RawOob, timeout: Option<Duration>) -> Result<CollOob> {
        let mut probe = CollOob::unnamed(raw);
        let all = ferrocoll::core::oob::allgather_blocking(&probe, job_part(raw.rank()).as_bytes(), timeout)
            .map_err(|e| e.prefixed("agreeing on a job name over the OOB"))?;
        probe.job = job_name(&all);
        Ok(probe)
    }

    /// The callbacks without a job name yet (its allgathers work; a
    /// context made over it must be given a name by other means).
    pub(crate) fn unnamed(raw: RawOob) -> CollOob {
        CollOob { raw, job: String::new() }
    }
}

/// What endpoint `rank` contributes to the job's name: its process and a clock reading.
pub(crate) fn job_part(rank: usize) -> String {
    format!(
        "{}:{}:{:?}",
        std::process::id(),
        rank,
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default()
    )
}

/// The job's name from every endpoint's [`job_part`], the same on each.
pub(crate) fn job_name(all: &[Vec<u8>]) -> String {
    // Every endpoint runs this same build, so the std hasher (fixed keys) agrees.
    let mut h = std::hash::DefaultHasher::new();
    all.hash(&mut h);
    format!("u{:x}", h.finish())
}

impl Oob for CollOob {
    fn rank(&self) -> usize {
        self.raw.rank()
    }

    fn size(&self) -> usize {
        self.raw.size()
    }

    fn allgather(&self, data: &[u8]) -> Result<Box<dyn OobRequest>> {
        let len = (data.len() as u64).to_le_bytes().to_vec();
        let lengths = self.raw.allgather(len)?;
        Ok(Box::new(TwoPhase { raw: self.raw, data: data.to_vec(), phase: Phase::Lengths(lengths) }))
    }

    fn job_id(&self) -> Option<String> {
        Some(self.job.clone())
    }
}

enum Phase {
    Lengths(Fixed),
    Data(Fixed, Vec<usize>),
    Over,
}

/// A variable-length allgather: lengths first, then the padded strings.
struct TwoPhase {
    raw: RawOob,
    data: Vec<u8>,
    phase: Phase,
}

impl OobRequest for TwoPhase {
    fn test(&mut self) -> Poll<Result<Vec<Vec<u8>>>> {
        loop {
            match &mut self.phase {
                Phase::Over => return Poll::Ready(Err(Error::invalid_param("OOB request tested after it completed"))),
                Phase::Lengths(f) => {
                    let bytes = match f.test() {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(r) => r,
                    };
                    let lens = match bytes.and_then(|b| lengths(&b, self.raw.size())) {
                        Ok(l) => l,
                        Err(e) => {
                            self.phase = Phase::Over;
                            return Poll::Ready(Err(e));
                        }
                    };
                    let max = lens.iter().copied().max().unwrap_or(0);
                    let mut padded = std::mem::take(&mut self.data);
                    padded.resize(max, 0);
                    match self.raw.allgather(padded) {
                        Ok(f) => self.phase = Phase::Data(f, lens),
                        Err(e) => {
                            self.phase = Phase::Over;
                            return Poll::Ready(Err(e));
                        }
                    }
                }
                Phase::Data(f, lens) => {
                    let bytes = match f.test() {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(r) => r,
                    };
                    let lens = std::mem::take(lens);
                    self.phase = Phase::Over;
                    return Poll::Ready(bytes.and_then(|b| split(&b, &lens)));
                }
            }
        }
    }
}

/// The lengths each endpoint announced (little-endian u64s), checked.
fn lengths(bytes: &[u8], n: usize) -> Result<Vec<usize>> {
    if bytes.len() != n * 8 {
        return Err(Error::io(format!("OOB allgather of lengths returned {} bytes, not {}", bytes.len(), n * 8)));
    }
    bytes
        .chunks_exact(8)
        .enumerate()
        .map(|(i, c)| {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            let len = u64::from_le_bytes(w);
            if len > MAX_CONTRIBUTION {
                return Err(Error::io(format!("OOB endpoint {i} announced {len} bytes, over {MAX_CONTRIBUTION}")));
            }
            Ok(len as usize)
        })
        .collect()
}

/// Every endpoint's string out of the padded allgather.
fn split(bytes: &[u8], lens: &[usize]) -> Result<Vec<Vec<u8>>> {
    let stride = lens.iter().copied().max().unwrap_or(0);
    if bytes.len() != stride * lens.len() {
        return Err(Error::io(format!(
            "OOB allgather returned {} bytes, not {} endpoints × {stride}",
            bytes.len(),
            lens.len()
        )));
    }
    Ok(lens.iter().enumerate().map(|(i, &l)| bytes[i * stride..i * stride + l].to_vec()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{UCC_ERR_INVALID_PARAM, UccStatus};

    /// One endpoint's allgather as MPI's would judge it: zero bytes or a
    /// buffer at address 1 (`MPI_IN_PLACE`) is an error.
    unsafe extern "C" fn mpi_like(
        src: *mut c_void,
        recv: *mut c_void,
        size: usize,
        _info: *mut c_void,
        req: *mut *mut c_void,
    ) -> UccStatus {
        if size == 0 || src as usize == 1 || recv as usize == 1 {
            return UCC_ERR_INVALID_PARAM;
        }
        // SAFETY: one endpoint: `recv` holds `size` bytes, as `src` does; `req` is writable.
        unsafe {
            std::ptr::copy_nonoverlapping(src.cast::<u8>(), recv.cast::<u8>(), size);
            *req = std::ptr::dangling_mut();
        }
        UCC_OK
    }

    unsafe extern "C" fn done(_req: *mut c_void) -> UccStatus {
        UCC_OK
    }

    #[test]
    fn an_empty_allgather_is_posted_as_one_byte() {
        let oob = OobColl {
            allgather: Some(mpi_like),
            req_test: Some(done),
            req_free: Some(done),
            coll_info: std::ptr::null_mut(),
            n_oob_eps: 1,
            oob_ep: 0,
        };
        let raw = RawOob::new(oob, "oob").unwrap_or_else(|e| panic!("{e}"));
        for data in [vec![], vec![7u8, 8]] {
            let mut f = raw.allgather(data.clone()).unwrap_or_else(|e| panic!("{} bytes: {e}", data.len()));
            let Poll::Ready(Ok(got)) = f.test() else { panic!("{} bytes: not done", data.len()) };
            assert_eq!(got, data);
        }
    }

    unsafe extern "C" fn must_not_post(
        _src: *mut c_void,
        _recv: *mut c_void,
        _size: usize,
        _info: *mut c_void,
        _req: *mut *mut c_void,
    ) -> UccStatus {
        UCC_ERR_INVALID_PARAM
    }

    /// n_oob_eps is the caller's: an allgather whose receive buffer cannot
    /// be allocated is `UCC_ERR_NO_MEMORY` before the callback is called,
    /// not an abort of the process (context creation's first allgather,
    /// with n_oob_eps = UINT32_MAX, asked for 32 GiB).
    #[test]
    fn an_allgather_too_large_to_allocate_is_an_error() {
        let oob = OobColl {
            allgather: Some(must_not_post),
            req_test: Some(done),
            req_free: Some(done),
            coll_info: std::ptr::null_mut(),
            n_oob_eps: u32::MAX,
            oob_ep: 0,
        };
        let raw = RawOob::new(oob, "oob").unwrap_or_else(|e| panic!("{e}"));
        // 64 MiB from each of 2^32 - 1 endpoints: past any address space.
        let Err(e) = raw.allgather(vec![0; 1 << 26]) else { panic!("an allocation of 2^58 bytes succeeded") };
        assert_eq!(e.status(), ferrocoll::Status::NoMemory, "{e}");
        assert!(e.context().contains("n_oob_eps 4294967295"), "{e}");
    }

    #[test]
    fn lengths_and_split() {
        let mut b = Vec::new();
        for l in [3u64, 0, 5] {
            b.extend_from_slice(&l.to_le_bytes());
        }
        let lens = lengths(&b, 3).unwrap();
        assert_eq!(lens, [3, 0, 5]);
        assert!(lengths(&b, 2).is_err());
        let mut huge = b.clone();
        huge[..8].copy_from_slice(&(MAX_CONTRIBUTION + 1).to_le_bytes());
        assert!(lengths(&huge, 3).unwrap_err().context().contains("endpoint 0"));
        let data = b"abc\0\0\0\0\0\0\0vwxyz";
        assert_eq!(split(data, &lens).unwrap(), vec![b"abc".to_vec(), vec![], b"vwxyz".to_vec()]);
        assert!(split(&data[..14], &lens).is_err());
    }
}
