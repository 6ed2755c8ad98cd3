/*
 * PyTorch's ProcessGroupUCC on ferrocoll's libucc.so.1: thread mode
 * MULTIPLE under the "TORCH" prefix, a shared context and a team made over
 * a team OOB, a progress thread that alone calls ucc_context_progress while
 * the main thread posts and polls request->status, point-to-point as a
 * 2-rank active-set bcast, lists of tensors as v-collectives with a NULL
 * buffer and addresses for displacements, and a triggered post on a CPU
 * execution engine whose post event is there at once.
 */
#include <pthread.h>
#include <sched.h>

#include "harness.h"

#define N 1000

static ucc_context_h g_ctx;
static atomic_int    g_stop;
static atomic_long   g_progress_calls;

static void *progress_thread(void *arg)
{
    (void)arg;
    while (!atomic_load(&g_stop)) {
        if (ucc_context_progress(g_ctx) != UCC_OK) {
            fprintf(stderr, "[rank %d] progress failed\n", g_rank);
            exit(1);
        }
        atomic_fetch_add(&g_progress_calls, 1);
        sched_yield();
    }
    return NULL;
}

/* Post and poll the status only: the progress thread completes it. */
static int post_and_wait(ucc_coll_args_t *a, ucc_team_h team)
{
    ucc_coll_req_h req;
    ucc_status_t   st;
    CHECK_OK(ucc_collective_init(a, &req, team));
    CHECK_OK(ucc_collective_post(req));
    while ((st = ucc_collective_test(req)) == UCC_INPROGRESS) sched_yield();
    CHECK_STATUS(st, UCC_OK);
    CHECK_OK(ucc_collective_finalize(req));
    return 0;
}

static float fval(int rank, int i) { return (float)(rank + 1) * 0.5f + (float)i; }

/* send/recv as ProcessGroupUCC does it: bcast among {root, peer}, matched by tag. */
static int send_recv(int rank, int size, ucc_team_h team, int shift, uint16_t tag)
{
    int       pair_base = rank - rank % 2;
    int       sender    = pair_base + shift;      /* one of the pair sends */
    int       peer      = rank == pair_base ? pair_base + 1 : pair_base;
    int32_t   buf[N];
    (void)size;
    for (int i = 0; i < N; i++) buf[i] = rank == sender ? sender * 7 + i + tag : -1;
    ucc_coll_args_t a;
    memset(&a, 0xa5, sizeof(a)); /* PyTorch leaves the rest of the struct alone */
    a.mask              = UCC_COLL_ARGS_FIELD_ACTIVE_SET | UCC_COLL_ARGS_FIELD_TAG;
    a.tag               = tag;
    a.coll_type         = UCC_COLL_TYPE_BCAST;
    a.src.info.buffer   = buf;
    a.src.info.count    = N;
    a.src.info.datatype = UCC_DT_INT32;
    a.src.info.mem_type = UCC_MEMORY_TYPE_HOST;
    a.root              = (uint64_t)sender;
    a.active_set.start  = (uint64_t)sender;
    a.active_set.stride = (int64_t)((rank == sender ? peer : rank) - sender);
    a.active_set.size   = 2;
    if (post_and_wait(&a, team)) return 1;
    for (int i = 0; i < N; i++)
        if (buf[i] != sender * 7 + i + tag) FAIL("recv from %d [%d] = %d", sender, i, buf[i]);
    return 0;
}

