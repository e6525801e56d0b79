/* Written after the thresholds were frozen (set 2). expect: diagnose.page-fault-churn
 * Builds a 24 MiB array by realloc doubling from 64 KiB, fills it, frees it,
 * again and again: every round maps and zeroes fresh pages. */
#include "../common.h"
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) static size_t build_array(void) {
    size_t cap = 64 << 10, len = 0;
    unsigned char *a = malloc(cap);
    while (len < (24u << 20)) {
        if (len == cap) { cap *= 2; a = realloc(a, cap); }
        size_t chunk = cap - len;
        memset(a + len, (int)len, chunk);
        len += chunk;
    }
    size_t x = a[len / 3];
    free(a);
    return x;
}

int main(int argc, char **argv) {
    double end = now_s() + run_for(argc, argv);
    volatile size_t sink = 0;
    while (now_s() < end) sink += build_array();
    return sink == 1;
}
