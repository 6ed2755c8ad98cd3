/*
 * UCC's perftest on ferrocoll's libucc.so.1: its internal helpers
 * (ucc_mc_*, ucc_str_to_memunits, ucc_dt_predefined_sizes,
 * ucc_memory_type_names, the CPU executor of its memcpy and reducedt
 * modes), buffers from
 * ucc_mc_alloc, and persistent collectives posted again and again, each
 * iteration's result checked; memory handles made and exchanged as its
 * map modes make them, and the context's address.
 */
#include "harness.h"

#define ITERS 20

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int helpers(void)
{
    size_t v = 0;
    unsigned major, minor, release;
    CHECK_OK(ucc_str_to_memunits("4k", &v));
    CHECK(v == 4096);
    CHECK_OK(ucc_str_to_memunits("1M", &v));
    CHECK(v == 1 << 20);
    CHECK_OK(ucc_str_to_memunits("inf", &v));
    CHECK(v == SIZE_MAX);
    CHECK_STATUS(ucc_str_to_memunits("12 parsecs", &v), UCC_ERR_INVALID_PARAM);
    CHECK(ucc_dt_predefined_sizes[UCC_DT_INT8 >> UCC_DATATYPE_SHIFT] == 1);
    CHECK(ucc_dt_predefined_sizes[UCC_DT_FLOAT16 >> UCC_DATATYPE_SHIFT] == 2);
    CHECK(ucc_dt_predefined_sizes[UCC_DT_FLOAT64 >> UCC_DATATYPE_SHIFT] == 8);
    CHECK(ucc_dt_predefined_sizes[UCC_DT_FLOAT128_COMPLEX >> UCC_DATATYPE_SHIFT] == 32);
    CHECK(strcmp(ucc_memory_type_names[UCC_MEMORY_TYPE_HOST], "host") == 0);
    CHECK(strcmp(ucc_memory_type_names[UCC_MEMORY_TYPE_CUDA], "cuda") == 0);
    CHECK_OK(ucc_mc_available(UCC_MEMORY_TYPE_HOST));
    ucc_status_t cuda = ucc_mc_available(UCC_MEMORY_TYPE_CUDA);
    CHECK(cuda == UCC_OK || cuda == UCC_ERR_NOT_FOUND);
    ucc_get_version(&major, &minor, &release);
    CHECK(major == UCC_API_MAJOR && minor == UCC_API_MINOR);
    CHECK(strcmp(ucc_get_version_string(), UCC_VERSION_STRING) == 0);
    CHECK(strcmp(ucc_status_string(UCC_ERR_TIMED_OUT), "Timeout expired") == 0);
    return 0;
}

/* UCC's executor structures (UCC-internal: components/ec/base/ucc_ec_base.h),
 * as UCC's perftest sees them on LP64, written out here. */
enum { EE_TASK_REDUCE = 1, EE_TASK_REDUCE_STRIDED = 2, EE_TASK_COPY = 8, EE_FLAG_WITH_ALPHA = 1 };
typedef struct {
    void *ee_type_and_context[2];
} ee_executor_t;
typedef struct {
    uint64_t      mask;
    ucc_ee_type_t ee_type;
    uint64_t      task_types;
} ee_executor_params_t;
typedef struct {
    uint16_t task_type, flags;
    union {
        struct {
            void              *dst;
            void              *srcs[9];
            size_t             count;
            double             alpha;
            ucc_datatype_t     dt;
            ucc_reduction_op_t op;
            uint16_t           n_srcs;
        } reduce;
        struct {
            void              *dst, *src1, *src2;
            size_t             stride, count;
            double             alpha;
            ucc_datatype_t     dt;
            ucc_reduction_op_t op;
            uint16_t           n_src2;
        } reduce_strided;
        struct {
            void  *src, *dst;
            size_t len;
        } copy;
        char largest[240];
    };
} ee_task_args_t;
ucc_status_t ucc_ee_executor_init(const ee_executor_params_t *params, ee_executor_t **executor);
ucc_status_t ucc_ee_executor_start(ee_executor_t *executor, void *ee_context);
ucc_status_t ucc_ee_executor_task_post(ee_executor_t *executor, const ee_task_args_t *args, void **task);
ucc_status_t ucc_ee_executor_task_test(const void *task);
ucc_status_t ucc_ee_executor_task_finalize(void *task);
ucc_status_t ucc_ee_executor_stop(ee_executor_t *executor);
ucc_status_t ucc_ee_executor_finalize(ee_executor_t *executor);

