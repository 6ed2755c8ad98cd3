//! Cross-memory attach: reading another process's memory with
//! `process_vm_readv` (one copy, no shared buffer). The kernel allows it when
//! the reader may ptrace the owner: same user and, on hosts with Yama
//! `ptrace_scope=1`, an owner that opted in with `PR_SET_PTRACER`.
//! The one layer over these calls: the shm transport's rendezvous and the
//! shm TL's single copy both use it.

use std::io;
use std::sync::OnceLock;

/// Let any process of this user read this one (Yama `ptrace_scope=1`), once per process.
pub fn allow_readers() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        // SAFETY: PR_SET_PTRACER takes a pid-like integer and touches no memory.
        let rc = unsafe { libc::prctl(libc::PR_SET_PTRACER, libc::PR_SET_PTRACER_ANY, 0, 0, 0) };
        if rc != 0 {
            // EINVAL: no Yama, nothing to allow.
            ferrocoll_core::log_debug!("shm: PR_SET_PTRACER: {}", io::Error::last_os_error());
        }
    });
}

/// Fill `dst` from `remote` in process `pid`, looping over partial reads.
pub fn read(pid: u32, remote: u64, dst: &mut [u8]) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?;
    let mut done = 0usize;
    while done < dst.len() {
        let rest = dst.len() - done;
        let local = libc::iovec { iov_base: dst[done..].as_mut_ptr().cast(), iov_len: rest };
        let from = remote.checked_add(done as u64).ok_or_else(|| io::Error::from_raw_os_error(libc::EFAULT))?;
        let remote_iov = libc::iovec { iov_base: from as usize as *mut libc::c_void, iov_len: rest };
        // SAFETY: `local` describes `rest` writable bytes of `dst`, which we
        // borrow mutably; the remote range is only read by the kernel, which
        // checks it against the other process's mappings.
        let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote_iov, 1, 0) };
        match n {
            n if n > 0 => done += n as usize,
            0 => return Err(io::Error::from_raw_os_error(libc::EFAULT)),
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    Ok(())
}

/// Whether this process can read process `pid`'s word at `addr`, expected to
/// hold `expect`; the reason when not.
pub fn probe(pid: u32, addr: u64, expect: u64) -> Result<(), String> {
    let mut word = [0u8; 8];
    match read(pid, addr, &mut word) {
        Ok(()) if u64::from_le_bytes(word) == expect => Ok(()),
        Ok(()) => Err("CMA read a wrong probe value".to_string()),
        Err(e) => Err(format!("CMA refused: {}", errno_name(&e))),
    }
}

/// `EPERM (Operation not permitted)` rather than only the text.
fn errno_name(e: &io::Error) -> String {
    let name = match e.raw_os_error() {
        Some(libc::EPERM) => "EPERM",
        Some(libc::ESRCH) => "ESRCH",
        Some(libc::EFAULT) => "EFAULT",
        Some(libc::ENOSYS) => "ENOSYS",
        Some(libc::EACCES) => "EACCES",
        _ => return e.to_string(),
    };
    format!("{name} ({e})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_memory_and_refuses_bad_addresses() {
        let src: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
        let mut dst = vec![0u8; src.len()];
        match read(std::process::id(), src.as_ptr() as u64, &mut dst) {
            // qemu-user has no process_vm_readv; a seccomp filter may refuse it.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) => {
                eprintln!("skipped: this host refuses CMA ({})", errno_name(&e));
                return;
            }
            r => r.unwrap(),
        }
        assert_eq!(dst, src);
        let word = 0x1234_5678_9abc_def0u64;
        assert!(probe(std::process::id(), &word as *const u64 as u64, word).is_ok());
        let e = probe(std::process::id(), 8, word).unwrap_err();
        assert!(e.contains("EFAULT"), "{e}");
        assert!(read(u32::MAX, 0, &mut [0u8; 1]).is_err());
    }
}
