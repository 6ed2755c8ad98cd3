/*
 * fake libnccl.so.2 — a TEST DOUBLE of NVIDIA's NCCL for ferrocoll's tests
 * on machines without a GPU. A green run on it says that ferrocoll drives
 * NCCL's C interface in a sound order (non-blocking creation polled, enqueue,
 * finalize/destroy, abort only after errors) and handles its errors; it says
 * nothing about NCCL on a GPU.
 *
 * Built by tests/src/fake_nccl.rs (gcc); loaded next to the fake CUDA driver
 * (tests/fake_cuda/), whose cuMemcpyAsync it uses to move data on the
 * caller's stream, so stream order is the fake driver's.
 *
 * What it emulates
 * - ncclGetVersion: FAKE_NCCL_VERSION (default 23007, i.e. 2.30.7).
 * - ncclGetUniqueId: a fresh id (the pid and a counter); counted (ids.made).
 * - ncclCommInitRankConfig: checks the config (magic 0xcafebeef, version >=
 *   2.14, size >= 24) and counts non-blocking ones (init.nonblocking);
 *   returns ncclInProgress for a non-blocking communicator, which then
 *   reports ncclInProgress from ncclCommGetAsyncError FAKE_NCCL_INIT_POLLS
 *   times (default 2), then ncclSuccess, or FAKE_NCCL_INIT_ERROR (a code)
 *   with a last error naming it; FAKE_NCCL_INIT_HANG=1: in progress for
 *   ever. An init whose id is the last one made counts init.same_id.
 * - Collectives and grouped ncclSend/ncclRecv on a one-rank communicator:
 *   copies with cuMemcpyAsync on the given stream (a rank's send to itself
 *   matched with its receive at ncclGroupEnd); a reduction over one rank is
 *   a copy. On a communicator of more ranks every collective fails with
 *   ncclInvalidUsage ("the fake runs one-rank communicators only").
 *   FAKE_NCCL_COLL_ERROR=code fails every collective with that code.
 * - ncclCommFinalize (in progress once, then done), ncclCommDestroy,
 *   ncclCommAbort: counted (comms.finalized, comms.destroyed,
 *   comms.aborted, comms.live); a call on a released communicator is
 *   counted as comms.used_after_release and fails.
 * - A missing entry point is a build of this library with a version script
 *   hiding it.
 * - fake_nccl_counter("key"): a counter, or calls.<entry point>.
 *
 * What it does NOT emulate: more than one rank, networks, devices, kernels,
 * graph capture (work enqueued on a capturing stream runs), NCCL's threads.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int ncclResult_t;
enum { ok = 0, cudaErr = 1, internalErr = 3, invalidArg = 4, invalidUsage = 5, inProgress = 7 };
typedef struct { char internal[128]; } ncclUniqueId;
typedef struct {
    size_t size;
    unsigned magic, version;
    int blocking;
} ncclConfig_head;

#define COMM_MAGIC 0xcc0fa4e1u
struct fn_comm {
    unsigned magic;
    int nranks, rank, blocking;
    int polls_left; /* of in-progress answers */
    int hang;
    ncclResult_t async;
    int released;
    char last[256];
};
typedef struct fn_comm *ncclComm_t;

/* ---- counters ---- */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
#define NKEYS 64
static struct { const char *key; long n; } counters[NKEYS];
static void count(const char *key, long d) {
    pthread_mutex_lock(&mu);
    for (int i = 0; i < NKEYS; i++) {
        if (!counters[i].key) { counters[i].key = strdup(key); counters[i].n = d; break; }
        if (!strcmp(counters[i].key, key)) { counters[i].n += d; break; }
    }
    pthread_mutex_unlock(&mu);
}
long long fake_nccl_counter(const char *key) {
    long n = 0;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < NKEYS && counters[i].key; i++)
        if (!strcmp(counters[i].key, key)) n = counters[i].n;
    pthread_mutex_unlock(&mu);
    return n;
}
#define CALL(name) count("calls." #name, 1)

