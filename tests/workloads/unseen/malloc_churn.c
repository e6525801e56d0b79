/* Written after the thresholds were frozen (set 1). expect: diagnose.page-fault-churn
 * malloc a big block, fill it,
 * free it; again and again.
 *
 * Corrected after its first runs (the rules untouched): as first written it
 * malloc'd 8 MiB and read back one byte, so gcc -O2 dropped the memset (the
 * byte read is known) and glibc's dynamic mmap threshold moved the block into
 * the heap after the first free: perf stat counted 60 minor faults in 2 s,
 * no churn at all. 64 MiB is above glibc's largest dynamic threshold (32 MiB
 * on 64-bit), so every block is a fresh mmap; the empty asm keeps the fill. */
#include "../common.h"
#include <string.h>

volatile char sink;

int main(int argc, char **argv) {
    double end = now_s() + run_for(argc, argv);
    size_t len = (size_t)64 << 20;
    while (now_s() < end) {
        char *p = malloc(len);
        if (!p) return 1;
        memset(p, 1, len);
        __asm__ volatile("" : : "r"(p) : "memory");
        sink = p[12345];
        free(p);
    }
    return 0;
}