/* alltoall of a list of tensors: alltoallv, NULL buffers, addresses as displacements. */
static int alltoall_list(int rank, int size, ucc_team_h team)
{
    int32_t *in[OOB_MAX_RANKS], *out[OOB_MAX_RANKS];
    uint64_t slen[OOB_MAX_RANKS], soff[OOB_MAX_RANKS], rlen[OOB_MAX_RANKS], roff[OOB_MAX_RANKS];
    for (int p = 0; p < size; p++) {
        int n = (rank + p) % 3 + 1; /* elements rank sends to p */
        int m = (p + rank) % 3 + 1; /* elements rank receives from p */
        in[p]  = malloc(sizeof(int32_t) * (size_t)n);
        out[p] = malloc(sizeof(int32_t) * (size_t)m);
        for (int i = 0; i < n; i++) in[p][i] = rank * 100 + p * 10 + i;
        for (int i = 0; i < m; i++) out[p][i] = -1;
        slen[p] = sizeof(int32_t) * (uint64_t)n, soff[p] = (uint64_t)(uintptr_t)in[p];
        rlen[p] = sizeof(int32_t) * (uint64_t)m, roff[p] = (uint64_t)(uintptr_t)out[p];
    }
    ucc_coll_args_t a;
    memset(&a, 0, sizeof(a));
    a.mask                       = UCC_COLL_ARGS_FIELD_FLAGS;
    a.flags                      = UCC_COLL_ARGS_FLAG_COUNT_64BIT | UCC_COLL_ARGS_FLAG_DISPLACEMENTS_64BIT;
    a.coll_type                  = UCC_COLL_TYPE_ALLTOALLV;
    a.src.info_v.buffer          = NULL;
    a.src.info_v.counts          = slen;
    a.src.info_v.displacements   = soff;
    a.src.info_v.datatype        = UCC_DT_UINT8;
    a.src.info_v.mem_type        = UCC_MEMORY_TYPE_HOST;
    a.dst.info_v.buffer          = NULL;
    a.dst.info_v.counts          = rlen;
    a.dst.info_v.displacements   = roff;
    a.dst.info_v.datatype        = UCC_DT_UINT8;
    a.dst.info_v.mem_type        = UCC_MEMORY_TYPE_HOST;
    if (post_and_wait(&a, team)) return 1;
    for (int p = 0; p < size; p++) {
        for (int i = 0; i < (p + rank) % 3 + 1; i++)
            if (out[p][i] != p * 100 + rank * 10 + i) FAIL("alltoall list from %d [%d] = %d", p, i, out[p][i]);
        free(in[p]);
        free(out[p]);
    }
    return 0;
}

/* allgather into a list of tensors: allgatherv with a NULL dst buffer. */
static int allgather_list(int rank, int size, ucc_team_h team)
{
    float    src[N], *out[OOB_MAX_RANKS];
    uint64_t len[OOB_MAX_RANKS], off[OOB_MAX_RANKS];
    for (int i = 0; i < N; i++) src[i] = fval(rank, i);
    for (int p = 0; p < size; p++) {
        out[p] = malloc(sizeof(float) * N);
        for (int i = 0; i < N; i++) out[p][i] = -1;
        len[p] = sizeof(float) * N, off[p] = (uint64_t)(uintptr_t)out[p];
    }
    ucc_coll_args_t a;
    memset(&a, 0, sizeof(a));
    a.mask                     = UCC_COLL_ARGS_FIELD_FLAGS;
    a.flags                    = UCC_COLL_ARGS_FLAG_COUNT_64BIT | UCC_COLL_ARGS_FLAG_DISPLACEMENTS_64BIT;
    a.coll_type                = UCC_COLL_TYPE_ALLGATHERV;
    a.src.info.buffer          = src;
    a.src.info.count           = sizeof(float) * N;
    a.src.info.datatype        = UCC_DT_UINT8;
    a.src.info.mem_type        = UCC_MEMORY_TYPE_HOST;
    a.dst.info_v.buffer        = NULL;
    a.dst.info_v.counts        = len;
    a.dst.info_v.displacements = off;
    a.dst.info_v.datatype      = UCC_DT_UINT8;
    a.dst.info_v.mem_type      = UCC_MEMORY_TYPE_HOST;
    if (post_and_wait(&a, team)) return 1;
    for (int p = 0; p < size; p++) {
        for (int i = 0; i < N; i++)
            if (out[p][i] != fval(p, i)) FAIL("allgather list from %d [%d] = %g", p, i, (double)out[p][i]);
        free(out[p]);
    }
    return 0;
}

