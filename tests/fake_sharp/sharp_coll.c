/*
 * TEST DOUBLE of libsharp_coll.so — not NVIDIA's library, not SHARP.
 *
 * Written for ferrocoll's tests from SHARP's public API (the entry points,
 * structures and codes that ferrocoll's TL/SHARP uses, declared here in our
 * own words). No switch aggregates anything: every collective is computed
 * on the ranks themselves, through the out-of-band (OOB) callbacks the
 * caller gave to sharp_coll_init / sharp_coll_comm_init (gather to rank 0,
 * combine in rank order, broadcast), so a run against it checks that the
 * TL's OOB callbacks, registrations, specs and request handling are right,
 * and nothing about in-network reduction.
 *
 * Configuration: a file `fake_sharp.conf` beside this library (found with
 * dladdr), read at sharp_coll_init, `key=value` per line:
 *   dtypes=MASK     caps' datatype mask (bit = SHARP datatype code), default all 12
 *   ops=MASK        caps' operation mask (bit = SHARP op code), default max..bxor except prod
 *   features=MASK   caps' feature mask (4 = SAT), default 4
 *   fail=CALL:ERR:N the first N calls of CALL on each context fail with ERR
 *                   (N may be `inf`); CALL is init, comm_init, reg_mr, allreduce,
 *                   reduce, bcast, barrier, reduce_scatter, allgather; ERR is
 *                   not_supported, no_resource, lock_failed, error;
 *                   `fail=CALL:ERR:N@R` fails them only on world rank R
 *   hang=CALL       requests of CALL never complete (sharp_coll_req_test says 0 forever)
 * Counters for the tests: fake_sharp_stat("reg_mr"), ("dereg_mr"), ("allreduce"), ...
 *
 * Requests are completed in post order per communicator: testing one request
 * first completes every earlier one, so that every rank makes the same OOB
 * calls in the same order, whichever request it tests first.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- our declarations of the API's types (LP64 layouts, checked by sizes below) ---- */

enum { S_OK = 0, S_ERROR = -1, S_ENOT_SUPP = -2, S_ENOMEM = -3, S_EINVAL = -10, S_EOOB = -15,
       S_ELOCK_FAILED = -18, S_ENO_RESOURCE = -20 };

struct fs_config { const char *ib_dev_list; int polls; int coll_timeout; uint32_t flags; int reserved[3]; };
struct fs_oob {
    int (*bcast)(void *ctx, void *buf, int len, int root);
    int (*barrier)(void *ctx);
    int (*gather)(void *ctx, int root, void *sbuf, void *rbuf, int len);
};
struct fs_init_spec {
    uint64_t job_id; int world_rank; int world_size; int (*progress)(void); int channel;
    struct fs_config config; struct fs_oob oob; int local_rank; int threads; void *oob_ctx; int reserved[4];
};
struct fs_comm_spec { int rank; int size; void *oob_ctx; const uint32_t *world_ranks; int reserved[2]; };
struct fs_caps {
    int pkt_version; uint64_t reserved[2];
    struct { uint64_t dtypes, tag_dtypes, ops, features; uint64_t reserved[4]; } mask;
    struct { int max_osts, data_per_ost, max_groups, max_channels, osts_per_group; } res;
};
struct fs_desc { int type; int mem_type; int reserved[2]; void *ptr; size_t length; void *mr; };
struct fs_reduce_spec {
    int root; struct fs_desc sbuf, rbuf; int dtype; size_t length; int op; int tag_dtype; int aggr;
    int batch; size_t offset; int reserved[2];
};
struct fs_bcast_spec { int root; struct fs_desc buf; size_t size; int reserved[4]; };
struct fs_gather_spec { struct fs_desc sbuf, rbuf; int dtype; size_t size; size_t offset; int reserved[4]; };

_Static_assert(sizeof(struct fs_init_spec) == 120, "init spec layout");
_Static_assert(sizeof(struct fs_caps) == 112, "caps layout");
_Static_assert(sizeof(struct fs_desc) == 40, "data desc layout");
_Static_assert(sizeof(struct fs_reduce_spec) == 136, "reduce spec layout");
_Static_assert(sizeof(struct fs_bcast_spec) == 72, "bcast spec layout");
_Static_assert(sizeof(struct fs_gather_spec) == 120, "gather spec layout");

