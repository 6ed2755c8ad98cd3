/* fake libcuda: streams (a FIFO of operations per stream, drained in order
 * by the stream's own worker thread), the legacy and per-thread default
 * streams, stream memory waits and writes, events, and synchronisation. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fake_cuda.h"

#define STREAM_MAGIC 0x57a7e0a1u
#define EVENT_MAGIC 0xe7e7e0a1u
#define DEAD_MAGIC 0xdeadu

struct fc_stream {
    uint32_t magic;
    struct fc_ctx *ctx;
    int blocking; /* orders itself with the legacy stream */
    int legacy, per_thread;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* broadcast on new work, completion and death */
    struct fc_op *head, *tail, *running;
    uint64_t enqueued, completed; /* written under mu, read atomically */
    int dead, worker;
    int capturing; /* 1 between cuStreamBeginCapture and cuStreamEndCapture (nothing is recorded), 2 once invalidated */
    int capture_mode; /* the mode it was begun with */
    struct fc_stream *next; /* the list of streams with work or a future */
};

/* Streams are never freed (a stale handle or a dependency may still point
 * to one); dead, drained streams leave the list. */
static struct fc_stream *streams;
static pthread_mutex_t streams_mu = PTHREAD_MUTEX_INITIALIZER;
/* Held while a blocking stream's dependencies are taken and its op queued,
 * so that the legacy stream and the blocking streams order consistently. */
static pthread_mutex_t order_mu = PTHREAD_MUTEX_INITIALIZER;

static uint64_t load(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }

static struct fc_stream *stream_new(struct fc_ctx *ctx, int blocking, int legacy, int per_thread) {
    struct fc_stream *s = calloc(1, sizeof *s);
    if (!s) abort();
    s->magic = STREAM_MAGIC;
    s->ctx = ctx;
    s->blocking = blocking, s->legacy = legacy, s->per_thread = per_thread;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_mutex_lock(&streams_mu);
    s->next = streams;
    streams = s;
    pthread_mutex_unlock(&streams_mu);
    return s;
}

static void unlink_stream(struct fc_stream *s) {
    pthread_mutex_lock(&streams_mu);
    for (struct fc_stream **p = &streams; *p; p = &(*p)->next) {
        if (*p == s) {
            *p = s->next;
            break;
        }
    }
    pthread_mutex_unlock(&streams_mu);
}

struct fc_ctx *fc_stream_ctx(struct fc_stream *s) { return s->ctx; }

int fc_stream_is_default(const struct fc_stream *s) { return s->legacy || s->per_thread; }

/* ---- the per-thread default streams, ended with their thread ---- */

struct ptds {
    struct fc_stream *s[FC_MAX_DEVICES];
};
static __thread struct ptds *my_ptds;
static pthread_key_t ptds_key;
static pthread_once_t ptds_once = PTHREAD_ONCE_INIT;

static void kill_stream(struct fc_stream *s) {
    pthread_mutex_lock(&s->mu);
    s->dead = 1;
    int idle = !s->worker;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (idle) unlink_stream(s); /* else its worker unlinks it once drained */
}

static void ptds_end(void *p) {
    struct ptds *t = p;
    for (int d = 0; d < FC_MAX_DEVICES; d++)
        if (t->s[d]) kill_stream(t->s[d]);
    free(t);
}

static void ptds_key_init(void) { pthread_key_create(&ptds_key, ptds_end); }

static struct fc_stream *per_thread(struct fc_ctx *ctx) {
    if (!my_ptds) {
        pthread_once(&ptds_once, ptds_key_init);
        my_ptds = calloc(1, sizeof *my_ptds);
        if (!my_ptds) abort();
        pthread_setspecific(ptds_key, my_ptds);
    }
    if (!my_ptds->s[ctx->device]) my_ptds->s[ctx->device] = stream_new(ctx, 1, 0, 1);
    return my_ptds->s[ctx->device];
}

static struct fc_stream *legacy(struct fc_ctx *ctx) {
    pthread_mutex_lock(&order_mu);
    if (!ctx->legacy) ctx->legacy = stream_new(ctx, 1, 1, 0);
    pthread_mutex_unlock(&order_mu);
    return ctx->legacy;
}