static int env_int(const char *name, int dflt) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

static __thread char last_global[256];

/* ---- the fake driver's copy ---- */
typedef int (*memcpy_async_fn)(unsigned long long, unsigned long long, size_t, void *);
static memcpy_async_fn copy_fn(void) {
    static memcpy_async_fn f;
    if (!f) {
        void *lib = dlopen("libcuda.so.1", RTLD_NOW);
        if (lib) f = (memcpy_async_fn)dlsym(lib, "cuMemcpyAsync");
    }
    return f;
}
static ncclResult_t copy(const void *src, void *dst, size_t bytes, void *stream) {
    if (src == dst || bytes == 0) return ok;
    memcpy_async_fn f = copy_fn();
    if (!f) return cudaErr;
    return f((unsigned long long)(uintptr_t)dst, (unsigned long long)(uintptr_t)src, bytes, stream) ? cudaErr : ok;
}

static size_t type_size(int t) {
    switch (t) {
    case 0: case 1: case 10: case 11: return 1;
    case 6: case 9: return 2;
    case 2: case 3: case 7: return 4;
    case 4: case 5: case 8: return 8;
    default: return 0;
    }
}

/* ---- library ---- */
ncclResult_t ncclGetVersion(int *v) {
    CALL(ncclGetVersion);
    if (!v) return invalidArg;
    *v = env_int("FAKE_NCCL_VERSION", 23007);
    return ok;
}

