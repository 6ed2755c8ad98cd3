/*
 * fake libcuda.so.1 — a stand-in for the CUDA driver, for ferrocoll's tests
 * on machines without a GPU. It is TEST INFRASTRUCTURE: a green run on it
 * says that ferrocoll's CUDA code calls the driver in a sound order and
 * computes the right results under the rules below; it says nothing about a
 * real GPU.
 *
 * Built by tests/src/fake_cuda.rs (gcc, one shared library from the .c files
 * here); the tests put its folder first on LD_LIBRARY_PATH of a child process.
 *
 * What it emulates
 * - Devices: FAKE_CUDA_DEVICES (default 1), compute capability
 *   FAKE_CUDA_CC (default "9.0"), unified addressing (FAKE_CUDA_UVA=0 turns
 *   it off), 64-bit stream memory operations (FAKE_CUDA_WIDE=0 turns them
 *   off, and cuStreamWaitValue64 is then refused as on such devices).
 *   Only cuInit, cuGetErrorString/Name and cuDriverGetVersion work before cuInit.
 * - One primary context per device, retained and released with counts;
 *   a context stack per thread (set/push/pop/get current). Calls that need
 *   a context fail with CUDA_ERROR_INVALID_CONTEXT when none is current.
 * - Memory: device, managed and cuMemHostAlloc memory are fresh mappings
 *   filled with FAKE_CUDA_POISON (default 0xcd) so unwritten bytes show;
 *   registered host ranges are tracked. Every block is in a table, so
 *   cuPointerGetAttributes answers truthfully (memory type, managed, device
 *   ordinal), frees of unknown addresses fail, and a freed block is kept
 *   unmapped-in-place (PROT_NONE) for a while, so a late access crashes.
 * - Streams: each stream (created, per-thread default, legacy default) is a
 *   FIFO drained by its own worker thread, so work really runs after the
 *   enqueueing call returns, in order. The legacy stream and the blocking
 *   streams (created without CU_STREAM_NON_BLOCKING, and per-thread default
 *   streams) wait for each other's earlier work, as in CUDA.
 *   cuStreamWaitValue32/64 blocks its stream's worker until the value in
 *   memory satisfies the condition; cuStreamWriteValue32/64 stores its
 *   value (atomically, with release order) when the worker reaches it
 *   (both 64-bit forms are refused when FAKE_CUDA_WIDE=0). FAKE_CUDA_STREAM_DELAY_US delays every
 *   stream operation, to widen races.
 * - Events complete when the stream work before their record has run;
 *   timing events record the host clock when they complete.
 * - Modules: cuModuleLoadData takes the PTX text (checks .version against
 *   FAKE_CUDA_PTX_ISA, default 9.0, and .target against the device), and
 *   cuModuleGetFunction finds a name only if the PTX has that .entry. A
 *   launch runs the kernel of that name from the g++-compiled kernel
 *   library named by FAKE_CUDA_KERNELS (ferrocoll's CUDA C compiled for the
 *   CPU behind a shim of the built-ins) over a serial 1-D grid, with the
 *   parameters copied at launch. Operands a kernel would touch outside live
 *   device-accessible memory make the context fail with
 *   CUDA_ERROR_ILLEGAL_ADDRESS (sticky, as a device fault is) — device
 *   memory of another device counts as such (no peer access); so does any
 *   stream operation that reaches a block freed after it was queued, and
 *   the free itself is reported (stderr, faults.freed_in_use).
 * - Failure injection: FAKE_CUDA_FAIL="sym:n[+][:code],..." fails the n-th
 *   call (or, with +, the n-th and every later one) of entry point sym with
 *   code (default OUT_OF_MEMORY for allocations, else UNKNOWN). A missing
 *   symbol is a build of this library with a version script hiding it; no
 *   device is FAKE_CUDA_DEVICES=0.
 * - CUDA IPC, across processes (ipc.c): device memory is a shared mapping
 *   of a memfd kept open while the block lives; cuIpcGetMemHandle (on the
 *   base of a live cuMemAlloc block) writes the exporter's pid, the fd, the
 *   size, the block id and the memfd's serial into the 64-byte handle, and
 *   cuIpcOpenMemHandle_v2 in another process maps /proc/<pid>/fd/<fd>
 *   (after checking that the fd is still that memfd) and registers it as a
 *   device block of the exporter's device, so copies and kernels work on
 *   it; cuIpcCloseMemHandle unmaps it (quarantined like a freed block).
 *   Opening in the exporting process is CUDA_ERROR_INVALID_CONTEXT, as the
 *   real driver answers; a handle whose allocation is gone (freed, or its
 *   process exited) is CUDA_ERROR_INVALID_HANDLE. cuMemGetAddressRange_v2
 *   answers for device and managed blocks (CUDA_ERROR_NOT_FOUND otherwise),
 *   and the pointer query knows CU_POINTER_ATTRIBUTE_BUFFER_ID (the block id).
 * - FAKE_CUDA_QUERY_NEEDS_CTX=1: cuPointerGetAttributes wants a current
 *   context (CUDA_ERROR_INVALID_CONTEXT otherwise), as some drivers do.
 * - FAKE_CUDA_REPORT=path ("%p" becomes the pid): at exit, counts as
 *   key=value lines (calls and errors per entry point, live blocks, streams
 *   and events, pushes and pops, primary context retains and releases,
 *   faults); fake_cuda_counter("key") reads one of them while the process
 *   runs (not a CUDA entry point). FAKE_CUDA_LOG=path: one line per call.
 *
 * What it does NOT emulate
 * - Real device concurrency: a kernel runs on one CPU thread, block after
 *   block, thread after thread; no warps, no shared memory, no
 *   __syncthreads, no atomics between threads of a grid, no memory model of
 *   a GPU. Kernels that only work when threads run concurrently would hang
 *   or misbehave here; kernels that race would look fine.
 * - Separate memory spaces: device memory is host memory of this process,
 *   so host code that dereferences a device pointer works here and crashes
 *   on a GPU. Managed memory never migrates. Copies are memmove.
 * - PTX and machine code: the PTX is only scanned for its version, target
 *   and entry names; the code that runs is the same CUDA C compiled by g++
 *   (inline PTX is under #ifdef __CUDA_ARCH__ there and is never run).
 * - The driver's private export tables (cuGetExportTable answers "not
 *   found": NVRTC 13 asks for one for its cache, and then works without it).
 * - Graph capture: cuStreamBeginCapture_v2/cuStreamEndCapture only set and
 *   clear a stream's capture state, which cuStreamIsCapturing reports (for
 *   the refusal of host-driven collectives on a capturing stream); work
 *   enqueued meanwhile still runs, and the graph handed back is NULL. While
 *   a capture in global mode runs, cuEventQuery from a thread whose mode
 *   (cuThreadExchangeStreamCaptureMode) is not relaxed fails with
 *   CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the capture, as
 *   CUDA's "potentially unsafe" calls do.
 * - Timing, occupancy, launch limits beyond the block size, peer access,
 *   IPC events, the exporter freeing memory a peer still maps (the peer's
 *   mapping keeps the pages; real CUDA leaves that undefined), graphs (no instantiation or launch), multi-dimensional grids, dynamic shared memory, cubins.
 */
