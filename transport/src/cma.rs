//! Cross-memory attach: reading another process's memory with
//! `process_vm_readv` (one copy, no shared buffer). The kernel allows it when
//! the reader may ptrace the owner: same user and, on hosts with Yama
//! `ptrace_scope=1`, an owner that opted in with `PR_SET_PTRACER`.
//! The one layer over these calls: the shm transport's rendezvous and the
//! shm TL's single copy both use it.

use std::cell::RefCell;
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

/// Bytes a read through the bounce buffer moves per system call: a
/// multiple of the page, so that every call keeps the page offsets apart
/// by 0, and small enough to stay in a core's cache for the copy out.
const BOUNCE: usize = 256 << 10;

/// Fill `dst` from `remote` in process `pid`, looping over partial reads.
///
/// Where `dst` lies 1–63 bytes past `remote` modulo the page, the kernel's
/// copy (`rep movsb` on CPUs with FSRM) runs several times slower on AMD
/// Zen (`ferrocoll_core::host_copy`: a 2-rank allgather of 1 MiB + 4 bytes
/// a rank took 535 µs against 120 for 1 MiB on a family-25 AMD EPYC VM),
/// so such a read goes through a bounce buffer at the remote address's page
/// offset, 256 KiB a call, and a vector copy out of it.
pub fn read(pid: u32, remote: u64, dst: &mut [u8]) -> io::Result<()> {
    if ferrocoll_core::host_copy::page_aliased(dst.as_ptr() as usize, remote as usize, dst.len()) {
        return read_bounced(pid, remote, dst);
    }
    read_direct(pid, remote, dst)
}

/// [`read`] through this thread's bounce buffer.
fn read_bounced(pid: u32, remote: u64, dst: &mut [u8]) -> io::Result<()> {
    thread_local! {
        static BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }
    BUF.with(|buf| {
        let Ok(mut buf) = buf.try_borrow_mut() else { return read_direct(pid, remote, dst) };
        buf.resize(BOUNCE + 4096, 0);
        // Where in the buffer a byte at `remote`'s page offset lies.
        let at = (remote as usize).wrapping_sub(buf.as_ptr() as usize) % 4096;
        let mut done = 0;
        while done < dst.len() {
            let n = (dst.len() - done).min(BOUNCE);
            let from = remote.checked_add(done as u64).ok_or_else(|| io::Error::from_raw_os_error(libc::EFAULT))?;
            let bounce = &mut buf[at..at + n];
            read_direct(pid, from, bounce)?;
            // SAFETY: `bounce` and `dst[done..done + n]` are `n` bytes each,
            // one this thread's buffer, the other borrowed mutably here.
            unsafe { ferrocoll_core::host_copy::memmove(dst[done..].as_mut_ptr(), bounce.as_ptr(), n) };
            done += n;
        }
        Ok(())
    })
}

/// Fill `dst` from `remote` in process `pid` with `process_vm_readv`.
fn read_direct(pid: u32, remote: u64, dst: &mut [u8]) -> io::Result<()> {
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

    #[test]
    fn reads_into_a_destination_just_past_the_source_through_the_bounce() {
        let mut buf = vec![0u8; 3 << 20];
        let base = buf.as_ptr() as usize;
        let so = base.next_multiple_of(4096) - base;
        let len = BOUNCE * 2 + 1000;
        for (i, b) in buf[so..so + len].iter_mut().enumerate() {
            *b = (i % 253) as u8;
        }
        for gap in [4usize, 60, 64] {
            let dof = so + len.next_multiple_of(4096) + 4096 + gap;
            let (remote, dst) = ((base + so) as u64, base + dof);
            let bounced = ferrocoll_core::host_copy::page_aliased(dst, remote as usize, len);
            assert_eq!(bounced, cfg!(target_arch = "x86_64") && gap < 64, "gap {gap}");
            buf[dof..dof + len].fill(0);
            let (_, dst_part) = buf.split_at_mut(dof);
            match read(std::process::id(), remote, &mut dst_part[..len]) {
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) => {
                    eprintln!("skipped: this host refuses CMA ({})", errno_name(&e));
                    return;
                }
                r => r.unwrap(),
            }
            assert!(dst_part[..len].iter().enumerate().all(|(i, &b)| b == (i % 253) as u8), "gap {gap}");
            assert_eq!(dst_part[len], 0, "wrote past the destination");
        }
    }
}
