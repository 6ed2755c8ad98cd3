/* fake libcuda: the table of memory blocks (device, managed, host-allocated,
 * registered), allocation and freeing, the pointer query, the address range,
 * and the copy and memset entry points (which queue their work on a stream).
 *
 * Device memory (cuMemAlloc) is a shared mapping of a memfd, the fd kept
 * open while the block lives, so that another process can map the same
 * pages through /proc/<pid>/fd/<fd> (CUDA IPC, ipc.c); managed and host
 * memory stay private anonymous mappings. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "fake_cuda.h"

/* Live blocks sorted by base; they never overlap (registration of an
 * overlapping range is refused). */
static struct fc_block *blocks;
static size_t nblocks, cap_blocks;
static uint64_t next_id = 1;
static pthread_mutex_t mem_mu = PTHREAD_MUTEX_INITIALIZER;

/* Index of the last block with base <= addr, or -1. Caller holds mem_mu. */
static long floor_index(uint64_t addr) {
    size_t lo = 0, hi = nblocks;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (blocks[mid].base <= addr) lo = mid + 1;
        else hi = mid;
    }
    return (long)lo - 1;
}

static long index_holding(uint64_t addr, uint64_t len) {
    long i = floor_index(addr);
    if (i < 0) return -1;
    const struct fc_block *b = &blocks[i];
    if (addr - b->base >= b->size || len > b->size - (addr - b->base)) return -1;
    return i;
}

int fc_block_holding(uint64_t addr, uint64_t len, struct fc_block *out) {
    pthread_mutex_lock(&mem_mu);
    long i = index_holding(addr, len ? len : 1);
    if (i >= 0 && out) *out = blocks[i];
    pthread_mutex_unlock(&mem_mu);
    return i >= 0;
}

int fc_block_at(uint64_t addr, struct fc_block *out) { return fc_block_holding(addr, 1, out); }

int fc_block_alive(uint64_t addr, uint64_t id) {
    struct fc_block b;
    return fc_block_at(addr, &b) && b.id == id;
}

/* Insert a block; 0 if it overlaps a live one. */
static int insert_block(uint64_t base, uint64_t size, enum fc_kind kind, int device, int fd, int ipc) {
    pthread_mutex_lock(&mem_mu);
    long i = floor_index(base + size - 1);
    if (i >= 0 && blocks[i].base + blocks[i].size > base) {
        pthread_mutex_unlock(&mem_mu);
        return 0;
    }
    if (nblocks == cap_blocks) {
        cap_blocks = cap_blocks ? 2 * cap_blocks : 256;
        blocks = realloc(blocks, cap_blocks * sizeof *blocks);
        if (!blocks) abort();
    }
    size_t at = (size_t)(i + 1);
    memmove(&blocks[at + 1], &blocks[at], (nblocks - at) * sizeof *blocks);
    blocks[at] = (struct fc_block){
        .base = base, .size = size, .id = next_id++, .kind = kind, .device = device, .fd = fd, .ipc = ipc};
    nblocks++;
    pthread_mutex_unlock(&mem_mu);
    FC_ADD(fc_n.live_blocks[kind], 1);
    FC_ADD(fc_n.live_bytes[kind], (long)size);
    return 1;
}

/* Remove the block starting exactly at base if its kind is in `kinds` (a
 * bit mask of 1 << kind) and it is (ipc = 1) or is not (0) a peer's
 * allocation opened by cuIpcOpenMemHandle; 0 if there is none. */
static int remove_block(uint64_t base, unsigned kinds, int ipc, struct fc_block *out) {
    pthread_mutex_lock(&mem_mu);
    long i = floor_index(base);
    int found = i >= 0 && blocks[i].base == base && (kinds & (1u << blocks[i].kind)) && blocks[i].ipc == ipc;
    if (found) {
        *out = blocks[i];
        memmove(&blocks[i], &blocks[i + 1], (nblocks - (size_t)i - 1) * sizeof *blocks);
        nblocks--;
    }
    pthread_mutex_unlock(&mem_mu);
    if (found) {
        FC_ADD(fc_n.live_blocks[out->kind], -1);
        FC_ADD(fc_n.live_bytes[out->kind], -(long)out->size);
    }
    return found;
}

/* Freed mappings stay reserved without access for a while (a late use
 * crashes instead of reading reused memory); the oldest are unmapped. */
#define QUARANTINE 1024
static struct { void *p; size_t len; } quarantine[QUARANTINE];
static size_t quarantine_next;

size_t fc_mapping_len(uint64_t size) { return (size + 4095) & ~(size_t)4095; }
#define mapping_len fc_mapping_len

