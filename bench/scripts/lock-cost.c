/* What a locked read-modify-write costs on this CPU, against a plain load
 * and store of the same word: ten million of each after a store to
 * another line (as a post stores before its team's sequence number),
 * three times, in time-stamp-counter ticks per iteration. x86-64 only.
 *
 *   gcc -O2 bench/scripts/lock-cost.c -o /tmp/lock-cost && /tmp/lock-cost
 *
 * For BENCHMARKS.md, twenty-sixth round ("Locked instructions are not the floor").
 */
#include <stdint.h>
#include <stdio.h>
#include <x86intrin.h>

static volatile uint64_t word, other[8];

int main(void)
{
    const int n = 10000000;
    for (int rep = 0; rep < 3; rep++) {
        unsigned long long t0 = __rdtsc();
        for (int i = 0; i < n; i++) {
            other[i & 7] = (uint64_t)i;
            __atomic_fetch_add(&word, 1, __ATOMIC_RELAXED);
        }
        unsigned long long t1 = __rdtsc();
        for (int i = 0; i < n; i++) {
            other[i & 7]   = (uint64_t)i;
            uint64_t value = __atomic_load_n(&word, __ATOMIC_RELAXED);
            __atomic_store_n(&word, value + 1, __ATOMIC_RELAXED);
        }
        unsigned long long t2 = __rdtsc();
        printf("locked add: %.1f ticks/iteration, plain load and store: %.1f\n", (double)(t1 - t0) / n,
               (double)(t2 - t1) / n);
    }
    return 0;
}
