/*
 * Test harness for ferrocoll's libucc.so.1: ranks as fork()ed processes,
 * an out-of-band allgather over shared memory (what MPI or a torch store
 * would provide), and checks that name the rank and the line.
 *
 * Compiled with -D_GNU_SOURCE (open_memstream, MAP_ANONYMOUS).
 *
 * Each test program defines `static int body(int rank, int size)` and
 * calls run_ranks(argc, argv, body) from main: `prog N` runs N ranks. A body
 * returns 0 (passed), SKIP (what it needs is missing), or 1.
 *
 * Built with -DHARNESS_MPI (by mpicc), the ranks are MPI's instead
 * (`mpirun -np N prog`) and the OOB is MPI_Iallgather + MPI_Test on
 * MPI_COMM_WORLD, as Open MPI's coll/ucc bootstraps UCC.
 */
#ifndef FERROCOLL_CAPI_HARNESS_H
#define FERROCOLL_CAPI_HARNESS_H

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <ucc/api/ucc.h>

#ifdef HARNESS_MPI
#include <mpi.h>
#endif

/* UCC internals that UCC's own tools use (not in ucc.h). */
typedef struct ucc_mc_buffer_header {
    ucc_memory_type_t mt;
    int               from_pool;
    void             *addr;
} ucc_mc_buffer_header_t;
ucc_status_t ucc_mc_available(ucc_memory_type_t mem_type);
ucc_status_t ucc_mc_alloc(ucc_mc_buffer_header_t **h_ptr, size_t len, ucc_memory_type_t mem_type);
ucc_status_t ucc_mc_free(ucc_mc_buffer_header_t *h_ptr);
ucc_status_t ucc_mc_memset(void *ptr, int value, size_t size, ucc_memory_type_t mem_type);
ucc_status_t ucc_mc_memcpy(void *dst, const void *src, size_t len, ucc_memory_type_t dst_mem,
                           ucc_memory_type_t src_mem);
ucc_status_t ucc_str_to_memunits(const char *buf, void *dest);
extern size_t      ucc_dt_predefined_sizes[UCC_DT_PREDEFINED_LAST];
extern const char *ucc_memory_type_names[8];

static int g_rank = -1;

/* A body (and the program) that returns this skipped: what it needs is missing. */
#define SKIP 77

#define FAIL(...)                                                              \
    do {                                                                       \
        fprintf(stderr, "[rank %d] %s:%d: ", g_rank, __FILE__, __LINE__);      \
        fprintf(stderr, __VA_ARGS__);                                          \
        fprintf(stderr, "\n");                                                 \
        return 1;                                                              \
    } while (0)

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) FAIL("check failed: %s", #cond);                          \
    } while (0)

#define CHECK_STATUS(call, want)                                               \
    do {                                                                       \
        ucc_status_t st_ = (call);                                             \
        if (st_ != (want))                                                     \
            FAIL("%s returned %d (%s), expected %d", #call, (int)st_,          \
                 ucc_status_string(st_), (int)(want));                         \
    } while (0)

#define CHECK_OK(call) CHECK_STATUS(call, UCC_OK)

/* ---- out-of-band allgather over a shared mapping ------------------------ */

#define OOB_MAX_RANKS 8
#define OOB_SLOT      16384
#define OOB_ROUNDS    64

struct oob_round {
    _Atomic uint64_t arrived; /* grows by one per rank per use of this slot */
    char             data[OOB_MAX_RANKS][OOB_SLOT];
};

struct oob_shared {
    struct oob_round rounds[OOB_ROUNDS];
};

/* One rank's view of one OOB group (passed as coll_info). */
struct oob_info {
    struct oob_shared *sh;
    int                rank, size;
    uint64_t           round;
};

struct oob_req {
    struct oob_info *info;
    uint64_t         round;
    void            *recv;
    size_t           size;
#ifdef HARNESS_MPI
    MPI_Request mpi;
#endif
};