/* Post a task and test it to its end, as UCC's perftest does. */
static ucc_status_t run_task(ee_executor_t *e, const ee_task_args_t *args)
{
    void        *task;
    ucc_status_t st = ucc_ee_executor_task_post(e, args, &task);
    if (st != UCC_OK) return st;
    while ((st = ucc_ee_executor_task_test(task)) > 0) {}
    ucc_status_t fin = ucc_ee_executor_task_finalize(task);
    return st != UCC_OK ? st : fin;
}

/* The CPU executor: reduce, strided reduce, copy, each result checked. */
static int executor(void)
{
    ee_executor_params_t p = {1, UCC_EE_CUDA_STREAM, 0};
    ee_executor_t       *e = NULL;
    CHECK_STATUS(ucc_ee_executor_init(&p, &e), UCC_ERR_NOT_SUPPORTED);
    CHECK_STATUS(ucc_ee_executor_init(NULL, &e), UCC_ERR_INVALID_PARAM);
    p.ee_type = UCC_EE_CPU_THREAD;
    CHECK_OK(ucc_ee_executor_init(&p, &e));
    CHECK_OK(ucc_ee_executor_start(e, NULL));
    enum { N = 1000 };
    float          src[3][N], dst[N];
    ee_task_args_t a;
    for (int i = 0; i < N; i++) src[0][i] = (float)i, src[1][i] = 0.5f, src[2][i] = (float)(2 * i);
    memset(&a, 0, sizeof a);
    a.task_type     = EE_TASK_REDUCE;
    a.reduce.dst    = dst;
    a.reduce.srcs[0] = src[0], a.reduce.srcs[1] = src[1], a.reduce.srcs[2] = src[2];
    a.reduce.n_srcs = 3;
    a.reduce.count  = N;
    a.reduce.dt     = UCC_DT_FLOAT32;
    a.reduce.op     = UCC_OP_SUM;
    CHECK_OK(run_task(e, &a));
    for (int i = 0; i < N; i++)
        if (dst[i] != (float)(3 * i) + 0.5f) FAIL("executor reduce[%d] = %g, want %g", i, dst[i], 3 * i + 0.5);
    /* Sources at a stride in one buffer: src1, then src2 + k * stride. */
    memset(&a, 0, sizeof a);
    a.task_type              = EE_TASK_REDUCE_STRIDED;
    a.reduce_strided.dst     = dst;
    a.reduce_strided.src1    = src[0];
    a.reduce_strided.src2    = src[1];
    a.reduce_strided.stride  = sizeof src[0];
    a.reduce_strided.n_src2  = 2;
    a.reduce_strided.count   = N;
    a.reduce_strided.dt      = UCC_DT_FLOAT32;
    a.reduce_strided.op      = UCC_OP_MAX;
    CHECK_OK(run_task(e, &a));
    for (int i = 0; i < N; i++)
        if (dst[i] != (float)(2 * i) + (i == 0 ? 0.5f : 0.0f)) FAIL("executor strided max[%d] = %g", i, dst[i]);
    a.flags = EE_FLAG_WITH_ALPHA;
    CHECK_STATUS(run_task(e, &a), UCC_ERR_NOT_SUPPORTED);
    memset(&a, 0, sizeof a);
    a.task_type = EE_TASK_COPY;
    a.copy.src  = src[2];
    a.copy.dst  = dst;
    a.copy.len  = sizeof dst;
    CHECK_OK(run_task(e, &a));
    CHECK(memcmp(dst, src[2], sizeof dst) == 0);
    a.copy.dst = NULL;
    CHECK_STATUS(run_task(e, &a), UCC_ERR_INVALID_PARAM);
    a.task_type = 77;
    CHECK_STATUS(run_task(e, &a), UCC_ERR_INVALID_PARAM);
    CHECK_OK(ucc_ee_executor_stop(e));
    CHECK_OK(ucc_ee_executor_finalize(e));
    CHECK_STATUS(ucc_ee_executor_start(e, NULL), UCC_ERR_INVALID_PARAM);
    return 0;
}

