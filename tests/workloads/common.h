/* Shared by the known-bottleneck workloads of tests/diagnose_explain.rs:
 * run for argv[1] seconds (default 2). */
#include <stdlib.h>
#include <time.h>

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static double run_for(int argc, char **argv) {
    return argc > 1 ? atof(argv[1]) : 2.0;
}