/* A collective posted on a CPU engine, started by the user's event. */
static int triggered(int rank, int size, ucc_team_h team)
{
    ucc_ee_params_t ep = {UCC_EE_CPU_THREAD, NULL, 0};
    ucc_ee_h        ee;
    ucc_coll_req_h  req;
    ucc_ev_t        ev, *got;
    float           src[N], dst[N];
    CHECK_OK(ucc_ee_create(team, &ep, &ee));
    CHECK_STATUS(ucc_ee_get_event(ee, &got), UCC_ERR_NOT_FOUND);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++) src[i] = fval(rank, i) + (float)round, dst[i] = -1;
        ucc_coll_args_t a;
        memset(&a, 0, sizeof(a));
        a.coll_type         = UCC_COLL_TYPE_ALLREDUCE;
        a.op                = UCC_OP_SUM;
        a.src.info.buffer   = src;
        a.src.info.count    = N;
        a.src.info.datatype = UCC_DT_FLOAT32;
        a.src.info.mem_type = UCC_MEMORY_TYPE_HOST;
        a.dst.info          = a.src.info;
        a.dst.info.buffer   = dst;
        CHECK_OK(ucc_collective_init(&a, &req, team));
        memset(&ev, 0, sizeof(ev));
        ev.ev_type = UCC_EVENT_COMPUTE_COMPLETE;
        ev.req     = req;
        CHECK_OK(ucc_collective_triggered_post(ee, &ev));
        /* PyTorch takes the post event right away. */
        if (round == 0) {
            CHECK_OK(ucc_ee_get_event(ee, &got));
            CHECK(got->ev_type == UCC_EVENT_COLLECTIVE_POST && got->req == req);
            CHECK_OK(ucc_ee_ack_event(ee, got));
            CHECK_STATUS(ucc_ee_ack_event(ee, got), UCC_ERR_INVALID_PARAM);
        } else {
            CHECK_OK(ucc_ee_wait(ee, &ev));
            CHECK(ev.ev_type == UCC_EVENT_COLLECTIVE_POST && ev.req == req);
        }
        /* It waits for its trigger. */
        CHECK(ucc_collective_test(req) == UCC_INPROGRESS);
        ucc_ev_t compute = {UCC_EVENT_COMPUTE_COMPLETE, NULL, 0, NULL};
        CHECK_OK(ucc_ee_set_event(ee, &compute));
        ucc_status_t st;
        while ((st = ucc_collective_test(req)) == UCC_INPROGRESS) sched_yield();
        CHECK_STATUS(st, UCC_OK);
        for (int i = 0; i < N; i++) {
            float want = 0;
            for (int r = 0; r < size; r++) want += fval(r, i) + (float)round;
            if (dst[i] != want) FAIL("triggered allreduce[%d] = %g, want %g", i, (double)dst[i], (double)want);
        }
        /* ferrocoll also reports the completion (UCC does not). */
        if (round == 0) {
            do st = ucc_ee_get_event(ee, &got);
            while (st == UCC_ERR_NOT_FOUND);
            CHECK_OK(st);
            CHECK(got->ev_type == UCC_EVENT_COLLECTIVE_COMPLETE && got->req == req);
            CHECK_OK(ucc_ee_ack_event(ee, got));
        } else {
            CHECK_OK(ucc_ee_wait(ee, &ev));
            CHECK(ev.ev_type == UCC_EVENT_COLLECTIVE_COMPLETE && ev.req == req);
        }
        CHECK_OK(ucc_collective_finalize(req));
    }
    CHECK_OK(ucc_ee_destroy(ee));
    CHECK_STATUS(ucc_ee_destroy(ee), UCC_ERR_INVALID_PARAM);
    return 0;
}

