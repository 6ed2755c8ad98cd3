/* fake libcuda: modules from PTX text, kernels looked up by entry name, and
 * launches that run the same-named kernel of the g++-compiled kernel
 * library (FAKE_CUDA_KERNELS) over a serial 1-D grid on a stream's worker. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"

#define MODULE_MAGIC 0x3d0d01e5u
#define FUNCTION_MAGIC 0xf0c71011u

/* The kernel argument block, as kernels/src/args.rs and prelude.cuh define it. */
struct reduce_args {
    uint64_t dst, srcs[8], src_stride, count;
    uint32_t nsrcs, avg_divisor;
};
_Static_assert(sizeof(struct reduce_args) == 96, "ReduceArgs is 96 bytes");

enum fn_kind { FN_REDUCE, FN_COPY, FN_FLAG };

struct fc_function {
    uint32_t magic;
    struct fc_module *module;
    char name[96];
    void *entry;           /* the kernel in the emulation library */
    enum fn_kind kind;
    uint64_t elem;         /* reduce kernels: bytes per element (a pair for loc) */
    int strided;
    struct fc_function *next;
};

struct fc_module {
    uint32_t magic;
    struct fc_ctx *ctx;
    char *entries; /* the .entry names, each followed by '\n' */
    struct fc_function *functions;
    struct fc_module *next;
};

static struct fc_module *modules; /* never unloaded (nor is anything in them freed) */
static pthread_mutex_t modules_mu = PTHREAD_MUTEX_INITIALIZER;

typedef void (*launch_reduce_fn)(const void *, const struct reduce_args *, unsigned, unsigned);
typedef void (*launch3_fn)(const void *, uint64_t, uint64_t, uint64_t, unsigned, unsigned);
typedef void (*launch2_fn)(const void *, uint64_t, uint64_t, unsigned, unsigned);
static void *emu;
static launch_reduce_fn launch_reduce;
static launch3_fn launch3;
static launch2_fn launch2;

static int emu_ok;

static void emu_init(void) {
    if (!fc_cfg.kernels || !*fc_cfg.kernels) {
        fc_warn("FAKE_CUDA_KERNELS is not set: no kernel library to run launches with");
        return;
    }
    emu = dlopen(fc_cfg.kernels, RTLD_NOW | RTLD_LOCAL);
    if (!emu) {
        fc_warn("cannot load the kernel library %s: %s", fc_cfg.kernels, dlerror());
        return;
    }
    launch_reduce = (launch_reduce_fn)dlsym(emu, "fc_emu_launch_reduce");
    launch3 = (launch3_fn)dlsym(emu, "fc_emu_launch3");
    launch2 = (launch2_fn)dlsym(emu, "fc_emu_launch2");
    emu_ok = launch_reduce && launch3 && launch2;
    if (!emu_ok) fc_warn("%s lacks the fc_emu_launch* launchers", fc_cfg.kernels);
}

/* Load the emulation library once; 0 (after saying why) if it cannot be. */
static int load_emulation(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, emu_init);
    return emu_ok;
}

/* "X.Y" after `key` in the PTX header, as major * 100 + minor; -1 if absent. */
static int ptx_number(const char *ptx, const char *key) {
    const char *p = strstr(ptx, key);
    int major, minor;
    if (!p || sscanf(p + strlen(key), " %d.%d", &major, &minor) != 2) return -1;
    return major * 100 + minor;
}

CUresult cuModuleLoadData(CUmodule *m, const void *image) {
    ENTER(cuModuleLoadData);
    CUresult err = CUDA_SUCCESS;
    struct fc_ctx *c = fc_current(&err);
    if (!c) RET(err);
    if (!m || !image) RET(CUDA_ERROR_INVALID_VALUE);
    const char *ptx = image;
    if (memcmp(ptx, "\x7f" "ELF", 4) == 0) {
        fc_warn("cuModuleLoadData: the fake takes PTX text only, not a cubin");
        RET(CUDA_ERROR_NOT_SUPPORTED);
    }
    int version = ptx_number(ptx, "\n.version");
    const char *target = strstr(ptx, "\n.target sm_");
    if (version < 0 || !target) RET(CUDA_ERROR_INVALID_PTX);
    if (version > fc_cfg.ptx_major * 100 + fc_cfg.ptx_minor) RET(CUDA_ERROR_UNSUPPORTED_PTX_VERSION);
    int sm = atoi(target + strlen("\n.target sm_"));
    if (sm > fc_cfg.cc_major * 10 + fc_cfg.cc_minor) RET(CUDA_ERROR_NO_BINARY_FOR_GPU);
    if (!load_emulation()) RET(CUDA_ERROR_JIT_COMPILER_NOT_FOUND);
    /* The entry names, one per line. */
    size_t cap = 4096, len = 0;
    char *names = malloc(cap);
    if (!names) abort();
    for (const char *p = strstr(ptx, ".entry "); p; p = strstr(p + 1, ".entry ")) {
        const char *name = p + strlen(".entry ");
        size_t n = strcspn(name, "( \t\n");
        if (len + n + 2 > cap) {
            cap = 2 * (len + n + 2);
            names = realloc(names, cap);
            if (!names) abort();
        }
        memcpy(names + len, name, n);
        len += n;
        names[len++] = '\n';
    }
    names[len] = '\0';
    struct fc_module *mod = calloc(1, sizeof *mod);
    if (!mod) abort();
    mod->magic = MODULE_MAGIC, mod->ctx = c, mod->entries = names;
    pthread_mutex_lock(&modules_mu);
    mod->next = modules;
    modules = mod;
    pthread_mutex_unlock(&modules_mu);
    FC_ADD(fc_n.modules, 1);
    *m = mod;
    RET(CUDA_SUCCESS);
}