/* A persistent collective: init once, post ITERS times, check every result. */
static int persistent_allreduce(int rank, int size, ucc_team_h team, ucc_context_h ctx, size_t count)
{
    ucc_mc_buffer_header_t *sh, *dh;
    size_t                  bytes = count * ucc_dt_predefined_sizes[UCC_DT_FLOAT64 >> UCC_DATATYPE_SHIFT];
    double                 *host  = malloc(bytes);
    CHECK_OK(ucc_mc_alloc(&sh, bytes, UCC_MEMORY_TYPE_HOST));
    CHECK_OK(ucc_mc_alloc(&dh, bytes, UCC_MEMORY_TYPE_HOST));
    CHECK(sh->mt == UCC_MEMORY_TYPE_HOST && sh->addr != NULL && dh->addr != sh->addr);

    ucc_coll_args_t a;
    memset(&a, 0, sizeof(a));
    a.mask              = UCC_COLL_ARGS_FIELD_FLAGS;
    a.flags             = UCC_COLL_ARGS_FLAG_PERSISTENT;
    a.coll_type         = UCC_COLL_TYPE_ALLREDUCE;
    a.op                = UCC_OP_SUM;
    a.src.info.buffer   = sh->addr;
    a.src.info.count    = count;
    a.src.info.datatype = UCC_DT_FLOAT64;
    a.src.info.mem_type = UCC_MEMORY_TYPE_HOST;
    a.dst.info          = a.src.info;
    a.dst.info.buffer   = dh->addr;

    ucc_coll_req_h req;
    ucc_status_t   st;
    CHECK_OK(ucc_collective_init(&a, &req, team));
    double t0 = 0;
    for (int it = -1; it < ITERS; it++) { /* iteration -1 is the warm-up */
        if (it == 0) t0 = now();
        for (size_t i = 0; i < count; i++) host[i] = (double)(rank + 1) * (double)(it + 2) + (double)i;
        CHECK_OK(ucc_mc_memcpy(sh->addr, host, bytes, UCC_MEMORY_TYPE_HOST, UCC_MEMORY_TYPE_HOST));
        CHECK_OK(ucc_mc_memset(dh->addr, 0xff, bytes, UCC_MEMORY_TYPE_HOST)); /* poison: NaNs */
        CHECK_OK(ucc_collective_post(req));
        while ((st = ucc_collective_test(req)) == UCC_INPROGRESS) {
        CHECK_OK(ucc_context_progress(ctx));
        sched_yield(); /* ranks may outnumber cores */
    }
        CHECK_STATUS(st, UCC_OK);
        const double *out = dh->addr;
        for (size_t i = 0; i < count; i++) {
            double want = 0;
            for (int r = 0; r < size; r++) want += (double)(r + 1) * (double)(it + 2) + (double)i;
            if (out[i] != want) FAIL("iteration %d: allreduce[%zu] = %g, want %g", it, i, out[i], want);
        }
    }
    double t = (now() - t0) / ITERS;
    if (rank == 0) printf("allreduce %zu doubles, %d ranks: %.1f us per iteration\n", count, size, t * 1e6);
    /* Posting while in progress is refused; after completion it is fine again. */
    CHECK_OK(ucc_collective_finalize(req));
    CHECK_OK(ucc_mc_free(sh));
    CHECK_OK(ucc_mc_free(dh));
    CHECK_STATUS(ucc_mc_free(dh), UCC_ERR_INVALID_PARAM);
    free(host);
    return 0;
}

/* UCC's perftest posts its barrier, and every collective with -p, made
 * without the persistent flag for the barrier, again and again: UCC's
 * ucc_collective_post posts whatever request it is given, and so does
 * libucc. An allreduce made without the flag, posted three times, gives
 * the right sum each time. */
