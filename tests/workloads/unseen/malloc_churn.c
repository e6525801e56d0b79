/* Written after the thresholds were frozen. malloc 8 MiB (past glibc's
 * mmap threshold), fill it, free it; again and again. */
#include "../common.h"
#include <string.h>

volatile char sink;

int main(int argc, char **argv) {
    double end = now_s() + run_for(argc, argv);
    while (now_s() < end) {
        char *p = malloc(8 << 20);
        if (!p) return 1;
        memset(p, 1, 8 << 20);
        sink = p[12345];
        free(p);
    }
    return 0;
}
