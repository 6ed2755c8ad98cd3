/*
 * Hostile collective arguments through ucc_collective_init: random
 * collective types (and words that are none), masks, flags, datatypes,
 * memory types, reductions, roots, timeouts (NaN, negative, +inf), active
 * sets, NULL buffers with counts, counts and displacements whose extent
 * overflows, and NULL count or displacement arrays; through
 * ucc_collective_init or ucc_collective_init_and_post, and a persistent
 * request that completed is posted again. Every call must either be
 * refused with an error status or run to completion: no crash, no hang.
 *
 * Only what the library can tell is wrong is generated: an arbitrary
 * pointer, a count larger than the real buffer, a 32-bit count of
 * 0xffffffff or a NULL v-buffer whose displacements are not addresses
 * would be the caller's crash (as in UCC), not a refusal.
 *
 * On several ranks each rank refuses and takes calls of its own, so the
 * ranks post collectives that differ: those must fail (naming the calls)
 * within HOSTILE_WAIT_S seconds (20), whatever their timeouts.
 *
 * Deterministic (a fixed xorshift seed; HOSTILE_SEED and HOSTILE_N
 * override it and the number of calls). HOSTILE_TRACE=DIR writes each
 * rank's calls and their statuses to DIR/hostile-rank<r>.log, a line per
 * call, flushed (a rank killed by the harness leaves its log).
 */
#include "harness.h"

#define BUF (1 << 16) /* every count generated below fits, at any datatype */
#define MAX_RANKS OOB_MAX_RANKS

static uint64_t seed = 88172645463325252ull;
static uint64_t rnd(void)
{
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    return seed;
}
static uint64_t pick(const uint64_t *v, int n) { return v[rnd() % (uint64_t)n]; }

static char     src_buf[BUF] __attribute__((aligned(64))), dst_buf[BUF] __attribute__((aligned(64)));
static uint64_t arrays64[4][MAX_RANKS];
static uint32_t arrays32[4][MAX_RANKS];

static ucc_datatype_t any_datatype(void)
{
    return rnd() % 8 == 0 ? rnd() % 64 : UCC_PREDEFINED_DT(rnd() % UCC_DT_PREDEFINED_LAST);
}

static ucc_memory_type_t any_mem_type(void)
{
    return rnd() % 6 == 0 ? (ucc_memory_type_t)(rnd() % 8) : UCC_MEMORY_TYPE_HOST;
}

static void plain_side(ucc_coll_buffer_info_t *i, char *base)
{
    /* Up to 255 elements of at most 32 bytes, at an offset of up to 6:
     * inside the buffer; UINT64_MAX overflows any extent. */
    const uint64_t counts[] = {0, 1, 2, 3, 7, 16, 64, 255, UINT64_MAX};
    i->buffer   = rnd() % 10 == 0 ? NULL : base + (rnd() % 4 == 0 ? rnd() % 7 : 0);
    i->count    = pick(counts, 9);
    i->datatype = any_datatype();
    i->mem_type = any_mem_type();
}

/* A v side whose arrays are `wide` (64-bit) or not; `k` picks its pair of arrays. */
static void v_side(ucc_coll_buffer_info_v_t *i, char *base, int wide, int k)
{
    const uint64_t vals[] = {0, 1, 2, 5, 64, 255, UINT64_MAX}; /* the last: 64-bit arrays only */
    int null_buffer = rnd() % 10 == 0; /* then every block is empty */
    for (int r = 0; r < MAX_RANKS; r++) {
        uint64_t c = null_buffer ? 0 : pick(vals, wide ? 7 : 6), d = pick(vals, wide ? 7 : 6);
        arrays64[2 * k][r] = c, arrays64[2 * k + 1][r] = d;
        arrays32[2 * k][r] = (uint32_t)c, arrays32[2 * k + 1][r] = (uint32_t)d;
    }
    i->buffer        = null_buffer ? NULL : base;
    i->counts        = rnd() % 12 == 0 ? NULL : wide ? (void *)arrays64[2 * k] : (void *)arrays32[2 * k];
    i->displacements = rnd() % 12 == 0 ? NULL : wide ? (void *)arrays64[2 * k + 1] : (void *)arrays32[2 * k + 1];
    i->datatype      = any_datatype();
    i->mem_type      = any_mem_type();
}