#ifndef FAKE_CUDA_H
#define FAKE_CUDA_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct fc_ctx *CUcontext;
typedef struct fc_stream *CUstream;
typedef struct fc_event *CUevent;
typedef struct fc_module *CUmodule;
typedef struct fc_function *CUfunction;
typedef struct {
    char reserved[64];
} CUipcMemHandle;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_IMAGE = 200,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
    CUDA_ERROR_INVALID_PTX = 218,
    CUDA_ERROR_JIT_COMPILER_NOT_FOUND = 221,
    CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    CUDA_ERROR_CONTEXT_IS_DESTROYED = 709,
    CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
    CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713,
    CUDA_ERROR_LAUNCH_FAILED = 719,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CUDA_ERROR_UNKNOWN = 999,
};

/* Every entry point, for call counts, failure injection and the report. */
#define FC_SYMBOLS(X)                                                                              \
    X(cuGetErrorString) X(cuGetErrorName) X(cuDriverGetVersion) X(cuInit) X(cuDeviceGet)           \
    X(cuDeviceGetCount) X(cuDeviceGetAttribute) X(cuDevicePrimaryCtxRetain)                        \
    X(cuDevicePrimaryCtxRelease_v2) X(cuCtxGetCurrent) X(cuCtxSetCurrent) X(cuCtxPushCurrent_v2)   \
    X(cuCtxPopCurrent_v2) X(cuCtxGetDevice) X(cuCtxGetId) X(cuCtxSynchronize) X(cuStreamCreate)                  \
    X(cuStreamDestroy_v2) X(cuStreamGetCtx) X(cuStreamSynchronize) X(cuStreamQuery)                \
    X(cuStreamBeginCapture_v2) X(cuStreamEndCapture) X(cuStreamIsCapturing)                        \
    X(cuThreadExchangeStreamCaptureMode)                                                           \
    X(cuStreamWaitValue32_v2) X(cuStreamWaitValue64_v2) X(cuStreamWriteValue32_v2)                 \
    X(cuStreamWriteValue64_v2) X(cuEventCreate) X(cuEventDestroy_v2)                               \
    X(cuEventRecord) X(cuEventQuery) X(cuEventSynchronize) X(cuEventElapsedTime_v2)                \
    X(cuMemAlloc_v2) X(cuMemAllocManaged) X(cuMemFree_v2) X(cuMemHostAlloc) X(cuMemFreeHost)       \
    X(cuMemHostRegister_v2) X(cuMemHostUnregister) X(cuMemHostGetDevicePointer_v2)                 \
    X(cuPointerGetAttributes) X(cuMemcpyAsync) X(cuMemcpyHtoD_v2) X(cuMemcpyDtoH_v2)               \
    X(cuMemcpyHtoDAsync_v2) X(cuMemcpyDtoHAsync_v2) X(cuMemcpyDtoDAsync_v2) X(cuMemsetD8Async)     \
    X(cuMemsetD32Async) X(cuModuleLoadData) X(cuModuleGetFunction) X(cuLaunchKernel)              \
    X(cuGetExportTable) X(cuMemGetAddressRange_v2) X(cuIpcGetMemHandle) X(cuIpcOpenMemHandle_v2)           \
    X(cuIpcCloseMemHandle)