const struct fs_config sharp_coll_default_config = { NULL, 128, -1, 0, {0, 0, 0} };

/* ---- configuration (one per loaded copy of this library) ---- */

enum call { C_INIT, C_COMM_INIT, C_REG_MR, C_ALLREDUCE, C_REDUCE, C_BCAST, C_BARRIER, C_REDUCE_SCATTER,
            C_ALLGATHER, C_N };
static const char *call_names[C_N] = { "init", "comm_init", "reg_mr", "allreduce", "reduce", "bcast",
                                       "barrier", "reduce_scatter", "allgather" };
static struct {
    int loaded;
    uint64_t dtypes, ops, features;
    int fail_code[C_N];
    long fail_count[C_N];
    int fail_rank[C_N]; /* -1: every rank */
    int hang[C_N];
} conf;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long stats_calls[C_N], stats_reg, stats_dereg, stats_live_mrs;

static int call_of(const char *s, size_t n) {
    for (int i = 0; i < C_N; i++)
        if (strlen(call_names[i]) == n && strncmp(call_names[i], s, n) == 0) return i;
    return -1;
}

static void load_conf(void) {
    conf.dtypes = 0xfff;
    conf.ops = (1u << 0) | (1u << 1) | (1u << 2) | (1u << 4) | (1u << 5) | (1u << 6) | (1u << 7) | (1u << 8) |
               (1u << 9);
    conf.features = 4;
    for (int i = 0; i < C_N; i++) conf.fail_rank[i] = -1;
    Dl_info info;
    if (!dladdr((void *)&load_conf, &info) || !info.dli_fname) return;
    char path[4096];
    snprintf(path, sizeof path, "%s", info.dli_fname);
    char *slash = strrchr(path, '/');
    if (!slash) return;
    snprintf(slash + 1, sizeof path - (size_t)(slash + 1 - path), "fake_sharp.conf");
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        char *eq = strchr(line, '=');
        if (!eq) continue;
        *eq = 0;
        const char *k = line, *v = eq + 1;
        if (!strcmp(k, "dtypes")) conf.dtypes = strtoull(v, NULL, 0);
        else if (!strcmp(k, "ops")) conf.ops = strtoull(v, NULL, 0);
        else if (!strcmp(k, "features")) conf.features = strtoull(v, NULL, 0);
        else if (!strcmp(k, "hang")) {
            int c = call_of(v, strlen(v));
            if (c >= 0) conf.hang[c] = 1;
        } else if (!strcmp(k, "fail")) {
            const char *c1 = strchr(v, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
            if (!c2) continue;
            int c = call_of(v, (size_t)(c1 - v));
            if (c < 0) continue;
            size_t en = (size_t)(c2 - c1 - 1);
            const char *e = c1 + 1;
            int code = !strncmp(e, "not_supported", en) ? S_ENOT_SUPP
                     : !strncmp(e, "no_resource", en)   ? S_ENO_RESOURCE
                     : !strncmp(e, "lock_failed", en)   ? S_ELOCK_FAILED
                                                        : S_ERROR;
            conf.fail_code[c] = code;
            conf.fail_count[c] = !strncmp(c2 + 1, "inf", 3) ? -1 : strtol(c2 + 1, NULL, 10);
            const char *at = strchr(c2 + 1, '@');
            conf.fail_rank[c] = at ? (int)strtol(at + 1, NULL, 10) : -1;
        }
    }
    fclose(f);
}

/* ---- objects ---- */

struct sharp_coll_context {
    struct fs_oob oob;
    void *oob_ctx;
    int rank, size;
    long calls[C_N]; /* per context, so that failures hit every rank alike */
};