static int has_entry(const struct fc_module *m, const char *name) {
    size_t n = strlen(name);
    for (const char *p = strstr(m->entries, name); p; p = strstr(p + 1, name))
        if ((p == m->entries || p[-1] == '\n') && p[n] == '\n') return 1;
    return 0;
}

/* Bytes per element of a reduce kernel's operands, from its name
 * fc_reduce[_strided]_<dtype>_<op>; 0 if the name is not understood. */
static uint64_t element_bytes(const char *name, int *strided) {
    static const struct { const char *dtype; uint64_t size; } sizes[] = {
        {"float8_e4m3", 1}, {"float8_e5m2", 1}, {"float32_complex", 8}, {"float64_complex", 16},
        {"int8", 1}, {"uint8", 1}, {"int16", 2}, {"uint16", 2}, {"float16", 2}, {"bfloat16", 2},
        {"int32", 4}, {"uint32", 4}, {"float32", 4}, {"int64", 8}, {"uint64", 8}, {"float64", 8},
        {"int128", 16}, {"uint128", 16},
    };
    const char *rest = name + strlen("fc_reduce_");
    *strided = strncmp(rest, "strided_", 8) == 0;
    if (*strided) rest += 8;
    const char *op = strrchr(rest, '_');
    if (!op) return 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = strlen(sizes[i].dtype);
        if ((size_t)(op - rest) == n && strncmp(rest, sizes[i].dtype, n) == 0) {
            uint64_t size = sizes[i].size;
            if (strcmp(op, "_maxloc") != 0 && strcmp(op, "_minloc") != 0) return size;
            uint64_t align = size > 4 ? size : 4; /* { T value; int32_t index; } */
            return (size + 4 + align - 1) / align * align;
        }
    }
    return 0;
}

CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
    ENTER(cuModuleGetFunction);
    if (!f || !name) RET(CUDA_ERROR_INVALID_VALUE);
    pthread_mutex_lock(&modules_mu);
    struct fc_module *mod = modules;
    while (mod && mod != m) mod = mod->next;
    pthread_mutex_unlock(&modules_mu);
    if (!mod || mod->magic != MODULE_MAGIC) RET(CUDA_ERROR_INVALID_HANDLE);
    if (!has_entry(mod, name) || strlen(name) >= sizeof ((struct fc_function *)0)->name) RET(CUDA_ERROR_NOT_FOUND);
    pthread_mutex_lock(&modules_mu);
    struct fc_function *fn = mod->functions;
    while (fn && strcmp(fn->name, name) != 0) fn = fn->next;
    pthread_mutex_unlock(&modules_mu);
    if (fn) {
        *f = fn;
        RET(CUDA_SUCCESS);
    }
    void *entry = dlsym(emu, name);
    if (!entry) {
        fc_warn("the PTX has the entry %s but the kernel library does not", name);
        RET(CUDA_ERROR_NOT_FOUND);
    }
    fn = calloc(1, sizeof *fn);
    if (!fn) abort();
    fn->magic = FUNCTION_MAGIC, fn->module = mod, fn->entry = entry;
    strcpy(fn->name, name);
    if (strncmp(name, "fc_reduce_", 10) == 0) {
        fn->kind = FN_REDUCE;
        fn->elem = element_bytes(name, &fn->strided);
        if (!fn->elem) {
            fc_warn("no element size known for kernel %s", name);
            free(fn);
            RET(CUDA_ERROR_NOT_FOUND);
        }
    } else if (strcmp(name, "fc_copy") == 0) {
        fn->kind = FN_COPY;
    } else if (strncmp(name, "fc_flag_", 8) == 0) {
        fn->kind = FN_FLAG;
    } else {
        fc_warn("the fake does not know the parameters of kernel %s", name);
        free(fn);
        RET(CUDA_ERROR_NOT_FOUND);
    }
    pthread_mutex_lock(&modules_mu);
    fn->next = mod->functions;
    mod->functions = fn;
    pthread_mutex_unlock(&modules_mu);
    *f = fn;
    RET(CUDA_SUCCESS);
}