static int reposted_without_the_flag(int rank, int size, ucc_team_h team, ucc_context_h ctx)
{
    ucc_coll_args_t b;
    memset(&b, 0, sizeof(b));
    b.coll_type = UCC_COLL_TYPE_BARRIER;
    ucc_coll_req_h req;
    ucc_status_t   st;
    CHECK_OK(ucc_collective_init(&b, &req, team));
    for (int it = 0; it < 3; it++) {
        CHECK_OK(ucc_collective_post(req));
        while ((st = ucc_collective_test(req)) == UCC_INPROGRESS) {
            CHECK_OK(ucc_context_progress(ctx));
            sched_yield();
        }
        CHECK_STATUS(st, UCC_OK);
    }
    CHECK_OK(ucc_collective_finalize(req));

    int32_t src = rank + 1, dst = 0;
    ucc_coll_args_t a;
    memset(&a, 0, sizeof(a));
    a.coll_type         = UCC_COLL_TYPE_ALLREDUCE;
    a.op                = UCC_OP_SUM;
    a.src.info.buffer   = &src;
    a.src.info.count    = 1;
    a.src.info.datatype = UCC_DT_INT32;
    a.src.info.mem_type = UCC_MEMORY_TYPE_HOST;
    a.dst.info          = a.src.info;
    a.dst.info.buffer   = &dst;
    CHECK_OK(ucc_collective_init(&a, &req, team));
    for (int it = 0; it < 3; it++) {
        src = (rank + 1) * (it + 1);
        dst = -1;
        CHECK_OK(ucc_collective_post(req));
        while ((st = ucc_collective_test(req)) == UCC_INPROGRESS) {
            CHECK_OK(ucc_context_progress(ctx));
            sched_yield();
        }
        CHECK_STATUS(st, UCC_OK);
        if (dst != size * (size + 1) / 2 * (it + 1)) FAIL("post %d of a non-persistent allreduce: %d", it, dst);
    }
    CHECK_OK(ucc_collective_finalize(req));
    return 0;
}

/* A persistent bcast from a rotating root (perftest's -r): one request per root. */
static int persistent_bcast(int rank, int size, ucc_team_h team, ucc_context_h ctx)
{
    enum { COUNT = 4096 };
    ucc_mc_buffer_header_t *h;
    CHECK_OK(ucc_mc_alloc(&h, COUNT, UCC_MEMORY_TYPE_HOST));
    for (int root = 0; root < size; root++) {
        ucc_coll_args_t a;
        ucc_coll_req_h  req;
        ucc_status_t    st;
        memset(&a, 0, sizeof(a));
        a.mask      = UCC_COLL_ARGS_FIELD_FLAGS;
        a.flags     = UCC_COLL_ARGS_FLAG_PERSISTENT;
        a.coll_type = UCC_COLL_TYPE_BCAST;
        a.root      = (uint64_t)root;
        a.src.info  = (ucc_coll_buffer_info_t){h->addr, COUNT, UCC_DT_UINT8, UCC_MEMORY_TYPE_HOST};
        CHECK_OK(ucc_collective_init(&a, &req, team));
        for (int it = 0; it < 3; it++) {
            CHECK_OK(ucc_mc_memset(h->addr, rank == root ? root * 16 + it : 0xee, COUNT, UCC_MEMORY_TYPE_HOST));
            CHECK_OK(ucc_collective_post(req));
            while ((st = ucc_collective_test(req)) == UCC_INPROGRESS) {
        CHECK_OK(ucc_context_progress(ctx));
        sched_yield(); /* ranks may outnumber cores */
    }
            CHECK_STATUS(st, UCC_OK);
            for (int i = 0; i < COUNT; i++)
                if (((unsigned char *)h->addr)[i] != (unsigned char)(root * 16 + it))
                    FAIL("bcast root %d iteration %d byte %d", root, it, i);
        }
        CHECK_OK(ucc_collective_finalize(req));
    }
    CHECK_OK(ucc_mc_free(h));
    return 0;
}