const char *ncclGetErrorString(ncclResult_t r) {
    CALL(ncclGetErrorString);
    switch (r) {
    case ok: return "no error";
    case cudaErr: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case 2: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case internalErr: return "internal error - please report this issue to the NCCL developers";
    case invalidArg: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case invalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case 6: return "remote process exited or there was a network error";
    case inProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

const char *ncclGetLastError(ncclComm_t c) {
    CALL(ncclGetLastError);
    if (c && c->magic == COMM_MAGIC) return c->last;
    return last_global;
}

static ncclUniqueId last_id;
static unsigned id_counter;

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    CALL(ncclGetUniqueId);
    if (!id) return invalidArg;
    memset(id, 0, sizeof *id);
    pthread_mutex_lock(&mu);
    unsigned n = ++id_counter;
    pthread_mutex_unlock(&mu);
    snprintf(id->internal, sizeof id->internal, "fake-nccl-id pid %d #%u", (int)getpid(), n);
    pthread_mutex_lock(&mu);
    last_id = *id;
    pthread_mutex_unlock(&mu);
    count("ids.made", 1);
    return ok;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *out, int nranks, ncclUniqueId id, int rank, ncclConfig_head *cfg) {
    CALL(ncclCommInitRankConfig);
    if (!out || nranks < 1 || rank < 0 || rank >= nranks) return invalidArg;
    int blocking = 1;
    if (cfg) {
        if (cfg->magic != 0xcafebeefu || cfg->version < 21400 || cfg->size < 24) {
            count("init.bad_config", 1);
            snprintf(last_global, sizeof last_global, "fake libnccl: bad ncclConfig_t");
            return invalidArg;
        }
        if (cfg->blocking != INT_MIN) blocking = cfg->blocking;
    }
    struct fn_comm *c = calloc(1, sizeof *c);
    if (!c) return 2;
    c->magic = COMM_MAGIC;
    c->nranks = nranks, c->rank = rank, c->blocking = blocking;
    c->polls_left = env_int("FAKE_NCCL_INIT_POLLS", 2);
    c->hang = env_int("FAKE_NCCL_INIT_HANG", 0);
    c->async = env_int("FAKE_NCCL_INIT_ERROR", 0);
    if (c->async) snprintf(c->last, sizeof c->last, "fake libnccl: injected init failure (FAKE_NCCL_INIT_ERROR=%d)", c->async);
    pthread_mutex_lock(&mu);
    int same = !memcmp(&id, &last_id, sizeof id);
    pthread_mutex_unlock(&mu);
    if (same) count("init.same_id", 1);
    if (!blocking) count("init.nonblocking", 1);
    count("comms.live", 1);
    *out = c;
    if (!blocking) return inProgress;
    if (c->hang) return internalErr; /* a blocking init cannot hang in a test */
    c->polls_left = 0;
    return c->async;
}

static int live(ncclComm_t c) {
    if (!c || c->magic != COMM_MAGIC) return 0;
    if (c->released) {
        count("comms.used_after_release", 1);
        return 0;
    }
    return 1;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *r) {
    CALL(ncclCommGetAsyncError);
    if (!live(c) || !r) return invalidArg;
    if (c->hang) { *r = inProgress; return ok; }
    if (c->polls_left > 0) { c->polls_left--; *r = inProgress; return ok; }
    *r = c->async;
    return ok;
}

ncclResult_t ncclCommFinalize(ncclComm_t c) {
    CALL(ncclCommFinalize);
    if (!live(c)) return invalidArg;
    count("comms.finalized", 1);
    if (c->blocking) return ok;
    c->polls_left = 1;
    return inProgress;
}

static ncclResult_t release(ncclComm_t c, const char *what) {
    if (!live(c)) return invalidArg;
    c->released = 1;
    count(what, 1);
    count("comms.live", -1);
    return ok; /* the struct is kept, so a late use is seen and counted */
}
ncclResult_t ncclCommDestroy(ncclComm_t c) { CALL(ncclCommDestroy); return release(c, "comms.destroyed"); }
ncclResult_t ncclCommAbort(ncclComm_t c) { CALL(ncclCommAbort); return release(c, "comms.aborted"); }

/* Common checks of a collective; ok to go on, else the error (with a last error). */
static ncclResult_t coll(ncclComm_t c, const char *name) {
    if (!live(c)) return invalidArg;
    if (c->polls_left > 0 || c->hang) {
        snprintf(c->last, sizeof c->last, "fake libnccl: %s on a communicator still being created", name);
        count("colls.before_ready", 1);
        return invalidUsage;
    }
    int inj = env_int("FAKE_NCCL_COLL_ERROR", 0);
    if (inj) {
        snprintf(c->last, sizeof c->last, "fake libnccl: injected %s failure (FAKE_NCCL_COLL_ERROR=%d)", name, inj);
        return inj;
    }
    if (c->nranks != 1) {
        snprintf(c->last, sizeof c->last, "fake libnccl: %s: the fake runs one-rank communicators only (this one has %d)", name, c->nranks);
        return invalidUsage;
    }
    count("colls.enqueued", 1);
    return ok;
}

#define BYTES(n, t) ((n) * type_size(t))

ncclResult_t ncclAllReduce(const void *s, void *r, size_t n, int t, int op, ncclComm_t c, void *st) {
    CALL(ncclAllReduce); (void)op;
    ncclResult_t e = coll(c, "ncclAllReduce");
    return e ? e : copy(s, r, BYTES(n, t), st);
}
ncclResult_t ncclReduce(const void *s, void *r, size_t n, int t, int op, int root, ncclComm_t c, void *st) {
    CALL(ncclReduce); (void)op;
    ncclResult_t e = coll(c, "ncclReduce");
    if (!e && root != 0) return invalidArg;
    return e ? e : copy(s, r, BYTES(n, t), st);
}
ncclResult_t ncclBroadcast(const void *s, void *r, size_t n, int t, int root, ncclComm_t c, void *st) {
    CALL(ncclBroadcast);
    ncclResult_t e = coll(c, "ncclBroadcast");
    if (!e && root != 0) return invalidArg;
    return e ? e : copy(s, r, BYTES(n, t), st);
}
ncclResult_t ncclAllGather(const void *s, void *r, size_t n, int t, ncclComm_t c, void *st) {
    CALL(ncclAllGather);
    ncclResult_t e = coll(c, "ncclAllGather");
    return e ? e : copy(s, r, BYTES(n, t), st);
}
ncclResult_t ncclReduceScatter(const void *s, void *r, size_t n, int t, int op, ncclComm_t c, void *st) {
    CALL(ncclReduceScatter); (void)op;
    ncclResult_t e = coll(c, "ncclReduceScatter");
    return e ? e : copy(s, r, BYTES(n, t), st);
}
ncclResult_t ncclAlltoAll(const void *s, void *r, size_t n, int t, ncclComm_t c, void *st) {
    CALL(ncclAlltoAll);
    ncclResult_t e = coll(c, "ncclAlltoAll");
    if (!e && s == r) return invalidArg; /* NCCL: in place is not supported */
    return e ? e : copy(s, r, BYTES(n, t), st);
}
ncclResult_t ncclGather(const void *s, void *r, size_t n, int t, int root, ncclComm_t c, void *st) {
    CALL(ncclGather);
    ncclResult_t e = coll(c, "ncclGather");
    if (!e && root != 0) return invalidArg;
    return e ? e : copy(s, r, BYTES(n, t), st);
}
ncclResult_t ncclScatter(const void *s, void *r, size_t n, int t, int root, ncclComm_t c, void *st) {
    CALL(ncclScatter);
    ncclResult_t e = coll(c, "ncclScatter");
    if (!e && root != 0) return invalidArg;
    return e ? e : copy(s, r, BYTES(n, t), st);
}

/* ---- groups: a rank's sends to itself matched with its receives ---- */
#define MAXP 1024
struct p2p { const void *buf; size_t bytes; void *stream; };
static __thread int depth;
static __thread struct p2p sends[MAXP], recvs[MAXP];
static __thread int nsends, nrecvs, group_error;

ncclResult_t ncclGroupStart(void) {
    CALL(ncclGroupStart);
    if (depth++ == 0) nsends = nrecvs = group_error = 0;
    return ok;
}

static ncclResult_t p2p(struct p2p *list, int *n, const void *buf, size_t cnt, int t, int peer, ncclComm_t c, void *st, const char *name) {
    ncclResult_t e = coll(c, name);
    if (e) return e;
    if (peer != 0) return invalidArg;
    if (!depth) {
        snprintf(c->last, sizeof c->last, "fake libnccl: %s to itself outside a group would never complete", name);
        return invalidUsage;
    }
    if (*n == MAXP) return internalErr;
    list[(*n)++] = (struct p2p){buf, BYTES(cnt, t), st};
    return ok;
}
ncclResult_t ncclSend(const void *b, size_t n, int t, int peer, ncclComm_t c, void *st) {
    CALL(ncclSend);
    return p2p(sends, &nsends, b, n, t, peer, c, st, "ncclSend");
}
ncclResult_t ncclRecv(void *b, size_t n, int t, int peer, ncclComm_t c, void *st) {
    CALL(ncclRecv);
    return p2p(recvs, &nrecvs, b, n, t, peer, c, st, "ncclRecv");
}

ncclResult_t ncclGroupEnd(void) {
    CALL(ncclGroupEnd);
    if (depth == 0) return invalidUsage;
    if (--depth) return ok;
    if (nsends != nrecvs) {
        snprintf(last_global, sizeof last_global, "fake libnccl: %d sends and %d receives in a group", nsends, nrecvs);
        return invalidUsage;
    }
    for (int i = 0; i < nsends; i++) {
        if (sends[i].bytes != recvs[i].bytes) return invalidUsage;
        ncclResult_t e = copy(sends[i].buf, (void *)recvs[i].buf, sends[i].bytes, recvs[i].stream);
        if (e) return e;
    }
    count("groups.matched", nsends);
    return ok;
}
