/*
 * The life cycle of Open MPI's coll/ucc on ferrocoll's libucc.so.1: a
 * library configured under the "OMPI" prefix, one context per process over
 * an OOB, teams made from endpoint maps with no team OOB, every collective
 * run blocking (test + progress) and checked, non-blocking collectives
 * whose callback finalizes its own request, loops of the same calls on
 * the same buffers (blocking and non-blocking), and bad input refused.
 */
#include "harness.h"

#define N 37 /* elements per rank: odd, so no block divides evenly by accident */

static int32_t val(int rank, int i) { return rank * 1000 + i; }

static int coll_args_init(ucc_coll_args_t *a, ucc_coll_type_t t)
{
    /* Like Open MPI's designated initializers: unnamed fields are zero. */
    memset(a, 0, sizeof(*a));
    a->coll_type = t;
    return 0;
}

/* Open MPI's (and MPICH's) blocking path: the arguments gain the flags
 * field and the latency hint (COLL_UCC_REQ_INIT without a request), then
 * init, post, test + progress, finalize. */
static int run_blocking(ucc_coll_args_t *a, ucc_team_h team, ucc_context_h ctx)
{
    a->mask |= UCC_COLL_ARGS_FIELD_FLAGS;
    a->flags |= UCC_COLL_ARGS_HINT_OPTIMIZE_LATENCY;
    return run_coll(a, team, ctx);
}

static void info(ucc_coll_buffer_info_t *b, void *buf, uint64_t count, ucc_datatype_t dt)
{
    b->buffer   = buf;
    b->count    = count;
    b->datatype = dt;
    b->mem_type = UCC_MEMORY_TYPE_HOST;
}

static void info_v(ucc_coll_buffer_info_v_t *b, void *buf, uint32_t *counts, uint32_t *displs, ucc_datatype_t dt)
{
    b->buffer        = buf;
    b->counts        = (ucc_count_t *)counts;
    b->displacements = (ucc_aint_t *)displs;
    b->datatype      = dt;
    b->mem_type      = UCC_MEMORY_TYPE_UNKNOWN; /* resolved by the library */
}

