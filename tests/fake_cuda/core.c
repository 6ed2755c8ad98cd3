/* fake libcuda: configuration, call accounting and failure injection, the
 * report, devices, primary contexts and the per-thread context stack.
 * See fake_cuda.h for what the fake does and does not emulate. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_cuda.h"

struct fc_config fc_cfg;
struct fc_counts fc_n;

static const char *const sym_names[SYM_COUNT] = {
#define FC_NAME(n) #n,
    FC_SYMBOLS(FC_NAME)
#undef FC_NAME
};

static long calls[SYM_COUNT], errors[SYM_COUNT], injected[SYM_COUNT];

/* One injected failure: the n-th call of sym (and later ones if `on`). */
struct inject {
    enum fc_sym sym;
    long nth;
    int and_later;
    CUresult code;
};
static struct inject injects[16];
static int ninjects;
static int initialised;
static FILE *log_file;
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

void fc_warn(const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "fake libcuda: %s\n", line);
}

static int env_int(const char *name, int dflt) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

static int sym_by_name(const char *name, size_t len) {
    for (int i = 0; i < SYM_COUNT; i++)
        if (strlen(sym_names[i]) == len && strncmp(sym_names[i], name, len) == 0) return i;
    return -1;
}

static int is_allocation(enum fc_sym s) {
    return s == SYM_cuMemAlloc_v2 || s == SYM_cuMemAllocManaged || s == SYM_cuMemHostAlloc ||
           s == SYM_cuMemHostRegister_v2;
}

/* FAKE_CUDA_FAIL="sym:n[+][:code],..."; a malformed entry aborts, loudly. */
static void parse_injections(const char *spec) {
    while (spec && *spec) {
        const char *end = strchr(spec, ',');
        size_t len = end ? (size_t)(end - spec) : strlen(spec);
        const char *colon = memchr(spec, ':', len);
        int sym = colon ? sym_by_name(spec, (size_t)(colon - spec)) : -1;
        if (sym < 0 || ninjects == (int)(sizeof injects / sizeof injects[0])) {
            fc_warn("FAKE_CUDA_FAIL entry '%.*s' names no entry point of the fake", (int)len, spec);
            abort();
        }
        char *rest;
        struct inject in = {.sym = (enum fc_sym)sym, .nth = strtol(colon + 1, &rest, 10)};
        if (*rest == '+') in.and_later = 1, rest++;
        in.code = is_allocation(in.sym) ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_UNKNOWN;
        if (*rest == ':') in.code = (CUresult)strtol(rest + 1, &rest, 10);
        if (in.nth < 1 || rest != spec + len) {
            fc_warn("FAKE_CUDA_FAIL entry '%.*s' is not sym:n[+][:code]", (int)len, spec);
            abort();
        }
        injects[ninjects++] = in;
        spec = end ? end + 1 : NULL;
    }
}

__attribute__((constructor)) static void fc_configure(void) {
    fc_cfg.devices = env_int("FAKE_CUDA_DEVICES", 1);
    if (fc_cfg.devices < 0 || fc_cfg.devices > FC_MAX_DEVICES) fc_cfg.devices = 1;
    const char *cc = getenv("FAKE_CUDA_CC");
    if (!cc || sscanf(cc, "%d.%d", &fc_cfg.cc_major, &fc_cfg.cc_minor) != 2) fc_cfg.cc_major = 9, fc_cfg.cc_minor = 0;
    const char *isa = getenv("FAKE_CUDA_PTX_ISA");
    if (!isa || sscanf(isa, "%d.%d", &fc_cfg.ptx_major, &fc_cfg.ptx_minor) != 2) fc_cfg.ptx_major = 9, fc_cfg.ptx_minor = 0;
    fc_cfg.uva = env_int("FAKE_CUDA_UVA", 1);
    fc_cfg.wide = env_int("FAKE_CUDA_WIDE", 1);
    fc_cfg.query_needs_ctx = env_int("FAKE_CUDA_QUERY_NEEDS_CTX", 0);
    fc_cfg.poison = env_int("FAKE_CUDA_POISON", 0xcd) & 0xff;
    fc_cfg.delay_us = (unsigned)env_int("FAKE_CUDA_STREAM_DELAY_US", 0);
    fc_cfg.kernels = getenv("FAKE_CUDA_KERNELS");
    parse_injections(getenv("FAKE_CUDA_FAIL"));
    const char *log = getenv("FAKE_CUDA_LOG");
    if (log && *log) log_file = fopen(log, "a");
}

