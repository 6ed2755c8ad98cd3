/* Small-collective latency through ferrocoll's C interface (libucc.so.1),
 * timed as ucc_perftest times it: per iteration ucc_collective_init,
 * ucc_collective_post, ucc_collective_test + ucc_context_progress until
 * done, ucc_collective_finalize, with an untimed barrier after every call
 * (two after every other, as ferrocoll-perftest does); each rank's mean,
 * then the mean over ranks. Ranks are fork()ed processes with a
 * shared-memory OOB (capi/tests/c/harness.h).
 *
 *   cargo build --release -p ferrocoll-capi
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Icapi/include -Icapi/tests/c bench/scripts/capi-latency.c \
 *       -o /tmp/capi-latency -Ltarget/release -Wl,-rpath,$PWD/target/release -lucc
 *   /tmp/capi-latency 2 [iterations]      (compare: ferrocoll-perftest --np 2 -c C -b 2 -e 2)
 *
 * For BENCHMARKS.md, twentieth round.
 */
#include "harness.h"

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e6 * (double)t.tv_sec + 1e-3 * (double)t.tv_nsec;
}

static int iterations = 20000;

/* Mean microseconds of `a` on this rank. */
static int timed(const char *name, ucc_coll_args_t *a, ucc_team_h team, ucc_context_h ctx, int rank, int size,
                 struct oob_info *oob)
{
    ucc_coll_args_t barrier;
    memset(&barrier, 0, sizeof(barrier));
    barrier.coll_type = UCC_COLL_TYPE_BARRIER;
    double total = 0;
    for (int i = -100; i < iterations; i++) {
        double t0 = now_us();
        if (run_coll_spinning(a, team, ctx)) return 1;
        if (i >= 0) total += now_us() - t0;
        if (run_coll_spinning(&barrier, team, ctx)) return 1;
        if ((i & 1) && run_coll_spinning(&barrier, team, ctx)) return 1;
    }
    double mine = total / iterations, all[OOB_MAX_RANKS];
    void  *req;
    CHECK_OK(oob_allgather(&mine, all, sizeof(mine), oob, &req));
    while (oob_test(req) == UCC_INPROGRESS) {
    }
    oob_free(req);
    if (rank == 0) {
        double sum = 0, lo = all[0], hi = all[0];
        for (int r = 0; r < size; r++) {
            sum += all[r];
            lo = all[r] < lo ? all[r] : lo;
            hi = all[r] > hi ? all[r] : hi;
        }
        printf("%-10s %d ranks: avg %.3f  min %.3f  max %.3f us\n", name, size, sum / size, lo, hi);
    }
    return 0;
}

static int body(int rank, int size)
{
    ucc_lib_h       lib;
    ucc_context_h   ctx;
    ucc_team_h      team;
    struct oob_info oob     = {g_ctx_oob, rank, size, 0};
    struct oob_info results = {g_team_oob, rank, size, 0};

    if (open_world(&oob, &lib, &ctx, &team)) return 1;

    float           src[2] = {1, 2}, dst[2];
    ucc_coll_args_t a = float32_args(UCC_COLL_TYPE_ALLREDUCE, UCC_OP_SUM, src, dst, 2);
    if (timed("allreduce", &a, team, ctx, rank, size, &results)) return 1;
    memset(&a, 0, sizeof(a));
    a.coll_type = UCC_COLL_TYPE_BCAST;
    a.src.info  = (ucc_coll_buffer_info_t){src, 2, UCC_DT_FLOAT32, UCC_MEMORY_TYPE_HOST};
    if (timed("bcast", &a, team, ctx, rank, size, &results)) return 1;
    memset(&a, 0, sizeof(a));
    a.coll_type = UCC_COLL_TYPE_BARRIER;
    if (timed("barrier", &a, team, ctx, rank, size, &results)) return 1;

    return close_world(lib, ctx, team);
}

int main(int argc, char **argv)
{
    if (argc > 2) iterations = atoi(argv[2]);
    return run_ranks(argc, argv, body);
}