enum kind { K_ALLREDUCE, K_REDUCE, K_BCAST, K_BARRIER, K_REDUCE_SCATTER, K_ALLGATHER };
struct fs_req {
    struct sharp_coll_comm *comm;
    enum kind kind;
    int call;
    struct fs_reduce_spec r;
    struct fs_bcast_spec b;
    struct fs_gather_spec g;
    int done, hang, freed;
    struct fs_req *next;
};

struct sharp_coll_comm {
    struct sharp_coll_context *ctx;
    void *oob_ctx;
    int rank, size;
    struct fs_req *head, *tail; /* posted, not yet computed, in post order */
};

struct fs_mr { void *addr; size_t len; uint32_t magic; };
#define MR_MAGIC 0x5a4a7d1fu

static int injected(struct sharp_coll_context *ctx, int call) {
    long n = ctx->calls[call]++;
    pthread_mutex_lock(&lock);
    stats_calls[call]++;
    pthread_mutex_unlock(&lock);
    if (!conf.fail_code[call]) return S_OK;
    if (conf.fail_rank[call] >= 0 && conf.fail_rank[call] != ctx->rank) return S_OK;
    if (conf.fail_count[call] < 0 || n < conf.fail_count[call]) return conf.fail_code[call];
    return S_OK;
}

int sharp_coll_init(struct fs_init_spec *spec, struct sharp_coll_context **out) {
    if (!spec || !out || spec->world_size < 1 || spec->world_rank < 0 || spec->world_rank >= spec->world_size ||
        !spec->oob.bcast || !spec->oob.barrier || !spec->oob.gather)
        return S_EINVAL;
    pthread_mutex_lock(&lock);
    if (!conf.loaded) { load_conf(); conf.loaded = 1; }
    pthread_mutex_unlock(&lock);
    struct sharp_coll_context *c = calloc(1, sizeof *c);
    if (!c) return S_ENOMEM;
    c->oob = spec->oob;
    c->oob_ctx = spec->oob_ctx;
    c->rank = spec->world_rank;
    c->size = spec->world_size;
    int rc = injected(c, C_INIT);
    /* The real library exchanges job information here: so does the double (a barrier). */
    if (rc == S_OK && c->oob.barrier(c->oob_ctx) != 0) rc = S_EOOB;
    if (rc != S_OK) { free(c); return rc; }
    *out = c;
    return S_OK;
}

int sharp_coll_finalize(struct sharp_coll_context *c) { free(c); return S_OK; }

int sharp_coll_caps_query(struct sharp_coll_context *c, struct fs_caps *caps) {
    if (!c || !caps) return S_EINVAL;
    memset(caps, 0, sizeof *caps);
    caps->pkt_version = 1;
    caps->mask.dtypes = conf.dtypes;
    caps->mask.ops = conf.ops;
    caps->mask.features = conf.features;
    caps->res.max_osts = 64;
    caps->res.data_per_ost = 1024;
    return S_OK;
}

int sharp_coll_comm_init(struct sharp_coll_context *c, struct fs_comm_spec *spec, struct sharp_coll_comm **out) {
    if (!c || !spec || !out || spec->size < 1 || spec->rank < 0 || spec->rank >= spec->size) return S_EINVAL;
    int rc = injected(c, C_COMM_INIT);
    if (rc != S_OK) return rc;
    struct sharp_coll_comm *m = calloc(1, sizeof *m);
    if (!m) return S_ENOMEM;
    m->ctx = c;
    m->oob_ctx = spec->oob_ctx;
    m->rank = spec->rank;
    m->size = spec->size;
    /* Group creation is collective: every member must arrive. */
    if (c->oob.barrier(m->oob_ctx) != 0) { free(m); return S_EOOB; }
    *out = m;
    return S_OK;
}

int sharp_coll_comm_destroy(struct sharp_coll_comm *m) {
    if (!m) return S_EINVAL;
    if (m->head) return S_ERROR; /* requests still posted */
    free(m);
    return S_OK;
}

