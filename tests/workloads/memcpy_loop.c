/* One thread copies a 256 KiB buffer back and forth with memcpy (the C
 * library's) from copy_blocks: its CPU goes to memcpy, called by
 * copy_blocks. */
#include "common.h"
#include <string.h>

static char a[256 * 1024], b[256 * 1024];
volatile char sink;

__attribute__((noinline)) static void copy_blocks(void) {
    memcpy(b, a, sizeof a);
    memcpy(a, b, sizeof a);
    /* No tail call: memcpy's return address must be copy_blocks, not main. */
    __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv) {
    double end = now_s() + run_for(argc, argv);
    memset(a, 1, sizeof a);
    while (now_s() < end)
        for (int i = 0; i < 16; i++) copy_blocks();
    sink = a[7];
    return 0;
}
