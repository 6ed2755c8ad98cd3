// ferrocoll device kernels: types and the argument block shared with Rust.
//
// The whole source is one translation unit (see kernels/src/source.rs) that
// includes no header at all: NVRTC 13 has no cuda_fp16.h & co. without an
// include path, and the CPU emulation test compiles the same text with g++
// behind a small shim that defines __global__, threadIdx, uint4, ...
// Device-only code (inline PTX) sits under #ifdef __CUDA_ARCH__ with a plain
// C fallback that computes the same bits.

typedef signed char i8;
typedef unsigned char u8;
typedef short i16;
typedef unsigned short u16;
typedef int i32;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;
typedef __int128 i128;
typedef unsigned __int128 u128;

static_assert(sizeof(i8) == 1 && sizeof(i16) == 2 && sizeof(i32) == 4 && sizeof(i64) == 8, "integer widths");
static_assert(sizeof(i128) == 16 && sizeof(float) == 4 && sizeof(double) == 8, "wide widths");

#define FC_INLINE __device__ __forceinline__

// FC_UNROLL: unroll completely (loops over the lanes of a vector or the bytes
// of an element). FC_ROLLED: keep the loop (over sources): NVVM would
// otherwise unroll it a few times and multiply the code of every kernel.
#ifdef __CUDACC__
#define FC_UNROLL _Pragma("unroll")
#define FC_ROLLED _Pragma("unroll 1")
#else
#define FC_UNROLL
#define FC_ROLLED
#endif

// Mirrors ferrocoll_kernels::MAX_SOURCES.
#define FC_MAX_SOURCES 8

// Mirrors ferrocoll_kernels::ReduceArgs (kernels/src/args.rs), passed by value.
struct ReduceArgs {
    u64 dst;
    u64 srcs[FC_MAX_SOURCES];
    u64 src_stride; // bytes between sources; strided kernels only
    u64 count;      // elements (pairs for maxloc/minloc)
    u32 nsrcs;      // 1..=FC_MAX_SOURCES; any other value makes the kernel do nothing
    u32 avg_divisor; // avg kernels divide the sum by it when non-zero
};

// No padding (every field is naturally aligned in declaration order), so the
// size pins the offsets: 0, 8, 72, 80, 88, 92 as in Rust. NVRTC has no
// offsetof; g++ (the CPU emulation test) checks the offsets themselves.
static_assert(sizeof(ReduceArgs) == 96, "ReduceArgs size differs from the Rust struct");
static_assert(alignof(ReduceArgs) == 8, "ReduceArgs alignment differs from the Rust struct");
#ifndef __CUDACC_RTC__
static_assert(__builtin_offsetof(ReduceArgs, dst) == 0, "ReduceArgs.dst");
static_assert(__builtin_offsetof(ReduceArgs, srcs) == 8, "ReduceArgs.srcs");
static_assert(__builtin_offsetof(ReduceArgs, src_stride) == 72, "ReduceArgs.src_stride");
static_assert(__builtin_offsetof(ReduceArgs, count) == 80, "ReduceArgs.count");
static_assert(__builtin_offsetof(ReduceArgs, nsrcs) == 88, "ReduceArgs.nsrcs");
static_assert(__builtin_offsetof(ReduceArgs, avg_divisor) == 92, "ReduceArgs.avg_divisor");
#endif

// Reinterpret the bits of a value as another type of the same size.
template <class To, class From> FC_INLINE To fc_pun(From x) {
    static_assert(sizeof(To) == sizeof(From), "fc_pun needs equal sizes");
    union {
        From from;
        To to;
    } u;
    u.from = x;
    return u.to;
}

FC_INLINE float fc_f32(u32 bits) { return fc_pun<float>(bits); }
FC_INLINE u32 fc_bits(float x) { return fc_pun<u32>(x); }

// This thread's index in the grid and the number of threads in the grid.
FC_INLINE u64 fc_thread() { return (u64)blockIdx.x * blockDim.x + threadIdx.x; }
FC_INLINE u64 fc_threads() { return (u64)gridDim.x * blockDim.x; }

// 16-byte global load and store. On the device: explicit ld/st.global, so the
// compiler knows they cannot touch local memory (generic accesses would make
// it re-read spilled values after every store).
FC_INLINE uint4 fc_load16(u64 addr) {
#ifdef __CUDA_ARCH__
    uint4 v;
    asm("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(addr));
    return v;
#else
    return *(const uint4*)addr;
#endif
}

FC_INLINE void fc_store16(u64 addr, uint4 v) {
#ifdef __CUDA_ARCH__
    asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
#else
    *(uint4*)addr = v;
#endif
}