int sharp_coll_reg_mr(struct sharp_coll_context *c, void *buf, size_t size, void **mr) {
    if (!c || !mr || (!buf && size)) return S_EINVAL;
    int rc = injected(c, C_REG_MR);
    if (rc != S_OK) return rc;
    struct fs_mr *h = malloc(sizeof *h);
    if (!h) return S_ENOMEM;
    h->addr = buf; h->len = size; h->magic = MR_MAGIC;
    pthread_mutex_lock(&lock);
    stats_reg++; stats_live_mrs++;
    pthread_mutex_unlock(&lock);
    *mr = h;
    return S_OK;
}

int sharp_coll_dereg_mr(struct sharp_coll_context *c, void *mr) {
    struct fs_mr *h = mr;
    if (!c || !h || h->magic != MR_MAGIC) return S_EINVAL;
    h->magic = 0;
    free(h);
    pthread_mutex_lock(&lock);
    stats_dereg++; stats_live_mrs--;
    pthread_mutex_unlock(&lock);
    return S_OK;
}

/* A buffer must lie inside the registration it names. */
static int covered(const struct fs_desc *d, size_t bytes) {
    const struct fs_mr *h = d->mr;
    if (d->type != 0 || d->mem_type != 0) return 0;
    if (!bytes) return 1;
    if (!h || h->magic != MR_MAGIC || !d->ptr) return 0;
    uintptr_t p = (uintptr_t)d->ptr, a = (uintptr_t)h->addr;
    return p >= a && p + bytes <= a + h->len && d->length >= bytes;
}

static size_t dtype_size(int dt) {
    static const size_t s[12] = { 4, 4, 8, 8, 4, 8, 2, 2, 2, 2, 1, 1 };
    return dt >= 0 && dt < 12 ? s[dt] : 0;
}

/* ---- arithmetic: 16-bit floats through float ---- */

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) bits = sign;
        else { /* subnormal */
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) { man <<= 1; exp--; }
            bits = sign | (exp << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) bits = sign | 0x7f800000u | (man << 13);
    else bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    float f; memcpy(&f, &bits, 4); return f;
}

