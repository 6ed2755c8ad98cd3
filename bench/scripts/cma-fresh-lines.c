/* How fast one process reads another's buffer: process_vm_readv (CMA, what
 * the shm TL's single copy does) against memcpy out of a shared mapping
 * (what the reader of a staged round does), with the writer rewriting the
 * data before every read (fresh = 1: its lines are Modified in the
 * writer's cache) or writing it once (fresh = 0). Writer on CPU 0, reader
 * on CPU 1. For BENCHMARKS.md, "tenth round".
 *
 *   gcc -O2 -Wall -o /tmp/cma-fresh-lines bench/scripts/cma-fresh-lines.c
 *   for n in 16384 65536 262144 1048576; do
 *     for f in 0 1; do /tmp/cma-fresh-lines $n $f; done
 *   done
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { ITERS = 2000 };

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set);
}

static void wait_for(_Atomic long *counter, long value) {
    while (atomic_load(counter) < value) {
    }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s BYTES FRESH(0|1)\n", argv[0]);
        return 2;
    }
    size_t n = strtoul(argv[1], NULL, 10);
    int fresh = atoi(argv[2]);
    char *src = aligned_alloc(4096, n);
    memset(src, 1, n);
    char *shared = mmap(NULL, n + 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    memset(shared, 1, n);
    /* Step 2i-1: src is ready for CMA; step 2i: shared is ready for memcpy. */
    _Atomic long *ready = (_Atomic long *)(shared + n);
    _Atomic long *done = ready + 8;
    atomic_store(ready, 0);
    atomic_store(done, 0);
    pid_t writer = getpid();

    if (fork() == 0) {
        pin(1);
        char *dst = aligned_alloc(4096, n);
        memset(dst, 0, n);
        double cma = 0, copy = 0;
        for (long i = 1; i <= ITERS; i++) {
            wait_for(ready, 2 * i - 1);
            double t0 = now_us();
            struct iovec local = {dst, n}, remote = {src, n};
            if (process_vm_readv(writer, &local, 1, &remote, 1, 0) != (ssize_t)n) {
                perror("process_vm_readv");
                exit(1);
            }
            cma += now_us() - t0;
            atomic_store(done, 2 * i - 1);
            wait_for(ready, 2 * i);
            t0 = now_us();
            memcpy(dst, shared, n);
            copy += now_us() - t0;
            atomic_store(done, 2 * i);
        }
        printf("n=%zu fresh=%d cma %.2f us, memcpy from shared memory %.2f us\n", n, fresh, cma / ITERS,
               copy / ITERS);
        exit(0);
    }
    pin(0);
    for (long i = 1; i <= ITERS; i++) {
        if (fresh) {
            memset(src, (int)i, n);
        }
        atomic_store(ready, 2 * i - 1);
        wait_for(done, 2 * i - 1);
        if (fresh) {
            memset(shared, (int)i, n);
        }
        atomic_store(ready, 2 * i);
        wait_for(done, 2 * i);
    }
    wait(NULL);
    return 0;
}
