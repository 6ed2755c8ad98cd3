/* What a small payload's cache lines cost between two cores: two threads
 * (CPU 0 and 1) exchange a P-byte payload through per-parity regions, as a
 * 2-rank allgather does through the shm TL's inline regions, timed as the
 * perftest times (an untimed barrier between iterations, two on every
 * other one). For BENCHMARKS.md, "eleventh round".
 *
 * Layouts:
 *   0: the shm TL's until the eleventh round: tag at byte 0, signature at
 *      8, payload from 32; the reader polls the tag, checks the signature,
 *      copies;
 *   1: payload first, the tag in the 8 bytes after it (the reader polls
 *      the payload's last line);
 *   2: per 64-byte line 56 bytes of payload and the epoch in its last 8
 *      (NCCL's LL128 idea): the reader polls every line of the payload;
 *   3: the shm TL's since the eleventh round: a 32-byte head (tag,
 *      signature) ends the region, at byte 1120; the payload ends where it
 *      begins, its start rounded down to 16 bytes.
 *
 *   gcc -O2 -march=native -pthread -o /tmp/inline-lines bench/scripts/inline-lines.c
 *   for p in 8 32 40 64 248 1000; do for l in 0 1 2 3; do /tmp/inline-lines $l $p; done; done
 *   for p in 8 64 256 512 1024 2048 4096; do /tmp/inline-lines 0 $p; done   (twenty-second round)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REGION 4352 /* a 32-byte head and 4 KiB of payload (the inline regions since the eighteenth round), in whole lines */
static _Alignas(128) unsigned char regions[2][2][REGION]; /* [rank][parity] */
static int layout, payload, iters;
static pthread_barrier_t start;
static double mean_ns[2];
static _Atomic uint64_t arrived[2][16]; /* a line each */
static volatile unsigned sink; /* what was read is used: the copies stay */

static uint64_t ld(const void *p) { return atomic_load_explicit((_Atomic uint64_t *)p, memory_order_acquire); }
static void st(void *p, uint64_t v) { atomic_store_explicit((_Atomic uint64_t *)p, v, memory_order_release); }
static void relax(void) { __builtin_ia32_pause(); }

static int lines(void) { return (payload + 55) / 56; }
static int line_bytes(int l) { int n = payload - l * 56; return n > 56 ? 56 : n; }
static size_t tag_at(void) { return (size_t)(payload + 7) / 8 * 8; }
#define HEAD 1120
static size_t ends_at_head(void) { return (size_t)(HEAD - payload) & ~(size_t)15; }

static void publish(unsigned char *r, const unsigned char *src, uint64_t e) {
  if (layout == 0) {
    memcpy(r + 32, src, payload);
    st(r + 8, e); /* the signature (here: the epoch) */
    st(r, e);
  } else if (layout == 1) {
    memcpy(r, src, payload);
    st(r + tag_at(), e);
  } else if (layout == 3) {
    memcpy(r + ends_at_head(), src, payload);
    st(r + HEAD + 8, e);
    st(r + HEAD, e);
  } else {
    for (int l = 0; l < lines(); l++) {
      memcpy(r + l * 64, src + l * 56, line_bytes(l));
      st(r + l * 64 + 56, e);
    }
  }
}

static void take(const unsigned char *r, unsigned char *dst, uint64_t e) {
  if (layout == 0) {
    while (ld(r) < e) relax();
    if (ld(r + 8) != e) abort();
    memcpy(dst, r + 32, payload);
  } else if (layout == 1) {
    while (ld(r + tag_at()) < e) relax();
    memcpy(dst, r, payload);
  } else if (layout == 3) {
    while (ld(r + HEAD) < e) relax();
    if (ld(r + HEAD + 8) != e) abort();
    memcpy(dst, r + ends_at_head(), payload);
  } else {
    for (;;) {
      int all = 1;
      for (int l = 0; l < lines(); l++) all &= ld(r + l * 64 + 56) >= e;
      if (all) break;
      relax();
    }
    for (int l = 0; l < lines(); l++) memcpy(dst + l * 56, r + l * 64, line_bytes(l));
  }
}

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static void barrier(int me, uint64_t *k) {
  (*k)++;
  atomic_store(&arrived[me][0], *k);
  while (atomic_load(&arrived[1 - me][0]) < *k) relax();
}

static void *rank(void *arg) {
  int me = (int)(intptr_t)arg;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(me, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  unsigned char src[REGION], dst[REGION];
  memset(src, me + 1, sizeof src);
  pthread_barrier_wait(&start);
  double total = 0;
  uint64_t k = 0;
  for (int i = 1; i <= iters; i++) {
    double t0 = now_ns();
    publish(regions[me][i % 2], src, i);
    take(regions[1 - me][i % 2], dst, i);
    sink += dst[payload - 1];
    total += now_ns() - t0;
    barrier(me, &k);
    if (i % 2) barrier(me, &k);
  }
  mean_ns[me] = total / iters;
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s LAYOUT(0-3) PAYLOAD_BYTES [ITERATIONS]\n", argv[0]);
    return 2;
  }
  layout = atoi(argv[1]);
  payload = atoi(argv[2]);
  iters = argc > 3 ? atoi(argv[3]) : 200000;
  /* the most each layout fits in a region */
  static const int most[4] = {4096, REGION - 8, REGION / 64 * 56, HEAD - 32};
  if (layout < 0 || layout > 3 || payload < 1 || payload > most[layout] || iters < 1) {
    fprintf(stderr, "layout 0-3, payload 1 to 4096 (layout 0), %d, %d or %d (layout 3) bytes, iterations > 0\n",
            most[1], most[2], most[3]);
    return 2;
  }
  pthread_barrier_init(&start, NULL, 2);
  pthread_t t[2];
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, rank, (void *)(intptr_t)i);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  printf("layout %d, %4d bytes: %.0f ns\n", layout, payload, (mean_ns[0] + mean_ns[1]) / 2);
  return 0;
}