static inline struct oob_shared *oob_map(void)
{
    void *p = mmap(NULL, sizeof(struct oob_shared), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(2);
    }
    return p;
}

#ifdef HARNESS_MPI
/* Open MPI's coll/ucc OOB: a non-blocking allgather of bytes on the
 * communicator, tested with MPI_Test (every endpoint is a rank of
 * MPI_COMM_WORLD here; the shared mapping is not used). */
static inline ucc_status_t oob_allgather(void *src, void *recv, size_t size, void *coll_info, void **request)
{
    struct oob_req *q = malloc(sizeof(*q));
    if (!q) return UCC_ERR_NO_MEMORY;
    q->info = coll_info;
    if (MPI_Iallgather(src, (int)size, MPI_BYTE, recv, (int)size, MPI_BYTE, MPI_COMM_WORLD, &q->mpi) != MPI_SUCCESS) {
        free(q);
        return UCC_ERR_NO_MESSAGE;
    }
    *request = q;
    return UCC_OK;
}

static inline ucc_status_t oob_test(void *request)
{
    struct oob_req *q    = request;
    int             done = 0;
    if (MPI_Test(&q->mpi, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return UCC_ERR_NO_MESSAGE;
    return done ? UCC_OK : UCC_INPROGRESS;
}
#else
/* Rounds are sequential on every rank (a rank posts round k+1 only after
 * round k completed for it), so slot k % OOB_ROUNDS is free again by the
 * time round k + OOB_ROUNDS is posted. */
static inline ucc_status_t oob_allgather(void *src, void *recv, size_t size, void *coll_info, void **request)
{
    struct oob_info  *in = coll_info;
    struct oob_round *r  = &in->sh->rounds[in->round % OOB_ROUNDS];
    struct oob_req   *q;
    if (size > OOB_SLOT) return UCC_ERR_NO_MESSAGE;
    q = malloc(sizeof(*q));
    if (!q) return UCC_ERR_NO_MEMORY;
    memcpy(r->data[in->rank], src, size);
    atomic_fetch_add_explicit(&r->arrived, 1, memory_order_release);
    q->info  = in;
    q->round = in->round++;
    q->recv  = recv;
    q->size  = size;
    *request = q;
    return UCC_OK;
}

static inline ucc_status_t oob_test(void *request)
{
    struct oob_req   *q      = request;
    struct oob_info  *in     = q->info;
    struct oob_round *r      = &in->sh->rounds[q->round % OOB_ROUNDS];
    uint64_t          target = (q->round / OOB_ROUNDS + 1) * (uint64_t)in->size;
    if (atomic_load_explicit(&r->arrived, memory_order_acquire) < target) return UCC_INPROGRESS;
    for (int i = 0; i < in->size; i++) memcpy((char *)q->recv + i * q->size, r->data[i], q->size);
    return UCC_OK;
}

#endif

static inline ucc_status_t oob_free(void *request)
{
    free(request);
    return UCC_OK;
}

static inline ucc_oob_coll_t oob_of(struct oob_info *in)
{
    ucc_oob_coll_t o;
    o.allgather = oob_allgather;
    o.req_test  = oob_test;
    o.req_free  = oob_free;
    o.coll_info = in;
    o.n_oob_eps = (uint32_t)in->size;
    o.oob_ep    = (uint32_t)in->rank;
    return o;
}

/* Two OOB groups every rank may use: the context's and a team's. */
static struct oob_shared *g_ctx_oob, *g_team_oob;

/* ---- common steps --------------------------------------------------------- */

/* The arguments of a `type` collective with reduction `op` over `count`
 * float32 on host memory, from `src` into `dst`; every other field zero. */
static inline ucc_coll_args_t float32_args(ucc_coll_type_t type, ucc_reduction_op_t op, float *src, float *dst,
                                           uint64_t count)
{
    ucc_coll_args_t a;
    memset(&a, 0, sizeof(a));
    a.coll_type = type;
    a.op        = op;
    a.src.info  = (ucc_coll_buffer_info_t){src, count, UCC_DT_FLOAT32, UCC_MEMORY_TYPE_HOST};
    a.dst.info  = (ucc_coll_buffer_info_t){dst, count, UCC_DT_FLOAT32, UCC_MEMORY_TYPE_HOST};
    return a;
}

/* Run a collective to completion the way Open MPI's blocking path does:
 * init, post, test + progress, finalize. */
static inline int run_coll(ucc_coll_args_t *args, ucc_team_h team, ucc_context_h ctx)
{
    ucc_coll_req_h req;
    ucc_status_t   st;
    CHECK_OK(ucc_collective_init(args, &req, team));
    CHECK(ucc_collective_test(req) == UCC_OPERATION_INITIALIZED);
    CHECK_OK(ucc_collective_post(req));
    while ((st = ucc_collective_test(req)) == UCC_INPROGRESS) {
        CHECK_OK(ucc_context_progress(ctx));
        sched_yield(); /* ranks may outnumber cores */
    }
    CHECK_STATUS(st, UCC_OK);
    CHECK_OK(ucc_collective_finalize(req));
    return 0;
}

/* Run a collective to completion as ucc_perftest's loop does: init, post,
 * test + progress without yielding, finalize (for the benchmarks, whose
 * ranks have a core each). */
static inline int run_coll_spinning(ucc_coll_args_t *args, ucc_team_h team, ucc_context_h ctx)
{
    ucc_coll_req_h req;
    ucc_status_t   st;
    CHECK_OK(ucc_collective_init(args, &req, team));
    CHECK_OK(ucc_collective_post(req));
    while ((st = ucc_collective_test(req)) == UCC_INPROGRESS) CHECK_OK(ucc_context_progress(ctx));
    CHECK_STATUS(st, UCC_OK);
    CHECK_OK(ucc_collective_finalize(req));
    return 0;
}

static inline int create_team(ucc_context_h ctx, const ucc_team_params_t *p, ucc_team_h *team)
{
    ucc_status_t st;
    CHECK_OK(ucc_team_create_post(&ctx, 1, p, team));
    while ((st = ucc_team_create_test(*team)) == UCC_INPROGRESS) {
        CHECK_OK(ucc_context_progress(ctx));
        sched_yield();
    }
    CHECK_STATUS(st, UCC_OK);
    return 0;
}

/* A library (UCC_THREAD_SINGLE, the environment's configuration), a
 * context over the OOB and a team of every rank in order: what UCC's
 * perftest and the benchmark-like programs start from. */
static inline int open_world(struct oob_info *oob, ucc_lib_h *lib, ucc_context_h *ctx, ucc_team_h *team)
{
    ucc_lib_config_h lib_config;
    CHECK_OK(ucc_lib_config_read(NULL, NULL, &lib_config));
    ucc_lib_params_t lp;
    lp.mask        = UCC_LIB_PARAM_FIELD_THREAD_MODE;
    lp.thread_mode = UCC_THREAD_SINGLE;
    CHECK_OK(ucc_init(&lp, lib_config, lib));
    ucc_lib_config_release(lib_config);
    ucc_context_params_t cp;
    cp.mask = UCC_CONTEXT_PARAM_FIELD_OOB;
    cp.oob  = oob_of(oob);
    CHECK_OK(ucc_context_create(*lib, &cp, NULL, ctx));
    ucc_team_params_t tp;
    tp.mask                  = UCC_TEAM_PARAM_FIELD_EP_MAP;
    tp.ep_map.type           = UCC_EP_MAP_STRIDED;
    tp.ep_map.ep_num         = (uint64_t)oob->size;
    tp.ep_map.strided.start  = 0;
    tp.ep_map.strided.stride = 1;
    return create_team(*ctx, &tp, team);
}

static inline int destroy_team(ucc_team_h team)
{
    ucc_status_t st;
    while ((st = ucc_team_destroy(team)) == UCC_INPROGRESS) {
    }
    CHECK_OK(st);
    return 0;
}

/* Destroy what open_world made. */
static inline int close_world(ucc_lib_h lib, ucc_context_h ctx, ucc_team_h team)
{
    if (destroy_team(team)) return 1;
    CHECK_OK(ucc_context_destroy(ctx));
    CHECK_OK(ucc_finalize(lib));
    return 0;
}

/* ---- launcher ---------------------------------------------------------- */

#ifdef HARNESS_MPI
/* The ranks are mpirun's: run the body on each, agree on the outcome. */
static inline int run_ranks(int argc, char **argv, int (*body)(int rank, int size))
{
    int rank, size, rc, worst = 0;
    (void)argc;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    g_rank = rank;
    if (size > OOB_MAX_RANKS) {
        fprintf(stderr, "%s: at most %d ranks\n", argv[0], OOB_MAX_RANKS);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    /* A rank that hangs is killed (mpirun then ends the others). */
    alarm(120);
    rc = body(rank, size);
    if (rc != 0 && rc != SKIP) {
        fflush(NULL);
        MPI_Abort(MPI_COMM_WORLD, 1); /* the others may wait in a collective */
    }
    MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && worst == 0) printf("%s: %d ranks passed (MPI)\n", argv[0], size);
    fflush(NULL);
    MPI_Finalize();
    return worst;
}
#else
static inline int run_ranks(int argc, char **argv, int (*body)(int rank, int size))
{
    int size = argc > 1 ? atoi(argv[1]) : 2;
    int failed = 0;
    pid_t pids[OOB_MAX_RANKS];
    if (size < 1 || size > OOB_MAX_RANKS) {
        fprintf(stderr, "usage: %s N (1..%d ranks)\n", argv[0], OOB_MAX_RANKS);
        return 2;
    }
    g_ctx_oob  = oob_map();
    g_team_oob = oob_map();
    fflush(NULL);
    for (int r = 0; r < size; r++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 2;
        }
        if (pid == 0) {
            g_rank = r;
            /* HARNESS_HOSTS=k: the ranks on k hosts, as ferrocoll sees
             * hosts (contiguous blocks; between hosts its TCP transport). */
            if (getenv("HARNESS_HOSTS") && atoi(getenv("HARNESS_HOSTS")) > 0) {
                char host[32];
                snprintf(host, sizeof host, "host%d", r * atoi(getenv("HARNESS_HOSTS")) / size);
                setenv("FERROCOLL_HOST_ID", host, 1);
            }
            /* A rank that hangs is killed rather than hanging the test suite. */
            alarm(120);
            int rc = body(r, size);
            fflush(NULL);
            _exit(rc == 0 || rc == SKIP ? rc : 1);
        }
        pids[r] = pid;
    }
    int skipped = 0;
    for (int r = 0; r < size; r++) {
        int status;
        if (waitpid(pids[r], &status, 0) < 0) {
            perror("waitpid");
            failed = 1;
        } else if (WIFSIGNALED(status)) {
            fprintf(stderr, "rank %d killed by signal %d%s\n", r, WTERMSIG(status),
                    WTERMSIG(status) == SIGALRM ? " (timeout)" : "");
            failed = 1;
        } else if (WEXITSTATUS(status) == SKIP) {
            skipped++;
        } else if (WEXITSTATUS(status) != 0) {
            fprintf(stderr, "rank %d failed (exit %d)\n", r, WEXITSTATUS(status));
            failed = 1;
        }
        if (failed) {
            /* Do not leave the others waiting for a rank that is gone. */
            for (int k = 0; k < size; k++) kill(pids[k], SIGKILL);
        }
    }
    if (!failed && skipped == size) return SKIP;
    if (!failed && skipped) {
        fprintf(stderr, "%d of %d ranks skipped: the ranks disagree\n", skipped, size);
        return 1;
    }
    if (!failed) printf("%s: %d ranks passed\n", argv[0], size);
    return failed;
}
#endif

#endif