struct fc_stream *fc_stream_of(CUstream h, CUresult *err) {
    uintptr_t v = (uintptr_t)h;
    if (v <= 2) { /* NULL and CU_STREAM_LEGACY (1): legacy; CU_STREAM_PER_THREAD (2) */
        struct fc_ctx *c = fc_current(err);
        if (!c) return NULL;
        return v == 2 ? per_thread(c) : legacy(c);
    }
    pthread_mutex_lock(&streams_mu);
    struct fc_stream *s = streams;
    while (s && s != h) s = s->next;
    pthread_mutex_unlock(&streams_mu);
    if (!s || s->magic != STREAM_MAGIC) {
        *err = CUDA_ERROR_INVALID_HANDLE;
        return NULL;
    }
    return s;
}

/* ---- operations ---- */

struct fc_op *fc_op_new(enum fc_op_kind kind) {
    struct fc_op *op = calloc(1, sizeof *op);
    if (!op) abort();
    op->kind = kind;
    return op;
}

int fc_op_range(struct fc_op *op, uint64_t lo, uint64_t len, int host_ok) {
    struct fc_block b;
    if (fc_block_at(lo, &b)) {
        if (len > b.size - (lo - b.base)) return 0; /* runs past its block */
        if (op->kind == OP_KERNEL && b.kind == K_DEVICE && b.device != op->device && !op->fault)
            op->fault = "another device's memory (the fake has no peer access)";
        if (op->nranges < FC_MAX_RANGES) op->ranges[op->nranges++] = (struct fc_range){lo, len, b.id};
        return 1;
    }
    if (!host_ok && !op->fault) op->fault = "memory that no live device-accessible block holds";
    return 1;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

struct fc_event {
    uint32_t magic;
    struct fc_ctx *ctx;
    unsigned flags;
    struct fc_stream *s; /* where it was last recorded, and the op's sequence number */
    uint64_t seq, gen;
    double t_ms;
    uint64_t t_gen; /* the record whose completion t_ms is */
    struct fc_event *next;
};
static struct fc_event *events;
static pthread_mutex_t events_mu = PTHREAD_MUTEX_INITIALIZER;

static int wait_met(const struct fc_op *op) {
    uint64_t v, want = op->b;
    if (op->kind == OP_WAIT32) {
        v = __atomic_load_n((const uint32_t *)(uintptr_t)op->a, __ATOMIC_ACQUIRE);
        want = (uint32_t)want;
        switch (op->c & 3) {
        case 0: return (int32_t)((uint32_t)v - (uint32_t)want) >= 0; /* GEQ, cyclic */
        case 1: return v == want;                                     /* EQ */
        case 2: return (v & want) != 0;                               /* AND */
        default: return (uint32_t)~(v | want) != 0;                   /* NOR */
        }
    }
    v = __atomic_load_n((const uint64_t *)(uintptr_t)op->a, __ATOMIC_ACQUIRE);
    switch (op->c & 3) {
    case 0: return v >= want;
    case 1: return v == want;
    case 2: return (v & want) != 0;
    default: return ~(v | want) != 0;
    }
}

/* Whether the blocks the op recorded are all still live; else names the fault. */
static const char *check_ranges(const struct fc_op *op) {
    if (op->fault) return op->fault;
    for (int i = 0; i < op->nranges; i++)
        if (!fc_block_alive(op->ranges[i].lo, op->ranges[i].block)) return "memory freed before the stream reached it";
    return NULL;
}

static void fault(struct fc_stream *s, struct fc_op *op, const char *why) {
    FC_ADD(fc_n.illegal_address, 1);
    __atomic_store_n(&s->ctx->sticky, CUDA_ERROR_ILLEGAL_ADDRESS, __ATOMIC_RELEASE);
    fc_warn("illegal address on device %d: stream operation %d (%#llx, %#llx, %llu) touches %s", s->ctx->device,
            (int)op->kind, (unsigned long long)op->a, (unsigned long long)op->b, (unsigned long long)op->c, why);
}

static void run_op(struct fc_stream *s, struct fc_op *op) {
    if (fc_cfg.delay_us) {
        struct timespec d = {fc_cfg.delay_us / 1000000, (long)(fc_cfg.delay_us % 1000000) * 1000};
        nanosleep(&d, NULL);
    }
    if (op->kind == OP_EVENT) {
        struct fc_event *e = op->event;
        pthread_mutex_lock(&events_mu);
        if (op->event_gen == e->gen) e->t_ms = now_ms(), e->t_gen = e->gen;
        pthread_mutex_unlock(&events_mu);
        return;
    }
    if (__atomic_load_n(&s->ctx->sticky, __ATOMIC_ACQUIRE)) return; /* a faulted device runs nothing */
    const char *why = check_ranges(op);
    if (why) {
        fault(s, op, why);
        return;
    }
    switch (op->kind) {
    case OP_COPY: memmove((void *)(uintptr_t)op->a, (const void *)(uintptr_t)op->b, op->c); break;
    case OP_MEMSET8: memset((void *)(uintptr_t)op->a, (int)op->b, op->c); break;
    case OP_MEMSET32:
        for (uint64_t i = 0; i < op->c; i++) ((uint32_t *)(uintptr_t)op->a)[i] = (uint32_t)op->b;
        break;
    case OP_KERNEL: fc_run_kernel(op); break;
    case OP_WAIT32:
    case OP_WAIT64:
        if (wait_met(op)) break;
        FC_ADD(fc_n.waits_blocked, 1);
        for (unsigned long spins = 0; !wait_met(op); spins++) {
            if (spins < 64) {
                sched_yield();
                continue;
            }
            if (spins % 1024 == 0 && (why = check_ranges(op))) {
                fault(s, op, why);
                return;
            }
            struct timespec d = {0, 20000};
            nanosleep(&d, NULL);
        }
        break;
    /* Stored when the stream reaches it, after the work before it ran (the
     * default flags' memory barrier: release order for the host's acquire). */
    case OP_WRITE32: __atomic_store_n((uint32_t *)(uintptr_t)op->a, (uint32_t)op->b, __ATOMIC_RELEASE); break;
    case OP_WRITE64: __atomic_store_n((uint64_t *)(uintptr_t)op->a, op->b, __ATOMIC_RELEASE); break;
    case OP_EVENT: break;
    }
}

static void *worker(void *arg) {
    struct fc_stream *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->head && !s->dead) pthread_cond_wait(&s->cv, &s->mu);
        if (!s->head) break;
        struct fc_op *op = s->head;
        s->head = op->next;
        if (!s->head) s->tail = NULL;
        s->running = op;
        pthread_mutex_unlock(&s->mu);
        for (int i = 0; i < op->ndeps; i++) { /* the legacy/blocking order */
            struct fc_stream *d = op->deps[i].s;
            pthread_mutex_lock(&d->mu);
            while (d->completed < op->deps[i].seq) pthread_cond_wait(&d->cv, &d->mu);
            pthread_mutex_unlock(&d->mu);
        }
        run_op(s, op);
        pthread_mutex_lock(&s->mu);
        s->running = NULL;
        __atomic_store_n(&s->completed, op->seq, __ATOMIC_RELEASE);
        pthread_cond_broadcast(&s->cv);
        free(op->deps);
        free(op);
    }
    s->worker = 0;
    pthread_mutex_unlock(&s->mu);
    unlink_stream(s);
    return NULL;
}

