/* One thread spins in spin_loop for argv[1] seconds, then prints the share
 * of one CPU it got by its own account (getrusage user+system over its wall
 * time): "spin cpu_pct=97.3 wall_s=2.00". Measures an observer's cost. */
#include "common.h"
#include <stdio.h>
#include <sys/resource.h>

volatile unsigned long sink;

__attribute__((noinline)) static unsigned long spin_loop(unsigned long x) {
    for (int i = 0; i < 200000; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
    return x;
}

int main(int argc, char **argv) {
    double t0 = now_s(), end = t0 + run_for(argc, argv);
    unsigned long x = 1;
    while (now_s() < end) x = spin_loop(x);
    sink = x;
    double wall = now_s() - t0;
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    double cpu = r.ru_utime.tv_sec + r.ru_utime.tv_usec * 1e-6 + r.ru_stime.tv_sec + r.ru_stime.tv_usec * 1e-6;
    printf("spin cpu_pct=%.1f wall_s=%.2f\n", cpu / wall * 100.0, wall);
    return 0;
}
