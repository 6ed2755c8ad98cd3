/*
 * A completion callback that calls ucc_context_destroy on its own context
 * from inside ucc_context_progress is refused (UCC_ERR_INVALID_PARAM), not
 * a deadlock on the context, and the context goes on working.
 *
 * Rank 0 posts an allreduce with a callback, tells rank 1 (a flag in
 * memory both processes share), and only then does rank 1 post its own:
 * rank 0's post cannot finish the collective, so its callback runs inside
 * one of its ucc_context_progress calls.
 */
#include "harness.h"

/* Set by rank 0 once its allreduce is posted (shared by the forked ranks). */
static volatile int *g_posted;

struct callback_seen {
    ucc_context_h ctx;
    int           in_progress; /* set around this rank's progress calls */
    int           ran;
    int           ran_in_progress;
    ucc_status_t  destroy;
};

static void destroy_from_callback(void *data, ucc_status_t status)
{
    struct callback_seen *seen = data;
    seen->ran++;
    seen->ran_in_progress = seen->in_progress;
    if (status == UCC_OK) seen->destroy = ucc_context_destroy(seen->ctx);
}

static int body(int rank, int size)
{
    ucc_lib_h       lib;
    ucc_context_h   ctx;
    ucc_team_h      team;
    struct oob_info oob = {g_ctx_oob, rank, size, 0};
    if (open_world(&oob, &lib, &ctx, &team)) return 1;

    float                src[2] = {1.0f + (float)rank, 2.0f}, dst[2] = {0, 0};
    struct callback_seen seen   = {ctx, 0, 0, 0, UCC_OK};
    ucc_coll_args_t      a      = float32_args(UCC_COLL_TYPE_ALLREDUCE, UCC_OP_SUM, src, dst, 2);
    if (rank == 0) {
        a.mask    = UCC_COLL_ARGS_FIELD_CB;
        a.cb.cb   = destroy_from_callback;
        a.cb.data = &seen;
    } else {
        while (!*g_posted) sched_yield();
    }

    ucc_coll_req_h req;
    ucc_status_t   st;
    CHECK_OK(ucc_collective_init(&a, &req, team));
    CHECK_OK(ucc_collective_post(req));
    if (rank == 0) {
        CHECK(seen.ran == 0); /* rank 1 has not posted: nothing finished at post */
        *g_posted = 1;
    }
    while ((st = ucc_collective_test(req)) == UCC_INPROGRESS) {
        seen.in_progress = 1;
        CHECK_OK(ucc_context_progress(ctx));
        seen.in_progress = 0;
        sched_yield();
    }
    CHECK_STATUS(st, UCC_OK);
    CHECK_OK(ucc_collective_finalize(req));
    CHECK(dst[0] == 3.0f && dst[1] == 4.0f);
    if (rank == 0) {
        CHECK(seen.ran == 1 && seen.ran_in_progress);
        CHECK_STATUS(seen.destroy, UCC_ERR_INVALID_PARAM);
    }

    /* The context still works: a barrier on it, then the usual close. */
    ucc_coll_args_t barrier;
    memset(&barrier, 0, sizeof(barrier));
    barrier.coll_type = UCC_COLL_TYPE_BARRIER;
    if (run_coll(&barrier, team, ctx)) return 1;
    return close_world(lib, ctx, team);
}

int main(int argc, char **argv)
{
    g_posted = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (g_posted == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    *g_posted = 0;
    return run_ranks(argc, argv, body);
}