static void add_dep(struct fc_op *op, struct fc_stream *d) {
    uint64_t seq = load(&d->enqueued);
    if (seq <= load(&d->completed)) return;
    op->deps = realloc(op->deps, (size_t)(op->ndeps + 1) * sizeof *op->deps);
    if (!op->deps) abort();
    op->deps[op->ndeps++] = (struct fc_dep){d, seq};
}

uint64_t fc_enqueue(struct fc_stream *s, struct fc_op *op) {
    if (s->blocking) {
        pthread_mutex_lock(&order_mu);
        if (s->legacy) { /* after every blocking stream's earlier work */
            pthread_mutex_lock(&streams_mu);
            for (struct fc_stream *t = streams; t; t = t->next)
                if (t != s && t->blocking && t->ctx == s->ctx) add_dep(op, t);
            pthread_mutex_unlock(&streams_mu);
        } else if (s->ctx->legacy) { /* after the legacy stream's earlier work */
            add_dep(op, s->ctx->legacy);
        }
    }
    pthread_mutex_lock(&s->mu);
    uint64_t seq = s->enqueued + 1; /* the op is the worker's (and freed) once mu is released */
    op->seq = seq;
    __atomic_store_n(&s->enqueued, seq, __ATOMIC_RELEASE);
    if (s->tail) s->tail->next = op;
    else s->head = op;
    s->tail = op;
    if (!s->worker) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &attr, worker, s) != 0) abort();
        pthread_attr_destroy(&attr);
        s->worker = 1;
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (s->blocking) pthread_mutex_unlock(&order_mu);
    return seq;
}