/* A fresh poisoned mapping; shared over a new memfd (its fd in *fd) when
 * fd is not NULL, else private. */
static void *map_block(uint64_t size, int *fd) {
    void *p;
    if (fd) {
        static uint64_t serial;
        char name[64];
        snprintf(name, sizeof name, "fake-cuda-%d-%llu", (int)getpid(),
                 (unsigned long long)__atomic_add_fetch(&serial, 1, __ATOMIC_RELAXED));
        *fd = memfd_create(name, MFD_CLOEXEC);
        if (*fd < 0 && errno == EMFILE) {
            /* Each live device block holds an fd: use the hard limit before giving up. */
            struct rlimit lim;
            if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
                lim.rlim_cur = lim.rlim_max;
                if (setrlimit(RLIMIT_NOFILE, &lim) == 0) *fd = memfd_create(name, MFD_CLOEXEC);
            }
        }
        if (*fd < 0) {
            fc_warn("memfd_create for a device block of %llu bytes: %m (each live device block holds one fd)",
                    (unsigned long long)size);
            return NULL;
        }
        if (ftruncate(*fd, (off_t)mapping_len(size)) != 0) {
            close(*fd);
            return NULL;
        }
        p = mmap(NULL, mapping_len(size), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, *fd, 0);
        if (p == MAP_FAILED) close(*fd);
    } else {
        p = mmap(NULL, mapping_len(size), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    }
    if (p == MAP_FAILED) return NULL;
    memset(p, fc_cfg.poison, size);
    return p;
}

static void unmap_block(const struct fc_block *b) {
    void *p = (void *)b->base;
    size_t len = mapping_len(b->size);
    if (b->fd >= 0 || b->ipc) {
        /* A shared mapping: replace it in place by an inaccessible private
         * one, which drops this process's reference to the pages (freed once
         * the fd is closed and no peer maps them). */
        if (mmap(p, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == MAP_FAILED)
            abort();
        if (b->fd >= 0) close(b->fd);
    } else {
        mprotect(p, len, PROT_NONE);
        madvise(p, len, MADV_DONTNEED);
    }
    pthread_mutex_lock(&mem_mu);
    size_t at = quarantine_next++ % QUARANTINE;
    void *old = quarantine[at].p;
    size_t old_len = quarantine[at].len;
    quarantine[at].p = p;
    quarantine[at].len = len;
    pthread_mutex_unlock(&mem_mu);
    if (old) munmap(old, old_len);
}

/* A freed block still used by queued stream work is a bug of the caller. */
static void check_unused(const struct fc_block *b, const char *call) {
    if (fc_block_in_use(b->id)) {
        FC_ADD(fc_n.freed_in_use, 1);
        fc_warn("%s(%#llx) while queued stream work still uses the block", call, (unsigned long long)b->base);
    }
}

static CUresult alloc_block(CUdeviceptr *p, size_t n, enum fc_kind kind) {
    CUresult err = CUDA_SUCCESS;
    struct fc_ctx *c = fc_current(&err);
    if (!c) return err;
    if (!p || n == 0) return CUDA_ERROR_INVALID_VALUE;
    int fd = -1;
    void *mem = map_block(n, kind == K_DEVICE ? &fd : NULL);
    if (!mem) return CUDA_ERROR_OUT_OF_MEMORY;
    if (!insert_block((uint64_t)mem, n, kind, c->device, fd, 0)) abort(); /* fresh mappings never overlap */
    *p = (CUdeviceptr)mem;
    return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
    ENTER(cuMemAlloc_v2);
    RET(alloc_block(p, n, K_DEVICE));
}

CUresult cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned flags) {
    ENTER(cuMemAllocManaged);
    if (flags != 1 && flags != 2) RET(CUDA_ERROR_INVALID_VALUE); /* CU_MEM_ATTACH_GLOBAL or _HOST */
    RET(alloc_block(p, n, K_MANAGED));
}

CUresult cuMemFree_v2(CUdeviceptr p) {
    ENTER(cuMemFree_v2);
    CUresult err = CUDA_SUCCESS;
    if (!fc_current(&err)) RET(err);
    struct fc_block b;
    if (!remove_block(p, 1u << K_DEVICE | 1u << K_MANAGED, 0, &b)) {
        fc_warn("cuMemFree(%#llx): not the start of a live device or managed block", (unsigned long long)p);
        RET(CUDA_ERROR_INVALID_VALUE);
    }
    check_unused(&b, "cuMemFree");
    unmap_block(&b);
    RET(CUDA_SUCCESS);
}

