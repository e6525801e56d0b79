/* Spin on sched_yield() waiting for a flag nobody sets in time. */
#include "common.h"
#include <sched.h>

volatile int ready;

int main(int argc, char **argv) {
    double end = now_s() + run_for(argc, argv);
    while (!ready) {
        for (int i = 0; i < 64; i++) sched_yield();
        if (now_s() >= end) break;
    }
    return 0;
}