static int every_collective(int rank, int size, ucc_team_h team, ucc_context_h ctx)
{
    ucc_coll_args_t a;
    int32_t         src[N * OOB_MAX_RANKS], dst[N * OOB_MAX_RANKS * OOB_MAX_RANKS];
    uint32_t        counts[OOB_MAX_RANKS], displs[OOB_MAX_RANKS], rcounts[OOB_MAX_RANKS], rdispls[OOB_MAX_RANKS];

    /* barrier, fanin, fanout */
    coll_args_init(&a, UCC_COLL_TYPE_BARRIER);
    if (run_blocking(&a, team, ctx)) return 1;
    coll_args_init(&a, UCC_COLL_TYPE_FANIN);
    a.root = 0;
    if (run_blocking(&a, team, ctx)) return 1;
    coll_args_init(&a, UCC_COLL_TYPE_FANOUT);
    a.root = (uint64_t)size - 1;
    if (run_blocking(&a, team, ctx)) return 1;

    /* allreduce sum */
    for (int i = 0; i < N; i++) src[i] = val(rank, i), dst[i] = -1;
    coll_args_init(&a, UCC_COLL_TYPE_ALLREDUCE);
    info(&a.src.info, src, N, UCC_DT_INT32);
    info(&a.dst.info, dst, N, UCC_DT_INT32);
    a.op = UCC_OP_SUM;
    if (run_blocking(&a, team, ctx)) return 1;
    for (int i = 0; i < N; i++) {
        int32_t want = 0;
        for (int r = 0; r < size; r++) want += val(r, i);
        if (dst[i] != want) FAIL("allreduce[%d] = %d, want %d", i, dst[i], want);
    }

    /* allreduce max, in place, float64 */
    double d[N];
    for (int i = 0; i < N; i++) d[i] = (double)((rank * 7 + i) % size) + 0.5;
    coll_args_init(&a, UCC_COLL_TYPE_ALLREDUCE);
    a.mask  = UCC_COLL_ARGS_FIELD_FLAGS;
    a.flags = UCC_COLL_ARGS_FLAG_IN_PLACE;
    info(&a.dst.info, d, N, UCC_DT_FLOAT64);
    a.op = UCC_OP_MAX;
    if (run_blocking(&a, team, ctx)) return 1;
    for (int i = 0; i < N; i++) {
        double want = 0;
        for (int r = 0; r < size; r++) want = (double)((r * 7 + i) % size) + 0.5 > want ? (double)((r * 7 + i) % size) + 0.5 : want;
        if (d[i] != want) FAIL("in-place allreduce max[%d] = %g, want %g", i, d[i], want);
    }

    /* allreduce sum and prod of float128 (C's long double, as UCC reduces
       it): every partial result is exact in long double's significand (64
       bits on x86-64, 113 on aarch64) but not in a double's 53, so the
       result is the same whatever the order of the reduction, and equal to
       C's only if the library computes in long double. */
    if (sizeof(long double) == 16) {
        long double ls[2 * N], lp[N], lc[2 * N];
        const long double ulp60 = 1.0L / (1ULL << 60), ulp15 = 1.0L / (1 << 15);
        for (int i = 0; i < N; i++) {
            ls[i] = 1.0L + (long double)(rank + 1 + i) * ulp60;
            lp[i] = 1.0L + (long double)(rank + 1 + i % 3) * ulp15;
            lc[2 * i] = ls[i], lc[2 * i + 1] = -ls[i];
        }
        struct { ucc_datatype_t dt; void *buf; ucc_reduction_op_t op; } f128[] = {
            {UCC_DT_FLOAT128, ls, UCC_OP_SUM},
            {UCC_DT_FLOAT128, lp, UCC_OP_PROD},
            {UCC_DT_FLOAT128_COMPLEX, lc, UCC_OP_SUM},
        };
        for (int k = 0; k < 3; k++) {
            coll_args_init(&a, UCC_COLL_TYPE_ALLREDUCE);
            a.mask  = UCC_COLL_ARGS_FIELD_FLAGS;
            a.flags = UCC_COLL_ARGS_FLAG_IN_PLACE;
            info(&a.dst.info, f128[k].buf, N, f128[k].dt);
            a.op = f128[k].op;
            if (run_blocking(&a, team, ctx)) return 1;
        }
        for (int i = 0; i < N; i++) {
            long double sum = 0, prod = 1;
            for (int r = 0; r < size; r++) {
                sum += 1.0L + (long double)(r + 1 + i) * ulp60;
                prod *= 1.0L + (long double)(r + 1 + i % 3) * ulp15;
            }
            if (ls[i] != sum) FAIL("float128 allreduce sum[%d] = %.21Lg, want %.21Lg", i, ls[i], sum);
            if (lp[i] != prod) FAIL("float128 allreduce prod[%d] = %.21Lg, want %.21Lg", i, lp[i], prod);
            if (lc[2 * i] != sum || lc[2 * i + 1] != -sum)
                FAIL("float128 complex allreduce sum[%d] = (%.21Lg, %.21Lg), want (%.21Lg, %.21Lg)", i,
                     lc[2 * i], lc[2 * i + 1], sum, -sum);
        }
    }

    /* reduce to the last rank; non-roots leave dst unset */
    for (int i = 0; i < N; i++) src[i] = val(rank, i), dst[i] = -1;
    coll_args_init(&a, UCC_COLL_TYPE_REDUCE);
    a.root = (uint64_t)size - 1;
    info(&a.src.info, src, N, UCC_DT_INT32);
    if (rank == size - 1) info(&a.dst.info, dst, N, UCC_DT_INT32);
    else memset(&a.dst, 0xa5, sizeof(a.dst)); /* garbage: must not be read */
    a.op = UCC_OP_SUM;
    if (run_blocking(&a, team, ctx)) return 1;
    if (rank == size - 1)
        for (int i = 0; i < N; i++) {
            int32_t want = 0;
            for (int r = 0; r < size; r++) want += val(r, i);
            if (dst[i] != want) FAIL("reduce[%d] = %d, want %d", i, dst[i], want);
        }

    /* bcast from rank 1 % size */
    int root = 1 % size;
    for (int i = 0; i < N; i++) src[i] = rank == root ? val(root, i) : -1;
    coll_args_init(&a, UCC_COLL_TYPE_BCAST);
    a.root = (uint64_t)root;
    info(&a.src.info, src, N, UCC_DT_INT32);
    memset(&a.dst, 0xa5, sizeof(a.dst));
    if (run_blocking(&a, team, ctx)) return 1;
    for (int i = 0; i < N; i++)
        if (src[i] != val(root, i)) FAIL("bcast[%d] = %d", i, src[i]);

    /* allgather: dst.count is the total */
    for (int i = 0; i < N; i++) src[i] = val(rank, i);
    for (int i = 0; i < N * size; i++) dst[i] = -1;
    coll_args_init(&a, UCC_COLL_TYPE_ALLGATHER);
    info(&a.src.info, src, N, UCC_DT_INT32);
    info(&a.dst.info, dst, (uint64_t)N * size, UCC_DT_INT32);
    if (run_blocking(&a, team, ctx)) return 1;
    for (int r = 0; r < size; r++)
        for (int i = 0; i < N; i++)
            if (dst[r * N + i] != val(r, i)) FAIL("allgather[%d][%d] = %d", r, i, dst[r * N + i]);

    /* allgatherv: rank r gives r + 1 elements */
    uint32_t off = 0;
    for (int r = 0; r < size; r++) rcounts[r] = (uint32_t)r + 1, rdispls[r] = off, off += rcounts[r] + 2;
    for (int i = 0; i < N * size; i++) dst[i] = -1;
    coll_args_init(&a, UCC_COLL_TYPE_ALLGATHERV);
    info(&a.src.info, src, (uint64_t)rank + 1, UCC_DT_INT32);
    info_v(&a.dst.info_v, dst, rcounts, rdispls, UCC_DT_INT32);
    if (run_blocking(&a, team, ctx)) return 1;
    for (int r = 0; r < size; r++)
        for (uint32_t i = 0; i < rcounts[r]; i++)
            if (dst[rdispls[r] + i] != val(r, (int)i)) FAIL("allgatherv[%d][%u] = %d", r, i, dst[rdispls[r] + i]);

    /* alltoall: block p of rank r goes to rank p */
    for (int p = 0; p < size; p++)
        for (int i = 0; i < 3; i++) src[p * 3 + i] = rank * 100 + p * 10 + i;
    for (int i = 0; i < 3 * size; i++) dst[i] = -1;
    coll_args_init(&a, UCC_COLL_TYPE_ALLTOALL);
    info(&a.src.info, src, (uint64_t)3 * size, UCC_DT_INT32);
    info(&a.dst.info, dst, (uint64_t)3 * size, UCC_DT_INT32);
    if (run_blocking(&a, team, ctx)) return 1;
    for (int p = 0; p < size; p++)
        for (int i = 0; i < 3; i++)
            if (dst[p * 3 + i] != p * 100 + rank * 10 + i) FAIL("alltoall from %d [%d] = %d", p, i, dst[p * 3 + i]);

    /* alltoallv: rank r sends (r + p) % 3 + 1 elements to p */
    uint32_t so = 0, ro = 0;
    for (int p = 0; p < size; p++) {
        counts[p] = (uint32_t)((rank + p) % 3 + 1), displs[p] = so, so += counts[p];
        rcounts[p] = (uint32_t)((p + rank) % 3 + 1), rdispls[p] = ro, ro += rcounts[p] + 1;
        for (uint32_t i = 0; i < counts[p]; i++) src[displs[p] + i] = rank * 100 + p * 10 + (int)i;
    }
    for (uint32_t i = 0; i < ro; i++) dst[i] = -1;
    coll_args_init(&a, UCC_COLL_TYPE_ALLTOALLV);
    info_v(&a.src.info_v, src, counts, displs, UCC_DT_INT32);
    info_v(&a.dst.info_v, dst, rcounts, rdispls, UCC_DT_INT32);
    if (run_blocking(&a, team, ctx)) return 1;
    for (int p = 0; p < size; p++)
        for (uint32_t i = 0; i < rcounts[p]; i++)
            if (dst[rdispls[p] + i] != p * 100 + rank * 10 + (int)i) FAIL("alltoallv from %d [%u]", p, i);

    /* reduce_scatter: src is the total, dst one block */
    for (int i = 0; i < 4 * size; i++) src[i] = val(rank, i);
    for (int i = 0; i < 4; i++) dst[i] = -1;
    coll_args_init(&a, UCC_COLL_TYPE_REDUCE_SCATTER);
    info(&a.src.info, src, (uint64_t)4 * size, UCC_DT_INT32);
    info(&a.dst.info, dst, 4, UCC_DT_INT32);
    a.op = UCC_OP_SUM;
    if (run_blocking(&a, team, ctx)) return 1;
    for (int i = 0; i < 4; i++) {
        int32_t want = 0;
        for (int r = 0; r < size; r++) want += val(r, rank * 4 + i);
        if (dst[i] != want) FAIL("reduce_scatter[%d] = %d, want %d", i, dst[i], want);
    }

    /* reduce_scatterv: rank r keeps r + 2 elements */
    uint32_t total = 0;
    for (int r = 0; r < size; r++) rcounts[r] = (uint32_t)r + 2, total += rcounts[r];
    uint32_t mine = 0;
    for (int r = 0; r < rank; r++) mine += rcounts[r];
    for (uint32_t i = 0; i < total; i++) src[i] = val(rank, (int)i);
    for (int i = 0; i < N; i++) dst[i] = -1;
    coll_args_init(&a, UCC_COLL_TYPE_REDUCE_SCATTERV);
    info(&a.src.info, src, total, UCC_DT_INT32);
    info_v(&a.dst.info_v, dst, rcounts, NULL, UCC_DT_INT32);
    a.op = UCC_OP_SUM;
    if (run_blocking(&a, team, ctx)) return 1;
    for (uint32_t i = 0; i < rcounts[rank]; i++) {
        int32_t want = 0;
        for (int r = 0; r < size; r++) want += val(r, (int)(mine + i));
        if (dst[i] != want) FAIL("reduce_scatterv[%u] = %d, want %d", i, dst[i], want);
    }

    /* gather to 0 */
    for (int i = 0; i < N; i++) src[i] = val(rank, i);
    for (int i = 0; i < N * size; i++) dst[i] = -1;
    coll_args_init(&a, UCC_COLL_TYPE_GATHER);
    a.root = 0;
    info(&a.src.info, src, N, UCC_DT_INT32);
    if (rank == 0) info(&a.dst.info, dst, (uint64_t)N * size, UCC_DT_INT32);
    else memset(&a.dst, 0xa5, sizeof(a.dst));
    if (run_blocking(&a, team, ctx)) return 1;
    if (rank == 0)
        for (int r = 0; r < size; r++)
            for (int i = 0; i < N; i++)
                if (dst[r * N + i] != val(r, i)) FAIL("gather[%d][%d] = %d", r, i, dst[r * N + i]);

    /* gatherv to the last rank: rank r gives 2r + 1 elements */
    off = 0;
    for (int r = 0; r < size; r++) rcounts[r] = (uint32_t)(2 * r + 1), rdispls[r] = off, off += rcounts[r];
    for (uint32_t i = 0; i < off; i++) dst[i] = -1;
    coll_args_init(&a, UCC_COLL_TYPE_GATHERV);
    a.root = (uint64_t)size - 1;
    info(&a.src.info, src, (uint64_t)(2 * rank + 1), UCC_DT_INT32);
    if (rank == size - 1) info_v(&a.dst.info_v, dst, rcounts, rdispls, UCC_DT_INT32);
    else memset(&a.dst, 0xa5, sizeof(a.dst));
    if (run_blocking(&a, team, ctx)) return 1;
    if (rank == size - 1)
        for (int r = 0; r < size; r++)
            for (uint32_t i = 0; i < rcounts[r]; i++)
                if (dst[rdispls[r] + i] != val(r, (int)i)) FAIL("gatherv[%d][%u]", r, i);

    /* scatter from 0 */
    for (int i = 0; i < N * size; i++) src[i] = val(i / N, i % N);
    for (int i = 0; i < N; i++) dst[i] = -1;
    coll_args_init(&a, UCC_COLL_TYPE_SCATTER);
    a.root = 0;
    if (rank == 0) info(&a.src.info, src, (uint64_t)N * size, UCC_DT_INT32);
    else memset(&a.src, 0xa5, sizeof(a.src));
    info(&a.dst.info, dst, N, UCC_DT_INT32);
    if (run_blocking(&a, team, ctx)) return 1;
    for (int i = 0; i < N; i++)
        if (dst[i] != val(rank, i)) FAIL("scatter[%d] = %d", i, dst[i]);

    /* scatterv from 1 % size: rank r gets r + 3 elements */
    root = 1 % size;
    off = 0;
    for (int r = 0; r < size; r++) counts[r] = (uint32_t)r + 3, displs[r] = off, off += counts[r];
    for (int r = 0; r < size; r++)
        for (uint32_t i = 0; i < counts[r]; i++) src[displs[r] + i] = val(r, (int)i);
    for (int i = 0; i < N; i++) dst[i] = -1;
    coll_args_init(&a, UCC_COLL_TYPE_SCATTERV);
    a.root = (uint64_t)root;
    if (rank == root) info_v(&a.src.info_v, src, counts, displs, UCC_DT_INT32);
    else memset(&a.src, 0xa5, sizeof(a.src));
    info(&a.dst.info, dst, (uint64_t)rank + 3, UCC_DT_INT32);
    if (run_blocking(&a, team, ctx)) return 1;
    for (int i = 0; i < rank + 3; i++)
        if (dst[i] != val(rank, i)) FAIL("scatterv[%d] = %d", i, dst[i]);
    return 0;
}