static uint16_t float_to_half(float f) {
    uint32_t x; memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    int32_t exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
    uint32_t man = x & 0x7fffff;
    if (((x >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
    if (exp >= 31) return (uint16_t)(sign | 0x7c00);
    if (exp <= 0) {
        if (exp < -10) return (uint16_t)sign;
        man |= 0x800000;
        uint32_t shift = (uint32_t)(14 - exp), half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t h = sign | ((uint32_t)exp << 10) | (man >> 13), rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
    return (uint16_t)h;
}

static float bf16_to_float(uint16_t b) { uint32_t x = (uint32_t)b << 16; float f; memcpy(&f, &x, 4); return f; }
static uint16_t float_to_bf16(float f) {
    uint32_t x; memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40);
    return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

#define INT_OP(T) \
    for (size_t i = 0; i < n; i++) { \
        T a = ((T *)acc)[i], b = ((const T *)in)[i], r; \
        switch (op) { \
        case 0: r = a > b ? a : b; break; case 1: r = a < b ? a : b; break; \
        case 2: r = (T)(a + b); break; case 4: r = (a != 0) && (b != 0); break; \
        case 5: r = a & b; break; case 6: r = (a != 0) || (b != 0); break; \
        case 7: r = a | b; break; case 8: r = (a != 0) != (b != 0); break; \
        case 9: r = a ^ b; break; default: return S_ENOT_SUPP; } \
        ((T *)acc)[i] = r; }

#define FLT_OP(T) \
    for (size_t i = 0; i < n; i++) { \
        T a = ((T *)acc)[i], b = ((const T *)in)[i], r; \
        switch (op) { \
        case 0: r = a > b ? a : b; break; case 1: r = a < b ? a : b; break; \
        case 2: r = a + b; break; default: return S_ENOT_SUPP; } \
        ((T *)acc)[i] = r; }

/* acc = acc op in, elementwise; 16-bit floats accumulate in float (acc holds floats). */
static int combine(void *acc, const void *in, size_t n, int dt, int op) {
    switch (dt) {
    case 0: INT_OP(uint32_t) break;
    case 1: INT_OP(int32_t) break;
    case 2: INT_OP(uint64_t) break;
    case 3: INT_OP(int64_t) break;
    case 4: FLT_OP(float) break;
    case 5: FLT_OP(double) break;
    case 6: INT_OP(uint16_t) break;
    case 7: INT_OP(int16_t) break;
    case 10: INT_OP(uint8_t) break;
    case 11: INT_OP(int8_t) break;
    case 8: case 9: {
        for (size_t i = 0; i < n; i++) {
            uint16_t v = ((const uint16_t *)in)[i];
            float a = ((float *)acc)[i], b = dt == 8 ? half_to_float(v) : bf16_to_float(v), r;
            switch (op) {
            case 0: r = a > b ? a : b; break; case 1: r = a < b ? a : b; break;
            case 2: r = a + b; break; default: return S_ENOT_SUPP; }
            ((float *)acc)[i] = r;
        }
        break;
    }
    default: return S_ENOT_SUPP;
    }
    return S_OK;
}

/* Reduce `n` elements of every rank's `contrib` at rank 0 into `out` (rank 0 only). */
static int reduce_at_zero(struct sharp_coll_comm *m, const void *contrib, void *out, size_t n, int dt, int op) {
    struct sharp_coll_context *c = m->ctx;
    size_t es = dtype_size(dt), bytes = n * es;
    if (bytes > (size_t)INT32_MAX) return S_EINVAL;
    char *all = m->rank == 0 ? malloc(bytes * (size_t)m->size + 1) : NULL;
    if (m->rank == 0 && !all) return S_ENOMEM;
    if (c->oob.gather(m->oob_ctx, 0, (void *)contrib, all, (int)bytes) != 0) { free(all); return S_EOOB; }
    if (m->rank == 0) {
        int narrow = dt == 8 || dt == 9;
        void *acc = malloc(narrow ? n * 4 + 1 : bytes + 1);
        if (!acc) { free(all); return S_ENOMEM; }
        if (narrow)
            for (size_t i = 0; i < n; i++) {
                uint16_t v = ((uint16_t *)all)[i];
                ((float *)acc)[i] = dt == 8 ? half_to_float(v) : bf16_to_float(v);
            }
        else memcpy(acc, all, bytes);
        int rc = S_OK;
        for (int r = 1; r < m->size && rc == S_OK; r++) rc = combine(acc, all + (size_t)r * bytes, n, dt, op);
        if (narrow)
            for (size_t i = 0; i < n; i++) {
                float f = ((float *)acc)[i];
                ((uint16_t *)out)[i] = dt == 8 ? float_to_half(f) : float_to_bf16(f);
            }
        else memcpy(out, acc, bytes);
        free(acc);
        free(all);
        return rc;
    }
    return S_OK;
}

/* Compute one request: every member does the same OOB calls in the same order. */
static int compute(struct fs_req *q) {
    struct sharp_coll_comm *m = q->comm;
    struct sharp_coll_context *c = m->ctx;
    void *ctx = m->oob_ctx;
    switch (q->kind) {
    case K_BARRIER:
        return c->oob.barrier(ctx) ? S_EOOB : S_OK;
    case K_BCAST:
        if (q->b.size > (size_t)INT32_MAX) return S_EINVAL;
        return c->oob.bcast(ctx, q->b.buf.ptr, (int)q->b.size, q->b.root) ? S_EOOB : S_OK;
    case K_ALLREDUCE:
    case K_REDUCE:
    case K_REDUCE_SCATTER: {
        size_t es = dtype_size(q->r.dtype);
        size_t total = q->kind == K_REDUCE_SCATTER ? q->r.length * (size_t)m->size : q->r.length;
        size_t bytes = total * es;
        char *res = malloc(bytes + 1);
        if (!res) return S_ENOMEM;
        int rc = reduce_at_zero(m, q->r.sbuf.ptr, res, total, q->r.dtype, q->r.op);
        if (rc == S_OK && q->kind == K_REDUCE) {
            /* rank 0 holds the result: it goes to the root */
            if (q->r.root != 0 && c->oob.bcast(ctx, res, (int)bytes, 0)) rc = S_EOOB;
            if (rc == S_OK && m->rank == q->r.root) memcpy(q->r.rbuf.ptr, res, bytes);
        } else if (rc == S_OK) {
            if (c->oob.bcast(ctx, res, (int)bytes, 0)) rc = S_EOOB;
            else if (q->kind == K_ALLREDUCE) memcpy(q->r.rbuf.ptr, res, bytes);
            else memcpy(q->r.rbuf.ptr, res + (size_t)m->rank * q->r.length * es, q->r.length * es);
        }
        free(res);
        return rc;
    }
    case K_ALLGATHER: {
        size_t bytes = q->g.size * (size_t)m->size;
        if (bytes > (size_t)INT32_MAX) return S_EINVAL;
        char *all = malloc(bytes + 1);
        if (!all) return S_ENOMEM;
        int rc = c->oob.gather(ctx, 0, q->g.sbuf.ptr, all, (int)q->g.size) ? S_EOOB : S_OK;
        if (rc == S_OK && c->oob.bcast(ctx, all, (int)bytes, 0)) rc = S_EOOB;
        if (rc == S_OK) memcpy(q->g.rbuf.ptr, all, bytes);
        free(all);
        return rc;
    }
    }
    return S_ERROR;
}

static int post(struct sharp_coll_comm *m, struct fs_req *q, void **handle) {
    q->comm = m;
    q->hang = conf.hang[q->call];
    if (m->tail) m->tail->next = q; else m->head = q;
    m->tail = q;
    *handle = q;
    return S_OK;
}

static int check_reduce(struct sharp_coll_comm *m, struct fs_reduce_spec *s, int call, size_t in_elems,
                        size_t out_elems, int writes) {
    if (!m || !s || s->dtype < 0 || s->dtype > 11) return S_EINVAL;
    if (!((conf.dtypes >> s->dtype) & 1) || s->op < 0 || s->op > 11 || !((conf.ops >> s->op) & 1))
        return S_ENOT_SUPP;
    size_t es = dtype_size(s->dtype);
    if (!covered(&s->sbuf, in_elems * es)) return S_EINVAL;
    if (writes && !covered(&s->rbuf, out_elems * es)) return S_EINVAL;
    (void)call;
    return S_OK;
}

static int do_reduce_like(struct sharp_coll_comm *m, struct fs_reduce_spec *s, void **h, int call, enum kind k) {
    if (!m || !s || !h) return S_EINVAL;
    int rc = injected(m->ctx, call);
    if (rc != S_OK) return rc;
    size_t in = k == K_REDUCE_SCATTER ? s->length * (size_t)m->size : s->length;
    size_t out = s->length;
    int writes = k != K_REDUCE || s->root == m->rank;
    if (k == K_REDUCE && (s->root < 0 || s->root >= m->size)) return S_EINVAL;
    if (k == K_REDUCE_SCATTER && (s->offset != 0 || !(conf.features & 4))) return S_ENOT_SUPP;
    rc = check_reduce(m, s, call, in, out, writes);
    if (rc != S_OK) return rc;
    struct fs_req *q = calloc(1, sizeof *q);
    if (!q) return S_ENOMEM;
    q->kind = k; q->call = call; q->r = *s;
    return post(m, q, h);
}

int sharp_coll_do_allreduce_nb(struct sharp_coll_comm *m, struct fs_reduce_spec *s, void **h) {
    return do_reduce_like(m, s, h, C_ALLREDUCE, K_ALLREDUCE);
}
int sharp_coll_do_reduce_nb(struct sharp_coll_comm *m, struct fs_reduce_spec *s, void **h) {
    return do_reduce_like(m, s, h, C_REDUCE, K_REDUCE);
}
int sharp_coll_do_reduce_scatter_nb(struct sharp_coll_comm *m, struct fs_reduce_spec *s, void **h) {
    return do_reduce_like(m, s, h, C_REDUCE_SCATTER, K_REDUCE_SCATTER);
}

int sharp_coll_do_bcast_nb(struct sharp_coll_comm *m, struct fs_bcast_spec *s, void **h) {
    if (!m || !s || !h || s->root < 0 || s->root >= m->size) return S_EINVAL;
    int rc = injected(m->ctx, C_BCAST);
    if (rc != S_OK) return rc;
    if (!covered(&s->buf, s->size)) return S_EINVAL;
    struct fs_req *q = calloc(1, sizeof *q);
    if (!q) return S_ENOMEM;
    q->kind = K_BCAST; q->call = C_BCAST; q->b = *s;
    return post(m, q, h);
}

int sharp_coll_do_barrier_nb(struct sharp_coll_comm *m, void **h) {
    if (!m || !h) return S_EINVAL;
    int rc = injected(m->ctx, C_BARRIER);
    if (rc != S_OK) return rc;
    struct fs_req *q = calloc(1, sizeof *q);
    if (!q) return S_ENOMEM;
    q->kind = K_BARRIER; q->call = C_BARRIER;
    return post(m, q, h);
}

int sharp_coll_do_allgather_nb(struct sharp_coll_comm *m, struct fs_gather_spec *s, void **h) {
    if (!m || !s || !h) return S_EINVAL;
    int rc = injected(m->ctx, C_ALLGATHER);
    if (rc != S_OK) return rc;
    if (s->offset != 0) return S_ENOT_SUPP;
    if (!covered(&s->sbuf, s->size) || !covered(&s->rbuf, s->size * (size_t)m->size)) return S_EINVAL;
    struct fs_req *q = calloc(1, sizeof *q);
    if (!q) return S_ENOMEM;
    q->kind = K_ALLGATHER; q->call = C_ALLGATHER; q->g = *s;
    return post(m, q, h);
}

/* Compute posted requests in order, up to `upto` (or all); a hanging one stops the queue. */
static int advance(struct sharp_coll_comm *m, struct fs_req *upto) {
    while (m->head) {
        struct fs_req *q = m->head;
        if (q->hang) return S_OK;
        int rc = compute(q);
        if (rc != S_OK) fprintf(stderr, "fake libsharp_coll: a collective failed (%d)\n", rc);
        q->done = 1;
        m->head = q->next;
        if (!m->head) m->tail = NULL;
        if (q->freed) free(q);
        if (q == upto) break;
    }
    return S_OK;
}

int sharp_coll_progress(struct sharp_coll_context *c) { (void)c; return S_OK; }

int sharp_coll_req_test(void *handle) {
    struct fs_req *q = handle;
    if (!q) return 1;
    if (!q->done) advance(q->comm, q);
    return q->done;
}

int sharp_coll_req_free(void *handle) {
    struct fs_req *q = handle;
    if (!q) return S_EINVAL;
    if (q->done) free(q); else q->freed = 1;
    return S_OK;
}

const char *sharp_coll_strerror(int e) {
    switch (e) {
    case S_OK: return "Success (fake libsharp_coll)";
    case S_ENOT_SUPP: return "Operation not supported (fake libsharp_coll)";
    case S_ENOMEM: return "No memory (fake libsharp_coll)";
    case S_EINVAL: return "Invalid value (fake libsharp_coll)";
    case S_EOOB: return "Out-of-band collective error (fake libsharp_coll)";
    case S_ELOCK_FAILED: return "SAT lock failed, can retry (fake libsharp_coll)";
    case S_ENO_RESOURCE: return "Resource not available (fake libsharp_coll)";
    default: return "Error (fake libsharp_coll)";
    }
}

/* For the tests: counters of this loaded copy. */
long fake_sharp_stat(const char *what) {
    long v = -1;
    pthread_mutex_lock(&lock);
    if (!strcmp(what, "reg_mr")) v = stats_reg;
    else if (!strcmp(what, "dereg_mr")) v = stats_dereg;
    else if (!strcmp(what, "live_mrs")) v = stats_live_mrs;
    else {
        int c = call_of(what, strlen(what));
        if (c >= 0) v = stats_calls[c];
    }
    pthread_mutex_unlock(&lock);
    return v;
}