CUresult cuMemHostAlloc(void **p, size_t n, unsigned flags) {
    ENTER(cuMemHostAlloc);
    CUresult err = CUDA_SUCCESS;
    struct fc_ctx *c = fc_current(&err);
    if (!c) RET(err);
    if (!p || n == 0 || (flags & ~7u)) RET(CUDA_ERROR_INVALID_VALUE);
    void *mem = map_block(n, NULL);
    if (!mem) RET(CUDA_ERROR_OUT_OF_MEMORY);
    if (!insert_block((uint64_t)mem, n, K_HOST_ALLOC, c->device, -1, 0)) abort();
    *p = mem;
    RET(CUDA_SUCCESS);
}

CUresult cuMemFreeHost(void *p) {
    ENTER(cuMemFreeHost);
    CUresult err = CUDA_SUCCESS;
    if (!fc_current(&err)) RET(err);
    struct fc_block b;
    if (!remove_block((uint64_t)p, 1u << K_HOST_ALLOC, 0, &b)) {
        fc_warn("cuMemFreeHost(%p): not the start of a live cuMemHostAlloc block", p);
        RET(CUDA_ERROR_INVALID_VALUE);
    }
    check_unused(&b, "cuMemFreeHost");
    unmap_block(&b);
    RET(CUDA_SUCCESS);
}

CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned flags) {
    ENTER(cuMemHostRegister_v2);
    CUresult err = CUDA_SUCCESS;
    struct fc_ctx *c = fc_current(&err);
    if (!c) RET(err);
    if (!p || n == 0 || (flags & ~15u)) RET(CUDA_ERROR_INVALID_VALUE);
    if (!insert_block((uint64_t)p, n, K_REGISTERED, c->device, -1, 0)) RET(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    RET(CUDA_SUCCESS);
}

CUresult cuMemHostUnregister(void *p) {
    ENTER(cuMemHostUnregister);
    CUresult err = CUDA_SUCCESS;
    if (!fc_current(&err)) RET(err);
    struct fc_block b;
    if (!remove_block((uint64_t)p, 1u << K_REGISTERED, 0, &b)) RET(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    check_unused(&b, "cuMemHostUnregister");
    RET(CUDA_SUCCESS);
}

CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *d, void *p, unsigned flags) {
    ENTER(cuMemHostGetDevicePointer_v2);
    CUresult err = CUDA_SUCCESS;
    if (!fc_current(&err)) RET(err);
    struct fc_block b;
    if (!d || flags != 0 || !fc_block_at((uint64_t)p, &b) || (b.kind != K_HOST_ALLOC && b.kind != K_REGISTERED))
        RET(CUDA_ERROR_INVALID_VALUE);
    *d = (CUdeviceptr)p; /* unified addressing: the same address */
    RET(CUDA_SUCCESS);
}

CUresult cuPointerGetAttributes(unsigned n, int *attrs, void **data, CUdeviceptr p) {
    ENTER(cuPointerGetAttributes);
    if (fc_cfg.query_needs_ctx) {
        CUresult err = CUDA_SUCCESS;
        if (!fc_current(&err)) RET(err);
    }
    if (!attrs || !data) RET(CUDA_ERROR_INVALID_VALUE);
    struct fc_block b;
    int known = fc_block_at(p, &b);
    for (unsigned i = 0; i < n; i++) {
        if (!data[i]) RET(CUDA_ERROR_INVALID_VALUE);
        switch (attrs[i]) {
        case 2: /* MEMORY_TYPE, a 4-byte CUmemorytype: 0 when unknown */
            *(unsigned *)data[i] = !known ? 0 : (b.kind == K_DEVICE || b.kind == K_MANAGED) ? 2 /* DEVICE */ : 1 /* HOST */;
            break;
        case 8: /* IS_MANAGED, a one-byte bool */
            *(unsigned char *)data[i] = known && b.kind == K_MANAGED;
            break;
        case 7: /* BUFFER_ID, an unsigned long long: the block's id, unique in this process */
            *(unsigned long long *)data[i] = known ? b.id : 0;
            break;
        case 9: /* DEVICE_ORDINAL, an int */
            *(int *)data[i] = known ? b.device : -2;
            break;
        default: /* the fake knows only the attributes ferrocoll asks for */
            RET(CUDA_ERROR_INVALID_VALUE);
        }
    }
    RET(CUDA_SUCCESS);
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr p) {
    ENTER(cuMemGetAddressRange_v2);
    CUresult err = CUDA_SUCCESS;
    if (!fc_current(&err)) RET(err);
    struct fc_block b;
    if (!fc_block_at(p, &b) || (b.kind != K_DEVICE && b.kind != K_MANAGED)) RET(CUDA_ERROR_NOT_FOUND);
    if (base) *base = b.base;
    if (size) *size = b.size;
    RET(CUDA_SUCCESS);
}

/* ---- for ipc.c: a peer's allocation mapped here ---- */

int fc_insert_ipc_block(uint64_t base, uint64_t size, int device) {
    return insert_block(base, size, K_DEVICE, device, -1, 1);
}

int fc_close_ipc_block(uint64_t base) {
    struct fc_block b;
    if (!remove_block(base, 1u << K_DEVICE, 1, &b)) return 0;
    check_unused(&b, "cuIpcCloseMemHandle");
    unmap_block(&b);
    return 1;
}

/* ---- copies and memsets ---- */

static int overlaps(uint64_t a, uint64_t b, uint64_t n) { return a < b + n && b < a + n; }

/* Queue a copy on stream handle h and, if `sync`, wait for it. */
static CUresult copy(uint64_t dst, uint64_t src, size_t n, CUstream h, int sync) {
    CUresult err = CUDA_SUCCESS;
    if (!fc_current(&err)) return err;
    struct fc_stream *s = fc_stream_of(h, &err);
    if (!s) return err;
    if (n == 0) return CUDA_SUCCESS;
    if (!dst || !src) return CUDA_ERROR_INVALID_VALUE;
    struct fc_op *op = fc_op_new(OP_COPY);
    op->a = dst, op->b = src, op->c = n;
    if (!fc_op_range(op, dst, n, 1) || !fc_op_range(op, src, n, 1)) {
        free(op);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (overlaps(dst, src, n)) FC_ADD(fc_n.overlapping_copies, 1);
    if (!sync && fc_stream_is_default(s)) FC_ADD(fc_n.async_default_stream_copies, 1);
    uint64_t seq = fc_enqueue(s, op);
    if (sync) fc_wait_seq(s, seq);
    return __atomic_load_n(&fc_stream_ctx(s)->sticky, __ATOMIC_ACQUIRE);
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
    ENTER(cuMemcpyAsync);
    RET(copy(dst, src, n, s, 0));
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
    ENTER(cuMemcpyHtoD_v2);
    RET(copy(dst, (uint64_t)src, n, NULL, 1));
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
    ENTER(cuMemcpyDtoH_v2);
    RET(copy((uint64_t)dst, src, n, NULL, 1));
}

/* Whether host memory [addr, addr + n) is pageable (neither cuMemHostAlloc'd
 * nor registered). CUDA runs an "async" copy between the device and pageable
 * memory synchronously: it returns only when the stream has reached and
 * done it (a thread that must release the stream first then waits forever,
 * as on a GPU). */
static int pageable(uint64_t addr, size_t n) {
    struct fc_block b;
    return !fc_block_holding(addr, n, &b) || (b.kind != K_HOST_ALLOC && b.kind != K_REGISTERED);
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s) {
    ENTER(cuMemcpyHtoDAsync_v2);
    RET(copy(dst, (uint64_t)src, n, s, pageable((uint64_t)src, n)));
}

CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s) {
    ENTER(cuMemcpyDtoHAsync_v2);
    RET(copy((uint64_t)dst, src, n, s, pageable((uint64_t)dst, n)));
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
    ENTER(cuMemcpyDtoDAsync_v2);
    RET(copy(dst, src, n, s, 0));
}

static CUresult memset_async(uint64_t dst, uint64_t value, size_t count, unsigned width, CUstream h) {
    CUresult err = CUDA_SUCCESS;
    if (!fc_current(&err)) return err;
    struct fc_stream *s = fc_stream_of(h, &err);
    if (!s) return err;
    if (count == 0) return CUDA_SUCCESS;
    if (dst % width) return CUDA_ERROR_INVALID_VALUE;
    struct fc_op *op = fc_op_new(width == 4 ? OP_MEMSET32 : OP_MEMSET8);
    op->a = dst, op->b = value, op->c = count;
    if (!fc_op_range(op, dst, (uint64_t)count * width, 0)) {
        free(op);
        return CUDA_ERROR_INVALID_VALUE;
    }
    fc_enqueue(s, op);
    return CUDA_SUCCESS;
}

CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
    ENTER(cuMemsetD8Async);
    RET(memset_async(dst, v, n, 1, s));
}

CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned v, size_t n, CUstream s) {
    ENTER(cuMemsetD32Async);
    RET(memset_async(dst, v, n, 4, s));
}