/* Open MPI's non-blocking completion: the callback finalizes its request. */
struct nb {
    ucc_coll_req_h req;
    int            done;
    ucc_status_t   status, finalize;
};

static void completion(void *data, ucc_status_t status)
{
    struct nb *n = data;
    n->status    = status;
    n->finalize  = ucc_collective_finalize(n->req);
    n->done      = 1;
}

static int nonblocking(int rank, int size, ucc_team_h team, ucc_context_h ctx)
{
    enum { K = 3 };
    struct nb       nb[K];
    int32_t         src[K][N], dst[K][N];
    ucc_coll_args_t a;
    for (int k = 0; k < K; k++) {
        for (int i = 0; i < N; i++) src[k][i] = val(rank, i) * (k + 1), dst[k][i] = -1;
        coll_args_init(&a, UCC_COLL_TYPE_ALLREDUCE);
        a.mask    = UCC_COLL_ARGS_FIELD_CB;
        a.cb.cb   = completion;
        a.cb.data = &nb[k];
        info(&a.src.info, src[k], N, UCC_DT_INT32);
        info(&a.dst.info, dst[k], N, UCC_DT_INT32);
        a.op = UCC_OP_SUM;
        nb[k].done = 0;
        CHECK_OK(ucc_collective_init(&a, &nb[k].req, team));
        CHECK_OK(ucc_collective_post(nb[k].req));
    }
    /* A zero-size collective completes inside ucc_collective_post: its
     * callback, which finalizes the request, runs once the post returned. */
    struct nb zero = {NULL, 0, UCC_ERR_LAST, UCC_ERR_LAST};
    coll_args_init(&a, UCC_COLL_TYPE_ALLREDUCE);
    a.mask    = UCC_COLL_ARGS_FIELD_CB;
    a.cb.cb   = completion;
    a.cb.data = &zero;
    info(&a.src.info, src[0], 0, UCC_DT_INT32);
    info(&a.dst.info, dst[0], 0, UCC_DT_INT32);
    a.op = UCC_OP_SUM;
    CHECK_OK(ucc_collective_init(&a, &zero.req, team));
    CHECK_OK(ucc_collective_post(zero.req));
    CHECK(zero.done == 1);
    CHECK_STATUS(zero.status, UCC_OK);
    CHECK_STATUS(zero.finalize, UCC_OK);
    for (;;) {
        int all = 1;
        for (int k = 0; k < K; k++) all &= nb[k].done;
        if (all) break;
        CHECK_OK(ucc_context_progress(ctx));
    }
    for (int k = 0; k < K; k++) {
        CHECK_STATUS(nb[k].status, UCC_OK);
        CHECK_STATUS(nb[k].finalize, UCC_OK);
        for (int i = 0; i < N; i++) {
            int32_t want = 0;
            for (int r = 0; r < size; r++) want += val(r, i) * (k + 1);
            if (dst[k][i] != want) FAIL("non-blocking allreduce %d [%d] = %d, want %d", k, i, dst[k][i], want);
        }
        /* Finalized by its callback: a second finalize is refused. */
        CHECK_STATUS(ucc_collective_finalize(nb[k].req), UCC_ERR_INVALID_PARAM);
    }
    return 0;
}