void fc_wait_seq(struct fc_stream *s, uint64_t seq) {
    pthread_mutex_lock(&s->mu);
    while (s->completed < seq) pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

static int uses_block(const struct fc_op *op, uint64_t id) {
    for (int i = 0; op && i < op->nranges; i++)
        if (op->ranges[i].block == id) return 1;
    return 0;
}

int fc_block_in_use(uint64_t id) {
    int used = 0;
    pthread_mutex_lock(&streams_mu);
    for (struct fc_stream *s = streams; s && !used; s = s->next) {
        pthread_mutex_lock(&s->mu);
        used = uses_block(s->running, id);
        for (struct fc_op *op = s->head; op && !used; op = op->next) used = uses_block(op, id);
        pthread_mutex_unlock(&s->mu);
    }
    pthread_mutex_unlock(&streams_mu);
    return used;
}

static CUresult sticky(struct fc_ctx *c) { return __atomic_load_n(&c->sticky, __ATOMIC_ACQUIRE); }

/* ---- the stream entry points ---- */

CUresult cuStreamCreate(CUstream *h, unsigned flags) {
    ENTER(cuStreamCreate);
    CUresult err = CUDA_SUCCESS;
    struct fc_ctx *c = fc_current(&err);
    if (!c) RET(err);
    if (!h || flags > 1) RET(CUDA_ERROR_INVALID_VALUE);
    *h = stream_new(c, flags == 0, 0, 0);
    FC_ADD(fc_n.live_streams, 1);
    RET(CUDA_SUCCESS);
}

CUresult cuStreamDestroy_v2(CUstream h) {
    ENTER(cuStreamDestroy_v2);
    CUresult err = CUDA_SUCCESS;
    if (!fc_current(&err)) RET(err);
    if ((uintptr_t)h <= 2) RET(CUDA_ERROR_INVALID_HANDLE);
    struct fc_stream *s = fc_stream_of(h, &err);
    if (!s) RET(err);
    s->magic = DEAD_MAGIC;
    if (load(&s->completed) < load(&s->enqueued)) FC_ADD(fc_n.destroyed_busy, 1);
    kill_stream(s);
    FC_ADD(fc_n.live_streams, -1);
    RET(CUDA_SUCCESS);
}

CUresult cuStreamGetCtx(CUstream h, CUcontext *c) {
    ENTER(cuStreamGetCtx);
    CUresult err = CUDA_SUCCESS;
    struct fc_stream *s = fc_stream_of(h, &err);
    if (!s) RET(err);
    if (!c) RET(CUDA_ERROR_INVALID_VALUE);
    *c = s->ctx;
    RET(CUDA_SUCCESS);
}

CUresult cuStreamSynchronize(CUstream h) {
    ENTER(cuStreamSynchronize);
    CUresult err = CUDA_SUCCESS;
    struct fc_stream *s = fc_stream_of(h, &err);
    if (!s) RET(err);
    fc_wait_seq(s, load(&s->enqueued));
    RET(sticky(s->ctx));
}

/* Capture: only the state is kept (for cuStreamIsCapturing); work enqueued
 * while "capturing" still runs, and no graph is recorded. Default streams
 * cannot be captured (as in CUDA: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED).
 * As in CUDA, while a stream is captured in global mode (0), a thread whose
 * own interaction mode (cuThreadExchangeStreamCaptureMode) is not relaxed
 * may not make "potentially unsafe" calls: here cuEventQuery, which then
 * fails with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the
 * capture (cuStreamEndCapture then fails with ..._INVALIDATED). */
static __thread int thread_capture_mode; /* CU_STREAM_CAPTURE_MODE_GLOBAL */
static int global_captures; /* streams being captured in global mode */

CUresult cuStreamBeginCapture_v2(CUstream h, int mode) {
    ENTER(cuStreamBeginCapture_v2);
    CUresult err = CUDA_SUCCESS;
    struct fc_stream *s = fc_stream_of(h, &err);
    if (!s) RET(err);
    if (s->legacy || s->per_thread) RET(900);
    if (mode < 0 || mode > 2) RET(CUDA_ERROR_INVALID_VALUE);
    if (__atomic_exchange_n(&s->capturing, 1, __ATOMIC_ACQ_REL)) RET(CUDA_ERROR_INVALID_VALUE);
    s->capture_mode = mode;
    if (mode == 0) __atomic_add_fetch(&global_captures, 1, __ATOMIC_ACQ_REL);
    RET(CUDA_SUCCESS);
}

CUresult cuStreamEndCapture(CUstream h, void **graph) {
    ENTER(cuStreamEndCapture);
    CUresult err = CUDA_SUCCESS;
    struct fc_stream *s = fc_stream_of(h, &err);
    if (!s) RET(err);
    if (!graph) RET(CUDA_ERROR_INVALID_VALUE);
    int was = __atomic_exchange_n(&s->capturing, 0, __ATOMIC_ACQ_REL);
    if (!was) RET(CUDA_ERROR_INVALID_VALUE);
    if (s->capture_mode == 0) __atomic_sub_fetch(&global_captures, 1, __ATOMIC_ACQ_REL);
    *graph = NULL;
    RET(was == 2 ? 901 : CUDA_SUCCESS);
}

CUresult cuStreamIsCapturing(CUstream h, int *status) {
    ENTER(cuStreamIsCapturing);
    CUresult err = CUDA_SUCCESS;
    struct fc_stream *s = fc_stream_of(h, &err);
    if (!s) RET(err);
    if (!status) RET(CUDA_ERROR_INVALID_VALUE);
    *status = __atomic_load_n(&s->capturing, __ATOMIC_ACQUIRE); /* NONE 0 / ACTIVE 1 / INVALIDATED 2 */
    RET(CUDA_SUCCESS);
}

CUresult cuThreadExchangeStreamCaptureMode(int *mode) {
    ENTER(cuThreadExchangeStreamCaptureMode);
    if (!mode || *mode < 0 || *mode > 2) RET(CUDA_ERROR_INVALID_VALUE);
    int old = thread_capture_mode;
    thread_capture_mode = *mode;
    *mode = old;
    RET(CUDA_SUCCESS);
}

/* Whether an unsafe call from this thread breaks a global-mode capture now;
 * if so, every such capture is invalidated. */
static int unsafe_call_breaks_capture(void) {
    if (thread_capture_mode == 2 || !__atomic_load_n(&global_captures, __ATOMIC_ACQUIRE)) return 0;
    pthread_mutex_lock(&streams_mu);
    for (struct fc_stream *s = streams; s; s = s->next) {
        int one = 1;
        if (s->capture_mode == 0) __atomic_compare_exchange_n(&s->capturing, &one, 2, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    }
    pthread_mutex_unlock(&streams_mu);
    fc_warn("an unsafe call (cuEventQuery) during a global-mode stream capture invalidated it");
    return 1;
}

CUresult cuStreamQuery(CUstream h) {
    ENTER(cuStreamQuery);
    CUresult err = CUDA_SUCCESS;
    struct fc_stream *s = fc_stream_of(h, &err);
    if (!s) RET(err);
    if (sticky(s->ctx)) RET(sticky(s->ctx));
    RET(load(&s->completed) >= load(&s->enqueued) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY);
}

CUresult cuCtxSynchronize(void) {
    ENTER(cuCtxSynchronize);
    CUresult err = CUDA_SUCCESS;
    struct fc_ctx *c = fc_current(&err);
    if (!c) RET(err);
    /* Snapshot the streams and their work (streams are never freed), then wait for each. */
    struct fc_dep *upto = NULL;
    size_t n = 0, cap = 0;
    pthread_mutex_lock(&streams_mu);
    for (struct fc_stream *s = streams; s; s = s->next) {
        if (s->ctx != c) continue;
        if (n == cap && !(upto = realloc(upto, (cap = 2 * cap + 16) * sizeof *upto))) abort();
        upto[n++] = (struct fc_dep){s, load(&s->enqueued)};
    }
    pthread_mutex_unlock(&streams_mu);
    for (size_t i = 0; i < n; i++) fc_wait_seq(upto[i].s, upto[i].seq);
    free(upto);
    RET(sticky(c));
}

/* A stream memory operation (wait or write) on the 4 or 8 bytes at addr:
 * `allowed` flag bits, `kind` the op queued (its c field: the flags `keep` keeps). */
static CUresult memory_op(CUstream h, uint64_t addr, uint64_t value, unsigned flags, unsigned allowed, unsigned keep,
                          enum fc_op_kind kind, int wide) {
    CUresult err = CUDA_SUCCESS;
    if (!fc_current(&err)) return err;
    struct fc_stream *s = fc_stream_of(h, &err);
    if (!s) return err;
    if (wide && !fc_cfg.wide) return CUDA_ERROR_NOT_SUPPORTED; /* as on devices without 64-bit stream memory ops */
    if ((flags & ~allowed) || addr % (wide ? 8 : 4)) return CUDA_ERROR_INVALID_VALUE;
    struct fc_op *op = fc_op_new(kind);
    op->a = addr, op->b = value, op->c = flags & keep;
    fc_op_range(op, addr, wide ? 8 : 4, 0);
    if (op->fault) { /* the driver refuses an operation on memory it does not map */
        free(op);
        return CUDA_ERROR_INVALID_VALUE;
    }
    fc_enqueue(s, op);
    return CUDA_SUCCESS;
}

/* Waits: the condition in the low 2 bits (GEQ, EQ, AND, NOR), FLUSH (bit 30) accepted and ignored. */
static CUresult wait_value(CUstream h, uint64_t addr, uint64_t value, unsigned flags, int wide) {
    return memory_op(h, addr, value, flags, 3u | 1u << 30, 3u, wide ? OP_WAIT64 : OP_WAIT32, wide);
}

CUresult cuStreamWaitValue32_v2(CUstream h, CUdeviceptr addr, unsigned value, unsigned flags) {
    ENTER(cuStreamWaitValue32_v2);
    RET(wait_value(h, addr, value, flags, 0));
}

CUresult cuStreamWaitValue64_v2(CUstream h, CUdeviceptr addr, unsigned long long value, unsigned flags) {
    ENTER(cuStreamWaitValue64_v2);
    RET(wait_value(h, addr, value, flags, 1));
}

/* Writes: 0 CU_STREAM_WRITE_VALUE_DEFAULT, 1 ..._NO_MEMORY_BARRIER (the fake orders both). */
static CUresult write_value(CUstream h, uint64_t addr, uint64_t value, unsigned flags, int wide) {
    return memory_op(h, addr, value, flags, 1u, 1u, wide ? OP_WRITE64 : OP_WRITE32, wide);
}

CUresult cuStreamWriteValue32_v2(CUstream h, CUdeviceptr addr, unsigned value, unsigned flags) {
    ENTER(cuStreamWriteValue32_v2);
    RET(write_value(h, addr, value, flags, 0));
}

CUresult cuStreamWriteValue64_v2(CUstream h, CUdeviceptr addr, unsigned long long value, unsigned flags) {
    ENTER(cuStreamWriteValue64_v2);
    RET(write_value(h, addr, value, flags, 1));
}

/* ---- events ---- */

static struct fc_event *event_of(CUevent h) {
    pthread_mutex_lock(&events_mu);
    struct fc_event *e = events;
    while (e && e != h) e = e->next;
    pthread_mutex_unlock(&events_mu);
    return e && e->magic == EVENT_MAGIC ? e : NULL;
}

CUresult cuEventCreate(CUevent *h, unsigned flags) {
    ENTER(cuEventCreate);
    CUresult err = CUDA_SUCCESS;
    struct fc_ctx *c = fc_current(&err);
    if (!c) RET(err);
    if (!h || (flags & ~7u)) RET(CUDA_ERROR_INVALID_VALUE);
    struct fc_event *e = calloc(1, sizeof *e);
    if (!e) abort();
    e->magic = EVENT_MAGIC, e->ctx = c, e->flags = flags;
    pthread_mutex_lock(&events_mu);
    e->next = events;
    events = e;
    pthread_mutex_unlock(&events_mu);
    FC_ADD(fc_n.live_events, 1);
    *h = e;
    RET(CUDA_SUCCESS);
}

CUresult cuEventDestroy_v2(CUevent h) {
    ENTER(cuEventDestroy_v2);
    CUresult err = CUDA_SUCCESS;
    if (!fc_current(&err)) RET(err);
    struct fc_event *e = event_of(h);
    if (!e) RET(CUDA_ERROR_INVALID_HANDLE);
    e->magic = DEAD_MAGIC; /* kept: a queued record may still point to it */
    FC_ADD(fc_n.live_events, -1);
    RET(CUDA_SUCCESS);
}

CUresult cuEventRecord(CUevent h, CUstream sh) {
    ENTER(cuEventRecord);
    CUresult err = CUDA_SUCCESS;
    struct fc_event *e = event_of(h);
    if (!e) RET(CUDA_ERROR_INVALID_HANDLE);
    struct fc_stream *s = fc_stream_of(sh, &err);
    if (!s) RET(err);
    if (s->ctx != e->ctx) RET(CUDA_ERROR_INVALID_HANDLE); /* event and stream of different contexts */
    struct fc_op *op = fc_op_new(OP_EVENT);
    op->event = e;
    pthread_mutex_lock(&events_mu); /* a query sees the event before or after the record, whole */
    op->event_gen = ++e->gen;
    e->s = s;
    e->seq = fc_enqueue(s, op); /* op is the worker's from here */
    pthread_mutex_unlock(&events_mu);
    RET(CUDA_SUCCESS);
}

/* Where an event's latest record is: stream and sequence number (NULL: never recorded). */
static struct fc_stream *recorded(struct fc_event *e, uint64_t *seq) {
    pthread_mutex_lock(&events_mu);
    struct fc_stream *s = e->s;
    *seq = e->seq;
    pthread_mutex_unlock(&events_mu);
    return s;
}

CUresult cuEventQuery(CUevent h) {
    ENTER(cuEventQuery);
    struct fc_event *e = event_of(h);
    if (!e) RET(CUDA_ERROR_INVALID_HANDLE);
    if (unsafe_call_breaks_capture()) RET(900); /* CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED */
    if (sticky(e->ctx)) RET(sticky(e->ctx));
    uint64_t seq;
    struct fc_stream *s = recorded(e, &seq);
    if (s && load(&s->completed) < seq) {
        FC_ADD(fc_n.events_not_ready, 1);
        RET(CUDA_ERROR_NOT_READY);
    }
    RET(CUDA_SUCCESS);
}

CUresult cuEventSynchronize(CUevent h) {
    ENTER(cuEventSynchronize);
    struct fc_event *e = event_of(h);
    if (!e) RET(CUDA_ERROR_INVALID_HANDLE);
    uint64_t seq;
    struct fc_stream *s = recorded(e, &seq);
    if (s) fc_wait_seq(s, seq);
    RET(sticky(e->ctx));
}

CUresult cuEventElapsedTime_v2(float *ms, CUevent start, CUevent end) {
    ENTER(cuEventElapsedTime_v2);
    struct fc_event *a = event_of(start), *b = event_of(end);
    if (!ms || !a || !b || (a->flags & 2) || (b->flags & 2)) RET(CUDA_ERROR_INVALID_HANDLE);
    pthread_mutex_lock(&events_mu);
    int done = a->s && b->s && a->t_gen == a->gen && b->t_gen == b->gen;
    double t = b->t_ms - a->t_ms;
    pthread_mutex_unlock(&events_mu);
    if (!done) RET(CUDA_ERROR_NOT_READY);
    *ms = (float)t;
    RET(CUDA_SUCCESS);
}