enum fc_sym {
#define FC_ENUM(n) SYM_##n,
    FC_SYMBOLS(FC_ENUM)
#undef FC_ENUM
    SYM_COUNT
};

/* Count a call of `s`; its injected (or not-initialised) error, else 0. */
CUresult fc_enter(enum fc_sym s);
/* Count `r` as the result of `s` (and log it); returns `r`. */
CUresult fc_ret(enum fc_sym s, CUresult r);

#define ENTER(name)                                                                                \
    const enum fc_sym sym_ = SYM_##name;                                                           \
    do {                                                                                           \
        CUresult inj_ = fc_enter(sym_);                                                            \
        if (inj_ != CUDA_SUCCESS) return inj_;                                                     \
    } while (0)
#define RET(r) return fc_ret(sym_, (r))

/* ---- configuration and counters (core.c) ---- */
#define FC_MAX_DEVICES 8

struct fc_config {
    int devices, cc_major, cc_minor, uva, wide, query_needs_ctx;
    int poison;
    unsigned delay_us;
    int ptx_major, ptx_minor;
    const char *kernels;
};
extern struct fc_config fc_cfg;

/* Counters for the report; each is updated with atomic builtins. */
struct fc_counts {
    long live_blocks[5], live_bytes[5]; /* by enum fc_kind */
    long live_streams, live_events, modules;
    long pushes, pops;
    long retains[FC_MAX_DEVICES], releases[FC_MAX_DEVICES];
    long illegal_address, freed_in_use, overlapping_copies, destroyed_busy;
    long async_default_stream_copies; /* asynchronous copies on the legacy or per-thread stream */
    long kernels_launched, kernels_run, waits_blocked, events_not_ready;
    long ipc_exported, ipc_opened, ipc_closed; /* handles made; peers' allocations mapped here, and unmapped */
};
extern struct fc_counts fc_n;
#define FC_ADD(field, v) __atomic_add_fetch(&(field), (v), __ATOMIC_RELAXED)