/* A loop of the same calls on the same buffers, as an application's time
 * steps make them: blocking allreduces and bcasts with the barriers
 * between them, then non-blocking allreduces whose callback finalizes
 * its request. The library may hand a finalized request's handle out
 * again for the same call: each result is checked against data that
 * changes every step, and a request finalized by its callback is
 * refused a second finalize until the next init. */
static int repeated_calls(int rank, int size, ucc_team_h team, ucc_context_h ctx)
{
    enum { STEPS = 40 };
    int32_t         src[N], dst[N], buf[N];
    ucc_coll_args_t sum, bcast, barrier, nb_sum;
    struct nb       nb;
    coll_args_init(&sum, UCC_COLL_TYPE_ALLREDUCE);
    info(&sum.src.info, src, N, UCC_DT_INT32);
    info(&sum.dst.info, dst, N, UCC_DT_INT32);
    sum.op = UCC_OP_SUM;
    coll_args_init(&bcast, UCC_COLL_TYPE_BCAST);
    info(&bcast.src.info, buf, N, UCC_DT_INT32);
    bcast.root = (uint64_t)size - 1;
    coll_args_init(&barrier, UCC_COLL_TYPE_BARRIER);
    nb_sum         = sum;
    nb_sum.mask    = UCC_COLL_ARGS_FIELD_CB;
    nb_sum.cb.cb   = completion;
    nb_sum.cb.data = &nb;
    for (int step = 0; step < STEPS; step++) {
        for (int i = 0; i < N; i++) src[i] = val(rank, i) + step, dst[i] = -1;
        for (int i = 0; i < N; i++) buf[i] = rank == size - 1 ? val(step, i) : -1;
        if (run_blocking(&sum, team, ctx) || run_blocking(&bcast, team, ctx) || run_blocking(&barrier, team, ctx))
            return 1;
        for (int i = 0; i < N; i++) {
            int32_t want = 0;
            for (int r = 0; r < size; r++) want += val(r, i) + step;
            if (dst[i] != want) FAIL("step %d: allreduce[%d] = %d, want %d", step, i, dst[i], want);
            if (buf[i] != val(step, i)) FAIL("step %d: bcast[%d] = %d, want %d", step, i, buf[i], val(step, i));
        }
        for (int i = 0; i < N; i++) src[i] = val(rank, i) * (step + 2), dst[i] = -1;
        nb.done = 0;
        CHECK_OK(ucc_collective_init(&nb_sum, &nb.req, team));
        CHECK_OK(ucc_collective_post(nb.req));
        while (!nb.done) CHECK_OK(ucc_context_progress(ctx));
        CHECK_STATUS(nb.status, UCC_OK);
        CHECK_STATUS(nb.finalize, UCC_OK);
        CHECK_STATUS(ucc_collective_finalize(nb.req), UCC_ERR_INVALID_PARAM);
        for (int i = 0; i < N; i++) {
            int32_t want = 0;
            for (int r = 0; r < size; r++) want += val(r, i) * (step + 2);
            if (dst[i] != want) FAIL("step %d: non-blocking allreduce[%d] = %d, want %d", step, i, dst[i], want);
        }
    }
    /* As Open MPI's coll/ucc calls it: buffers of unknown memory type, the
       latency hint, init / post / test / finalize each time; the finalized
       request comes back for the same call (nothing translated again). */
    ucc_coll_args_t ompi = sum;
    ompi.mask |= UCC_COLL_ARGS_FIELD_FLAGS;
    ompi.flags = UCC_COLL_ARGS_HINT_OPTIMIZE_LATENCY;
    ompi.src.info.mem_type = UCC_MEMORY_TYPE_UNKNOWN;
    ompi.dst.info.mem_type = UCC_MEMORY_TYPE_UNKNOWN;
    ucc_coll_req_h first = NULL;
    for (int step = 0; step < 4; step++) {
        ucc_coll_req_h req;
        ucc_status_t   st;
        for (int i = 0; i < N; i++) src[i] = val(rank, i) - step, dst[i] = -1;
        CHECK_OK(ucc_collective_init(&ompi, &req, team));
        if (step == 0) first = req;
        else if (req != first) FAIL("step %d: the same call got request %p, not the finalized %p", step, (void *)req, (void *)first);
        CHECK_OK(ucc_collective_post(req));
        while ((st = ucc_collective_test(req)) == UCC_INPROGRESS) CHECK_OK(ucc_context_progress(ctx));
        CHECK_OK(st);
        CHECK_OK(ucc_collective_finalize(req));
        for (int i = 0; i < N; i++) {
            int32_t want = 0;
            for (int r = 0; r < size; r++) want += val(r, i) - step;
            if (dst[i] != want) FAIL("step %d: coll/ucc-style allreduce[%d] = %d, want %d", step, i, dst[i], want);
        }
    }
    return 0;
}