/* Every rank's `bytes` bytes at src, gathered into dst (rank order). */
static int allgather_bytes(const void *src, void *dst, size_t bytes, ucc_team_h team, ucc_context_h ctx, int size)
{
    ucc_coll_args_t a;
    memset(&a, 0, sizeof(a));
    a.coll_type = UCC_COLL_TYPE_ALLGATHER;
    a.src.info  = (ucc_coll_buffer_info_t){(void *)src, bytes, UCC_DT_UINT8, UCC_MEMORY_TYPE_HOST};
    a.dst.info  = (ucc_coll_buffer_info_t){dst, bytes * (size_t)size, UCC_DT_UINT8, UCC_MEMORY_TYPE_HOST};
    return run_coll(&a, team, ctx);
}

/* The context's address: a blob and its length, the same pointer on every
 * call, naming this endpoint and a job every endpoint agrees on. */
static int context_address(int rank, int size, ucc_team_h team, ucc_context_h ctx)
{
    ucc_context_attr_t ca;
    memset(&ca, 0, sizeof(ca));
    ca.mask = UCC_CONTEXT_ATTR_FIELD_CTX_ADDR | UCC_CONTEXT_ATTR_FIELD_CTX_ADDR_LEN;
    CHECK_OK(ucc_context_get_attr(ctx, &ca));
    CHECK(ca.ctx_addr != NULL && ca.ctx_addr_len > 20);
    ucc_context_attr_t again;
    memset(&again, 0, sizeof(again));
    again.mask = UCC_CONTEXT_ATTR_FIELD_CTX_ADDR_LEN;
    CHECK_OK(ucc_context_get_attr(ctx, &again));
    CHECK(again.ctx_addr == NULL && again.ctx_addr_len == ca.ctx_addr_len);
    again.mask = UCC_CONTEXT_ATTR_FIELD_CTX_ADDR;
    CHECK_OK(ucc_context_get_attr(ctx, &again));
    CHECK(again.ctx_addr == ca.ctx_addr);
    /* Exchanged as a client would (same length everywhere: the job id is agreed). */
    size_t         len = ca.ctx_addr_len;
    unsigned char *all = malloc(len * (size_t)size);
    CHECK(all != NULL);
    if (allgather_bytes(ca.ctx_addr, all, len, team, ctx, size)) return 1;
    CHECK(memcmp(all + (size_t)rank * len, ca.ctx_addr, len) == 0);
    for (int r = 0; r < size; r++) {
        const unsigned char *a = all + (size_t)r * len;
        uint32_t             ep, n;
        memcpy(&ep, a + 8, 4);
        memcpy(&n, a + 12, 4);
        CHECK(memcmp(a, "fcucctx1", 8) == 0);
        if (ep != (uint32_t)r || n != (uint32_t)size) FAIL("address %d names endpoint %u of %u", r, ep, n);
        CHECK(memcmp(a + 16, all + 16, len - 16) == 0); /* the same job */
    }
    free(all);
    return 0;
}

/* Memory handles as UCC's perftest map modes and tests make them: export,
 * exchange the bytes, import the peers' copies, run collectives beside
 * them, unmap. */
