/* fake libcuda: CUDA IPC across processes. Device memory is a shared
 * mapping of a memfd (memory.c) whose fd stays open while the block lives;
 * the 64-byte handle says where another process finds it:
 * /proc/<pid>/fd/<fd>, checked to still be the same memfd (its name carries
 * the exporter's pid and a serial) before it is mapped. Opening needs the
 * right to read the exporter's /proc/<pid>/fd (same user, dumpable process),
 * which the tests' processes have. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake_cuda.h"

#define FC_IPC_MAGIC "fcIPCv1"

/* What the handle's 64 bytes hold. */
struct fc_ipc {
    char magic[8];
    int32_t pid, fd;
    uint64_t size, block_id, serial;
    int32_t device;
};
_Static_assert(sizeof(struct fc_ipc) <= sizeof(CUipcMemHandle), "the fake's IPC handle fits in 64 bytes");

/* The pid and serial in the name of the memfd that `link` (the target of a
 * /proc/<pid>/fd/<fd> link) names; 0 if it is no memfd of the fake. */
static int memfd_of(const char *link, int *pid, unsigned long long *serial) {
    return sscanf(link, "/memfd:fake-cuda-%d-%llu", pid, serial) == 2;
}

static int read_link(const char *path, char *out, size_t n) {
    ssize_t len = readlink(path, out, n - 1);
    if (len < 0) return 0;
    out[len] = 0;
    return 1;
}

CUresult cuIpcGetMemHandle(CUipcMemHandle *handle, CUdeviceptr p) {
    ENTER(cuIpcGetMemHandle);
    CUresult err = CUDA_SUCCESS;
    if (!fc_current(&err)) RET(err);
    struct fc_block b;
    /* Only the base of a cuMemAlloc block of this process, as in CUDA. */
    if (!handle || !fc_block_at(p, &b) || b.base != p || b.kind != K_DEVICE || b.ipc || b.fd < 0)
        RET(CUDA_ERROR_INVALID_VALUE);
    char path[64], link[256];
    snprintf(path, sizeof path, "/proc/self/fd/%d", b.fd);
    int pid;
    unsigned long long serial;
    if (!read_link(path, link, sizeof link) || !memfd_of(link, &pid, &serial)) {
        fc_warn("cuIpcGetMemHandle(%#llx): fd %d is not the block's memfd (%s)", (unsigned long long)p, b.fd, link);
        RET(CUDA_ERROR_UNKNOWN);
    }
    struct fc_ipc h = {.pid = (int32_t)getpid(), .fd = b.fd, .size = b.size, .block_id = b.id, .serial = serial,
                       .device = b.device};
    memcpy(h.magic, FC_IPC_MAGIC, sizeof h.magic);
    memset(handle, 0, sizeof *handle);
    memcpy(handle->reserved, &h, sizeof h);
    FC_ADD(fc_n.ipc_exported, 1);
    RET(CUDA_SUCCESS);
}

CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *p, CUipcMemHandle handle, unsigned flags) {
    ENTER(cuIpcOpenMemHandle_v2);
    CUresult err = CUDA_SUCCESS;
    if (!fc_current(&err)) RET(err);
    struct fc_ipc h;
    memcpy(&h, handle.reserved, sizeof h);
    if (!p || flags != 1 /* CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS, the only flag */ ||
        memcmp(h.magic, FC_IPC_MAGIC, sizeof h.magic) != 0 || h.size == 0)
        RET(CUDA_ERROR_INVALID_VALUE);
    /* The real driver refuses a handle of this process with "invalid device
     * context" (CUDA_ERROR_INVALID_CONTEXT: UCX logs exactly that for a
     * same-process open, openucx/ucx pull request 11603). */
    if (h.pid == (int32_t)getpid()) RET(CUDA_ERROR_INVALID_CONTEXT);
    char path[64], link[256];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)h.pid, (int)h.fd);
    int pid;
    unsigned long long serial;
    if (!read_link(path, link, sizeof link) || !memfd_of(link, &pid, &serial) || pid != h.pid ||
        serial != h.serial) {
        /* The exporter exited, or freed the block (its fd closed, maybe reused). */
        RET(CUDA_ERROR_INVALID_HANDLE);
    }
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        fc_warn("cuIpcOpenMemHandle: open %s: %m", path);
        RET(CUDA_ERROR_INVALID_HANDLE);
    }
    struct stat st;
    size_t len = fc_mapping_len(h.size);
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_size < len) {
        close(fd);
        RET(CUDA_ERROR_INVALID_HANDLE);
    }
    void *mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    close(fd); /* the mapping keeps the pages */
    if (mem == MAP_FAILED) RET(CUDA_ERROR_OUT_OF_MEMORY);
    if (!fc_insert_ipc_block((uint64_t)mem, h.size, h.device)) abort(); /* fresh mappings never overlap */
    FC_ADD(fc_n.ipc_opened, 1);
    *p = (CUdeviceptr)mem;
    RET(CUDA_SUCCESS);
}

CUresult cuIpcCloseMemHandle(CUdeviceptr p) {
    ENTER(cuIpcCloseMemHandle);
    CUresult err = CUDA_SUCCESS;
    if (!fc_current(&err)) RET(err);
    if (!fc_close_ipc_block(p)) {
        fc_warn("cuIpcCloseMemHandle(%#llx): not an address cuIpcOpenMemHandle returned", (unsigned long long)p);
        RET(CUDA_ERROR_INVALID_VALUE);
    }
    FC_ADD(fc_n.ipc_closed, 1);
    RET(CUDA_SUCCESS);
}