static int body(int rank, int size)
{
    ucc_lib_config_h     lib_config;
    ucc_context_config_h ctx_config;
    ucc_lib_h            lib;
    ucc_team_h           team;
    struct oob_info      ctx_oob  = {g_ctx_oob, rank, size, 0};
    struct oob_info      team_oob = {g_team_oob, rank, size, 0};
    pthread_t            progress;

    CHECK_OK(ucc_lib_config_read("TORCH", NULL, &lib_config));
    ucc_lib_params_t lp;
    lp.mask        = UCC_LIB_PARAM_FIELD_THREAD_MODE;
    lp.thread_mode = UCC_THREAD_MULTIPLE;
    CHECK_OK(ucc_init(&lp, lib_config, &lib));
    ucc_lib_config_release(lib_config);
    ucc_lib_attr_t la;
    la.mask = UCC_LIB_ATTR_FIELD_THREAD_MODE;
    CHECK_OK(ucc_lib_get_attr(lib, &la));
    CHECK(la.thread_mode == UCC_THREAD_MULTIPLE);

    CHECK_OK(ucc_context_config_read(lib, NULL, &ctx_config));
    char *text = NULL;
    size_t len = 0;
    FILE *f    = open_memstream(&text, &len);
    ucc_context_config_print(ctx_config, f, "torch", UCC_CONFIG_PRINT_CONFIG);
    fclose(f);
    CHECK(strstr(text, "UCC_WATCHDOG_TIMEOUT=44s\n") != NULL); /* from TORCH_UCC_WATCHDOG_TIMEOUT */
    free(text);
    ucc_context_params_t cp;
    cp.mask = UCC_CONTEXT_PARAM_FIELD_TYPE | UCC_CONTEXT_PARAM_FIELD_OOB;
    cp.type = UCC_CONTEXT_SHARED;
    cp.oob  = oob_of(&ctx_oob);
    CHECK_OK(ucc_context_create(lib, &cp, ctx_config, &g_ctx));
    ucc_context_config_release(ctx_config);

    /* The team over its own OOB, no endpoint map. */
    ucc_team_params_t tp;
    tp.mask     = UCC_TEAM_PARAM_FIELD_EP | UCC_TEAM_PARAM_FIELD_EP_RANGE | UCC_TEAM_PARAM_FIELD_OOB;
    tp.oob      = oob_of(&team_oob);
    tp.ep       = (uint64_t)rank;
    tp.ep_range = UCC_COLLECTIVE_EP_RANGE_CONTIG;
    if (create_team(g_ctx, &tp, &team)) return 1;
    CHECK(*(uint32_t *)((char *)team + 360) == (uint32_t)size);

    /* From here only the progress thread progresses. */
    if (pthread_create(&progress, NULL, progress_thread, NULL)) FAIL("pthread_create");

    float x[N], y[N];
    for (int i = 0; i < N; i++) x[i] = fval(rank, i), y[i] = -1;
    ucc_coll_args_t a = float32_args(UCC_COLL_TYPE_ALLREDUCE, UCC_OP_AVG, x, y, N);
    if (post_and_wait(&a, team)) return 1;
    for (int i = 0; i < N; i++) {
        double want = 0;
        for (int r = 0; r < size; r++) want += fval(r, i);
        want /= size;
        if (y[i] < want - 1e-3 || y[i] > want + 1e-3) FAIL("avg[%d] = %g, want %g", i, (double)y[i], want);
    }

    if (send_recv(rank, size, team, 0, 11)) return 1;
    if (send_recv(rank, size, team, 1, 12)) return 1;
    if (alltoall_list(rank, size, team)) return 1;
    if (allgather_list(rank, size, team)) return 1;
    if (triggered(rank, size, team)) return 1;

    atomic_store(&g_stop, 1);
    pthread_join(progress, NULL);
    CHECK(atomic_load(&g_progress_calls) > 0);
    if (destroy_team(team)) return 1;
    CHECK_OK(ucc_context_destroy(g_ctx));
    CHECK_OK(ucc_finalize(lib));
    return 0;
}

int main(int argc, char **argv)
{
    setenv("TORCH_UCC_WATCHDOG_TIMEOUT", "44s", 1);
    if (argc > 1 && atoi(argv[1]) % 2 != 0) {
        fprintf(stderr, "torch_like pairs ranks for send/recv: give an even number\n");
        return 2;
    }
    return run_ranks(argc, argv, body);
}