static int mem_maps(int rank, int size, ucc_team_h team, ucc_context_h ctx)
{
    enum { COUNT = 64 };
    ucc_mc_buffer_header_t *h;
    ucc_mem_map_t           seg;
    ucc_mem_map_params_t    mp;
    ucc_mem_map_mem_h       memh = NULL;
    size_t                  memh_size = 0;
    CHECK_OK(ucc_mc_alloc(&h, COUNT * 4, UCC_MEMORY_TYPE_HOST));
    seg.address   = h->addr;
    seg.len       = COUNT * 4;
    mp.segments   = &seg;
    mp.n_segments = 1;
    CHECK_OK(ucc_mem_map(ctx, UCC_MEM_MAP_MODE_EXPORT, &mp, &memh_size, &memh));
    CHECK(memh != NULL && memh_size > 0);

    /* Every rank imports a copy of every other rank's handle. */
    unsigned char     *all = malloc(memh_size * (size_t)size);
    ucc_mem_map_mem_h *global = calloc((size_t)size, sizeof(*global));
    CHECK(all != NULL && global != NULL);
    if (allgather_bytes(memh, all, memh_size, team, ctx, size)) return 1;
    for (int r = 0; r < size; r++) {
        size_t dummy = 12345;
        if (r == rank) {
            global[r] = memh;
            continue;
        }
        global[r] = malloc(memh_size);
        CHECK(global[r] != NULL);
        memcpy(global[r], all + (size_t)r * memh_size, memh_size);
        CHECK_OK(ucc_mem_map(ctx, UCC_MEM_MAP_MODE_IMPORT, &mp, &dummy, &global[r]));
        CHECK(dummy == 0);
    }

    /* A collective with handles in its arguments: they are ignored. */
    int32_t *buf = h->addr, out[COUNT];
    for (int i = 0; i < COUNT; i++) buf[i] = rank + i, out[i] = -1;
    ucc_coll_args_t a;
    memset(&a, 0, sizeof(a));
    a.mask                  = UCC_COLL_ARGS_FIELD_MEM_MAP_SRC_MEMH | UCC_COLL_ARGS_FIELD_MEM_MAP_DST_MEMH |
                              UCC_COLL_ARGS_FIELD_FLAGS;
    a.flags                 = UCC_COLL_ARGS_FLAG_SRC_MEMH_GLOBAL;
    a.coll_type             = UCC_COLL_TYPE_ALLREDUCE;
    a.op                    = UCC_OP_SUM;
    a.src.info              = (ucc_coll_buffer_info_t){buf, COUNT, UCC_DT_INT32, UCC_MEMORY_TYPE_HOST};
    a.dst.info              = (ucc_coll_buffer_info_t){out, COUNT, UCC_DT_INT32, UCC_MEMORY_TYPE_HOST};
    a.src_memh.global_memh  = global;
    a.dst_memh.local_memh   = memh;
    if (run_coll(&a, team, ctx)) return 1;
    for (int i = 0; i < COUNT; i++)
        if (out[i] != size * (size - 1) / 2 + size * i) FAIL("allreduce beside memory handles [%d] = %d", i, out[i]);
    /* Mapped buffers, as UCC's one-sided alltoall takes them (a global work
     * buffer beside): run as the two-sided one, with the same result. */
    int32_t a2a_src[COUNT * 8], a2a_dst[COUNT * 8], work[16];
    if (size > 8) FAIL("a team of %d: the one-sided alltoall's buffers hold 8 ranks", size);
    for (int i = 0; i < COUNT * size; i++) a2a_src[i] = rank * 1000 + i, a2a_dst[i] = -1;
    memset(&a, 0, sizeof(a));
    a.mask               = UCC_COLL_ARGS_FIELD_FLAGS | UCC_COLL_ARGS_FIELD_GLOBAL_WORK_BUFFER;
    a.flags              = UCC_COLL_ARGS_FLAG_MEM_MAPPED_BUFFERS;
    a.coll_type          = UCC_COLL_TYPE_ALLTOALL;
    a.src.info           = (ucc_coll_buffer_info_t){a2a_src, COUNT * size, UCC_DT_INT32, UCC_MEMORY_TYPE_HOST};
    a.dst.info           = (ucc_coll_buffer_info_t){a2a_dst, COUNT * size, UCC_DT_INT32, UCC_MEMORY_TYPE_HOST};
    a.global_work_buffer = work;
    if (run_coll(&a, team, ctx)) return 1;
    for (int r = 0; r < size; r++)
        for (int i = 0; i < COUNT; i++)
            if (a2a_dst[r * COUNT + i] != r * 1000 + rank * COUNT + i)
                FAIL("one-sided alltoall: block %d [%d] = %d", r, i, a2a_dst[r * COUNT + i]);

    /* Malformed calls. */
    ucc_mem_map_mem_h bad = NULL;
    size_t            bad_size;
    unsigned char     junk[64];
    mp.n_segments = 2;
    CHECK_STATUS(ucc_mem_map(ctx, UCC_MEM_MAP_MODE_EXPORT, &mp, &bad_size, &bad), UCC_ERR_INVALID_PARAM);
    mp.n_segments = 1;
    CHECK_STATUS(ucc_mem_map(ctx, UCC_MEM_MAP_MODE_EXPORT, NULL, &bad_size, &bad), UCC_ERR_INVALID_PARAM);
    CHECK_STATUS(ucc_mem_map(ctx, UCC_MEM_MAP_MODE_EXPORT, &mp, NULL, &bad), UCC_ERR_INVALID_PARAM);
    CHECK_STATUS(ucc_mem_map(NULL, UCC_MEM_MAP_MODE_EXPORT, &mp, &bad_size, &bad), UCC_ERR_INVALID_PARAM);
    CHECK_STATUS(ucc_mem_map(ctx, (ucc_mem_map_mode_t)9, &mp, &bad_size, &bad), UCC_ERR_INVALID_PARAM);
    CHECK_STATUS(ucc_mem_map(ctx, UCC_MEM_MAP_MODE_EXPORT_OFFLOAD, &mp, &bad_size, &bad), UCC_ERR_NOT_SUPPORTED);
    CHECK(bad == NULL);
    memset(junk, 0x5a, sizeof(junk));
    bad = junk;
    CHECK_STATUS(ucc_mem_map(ctx, UCC_MEM_MAP_MODE_IMPORT, &mp, &bad_size, &bad), UCC_ERR_INVALID_PARAM);
    CHECK_STATUS(ucc_mem_unmap(&bad), UCC_ERR_INVALID_PARAM);
    bad = memh; /* the exported handle itself, not a copy */
    CHECK_STATUS(ucc_mem_map(ctx, UCC_MEM_MAP_MODE_IMPORT, &mp, &bad_size, &bad), UCC_ERR_INVALID_PARAM);

    /* Unmap: imported copies stay their owner's; the exported handle is freed. */
    for (int r = 0; r < size; r++) {
        if (r == rank) continue;
        ucc_mem_map_mem_h copy = global[r];
        CHECK_OK(ucc_mem_unmap(&global[r]));
        CHECK(global[r] == copy);
        CHECK_STATUS(ucc_mem_unmap(&global[r]), UCC_ERR_INVALID_PARAM); /* twice */
        free(copy);
    }
    CHECK_OK(ucc_mem_unmap(&memh));
    CHECK(memh == NULL);
    CHECK_STATUS(ucc_mem_unmap(&memh), UCC_ERR_INVALID_PARAM);
    CHECK_STATUS(ucc_mem_unmap(NULL), UCC_ERR_INVALID_PARAM);
    free(global);
    free(all);
    CHECK_OK(ucc_mc_free(h));
    return 0;
}

