/* Written after the thresholds were frozen (set 2, 2026-11-25). expect: diagnose.cpu-hotspot
 * A file verifier: most time in a byte-wise checksum, some in formatting a
 * report line; no I/O in the loop (the buffer is in memory). */
#include "../common.h"
#include <stdio.h>
#include <string.h>

static unsigned char buf[1 << 16];

__attribute__((noinline)) static unsigned sum_block(const unsigned char *p, size_t n) {
    unsigned a = 1, b = 0;
    for (size_t i = 0; i < n; i++) {
        a = (a + p[i]) % 65521;
        b = (b + a) % 65521;
    }
    return b << 16 | a;
}

__attribute__((noinline)) static void format_report(char *out, size_t cap, unsigned s, unsigned long n) {
    for (int k = 0; k < 40; k++)
        snprintf(out, cap, "block %lu checksum %08x ok %d", n, s ^ (unsigned)k, k);
}

int main(int argc, char **argv) {
    double end = now_s() + run_for(argc, argv);
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (unsigned char)(i * 131 + 7);
    char line[128];
    unsigned long n = 0;
    volatile unsigned sink = 0;
    while (now_s() < end) {
        unsigned s = sum_block(buf, sizeof buf);
        format_report(line, sizeof line, s, n++);
        sink += s + (unsigned)strlen(line);
    }
    return sink == 42;
}
