/* More CPU-bound threads than CPUs (argv[2], default 2 per online CPU):
 * each spins in its own loop, so the threads take turns on the CPUs and
 * the program is starved by itself. */
#include "common.h"
#include <pthread.h>
#include <unistd.h>

static double end;
volatile unsigned long sink;

__attribute__((noinline)) static unsigned long turn_loop(unsigned long x) {
    for (int i = 0; i < 200000; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
    return x;
}

static void *spinner(void *arg) {
    unsigned long x = (unsigned long)arg;
    while (now_s() < end) x = turn_loop(x);
    sink = x;
    return 0;
}

int main(int argc, char **argv) {
    end = now_s() + run_for(argc, argv);
    long n = argc > 2 ? atol(argv[2]) : 2 * sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1 || n > 64) n = 4;
    pthread_t t[64];
    for (long i = 0; i < n; i++) pthread_create(&t[i], 0, spinner, (void *)i);
    for (long i = 0; i < n; i++) pthread_join(t[i], 0);
    return 0;
}