CUresult fc_enter(enum fc_sym s) {
    long n = FC_ADD(calls[s], 1);
    for (int i = 0; i < ninjects; i++) {
        if (injects[i].sym == s && (n == injects[i].nth || (injects[i].and_later && n > injects[i].nth))) {
            FC_ADD(injected[s], 1);
            return fc_ret(s, injects[i].code);
        }
    }
    int needs_init = s != SYM_cuInit && s != SYM_cuGetErrorString && s != SYM_cuGetErrorName &&
                     s != SYM_cuDriverGetVersion;
    if (needs_init && !__atomic_load_n(&initialised, __ATOMIC_ACQUIRE)) return fc_ret(s, CUDA_ERROR_NOT_INITIALIZED);
    return CUDA_SUCCESS;
}

CUresult fc_ret(enum fc_sym s, CUresult r) {
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY) FC_ADD(errors[s], 1);
    if (log_file) {
        pthread_mutex_lock(&log_mu);
        fprintf(log_file, "%s -> %d\n", sym_names[s], r);
        fflush(log_file);
        pthread_mutex_unlock(&log_mu);
    }
    return r;
}

int fc_initialised(void) { return __atomic_load_n(&initialised, __ATOMIC_ACQUIRE); }

/* ---- the report, written at exit ---- */

static const char *const kind_names[5] = {"none", "device", "managed", "host_alloc", "registered"};

static void write_report(FILE *f) {
#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
    for (int i = 0; i < SYM_COUNT; i++) {
        if (LOAD(calls[i])) fprintf(f, "calls.%s=%ld\n", sym_names[i], LOAD(calls[i]));
        if (LOAD(errors[i])) fprintf(f, "errors.%s=%ld\n", sym_names[i], LOAD(errors[i]));
        if (LOAD(injected[i])) fprintf(f, "injected.%s=%ld\n", sym_names[i], LOAD(injected[i]));
    }
    for (int k = K_DEVICE; k <= K_REGISTERED; k++) {
        fprintf(f, "live.%s=%ld\n", kind_names[k], LOAD(fc_n.live_blocks[k]));
        fprintf(f, "live.%s_bytes=%ld\n", kind_names[k], LOAD(fc_n.live_bytes[k]));
    }
    fprintf(f, "live.streams=%ld\nlive.events=%ld\nmodules=%ld\n", LOAD(fc_n.live_streams), LOAD(fc_n.live_events),
            LOAD(fc_n.modules));
    fprintf(f, "ctx.pushes=%ld\nctx.pops=%ld\n", LOAD(fc_n.pushes), LOAD(fc_n.pops));
    for (int d = 0; d < fc_cfg.devices; d++)
        fprintf(f, "primary.%d.retains=%ld\nprimary.%d.releases=%ld\n", d, LOAD(fc_n.retains[d]), d,
                LOAD(fc_n.releases[d]));
    fprintf(f, "faults.illegal_address=%ld\nfaults.freed_in_use=%ld\ncopies.overlapping=%ld\n",
            LOAD(fc_n.illegal_address), LOAD(fc_n.freed_in_use), LOAD(fc_n.overlapping_copies));
    fprintf(f, "streams.destroyed_busy=%ld\nkernels.launched=%ld\nkernels.run=%ld\n", LOAD(fc_n.destroyed_busy),
            LOAD(fc_n.kernels_launched), LOAD(fc_n.kernels_run));
    fprintf(f, "waits.blocked=%ld\nevents.not_ready=%ld\n", LOAD(fc_n.waits_blocked), LOAD(fc_n.events_not_ready));
    fprintf(f, "copies.async_on_default_stream=%ld\n", LOAD(fc_n.async_default_stream_copies));
    fprintf(f, "ipc.exported=%ld\nipc.opened=%ld\nipc.closed=%ld\nlive.ipc_mappings=%ld\n", LOAD(fc_n.ipc_exported),
            LOAD(fc_n.ipc_opened), LOAD(fc_n.ipc_closed), LOAD(fc_n.ipc_opened) - LOAD(fc_n.ipc_closed));
#undef LOAD
}

__attribute__((destructor)) static void fc_report(void) {
    const char *path = getenv("FAKE_CUDA_REPORT");
    if (!path || !*path) return;
    char name[4096];
    const char *p = strstr(path, "%p");
    if (p) snprintf(name, sizeof name, "%.*s%d%s", (int)(p - path), path, (int)getpid(), p + 2);
    else snprintf(name, sizeof name, "%s", path);
    FILE *f = fopen(name, "w");
    if (!f) return;
    write_report(f);
    fclose(f);
}

/* Not a CUDA entry point: the current value of a report key (0 if absent),
 * for tests that check counts while the process runs. */
long long fake_cuda_counter(const char *key) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return -1;
    write_report(f);
    fclose(f);
    long long v = 0;
    size_t n = strlen(key);
    for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, key, n) == 0 && line[n] == '=') {
            v = atoll(line + n + 1);
            break;
        }
    }
    free(text);
    return v;
}

