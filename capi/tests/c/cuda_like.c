/*
 * ferrocoll's libucc.so.1 on CUDA memory and a CUDA stream execution
 * engine, as PyTorch drives them: ucc_mc_* on device and managed memory, a collective
 * on device buffers, and a triggered post on the user's stream whose
 * COLLECTIVE_POST event is there at once, which starts after the work
 * queued before it (the input written on the stream) and holds back the
 * work queued after it (a copy of the result) until the data has landed;
 * and an alltoallv over device blocks at scattered addresses (PyTorch's
 * lists of tensors), staged block by block, posted plainly and triggered.
 *
 * The driver is reached with dlopen, as ferrocoll does: on a machine with
 * no usable libcuda.so.1 the program says so and exits 77 (the harness skips);
 * the test suite runs it on the fake driver (tests/fake_cuda) and on a GPU.
 */
#include <dlfcn.h>

#include "harness.h"

typedef int                CUresult;
typedef unsigned long long CUdeviceptr;
typedef void              *CUcontext, *CUstream;

static struct {
    CUresult (*Init)(unsigned);
    CUresult (*DeviceGet)(int *, int);
    CUresult (*PrimaryCtxRetain)(CUcontext *, int);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*StreamCreate)(CUstream *, unsigned);
    CUresult (*StreamSynchronize)(CUstream);
    CUresult (*StreamDestroy)(CUstream);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemHostAlloc)(void **, size_t, unsigned);
    CUresult (*MemFreeHost)(void *);
    CUresult (*MemsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream);
    CUresult (*MemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
    CUresult (*PointerGetAttributes)(unsigned, int *, void **, CUdeviceptr);
} cu;

