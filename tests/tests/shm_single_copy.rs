//! Single copy (`UCC_TL_SHM_CMA_THRESHOLD`) on buffers that the kernel will
//! not read for another process: `memfd_secret` pages, as driver-mapped
//! pinned memory (`cuMemHostAlloc`) would be. Every call still returns the
//! right data, through the segment (`alg/single_copy.rs`: an unreadable
//! buffer sends that call, on every rank, back to the staged rounds).

use ferrocoll::{Coll, Config, Team, TeamParams};
use ferrocoll_tests::world;

/// `len` bytes of `memfd_secret` memory, leaked (the test's ranks share
/// the process), or `None` where the kernel offers none.
fn secret(len: usize) -> Option<&'static mut [u8]> {
    // SAFETY: memfd_secret takes a flags word and returns a descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_memfd_secret, 0) };
    if fd < 0 {
        return None;
    }
    let fd = fd as libc::c_int;
    // SAFETY: fd is the descriptor just made; the mapping is new memory of
    // `len` bytes that nothing else refers to, never unmapped (leaked).
    unsafe {
        if libc::ftruncate(fd, len as libc::off_t) != 0 {
            return None;
        }
        let p = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0);
        libc::close(fd);
        if p == libc::MAP_FAILED {
            return None;
        }
        Some(std::slice::from_raw_parts_mut(p.cast::<u8>(), len))
    }
}

/// Floats of each rank's buffer: 64 KiB, past the single-copy threshold.
const N: usize = 16 << 10;

#[test]
fn buffers_the_kernel_cannot_read_go_through_the_segment() {
    if secret(4096).is_none() {
        eprintln!("skipped: this kernel offers no memfd_secret (secretmem disabled or too old)");
        return;
    }
    let results = world::run(2, &Config::new(), |_team: &Team, ctx| -> Result<(), String> {
        let params =
            TeamParams::default().set("TL_SHM_TUNE", "bcast:@cma:inf#gather:@cma:inf").set("TL_SELF_TUNE", "0");
        let team = Team::create(ctx, params).map_err(|e| format!("team: {e}"))?;
        let rank = team.rank();
        let bytes = secret(N * 4).ok_or("no secret memory")?;
        // SAFETY: a page-aligned mapping of N floats, exclusively ours.
        let buf: &mut [f32] = unsafe { std::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<f32>(), N) };
        for call in 0..3u32 {
            let value = |i: usize| (call as usize * N + i) as f32;
            if rank == 0 {
                buf.iter_mut().enumerate().for_each(|(i, x)| *x = value(i));
            } else {
                buf.fill(-1.0);
            }
            let mut req = Coll::bcast(&mut buf[..], 0).init(&team).map_err(|e| format!("bcast init: {e}"))?;
            if req.selected() != "shm/cma" {
                return Err(format!("bcast ran {}", req.selected()));
            }
            req.run().map_err(|e| format!("bcast {call}: {e}"))?;
            drop(req);
            if let Some(i) = (0..N).find(|&i| buf[i] != value(i)) {
                return Err(format!("bcast {call}: rank {rank} has {} at {i}, not {}", buf[i], value(i)));
            }
        }
        // Gather from secret memory into ordinary memory at the root.
        buf.iter_mut().enumerate().for_each(|(i, x)| *x = (rank * N + i) as f32);
        let mut dst = if rank == 0 { vec![0.0f32; 2 * N] } else { Vec::new() };
        let root_dst = if rank == 0 { Some(&mut dst[..]) } else { None };
        Coll::gather(&buf[..], root_dst, 0).run(&team).map_err(|e| format!("gather: {e}"))?;
        if let Some(i) = (0..dst.len()).find(|&i| dst[i] != i as f32) {
            return Err(format!("gather: {} at {i}", dst[i]));
        }
        Ok(())
    });
    for (rank, r) in results.into_iter().enumerate() {
        r.unwrap_or_else(|e| panic!("rank {rank}: {e}"));
    }
}