static struct fc_function *function_of(CUfunction h) {
    struct fc_function *found = NULL;
    pthread_mutex_lock(&modules_mu);
    for (struct fc_module *m = modules; m && !found; m = m->next)
        for (struct fc_function *fn = m->functions; fn && !found; fn = fn->next)
            if (fn == h) found = fn;
    pthread_mutex_unlock(&modules_mu);
    return found;
}

/* Record what a reduce launch will touch: dst and the first nsrcs sources
 * (nothing when nsrcs is out of range: the kernels then do nothing). */
static void reduce_ranges(struct fc_op *op, const struct fc_function *fn) {
    struct reduce_args a;
    memcpy(&a, op->params, sizeof a);
    if (a.nsrcs < 1 || a.nsrcs > 8 || a.count == 0) return;
    uint64_t bytes = a.count * fn->elem;
    if (bytes / fn->elem != a.count) {
        op->fault = "a count that overflows";
        return;
    }
    fc_op_range(op, a.dst, bytes, 0);
    if (fn->strided) fc_op_range(op, a.srcs[0], a.src_stride * (a.nsrcs - 1) + bytes, 0);
    else
        for (uint32_t i = 0; i < a.nsrcs; i++) fc_op_range(op, a.srcs[i], bytes, 0);
}

CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, CUstream h, void **params, void **extra) {
    ENTER(cuLaunchKernel);
    CUresult err = CUDA_SUCCESS;
    struct fc_ctx *c = fc_current(&err);
    if (!c) RET(err);
    struct fc_function *fn = function_of(f);
    if (!fn) RET(CUDA_ERROR_INVALID_HANDLE);
    if (fn->module->ctx != c) RET(CUDA_ERROR_INVALID_HANDLE); /* a kernel of another context's module */
    struct fc_stream *s = fc_stream_of(h, &err);
    if (!s) RET(err);
    if (fc_stream_ctx(s) != c) RET(CUDA_ERROR_INVALID_HANDLE);
    if (gx == 0 || bx == 0 || bx > 1024 || !params || extra) RET(CUDA_ERROR_INVALID_VALUE);
    if (gy != 1 || gz != 1 || by != 1 || bz != 1 || shared != 0) {
        fc_warn("cuLaunchKernel(%s): the fake runs 1-D grids without dynamic shared memory only", fn->name);
        RET(CUDA_ERROR_NOT_SUPPORTED);
    }
    struct fc_op *op = fc_op_new(OP_KERNEL);
    op->fn = fn, op->grid = gx, op->block = bx, op->device = c->device;
    switch (fn->kind) {
    case FN_REDUCE:
        memcpy(op->params, params[0], sizeof(struct reduce_args));
        reduce_ranges(op, fn);
        break;
    case FN_COPY: /* (dst, src, bytes) */
        for (int i = 0; i < 3; i++) memcpy(op->params + 8 * i, params[i], 8);
        memcpy(&op->a, op->params, 8), memcpy(&op->b, op->params + 8, 8), memcpy(&op->c, op->params + 16, 8);
        if (op->c) fc_op_range(op, op->a, op->c, 0), fc_op_range(op, op->b, op->c, 0);
        break;
    case FN_FLAG: /* (flag address, value) */
        for (int i = 0; i < 2; i++) memcpy(op->params + 8 * i, params[i], 8);
        memcpy(&op->a, op->params, 8);
        fc_op_range(op, op->a, 8, 0);
        break;
    }
    FC_ADD(fc_n.kernels_launched, 1);
    fc_enqueue(s, op);
    RET(CUDA_SUCCESS);
}

void fc_run_kernel(struct fc_op *op) {
    const struct fc_function *fn = op->fn;
    uint64_t x, y, z;
    switch (fn->kind) {
    case FN_REDUCE: launch_reduce(fn->entry, (const struct reduce_args *)op->params, op->grid, op->block); break;
    case FN_COPY:
        memcpy(&x, op->params, 8), memcpy(&y, op->params + 8, 8), memcpy(&z, op->params + 16, 8);
        launch3(fn->entry, x, y, z, op->grid, op->block);
        break;
    case FN_FLAG:
        memcpy(&x, op->params, 8), memcpy(&y, op->params + 8, 8);
        launch2(fn->entry, x, y, op->grid, op->block);
        break;
    }
    FC_ADD(fc_n.kernels_run, 1);
}
