//! The unguessable part of a segment's name and header.

use ferrocoll_core::{Error, Result};

/// A random 64-bit value from the kernel (`getrandom`), for the part of a
/// segment's name (and its header cookie) that no other process can guess,
/// so no process can plant a segment under the name a job will use.
pub fn nonce() -> Result<u64> {
    let mut b = [0u8; 8];
    fill_random(&mut b)?;
    Ok(u64::from_le_bytes(b))
}

/// Fill `b` with random bytes from the kernel (`getrandom`, which blocks only
/// until the kernel's pool has been seeded once after boot).
pub(crate) fn fill_random(b: &mut [u8]) -> Result<()> {
    let mut got = 0;
    while got < b.len() {
        // SAFETY: the pointer and length describe the unfilled rest of `b`,
        // which getrandom only writes.
        let n = unsafe { libc::getrandom(b[got..].as_mut_ptr().cast(), b.len() - got, 0) };
        match usize::try_from(n) {
            Ok(n) => got += n,
            Err(_) if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => {
                return Err(Error::no_resource(format!("getrandom failed: {}", std::io::Error::last_os_error())));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nonces_differ() {
        let (a, b) = (nonce().unwrap(), nonce().unwrap());
        assert_ne!(a, b);
        let (mut c, mut d) = ([0u8; 32], [0u8; 32]);
        fill_random(&mut c).unwrap();
        fill_random(&mut d).unwrap();
        assert_ne!(c, d);
        assert_ne!(c, [0; 32]);
    }
}