#define CU(call)                                                               \
    do {                                                                       \
        CUresult r_ = (call);                                                  \
        if (r_ != 0) FAIL("%s: CUDA error %d", #call, r_);                     \
    } while (0)

/* Resolve the entry points; with `init`, also cuInit (only in the ranks: a
 * driver initialised before fork() cannot be used after it). */
static int load_driver(int init)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!h) return -1;
#define SYM(f, name)                                                           \
    do {                                                                       \
        *(void **)&cu.f = dlsym(h, name);                                      \
        if (!cu.f) return -1;                                                  \
    } while (0)
    SYM(Init, "cuInit");
    SYM(DeviceGet, "cuDeviceGet");
    SYM(PrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    SYM(CtxSetCurrent, "cuCtxSetCurrent");
    SYM(StreamCreate, "cuStreamCreate");
    SYM(StreamSynchronize, "cuStreamSynchronize");
    SYM(StreamDestroy, "cuStreamDestroy_v2");
    SYM(MemAlloc, "cuMemAlloc_v2");
    SYM(MemFree, "cuMemFree_v2");
    SYM(MemHostAlloc, "cuMemHostAlloc");
    SYM(MemFreeHost, "cuMemFreeHost");
    SYM(MemsetD32Async, "cuMemsetD32Async");
    SYM(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
    SYM(MemcpyDtoH, "cuMemcpyDtoH_v2");
    SYM(PointerGetAttributes, "cuPointerGetAttributes");
    return !init || cu.Init(0) == 0 ? 0 : -1;
}

#define N 4096

static int32_t sum_of(int size, int scale)
{
    int32_t s = 0;
    for (int r = 0; r < size; r++) s += scale * (r + 1);
    return s;
}

static int check_host(const int32_t *h, int32_t want, const char *what)
{
    for (int i = 0; i < N; i++)
        if (h[i] != want) FAIL("%s[%d] = %d, want %d", what, i, h[i], want);
    return 0;
}

static ucc_coll_args_t allreduce_args(CUdeviceptr src, CUdeviceptr dst)
{
    ucc_coll_args_t a;
    memset(&a, 0, sizeof(a));
    a.coll_type = UCC_COLL_TYPE_ALLREDUCE;
    a.op        = UCC_OP_SUM;
    a.src.info  = (ucc_coll_buffer_info_t){(void *)(uintptr_t)src, N, UCC_DT_INT32, UCC_MEMORY_TYPE_CUDA};
    a.dst.info  = (ucc_coll_buffer_info_t){(void *)(uintptr_t)dst, N, UCC_DT_INT32, UCC_MEMORY_TYPE_CUDA};
    return a;
}

/* PyTorch's all_to_all on lists of separately allocated CUDA tensors: NULL
 * buffers, byte counts, the blocks' addresses as displacements. The blocks
 * lie with gaps between them (rank 1's first) in one allocation per side,
 * so that the gaps can be checked untouched. */
#define B 256 /* bytes per block */

static ucc_coll_args_t scattered_alltoallv(uint64_t *counts, uint64_t *sdispls, uint64_t *rdispls)
{
    ucc_coll_args_t a;
    memset(&a, 0, sizeof(a));
    a.mask      = UCC_COLL_ARGS_FIELD_FLAGS;
    a.flags     = UCC_COLL_ARGS_FLAG_COUNT_64BIT | UCC_COLL_ARGS_FLAG_DISPLACEMENTS_64BIT;
    a.coll_type = UCC_COLL_TYPE_ALLTOALLV;
    a.src.info_v = (ucc_coll_buffer_info_v_t){NULL, counts, (ucc_aint_t *)sdispls, UCC_DT_UINT8, UCC_MEMORY_TYPE_CUDA};
    a.dst.info_v = (ucc_coll_buffer_info_v_t){NULL, counts, (ucc_aint_t *)rdispls, UCC_DT_UINT8, UCC_MEMORY_TYPE_CUDA};
    return a;
}

static int scattered_blocks(int rank, ucc_team_h team, ucc_context_h ctx, ucc_ee_h ee, CUstream stream)
{
    CUdeviceptr     sbuf, rbuf;
    uint64_t        counts[2] = {B, B}, sdispls[2], rdispls[2];
    int32_t        *host;
    ucc_coll_args_t a;
    ucc_coll_req_h  req;
    /* Pinned, as PyTorch's non-blocking copies are: a copy into pageable
     * memory returns only when it is done, so the thread that must progress
     * the collective would wait for the stream that waits for the collective. */
    CU(cu.MemHostAlloc((void **)&host, 4 * B, 0));
    CU(cu.MemAlloc(&sbuf, 4 * B));
    CU(cu.MemAlloc(&rbuf, 4 * B));
    sdispls[0] = sbuf + 2 * B, sdispls[1] = sbuf;
    rdispls[0] = rbuf + 3 * B, rdispls[1] = rbuf + B;
    for (int j = 0; j < 2; j++) CU(cu.MemsetD32Async(sdispls[j], (unsigned)(rank * 10 + j + 1), B / 4, stream));
    CU(cu.MemsetD32Async(rbuf, 0xdeadbeef, 4 * B / 4, stream));
    CU(cu.StreamSynchronize(stream));
    a = scattered_alltoallv(counts, sdispls, rdispls);
    if (run_coll(&a, team, ctx)) return 1;
    CU(cu.MemcpyDtoH(host, rbuf, 4 * B));
    for (int i = 0; i < B / 4; i++) {
        int32_t from0 = host[3 * B / 4 + i], from1 = host[B / 4 + i];
        if (from0 != rank + 1 || from1 != 10 + rank + 1)
            FAIL("scattered alltoallv [%d]: from rank 0 %d, from rank 1 %d", i, from0, from1);
        if (host[i] != (int32_t)0xdeadbeef || host[2 * B / 4 + i] != (int32_t)0xdeadbeef)
            FAIL("scattered alltoallv wrote the gap between blocks at [%d]", i);
    }
    /* PyTorch's path: a triggered post on its stream. The input is written
     * on the stream before the post, the result read on it after. */
    ucc_ev_t     ev, *post;
    ucc_status_t st;
    CU(cu.MemsetD32Async(rbuf, 0xdeadbeef, 4 * B / 4, stream));
    CU(cu.StreamSynchronize(stream));
    for (int j = 0; j < 2; j++) CU(cu.MemsetD32Async(sdispls[j], (unsigned)(rank * 100 + j + 1), B / 4, stream));
    a = scattered_alltoallv(counts, sdispls, rdispls);
    CHECK_OK(ucc_collective_init(&a, &req, team));
    memset(&ev, 0, sizeof(ev));
    ev.ev_type = UCC_EVENT_COMPUTE_COMPLETE;
    ev.req     = req;
    CHECK_OK(ucc_collective_triggered_post(ee, &ev));
    CHECK_OK(ucc_ee_get_event(ee, &post));
    CHECK(post->ev_type == UCC_EVENT_COLLECTIVE_POST && post->req == req);
    CHECK_OK(ucc_ee_ack_event(ee, post));
    for (int i = 0; i < 4 * B / 4; i++) host[i] = -1;
    CU(cu.MemcpyDtoHAsync(host, rbuf, 4 * B, stream));
    while ((st = ucc_collective_test(req)) == UCC_INPROGRESS) {
        CHECK_OK(ucc_context_progress(ctx));
        sched_yield();
    }
    CHECK_STATUS(st, UCC_OK);
    CU(cu.StreamSynchronize(stream));
    for (int i = 0; i < B / 4; i++) {
        int32_t from0 = host[3 * B / 4 + i], from1 = host[B / 4 + i];
        if (from0 != rank + 1 || from1 != 100 + rank + 1)
            FAIL("triggered scattered alltoallv [%d]: from rank 0 %d, from rank 1 %d", i, from0, from1);
        if (host[i] != (int32_t)0xdeadbeef || host[2 * B / 4 + i] != (int32_t)0xdeadbeef)
            FAIL("triggered scattered alltoallv wrote the gap between blocks at [%d]", i);
    }
    CHECK_OK(ucc_collective_finalize(req));
    CU(cu.MemFree(sbuf));
    CU(cu.MemFree(rbuf));
    CU(cu.MemFreeHost(host));
    return 0;
}

static int body(int rank, int size)
{
    int             dev;
    CUcontext       cuctx;
    CUstream        stream;
    CUdeviceptr     src, dst;
    int32_t        *host; /* pinned: see scattered_blocks */
    ucc_lib_h       lib;
    ucc_context_h   ctx;
    ucc_team_h      team;
    struct oob_info oob = {g_ctx_oob, rank, size, 0};

    if (load_driver(1)) {
        printf("skipped: cuInit failed (no usable CUDA device)\n");
        return SKIP;
    }
    CU(cu.DeviceGet(&dev, 0));
    CU(cu.PrimaryCtxRetain(&cuctx, dev));
    CU(cu.CtxSetCurrent(cuctx));
    CU(cu.StreamCreate(&stream, 1 /* CU_STREAM_NON_BLOCKING */));
    CU(cu.MemAlloc(&src, N * 4));
    CU(cu.MemAlloc(&dst, N * 4));
    CU(cu.MemHostAlloc((void **)&host, N * 4, 0));

    /* The memory component's calls on device memory. */
    CHECK_OK(ucc_mc_available(UCC_MEMORY_TYPE_CUDA));
    ucc_mc_buffer_header_t *h;
    CHECK_OK(ucc_mc_alloc(&h, N * 4, UCC_MEMORY_TYPE_CUDA));
    CHECK_OK(ucc_mc_memset(h->addr, 0x01, N * 4, UCC_MEMORY_TYPE_CUDA));
    CHECK_OK(ucc_mc_memcpy(host, h->addr, N * 4, UCC_MEMORY_TYPE_HOST, UCC_MEMORY_TYPE_CUDA));
    if (check_host(host, 0x01010101, "ucc_mc_memset")) return 1;
    CHECK_OK(ucc_mc_free(h));
    /* Past the 1 MiB piece the device memset is written in, to an odd end. */
    size_t         big   = (3u << 20) + 13;
    unsigned char *bytes = malloc(big);
    CHECK(bytes != NULL);
    CHECK_OK(ucc_mc_alloc(&h, big, UCC_MEMORY_TYPE_CUDA));
    CHECK_OK(ucc_mc_memset(h->addr, 0x5a, big, UCC_MEMORY_TYPE_CUDA));
    CHECK_OK(ucc_mc_memset((char *)h->addr + 5, 0x3c, big - 9, UCC_MEMORY_TYPE_CUDA));
    CHECK_OK(ucc_mc_memcpy(bytes, h->addr, big, UCC_MEMORY_TYPE_HOST, UCC_MEMORY_TYPE_CUDA));
    for (size_t i = 0; i < big; i++) {
        unsigned char want = i < 5 || i >= big - 4 ? 0x5a : 0x3c;
        if (bytes[i] != want) FAIL("ucc_mc_memset of %zu bytes: byte %zu = %#x, want %#x", big, i, bytes[i], want);
    }
    CHECK_OK(ucc_mc_free(h));
    free(bytes);

    /* Managed memory is managed (the driver says so), and the host may touch it. */
    CHECK_OK(ucc_mc_available(UCC_MEMORY_TYPE_CUDA_MANAGED));
    CHECK_OK(ucc_mc_alloc(&h, N * 4, UCC_MEMORY_TYPE_CUDA_MANAGED));
    CHECK(h->mt == UCC_MEMORY_TYPE_CUDA_MANAGED);
    unsigned char is_managed = 0;
    int           attr       = 8; /* CU_POINTER_ATTRIBUTE_IS_MANAGED */
    void         *data[1]    = {&is_managed};
    CU(cu.PointerGetAttributes(1, &attr, data, (CUdeviceptr)(uintptr_t)h->addr));
    CHECK(is_managed == 1);
    for (int i = 0; i < N; i++) ((int32_t *)h->addr)[i] = 7;
    for (int i = 0; i < N; i++) host[i] = -1;
    CHECK_OK(ucc_mc_memcpy(host, h->addr, N * 4, UCC_MEMORY_TYPE_HOST, UCC_MEMORY_TYPE_CUDA_MANAGED));
    if (check_host(host, 7, "managed memory written by the host")) return 1;
    CHECK_OK(ucc_mc_free(h));

    ucc_lib_params_t lp = {UCC_LIB_PARAM_FIELD_THREAD_MODE, UCC_THREAD_MULTIPLE, 0, 0, 0};
    CHECK_OK(ucc_init(&lp, NULL, &lib));
    ucc_context_params_t cp;
    cp.mask = UCC_CONTEXT_PARAM_FIELD_OOB;
    cp.oob  = oob_of(&oob);
    CHECK_OK(ucc_context_create(lib, &cp, NULL, &ctx));
    ucc_team_params_t tp;
    tp.mask          = UCC_TEAM_PARAM_FIELD_EP_MAP;
    tp.ep_map.type   = UCC_EP_MAP_FULL;
    tp.ep_map.ep_num = (uint64_t)size;
    if (create_team(ctx, &tp, &team)) return 1;

    /* A collective on device buffers, posted plainly. */
    CU(cu.MemsetD32Async(src, (unsigned)(rank + 1), N, stream));
    CU(cu.MemsetD32Async(dst, 0xdeadbeef, N, stream));
    CU(cu.StreamSynchronize(stream));
    ucc_coll_args_t a = allreduce_args(src, dst);
    if (run_coll(&a, team, ctx)) return 1;
    CU(cu.MemcpyDtoH(host, dst, N * 4));
    if (check_host(host, sum_of(size, 1), "allreduce on device memory")) return 1;

    /* PyTorch's triggered post on its stream, twice (the engine's flag counts up). */
    ucc_ee_params_t ep = {UCC_EE_CUDA_STREAM, stream, sizeof(CUstream)};
    ucc_ee_h        ee;
    CHECK_OK(ucc_ee_create(team, &ep, &ee));
    for (int round = 1; round <= 2; round++) {
        int scale = 10 * round;
        ucc_coll_req_h req;
        ucc_ev_t       ev, *post;
        ucc_status_t   st;
        CU(cu.MemsetD32Async(dst, 0xdeadbeef, N, stream));
        CU(cu.StreamSynchronize(stream));
        /* The input is written on the stream, not yet synchronised. */
        CU(cu.MemsetD32Async(src, (unsigned)(scale * (rank + 1)), N, stream));
        a = allreduce_args(src, dst);
        CHECK_OK(ucc_collective_init(&a, &req, team));
        memset(&ev, 0, sizeof(ev));
        ev.ev_type = UCC_EVENT_COMPUTE_COMPLETE;
        ev.req     = req;
        CHECK_OK(ucc_collective_triggered_post(ee, &ev));
        CHECK_OK(ucc_ee_get_event(ee, &post));
        CHECK(post->ev_type == UCC_EVENT_COLLECTIVE_POST && post->req == req);
        CHECK_OK(ucc_ee_ack_event(ee, post));
        /* Work queued after the post must see the collective's result. */
        for (int i = 0; i < N; i++) host[i] = -1;
        CU(cu.MemcpyDtoHAsync(host, dst, N * 4, stream));
        while ((st = ucc_collective_test(req)) == UCC_INPROGRESS) {
            CHECK_OK(ucc_context_progress(ctx));
            sched_yield();
        }
        CHECK_STATUS(st, UCC_OK);
        CU(cu.StreamSynchronize(stream));
        if (check_host(host, sum_of(size, scale), "copy queued after the triggered post")) return 1;
        CHECK_OK(ucc_collective_finalize(req));
    }
    if (scattered_blocks(rank, team, ctx, ee, stream)) return 1;
    CHECK_OK(ucc_ee_destroy(ee));

    if (destroy_team(team)) return 1;
    CHECK_OK(ucc_context_destroy(ctx));
    CHECK_OK(ucc_finalize(lib));
    CU(cu.MemFree(src));
    CU(cu.MemFree(dst));
    CU(cu.MemFreeHost(host));
    CU(cu.StreamDestroy(stream));
    return 0;
}

int main(int argc, char **argv)
{
    if (load_driver(0)) {
        const char *why = dlerror();
        printf("skipped: no usable libcuda.so.1 (%s)\n", why ? why : "an entry point is missing");
        return SKIP;
    }
    if (argc > 1 && atoi(argv[1]) != 2) {
        fprintf(stderr, "cuda_like runs 2 ranks (they share device 0)\n");
        return 2;
    }
    return run_ranks(argc, argv, body);
}