static uint64_t reversed(uint64_t ep, void *cb_ctx)
{
    return (uint64_t)*(int *)cb_ctx - 1 - ep;
}

/* A collective that fails after its post: rank 1 waits in an active-set
 * bcast (which takes no team sequence number) that its root never posts;
 * the status word turns to UCC_ERR_TIMED_OUT and the callback sees it. */
static int async_failure(int rank, ucc_team_h team, ucc_context_h ctx)
{
    struct nb       f = {NULL, 0, UCC_ERR_LAST, UCC_ERR_LAST};
    int32_t         x[8];
    ucc_coll_args_t a;
    ucc_status_t    st;
    if (rank != 1) return 0;
    coll_args_init(&a, UCC_COLL_TYPE_BCAST);
    a.mask              = UCC_COLL_ARGS_FIELD_ACTIVE_SET | UCC_COLL_ARGS_FIELD_TAG | UCC_COLL_ARGS_FIELD_FLAGS |
                          UCC_COLL_ARGS_FIELD_CB;
    a.flags             = UCC_COLL_ARGS_FLAG_TIMEOUT;
    a.timeout           = 0.2;
    a.tag               = 4242;
    a.root              = 0;
    a.active_set.start  = 0;
    a.active_set.stride = 1;
    a.active_set.size   = 2;
    a.cb.cb             = completion;
    a.cb.data           = &f;
    info(&a.src.info, x, 8, UCC_DT_INT32);
    CHECK_OK(ucc_collective_init(&a, &f.req, team));
    CHECK_OK(ucc_collective_post(f.req));
    while ((st = ucc_collective_test(f.req)) == UCC_INPROGRESS) {
        CHECK_OK(ucc_context_progress(ctx));
        sched_yield();
    }
    CHECK_STATUS(st, UCC_ERR_TIMED_OUT);
    CHECK(f.done == 1);
    CHECK_STATUS(f.status, UCC_ERR_TIMED_OUT);
    CHECK_STATUS(f.finalize, UCC_OK); /* the callback released it */
    return 0;
}

