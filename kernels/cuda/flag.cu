// Flags for the CUDA stream engine (triggered post): a kernel enqueued on a
// stream publishes "everything before me is done" by writing a 64-bit flag,
// or holds back everything after it until a flag reaches a value. The flag
// is an 8-byte aligned address the device can reach: device memory or
// host-mapped (pinned) memory. One thread does the work; launch with (1, 1).

extern "C" __global__ void fc_flag_write(u64 flag_addr, u64 value) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        // Earlier writes of this stream reach the system before the flag does...
        __threadfence_system();
        *(volatile u64*)flag_addr = value;
        // ... and the flag leaves this SM now rather than at kernel end.
        __threadfence_system();
    }
}

extern "C" __global__ void fc_flag_wait(u64 flag_addr, u64 value) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        while (*(volatile u64*)flag_addr < value) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
            __nanosleep(256);
#endif
        }
        // Reads after the wait (by later kernels of the stream) see what the
        // writer published before it raised the flag.
        __threadfence_system();
    }
}