/* The memory types of the call's sides, read as hostile() wrote them (a v side where the type has one). */
static const uint64_t src_v = UCC_COLL_TYPE_ALLTOALLV | UCC_COLL_TYPE_SCATTERV;
static const uint64_t dst_v =
    UCC_COLL_TYPE_ALLGATHERV | UCC_COLL_TYPE_ALLTOALLV | UCC_COLL_TYPE_GATHERV | UCC_COLL_TYPE_REDUCE_SCATTERV;
static ucc_memory_type_t src_mem(const ucc_coll_args_t *a)
{
    return a->coll_type & src_v ? a->src.info_v.mem_type : a->src.info.mem_type;
}
static ucc_memory_type_t dst_mem(const ucc_coll_args_t *a)
{
    return a->coll_type & dst_v ? a->dst.info_v.mem_type : a->dst.info.mem_type;
}
static int is_cuda(ucc_memory_type_t m) { return m == UCC_MEMORY_TYPE_CUDA || m == UCC_MEMORY_TYPE_CUDA_MANAGED; }
static int on_gpu_memory(const ucc_coll_args_t *a) { return is_cuda(src_mem(a)) || is_cuda(dst_mem(a)); }

static void hostile(ucc_coll_args_t *a, int size)
{
    const uint64_t v_types = src_v | dst_v;
    const uint64_t roots[] = {0, 1, 2, UINT64_MAX, (uint64_t)size};
    const double   timeouts[] = {0.0, -1.0, 1e-9, 1e300, 1.0 / 0.0, -1.0 / 0.0, 0.0 / 0.0, 5.0};
    int            t = (int)(rnd() % 18), wide = (int)(rnd() % 2);
    memset(a, 0, sizeof(*a));
    a->coll_type = t < 16 ? (ucc_coll_type_t)(1u << t) : (ucc_coll_type_t)(rnd() & 0x3ffff);
    if (a->coll_type & v_types) {
        /* The v sides hold arrays (valid or NULL), whatever else the type says. */
        if (a->coll_type & src_v) v_side(&a->src.info_v, src_buf, wide, 0);
        else plain_side(&a->src.info, src_buf);
        if (a->coll_type & dst_v) v_side(&a->dst.info_v, dst_buf, wide, 1);
        else plain_side(&a->dst.info, dst_buf);
    } else {
        plain_side(&a->src.info, src_buf);
        plain_side(&a->dst.info, dst_buf);
    }
    a->op = (ucc_reduction_op_t)(rnd() % (UCC_OP_LAST + 3));
    /* A callback or mem-map handle would be the caller's pointer to trust. */
    a->mask  = rnd() & 0x7f & ~(uint64_t)(UCC_COLL_ARGS_FIELD_CB | UCC_COLL_ARGS_FIELD_MEM_MAP_SRC_MEMH |
                                          UCC_COLL_ARGS_FIELD_MEM_MAP_DST_MEMH);
    a->flags = rnd() & 0x3ff & ~(uint64_t)(UCC_COLL_ARGS_FLAG_COUNT_64BIT | UCC_COLL_ARGS_FLAG_DISPLACEMENTS_64BIT);
    if (wide && (a->coll_type & v_types)) {
        /* The arrays are as wide as the flags say (else they are read past their end). */
        a->mask |= UCC_COLL_ARGS_FIELD_FLAGS;
        a->flags |= UCC_COLL_ARGS_FLAG_COUNT_64BIT | UCC_COLL_ARGS_FLAG_DISPLACEMENTS_64BIT;
    }
    a->root               = rnd() % 3 ? 0 : pick(roots, 5);
    a->timeout            = timeouts[rnd() % 8];
    a->tag                = (ucc_coll_id_t)rnd();
    a->global_work_buffer = rnd() % 2 ? NULL : src_buf;
    a->active_set.start   = rnd() % 4;
    a->active_set.stride  = (int64_t)(rnd() % 5) - 2;
    a->active_set.size    = rnd() % 4;
    if (size > 1 && ((a->mask & UCC_COLL_ARGS_FIELD_ACTIVE_SET) || on_gpu_memory(a))) {
        /* Ranks that take and refuse calls differently post active sets
         * whose members never all post them: matched by tag outside the
         * team's order, such a call waits (in UCC too) for a post that may
         * yet come; only its timeout ends it. Likewise a collective on GPU
         * memory that TL/NCCL serves: NCCL matches nothing (its first one
         * makes the communicator, with every rank; a differing one hangs
         * its kernels), so where the calls differ only the timeout ends it
         * (seen on an H200: two ranks in a CUDA gather that the root had
         * refused, waiting for the communicator). */
        a->mask |= UCC_COLL_ARGS_FIELD_FLAGS;
        a->flags |= UCC_COLL_ARGS_FLAG_TIMEOUT;
        a->timeout = 2.0;
    }
}

