//! Launch geometry for the grid-stride kernels.

/// Threads per block of every kernel launch: a multiple of the warp size
/// that lets 8 blocks share an SM of any current architecture.
pub const BLOCK: u32 = 256;

/// The most blocks [`launch_dims`] asks for: about four waves of resident
/// blocks on the largest current GPUs (132 SMs x 8 blocks); beyond that each
/// thread loops (grid stride), which costs nothing and keeps launches cheap.
pub const MAX_GRID: u32 = 4096;

/// `(grid, block)` for a kernel over `elements` elements of `elem_bytes`
/// bytes each (pairs for maxloc/minloc): one 16-byte vector per thread per
/// iteration, at most [`MAX_GRID`] blocks of [`BLOCK`] threads, at least one block.
///
/// ```
/// assert_eq!(ferrocoll_kernels::launch_dims(0, 4), (1, 256));
/// assert_eq!(ferrocoll_kernels::launch_dims(1 << 20, 4), (1024, 256)); // 4 MiB = 256 Ki vectors
/// assert_eq!(ferrocoll_kernels::launch_dims(1 << 40, 2).0, 4096);
/// ```
pub fn launch_dims(elements: u64, elem_bytes: usize) -> (u32, u32) {
    let bytes = elements.saturating_mul(elem_bytes.max(1) as u64);
    let vectors = bytes.div_ceil(16);
    let blocks = vectors.div_ceil(u64::from(BLOCK)).clamp(1, u64::from(MAX_GRID));
    // The clamp keeps blocks <= MAX_GRID, which fits u32.
    (u32::try_from(blocks).unwrap_or(MAX_GRID), BLOCK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dims_cover_small_and_cap_large() {
        assert_eq!(launch_dims(1, 1), (1, BLOCK));
        assert_eq!(launch_dims(4096, 1), (1, BLOCK)); // 256 vectors
        assert_eq!(launch_dims(4097, 1), (2, BLOCK));
        assert_eq!(launch_dims(u64::MAX, 32), (MAX_GRID, BLOCK));
        assert_eq!(launch_dims(10, 0), (1, BLOCK));
        for (n, b) in [(1u64, 2usize), (1000, 8), (123_457, 32), (9_999_999, 1)] {
            let (grid, block) = launch_dims(n, b);
            let threads = u64::from(grid) * u64::from(block);
            // Either one vector per thread covers everything, or the grid is capped.
            assert!(threads * 16 >= n * b as u64 || grid == MAX_GRID, "{n} x {b}");
        }
    }
}