static int body(int rank, int size)
{
    ucc_lib_h       lib;
    ucc_context_h   ctx;
    ucc_team_h      team;
    struct oob_info oob = {g_ctx_oob, rank, size, 0};

    if (helpers()) return 1;
    if (executor()) return 1;
    if (open_world(&oob, &lib, &ctx, &team)) return 1;

    /* Attributes, and what ferrocoll does not offer. */
    ucc_context_attr_t ca;
    ca.mask = UCC_CONTEXT_ATTR_FIELD_TYPE | UCC_CONTEXT_ATTR_FIELD_WORK_BUFFER_SIZE;
    CHECK_OK(ucc_context_get_attr(ctx, &ca));
    CHECK(ca.type == UCC_CONTEXT_EXCLUSIVE && ca.global_work_buffer_size == 0);
    if (context_address(rank, size, team, ctx)) return 1;
    if (mem_maps(rank, size, team, ctx)) return 1;
    ucc_datatype_t dt;
    CHECK_STATUS(ucc_dt_create_generic(NULL, NULL, &dt), UCC_ERR_NOT_SUPPORTED);
    ucc_team_h child;
    CHECK_STATUS(ucc_team_create_from_parent((uint64_t)rank, 1, team, &child), UCC_ERR_NOT_IMPLEMENTED);

    if (persistent_allreduce(rank, size, team, ctx, 1)) return 1;
    if (persistent_allreduce(rank, size, team, ctx, 1000)) return 1;
    if (persistent_allreduce(rank, size, team, ctx, 100000)) return 1;
    if (persistent_bcast(rank, size, team, ctx)) return 1;
    if (reposted_without_the_flag(rank, size, team, ctx)) return 1;

    if (destroy_team(team)) return 1;
    CHECK_OK(ucc_context_destroy(ctx));
    CHECK_OK(ucc_finalize(lib));
    return 0;
}

int main(int argc, char **argv) { return run_ranks(argc, argv, body); }
