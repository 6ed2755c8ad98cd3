//! The system calls std does not offer: a vectored send that never
//! raises SIGPIPE (std's `write_vectored` is `writev`, which does), and
//! `poll` over every connection (zero-timeout: one system call per progress
//! instead of one `recv` per peer; with a timeout: a close that waits for
//! room for its goodbye); the keepalive options; and the read that throws
//! away unread bytes before a close (so that the close sends a FIN).

use std::io::{self, IoSlice};
use std::os::fd::RawFd;

/// `sendmsg(fd, bufs, MSG_NOSIGNAL | MSG_DONTWAIT)`: bytes written, or the
/// error (`WouldBlock` when the socket buffer is full; `EPIPE` to a closed
/// peer is an error, never a signal).
pub(super) fn send_vectored(fd: RawFd, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
    // SAFETY: msghdr is plain data (integers and pointers) for which all zero
    // bytes is a valid value: no name, no control data, no iovecs.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    // IoSlice is documented to be ABI compatible with iovec on Unix; the
    // kernel only reads through msg_iov, despite the *mut.
    msg.msg_iov = bufs.as_ptr().cast_mut().cast::<libc::iovec>();
    msg.msg_iovlen = bufs.len() as _;
    // SAFETY: `msg` points at `bufs.len()` iovecs that borrow live slices for
    // the duration of the call (`bufs` outlives it); sendmsg only reads them.
    let n = unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) };
    if n < 0 { Err(io::Error::last_os_error()) } else { Ok(n as usize) }
}

/// `poll(fds, 0)`: fills each `revents` without waiting; returns how many are ready.
pub(super) fn poll_now(fds: &mut [libc::pollfd]) -> io::Result<usize> {
    poll_for(fds, 0)
}

/// `poll(fds, timeout_ms)`: waits up to `timeout_ms` for an event.
pub(super) fn poll_for(fds: &mut [libc::pollfd], timeout_ms: i32) -> io::Result<usize> {
    // SAFETY: `fds` is a valid, exclusively borrowed array of `fds.len()`
    // pollfds; poll writes only their `revents`.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    if n < 0 { Err(io::Error::last_os_error()) } else { Ok(n as usize) }
}

/// Seconds a connection is idle before the kernel probes the peer.
const KEEPALIVE_IDLE_S: libc::c_int = 30;
/// Seconds between two probes.
const KEEPALIVE_INTERVAL_S: libc::c_int = 5;
/// Probes unanswered before the connection fails.
const KEEPALIVE_PROBES: libc::c_int = 6;

/// TCP keepalive on `fd`: a peer whose host vanished (power lost, network
/// cut: no FIN, no reset) fails its connection after about a minute
/// (30 s idle, then 6 probes 5 s apart) instead of being waited for forever
/// (collectives have no timeout by default). A peer that is alive answers
/// the probes in its kernel, busy or not.
pub(super) fn keep_alive(fd: RawFd) -> io::Result<()> {
    let set = |level, name, value: libc::c_int| {
        // SAFETY: `value` is a c_int on this frame, passed with its size.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                level,
                name,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
    };
    set(libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1)?;
    set(libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, KEEPALIVE_IDLE_S)?;
    set(libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, KEEPALIVE_INTERVAL_S)?;
    set(libc::IPPROTO_TCP, libc::TCP_KEEPCNT, KEEPALIVE_PROBES)
}

/// Read and throw away what `fd` holds unread, without waiting (at most
/// `MAX_DISCARD` bytes, so a peer that keeps sending cannot hold the
/// caller). Before a close: Linux answers the close of a socket with unread
/// bytes with a reset instead of a FIN, and a reset drops what the socket
/// still holds unsent — the last messages and the goodbye of an endpoint
/// whose peer reads slowly, which would then take that clean leave for a
/// death.
pub(super) fn discard_unread(fd: RawFd) {
    let mut scratch = [0u8; 16 * 1024];
    let mut left = MAX_DISCARD;
    while left > 0 {
        // SAFETY: `scratch` is a writable buffer of its length on this frame.
        let n = unsafe { libc::recv(fd, scratch.as_mut_ptr().cast(), scratch.len(), libc::MSG_DONTWAIT) };
        if n <= 0 {
            // Nothing more now (EAGAIN), the peer's FIN (0), or an error: done.
            return;
        }
        left = left.saturating_sub(n as usize);
    }
}

/// The most [`discard_unread`] reads.
const MAX_DISCARD: usize = 64 << 20;

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    use super::*;

    #[test]
    fn vectored_send_and_poll_over_loopback() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut b, _) = l.accept().unwrap();
        let mut fds = [libc::pollfd { fd: b.as_raw_fd(), events: libc::POLLIN, revents: 0 }];
        assert_eq!(poll_now(&mut fds).unwrap(), 0);
        let n = send_vectored(a.as_raw_fd(), &[IoSlice::new(b"hel"), IoSlice::new(b""), IoSlice::new(b"lo")]).unwrap();
        assert_eq!(n, 5);
        let mut got = [0u8; 5];
        b.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"hello");
        drop(b);
        // The peer is gone: writes fail (EPIPE or ECONNRESET), they do not raise SIGPIPE.
        let err = (0..100).find_map(|_| send_vectored(a.as_raw_fd(), &[IoSlice::new(&[0u8; 4096])]).err());
        assert!(err.is_some());
    }

    #[test]
    fn a_socket_closed_after_its_unread_bytes_are_discarded_ends_with_a_fin_not_a_reset() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        for discard in [false, true] {
            let mut peer = TcpStream::connect(l.local_addr().unwrap()).unwrap();
            let (me, _) = l.accept().unwrap();
            std::io::Write::write_all(&mut peer, &[7u8; 100_000]).unwrap();
            // Let the bytes arrive (loopback), unread by `me`.
            std::thread::sleep(std::time::Duration::from_millis(50));
            if discard {
                discard_unread(me.as_raw_fd());
            }
            drop(me);
            peer.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
            let r = peer.read(&mut [0u8; 16]);
            if discard {
                assert_eq!(r.unwrap(), 0, "a FIN: end of stream");
            } else {
                // What this guards against: unread bytes at close make a reset.
                assert_eq!(r.unwrap_err().kind(), io::ErrorKind::ConnectionReset);
            }
        }
    }

    fn option(fd: RawFd, level: libc::c_int, name: libc::c_int) -> libc::c_int {
        let mut v: libc::c_int = -1;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `v` and `len` are on this frame, `len` is `v`'s size.
        let rc = unsafe { libc::getsockopt(fd, level, name, (&mut v as *mut libc::c_int).cast(), &mut len) };
        assert_eq!(rc, 0, "{}", io::Error::last_os_error());
        v
    }

    #[test]
    fn keepalive_is_on_with_the_times_it_says() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let fd = a.as_raw_fd();
        assert_eq!(option(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE), 0, "off until asked");
        keep_alive(fd).unwrap();
        assert_eq!(option(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE), 1);
        assert_eq!(option(fd, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE), KEEPALIVE_IDLE_S);
        assert_eq!(option(fd, libc::IPPROTO_TCP, libc::TCP_KEEPINTVL), KEEPALIVE_INTERVAL_S);
        assert_eq!(option(fd, libc::IPPROTO_TCP, libc::TCP_KEEPCNT), KEEPALIVE_PROBES);
    }
}
