/* Map 64 MiB, touch every page, unmap; again and again. */
#include "common.h"
#include <sys/mman.h>

int main(int argc, char **argv) {
    double end = now_s() + run_for(argc, argv);
    size_t len = 64 << 20;
    while (now_s() < end) {
        char *p = mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return 1;
        for (size_t i = 0; i < len; i += 4096) p[i] = 1;
        munmap(p, len);
    }
    return 0;
}