static int bad_input(ucc_lib_h lib, ucc_team_h team, ucc_context_h ctx)
{
    ucc_coll_args_t a;
    ucc_coll_req_h  req;
    int32_t         x[8] = {0};
    int             not_a_handle[64] = {0};
    coll_args_init(&a, UCC_COLL_TYPE_ALLREDUCE);
    info(&a.src.info, x, 4, UCC_DT_INT32);
    info(&a.dst.info, x + 2, 4, UCC_DT_INT32);
    CHECK_STATUS(ucc_collective_init(NULL, &req, team), UCC_ERR_INVALID_PARAM);
    CHECK_STATUS(ucc_collective_init(&a, NULL, team), UCC_ERR_INVALID_PARAM);
    CHECK_STATUS(ucc_collective_init(&a, &req, NULL), UCC_ERR_INVALID_PARAM);
    /* src and dst overlap without the in-place flag (one buffer given
       exactly as both is in place, as Open MPI's coll/ucc uses it) */
    CHECK_STATUS(ucc_collective_init(&a, &req, team), UCC_ERR_INVALID_PARAM);
    a.dst.info.datatype = UCC_PREDEFINED_DT(99); /* past the predefined types */
    CHECK_STATUS(ucc_collective_init(&a, &req, team), UCC_ERR_INVALID_PARAM);
    coll_args_init(&a, UCC_COLL_TYPE_BCAST);
    info(&a.src.info, x, 4, UCC_DT_INT32);
    a.root = 1000;
    CHECK_STATUS(ucc_collective_init(&a, &req, team), UCC_ERR_INVALID_PARAM);
    a.coll_type = (ucc_coll_type_t)3; /* two collectives at once */
    CHECK_STATUS(ucc_collective_init(&a, &req, team), UCC_ERR_INVALID_PARAM);
    /* Handles: foreign memory, wrong kind, NULL. */
    CHECK_STATUS(ucc_context_progress((ucc_context_h)not_a_handle), UCC_ERR_INVALID_PARAM);
    CHECK_STATUS(ucc_context_progress((ucc_context_h)team), UCC_ERR_INVALID_PARAM);
    CHECK_STATUS(ucc_context_progress(NULL), UCC_ERR_INVALID_PARAM);
    CHECK_STATUS(ucc_collective_post(NULL), UCC_ERR_INVALID_PARAM);
    /* A finalized request is dead. */
    coll_args_init(&a, UCC_COLL_TYPE_BARRIER);
    CHECK_OK(ucc_collective_init(&a, &req, team));
    CHECK_OK(ucc_collective_finalize(req));
    CHECK_STATUS(ucc_collective_post(req), UCC_ERR_INVALID_PARAM);
    CHECK_STATUS(ucc_collective_finalize(req), UCC_ERR_INVALID_PARAM);
    /* init and post in one call */
    coll_args_init(&a, UCC_COLL_TYPE_BARRIER);
    CHECK_OK(ucc_collective_init_and_post(&a, &req, team));
    ucc_status_t st;
    while ((st = ucc_collective_test(req)) == UCC_INPROGRESS) CHECK_OK(ucc_context_progress(ctx));
    CHECK_OK(st);
    CHECK_OK(ucc_collective_finalize(req));
    /* An OOB whose endpoint is outside it, or without callbacks. */
    ucc_context_params_t cp;
    ucc_context_h        c2;
    struct oob_info      bogus = {g_team_oob, 5, 2, 0};
    cp.mask = UCC_CONTEXT_PARAM_FIELD_OOB;
    cp.oob  = oob_of(&bogus);
    CHECK_STATUS(ucc_context_create(lib, &cp, NULL, &c2), UCC_ERR_INVALID_PARAM);
    cp.oob.oob_ep   = 0;
    cp.oob.req_test = NULL;
    CHECK_STATUS(ucc_context_create(lib, &cp, NULL, &c2), UCC_ERR_INVALID_PARAM);
    /* A team post that fails leaves its handle NULL, which later calls refuse. */
    ucc_team_h        t2 = (ucc_team_h)not_a_handle;
    ucc_team_params_t tp;
    tp.mask = 0;
    CHECK_STATUS(ucc_team_create_post(&ctx, 2, &tp, &t2), UCC_ERR_NOT_SUPPORTED);
    if (t2 != NULL) FAIL("a failed team post left its handle as %p", (void *)t2);
    CHECK_STATUS(ucc_team_create_test(t2), UCC_ERR_INVALID_PARAM);
    /* maxloc has no UCC datatype to run on */
    coll_args_init(&a, UCC_COLL_TYPE_ALLREDUCE);
    info(&a.src.info, x, 2, UCC_DT_INT32);
    info(&a.dst.info, x + 2, 2, UCC_DT_INT32);
    a.op = UCC_OP_MAXLOC;
    CHECK_STATUS(ucc_collective_init(&a, &req, team), UCC_ERR_NOT_SUPPORTED);
    return 0;
}

