/*
 * UCC's perftest on ferrocoll's libucc.so.1: its internal helpers
 * (ucc_mc_*, ucc_str_to_memunits, ucc_dt_predefined_sizes,
 * ucc_memory_type_names, the executor calls it probes), buffers from
 * ucc_mc_alloc, and persistent collectives posted again and again, each
 * iteration's result checked.
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
    void *executor = NULL;
    CHECK_STATUS(ucc_ee_executor_init(NULL, &executor), UCC_ERR_NOT_SUPPORTED);
    ucc_get_version(&major, &minor, &release);
    CHECK(major == UCC_API_MAJOR && minor == UCC_API_MINOR);
    CHECK(strcmp(ucc_get_version_string(), UCC_VERSION_STRING) == 0);
    CHECK(strcmp(ucc_status_string(UCC_ERR_TIMED_OUT), "Timeout expired") == 0);
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

static int body(int rank, int size)
{
    ucc_lib_config_h lib_config;
    ucc_lib_h        lib;
    ucc_context_h    ctx;
    ucc_team_h       team;
    struct oob_info  oob = {g_ctx_oob, rank, size, 0};

    if (helpers()) return 1;
    CHECK_OK(ucc_lib_config_read(NULL, NULL, &lib_config));
    ucc_lib_params_t lp;
    lp.mask        = UCC_LIB_PARAM_FIELD_THREAD_MODE;
    lp.thread_mode = UCC_THREAD_SINGLE;
    CHECK_OK(ucc_init(&lp, lib_config, &lib));
    ucc_lib_config_release(lib_config);
    ucc_context_params_t cp;
    cp.mask = UCC_CONTEXT_PARAM_FIELD_OOB;
    cp.oob  = oob_of(&oob);
    CHECK_OK(ucc_context_create(lib, &cp, NULL, &ctx));
    ucc_team_params_t tp;
    tp.mask          = UCC_TEAM_PARAM_FIELD_EP_MAP;
    tp.ep_map.type   = UCC_EP_MAP_STRIDED;
    tp.ep_map.ep_num = (uint64_t)size;
    tp.ep_map.strided.start  = 0;
    tp.ep_map.strided.stride = 1;
    if (create_team(ctx, &tp, &team)) return 1;

    /* Attributes, and what ferrocoll does not offer. */
    ucc_context_attr_t ca;
    ca.mask = UCC_CONTEXT_ATTR_FIELD_TYPE | UCC_CONTEXT_ATTR_FIELD_WORK_BUFFER_SIZE;
    CHECK_OK(ucc_context_get_attr(ctx, &ca));
    CHECK(ca.type == UCC_CONTEXT_EXCLUSIVE && ca.global_work_buffer_size == 0);
    ca.mask = UCC_CONTEXT_ATTR_FIELD_CTX_ADDR;
    CHECK_STATUS(ucc_context_get_attr(ctx, &ca), UCC_ERR_NOT_SUPPORTED);
    ucc_mem_map_mem_h memh = NULL;
    size_t            memh_size;
    CHECK_STATUS(ucc_mem_map(ctx, UCC_MEM_MAP_MODE_EXPORT, NULL, &memh_size, &memh), UCC_ERR_NOT_SUPPORTED);
    ucc_datatype_t dt;
    CHECK_STATUS(ucc_dt_create_generic(NULL, NULL, &dt), UCC_ERR_NOT_SUPPORTED);
    ucc_team_h child;
    CHECK_STATUS(ucc_team_create_from_parent((uint64_t)rank, 1, team, &child), UCC_ERR_NOT_IMPLEMENTED);

    if (persistent_allreduce(rank, size, team, ctx, 1)) return 1;
    if (persistent_allreduce(rank, size, team, ctx, 1000)) return 1;
    if (persistent_allreduce(rank, size, team, ctx, 100000)) return 1;
    if (persistent_bcast(rank, size, team, ctx)) return 1;

    if (destroy_team(team)) return 1;
    CHECK_OK(ucc_context_destroy(ctx));
    CHECK_OK(ucc_finalize(lib));
    return 0;
}

int main(int argc, char **argv) { return run_ranks(argc, argv, body); }
