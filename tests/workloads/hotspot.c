/* CPU: about 80% of the time in hot_loop, 20% in warm_loop. */
#include "common.h"
#include <stdio.h>

volatile unsigned long sink;

__attribute__((noinline)) static unsigned long hot_loop(unsigned long x) {
    for (int i = 0; i < 400000; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
    return x;
}

__attribute__((noinline)) static unsigned long warm_loop(unsigned long x) {
    for (int i = 0; i < 100000; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
    return x;
}

int main(int argc, char **argv) {
    double end = now_s() + run_for(argc, argv);
    unsigned long x = 1;
    while (now_s() < end) {
        x = hot_loop(x);
        x = warm_loop(x);
    }
    sink = x;
    return 0;
}