/* One line per call into the rank's trace, if HOSTILE_TRACE names a folder. */
static FILE *trace;
static void open_trace(int rank)
{
    char path[4096];
    if (!getenv("HOSTILE_TRACE")) return;
    snprintf(path, sizeof(path), "%s/hostile-rank%d.log", getenv("HOSTILE_TRACE"), rank);
    trace = fopen(path, "w");
}
static void trace_call(long i, const ucc_coll_args_t *a, const char *what, ucc_status_t st)
{
    if (!trace) return;
    fprintf(trace, "call %ld type %#x root %llu mem %d/%d mask %#llx flags %#llx: %s %d\n", i, (unsigned)a->coll_type,
            (unsigned long long)a->root, (int)src_mem(a), (int)dst_mem(a), (unsigned long long)a->mask,
            (unsigned long long)a->flags, what, (int)st);
    fflush(trace);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int body(int rank, int size)
{
    struct oob_info oob = {g_ctx_oob, rank, size, 0};
    ucc_lib_h       lib;
    ucc_context_h   ctx;
    ucc_team_h      team;
    long            calls = getenv("HOSTILE_N") ? atol(getenv("HOSTILE_N")) : 30000, ran = 0, refused = 0;
    /* How long a collective may run: ranks whose calls differ (each rank
     * refuses and takes calls of its own) must fail within a few seconds,
     * not at a timeout (the calls' timeouts are random, +inf among them). */
    double          wait_s = getenv("HOSTILE_WAIT_S") ? atof(getenv("HOSTILE_WAIT_S")) : 20.0;
    if (getenv("HOSTILE_SEED")) seed ^= (uint64_t)atol(getenv("HOSTILE_SEED")) * 0x9e3779b97f4a7c15ull;
    if (open_world(&oob, &lib, &ctx, &team)) return 1;
    open_trace(rank);
    for (long i = 0; i < calls; i++) {
        ucc_coll_args_t a;
        ucc_coll_req_h  req;
        ucc_status_t    st;
        int persistent, posts, one_call = rnd() % 4 == 0; /* init and post in one call, a quarter of the time */
        hostile(&a, size);
        persistent = (a.mask & UCC_COLL_ARGS_FIELD_FLAGS) && (a.flags & UCC_COLL_ARGS_FLAG_PERSISTENT);
        st = one_call ? ucc_collective_init_and_post(&a, &req, team) : ucc_collective_init(&a, &req, team);
        trace_call(i, &a, one_call ? "init_and_post" : "init", st);
        if (st != UCC_OK) {
            CHECK(st < 0); /* an error status, not a stray positive one */
            refused++;
            continue;
        }
        ran++;
        /* A persistent request that completed is posted again. */
        for (posts = 0; posts < (persistent ? 2 : 1); posts++) {
            double until = now_s() + wait_s;
            if (!(one_call && posts == 0) && ucc_collective_post(req) != UCC_OK) break;
            while ((st = ucc_collective_test(req)) == UCC_INPROGRESS && now_s() < until) ucc_context_progress(ctx);
            trace_call(i, &a, "ended", st);
            if (st == UCC_INPROGRESS) FAIL("call %ld (type %#x) still in progress after %g s", i, (unsigned)a.coll_type, wait_s);
            if (st != UCC_OK) break;
        }
        CHECK_OK(ucc_collective_finalize(req));
    }
    /* Both kinds were exercised. */
    if (ran == 0 || refused == 0) FAIL("%ld calls ran and %ld were refused: the generator is off", ran, refused);
    printf("rank %d: %ld calls ran, %ld refused\n", rank, ran, refused);
    return close_world(lib, ctx, team);
}

int main(int argc, char **argv) { return run_ranks(argc, argv, body); }
