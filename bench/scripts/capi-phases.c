/* Where a small collective's time goes in ferrocoll's C interface
 * (libucc.so.1): per call, the time of ucc_collective_init,
 * ucc_collective_post, the ucc_collective_test + ucc_context_progress
 * loop (and how many progress calls it made) and
 * ucc_collective_finalize, for an allreduce of two float32 repeated on
 * the same buffers, with an untimed barrier after each. Each rank prints
 * its own means. Ranks are fork()ed processes with a shared-memory OOB
 * (capi/tests/c/harness.h); with one rank, the team is of one (no peer,
 * only the library's path).
 *
 * The clock is the CPU's time-stamp counter where there is one (x86-64,
 * aarch64's virtual counter), scaled to nanoseconds over the run: a
 * phase of a few dozen nanoseconds is still seen.
 *
 *   cargo build --release -p ferrocoll-capi
 *   mkdir -p /tmp/ucclib && cp target/release/libucc.so /tmp/ucclib/libucc.so.1
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Icapi/include -Icapi/tests/c bench/scripts/capi-phases.c \
 *       -o /tmp/capi-phases -L/tmp/ucclib -Wl,-rpath,/tmp/ucclib -lucc
 *   /tmp/capi-phases 1 [iterations]      (team of one)
 *   /tmp/capi-phases 2 [iterations]
 *
 * For BENCHMARKS.md, twenty-first round.
 */
#include "harness.h"

#if defined(__x86_64__)
#include <x86intrin.h>
static inline unsigned long long ticks(void) { return __rdtsc(); }
#elif defined(__aarch64__)
static inline unsigned long long ticks(void)
{
    unsigned long long t;
    __asm__ volatile("mrs %0, cntvct_el0" : "=r"(t));
    return t;
}
#else
static inline unsigned long long ticks(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1000000000ull * (unsigned long long)t.tv_sec + (unsigned long long)t.tv_nsec;
}
#endif

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e9 * (double)t.tv_sec + (double)t.tv_nsec;
}

static int iterations = 100000;

static int body(int rank, int size)
{
    ucc_lib_h       lib;
    ucc_context_h   ctx;
    ucc_team_h      team;
    struct oob_info oob = {g_ctx_oob, rank, size, 0};
    if (open_world(&oob, &lib, &ctx, &team)) return 1;

    float           src[2] = {1, 2}, dst[2];
    ucc_coll_args_t a = float32_args(UCC_COLL_TYPE_ALLREDUCE, UCC_OP_SUM, src, dst, 2), barrier;
    memset(&barrier, 0, sizeof(barrier));
    barrier.coll_type = UCC_COLL_TYPE_BARRIER;

    unsigned long long phase[4] = {0}, progress_calls = 0;
    unsigned long long t_start = 0;
    double             ns_start = 0;
    for (int i = -1000; i < iterations; i++) {
        if (i == 0) {
            t_start  = ticks();
            ns_start = now_ns();
        }
        ucc_coll_req_h     req;
        ucc_status_t       st;
        unsigned long long c0 = ticks();
        CHECK_OK(ucc_collective_init(&a, &req, team));
        unsigned long long c1 = ticks();
        CHECK_OK(ucc_collective_post(req));
        unsigned long long c2 = ticks();
        unsigned long long n  = 0;
        while ((st = ucc_collective_test(req)) == UCC_INPROGRESS) {
            CHECK_OK(ucc_context_progress(ctx));
            n++;
        }
        unsigned long long c3 = ticks();
        CHECK_STATUS(st, UCC_OK);
        CHECK_OK(ucc_collective_finalize(req));
        unsigned long long c4 = ticks();
        CHECK(dst[0] == size * 1.0f && dst[1] == size * 2.0f);
        if (i >= 0) {
            phase[0] += c1 - c0;
            phase[1] += c2 - c1;
            phase[2] += c3 - c2;
            phase[3] += c4 - c3;
            progress_calls += n;
        }
        if (size > 1 && run_coll_spinning(&barrier, team, ctx)) return 1;
    }
    double ns_per_tick = (now_ns() - ns_start) / (double)(ticks() - t_start);
    double k           = ns_per_tick / iterations;
    printf("rank %d of %d, ns per call: init %.0f  post %.0f  test+progress %.0f (%.2f progress calls)  "
           "finalize %.0f  total %.0f\n",
           rank, size, phase[0] * k, phase[1] * k, phase[2] * k, (double)progress_calls / iterations, phase[3] * k,
           (phase[0] + phase[1] + phase[2] + phase[3]) * k);

    return close_world(lib, ctx, team);
}

int main(int argc, char **argv)
{
    if (argc > 2) iterations = atoi(argv[2]);
    return run_ranks(argc, argv, body);
}
