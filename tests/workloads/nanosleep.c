/* A loop of 1 ms sleeps with a little work between them. */
#include "common.h"

volatile unsigned long sink;

int main(int argc, char **argv) {
    double end = now_s() + run_for(argc, argv);
    struct timespec ms = {0, 1000000};
    while (now_s() < end) {
        for (int i = 0; i < 1000; i++) sink += i;
        nanosleep(&ms, 0);
    }
    return 0;
}