/* ---- error strings ---- */

static const struct {
    CUresult code;
    const char *name, *text;
} error_table[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_NO_BINARY_FOR_GPU, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device"},
    {CUDA_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {CUDA_ERROR_JIT_COMPILER_NOT_FOUND, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND", "PTX JIT compiler library not found"},
    {CUDA_ERROR_UNSUPPORTED_PTX_VERSION, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "the provided PTX was compiled with an unsupported toolchain."},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {CUDA_ERROR_CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"},
    {CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", "part or all of the requested memory range is already mapped"},
    {CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", "pointer does not correspond to a registered memory region"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static int error_index(CUresult r) {
    for (size_t i = 0; i < sizeof error_table / sizeof error_table[0]; i++)
        if (error_table[i].code == r) return (int)i;
    return -1;
}

CUresult cuGetErrorString(CUresult r, const char **s) {
    ENTER(cuGetErrorString);
    int i = error_index(r);
    if (!s) RET(CUDA_ERROR_INVALID_VALUE);
    *s = i < 0 ? NULL : error_table[i].text;
    RET(i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS);
}

CUresult cuGetErrorName(CUresult r, const char **s) {
    ENTER(cuGetErrorName);
    int i = error_index(r);
    if (!s) RET(CUDA_ERROR_INVALID_VALUE);
    *s = i < 0 ? NULL : error_table[i].name;
    RET(i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS);
}

/* The driver's private function tables, which NVRTC 13 asks for (for its
 * cache, which it disables when refused): the fake has none. */
CUresult cuGetExportTable(const void **table, const void *id) {
    ENTER(cuGetExportTable);
    (void)id;
    if (table) *table = NULL;
    RET(CUDA_ERROR_NOT_FOUND);
}

/* ---- initialisation and devices ---- */

CUresult cuDriverGetVersion(int *v) {
    ENTER(cuDriverGetVersion);
    if (!v) RET(CUDA_ERROR_INVALID_VALUE);
    *v = 13000;
    RET(CUDA_SUCCESS);
}

CUresult cuInit(unsigned flags) {
    ENTER(cuInit);
    if (flags != 0) RET(CUDA_ERROR_INVALID_VALUE);
    __atomic_store_n(&initialised, 1, __ATOMIC_RELEASE);
    RET(CUDA_SUCCESS);
}

CUresult cuDeviceGetCount(int *n) {
    ENTER(cuDeviceGetCount);
    if (!n) RET(CUDA_ERROR_INVALID_VALUE);
    *n = fc_cfg.devices;
    RET(CUDA_SUCCESS);
}

CUresult cuDeviceGet(CUdevice *d, int ordinal) {
    ENTER(cuDeviceGet);
    if (!d) RET(CUDA_ERROR_INVALID_VALUE);
    if (ordinal < 0 || ordinal >= fc_cfg.devices) RET(CUDA_ERROR_INVALID_DEVICE);
    *d = ordinal;
    RET(CUDA_SUCCESS);
}

CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d) {
    ENTER(cuDeviceGetAttribute);
    if (!v) RET(CUDA_ERROR_INVALID_VALUE);
    if (d < 0 || d >= fc_cfg.devices) RET(CUDA_ERROR_INVALID_DEVICE);
    switch (attr) {
    case 75: *v = fc_cfg.cc_major; break;      /* COMPUTE_CAPABILITY_MAJOR */
    case 76: *v = fc_cfg.cc_minor; break;      /* COMPUTE_CAPABILITY_MINOR */
    case 41: *v = fc_cfg.uva; break;           /* UNIFIED_ADDRESSING */
    case 93: case 122: *v = fc_cfg.wide; break; /* CAN_USE_64_BIT_STREAM_MEM_OPS (old and CUDA 12 numbers) */
    default:
        if (attr <= 0 || attr > 200) RET(CUDA_ERROR_INVALID_VALUE);
        *v = 0;
    }
    RET(CUDA_SUCCESS);
}

/* ---- primary contexts and the context stack ---- */

#define CTX_MAGIC 0xc0c7c0c7u
static struct fc_ctx primary[FC_MAX_DEVICES];
static pthread_mutex_t ctx_mu = PTHREAD_MUTEX_INITIALIZER;

struct fc_ctx *fc_ctx_of(CUcontext c) {
    for (int d = 0; d < fc_cfg.devices; d++)
        if (c == &primary[d] && primary[d].magic == CTX_MAGIC) return c;
    return NULL;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
    ENTER(cuDevicePrimaryCtxRetain);
    if (!c) RET(CUDA_ERROR_INVALID_VALUE);
    if (d < 0 || d >= fc_cfg.devices) RET(CUDA_ERROR_INVALID_DEVICE);
    pthread_mutex_lock(&ctx_mu);
    primary[d].magic = CTX_MAGIC;
    primary[d].device = d;
    if (primary[d].retains++ == 0) { /* a fresh context */
        static unsigned long long next_id = 1;
        __atomic_store_n(&primary[d].sticky, 0, __ATOMIC_RELEASE);
        primary[d].id = next_id++;
    }
    pthread_mutex_unlock(&ctx_mu);
    FC_ADD(fc_n.retains[d], 1);
    *c = &primary[d];
    RET(CUDA_SUCCESS);
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
    ENTER(cuDevicePrimaryCtxRelease_v2);
    if (d < 0 || d >= fc_cfg.devices) RET(CUDA_ERROR_INVALID_DEVICE);
    pthread_mutex_lock(&ctx_mu);
    int ok = primary[d].retains > 0;
    if (ok) primary[d].retains--;
    pthread_mutex_unlock(&ctx_mu);
    if (!ok) {
        fc_warn("cuDevicePrimaryCtxRelease(%d) without a retain", d);
        RET(CUDA_ERROR_INVALID_CONTEXT);
    }
    FC_ADD(fc_n.releases[d], 1);
    RET(CUDA_SUCCESS);
}

#define STACK_MAX 64
static __thread struct fc_ctx *stack[STACK_MAX];
static __thread int depth;

struct fc_ctx *fc_current(CUresult *err) {
    struct fc_ctx *c = depth ? stack[depth - 1] : NULL;
    if (!c) {
        *err = CUDA_ERROR_INVALID_CONTEXT;
        return NULL;
    }
    if (__atomic_load_n(&c->retains, __ATOMIC_ACQUIRE) == 0) {
        *err = CUDA_ERROR_CONTEXT_IS_DESTROYED;
        return NULL;
    }
    CUresult fault = __atomic_load_n(&c->sticky, __ATOMIC_ACQUIRE);
    if (fault) {
        *err = fault;
        return NULL;
    }
    return c;
}

CUresult cuCtxGetCurrent(CUcontext *c) {
    ENTER(cuCtxGetCurrent);
    if (!c) RET(CUDA_ERROR_INVALID_VALUE);
    *c = depth ? stack[depth - 1] : NULL;
    RET(CUDA_SUCCESS);
}

CUresult cuCtxSetCurrent(CUcontext c) {
    ENTER(cuCtxSetCurrent);
    if (!c) {
        if (depth) depth--;
        RET(CUDA_SUCCESS);
    }
    if (!fc_ctx_of(c)) RET(CUDA_ERROR_INVALID_CONTEXT);
    if (depth == 0) depth = 1;
    stack[depth - 1] = c;
    RET(CUDA_SUCCESS);
}

CUresult cuCtxPushCurrent_v2(CUcontext c) {
    ENTER(cuCtxPushCurrent_v2);
    if (!fc_ctx_of(c)) RET(CUDA_ERROR_INVALID_CONTEXT);
    if (depth == STACK_MAX) RET(CUDA_ERROR_INVALID_VALUE);
    stack[depth++] = c;
    FC_ADD(fc_n.pushes, 1);
    RET(CUDA_SUCCESS);
}

CUresult cuCtxPopCurrent_v2(CUcontext *c) {
    ENTER(cuCtxPopCurrent_v2);
    if (depth == 0) RET(CUDA_ERROR_INVALID_CONTEXT);
    struct fc_ctx *top = stack[--depth];
    if (c) *c = top;
    FC_ADD(fc_n.pops, 1);
    RET(CUDA_SUCCESS);
}

CUresult cuCtxGetId(CUcontext c, unsigned long long *id) {
    ENTER(cuCtxGetId);
    CUresult err = CUDA_SUCCESS;
    struct fc_ctx *x = c ? fc_ctx_of(c) : fc_current(&err);
    if (!x) RET(c ? CUDA_ERROR_INVALID_CONTEXT : err);
    if (!id) RET(CUDA_ERROR_INVALID_VALUE);
    pthread_mutex_lock(&ctx_mu);
    *id = x->id;
    pthread_mutex_unlock(&ctx_mu);
    RET(CUDA_SUCCESS);
}

CUresult cuCtxGetDevice(CUdevice *d) {
    ENTER(cuCtxGetDevice);
    CUresult err = CUDA_SUCCESS;
    struct fc_ctx *c = fc_current(&err);
    if (!c) RET(err);
    if (!d) RET(CUDA_ERROR_INVALID_VALUE);
    *d = c->device;
    RET(CUDA_SUCCESS);
}