static int body(int rank, int size)
{
    ucc_lib_config_h     lib_config;
    ucc_context_config_h ctx_config;
    ucc_lib_h            lib;
    ucc_context_h        ctx;
    ucc_team_h           world, rev;
    struct oob_info      oob = {g_ctx_oob, rank, size, 0};

    /* Library: OMPI_UCC_* variables over UCC_* ones. */
    CHECK_OK(ucc_lib_config_read("OMPI", NULL, &lib_config));
    CHECK_OK(ucc_lib_config_modify(lib_config, "CLS", "basic"));
    CHECK_STATUS(ucc_lib_config_modify(lib_config, "NO_SUCH_VARIABLE", "1"), UCC_ERR_NOT_FOUND);
    CHECK_STATUS(ucc_lib_config_modify(lib_config, NULL, "1"), UCC_ERR_INVALID_PARAM);
    char  *text = NULL;
    size_t len  = 0;
    FILE  *f    = open_memstream(&text, &len);
    ucc_lib_config_print(lib_config, f, "Open MPI's UCC", UCC_CONFIG_PRINT_CONFIG | UCC_CONFIG_PRINT_HEADER | UCC_CONFIG_PRINT_DOC);
    fclose(f);
    CHECK(strstr(text, "# Open MPI's UCC") != NULL);
    CHECK(strstr(text, "UCC_WATCHDOG_TIMEOUT=45s\n") != NULL); /* from OMPI_UCC_WATCHDOG_TIMEOUT */
    CHECK(strstr(text, "UCC_LOG_LEVEL=") != NULL);
    CHECK(strstr(text, "UCC_CLS=basic") != NULL);
    free(text);

    ucc_lib_params_t lp;
    lp.mask        = UCC_LIB_PARAM_FIELD_THREAD_MODE | UCC_LIB_PARAM_FIELD_COLL_TYPES;
    lp.thread_mode = UCC_THREAD_SINGLE;
    lp.coll_types  = UCC_COLL_TYPE_BARRIER | UCC_COLL_TYPE_BCAST | UCC_COLL_TYPE_ALLREDUCE | UCC_COLL_TYPE_ALLTOALL |
                    UCC_COLL_TYPE_ALLTOALLV | UCC_COLL_TYPE_ALLGATHER | UCC_COLL_TYPE_REDUCE | UCC_COLL_TYPE_ALLGATHERV |
                    UCC_COLL_TYPE_GATHER | UCC_COLL_TYPE_SCATTER | UCC_COLL_TYPE_REDUCE_SCATTER;
    CHECK_OK(ucc_init(&lp, lib_config, &lib));
    ucc_lib_config_release(lib_config);

    ucc_lib_attr_t la;
    la.mask = UCC_LIB_ATTR_FIELD_THREAD_MODE | UCC_LIB_ATTR_FIELD_COLL_TYPES;
    CHECK_OK(ucc_lib_get_attr(lib, &la));
    CHECK(la.thread_mode >= UCC_THREAD_SINGLE);
    CHECK((la.coll_types & lp.coll_types) == lp.coll_types);

    /* Context: Open MPI's estimates, then the OOB over all processes. */
    CHECK_OK(ucc_context_config_read(lib, NULL, &ctx_config));
    char n[16];
    snprintf(n, sizeof n, "%d", size);
    CHECK_OK(ucc_context_config_modify(ctx_config, NULL, "ESTIMATED_NUM_EPS", n));
    CHECK_OK(ucc_context_config_modify(ctx_config, NULL, "ESTIMATED_NUM_PPN", n));
    CHECK_OK(ucc_context_config_modify(ctx_config, "tl/ucp", "ALLREDUCE_KN_RADIX", "4"));
    CHECK_STATUS(ucc_context_config_modify(ctx_config, "nonsense", "X", "1"), UCC_ERR_INVALID_PARAM);
    CHECK_STATUS(ucc_context_config_modify(ctx_config, "cl/basic", "_UNKNOWN_FIELD", "x"), UCC_ERR_NOT_FOUND);
    ucc_context_params_t cp;
    cp.mask = UCC_CONTEXT_PARAM_FIELD_OOB;
    cp.oob  = oob_of(&oob);
    CHECK_OK(ucc_context_create(lib, &cp, ctx_config, &ctx));
    ucc_context_config_release(ctx_config);

    /* The world team from a FULL map, no team OOB (Open MPI's COMM_WORLD). */
    ucc_team_params_t tp;
    tp.mask          = UCC_TEAM_PARAM_FIELD_EP_MAP | UCC_TEAM_PARAM_FIELD_EP | UCC_TEAM_PARAM_FIELD_EP_RANGE |
                       UCC_TEAM_PARAM_FIELD_ID;
    tp.ep_map.type   = UCC_EP_MAP_FULL;
    tp.ep_map.ep_num = (uint64_t)size;
    tp.ep            = (uint64_t)rank;
    tp.ep_range      = UCC_COLLECTIVE_EP_RANGE_CONTIG;
    tp.id            = 1;
    if (create_team(ctx, &tp, &world)) return 1;
    /* UCC's MPI test reads the team size through the handle. */
    CHECK(*(uint32_t *)((char *)world + 360) == (uint32_t)size);
    ucc_team_attr_t ta;
    ta.mask = UCC_TEAM_ATTR_FIELD_SIZE | UCC_TEAM_ATTR_FIELD_EP | UCC_TEAM_ATTR_FIELD_EPS;
    CHECK_OK(ucc_team_get_attr(world, &ta));
    CHECK(ta.size == (uint32_t)size && ta.ep == (uint64_t)rank && ta.eps[rank] == (uint64_t)rank);

    /* A second team, ranks reversed through a callback map (a sub-communicator). */
    tp.mask             = UCC_TEAM_PARAM_FIELD_EP_MAP | UCC_TEAM_PARAM_FIELD_EP;
    tp.ep_map.type      = UCC_EP_MAP_CB;
    tp.ep_map.ep_num    = (uint64_t)size;
    tp.ep_map.cb.cb     = reversed;
    tp.ep_map.cb.cb_ctx = &size;
    tp.ep               = (uint64_t)(size - 1 - rank);
    if (create_team(ctx, &tp, &rev)) return 1;

    if (every_collective(rank, size, world, ctx)) return 1;
    if (every_collective(size - 1 - rank, size, rev, ctx)) return 1;
    if (nonblocking(rank, size, world, ctx)) return 1;
    if (repeated_calls(rank, size, world, ctx)) return 1;

    /* An array map over the even ranks only (the odd ones take no part). */
    if (size >= 4 && rank % 2 == 0) {
        uint32_t   evens[OOB_MAX_RANKS / 2];
        ucc_team_h even;
        for (int r = 0; r < size / 2; r++) evens[r] = (uint32_t)(2 * r);
        tp.mask                  = UCC_TEAM_PARAM_FIELD_EP_MAP;
        tp.ep_map.type           = UCC_EP_MAP_ARRAY;
        tp.ep_map.ep_num         = (uint64_t)(size / 2);
        tp.ep_map.array.map      = evens;
        tp.ep_map.array.elem_size = 4;
        if (create_team(ctx, &tp, &even)) return 1;
        if (every_collective(rank / 2, size / 2, even, ctx)) return 1;
        if (destroy_team(even)) return 1;
    }

    if (async_failure(rank, world, ctx)) return 1;
    if (bad_input(lib, world, ctx)) return 1;

    if (destroy_team(rev)) return 1;
    if (destroy_team(world)) return 1;
    CHECK_STATUS(ucc_team_destroy(world), UCC_ERR_INVALID_PARAM);

    /* A context made without an OOB (UCC's context-local one): a team over
       a team OOB connects its members then, and runs every collective,
       progressed through the context it was made on. */
    ucc_context_h   local;
    ucc_team_h      lt;
    struct oob_info toob = {g_team_oob, rank, size, 0};
    cp.mask = 0;
    CHECK_OK(ucc_context_create(lib, &cp, NULL, &local));
    tp.mask = UCC_TEAM_PARAM_FIELD_OOB;
    tp.oob  = oob_of(&toob);
    if (create_team(local, &tp, &lt)) return 1;
    ta.mask = UCC_TEAM_ATTR_FIELD_SIZE | UCC_TEAM_ATTR_FIELD_EP;
    CHECK_OK(ucc_team_get_attr(lt, &ta));
    CHECK(ta.size == (uint32_t)size && ta.ep == (uint64_t)rank);
    if (every_collective(rank, size, lt, local)) return 1;
    if (destroy_team(lt)) return 1;
    CHECK_OK(ucc_context_destroy(local));

    CHECK_OK(ucc_context_destroy(ctx));
    CHECK_OK(ucc_finalize(lib));
    CHECK_STATUS(ucc_finalize(lib), UCC_ERR_INVALID_PARAM);
    return 0;
}

int main(int argc, char **argv)
{
    setenv("OMPI_UCC_WATCHDOG_TIMEOUT", "45s", 1);
    return run_ranks(argc, argv, body);
}
