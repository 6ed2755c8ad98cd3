// Byte copy between two device-accessible buffers that do not overlap:
// 16-byte vectors when both addresses are 16-byte aligned, 4-byte words when
// both are 4-byte aligned, bytes otherwise; a grid-stride loop, then the tail.
extern "C" __global__ void fc_copy(u64 dst, u64 src, u64 bytes) {
    const u64 first = fc_thread();
    const u64 step = fc_threads();
    u64 done = 0;
    if (((dst | src) & 15) == 0) {
        const u64 vectors = bytes / 16;
        for (u64 v = first; v < vectors; v += step) {
            ((uint4*)dst)[v] = ((const uint4*)src)[v];
        }
        done = vectors * 16;
    } else if (((dst | src) & 3) == 0) {
        const u64 words = bytes / 4;
        for (u64 w = first; w < words; w += step) {
            ((u32*)dst)[w] = ((const u32*)src)[w];
        }
        done = words * 4;
    }
    for (u64 i = done + first; i < bytes; i += step) {
        ((u8*)dst)[i] = ((const u8*)src)[i];
    }
}