/* Write a diagnostic line to stderr, prefixed with "fake libcuda: ". */
void fc_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- contexts (core.c) ---- */
struct fc_ctx {
    uint32_t magic;
    int device;
    int retains;         /* current retain count; 0 = inactive */
    struct fc_stream *legacy;
    int sticky;          /* a device fault: every later call in the context fails with it */
    unsigned long long id; /* cuCtxGetId: new each time the context becomes active, never reused */
};
/* The current context if it is usable; else NULL and *err says why. */
struct fc_ctx *fc_current(CUresult *err);
/* A context handle if valid, else NULL. */
struct fc_ctx *fc_ctx_of(CUcontext c);
int fc_initialised(void);

/* ---- memory (memory.c) ---- */
enum fc_kind { K_NONE = 0, K_DEVICE = 1, K_MANAGED = 2, K_HOST_ALLOC = 3, K_REGISTERED = 4 };

struct fc_block {
    uint64_t base, size, id;
    enum fc_kind kind;
    int device;
    int fd;  /* device memory: the memfd behind the shared mapping (-1 for other kinds) */
    int ipc; /* a peer's allocation mapped by cuIpcOpenMemHandle (kind K_DEVICE, fd -1) */
};
/* The live block holding [addr, addr + len) entirely, by copy; 0 if none. */
int fc_block_holding(uint64_t addr, uint64_t len, struct fc_block *out);
/* The live block containing addr at all (len 1); 0 if none. */
int fc_block_at(uint64_t addr, struct fc_block *out);
/* Whether block `id`, which held addr, is still live. */
int fc_block_alive(uint64_t addr, uint64_t id);
/* The length of the mapping behind a block of `size` bytes (whole pages). */
size_t fc_mapping_len(uint64_t size);
/* Register a peer's allocation mapped at base (ipc.c); 0 if it overlaps a live block. */
int fc_insert_ipc_block(uint64_t base, uint64_t size, int device);
/* Unregister and unmap (quarantined) the peer's allocation mapped at base; 0 if none is. */
int fc_close_ipc_block(uint64_t base);

/* ---- streams (stream.c) ---- */
enum fc_op_kind { OP_COPY, OP_MEMSET8, OP_MEMSET32, OP_KERNEL, OP_EVENT, OP_WAIT32, OP_WAIT64, OP_WRITE32, OP_WRITE64 };

#define FC_MAX_RANGES 10
struct fc_range {
    uint64_t lo, len, block; /* block id at enqueue, 0 for untracked host memory */
};

struct fc_op {
    struct fc_op *next;
    enum fc_op_kind kind;
    uint64_t seq;
    uint64_t a, b, c;               /* copy: dst, src, n; memset: dst, value, count; wait, write: addr, value, flags */
    struct fc_event *event;         /* OP_EVENT */
    uint64_t event_gen;
    struct fc_function *fn;         /* OP_KERNEL */
    unsigned grid, block;
    int device;                     /* OP_KERNEL: the device that runs it */
    unsigned char params[96] __attribute__((aligned(8)));
    const char *fault;              /* set at enqueue: why the op would fault */
    int nranges;
    struct fc_range ranges[FC_MAX_RANGES];
    struct fc_dep { struct fc_stream *s; uint64_t seq; } *deps;
    int ndeps;
};

/* Resolve a stream handle (NULL/legacy, per-thread, or created); NULL and *err if invalid. */
struct fc_stream *fc_stream_of(CUstream h, CUresult *err);
struct fc_ctx *fc_stream_ctx(struct fc_stream *s);
/* Whether s is a default stream (legacy or per-thread). */
int fc_stream_is_default(const struct fc_stream *s);
/* A zeroed op (calloc); fc_enqueue takes ownership. */
struct fc_op *fc_op_new(enum fc_op_kind kind);
/* Record memory the op touches (must be live when the op runs). Returns 0 if
 * the range overruns a tracked block; untracked memory is allowed only when
 * host_ok (copies from or to pageable host memory). */
int fc_op_range(struct fc_op *op, uint64_t lo, uint64_t len, int host_ok);
/* Queue `op` on `s`; returns its sequence number. */
uint64_t fc_enqueue(struct fc_stream *s, struct fc_op *op);
/* Wait until `s` has run everything up to `seq`. */
void fc_wait_seq(struct fc_stream *s, uint64_t seq);
/* Whether pending work on any stream uses block `id`. */
int fc_block_in_use(uint64_t id);

/* ---- modules (module.c) ---- */
/* Run a kernel op (on a stream's worker). */
void fc_run_kernel(struct fc_op *op);

#endif
